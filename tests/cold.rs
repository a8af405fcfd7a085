//! Cold history (docs/ARCHITECTURE.md, "Cold history"): with a hot tail of two events per key,
//! most of each key's events and timeline live in frozen pages. The table at every version,
//! point lookups, a reopen and VACUUM must read exactly as in a store that keeps everything in
//! memory, while late events thaw frozen history and freeze it again.

use crate::common;

use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use asof::{
    Checkpoints, ColumnSelection, Condition, FlowSpec, Store, StoreOptions, StoredAs, Value,
};
use rand::{Rng, SeedableRng};

/// `(key, business seq, system seq, delete, value)`
type Ev = (i64, i64, i64, bool, i64);

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, false),
        Field::new("b", DataType::Int64, false),
        Field::new("s", DataType::Int64, false),
        Field::new("op", DataType::Utf8, false),
        Field::new("v", DataType::Int64, true),
    ]))
}

fn open(dir: &std::path::Path, mode: StoredAs, hot: usize, create: bool) -> Store {
    open_checkpointing(dir, mode, hot, create, Checkpoints::default())
}

fn open_checkpointing(
    dir: &std::path::Path,
    mode: StoredAs,
    hot: usize,
    create: bool,
    checkpoints: Checkpoints,
) -> Store {
    let options = StoreOptions {
        hot_events_per_key: hot,
        checkpoints,
        ..Default::default()
    };
    let store = Store::open_with(dir, options).unwrap();
    if create {
        let mut f = FlowSpec::builder("f", "t", &schema())
            .keys(["k"])
            .sequence_by(["b"])
            .delete_when(Condition::equals("op", "D"))
            .columns(ColumnSelection::all_except(["b", "s", "op"]))
            .stored_as(mode);
        if mode == StoredAs::Bitemporal {
            f = f.system_sequence_by("s");
        }
        store.create_flow(f.build().unwrap()).unwrap();
    }
    store
}

/// Mostly in order on both timelines, some events late by up to 60 sequences (business) or 40
/// (system), a few deletes, and some exact replays of earlier events.
fn events(n: i64, keys: i64, seed: u64) -> Vec<Ev> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut out: Vec<Ev> = Vec::new();
    for i in 0..n {
        if i > 0 && rng.gen_bool(0.04) {
            let again = out[rng.gen_range(0..out.len())];
            out.push(again);
            continue;
        }
        let b = if rng.gen_bool(0.15) {
            i - rng.gen_range(1..60)
        } else {
            i
        };
        let s = if rng.gen_bool(0.05) {
            i - rng.gen_range(1..40)
        } else {
            i
        };
        out.push((
            rng.gen_range(0..keys),
            b,
            s,
            rng.gen_bool(0.03),
            rng.gen_range(0..5),
        ));
    }
    out
}

fn batch(evs: &[Ev]) -> RecordBatch {
    let cols: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(evs.iter().map(|e| e.0))),
        Arc::new(Int64Array::from_iter_values(evs.iter().map(|e| e.1))),
        Arc::new(Int64Array::from_iter_values(evs.iter().map(|e| e.2))),
        Arc::new(StringArray::from_iter_values(evs.iter().map(|e| {
            if e.3 {
                "D"
            } else {
                "U"
            }
        }))),
        Arc::new(Int64Array::from_iter_values(evs.iter().map(|e| e.4))),
    ];
    RecordBatch::try_new(schema(), cols).unwrap()
}

/// Both tables are equal; on a difference, shows the first differing row, not whole tables.
fn assert_same(got: Vec<common::model::MRow>, want: Vec<common::model::MRow>, what: &str) {
    if got != want {
        let only = |a: &[common::model::MRow], b: &[common::model::MRow]| {
            a.iter()
                .filter(|r| !b.contains(r))
                .take(5)
                .cloned()
                .collect::<Vec<_>>()
        };
        panic!(
            "{what}: {} rows vs {}; only in the first: {:?}; only in the second: {:?}",
            got.len(),
            want.len(),
            only(&got, &want),
            only(&want, &got)
        );
    }
}

/// Point lookups of both stores agree at `probes` (key, business, system) points.
fn same_lookups(cold: &Store, hot: &Store, mode: StoredAs, probes: &[(i64, i64, i64)]) {
    for &(k, b, s) in probes {
        let key = [Value::Int(k)];
        let (bt, st) = ([Value::Int(b)], Value::Int(s));
        let system = (mode == StoredAs::Bitemporal).then_some(&st);
        let business = (mode != StoredAs::Scd1).then_some(&bt[..]);
        for sys in [system, None] {
            let got = asof::lookup(cold, "t", &key, business, sys).unwrap();
            let want = asof::lookup(hot, "t", &key, business, sys).unwrap();
            let show = |r: Option<asof::LookupRow>| r.map(|r| (r.values, r.start, r.system_start));
            assert_eq!(show(got), show(want), "lookup k={k} b={b} s={sys:?}");
        }
    }
}

#[test]
fn frozen_history_reads_like_memory() {
    frozen_history_reads_like_memory_with_commits_of(25, 1500);
}

