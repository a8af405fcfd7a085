//! Crash test: a child process ingests (appends to a source table, then refreshes the flow from
//! it, commit after commit) and is killed with SIGKILL at random moments, over and over. After
//! every kill the store is reopened and checked:
//!
//! - every commit the child reported as acknowledged is there (source appends and flow commits);
//! - the commit log has no gap and no half commit (the store opens, versions are contiguous);
//! - the flow's checkpoint matches the data it wrote: the table equals the reference model over
//!   exactly the source rows before the checkpoint (nothing applied twice, nothing lost);
//! - every file a `read_files` flow loaded is there whole, with its name, or not at all;
//! - a table created, filled and dropped in the kill loop is whole if it is there;
//! - the child then resumes from where the store says it is.
//!
//! Besides appends and refreshes, the child runs full refreshes, VACUUMs, `read_files` loads and
//! DROPs, so kills land in each; in the BITEMPORAL runs it applies commits in parts (written in
//! several batches before the commit record), so kills land between them too. Each kill waits
//! for a random number of acknowledgements (zero to two) and then a random delay, so the run
//! checks acknowledged commits however slow the machine is.
//!
//! `ASOF_CRASH_KILLS` sets the number of kills (default 12 in CI; try 500 for a long run):
//! `ASOF_CRASH_KILLS=500 cargo test --release --test integration crash:: -- --nocapture`.

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use asof::{ColumnSelection, Condition, FlowSpec, RefreshMode, Store, StoredAs, Value};
use common::model::{model, MEvent, MFlow, Op};
use rand::{Rng, SeedableRng};

const ROWS_PER_APPEND: usize = 200;
const KEYS: i64 = 50;

fn schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, false),
        Field::new("seq", DataType::Int64, false),
        Field::new("sys", DataType::Int64, false),
        Field::new("op", DataType::Utf8, false),
        Field::new("a", DataType::Int64, true),
    ]))
}

/// Append number `n`: deterministic, with late events on both timelines and deletes.
fn append_batch(n: u64) -> RecordBatch {
    let mut rng = rand::rngs::StdRng::seed_from_u64(n);
    let mut k = Vec::new();
    let mut seq = Vec::new();
    let mut sys = Vec::new();
    let mut op = Vec::new();
    let mut a = Vec::new();
    for i in 0..ROWS_PER_APPEND {
        let base = (n as i64) * ROWS_PER_APPEND as i64 + i as i64;
        k.push(rng.gen_range(0..KEYS));
        // Mostly in order, sometimes far back.
        seq.push(if rng.gen_bool(0.1) {
            rng.gen_range(0..=base)
        } else {
            base
        });
        sys.push(if rng.gen_bool(0.05) {
            rng.gen_range(0..=base)
        } else {
            base
        });
        op.push(if rng.gen_bool(0.05) { "D" } else { "U" });
        a.push(rng.gen_bool(0.9).then(|| rng.gen_range(0..1000)));
    }
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from(k)),
            Arc::new(Int64Array::from(seq)),
            Arc::new(Int64Array::from(sys)),
            Arc::new(StringArray::from(op)),
            Arc::new(Int64Array::from(a)),
        ],
    )
    .unwrap()
}

fn flow(mode: StoredAs) -> asof::Flow {
    let mut b = FlowSpec::builder("f", "t", &schema())
        .keys(["k"])
        .sequence_by(["seq"])
        .delete_when(Condition::equals("op", "D"))
        .columns(ColumnSelection::all_except(["seq", "sys", "op"]))
        .stored_as(mode)
        .source_table("src");
    if mode == StoredAs::Bitemporal {
        b = b.system_sequence_by("sys");
    }
    b.build().unwrap()
}

/// Rows of each CSV file the child loads through a `read_files` flow.
const FILE_ROWS: usize = 20;

/// Writes file `n` of the `read_files` flow's folder whole: a temporary name, then a rename, as
/// a well-behaved producer does (a loader must never see half a file).
fn write_file(dir: &std::path::Path, n: u64) {
    let files = dir.join("files");
    std::fs::create_dir_all(&files).unwrap();
    let mut text = String::from("k,seq,a\n");
    for i in 0..FILE_ROWS as u64 {
        text.push_str(&format!("{},{},{}\n", (n * 7 + i) % 13, n * 100 + i, n + i));
    }
    let tmp = dir.join(format!("file-{n}.tmp"));
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, files.join(format!("{n:06}.csv"))).unwrap();
}

