//! Runs the core-engine workload once and reports throughput, peak memory, bytes on disk, the
//! figures of a store opened afresh (open, point lookups, an as-of snapshot, a full scan, and
//! whole-process `asof sql` timings when the binary is built), and what VACUUM frees:
//! `cargo run --profile bench --example workload -- [events] [scd2|bitemporal] [hot events per key]`.
//!
//! `ASOF_WORKLOAD_DIR=D` keeps the store in `D`; with `ASOF_WORKLOAD_READS_ONLY=1` as well, a run
//! on a store an earlier run kept there (of as many events) times only the reads, leaving it as
//! it was: A/B comparisons of two builds on one store. `ASOF_WORKLOAD_WARM_SNAPSHOTS=N` takes N
//! warm snapshots instead of five, and `ASOF_WORKLOAD_FULL_SCANS=N` N full scans instead of one
//! (their median is reported: for a profiler, and for an A/B of the scan; 0: none, for a
//! profile of the snapshots alone).
//! `ASOF_WORKLOAD_CACHE_MIB` sizes sled's cache, `ASOF_WORKLOAD_READ_CACHE_MIB` the read cache of
//! decoded pages and heads, of the store the workload opens (the whole-process `asof sql` runs
//! keep the binary's defaults).

#[cfg(not(feature = "system-allocator"))]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[path = "../benches/support/workload.rs"]
mod workload;

use std::time::Instant;

use asof::{Store, StoredAs, Value};

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

/// Bytes of the files under `p`.
fn disk(p: &std::path::Path) -> u64 {
    std::fs::read_dir(p)
        .map(|d| {
            d.flatten()
                .map(|e| match e.metadata() {
                    Ok(m) if m.is_dir() => disk(&e.path()),
                    Ok(m) => m.len(),
                    Err(_) => 0,
                })
                .sum()
        })
        .unwrap_or(0)
}

