//! Point as-of lookups on a key with 10, 1,000 and 100,000 versions, at past and current
//! system times. `ASOF_BENCH_HOT_EVENTS` sets `StoreOptions::hot_events_per_key`.

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[path = "support/workload.rs"]
mod workload;

use asof::{Store, StoredAs, Value};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use rand::{Rng, SeedableRng};

/// One key with `versions` versions (in-order events, a few late ones), for point lookups.
fn long_key_store(versions: usize) -> (tempfile::TempDir, Store) {
    use arrow::array::*;
    let dir = tempfile::tempdir().unwrap();
    let store = workload::open(dir.path());
    store
        .create_flow(workload::flow(StoredAs::Bitemporal))
        .unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let per_batch = 10_000;
    let mut i = 0;
    while i < versions {
        let n = per_batch.min(versions - i);
        let t: Vec<i64> = (i..i + n).map(|j| j as i64 * workload::STEP_US).collect();
        let late: Vec<i64> = t
            .iter()
            .map(|&t| {
                if rng.gen_bool(0.1) {
                    t - workload::STEP_US / 2
                } else {
                    t
                }
            })
            .collect();
        let cols: Vec<ArrayRef> = vec![
            std::sync::Arc::new(Int64Array::from(vec![1i64; n])),
            std::sync::Arc::new(TimestampMicrosecondArray::from(late)),
            std::sync::Arc::new(TimestampMicrosecondArray::from(t)),
            std::sync::Arc::new(StringArray::from(vec!["U"; n])),
            std::sync::Arc::new(Int64Array::from(
                (i..i + n).map(|j| j as i64).collect::<Vec<_>>(),
            )),
            std::sync::Arc::new(Float64Array::from(vec![1.0; n])),
            std::sync::Arc::new(StringArray::from(vec!["x"; n])),
            std::sync::Arc::new(Int64Array::from(vec![1i64; n])),
            std::sync::Arc::new(StringArray::from(vec!["y"; n])),
            std::sync::Arc::new(BooleanArray::from(vec![true; n])),
        ];
        store
            .apply(
                "bench_cdc",
                &RecordBatch::try_new(workload::schema(), cols).unwrap(),
            )
            .unwrap();
        i += n;
    }
    (dir, store)
}

fn point_lookup(c: &mut Criterion) {
    workload::tune_allocator();
    let mut g = c.benchmark_group("point_lookup");
    for versions in [10usize, 1_000, 100_000] {
        let (_dir, store) = long_key_store(versions);
        let span = versions as i64 * workload::STEP_US;
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        let queries: Vec<(Value, Value)> = (0..1024)
            .map(|_| {
                let s = rng.gen_range(0..span);
                (Value::Int(rng.gen_range(0..=s)), Value::Int(s))
            })
            .collect();
        let key = [Value::Int(1)];
        // Warm the lazily built index, and check that every query finds its row.
        for (b, s) in &queries {
            assert!(asof::lookup(
                &store,
                "bench",
                &key,
                Some(std::slice::from_ref(b)),
                Some(s)
            )
            .unwrap()
            .is_some());
        }
        let mut i = 0;
        g.bench_function(BenchmarkId::new("past_system_time", versions), |bch| {
            bch.iter(|| {
                let (b, s) = &queries[i % queries.len()];
                i += 1;
                asof::lookup(
                    &store,
                    "bench",
                    &key,
                    Some(std::slice::from_ref(b)),
                    Some(s),
                )
                .unwrap()
            })
        });
        g.bench_function(BenchmarkId::new("current_system_time", versions), |bch| {
            bch.iter(|| {
                let (b, _) = &queries[i % queries.len()];
                i += 1;
                asof::lookup(&store, "bench", &key, Some(std::slice::from_ref(b)), None).unwrap()
            })
        });
    }
    g.finish();
}

criterion_group!(benches, point_lookup);
criterion_main!(benches);