/// The child: open, set up if new, then forever: append + refresh, and in turn a full refresh,
/// a VACUUM, a `read_files` load and a create-append-drop of a scratch table, printing what was
/// acknowledged.
fn child(dir: &str, mode: StoredAs) {
    // BITEMPORAL runs apply each refresh of an append (200 rows) in parts of about 64 rows,
    // written ahead of the commit record, so kills land between the batches of one commit.
    let options = asof::StoreOptions {
        commit_part_rows: match mode {
            StoredAs::Bitemporal => 64,
            _ => asof::DEFAULT_COMMIT_PART_ROWS,
        },
        ..Default::default()
    };
    let store = Store::open_with(dir, options).expect("child opens the store");
    if store.sources().unwrap().iter().all(|s| s != "src") {
        store.create_source("src", &schema()).unwrap();
    }
    if store.tables().unwrap().iter().all(|t| t != "t") {
        store.create_flow(flow(mode)).unwrap();
    }
    let mut sql = asof::SqlSession::new(store.clone()).unwrap();
    if store.tables().unwrap().iter().all(|t| t != "ft") {
        write_file(std::path::Path::new(dir), 0);
        sql.execute(&format!(
            "CREATE OR REFRESH STREAMING TABLE ft FLOW AUTO CDC FROM stream(read_files('{dir}/files', format => 'csv', header => true)) KEYS (k) SEQUENCE BY seq STORED AS SCD TYPE 1"
        ))
        .unwrap();
    }
    let out = std::io::stdout();
    // Catch up first: rows appended before the last kill but not yet refreshed.
    if let Some(c) = store.refresh("f", RefreshMode::Incremental).unwrap() {
        println!("FLOW {}", c.version);
    }
    let mut n = store
        .source_rows("src", asof::SourceRead::Now)
        .and_then(|r| r.collect_batches())
        .unwrap()
        .iter()
        .map(|b| b.num_rows())
        .sum::<usize>() as u64
        / ROWS_PER_APPEND as u64;
    loop {
        let rows = store.append("src", &append_batch(n)).unwrap();
        println!("APPEND {rows}");
        let c = store
            .refresh("f", RefreshMode::Incremental)
            .unwrap()
            .expect("new rows");
        println!("FLOW {}", c.version);
        match n % 8 {
            3 => {
                let c = store
                    .refresh("f", RefreshMode::Full)
                    .unwrap()
                    .expect("a full refresh");
                println!("FLOW {}", c.version);
            }
            5 => {
                store
                    .vacuum_with("t", Duration::ZERO, asof::RetentionCheck::Disabled)
                    .unwrap();
                println!(
                    "FLOW {}",
                    store.history("t").unwrap().last().unwrap().version
                );
            }
            6 => {
                write_file(std::path::Path::new(dir), n + 1);
                sql.execute("REFRESH STREAMING TABLE ft").unwrap();
                let (_, loaded) = store.source_origin("__asof_files_ft").unwrap();
                println!("FILES {}", loaded.len());
            }
            7 => {
                let _ = store.drop_table("scratch");
                store.create_source("scratch", &schema()).unwrap();
                store.append("scratch", &append_batch(n)).unwrap();
                store.drop_table("scratch").unwrap();
                println!("DROP");
            }
            _ => {}
        }
        use std::io::Write;
        out.lock().flush().unwrap();
        n += 1;
    }
}

fn model_rows(mode: StoredAs, src: &[RecordBatch], upto: usize) -> Vec<common::model::MRow> {
    let mut events = Vec::new();
    for b in src {
        let col = |i: usize| {
            b.column(i)
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap()
                .clone()
        };
        let (k, seq, sys, a) = (col(0), col(1), col(2), col(4));
        let op = b.column(3).as_any().downcast_ref::<StringArray>().unwrap();
        for r in 0..b.num_rows() {
            if events.len() == upto {
                break;
            }
            events.push(MEvent {
                key: vec![Value::Int(k.value(r))],
                seq: vec![Value::Int(seq.value(r))],
                sys: (mode == StoredAs::Bitemporal).then(|| Value::Int(sys.value(r))),
                op: if op.value(r) == "D" {
                    Op::Delete
                } else {
                    Op::Upsert
                },
                values: vec![
                    Value::Int(k.value(r)),
                    if a.is_null(r) {
                        Value::Null
                    } else {
                        Value::Int(a.value(r))
                    },
                ],
                update: None,
            });
        }
    }
    let f = MFlow {
        mode,
        tracked: vec![true, true],
        ignore_null: vec![false, false],
    };
    let mut rows = model(&f, &events);
    rows.sort_by_key(common::model::MRow::sort_key);
    rows
}