/// Whole-process timings of the `asof` binary built next to this example (target/<profile>/asof),
/// if there is one, with `/usr/bin/time` for the peak RSS: what a user running one query feels.
fn cli_timings(db: &std::path::Path, now_us: i64) {
    let Some(bin) = std::env::current_exe()
        .ok()
        .and_then(|e| Some(e.parent()?.parent()?.join("asof")))
        .filter(|b| b.exists())
    else {
        println!("(no asof binary next to this example: build it for the whole-process timings)");
        return;
    };
    let ts = |us: i64| {
        chrono::DateTime::from_timestamp_micros(us)
            .map(|t| t.naive_utc().format("%Y-%m-%dT%H:%M:%S%.6f").to_string())
            .unwrap_or_default()
    };
    let point = format!(
        "SELECT * FROM bench FOR BUSINESS_TIME AS OF TIMESTAMP '{}' FOR SYSTEM_TIME AS OF TIMESTAMP '{}' WHERE id = 17",
        ts(now_us * 6 / 10),
        ts(now_us * 7 / 10)
    );
    for (what, sql) in [
        ("SELECT 1", "SELECT 1".to_string()),
        ("point as-of query", point),
        ("SELECT count(*)", "SELECT count(*) FROM bench".to_string()),
    ] {
        let mut runs: Vec<(f64, f64)> = (0..3)
            .filter_map(|_| {
                let out = std::process::Command::new("/usr/bin/time")
                    .args(["-f", "%e %M"])
                    .arg(&bin)
                    .arg("--db")
                    .arg(db)
                    .args(["sql", &sql])
                    .output()
                    .ok()?;
                let err = String::from_utf8_lossy(&out.stderr);
                let mut f = err.lines().last()?.split_whitespace();
                Some((
                    f.next()?.parse().ok()?,
                    f.next()?.parse::<f64>().ok()? / 1024.0,
                ))
            })
            .collect();
        runs.sort_by(|a, b| a.0.total_cmp(&b.0));
        match runs.get(runs.len() / 2) {
            Some((secs, mib)) => println!(
                "whole process `asof sql` {what}: median of {} runs {secs:.2} s, {mib:.0} MiB peak RSS",
                runs.len()
            ),
            None => println!("whole process `asof sql` {what}: could not run /usr/bin/time"),
        }
    }
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
    // `ASOF_WORKLOAD_DIR` keeps the store there (for timing the CLI on it) and skips VACUUM;
    // `ASOF_WORKLOAD_INGEST_ONLY` stops after the ingest's figures.
    let kept = std::env::var_os("ASOF_WORKLOAD_DIR").map(std::path::PathBuf::from);
    let tmp = tempfile::tempdir()?;
    let dir = Dir(kept.clone().unwrap_or_else(|| tmp.path().to_path_buf()));
    // sled's page cache: asof's default (64 MiB), or `ASOF_WORKLOAD_CACHE_MIB`.
    let cache_mib: u64 = std::env::var("ASOF_WORKLOAD_CACHE_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    // The read cache of decoded pages and heads: asof's default, or
    // `ASOF_WORKLOAD_READ_CACHE_MIB`.
    let read_cache_bytes = std::env::var("ASOF_WORKLOAD_READ_CACHE_MIB")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .map_or(asof::DEFAULT_READ_CACHE_BYTES, |mib| mib << 20);
    let options = asof::StoreOptions {
        cache_bytes: cache_mib << 20,
        read_cache_bytes,
        hot_events_per_key,
        ..Default::default()
    };
    // `ASOF_WORKLOAD_READS_ONLY` (with `ASOF_WORKLOAD_DIR` holding a store this workload
    // wrote, of as many events): skips the ingest, times the reads of that store.
    let reads_only = kept.is_some() && std::env::var_os("ASOF_WORKLOAD_READS_ONLY").is_some();
    let store = Store::open_with(dir.path(), options.clone())?;
    let start = Instant::now();
    if !reads_only {
        store.create_flow(workload::flow(mode))?;
        for b in workload::batch_iter(events, 10_000, 10_000, 42) {
            store.apply("bench_cdc", &b)?;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    if reads_only {
        drop(store);
        return reads(dir.path(), events, &options);
    }
    let (rows, cold) = store.read("bench", |r| (r.live_rows(), r.cold_stats()))?;
    println!(
        "{mode:?}: {events} events in {secs:.2} s = {:.0} events/s; {rows} live row versions; peak RSS {:.0} MiB",
        events as f64 / secs,
        peak_rss_mib()
    );
    println!(
        "cold history: {} events in key heads, {} frozen over {} keys in {} pages ({} listed in memory), {:.0} MiB",
        cold.hot_events,
        cold.frozen_events,
        cold.frozen_keys,
        cold.pages,
        cold.listed_pages,
        cold.page_bytes as f64 / (1 << 20) as f64,
    );
    if std::env::var_os("ASOF_WORKLOAD_INGEST_ONLY").is_some() {
        // For profiling the ingest alone (heaptrack's peak is the whole run's).
        return Ok(());
    }
    let start = Instant::now();
    drop(store);
    println!(
        "close after the ingest (checkpoint, sled's snapshot): {:.1} ms",
        start.elapsed().as_secs_f64() * 1000.0
    );
    let disk_after_ingest = disk(dir.path());
    println!(
        "on disk after ingest (checkpoint on close): {disk_after_ingest} bytes = {:.0} B/event",
        disk_after_ingest as f64 / events as f64
    );

    reads(dir.path(), events, &options)?;

    // More commits of 10k events (the ones that follow the ingest's) into the table freshly
    // opened: each reads only the keys its events bring, not the table.
    const MORE: usize = 5;
    let more: Vec<_> = workload::batch_iter(events + MORE * 10_000, 10_000, 10_000, 42)
        .skip(events / 10_000)
        .collect();
    let start = Instant::now();
    let store = Store::open_with(dir.path(), options.clone())?;
    let commit = store.apply("bench_cdc", &more[0])?;
    println!(
        "open, then one more commit of {} events ({} late): {:.1} ms, of which applying it {:.1} ms",
        more[0].num_rows(),
        commit.metrics.num_late_events,
        start.elapsed().as_secs_f64() * 1000.0,
        commit.duration_us as f64 / 1000.0,
    );
    let mut next: Vec<f64> = Vec::new();
    for b in &more[1..] {
        let start = Instant::now();
        store.apply("bench_cdc", b)?;
        next.push(start.elapsed().as_secs_f64() * 1000.0);
    }
    next.sort_by(f64::total_cmp);
    println!(
        "the {} commits after it: median {:.1} ms (least {:.1}, most {:.1})",
        next.len(),
        next[next.len() / 2],
        next[0],
        next[next.len() - 1],
    );
    drop(store);

    let start = Instant::now();
    let store = Store::open_with(dir.path(), options.clone())?;
    let opened = start.elapsed().as_secs_f64();
    let live = store.read("bench", |r| r.live_rows())?;
    println!(
        "reopen in {:.1} ms (catalog only); first use of the whole table (read from its pages) {:.2} s; {live} live row versions",
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
    assert_eq!(store.read("bench", |r| r.live_rows())?, live);
    Ok(())
}

/// Opening, then reads of a store whose table is not in memory (the figures of the issue that
/// persisted rows: docs/PERFORMANCE.md), and the CLI's on it.
fn reads(
    dir: &std::path::Path,
    events: usize,
    options: &asof::StoreOptions,
) -> Result<(), Box<dyn std::error::Error>> {
    let start = Instant::now();
    let store = Store::open_with(dir, options.clone())?;
    let opened = start.elapsed().as_secs_f64();
    println!("Store::open in {:.1} ms", opened * 1000.0);
    // The workload's times: event i is at i ms, business and system.
    let now_us = events as i64 * workload::STEP_US;
    let (b_at, s_at) = (Value::Int(now_us * 6 / 10), Value::Int(now_us * 7 / 10));
    let point = |k: i64| {
        asof::lookup(
            &store,
            "bench",
            &[Value::Int(k)],
            Some(std::slice::from_ref(&b_at)),
            Some(&s_at),
        )
    };
    let start = Instant::now();
    point(17)?;
    println!(
        "point as-of lookup (both timelines), first after open: {:.0} µs",
        start.elapsed().as_secs_f64() * 1e6
    );
    // Keys never read before: each one's head and the pages that may hold the answer.
    let keys: i64 = 2000; // of the 10,000
    let mut first: Vec<f64> = (100..keys)
        .map(|k| {
            let start = Instant::now();
            point(k).map(|_| start.elapsed().as_secs_f64() * 1e6)
        })
        .collect::<Result<_, _>>()?;
    first.sort_by(f64::total_cmp);
    println!(
        "point as-of lookup of a key not read before ({} keys): median {:.0} µs, p90 {:.0} µs",
        first.len(),
        first[first.len() / 2],
        first[first.len() * 9 / 10]
    );
    let mut lat: Vec<f64> = (0..1000)
        .map(|i| {
            let start = Instant::now();
            point(17 + (i % 3)).map(|_| start.elapsed().as_secs_f64() * 1e6)
        })
        .collect::<Result<_, _>>()?;
    lat.sort_by(f64::total_cmp);
    println!(
        "point as-of lookup, warm (table not in memory; the key read once, then kept): median {:.1} µs",
        lat[lat.len() / 2]
    );
    let snapshot = asof::ScanRequest {
        business: asof::TimeSelection::as_of(b_at.clone()),
        system: asof::TimeSelection::as_of(s_at.clone()),
        ..Default::default()
    };
    // A page or head is kept the second time it is read: the third snapshot is the warm one.
    let snapshot_ms = || -> Result<(usize, f64), asof::QueryError> {
        let start = Instant::now();
        let rows = (asof::scan_all(&store, "bench", &snapshot)?.iter())
            .map(|b| b.num_rows())
            .sum();
        Ok((rows, start.elapsed().as_secs_f64() * 1000.0))
    };
    for pass in ["first", "second, keeping"] {
        let (rows, ms) = snapshot_ms()?;
        println!("as-of snapshot of all keys ({pass}): {rows} rows in {ms:.1} ms");
    }
    let warm_runs: usize = std::env::var("ASOF_WORKLOAD_WARM_SNAPSHOTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5)
        .max(1);
    let mut warm: Vec<f64> = (0..warm_runs)
        .map(|_| snapshot_ms().map(|(_, ms)| ms))
        .collect::<Result<_, _>>()?;
    warm.sort_by(f64::total_cmp);
    println!(
        "as-of snapshot of all keys (warm, {warm_runs} more): median {:.1} ms (least {:.1})",
        warm[warm_runs / 2],
        warm[0]
    );
    let full_scans: usize = std::env::var("ASOF_WORKLOAD_FULL_SCANS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let mut full: Vec<(usize, f64)> = (0..full_scans)
        .map(|_| {
            let start = Instant::now();
            let mut scanned = 0usize;
            let request = asof::ScanRequest {
                batch_size: std::env::var("ASOF_WORKLOAD_BATCH_ROWS")
                    .ok()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(asof::ScanRequest::default().batch_size),
                ..Default::default()
            };
            for b in asof::scan(&store, "bench", &request)? {
                scanned += b?.num_rows();
            }
            Ok((scanned, start.elapsed().as_secs_f64()))
        })
        .collect::<Result<_, asof::QueryError>>()?;
    if let Some(&(rows, secs)) = full.first() {
        println!(
            "full scan into Arrow: {rows} rows in {secs:.2} s = {:.2}M rows/s",
            rows as f64 / secs / 1e6,
        );
    }
    if full_scans > 1 {
        full.sort_by(|a, b| a.1.total_cmp(&b.1));
        let (rows, secs) = full[full_scans / 2];
        let (least_rows, least) = full[0];
        println!(
            "full scan into Arrow ({full_scans} in all): median {secs:.3} s = {:.2}M rows/s (fastest {:.2}M)",
            rows as f64 / secs / 1e6,
            least_rows as f64 / least / 1e6,
        );
    }
    drop(store);
    cli_timings(dir, now_us);
    Ok(())
}
