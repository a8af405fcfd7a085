//! One late event on a key of 10, 1,000 or 100,000 versions (issue: within 2x of each other),
//! committed alone, durably: late by two versions (inside the key's hot tail) and by 1,000
//! versions (in its frozen pages, or at its first version for a shorter key). Each event comes
//! at a new system time with a new value, so each changes the key's history.

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[path = "support/long_key.rs"]
mod long_key;
#[path = "support/workload.rs"]
mod workload;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};

fn late_event(c: &mut Criterion) {
    workload::tune_allocator();
    let mut g = c.benchmark_group("late_event");
    g.sample_size(10)
        .warm_up_time(std::time::Duration::from_millis(500))
        .measurement_time(std::time::Duration::from_secs(3));
    for versions in [10usize, 1_000, 100_000] {
        let (_dir, store) = long_key::long_key_store(versions);
        // After every event of the key, on system time.
        let mut now = versions as i64 * workload::STEP_US;
        for (name, back) in [("2_back", 2usize), ("1000_back", 1_000)] {
            // A key of 10 versions takes the second at its first version.
            let back = back.min(versions);
            // Between two versions' business times, clear of the half-step late ones.
            let business = (versions - back) as i64 * workload::STEP_US + workload::STEP_US / 4;
            let id = BenchmarkId::new(name, versions);
            g.bench_function(id, |bch| {
                bch.iter(|| {
                    now += workload::STEP_US;
                    let event = long_key::upserts(vec![business], vec![now], vec![now]);
                    store.apply("bench_cdc", &event).unwrap()
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, late_event);
criterion_main!(benches);