/// With a checkpoint every 100 events, each key's pages are listed in memory only until the
/// next checkpoint writes its head; thaws, scans, lookups, the change feed, the heads of later
/// checkpoints and VACUUM read the rest of the list back from the stored head.
#[test]
fn frozen_history_listed_by_stored_heads_reads_like_memory() {
    let every = Checkpoints {
        every_events: 100,
        ..Default::default()
    };
    frozen_history_reads_like_memory_checkpointing(25, 1500, every);
}

/// Commits of 600 events over 4 keys: each freeze cuts about 150 sequences and 300 row versions
/// of a key at once, more than one page holds, so it writes several. 6,000 events fill chunks of
/// the row store (4,096 row versions) that are then freed, their few hot rows kept beside them,
/// where late events thaw and freeze rows again.
#[test]
fn history_frozen_in_several_pages_at_once_reads_like_memory() {
    frozen_history_reads_like_memory_with_commits_of(600, 6000);
}

/// Commits of 5,000 events over 4 keys: each freezes thousands of events, versions and rows at
/// once, which are encoded as pages on two threads (`engine/cold.rs`, `freeze_keys`).
#[test]
fn history_frozen_by_large_commits_on_two_threads_reads_like_memory() {
    frozen_history_reads_like_memory_with_commits_of(5000, 10000);
}

fn frozen_history_reads_like_memory_with_commits_of(commit_events: usize, n: i64) {
    frozen_history_reads_like_memory_checkpointing(commit_events, n, Checkpoints::default());
}

