//! Point as-of lookups on a key with 10, 1,000 and 100,000 versions, at past and current
//! system times, warm (the key's index built), and the first one after the store is opened (the
//! key read from its head and the pages its zone maps admit). `ASOF_BENCH_HOT_EVENTS` sets
//! `StoreOptions::hot_events_per_key`.

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[path = "support/long_key.rs"]
mod long_key;
#[path = "support/workload.rs"]
mod workload;

use asof::Value;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use rand::{Rng, SeedableRng};

fn point_lookup(c: &mut Criterion) {
    workload::tune_allocator();
    let mut g = c.benchmark_group("point_lookup");
    for versions in [10usize, 1_000, 100_000] {
        let (_dir, store) = long_key::long_key_store(versions);
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

/// The first lookup of the key after an open, at a past system time: only the lookup is timed,
/// the open (about 10 ms) is not, so each case is kept short.
fn first_lookup_after_open(c: &mut Criterion) {
    workload::tune_allocator();
    let mut g = c.benchmark_group("point_lookup");
    g.sample_size(10)
        .warm_up_time(std::time::Duration::from_millis(100))
        .measurement_time(std::time::Duration::from_millis(300));
    for versions in [10usize, 1_000, 100_000] {
        let (dir, store) = long_key::long_key_store(versions);
        drop(store);
        let span = versions as i64 * workload::STEP_US;
        let mut rng = rand::rngs::StdRng::seed_from_u64(2);
        let key = [Value::Int(1)];
        g.bench_function(BenchmarkId::new("first_after_open", versions), |bch| {
            bch.iter_custom(|iters| {
                let mut took = std::time::Duration::ZERO;
                for _ in 0..iters {
                    let store = workload::open(dir.path());
                    let s = rng.gen_range(0..span);
                    let (b, s) = (Value::Int(rng.gen_range(0..=s)), Value::Int(s));
                    let start = std::time::Instant::now();
                    let found = asof::lookup(
                        &store,
                        "bench",
                        &key,
                        Some(std::slice::from_ref(&b)),
                        Some(&s),
                    )
                    .unwrap();
                    took += start.elapsed();
                    assert!(found.is_some());
                }
                took
            })
        });
    }
    g.finish();
}

criterion_group!(benches, point_lookup, first_lookup_after_open);
criterion_main!(benches);
