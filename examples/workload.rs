//! Runs the core-engine workload once and reports throughput, peak memory, reopen time, and what
//! VACUUM frees (bytes on disk per stored row version before and after):
//! `cargo run --profile bench --example workload -- [events] [scd2|bitemporal] [hot events per key]`.

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[path = "../benches/support/workload.rs"]
mod workload;

use std::time::Instant;

use asof::{Store, StoredAs};

fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmHWM:")).map(|l| {
                l.split_whitespace()
                    .nth(1)
                    .unwrap_or("0")
                    .parse::<f64>()
                    .unwrap_or(0.0)
            })
        })
        .unwrap_or(0.0)
        / 1024.0
}

/// The store's folder, named like a `TempDir`'s.
struct Dir(std::path::PathBuf);

impl Dir {
    fn path(&self) -> &std::path::Path {
        &self.0
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    workload::tune_allocator();
    let mut args = std::env::args().skip(1);
    let events: usize = args
        .next()
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(1_000_000);
    let mode = match args.next().as_deref() {
        Some("scd2") => StoredAs::Scd2,
        _ => StoredAs::Bitemporal,
    };
    let hot_events_per_key = args
        .next()
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(asof::DEFAULT_HOT_EVENTS_PER_KEY);
    // `ASOF_WORKLOAD_DIR` keeps the store there (for timing the CLI on it) and skips VACUUM.
    let kept = std::env::var_os("ASOF_WORKLOAD_DIR").map(std::path::PathBuf::from);
    let tmp = tempfile::tempdir()?;
    let dir = Dir(kept.clone().unwrap_or_else(|| tmp.path().to_path_buf()));
    // sled's page cache is set explicitly (asof's default is 256 MiB).
    let options = asof::StoreOptions {
        cache_bytes: 64 << 20,
        hot_events_per_key,
        ..Default::default()
    };
    let store = Store::open_with(dir.path(), options.clone())?;
    store.create_flow(workload::flow(mode))?;
    let start = Instant::now();
    for b in workload::batch_iter(events, 10_000, 10_000, 42) {
        store.apply("bench_cdc", &b)?;
    }
    let secs = start.elapsed().as_secs_f64();
    let (rows, cold) = store.read("bench", |r| (r.live_rows(), r.cold_stats()))?;
    println!(
        "{mode:?}: {events} events in {secs:.2} s = {:.0} events/s; {rows} live row versions; peak RSS {:.0} MiB",
        events as f64 / secs,
        peak_rss_mib()
    );
    println!(
        "cold history: {} events in key heads, {} frozen over {} keys in {:.0} MiB of pages",
        cold.hot_events,
        cold.frozen_events,
        cold.frozen_keys,
        cold.page_bytes as f64 / (1 << 20) as f64,
    );
    drop(store);
    let start = Instant::now();
    let store = Store::open_with(dir.path(), options.clone())?;
    let opened = start.elapsed().as_secs_f64();
    let live = store.read("bench", |r| r.live_rows())?;
    println!(
        "reopen in {:.1} ms (catalog only); first use of the table (read from its pages) {:.2} s; {live} live row versions",
        opened * 1000.0,
        start.elapsed().as_secs_f64() - opened,
    );

    // A SQL query over the whole history streams: its memory is a few batches, not the table.
    let _ = std::fs::write("/proc/self/clear_refs", "5"); // resets the peak RSS
    let before_query = peak_rss_mib();
    let mut session = asof::SqlSession::new(store.clone())?;
    let start = Instant::now();
    session.execute("SELECT count(*), max(__END_AT) FROM bench")?;
    println!(
        "SQL over all {} row versions of the current table in {:.2} s; peak RSS {:.0} MiB before, {:.0} MiB during",
        store.read("bench", |r| r.live_rows())?,
        start.elapsed().as_secs_f64(),
        before_query,
        peak_rss_mib(),
    );
    drop(session);
    if let Some(k) = kept {
        println!("store kept in {}", k.display());
        return Ok(());
    }

    // Bytes on disk per stored row version, before and after VACUUM RETAIN 0 HOURS.
    let versions = store.read("bench", |r| r.row_versions())?;
    let disk = |p: &std::path::Path| -> u64 {
        fn walk(p: &std::path::Path) -> u64 {
            std::fs::read_dir(p)
                .map(|d| {
                    d.flatten()
                        .map(|e| match e.metadata() {
                            Ok(m) if m.is_dir() => walk(&e.path()),
                            Ok(m) => m.len(),
                            Err(_) => 0,
                        })
                        .sum()
                })
                .unwrap_or(0)
        }
        walk(p)
    };
    let before = disk(dir.path());
    let start = Instant::now();
    let report = store.vacuum_with(
        "bench",
        std::time::Duration::ZERO,
        asof::RetentionCheck::Disabled,
    )?;
    let vacuum_secs = start.elapsed().as_secs_f64();
    let after_versions = store.read("bench", |r| r.row_versions())?;
    drop(store);
    let store = Store::open_with(dir.path(), options.clone())?;
    let after = disk(dir.path());
    println!(
        "before VACUUM: {versions} row versions, {before} bytes on disk ({:.1} B/version), log {} bytes, {} events",
        before as f64 / versions as f64,
        report.bytes_before,
        report.events_before
    );
    println!(
        "VACUUM RETAIN 0 HOURS in {vacuum_secs:.2} s: {after_versions} row versions, {after} bytes on disk ({:.1} B/version), log {} bytes, {} events; {} commits removed",
        after as f64 / after_versions as f64,
        report.bytes_after,
        report.events_after,
        report.commits_removed
    );
    assert_eq!(store.read("bench", |r| r.live_rows())?, rows);
    Ok(())
}