fn frozen_history_reads_like_memory_checkpointing(
    commit_events: usize,
    n: i64,
    checkpoints: Checkpoints,
) {
    let often = checkpoints.every_events < n as u64;
    let open = |dir: &std::path::Path, mode: StoredAs, hot: usize, create: bool| {
        open_checkpointing(dir, mode, hot, create, checkpoints)
    };
    for (mode, seed) in [
        (StoredAs::Bitemporal, 1),
        (StoredAs::Scd2, 2),
        (StoredAs::Scd1, 3),
    ] {
        let mut evs = events(n, 4, seed);
        if n >= 6000 {
            // 300 keys written once, early: their rows stay hot in the first chunk of the row
            // store, which is freed all the same (only they stay, beside the chunks).
            evs.splice(600..600, (100..400).map(|k| (k, 600, 600, false, 1)));
        }
        let (cold_dir, hot_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let cold = open(cold_dir.path(), mode, 2, true);
        let hot = open(hot_dir.path(), mode, usize::MAX, true);
        for (i, chunk) in evs.chunks(commit_events).enumerate() {
            cold.apply("f", &batch(chunk)).unwrap();
            hot.apply("f", &batch(chunk)).unwrap();
            if i % 3 == 0 {
                assert_same(
                    common::engine_rows(&cold, "t"),
                    common::engine_rows(&hot, "t"),
                    &format!("{mode:?} after commit {}", i + 1),
                );
            }
        }
        let stats = cold.read("t", |t| t.cold_stats()).unwrap();
        let hot_stats = hot.read("t", |t| t.cold_stats()).unwrap();
        if often {
            // Most pages are listed only by the heads the checkpoints wrote.
            assert!(
                stats.pages > 20 && stats.listed_pages * 4 < stats.pages,
                "{mode:?}: {stats:?}"
            );
        } else {
            assert_eq!(stats.listed_pages, stats.pages, "{mode:?}: {stats:?}");
        }
        assert_eq!(hot_stats.frozen_events, 0, "{mode:?}: {hot_stats:?}");
        if mode != StoredAs::Scd1 && n >= 6000 {
            // The freed chunks keep only their hot rows: most row versions have no slot.
            assert!(
                hot_stats.row_slots > 4096 && stats.row_slots * 2 < hot_stats.row_slots,
                "{mode:?}: {stats:?} against {hot_stats:?}"
            );
        }
        if mode != StoredAs::Scd1 {
            // Most of the history is frozen.
            assert!(
                stats.frozen_events > 4 * stats.hot_events && stats.page_bytes > 0,
                "{mode:?}: {stats:?}"
            );
        }
        let latest = hot.read("t", |t| t.latest_version()).unwrap();
        for v in (1..=latest).step_by(7) {
            assert_same(
                common::engine_rows_at(&cold, "t", Some(v)),
                common::engine_rows_at(&hot, "t", Some(v)),
                &format!("{mode:?} at version {v}"),
            );
        }
        // The change feed reads frozen rows a window of commits at a time: over every commit,
        // and over ranges that start and end inside windows, it is the feed of memory.
        let ranges = [
            (1, latest),
            (5, 23),
            (17, 17),
            (9, latest.saturating_sub(3)),
            (2, 2),
        ];
        for (from, to) in ranges.into_iter().filter(|&(f, t)| f <= t && t <= latest) {
            assert_eq!(
                common::engine_changes(&cold, "t", from, to).unwrap(),
                common::engine_changes(&hot, "t", from, to).unwrap(),
                "{mode:?}: changes {from}..={to}"
            );
        }
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let probes: Vec<_> = (0..300)
            .map(|_| {
                (
                    rng.gen_range(0..4),
                    rng.gen_range(-70..1500),
                    rng.gen_range(-50..1500),
                )
            })
            .collect();
        same_lookups(&cold, &hot, mode, &probes);

        // A reopen replays the log and freezes as it goes.
        drop(cold);
        let cold = reopened_same(cold_dir.path(), &hot, mode, "after reopen");
        if mode != StoredAs::Scd1 {
            let reopened = cold.read("t", |t| t.cold_stats()).unwrap();
            assert!(reopened.frozen_events > 0, "{mode:?}: {reopened:?}");
        }
        same_lookups(&cold, &hot, mode, &probes);
        assert_eq!(
            common::engine_changes(&cold, "t", 1, latest).unwrap(),
            common::engine_changes(&hot, "t", 1, latest).unwrap(),
            "{mode:?}: changes after reopen"
        );

        // VACUUM reads the frozen events back to rebuild; the table does not change.
        cold.vacuum_with(
            "t",
            std::time::Duration::ZERO,
            asof::RetentionCheck::Disabled,
        )
        .unwrap();
        hot.vacuum_with(
            "t",
            std::time::Duration::ZERO,
            asof::RetentionCheck::Disabled,
        )
        .unwrap();
        assert_same(
            common::engine_rows(&cold, "t"),
            common::engine_rows(&hot, "t"),
            &format!("{mode:?} after VACUUM"),
        );
        // The rebuild wrote every key's head and let go of its page list.
        let rebuilt = cold.read("t", |t| t.cold_stats()).unwrap();
        assert_eq!(rebuilt.listed_pages, 0, "{mode:?}: {rebuilt:?}");
        // A reopen reads the table from the records its rebuild wrote.
        drop(cold);
        let cold = reopened_same(cold_dir.path(), &hot, mode, "after VACUUM and a reopen");
        same_lookups(&cold, &hot, mode, &probes);
        // And a replay of everything is recognised, event by event, as duplicates.
        let c = cold.apply("f", &batch(&evs)).unwrap();
        assert_eq!(
            c.metrics.num_upserted_rows + c.metrics.num_deleted_rows,
            0,
            "{mode:?}"
        );
    }
}

/// The store in `dir` (hot tail of 2) opened again, checked to hold the table `hot` holds.
fn reopened_same(dir: &std::path::Path, hot: &Store, mode: StoredAs, what: &str) -> Store {
    let cold = open(dir, mode, 2, false);
    assert_same(
        common::engine_rows(&cold, "t"),
        common::engine_rows(hot, "t"),
        &format!("{mode:?} {what}"),
    );
    cold
}

/// A new store with a hot tail of 2 and one that keeps everything in memory, with their folders.
fn cold_and_hot(mode: StoredAs) -> (tempfile::TempDir, Store, tempfile::TempDir, Store) {
    let (cold_dir, hot_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let cold = open(cold_dir.path(), mode, 2, true);
    let hot = open(hot_dir.path(), mode, usize::MAX, true);
    (cold_dir, cold, hot_dir, hot)
}

/// Applies `evs` to both stores, checks that they hold the same table after, and returns how
/// many pages the first one thawed for it.
fn apply_both(cold: &Store, hot: &Store, evs: &[Ev], what: &str) -> u64 {
    let thawed = |s: &Store| s.read("t", |t| t.cold_stats()).unwrap().pages_thawed;
    let before = thawed(cold);
    cold.apply("f", &batch(evs)).unwrap();
    hot.apply("f", &batch(evs)).unwrap();
    assert_same(
        common::engine_rows(cold, "t"),
        common::engine_rows(hot, "t"),
        what,
    );
    thawed(cold) - before
}

/// A late event deep in a key's frozen history thaws only the pages from a little before it:
/// the key's older pages stay frozen (`engine/cold.rs`, `KeyState::thaw_before`), and the
/// table, its lookups and its change feed read as in memory, before and after a reopen. A late
/// event at the key's first version thaws every page.
#[test]
fn a_late_event_thaws_only_the_pages_after_it() {
    for mode in [StoredAs::Bitemporal, StoredAs::Scd2, StoredAs::Scd1] {
        let (cold_dir, cold, _hot_dir, hot) = cold_and_hot(mode);
        // One key, 600 versions in order, on both timelines.
        let evs: Vec<Ev> = (0..600).map(|i| (1, i * 10, i * 10, false, i)).collect();
        for chunk in evs.chunks(50) {
            apply_both(&cold, &hot, chunk, &format!("{mode:?}"));
        }
        let frozen = |s: &Store| s.read("t", |t| t.cold_stats()).unwrap();
        let before = frozen(&cold);
        assert!(before.frozen_events > 500, "{mode:?}: {before:?}");
        // Late by 100 versions on business time, new on system time.
        let late = [(1, 5_005, 6_000, false, 77)];
        let thawed = apply_both(&cold, &hot, &late, &format!("{mode:?} after a late event"));
        assert!(
            thawed > 0 && thawed * 3 < before.pages,
            "{mode:?}: only the last pages thaw: {thawed} of {before:?}"
        );
        // Another, later in the history, then one at the first version.
        for late in [(1, 5_503, 6_010, false, 78), (1, 1, 6_020, false, 79)] {
            let before = frozen(&cold);
            let thawed = apply_both(&cold, &hot, &[late], &format!("{mode:?} after {late:?}"));
            if late.1 == 1 {
                assert_eq!(thawed, before.pages, "{mode:?}: every page thaws");
            } else {
                assert!(
                    thawed * 3 < before.pages,
                    "{mode:?}: {thawed} of {before:?}"
                );
            }
        }
        // More in order: the key freezes again.
        let more: Vec<Ev> = (600..700)
            .map(|i| (1, i * 10, 6_100 + i, false, i))
            .collect();
        cold.apply("f", &batch(&more)).unwrap();
        hot.apply("f", &batch(&more)).unwrap();
        let probes: Vec<_> = (0..200)
            .map(|i| (1, i * 37 % 7_100, 5_990 + i * 13 % 900))
            .collect();
        same_lookups(&cold, &hot, mode, &probes);
        let latest = hot.read("t", |t| t.latest_version()).unwrap();
        for v in [latest - 4, latest - 3, latest - 2, latest] {
            assert_same(
                common::engine_rows_at(&cold, "t", Some(v)),
                common::engine_rows_at(&hot, "t", Some(v)),
                &format!("{mode:?} at version {v}"),
            );
        }
        assert_eq!(
            common::engine_changes(&cold, "t", 1, latest).unwrap(),
            common::engine_changes(&hot, "t", 1, latest).unwrap(),
            "{mode:?}: changes"
        );
        drop(cold);
        let cold = reopened_same(cold_dir.path(), &hot, mode, "after a reopen");
        same_lookups(&cold, &hot, mode, &probes);
    }
}

/// A key that froze a thousand versions at once (one large commit) wrote them as many pages,
/// each with the rows its versions show: a late event a hundred versions back thaws the last
/// two or three of them, not the whole commit's (`encode_cut` split rows by id before, so a
/// row lagged its version by a page and a thaw walked back to the cut's first page).
#[test]
fn a_late_event_into_a_large_commit_thaws_only_its_last_pages() {
    for mode in [StoredAs::Bitemporal, StoredAs::Scd2, StoredAs::Scd1] {
        let (cold_dir, cold, _hot_dir, hot) = cold_and_hot(mode);
        let evs: Vec<Ev> = (0..1_000).map(|i| (1, i * 10, i * 10, false, i)).collect();
        apply_both(&cold, &hot, &evs, &format!("{mode:?}"));
        let frozen = |s: &Store| s.read("t", |t| t.cold_stats()).unwrap();
        let before = frozen(&cold);
        assert!(before.pages >= 15, "{mode:?}: {before:?}");
        let late = [(1, 9_005, 20_000, false, 77)];
        let thawed = apply_both(&cold, &hot, &late, &format!("{mode:?} after a late event"));
        assert!(
            (1..=3).contains(&thawed),
            "{mode:?}: {thawed} pages thawed of {before:?}"
        );
        let probes: Vec<_> = (0..100)
            .map(|i| (1, i * 101 % 10_100, 9_000 + i * 113 % 12_000))
            .collect();
        same_lookups(&cold, &hot, mode, &probes);
        drop(cold);
        reopened_same(cold_dir.path(), &hot, mode, "after a reopen");
    }
}

/// A scan that began in storage order, before anything was frozen, and goes on after commits
/// froze the rows it has yet to read: it reads them back from their pages (by row id), and
/// returns exactly the table of the version it is pinned to.
#[test]
fn a_scan_in_storage_order_reads_rows_frozen_under_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), StoredAs::Scd2, 2, true);
    let evs = events(400, 2, 7);
    store.apply("f", &batch(&evs[..4])).unwrap();
    let spec = common::pinned_to_latest(&store, "t");
    let read = |cursor: &mut asof_storage::ScanCursor, n: usize| {
        common::scan_step(&store, "t", &spec, cursor, n)
    };
    let mut cursor = asof_storage::ScanCursor::default();
    let mut got = read(&mut cursor, 1);
    assert_eq!(store.read("t", |t| t.cold_stats()).unwrap().frozen_keys, 0);
    for chunk in evs[4..].chunks(20) {
        store.apply("f", &batch(chunk)).unwrap();
    }
    assert!(store.read("t", |t| t.cold_stats()).unwrap().frozen_events > 0);
    while !cursor.is_done() {
        got.extend(read(&mut cursor, 1));
    }
    let mut fresh = asof_storage::ScanCursor::default();
    let mut want = Vec::new();
    while !fresh.is_done() {
        want.extend(read(&mut fresh, 100));
    }
    got.sort();
    want.sort();
    assert!(want.len() > 1, "{want:?}");
    assert_eq!(got, want);
}

