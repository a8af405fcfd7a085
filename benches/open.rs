//! Opening a store: `Store::open` of a bitemporal store holding the workload's events (100k and
//! `ASOF_BENCH_EVENTS`, 1M by default), and the first point as-of lookup after it. An open reads
//! the catalog and the tables' summaries, nothing proportional to history (docs/PERFORMANCE.md,
//! "Opening a store"): the two sizes should open in about the same time.

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[path = "support/workload.rs"]
mod workload;

use asof::{Store, StoredAs, Value};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};

/// A closed store of `events` workload events (bitemporal, 10k keys, commits of 10k events).
fn store_of(events: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let store = workload::open(dir.path());
    store
        .create_flow(workload::flow(StoredAs::Bitemporal))
        .unwrap();
    for b in workload::batch_iter(events, 10_000, 10_000, 42) {
        store.apply("bench_cdc", &b).unwrap();
    }
    dir
}

fn open(c: &mut Criterion) {
    workload::tune_allocator();
    let mut g = c.benchmark_group("open");
    g.sample_size(10);
    for events in [100_000, workload::events()] {
        let dir = store_of(events);
        g.bench_with_input(BenchmarkId::new("store_open", events), &dir, |b, dir| {
            b.iter(|| workload::open(dir.path()))
        });
        g.bench_with_input(
            BenchmarkId::new("open_and_point_lookup", events),
            &dir,
            |b, dir| {
                b.iter(|| {
                    let store: Store = workload::open(dir.path());
                    asof::lookup(&store, "bench", &[Value::Int(17)], None, None).unwrap()
                })
            },
        );
    }
    g.finish();
}

criterion_group!(benches, open);
criterion_main!(benches);