#[test]
fn crash_child() {
    // Runs only as the child of `killed_at_random_moments_the_store_keeps_every_acknowledged_commit`.
    if let (Ok(dir), Ok(mode)) = (
        std::env::var("ASOF_CRASH_DIR"),
        std::env::var("ASOF_CRASH_MODE"),
    ) {
        child(
            &dir,
            if mode == "scd2" {
                StoredAs::Scd2
            } else {
                StoredAs::Bitemporal
            },
        );
    }
}

/// Kills per store: the check recomputes the model over all the store's rows, so a long run
/// starts a fresh store now and then instead of growing one without end.
const KILLS_PER_STORE: usize = 25;

/// What a run of kills did: the kills, the acknowledged commits the child reported before them,
/// and how many acknowledgements the kills waited for (a floor for the second).
#[derive(Default)]
struct Run {
    kills: usize,
    checked: u64,
    wanted: u64,
}

fn crash_run(mode: StoredAs, kills: usize, seed: u64) -> Run {
    let mut dir = tempfile::tempdir().unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut acked_rows = 0u64;
    let mut acked_version = 0u64;
    let mut acked_files = 0usize;
    let mut checked = 0u64;
    let mut wanted = 0u64;
    for kill in 0..kills {
        if kill > 0 && kill % KILLS_PER_STORE == 0 {
            dir = tempfile::tempdir().unwrap();
            acked_rows = 0;
            acked_version = 0;
            acked_files = 0;
        }
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "crash::crash_child",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("ASOF_CRASH_DIR", dir.path())
            .env(
                "ASOF_CRASH_MODE",
                if mode == StoredAs::Scd2 {
                    "scd2"
                } else {
                    "bitemporal"
                },
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // What the child says on stderr, shown if it stops by itself.
        let stderr = child.stderr.take().unwrap();
        let errors = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut BufReader::new(stderr), &mut text);
            text
        });
        // Let it make progress, then kill it at a random moment: after a random number of
        // acknowledgements (none: sometimes during open) and a random delay. Counting
        // acknowledgements instead of only waiting makes the run check commits however slow
        // the machine is.
        let acks_wanted: u64 = rng.gen_range(0..=2);
        let wait = Duration::from_millis(rng.gen_range(5..250));
        wanted += acks_wanted;
        let stdout = child.stdout.take().unwrap();
        let (lines, heard) = std::sync::mpsc::channel::<String>();
        let reader = std::thread::spawn(move || {
            for l in BufReader::new(stdout).lines() {
                match l {
                    Ok(l) => {
                        if lines.send(l).is_err() {
                            break;
                        }
                    }
                    Err(_) => break,
                }
            }
        });
        let mut acks = 0u64;
        let mut hear = |l: String| {
            if let Some(v) = l.strip_prefix("APPEND ") {
                acked_rows = acked_rows.max(v.parse().unwrap());
            } else if let Some(v) = l.strip_prefix("FLOW ") {
                acked_version = acked_version.max(v.parse().unwrap());
            } else if let Some(v) = l.strip_prefix("FILES ") {
                acked_files = acked_files.max(v.parse().unwrap());
            }
            let ack = l.starts_with("APPEND ")
                || l.starts_with("FLOW ")
                || l.starts_with("FILES ")
                || l == "DROP";
            u64::from(ack)
        };
        let started = Instant::now();
        let mut since: Option<Instant> = (acks_wanted == 0).then(Instant::now);
        while since.is_none_or(|t| t.elapsed() < wait) {
            if let Ok(Some(status)) = child.try_wait() {
                let said = errors.join().unwrap_or_default();
                panic!("the child stopped by itself ({status}) after kill {kill}:\n{said}");
            }
            if started.elapsed() > Duration::from_secs(120) {
                child.kill().unwrap();
                panic!(
                    "kill {kill}: the child acknowledged {acks} of {acks_wanted} commits in 120 s"
                );
            }
            if let Ok(l) = heard.recv_timeout(Duration::from_millis(1)) {
                acks += hear(l);
                if since.is_none() && acks >= acks_wanted {
                    since = Some(Instant::now());
                }
            }
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        drop(errors);
        reader.join().unwrap();
        for l in heard.try_iter() {
            acks += hear(l);
        }
        checked += acks;

        // Reopen and check.
        let store =
            Store::open(dir.path()).unwrap_or_else(|e| panic!("reopen after kill {kill}: {e}"));
        if store.tables().unwrap().is_empty() {
            assert_eq!(
                acked_version, 0,
                "a flow commit was acknowledged but the table is gone"
            );
            continue;
        }
        let src = store
            .source_rows("src", asof::SourceRead::Now)
            .and_then(|r| r.collect_batches())
            .unwrap();
        let src_rows: u64 = src.iter().map(|b| b.num_rows() as u64).sum();
        assert!(
            src_rows >= acked_rows,
            "kill {kill}: source has {src_rows} rows, {acked_rows} were acknowledged"
        );
        assert_eq!(
            src_rows % ROWS_PER_APPEND as u64,
            0,
            "kill {kill}: a half append"
        );
        let history = store.history("t").unwrap();
        // Contiguous from the oldest version kept (VACUUM removes the ones before it).
        let first = history[0].version;
        for (i, c) in history.iter().enumerate() {
            assert_eq!(
                c.version,
                first + i as u64,
                "kill {kill}: the log has a gap"
            );
        }
        let latest = history.last().unwrap().version;
        assert!(
            latest >= acked_version,
            "kill {kill}: commit {acked_version} was acknowledged, the log ends at {latest}"
        );
        let offset: usize = history
            .iter()
            .rev()
            .find_map(|c| {
                c.parameters
                    .get(asof::SOURCE_OFFSET)
                    .or(c.parameters.get(&format!("{}.f", asof::SOURCE_OFFSET)))
            })
            .map_or(0, |o| o.parse().unwrap());
        assert!(offset as u64 <= src_rows);
        assert_eq!(
            common::engine_rows(&store, "t"),
            model_rows(mode, &src, offset),
            "kill {kill}: the table is not the model over the {offset} rows its checkpoint covers"
        );
        // The hash chain holds, and the derived records are what the log replays to.
        let report = store.verify().unwrap();
        assert!(report.ok(), "kill {kill}: {report:?}");
        // Files: each one loaded whole, with its name, or not at all.
        if let Ok((_, loaded)) = store.source_origin("__asof_files_ft") {
            let rows = store
                .source_rows("__asof_files_ft", asof::SourceRead::Now)
                .and_then(|r| r.collect_batches())
                .unwrap();
            let rows: usize = rows.iter().map(|b| b.num_rows()).sum();
            assert_eq!(
                rows,
                FILE_ROWS * loaded.len(),
                "kill {kill}: a file loaded in part"
            );
            assert!(
                loaded.len() >= acked_files,
                "kill {kill}: {acked_files} files were acknowledged, {} are loaded",
                loaded.len()
            );
        }
        // A scratch table left by a kill between its create and its drop is whole.
        if let Ok(rows) = store
            .source_rows("scratch", asof::SourceRead::Now)
            .and_then(|r| r.collect_batches())
        {
            let rows: usize = rows.iter().map(|b| b.num_rows()).sum();
            assert!(rows == 0 || rows == ROWS_PER_APPEND, "kill {kill}: {rows}");
        }
    }
    Run {
        kills,
        checked,
        wanted,
    }
}

#[test]
fn killed_at_random_moments_the_store_keeps_every_acknowledged_commit() {
    if std::env::var("ASOF_CRASH_DIR").is_ok() {
        return; // we are the child's test binary, running the other test
    }
    let kills: usize = std::env::var("ASOF_CRASH_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(12);
    let mut total = Run::default();
    for (i, mode) in [StoredAs::Bitemporal, StoredAs::Scd2]
        .into_iter()
        .enumerate()
    {
        let run = crash_run(mode, kills.div_ceil(2), 7 + i as u64);
        total.kills += run.kills;
        total.checked += run.checked;
        total.wanted += run.wanted;
    }
    println!(
        "crash test: {} kills survived, {} acknowledged commits checked",
        total.kills, total.checked
    );
    // A run whose kills all land before the first commit proves nothing: each kill waited for
    // a random number of acknowledgements, so the run checked at least that many.
    assert!(
        total.checked >= total.wanted.max(1),
        "only {} acknowledged commits over {} kills, which waited for {}",
        total.checked,
        total.kills,
        total.wanted
    );
}