/// A key-by-key scan of a table in memory, a row per call, so that it stops inside every key:
/// it goes on from the frozen rows it read while no commit comes between its calls, and reads
/// them again after commits whose late events thaw and refreeze the key it stopped in; either
/// way it returns exactly the table of the version it is pinned to.
#[test]
fn a_scan_stopped_inside_keys_reads_on_as_pinned_while_late_events_thaw_them() {
    for mode in [StoredAs::Scd2, StoredAs::Bitemporal] {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), mode, 2, true);
        let evs = events(900, 3, 11);
        for chunk in evs[..600].chunks(25) {
            store.apply("f", &batch(chunk)).unwrap();
        }
        assert!(store.read("t", |t| t.cold_stats()).unwrap().frozen_events > 100);
        let spec = common::pinned_to_latest(&store, "t");
        let read = |cursor: &mut asof_storage::ScanCursor, n: usize| {
            common::scan_step(&store, "t", &spec, cursor, n)
        };
        let mut want = Vec::new();
        let mut fresh = asof_storage::ScanCursor::default();
        while !fresh.is_done() {
            want.extend(read(&mut fresh, 1000));
        }
        let (mut got, mut cursor) = (Vec::new(), asof_storage::ScanCursor::default());
        let mut more = evs[600..].chunks(10);
        let mut calls = 0;
        while !cursor.is_done() {
            got.extend(read(&mut cursor, 1));
            calls += 1;
            // Every fifth call, a commit in between: late events among the frozen ones.
            if calls % 5 == 0 {
                if let Some(chunk) = more.next() {
                    store.apply("f", &batch(chunk)).unwrap();
                }
            }
        }
        assert!(more.next().is_none(), "{mode:?}: the scan ended first");
        assert!(
            store.read("t", |t| t.cold_stats()).unwrap().pages_thawed > 0,
            "{mode:?}"
        );
        assert!(want.len() > 100, "{mode:?}: {}", want.len());
        assert_eq!(got, want, "{mode:?}");
    }
}

