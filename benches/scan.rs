//! Full-table scans and as-of scans into Arrow after the workload of the core-engine issue.
//! `ASOF_BENCH_EVENTS` shrinks the workload (default 1,000,000).

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[path = "support/workload.rs"]
mod workload;

use std::ops::Bound;

use asof::{KeySelection, ScanRequest, Store, StoredAs, TimeSelection, Value};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

fn events() -> usize {
    std::env::var("ASOF_BENCH_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000)
}

fn load(mode: StoredAs, batches: &[arrow::array::RecordBatch]) -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    store.create_flow(workload::flow(mode)).unwrap();
    for b in batches {
        store.apply("bench_cdc", b).unwrap();
    }
    (dir, store)
}

fn scans(c: &mut Criterion) {
    workload::tune_allocator();
    let n = events();
    let batches = workload::batches(n, 10_000, 10_000, 42);
    let mut g = c.benchmark_group("scan");
    g.sample_size(10);
    for mode in [StoredAs::Scd2, StoredAs::Bitemporal] {
        let (_dir, store) = load(mode, &batches);
        let rows = store.read("bench", |r| r.live_rows()).unwrap();
        g.throughput(Throughput::Elements(rows));
        g.bench_function(BenchmarkId::new(format!("full_{mode:?}"), rows), |b| {
            b.iter(|| {
                let got: usize = asof::scan(&store, "bench", &ScanRequest::default())
                    .unwrap()
                    .map(|b| b.unwrap().num_rows())
                    .sum();
                assert_eq!(got as u64, rows);
            })
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
            b.iter(|| {
                asof::scan(&store, "bench", &req)
                    .unwrap()
                    .map(|b| b.unwrap().num_rows())
                    .sum::<usize>()
            })
        });
        // Time travel: the whole table as of the commit half-way through the workload.
        let half = store.read("bench", |r| r.latest_version() / 2).unwrap();
        let old = ScanRequest {
            version: Some(half),
            ..Default::default()
        };
        let old_rows: usize = asof::scan(&store, "bench", &old)
            .unwrap()
            .map(|b| b.unwrap().num_rows())
            .sum();
        g.throughput(Throughput::Elements(old_rows as u64));
        g.bench_function(
            BenchmarkId::new(format!("version_as_of_{mode:?}"), old_rows),
            |b| {
                b.iter(|| {
                    asof::scan(&store, "bench", &old)
                        .unwrap()
                        .map(|b| b.unwrap().num_rows())
                        .sum::<usize>()
                })
            },
        );
        // A key range (a tenth of the keys): rows read key by key, scattered over the arena.
        let range = ScanRequest {
            keys: KeySelection::Range(
                Bound::Included(vec![Value::Int(0)]),
                Bound::Excluded(vec![Value::Int(1_000)]),
            ),
            ..Default::default()
        };
        let range_rows: usize = asof::scan(&store, "bench", &range)
            .unwrap()
            .map(|b| b.unwrap().num_rows())
            .sum();
        g.throughput(Throughput::Elements(range_rows as u64));
        g.bench_function(
            BenchmarkId::new(format!("key_range_{mode:?}"), range_rows),
            |b| {
                b.iter(|| {
                    asof::scan(&store, "bench", &range)
                        .unwrap()
                        .map(|b| b.unwrap().num_rows())
                        .sum::<usize>()
                })
            },
        );
    }
    g.finish();
}

criterion_group!(benches, scans);
criterion_main!(benches);
