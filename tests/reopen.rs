//! Reopening never changes a table. A store reopened at random points between commits (lazily:
//! its table is read from its last checkpoint and the commits after it on first use, which is
//! sometimes a read and sometimes the next commit; or rebuilt from its log, as when it has no
//! checkpoint) equals a store that never closed, at every version, in its history and its change
//! feed.

use crate::common;

use arrow::array::RecordBatch;
use asof::{Checkpoints, Increments, OnClose, OpenMode, Store, StoreOptions, StoredAs};
use proptest::prelude::*;

use crate::common::keyed::{batch, flow, sorted_lines, Ev};

/// The store that reopens checkpoints every few events and not on close, as after a crash: each
/// reopen reads the last checkpoint and replays the commits after it.
fn open(dir: &std::path::Path, open: OpenMode) -> Store {
    Store::open_with(
        dir,
        StoreOptions {
            open,
            hot_events_per_key: 2,
            checkpoints: Checkpoints {
                every_events: 7,
                on_close: OnClose::Leave,
            },
            ..Default::default()
        },
    )
    .unwrap()
}

/// The events of one commit, over keys `0..keys`.
fn events(keys: i64) -> impl Strategy<Value = Vec<Ev>> {
    prop::collection::vec(
        (
            0i64..keys,
            0i64..30,
            0i64..30,
            prop::bool::weighted(0.1),
            prop::option::of("[a-c]{1,2}"),
        ),
        1..12,
    )
}

/// What a reopen does before the next commit.
#[derive(Clone, Copy, Debug)]
enum Reopen {
    /// Nothing: the store stays open.
    No,
    /// Reopen, and the next commit replays the table.
    ThenCommit,
    /// Reopen and read the table first.
    ThenRead,
    /// Drop the table's summary (its pages are then not current), reopen: the table is rebuilt
    /// from its log and its pages written again.
    ThenRebuild,
}

/// Deletes the summary of table 0 of the store in `dir`.
fn forget_summary(dir: &std::path::Path) {
    let kv = asof::SledKv::open(dir, 1 << 20).unwrap();
    let mut b = asof::WriteBatch::default();
    b.delete(b"G\0\0\0\0".to_vec());
    asof::KvStore::write(&kv, b).unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn a_store_reopened_at_random_points_equals_one_that_never_closed(
        mode in prop_oneof![Just(StoredAs::Scd1), Just(StoredAs::Scd2), Just(StoredAs::Bitemporal)],
        commits in prop::collection::vec(
            (
                events(4),
                prop_oneof![
                    Just(Reopen::No),
                    Just(Reopen::ThenCommit),
                    Just(Reopen::ThenRead),
                    Just(Reopen::ThenRebuild),
                ],
            ),
            1..10,
        ),
    ) {
        let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let a = open(a_dir.path(), OpenMode::Eager);
        let mut b = open(b_dir.path(), OpenMode::Lazy);
        let flow = flow(mode);
        a.create_flow(flow.clone()).unwrap();
        b.create_flow(flow).unwrap();
        for (events, reopen) in &commits {
            let ca = a.apply("f", &batch(events)).unwrap();
            let cb = b.apply("f", &batch(events)).unwrap();
            prop_assert_eq!(&ca.metrics, &cb.metrics);
            match reopen {
                Reopen::No => {}
                Reopen::ThenCommit => {
                    drop(b);
                    b = open(b_dir.path(), OpenMode::Lazy);
                }
                Reopen::ThenRead => {
                    drop(b);
                    b = open(b_dir.path(), OpenMode::Lazy);
                    prop_assert_eq!(
                        common::engine_rows(&b, "t"),
                        common::engine_rows(&a, "t")
                    );
                }
                Reopen::ThenRebuild => {
                    drop(b);
                    forget_summary(b_dir.path());
                    b = open(b_dir.path(), OpenMode::Lazy);
                }
            }
            counts_match(&b, &a)?;
        }
        let history: Vec<_> = a.history("t").unwrap().iter().map(|c| c.metrics.clone()).collect();
        let history_b: Vec<_> = b.history("t").unwrap().iter().map(|c| c.metrics.clone()).collect();
        prop_assert_eq!(history, history_b);
        let latest = a.history("t").unwrap().last().unwrap().version;
        for v in 0..=latest {
            prop_assert_eq!(
                common::engine_rows_at(&b, "t", Some(v)),
                common::engine_rows_at(&a, "t", Some(v)),
                "version {}", v
            );
        }
        prop_assert_eq!(
            common::engine_changes(&b, "t", 1, latest).unwrap(),
            common::engine_changes(&a, "t", 1, latest).unwrap()
        );
    }
}