/// The rows `req` selects from `t`, each as its cells joined, sorted (a table in memory and one
/// read span by span return them in different orders).
fn scanned(store: &Store, req: &asof::ScanRequest) -> Vec<String> {
    let mut out = Vec::new();
    for b in asof::scan_all(store, "t", req).unwrap() {
        let cells: Vec<_> = (0..b.num_columns())
            .map(|c| arrow::compute::cast(b.column(c), &DataType::Utf8).unwrap())
            .collect();
        for r in 0..b.num_rows() {
            let row: Vec<&str> = cells
                .iter()
                .map(|a| {
                    let a = a.as_any().downcast_ref::<StringArray>().unwrap();
                    if arrow::array::Array::is_null(a, r) {
                        "∅"
                    } else {
                        a.value(r)
                    }
                })
                .collect();
            out.push(row.join("|"));
        }
    }
    out.sort();
    out
}

/// `n` events over `keys` keys applied 25 at a time to a store with a hot tail of 2, then
/// closed (its folder is returned), and to one that keeps everything in memory (returned open).
fn closed_and_in_memory(
    mode: StoredAs,
    n: i64,
    keys: i64,
    seed: u64,
) -> (tempfile::TempDir, tempfile::TempDir, Store) {
    let evs = events(n, keys, seed);
    let (cold_dir, hot_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let cold = open(cold_dir.path(), mode, 2, true);
    let hot = open(hot_dir.path(), mode, usize::MAX, true);
    for chunk in evs.chunks(25) {
        cold.apply("f", &batch(chunk)).unwrap();
        hot.apply("f", &batch(chunk)).unwrap();
    }
    (cold_dir, hot_dir, hot)
}

/// Scans of a table that is not in memory skip the frozen pages whose zone maps rule out every
/// row (docs/FORMAT.md §6): as of points and over ranges of both timelines, at past versions and
/// the latest, they return exactly what a store holding everything in memory returns.
#[test]
fn time_selective_scans_of_frozen_pages_read_like_memory() {
    time_selective_scans_read_like_memory(
        1500,
        4,
        &[(StoredAs::Bitemporal, 11), (StoredAs::Scd2, 12)],
    );
}

/// 4,000 events on one key make it more than 64 pages: its head lists them apart, in chunks
/// with merged zone maps (format 10, `format/page_list.rs`), and scans and lookups read only
/// the chunks whose zones may hold what they read; they answer as memory does.
#[test]
fn scans_and_lookups_of_a_key_whose_page_list_is_in_chunks_read_like_memory() {
    let (cold_dir, _hot_dir, _hot) = closed_and_in_memory(StoredAs::Bitemporal, 4000, 1, 11);
    let cold = open(cold_dir.path(), StoredAs::Bitemporal, 2, false);
    let stats = cold.read("t", |t| t.cold_stats()).unwrap();
    assert!(stats.pages > 64, "{stats:?}");
    drop(cold);
    time_selective_scans_read_like_memory(4000, 1, &[(StoredAs::Bitemporal, 11)]);
    lookups_of_keys_read_alone_answer_like_memory(4000, 1, &[(StoredAs::Bitemporal, 21)]);
}

fn time_selective_scans_read_like_memory(n: i64, keys: i64, modes: &[(StoredAs, u64)]) {
    use asof::{ScanRequest, TimeSelection};
    for &(mode, seed) in modes {
        let (cold_dir, _hot_dir, hot) = closed_and_in_memory(mode, n, keys, seed);
        let latest = hot.read("t", |t| t.latest_version()).unwrap();
        // Closed: the table is read back span by span from its heads and pages.
        let cold = open(cold_dir.path(), mode, 2, false);
        let times = [-100, 0, n * 2 / 9, n * 3 / 5, n - 50, n + 500];
        let mut selections = vec![TimeSelection::All];
        selections.extend(times.iter().map(|&t| TimeSelection::as_of(t)));
        selections.push(TimeSelection::from_to(200, 260));
        selections.push(TimeSelection::from_to(1000, 1600));
        let systems = if mode == StoredAs::Bitemporal {
            selections.clone()
        } else {
            vec![TimeSelection::All]
        };
        let mut nonempty = 0;
        for version in [None, Some(latest / 3), Some(latest - 1)] {
            for business in &selections {
                for system in &systems {
                    let req = ScanRequest {
                        business: business.clone(),
                        system: system.clone(),
                        version,
                        ..Default::default()
                    };
                    let want = scanned(&hot, &req);
                    nonempty += usize::from(!want.is_empty());
                    assert_eq!(scanned(&cold, &req), want, "{mode:?} {req:?}");
                }
            }
        }
        assert!(nonempty > selections.len(), "{mode:?}: {nonempty}");
        assert!(
            cold.key_span(
                "t",
                (std::ops::Bound::Unbounded, std::ops::Bound::Unbounded),
                1,
                asof::Caching::Pass
            )
            .unwrap()
            .is_some(),
            "{mode:?}: the scans read the table span by span, never loading it"
        );
    }
}

/// A point lookup of a table that is not in memory reads the key alone; its first lookup scans
/// the key at the point (reading only the pages whose zone maps may hold it), the next builds
/// the key's index. Both answer as a store holding everything in memory does, on both timelines,
/// now and in the past.
#[test]
fn first_and_later_lookups_of_a_key_read_alone_answer_like_memory() {
    let modes = [(StoredAs::Bitemporal, 21), (StoredAs::Scd2, 22)];
    lookups_of_keys_read_alone_answer_like_memory(1200, 4, &modes);
}

fn lookups_of_keys_read_alone_answer_like_memory(n: i64, keys: i64, modes: &[(StoredAs, u64)]) {
    for &(mode, seed) in modes {
        let (cold_dir, _hot_dir, hot) = closed_and_in_memory(mode, n, keys, seed);
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let show = |r: Option<asof::LookupRow>| r.map(|r| (r.values, r.start, r.system_start));
        for _ in 0..80 {
            let (k, b, s) = (
                rng.gen_range(0..keys),
                rng.gen_range(-70..n + 100),
                rng.gen_range(-50..n + 100),
            );
            let key = [Value::Int(k)];
            let bt = [Value::Int(b)];
            let st = Value::Int(s);
            let system = (mode == StoredAs::Bitemporal).then_some(&st);
            // A fresh store: the key is read alone, and its first lookup is a scan.
            let fresh = open(cold_dir.path(), mode, 2, false);
            for sys in [system, None, system] {
                let got = asof::lookup(&fresh, "t", &key, Some(&bt[..]), sys).unwrap();
                let want = asof::lookup(&hot, "t", &key, Some(&bt[..]), sys).unwrap();
                assert_eq!(show(got), show(want), "{mode:?} k={k} b={b} s={sys:?}");
            }
        }
    }
}

/// A table of every column type, with NULLs, read back from its pages (the scan appends a
/// page's columns to Arrow a block at a time where it can, a cell at a time otherwise) returns
/// exactly what a store holding everything in memory returns, batch boundaries and all.
#[test]
fn a_frozen_table_of_every_column_type_scans_like_memory() {
    use arrow::array::{
        BinaryBuilder, BooleanBuilder, Date32Builder, Decimal128Builder, Float32Builder,
        Float64Builder, Int32Builder, Int64Builder, ListBuilder, StringBuilder,
        TimestampMicrosecondBuilder, TimestampMillisecondBuilder,
    };
    use arrow::datatypes::TimeUnit;
    use arrow::util::display::{ArrayFormatter, FormatOptions};
    let fields = vec![
        Field::new("k", DataType::Int64, false),
        Field::new("b", DataType::Int64, false),
        Field::new("i64", DataType::Int64, true),
        Field::new("i32", DataType::Int32, true),
        Field::new("f64", DataType::Float64, true),
        Field::new("f32", DataType::Float32, true),
        Field::new("bool", DataType::Boolean, true),
        Field::new("text", DataType::Utf8, true),
        Field::new("bytes", DataType::Binary, true),
        Field::new("day", DataType::Date32, true),
        Field::new("us", DataType::Timestamp(TimeUnit::Microsecond, None), true),
        Field::new(
            "ms_utc",
            DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
            true,
        ),
        Field::new("dec", DataType::Decimal128(10, 2), true),
        Field::new(
            "list",
            DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))),
            true,
        ),
    ];
    let schema = Arc::new(Schema::new(fields));
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let mut batches = Vec::new();
    for commit in 0..40i64 {
        let n = 30;
        let mut k = Int64Builder::new();
        let mut b = Int64Builder::new();
        let (mut i64s, mut i32s) = (Int64Builder::new(), Int32Builder::new());
        let (mut f64s, mut f32s) = (Float64Builder::new(), Float32Builder::new());
        let (mut bools, mut texts) = (BooleanBuilder::new(), StringBuilder::new());
        let (mut bytes, mut days) = (BinaryBuilder::new(), Date32Builder::new());
        let mut us = TimestampMicrosecondBuilder::new();
        let mut ms = TimestampMillisecondBuilder::new().with_timezone("UTC");
        let mut dec = Decimal128Builder::new()
            .with_precision_and_scale(10, 2)
            .unwrap();
        let mut list = ListBuilder::new(StringBuilder::new());
        for j in 0..n {
            let seq = commit * n + j;
            k.append_value(rng.gen_range(0..5));
            // Some events late, so that history thaws and freezes again.
            b.append_value(
                seq - if rng.gen_bool(0.1) {
                    rng.gen_range(1..50)
                } else {
                    0
                },
            );
            let v: i64 = rng.gen_range(-1000..1000);
            let null = |rng: &mut rand::rngs::StdRng| rng.gen_bool(0.2);
            i64s.append_option((!null(&mut rng)).then_some(v * 1_000_000_007));
            i32s.append_option((!null(&mut rng)).then_some(v as i32));
            f64s.append_option((!null(&mut rng)).then_some(v as f64 / 7.0));
            f32s.append_option((!null(&mut rng)).then_some(v as f32 / 3.0));
            bools.append_option((!null(&mut rng)).then_some(v % 2 == 0));
            texts.append_option((!null(&mut rng)).then(|| format!("é{v}")));
            bytes.append_option((!null(&mut rng)).then(|| vec![0u8, 255, (v & 0xff) as u8]));
            days.append_option((!null(&mut rng)).then_some(v as i32 * 3));
            us.append_option((!null(&mut rng)).then_some(v * 1_000_003));
            ms.append_option((!null(&mut rng)).then_some(v * 1_009));
            dec.append_option((!null(&mut rng)).then_some(v as i128 * 101));
            if null(&mut rng) {
                list.append(false);
            } else {
                list.values().append_value(format!("{v}"));
                list.values().append_null();
                list.append(true);
            }
        }
        let cols: Vec<ArrayRef> = vec![
            Arc::new(k.finish()),
            Arc::new(b.finish()),
            Arc::new(i64s.finish()),
            Arc::new(i32s.finish()),
            Arc::new(f64s.finish()),
            Arc::new(f32s.finish()),
            Arc::new(bools.finish()),
            Arc::new(texts.finish()),
            Arc::new(bytes.finish()),
            Arc::new(days.finish()),
            Arc::new(us.finish()),
            Arc::new(ms.finish()),
            Arc::new(dec.finish()),
            Arc::new(list.finish()),
        ];
        batches.push(RecordBatch::try_new(schema.clone(), cols).unwrap());
    }
    let flow = FlowSpec::builder("f", "t", &schema)
        .keys(["k"])
        .sequence_by(["b"])
        .stored_as(StoredAs::Scd2)
        .build()
        .unwrap();
    let (cold_dir, hot_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    for (dir, hot_events_per_key) in [(&cold_dir, 2), (&hot_dir, usize::MAX)] {
        let store = Store::open_with(
            dir.path(),
            StoreOptions {
                hot_events_per_key,
                ..Default::default()
            },
        )
        .unwrap();
        store.create_flow(flow.clone()).unwrap();
        for b in &batches {
            store.apply("f", b).unwrap();
        }
    }
    let hot = open(hot_dir.path(), StoredAs::Scd2, usize::MAX, false);
    // The whole table into memory (a lookup-free read of it), as written.
    hot.read("t", |t| t.live_rows()).unwrap();
    let cold = Store::open_with(cold_dir.path(), StoreOptions::default()).unwrap();
    let text = |store: &Store, batch_size: usize| -> Vec<Vec<String>> {
        let options = FormatOptions::default().with_null("∅");
        let mut out = Vec::new();
        let req = asof::ScanRequest {
            batch_size,
            ..Default::default()
        };
        for batch in asof::scan_all(store, "t", &req).unwrap() {
            assert!(batch.num_rows() <= batch_size);
            let cols: Vec<_> = (batch.columns().iter())
                .map(|c| ArrayFormatter::try_new(c.as_ref(), &options).unwrap())
                .collect();
            for r in 0..batch.num_rows() {
                out.push(cols.iter().map(|c| c.value(r).to_string()).collect());
            }
        }
        out.sort();
        out
    };
    let want = text(&hot, 8192);
    assert!(want.len() > 1000, "{} rows", want.len());
    // Batches that end inside a key's rows as well as whole ones.
    for batch_size in [8192, 7, 1] {
        let got = text(&cold, batch_size);
        assert_eq!(got.len(), want.len(), "batches of {batch_size}");
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(g, w, "batches of {batch_size}");
        }
    }
    let frozen = cold.read("t", |t| t.cold_stats()).unwrap().frozen_events;
    assert!(frozen > 500, "most history is in pages: {frozen} events");
}

