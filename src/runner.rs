//! `asof run`: refreshes streaming tables on their schedules (`SCHEDULE EVERY ...`, `TRIGGER ON
//! UPDATE`; docs/SEMANTICS.md §1.9) until stopped by Ctrl-C or SIGTERM. It opens the store for
//! each round and closes it after, so other processes (an `asof sql` that inserts rows) get the
//! store in between; a refresh is one atomic commit, and a stop request is honoured between
//! refreshes, so a stop never leaves a partial commit.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use asof::{Schedule, SqlSession, Store, StoreOptions, SCHEDULE_PROPERTY};

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// Runs until stopped, looking at the schedules every `poll`.
pub fn run(
    db: &Path,
    options: StoreOptions,
    poll: Duration,
) -> Result<(), Box<dyn std::error::Error>> {
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
    let mut last_run: HashMap<String, Instant> = HashMap::new();
    let mut seen_sources: HashMap<String, u64> = HashMap::new();
    // When each CRON table last refreshed, as this process knows it (else its last commit).
    let mut cron_done: HashMap<String, chrono::DateTime<chrono::Utc>> = HashMap::new();
    let mut told: Vec<String> = Vec::new();
    log("asof run: following the schedules (Ctrl-C stops)");
    while !STOP.load(Ordering::SeqCst) {
        let store = Store::open_with(db, options.clone())?;
        for table in store.tables()? {
            if STOP.load(Ordering::SeqCst) {
                break;
            }
            let properties = store.properties(&table)?;
            let Some(schedule) = properties
                .get(SCHEDULE_PROPERTY)
                .and_then(|p| Schedule::from_property(p))
            else {
                continue;
            };
            // A CRON table's fire is recorded once its refresh ran (a failed one waits for the
            // next fire time, as a scheduled update does in Databricks).
            let mut cron_fired = None;
            let since_last =
                |gap: Duration| last_run.get(&table).is_none_or(|l| l.elapsed() >= gap);
            let due = match &schedule {
                Schedule::Every(every) => since_last(*every),
                Schedule::OnUpdate { at_most_every } => {
                    // What the sources of its flows hold: their commits, and the files waiting
                    // in a `read_files` folder.
                    let mut seen = std::collections::hash_map::DefaultHasher::new();
                    for f in store.flows(&table)? {
                        if let Some(src) = &f.source_table {
                            store.source_history(src)?.len().hash(&mut seen);
                            waiting_files(&store, src).hash(&mut seen);
                        }
                    }
                    let seen = seen.finish();
                    let changed = seen_sources.get(&table) != Some(&seen);
                    let due = changed && since_last(at_most_every.unwrap_or_default());
                    if due {
                        seen_sources.insert(table.clone(), seen);
                    }
                    due
                }
                Schedule::Cron { expr, time_zone } => {
                    // Due when the schedule fired since the table's last refresh: a fire time
                    // missed while nothing ran is caught up once, not once per fire.
                    match asof::CronSchedule::new(expr, time_zone.as_deref()) {
                        Ok(cron) => {
                            let now = chrono::Utc::now();
                            let last = match cron_done.get(&table) {
                                Some(t) => *t,
                                None => {
                                    let us = store
                                        .history(&table)?
                                        .iter()
                                        .rev()
                                        .find(|c| c.operation.starts_with("FLOW"))
                                        .map_or(0, |c| c.timestamp_us);
                                    chrono::DateTime::from_timestamp_micros(us).unwrap_or_default()
                                }
                            };
                            let fired = cron.last_at_or_before(now).filter(|f| *f > last);
                            cron_fired = fired.map(|_| now);
                            fired.is_some()
                        }
                        Err(e) => {
                            if !told.contains(&table) {
                                log(&format!("{table}: not followed: {e}"));
                                told.push(table.clone());
                            }
                            false
                        }
                    }
                }
            };
            if !due {
                continue;
            }
            last_run.insert(table.clone(), Instant::now());
            let mut session = SqlSession::new(store.clone())?;
            let sql = format!("REFRESH STREAMING TABLE `{}`", table.replace('`', "``"));
            match session.execute(&sql) {
                Ok(out) => {
                    for o in out {
                        if let asof::SqlOutput::Done(line) = o {
                            log(&format!("{table}: {}", line.replace('\n', "; ")));
                        }
                    }
                }
                Err(e) => log(&format!("{table}: refresh failed: {e}")),
            }
            if let Some(at) = cron_fired {
                cron_done.insert(table.clone(), at);
            }
        }
        drop(store);
        let until = Instant::now() + poll;
        while Instant::now() < until && !STOP.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(20).min(poll));
        }
    }
    log("asof run: stopped");
    Ok(())
}

/// The files of source `src`'s `read_files` folder that it has not loaded, with their sizes and
/// times (a file still being written changes them, and is loaded once it stops); none if `src`
/// does not read files.
fn waiting_files(store: &Store, src: &str) -> Vec<(String, u64, Option<std::time::SystemTime>)> {
    let Ok((Some(origin), loaded)) = store.source_origin(src) else {
        return Vec::new();
    };
    let Ok(files) = serde_json::from_str::<asof::FileSource>(&origin) else {
        return Vec::new(); // snapshots, not files
    };
    files
        .list()
        .unwrap_or_default()
        .into_iter()
        .map(|p| p.display().to_string())
        .filter(|p| !loaded.contains(p))
        .map(|p| {
            let meta = std::fs::metadata(&p).ok();
            let len = meta.as_ref().map_or(0, |m| m.len());
            let modified = meta.and_then(|m| m.modified().ok());
            (p, len, modified)
        })
        .collect()
}

fn log(line: &str) {
    let now = chrono::Utc::now().format("%Y-%m-%dT%H:%M:%S%.3fZ");
    println!("[{now}] {line}");
    use std::io::Write;
    let _ = std::io::stdout().flush();
}