/// A store that checkpoints on close, whose commits of more than `part_rows` events are applied
/// in parts: after a reopen its table's records are current, and an increment reads only the
/// keys its events bring.
fn open_checkpointed(dir: &std::path::Path, part_rows: u64, increments: Increments) -> Store {
    Store::open_with(
        dir,
        StoreOptions {
            hot_events_per_key: 2,
            commit_part_rows: part_rows,
            increments,
            ..Default::default()
        },
    )
    .unwrap()
}

/// The rows of a scan of `table` at `version` (the latest if `None`), one line each, sorted.
fn scanned(store: &Store, table: &str, version: Option<u64>) -> Vec<String> {
    let req = asof::ScanRequest {
        version,
        ..Default::default()
    };
    sorted_lines(&asof::scan_all(store, table, &req).unwrap())
}

/// Checks `store`'s count of the rows of table `t`'s latest version ([`Store::live_rows`]),
/// where it knows one, against what a scan of `never` (a store that never closed) returns; the
/// store that never closed holds the table in memory, and always knows it.
fn counts_match(store: &Store, never: &Store) -> Result<(), TestCaseError> {
    let scan = asof::scan_all(never, "t", &asof::ScanRequest::default()).unwrap();
    let rows = scan.iter().map(|b| b.num_rows() as u64).sum();
    let latest = never.history("t").unwrap().last().unwrap().version;
    let expected = asof::LiveRows {
        version: latest,
        rows,
    };
    prop_assert_eq!(never.live_rows("t").unwrap(), Some(expected));
    if let Some(counted) = store.live_rows("t").unwrap() {
        prop_assert_eq!(counted, expected);
    }
    Ok(())
}

/// What happens after a commit to the store that reopens.
#[derive(Clone, Copy, Debug)]
enum After {
    /// Nothing: the next commit is an increment of the keys already read.
    Commit,
    /// Reopen: the next commit reads its keys from their heads.
    Reopen,
    /// Scan the table from its records (it stays out of memory).
    Scan,
    /// Read the table whole (it comes into memory).
    Read,
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn increments_that_read_only_their_keys_equal_a_store_that_never_closed(
        mode in prop_oneof![Just(StoredAs::Scd2), Just(StoredAs::Bitemporal)],
        part_rows in prop_oneof![Just(3u64), Just(1u64 << 16)],
        increments in prop_oneof![
            Just(Increments::ReadKeys),
            (1u32..4).prop_map(|one_in| Increments::ReadKeysUpTo { one_in }),
        ],
        commits in prop::collection::vec(
            (
                events(6),
                prop_oneof![
                    Just(After::Commit),
                    Just(After::Reopen),
                    Just(After::Scan),
                    Just(After::Read),
                ],
            ),
            1..10,
        ),
    ) {
        let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let a = open_checkpointed(a_dir.path(), 1 << 16, Increments::ReadKeys);
        let mut b = open_checkpointed(b_dir.path(), part_rows, increments);
        let flow = flow(mode);
        a.create_flow(flow.clone()).unwrap();
        b.create_flow(flow).unwrap();
        // The first commit, then a reopen: every later commit of `b` finds the table out of memory.
        let first = [(0, 0, 0, false, Some("a".to_string()))];
        a.apply("f", &batch(&first)).unwrap();
        b.apply("f", &batch(&first)).unwrap();
        drop(b);
        b = open_checkpointed(b_dir.path(), part_rows, increments);
        // Whether `b`'s table was read whole since it was last opened.
        let mut read_whole = false;
        for (events, after) in &commits {
            let ca = a.apply("f", &batch(events)).unwrap();
            let cb = b.apply("f", &batch(events)).unwrap();
            prop_assert_eq!(&ca.metrics, &cb.metrics);
            match after {
                After::Commit => {}
                After::Reopen => {
                    drop(b);
                    b = open_checkpointed(b_dir.path(), part_rows, increments);
                    read_whole = false;
                }
                // Each increment's checkpoint equals a replay of the log.
                After::Scan if !read_whole => {
                    prop_assert!(b.verify().unwrap().ok());
                    // Read whole by an increment only once enough keys were read.
                    if increments == Increments::ReadKeys {
                        prop_assert!(b.key_count("t").unwrap().is_some(), "read from its records");
                    }
                    prop_assert_eq!(scanned(&b, "t", None), scanned(&a, "t", None));
                }
                After::Scan => prop_assert_eq!(scanned(&b, "t", None), scanned(&a, "t", None)),
                After::Read => {
                    prop_assert_eq!(common::engine_rows(&b, "t"), common::engine_rows(&a, "t"));
                    read_whole = true;
                }
            }
            counts_match(&b, &a)?;
        }
        let latest = a.history("t").unwrap().last().unwrap().version;
        for v in 0..=latest {
            prop_assert_eq!(scanned(&b, "t", Some(v)), scanned(&a, "t", Some(v)), "version {}", v);
        }
        let history: Vec<_> = a.history("t").unwrap().iter().map(|c| c.metrics.clone()).collect();
        let history_b: Vec<_> = b.history("t").unwrap().iter().map(|c| c.metrics.clone()).collect();
        prop_assert_eq!(history, history_b);
        prop_assert_eq!(
            common::engine_changes(&b, "t", 1, latest).unwrap(),
            common::engine_changes(&a, "t", 1, latest).unwrap()
        );
        drop(b);
        let b = open_checkpointed(b_dir.path(), part_rows, increments);
        prop_assert!(b.live_rows("t").unwrap().is_some(), "its checkpoint on close counted it");
        counts_match(&b, &a)?;
        prop_assert!(b.verify().unwrap().ok());
        for v in 0..=latest {
            prop_assert_eq!(
                common::engine_rows_at(&b, "t", Some(v)),
                common::engine_rows_at(&a, "t", Some(v)),
                "version {}", v
            );
        }
    }
}