/// The bounds of tables sequenced by a timestamp (appended to Arrow a column at a time, in one
/// loop), by two columns (structs, appended a cell at a time), and of a BITEMPORAL one, read back
/// from their pages, whole and trimmed to windows on either timeline, are what memory returns:
/// open ends as NULLs, trimmed ends as the window's.
#[test]
fn frozen_bounds_of_a_timestamp_or_a_struct_sequence_scan_like_memory() {
    use arrow::array::TimestampMicrosecondArray;
    use asof::{ScanRequest, TimeSelection};
    let ts = DataType::Timestamp(arrow::datatypes::TimeUnit::Microsecond, None);
    let schema: SchemaRef = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, false),
        Field::new("b", ts, false),
        Field::new("c", DataType::Int64, false),
        Field::new("s", DataType::Int64, false),
        Field::new("v", DataType::Int64, true),
    ]));
    // 600 events on 3 keys, a sixth of them late by up to 30 on business time, a tenth by up to
    // 20 on system time.
    let mut rng = rand::rngs::StdRng::seed_from_u64(31);
    let evs: Vec<(i64, i64, i64, i64)> = (0..600)
        .map(|i| {
            let late = if rng.gen_bool(0.16) {
                rng.gen_range(1..30)
            } else {
                0
            };
            let sys_late = if rng.gen_bool(0.1) {
                rng.gen_range(1..20)
            } else {
                0
            };
            (
                rng.gen_range(0..3),
                i - late,
                rng.gen_range(0..4),
                i - sys_late,
            )
        })
        .collect();
    let batches: Vec<RecordBatch> = (evs.chunks(50))
        .map(|c| {
            let cols: Vec<ArrayRef> = vec![
                Arc::new(Int64Array::from_iter_values(c.iter().map(|e| e.0))),
                Arc::new(TimestampMicrosecondArray::from_iter_values(
                    c.iter().map(|e| e.1),
                )),
                Arc::new(Int64Array::from_iter_values(c.iter().map(|e| e.2))),
                Arc::new(Int64Array::from_iter_values(c.iter().map(|e| e.3))),
                Arc::new(Int64Array::from_iter_values(c.iter().map(|e| e.1 * 7))),
            ];
            RecordBatch::try_new(schema.clone(), cols).unwrap()
        })
        .collect();
    let flows = [
        ("by_time", &["b"][..], StoredAs::Scd2),
        ("by_pair", &["b", "c"][..], StoredAs::Scd2),
        ("both_times", &["b"][..], StoredAs::Bitemporal),
    ];
    let (cold_dir, hot_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    for (dir, hot_events_per_key) in [(&cold_dir, 2), (&hot_dir, usize::MAX)] {
        let store = open(dir.path(), StoredAs::Scd2, hot_events_per_key, false);
        for (table, sequence, mode) in flows {
            let mut flow = FlowSpec::builder(table, table, &schema)
                .keys(["k"])
                .sequence_by(sequence.iter().copied())
                .columns(ColumnSelection::all_except(["c", "s"]))
                .stored_as(mode);
            if mode == StoredAs::Bitemporal {
                flow = flow.system_sequence_by("s");
            }
            store.create_flow(flow.build().unwrap()).unwrap();
            for b in &batches {
                store.apply(table, b).unwrap();
            }
        }
    }
    let hot = open(hot_dir.path(), StoredAs::Scd2, usize::MAX, false);
    let cold = Store::open_with(cold_dir.path(), StoreOptions::default()).unwrap();
    for (table, sequence, mode) in flows {
        assert!(cold.read(table, |t| t.cold_stats()).unwrap().pages > 0);
        // A timestamp is its microseconds.
        let at = |t: i64| match sequence.len() {
            1 => vec![Value::Int(t)],
            _ => vec![Value::Int(t), Value::Int(0)],
        };
        let windows = |at: &dyn Fn(i64) -> Vec<Value>| {
            [
                TimeSelection::All,
                TimeSelection::FromTo(at(100), at(400)),
                TimeSelection::Within(at(100), at(400)),
                TimeSelection::Within(at(-5), at(700)),
            ]
        };
        let systems = match mode {
            StoredAs::Bitemporal => windows(&|t| vec![Value::Int(t)]).to_vec(),
            _ => vec![TimeSelection::All],
        };
        for business in windows(&at) {
            for system in &systems {
                let req = ScanRequest {
                    business: business.clone(),
                    system: system.clone(),
                    ..Default::default()
                };
                let all = |store: &Store| {
                    let batches = asof::scan_all(store, table, &req).unwrap();
                    arrow::compute::concat_batches(&batches[0].schema(), &batches).unwrap()
                };
                let (got, want) = (all(&cold), all(&hot));
                assert!(want.num_rows() > 100, "{table} {req:?}");
                assert_eq!(got, want, "{table} {req:?}");
            }
        }
    }
}
