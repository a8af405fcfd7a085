//! Durable ingest throughput on the workload of the core-engine issue (see `workload.rs`):
//! SCD TYPE 2 and BITEMPORAL. `ASOF_BENCH_EVENTS` shrinks the workload (default 1,000,000);
//! `ASOF_BENCH_HOT_EVENTS` sets `StoreOptions::hot_events_per_key` (huge: no freezing).

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[path = "support/workload.rs"]
mod workload;

use std::time::{Duration, Instant};

use asof::StoredAs;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

fn ingest(c: &mut Criterion) {
    workload::tune_allocator();
    let n = workload::events();
    let batches = workload::batches(n, 10_000, 10_000, 42);
    let mut g = c.benchmark_group("ingest");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(20));
    g.throughput(Throughput::Elements(n as u64));
    for mode in [StoredAs::Scd2, StoredAs::Bitemporal] {
        g.bench_function(BenchmarkId::new(format!("{mode:?}"), n), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let dir = tempfile::tempdir().unwrap();
                    let store = workload::open(dir.path());
                    store.create_flow(workload::flow(mode)).unwrap();
                    let start = Instant::now();
                    for batch in &batches {
                        store.apply("bench_cdc", batch).unwrap();
                    }
                    total += start.elapsed();
                }
                total
            })
        });
    }
    g.finish();
}

criterion_group!(benches, ingest);
criterion_main!(benches);