/// An upsert of each of `keys`, at sequence (and system sequence) `seq`.
fn upserts(keys: std::ops::Range<i64>, seq: i64) -> RecordBatch {
    let events: Vec<Ev> = keys
        .map(|k| (k, seq, seq, false, Some(format!("v{seq}"))))
        .collect();
    batch(&events)
}

/// The same upserts applied to `b` and to `never`: their commits.
fn apply_both(
    b: &Store,
    never: &Store,
    keys: std::ops::Range<i64>,
    seq: i64,
) -> (asof::CommitInfo, asof::CommitInfo) {
    let batch = upserts(keys, seq);
    (
        b.apply("f", &batch).unwrap(),
        never.apply("f", &batch).unwrap(),
    )
}

/// Whether `t` is read from its records (not in memory).
fn out_of_memory(store: &Store) -> bool {
    store.key_count("t").unwrap().is_some()
}

/// A table of 40 keys, closed; and a store that never closed, with the same commit.
fn forty_keys(
    dir: &std::path::Path,
    mode: StoredAs,
    increments: Increments,
) -> (tempfile::TempDir, Store, Store) {
    let never_dir = tempfile::tempdir().unwrap();
    let never = open_checkpointed(never_dir.path(), 1 << 16, Increments::ReadKeys);
    let b = open_checkpointed(dir, 1 << 16, increments);
    for s in [&never, &b] {
        s.create_flow(flow(mode)).unwrap();
        s.apply("f", &upserts(0..40, 1)).unwrap();
    }
    drop(b);
    (
        never_dir,
        never,
        open_checkpointed(dir, 1 << 16, increments),
    )
}

#[test]
fn increments_read_their_keys_until_they_have_read_a_quarter_of_the_table_then_read_it_whole() {
    for mode in [StoredAs::Scd2, StoredAs::Bitemporal] {
        let dir = tempfile::tempdir().unwrap();
        let (_never_dir, never, b) = forty_keys(dir.path(), mode, Increments::default());
        assert!(out_of_memory(&b));
        // 4 keys, then 5: 9 of 40 read, under a quarter.
        for (keys, seq) in [(0..4, 2), (10..15, 3)] {
            let (commit, expected) = apply_both(&b, &never, keys, seq);
            assert_eq!(commit.metrics, expected.metrics);
            assert!(out_of_memory(&b), "{mode:?}, commit {seq}");
        }
        // One more key makes 10 of 40: this increment reads the table whole, and keeps it.
        apply_both(&b, &never, 20..21, 4);
        assert!(!out_of_memory(&b), "{mode:?}");
        apply_both(&b, &never, 30..32, 5);
        assert!(!out_of_memory(&b), "{mode:?}");
        assert_eq!(scanned(&b, "t", None), scanned(&never, "t", None));
        assert_eq!(
            common::engine_changes(&b, "t", 1, 5).unwrap(),
            common::engine_changes(&never, "t", 1, 5).unwrap()
        );
        // A reopen starts the count again.
        drop(b);
        let b = open_checkpointed(dir.path(), 1 << 16, Increments::default());
        b.apply("f", &upserts(0..9, 6)).unwrap();
        assert!(out_of_memory(&b), "{mode:?}");
        b.apply("f", &upserts(0..1, 7)).unwrap();
        assert!(!out_of_memory(&b), "{mode:?}");
        assert!(b.verify().unwrap().ok());
    }
}

