//! Full-table scans and as-of scans into Arrow after the workload of the core-engine issue.
//! `ASOF_BENCH_EVENTS` shrinks the workload (default 1,000,000); `ASOF_BENCH_HOT_EVENTS` sets
//! `StoreOptions::hot_events_per_key` (huge: all history in memory, none to decode).

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[path = "support/workload.rs"]
mod workload;

use std::ops::Bound;

use asof::{KeySelection, ScanRequest, Store, StoredAs, TimeSelection, Value};
use criterion::measurement::WallTime;
use criterion::{
    criterion_group, criterion_main, BenchmarkGroup, BenchmarkId, Criterion, Throughput,
};

fn load(mode: StoredAs, batches: &[arrow::array::RecordBatch]) -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = workload::open(dir.path());
    store.create_flow(workload::flow(mode)).unwrap();
    for b in batches {
        store.apply("bench_cdc", b).unwrap();
    }
    (dir, store)
}

/// Runs a scan to the end; the number of rows it returned.
fn scan_rows(store: &Store, req: &ScanRequest) -> usize {
    asof::scan(store, "bench", req)
        .unwrap()
        .map(|b| b.unwrap().num_rows())
        .sum()
}

/// Benchmarks a scan, with the rows it returns as the throughput.
fn bench_rows(
    g: &mut BenchmarkGroup<'_, WallTime>,
    name: String,
    store: &Store,
    req: &ScanRequest,
) {
    let rows = scan_rows(store, req);
    g.throughput(Throughput::Elements(rows as u64));
    g.bench_function(BenchmarkId::new(name, rows), |b| {
        b.iter(|| scan_rows(store, req))
    });
}

fn scans(c: &mut Criterion) {
    workload::tune_allocator();
    let n = workload::events();
    let batches = workload::batches(n, 10_000, 10_000, 42);
    let mut g = c.benchmark_group("scan");
    g.sample_size(10);
    for mode in [StoredAs::Scd2, StoredAs::Bitemporal] {
        let (_dir, store) = load(mode, &batches);
        let rows = store.read("bench", |r| r.live_rows()).unwrap();
        g.throughput(Throughput::Elements(rows));
        g.bench_function(BenchmarkId::new(format!("full_{mode:?}"), rows), |b| {
            b.iter(|| assert_eq!(scan_rows(&store, &ScanRequest::default()) as u64, rows))
        });
        let t = Value::Int((n as i64 / 2) * workload::STEP_US);
        let req = ScanRequest {
            business: TimeSelection::AsOf(vec![t.clone()]),
            system: if mode == StoredAs::Bitemporal {
                TimeSelection::AsOf(vec![t])
            } else {
                TimeSelection::All
            },
            ..Default::default()
        };
        g.bench_function(BenchmarkId::new(format!("as_of_{mode:?}"), rows), |b| {
            b.iter(|| scan_rows(&store, &req))
        });
        // Time travel: the whole table as of the commit half-way through the workload.
        let half = store.read("bench", |r| r.latest_version() / 2).unwrap();
        let old = ScanRequest {
            version: Some(half),
            ..Default::default()
        };
        bench_rows(&mut g, format!("version_as_of_{mode:?}"), &store, &old);
        // A key range (a tenth of the keys): rows read key by key, scattered over the arena.
        let range = ScanRequest {
            keys: KeySelection::Range(
                Bound::Included(vec![Value::Int(0)]),
                Bound::Excluded(vec![Value::Int(1_000)]),
            ),
            ..Default::default()
        };
        bench_rows(&mut g, format!("key_range_{mode:?}"), &store, &range);
    }
    g.finish();
}

criterion_group!(benches, scans);
criterion_main!(benches);