#[test]
fn the_first_increment_after_an_open_reads_its_keys_however_many_and_the_next_reads_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let (_never_dir, never, b) =
        forty_keys(dir.path(), StoredAs::Bitemporal, Increments::default());
    apply_both(&b, &never, 0..40, 2);
    assert!(out_of_memory(&b));
    apply_both(&b, &never, 7..8, 3);
    assert!(!out_of_memory(&b));
    assert_eq!(scanned(&b, "t", None), scanned(&never, "t", None));
}

#[test]
fn increments_that_always_read_their_keys_leave_the_table_out_of_memory_however_many() {
    let dir = tempfile::tempdir().unwrap();
    let (_never_dir, never, b) = forty_keys(dir.path(), StoredAs::Scd2, Increments::ReadKeys);
    for seq in 2..6 {
        apply_both(&b, &never, 0..40, seq);
        assert!(out_of_memory(&b));
    }
    assert_eq!(scanned(&b, "t", None), scanned(&never, "t", None));
    for v in 0..=5 {
        assert_eq!(scanned(&b, "t", Some(v)), scanned(&never, "t", Some(v)));
    }
}

/// Commits large enough that their log is encoded on a second thread while the commit counts
/// and freezes (1,024 logged events and more), with duplicates and conflicts among their events:
/// the log holds exactly the events that changed something, so a table rebuilt from it equals
/// the table as applied, at every version, in its change feed and in what each commit counted.
#[test]
fn a_large_commit_whose_log_is_encoded_beside_it_rebuilds_as_it_was_applied() {
    for mode in [StoredAs::Scd2, StoredAs::Bitemporal] {
        let (dir, never_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (a, never) = (
            open(dir.path(), OpenMode::Eager),
            open(never_dir.path(), OpenMode::Eager),
        );
        a.create_flow(flow(mode)).unwrap();
        never.create_flow(flow(mode)).unwrap();
        let ev = |k: i64, seq: i64, v: &str| (k, seq, seq, k % 97 == 0, Some(v.to_string()));
        let first: Vec<Ev> = (0..1500).map(|k| ev(k, 1, "a")).collect();
        // A third of the first commit again (duplicates), the same sequences with another
        // value (conflicts), and 1,500 new events, some late on both timelines.
        let second: Vec<Ev> = (0..500)
            .map(|k| ev(k, 1, "a"))
            .chain((500..700).map(|k| ev(k, 1, "b")))
            .chain((0..1500).map(|k| ev(k, if k % 10 == 0 { 0 } else { 2 }, "c")))
            .collect();
        for events in [&first, &second] {
            let ca = a.apply("f", &batch(events)).unwrap();
            let cn = never.apply("f", &batch(events)).unwrap();
            assert_eq!(ca.metrics, cn.metrics);
        }
        // The first commit: 1,500 keys, 16 of them (every 97th) deleted before they existed.
        let first = &a.history("t").unwrap()[1];
        assert_eq!(first.metrics.num_upserted_rows, 1484, "{mode:?}");
        assert_eq!(first.metrics.num_deleted_rows, 0, "{mode:?}");
        let second = &a.history("t").unwrap()[2];
        assert_eq!(second.metrics.num_duplicates_ignored, 500, "{mode:?}");
        assert_eq!(second.metrics.num_conflicts_resolved, 200, "{mode:?}");
        drop(a);
        // Rebuilt from its log, its pages written again.
        forget_summary(dir.path());
        let a = open(dir.path(), OpenMode::Lazy);
        let metrics = |s: &Store| -> Vec<_> {
            s.history("t")
                .unwrap()
                .iter()
                .map(|c| c.metrics.clone())
                .collect()
        };
        assert_eq!(metrics(&a), metrics(&never), "{mode:?}");
        for v in 0..=2 {
            assert_eq!(
                common::engine_rows_at(&a, "t", Some(v)),
                common::engine_rows_at(&never, "t", Some(v)),
                "{mode:?} version {v}"
            );
        }
        assert_eq!(
            common::engine_changes(&a, "t", 1, 2).unwrap(),
            common::engine_changes(&never, "t", 1, 2).unwrap()
        );
        assert!(a.verify().unwrap().ok());
    }
}

/// An increment after an open that brings events to 600 keys reads their 600 heads, half of them
/// on a second thread (from 256), each key with hot rows and events (a tail of 2 with 5 commits
/// before: pages too): the table equals a store that never closed, at every version, and its
/// next increment, which reads no head, too.
#[test]
fn an_increment_that_reads_hundreds_of_heads_at_once_equals_a_store_that_never_closed() {
    for mode in [StoredAs::Scd2, StoredAs::Bitemporal] {
        let dir = tempfile::tempdir().unwrap();
        let never_dir = tempfile::tempdir().unwrap();
        let never = open_checkpointed(never_dir.path(), 1 << 16, Increments::ReadKeys);
        let b = open_checkpointed(dir.path(), 1 << 16, Increments::ReadKeys);
        for s in [&never, &b] {
            s.create_flow(flow(mode)).unwrap();
        }
        for seq in 1..=5 {
            apply_both(&b, &never, 0..600, seq);
        }
        drop(b);
        let b = open_checkpointed(dir.path(), 1 << 16, Increments::ReadKeys);
        let (cb, cn) = apply_both(&b, &never, 0..600, 6);
        assert_eq!(cb.metrics, cn.metrics, "{mode:?}");
        assert!(out_of_memory(&b), "{mode:?}");
        let (cb, cn) = apply_both(&b, &never, 300..301, 7);
        assert_eq!(cb.metrics, cn.metrics, "{mode:?}");
        for v in 0..=7 {
            assert_eq!(
                scanned(&b, "t", Some(v)),
                scanned(&never, "t", Some(v)),
                "{mode:?} version {v}"
            );
        }
        assert!(b.verify().unwrap().ok());
    }
}

/// VACUUM of a table that was not read since the store opened (its row count taken from its
/// records, the table never read whole, also past a property commit after its last checkpoint)
/// does what VACUUM of the same table in memory does: the same report, and the same table at
/// every version kept.
#[test]
fn a_vacuum_of_a_table_not_read_since_the_open_equals_one_of_the_table_in_memory() {
    let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let options = || StoreOptions {
        hot_events_per_key: 1,
        checkpoints: Checkpoints {
            every_events: 7,
            on_close: OnClose::Checkpoint,
        },
        ..Default::default()
    };
    let commits: Vec<Vec<Ev>> = (0..12)
        .map(|i| {
            (0..3)
                .map(|k| (k, i, i, i % 5 == 4 && k == 1, Some(format!("k{k}v{i}"))))
                // Late on both timelines: rows written and retired.
                .chain([(2, i / 2, i / 2, false, Some(format!("late{i}")))])
                .collect()
        })
        .collect();
    for dir in [a_dir.path(), b_dir.path()] {
        let s = Store::open_with(dir, options()).unwrap();
        s.create_flow(flow(StoredAs::Bitemporal)).unwrap();
        for c in &commits {
            s.apply("f", &batch(c)).unwrap();
        }
    }
    // `a` reads its table whole; `b` is opened afresh and VACUUMed before anything reads it.
    let (a, b) = (
        Store::open_with(a_dir.path(), options()).unwrap(),
        Store::open_with(b_dir.path(), options()).unwrap(),
    );
    a.read("t", |r| r.live_rows()).unwrap();
    for s in [&a, &b] {
        let note = [("note".to_string(), "kept".to_string())].into();
        s.set_properties("t", note).unwrap();
    }
    let vacuum = |s: &Store| {
        s.vacuum_with(
            "t",
            std::time::Duration::ZERO,
            asof::RetentionCheck::Disabled,
        )
        .unwrap()
    };
    let (ra, rb) = (vacuum(&a), vacuum(&b));
    assert!(ra.row_versions_removed > 0, "{ra:?}");
    // The bytes count the commit records, which hold each commit's duration and peak memory:
    // their digits differ between two stores written alike (a commit of 999 µs in one, of
    // 1,000 in the other), so the bytes agree up to a few per commit record, the rest exactly.
    let (mut ca, mut cb) = (ra.clone(), rb.clone());
    for r in [&mut ca, &mut cb] {
        (r.bytes_before, r.bytes_after) = (0, 0);
    }
    assert_eq!(ca, cb);
    let near = |x: u64, y: u64| x.abs_diff(y) <= 8 * (ra.commits_removed + 2);
    assert!(near(ra.bytes_before, rb.bytes_before), "{ra:?} {rb:?}");
    assert!(near(ra.bytes_after, rb.bytes_after), "{ra:?} {rb:?}");
    let all = |s: &Store| {
        let versions: Vec<u64> = s.history("t").unwrap().iter().map(|c| c.version).collect();
        let mut lines = Vec::new();
        for v in versions {
            let req = asof::ScanRequest {
                version: Some(v),
                ..Default::default()
            };
            lines.push(match asof::scan_all(s, "t", &req) {
                Ok(b) => sorted_lines(&b),
                Err(e) => vec![e.to_string()],
            });
        }
        lines
    };
    assert_eq!(all(&a), all(&b));
}
