//! Property tests: the engine equals the reference model (docs/SEMANTICS.md §3–§6) on random event sets, with
//! every flow option, in any arrival order, batching, with restarts and replays.

use crate::common;

use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, ListBuilder, RecordBatch, StringArray, StringBuilder};
use arrow::datatypes::{DataType, Field, Schema};
use asof::{
    Checkpoints, ColumnSelection, Condition, FlowSpec, Folding, OnClose, RefreshMode, Store,
    StoreOptions, StoredAs, Value,
};
use common::model::{model, MEvent, MFlow, Op};
use proptest::prelude::*;

#[derive(Clone, Debug)]
struct Ev {
    key: i64,
    seq: i64,
    sys: i64,
    op: u8, // 0 upsert, 1 delete, 2 truncate
    a: Option<i64>,
    b: Option<&'static str>,
    upd: Option<Vec<&'static str>>,
}

#[derive(Clone, Debug)]
struct Options {
    mode: StoredAs,
    ignore_null: u8, // 0 none, 1 all, 2 on (a)
    track_a: bool,
    ctu: bool,
    truncate: bool,
    /// `StoreOptions::hot_events_per_key`: with one or two, nearly every commit freezes some
    /// key history to frozen pages and many thaw it again.
    hot_tail: usize,
    /// `StoreOptions::commit_part_rows`: a commit of more rows is applied in parts, parted by
    /// key (one or three rows: nearly every commit is).
    part_rows: u64,
    /// `StoreOptions::folding`: with `TwoThreads`, every commit of two keys or more is folded
    /// in shares on two threads.
    folding: Folding,
}

fn options() -> impl Strategy<Value = Options> {
    (
        0u8..3,
        0u8..3,
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        prop_oneof![
            Just(1usize),
            Just(2),
            Just(asof::DEFAULT_HOT_EVENTS_PER_KEY)
        ],
        prop_oneof![Just(1u64), Just(3), Just(asof::DEFAULT_COMMIT_PART_ROWS)],
        prop_oneof![Just(Folding::Auto), Just(Folding::TwoThreads)],
    )
        .prop_map(|(m, ig, tr, ctu, trunc, hot_tail, part_rows, folding)| {
            let mode = [StoredAs::Scd1, StoredAs::Scd2, StoredAs::Bitemporal][m as usize];
            let ctu = ctu && mode != StoredAs::Bitemporal;
            Options {
                mode,
                ignore_null: if ctu { 0 } else { ig },
                track_a: tr && mode != StoredAs::Scd1,
                ctu,
                truncate: trunc && mode == StoredAs::Scd1,
                hot_tail,
                part_rows,
                folding,
            }
        })
}

/// Opens the store at `dir` with the run's hot tail, parts and folding.
fn open(dir: &std::path::Path, o: &Options) -> Store {
    Store::open_with(dir, store_options(o)).unwrap()
}

fn store_options(o: &Options) -> StoreOptions {
    StoreOptions {
        hot_events_per_key: o.hot_tail,
        commit_part_rows: o.part_rows,
        folding: o.folding,
        ..Default::default()
    }
}

fn event(truncate: bool) -> impl Strategy<Value = Ev> {
    let op = if truncate {
        prop_oneof![12 => Just(0u8), 4 => Just(1u8), 1 => Just(2u8)].boxed()
    } else {
        prop_oneof![3 => Just(0u8), 1 => Just(1u8)].boxed()
    };
    (
        0i64..3,
        0i64..8,
        0i64..5,
        op,
        prop_oneof![Just(None), Just(Some(1i64)), Just(Some(2i64))],
        prop_oneof![Just(None), Just(Some("x")), Just(Some("y"))],
        prop_oneof![
            Just(None),
            Just(Some(vec!["a"])),
            Just(Some(vec!["b"])),
            Just(Some(vec!["a", "b"])),
            Just(Some(vec![]))
        ],
    )
        .prop_map(|(key, seq, sys, op, a, b, upd)| Ev {
            key,
            seq,
            sys,
            op,
            a,
            b,
            upd,
        })
}

fn source_schema() -> Schema {
    Schema::new(vec![
        Field::new("k", DataType::Int64, true),
        Field::new("seq", DataType::Int64, false),
        Field::new("sys", DataType::Int64, false),
        Field::new("op", DataType::Utf8, false),
        Field::new("a", DataType::Int64, true),
        Field::new("b", DataType::Utf8, true),
        Field::new(
            "upd",
            DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))),
            true,
        ),
    ])
}

fn flow(o: &Options) -> asof::Flow {
    flow_builder(o).build().expect("valid flow")
}

fn flow_builder(o: &Options) -> asof::FlowBuilder {
    let mut f = FlowSpec::builder("f", "t", &source_schema())
        .keys(["k"])
        .sequence_by(["seq"])
        .stored_as(o.mode)
        .delete_when(Condition::equals("op", "D"))
        .columns(ColumnSelection::all_except(["seq", "sys", "op", "upd"]));
    if o.mode == StoredAs::Bitemporal {
        f = f.system_sequence_by("sys");
    }
    if o.truncate {
        f = f.truncate_when(Condition::equals("op", "T"));
    }
    f = match o.ignore_null {
        1 => f.ignore_null_updates(ColumnSelection::All),
        2 => f.ignore_null_updates(ColumnSelection::only(["a"])),
        _ => f,
    };
    if o.track_a {
        f = f.track_history(ColumnSelection::only(["a"]));
    }
    if o.ctu {
        f = f.columns_to_update("upd");
    }
    f
}

fn batch(evs: &[Ev]) -> RecordBatch {
    let mut upd = ListBuilder::new(StringBuilder::new());
    for e in evs {
        match &e.upd {
            Some(cols) => {
                for c in cols {
                    upd.values().append_value(c);
                }
                upd.append(true);
            }
            None => upd.append(false),
        }
    }
    let cols: Vec<ArrayRef> = vec![
        Arc::new(
            evs.iter()
                .map(|e| (e.op != 2).then_some(e.key))
                .collect::<Int64Array>(),
        ),
        Arc::new(evs.iter().map(|e| Some(e.seq)).collect::<Int64Array>()),
        Arc::new(evs.iter().map(|e| Some(e.sys)).collect::<Int64Array>()),
        Arc::new(
            evs.iter()
                .map(|e| Some(["U", "D", "T"][e.op as usize]))
                .collect::<StringArray>(),
        ),
        Arc::new(evs.iter().map(|e| e.a).collect::<Int64Array>()),
        Arc::new(evs.iter().map(|e| e.b).collect::<StringArray>()),
        Arc::new(upd.finish()),
    ];
    RecordBatch::try_new(Arc::new(source_schema()), cols).unwrap()
}

fn model_of(o: &Options, evs: &[Ev]) -> Vec<common::model::MRow> {
    let mflow = MFlow {
        mode: o.mode,
        tracked: vec![true, !o.track_a, true]
            .into_iter()
            .enumerate()
            .map(|(i, t)| if o.track_a { i == 1 } else { t })
            .collect(),
        ignore_null: match o.ignore_null {
            1 => vec![true, true, true],
            2 => vec![false, true, false],
            _ => vec![false, false, false],
        },
    };
    let events: Vec<MEvent> = evs
        .iter()
        .map(|e| MEvent {
            key: vec![Value::Int(e.key)],
            seq: vec![Value::Int(e.seq)],
            sys: (o.mode == StoredAs::Bitemporal).then_some(Value::Int(e.sys)),
            op: [Op::Upsert, Op::Delete, Op::Truncate][e.op as usize].clone(),
            values: vec![
                Value::Int(e.key),
                e.a.map_or(Value::Null, Value::Int),
                e.b.map_or(Value::Null, |s| Value::Str(s.into())),
            ],
            update: if o.ctu {
                e.upd.as_ref().map(|cols| {
                    let mut v: Vec<u32> =
                        cols.iter().map(|c| if *c == "a" { 1 } else { 2 }).collect();
                    v.push(0);
                    v.sort();
                    v.dedup();
                    v
                })
            } else {
                None
            },
        })
        .collect();
    model(&mflow, &events)
}

/// A run: the events in arrival order, cut into batches, with a reopen after some batches.
#[derive(Clone, Debug)]
struct Run {
    opts: Options,
    events: Vec<Ev>,
    order: Vec<usize>,
    cuts: Vec<bool>,
    reopen: Vec<bool>,
}

fn run() -> impl Strategy<Value = Run> {
    options().prop_flat_map(|opts| {
        let t = opts.truncate;
        proptest::collection::vec(event(t), 1..24).prop_flat_map(move |events| {
            let n = events.len();
            (
                Just(opts.clone()),
                Just(events),
                Just((0..n).collect::<Vec<_>>()).prop_shuffle(),
                proptest::collection::vec(proptest::bool::weighted(0.3), n),
                proptest::collection::vec(proptest::bool::weighted(0.15), n),
            )
                .prop_map(|(opts, events, order, cuts, reopen)| Run {
                    opts,
                    events,
                    order,
                    cuts,
                    reopen,
                })
        })
    })
}

fn apply_run(r: &Run, dir: &std::path::Path) -> Store {
    let mut store = open(dir, &r.opts);
    store.create_flow(flow(&r.opts)).unwrap();
    let mut pending = Vec::new();
    for (i, &e) in r.order.iter().enumerate() {
        pending.push(r.events[e].clone());
        if i == r.order.len() - 1 || r.cuts[i] {
            store.apply("f", &batch(&pending)).unwrap();
            pending.clear();
            if r.reopen[i] {
                drop(store);
                store = open(dir, &r.opts);
            }
        }
    }
    store
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn engine_equals_model(r in run()) {
        let dir = tempfile::tempdir().unwrap();
        let store = apply_run(&r, dir.path());
        let expected = model_of(&r.opts, &r.events);
        let got = common::engine_rows(&store, "t");
        prop_assert_eq!(&got, &expected, "options {:?}", r.opts);

        // A replay of everything, in one batch, changes nothing and is counted as duplicates.
        let c = store.apply("f", &batch(&r.events)).unwrap();
        prop_assert_eq!(c.metrics.num_upserted_rows, 0);
        prop_assert_eq!(c.metrics.num_deleted_rows, 0);
        prop_assert_eq!(common::engine_rows(&store, "t"), expected.clone());

        // And after a restart the table reads the same.
        drop(store);
        let store = open(dir.path(), &r.opts);
        prop_assert_eq!(common::engine_rows(&store, "t"), expected);
    }

    #[test]
    fn every_commit_can_be_read_back(r in run()) {
        // The table as of each commit equals the model over the events applied up to it.
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), &r.opts);
        store.create_flow(flow(&r.opts)).unwrap();
        for (v, evs) in apply_commits(&r, &store) {
            prop_assert_eq!(common::engine_rows_at(&store, "t", Some(v)), model_of(&r.opts, &evs), "version {}", v);
        }
    }
}

/// Applies the run in its arrival order and batches; returns, per commit, its version and the
/// events applied up to it.
fn apply_commits(r: &Run, store: &Store) -> Vec<(u64, Vec<Ev>)> {
    let mut seen: Vec<Ev> = Vec::new();
    let mut out = Vec::new();
    let mut pending = Vec::new();
    for (i, &e) in r.order.iter().enumerate() {
        pending.push(r.events[e].clone());
        if i == r.order.len() - 1 || r.cuts[i] {
            let c = store.apply("f", &batch(&pending)).unwrap();
            seen.append(&mut pending);
            out.push((c.version, seen.clone()));
        }
    }
    out
}

fn sorted_rows(mut rows: Vec<common::model::MRow>) -> Vec<common::model::MRow> {
    rows.sort_by_key(common::model::MRow::sort_key);
    rows
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn the_change_feed_turns_each_version_into_the_next(r in run()) {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), &r.opts);
        store.create_flow(flow(&r.opts)).unwrap();
        let commits = apply_commits(&r, &store);
        let mut versions = vec![0];
        versions.extend(commits.iter().map(|c| c.0));
        // Every span between two commits, consecutive or not.
        for (i, &a) in versions.iter().enumerate() {
            for &b in &versions[i + 1..] {
                let mut rows = common::engine_rows_at(&store, "t", Some(a));
                let changes = common::engine_changes(&store, "t", a + 1, b).unwrap();
                for (j, (v, kind, row)) in changes.iter().enumerate() {
                    prop_assert!(*v > a && *v <= b);
                    match kind {
                        asof::ChangeType::Insert | asof::ChangeType::UpdatePostimage => rows.push(row.clone()),
                        asof::ChangeType::Delete | asof::ChangeType::UpdatePreimage => {
                            let at = rows.iter().position(|x| x == row);
                            prop_assert!(at.is_some(), "{:?} of a row that is not there: {:?}", kind, row);
                            rows.remove(at.unwrap());
                        }
                    }
                    if *kind == asof::ChangeType::UpdatePreimage {
                        // The post-image follows, with the same identity (the key, here).
                        let (pv, pk, post) = &changes[j + 1];
                        prop_assert_eq!(*pk, asof::ChangeType::UpdatePostimage);
                        prop_assert_eq!(pv, v);
                        prop_assert_eq!(&post.values[0], &row.values[0]);
                        prop_assert!(post != row, "an update that changes nothing");
                    }
                }
                prop_assert_eq!(
                    sorted_rows(rows),
                    common::engine_rows_at(&store, "t", Some(b)),
                    "changes {}..={} over version {}", a + 1, b, a
                );
            }
        }
    }

    /// A feed read a few rows at a time (a commit larger than that a group of its keys at a
    /// time: each group's deletes, then each group's other changes) lists the rows of the feed
    /// read whole, in the same order.
    #[test]
    fn the_change_feed_read_a_few_rows_at_a_time_is_the_feed_read_whole(
        r in run(),
        window in 1u64..6,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), &r.opts);
        store.create_flow(flow(&r.opts)).unwrap();
        let commits = apply_commits(&r, &store);
        prop_assume!(!commits.is_empty());
        let feed = |rows: u64| {
            let feed = asof::change_feed(&store, "t", &asof::ChangeBound::Version(1), None)
                .unwrap()
                .with_window_rows(rows);
            let schema = feed.schema();
            let batches: Vec<RecordBatch> = feed.map(Result::unwrap).collect();
            arrow::compute::concat_batches(&schema, &batches).unwrap()
        };
        let whole = feed(u64::MAX);
        prop_assert_eq!(feed(window), whole);
    }

    /// The feed of a table that is not in memory is read a span of its keys at a time (a
    /// commit larger than the window alone, its deletes over all the spans, then its other
    /// changes; smaller commits a window at a time, held until its last span) and lists the rows
    /// of the feed read from the table in memory, in the same order, for every range of commits;
    /// also when the table comes into memory while the feed is read (after `load_after`
    /// batches), and the rest is read from it.
    #[test]
    fn the_change_feed_read_by_spans_of_keys_is_the_feed_read_from_memory(
        r in run(),
        window in 1u64..12,
        load_after in 0usize..4,
    ) {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = open(dir.path(), &r.opts);
            store.create_flow(flow(&r.opts)).unwrap();
            prop_assume!(!apply_commits(&r, &store).is_empty());
        } // closing it writes a checkpoint: a new open reads the table from its records
        let feed = |store: &Store, (from, to): (u64, u64), rows: u64, load_after: Option<usize>| {
            let bound = asof::ChangeBound::Version(to);
            let mut feed = asof::change_feed(store, "t", &asof::ChangeBound::Version(from), Some(&bound))
                .unwrap()
                .with_window_rows(rows);
            let schema = feed.schema();
            let mut batches: Vec<RecordBatch> = Vec::new();
            if let Some(n) = load_after {
                batches.extend(feed.by_ref().take(n).map(Result::unwrap));
                store.read("t", |_| ()).unwrap();
            }
            batches.extend(feed.map(Result::unwrap));
            arrow::compute::concat_batches(&schema, &batches).unwrap()
        };
        let latest = open(dir.path(), &r.opts).latest_version("t").unwrap();
        let ranges: Vec<(u64, u64)> = (1..=latest)
            .flat_map(|from| (from..=latest).map(move |to| (from, to)))
            .collect();
        let in_memory = open(dir.path(), &r.opts);
        in_memory.read("t", |_| ()).unwrap();
        let expected: Vec<RecordBatch> = ranges.iter().map(|&range| feed(&in_memory, range, u64::MAX, None)).collect();
        drop(in_memory);
        let by_spans = open(dir.path(), &r.opts);
        for (&range, expected) in ranges.iter().zip(&expected) {
            prop_assert_eq!(&feed(&by_spans, range, window, None), expected, "commits {:?}", range);
        }
        // The feeds did not bring the table into memory.
        prop_assert!(by_spans.key_count("t").unwrap().is_some());
        let (&range, expected) = (ranges.last().unwrap(), expected.last().unwrap());
        prop_assert_eq!(&feed(&by_spans, range, window, Some(load_after)), expected);
    }

    #[test]
    fn vacuum_never_changes_the_table(r in run(), at in 0usize..8) {
        // Vacuum (retaining nothing) after some commit, then go on ingesting: every version from
        // the vacuum on, the current table, and the table after a restart equal a store that never
        // vacuumed; versions before it are refused with a clear error.
        let (dir, plain) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let store = open(dir.path(), &r.opts);
        let reference = Store::open(plain.path()).unwrap();
        store.create_flow(flow(&r.opts)).unwrap();
        reference.create_flow(flow(&r.opts)).unwrap();
        let mut pending = Vec::new();
        let mut commits = 0;
        let mut oldest = 0;
        for (i, &e) in r.order.iter().enumerate() {
            pending.push(r.events[e].clone());
            if i == r.order.len() - 1 || r.cuts[i] {
                store.apply("f", &batch(&pending)).unwrap();
                reference.apply("f", &batch(&pending)).unwrap();
                pending.clear();
                commits += 1;
                if commits == at {
                    let report = store.vacuum_with("t", std::time::Duration::ZERO, asof::RetentionCheck::Disabled).unwrap();
                    oldest = report.oldest_version;
                    prop_assert_eq!(oldest as usize, commits);
                    prop_assert_eq!(common::engine_rows(&store, "t"), common::engine_rows(&reference, "t"));
                }
            }
        }
        let latest = store.read("t", |t| t.latest_version()).unwrap();
        for v in 0..=latest {
            // Versions after the vacuum's own commit are one ahead of the reference.
            let reference_version = if oldest > 0 && v > oldest { v - 1 } else { v };
            if v < oldest {
                let e = store.read("t", |t| {
                    let mut c = asof_storage::ScanCursor::default();
                    t.scan(&asof_storage::ScanSpec { version: Some(v), ..Default::default() }, &mut c, 10, |_| {}).unwrap_err()
                }).unwrap();
                prop_assert!(matches!(e, asof::Error::VersionVacuumed { .. }), "{e}");
            } else {
                prop_assert_eq!(
                    common::engine_rows_at(&store, "t", Some(v)),
                    common::engine_rows_at(&reference, "t", Some(reference_version)),
                    "version {}", v
                );
            }
        }
        prop_assert_eq!(common::engine_rows(&store, "t"), model_of(&r.opts, &r.events));
        drop(store);
        let store = open(dir.path(), &r.opts);
        prop_assert_eq!(common::engine_rows(&store, "t"), model_of(&r.opts, &r.events));
        // A replay after the vacuum is still recognised, event by event, as duplicates.
        let c = store.apply("f", &batch(&r.events)).unwrap();
        prop_assert_eq!(c.metrics.num_upserted_rows + c.metrics.num_deleted_rows, 0);
    }
}

/// Found by `engine_equals_model`: a BITEMPORAL event at the key's latest system time replays its
/// system history; the version before the one it changes was frozen, and a NULL the flow ignores
/// took its value from it. Keys are thawed before such a replay.
#[test]
fn a_system_replay_reads_frozen_versions_for_ignored_nulls() {
    let ev = |seq: i64, sys: i64, a: Option<i64>, b: Option<&'static str>| Ev {
        key: 0,
        seq,
        sys,
        op: 0,
        a,
        b,
        upd: None,
    };
    let events = vec![
        ev(5, 2, Some(2), Some("x")),
        ev(0, 1, Some(1), Some("x")),
        ev(4, 4, Some(1), Some("x")),
        ev(3, 1, None, None),
        ev(7, 0, Some(2), Some("y")),
        ev(6, 4, Some(2), Some("y")),
    ];
    let opts = Options {
        mode: StoredAs::Bitemporal,
        ignore_null: 2,
        track_a: false,
        ctu: false,
        truncate: false,
        hot_tail: 2,
        part_rows: asof::DEFAULT_COMMIT_PART_ROWS,
        folding: Folding::Auto,
    };
    let r = Run {
        opts: opts.clone(),
        events: events.clone(),
        order: (0..events.len()).collect(),
        cuts: vec![false, false, false, false, true, false],
        reopen: vec![false; events.len()],
    };
    let dir = tempfile::tempdir().unwrap();
    let store = apply_run(&r, dir.path());
    assert_eq!(common::engine_rows(&store, "t"), model_of(&opts, &events));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// A commit of more rows than `commit_part_rows` is applied in parts, parted by key: the
    /// table at every version, the change feed, each commit's metrics, a replay of the log
    /// (`verify`) and a reopen all equal a store that applies every commit whole (with SCD1
    /// tombstones collected at the first chance).
    #[test]
    fn a_commit_applied_in_parts_equals_one_applied_whole(r in run(), part_rows in 1u64..4) {
        let (d1, d2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let whole = open(d1.path(), &Options { part_rows: u64::MAX, ..r.opts.clone() });
        let parted_opts = Options { part_rows, ..r.opts.clone() };
        let parted = open(d2.path(), &parted_opts);
        // SCD1 collects a tombstone at the first commit after the delete: a part must not
        // collect a key a later part of the same commit brings a late event to.
        let gc = flow_builder(&r.opts).tombstone_gc_threshold_secs(0);
        whole.create_flow(gc.clone().build().unwrap()).unwrap();
        parted.create_flow(gc.build().unwrap()).unwrap();
        apply_commits(&r, &whole);
        apply_commits(&r, &parted);
        reads_like_whole(&whole, parted, (d2.path(), &parted_opts))?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Commits whose keys are folded in shares on two threads (every commit of two keys or
    /// more) number their rows as one thread folding the keys in order does: the table at
    /// every version, the change feed, each commit's metrics, a replay of the log (`verify`)
    /// and a reopen equal a store that folds on one thread; and a reopen that replays the log
    /// on one thread (no checkpoint at close) reads the pages the shares froze.
    #[test]
    fn a_commit_folded_in_shares_equals_one_folded_on_one_thread(r in run()) {
        let (d1, d2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let one = open(d1.path(), &Options { folding: Folding::OneThread, ..r.opts.clone() });
        let shares_opts = Options { folding: Folding::TwoThreads, ..r.opts.clone() };
        let shares = open(d2.path(), &shares_opts);
        one.create_flow(flow(&r.opts)).unwrap();
        shares.create_flow(flow(&r.opts)).unwrap();
        apply_commits(&r, &one);
        apply_commits(&r, &shares);
        reads_like_whole(&one, shares, (d2.path(), &shares_opts))?;

        let d3 = tempfile::tempdir().unwrap();
        let leave = Checkpoints { on_close: OnClose::Leave, ..Checkpoints::default() };
        let written = StoreOptions { checkpoints: leave, ..store_options(&shares_opts) };
        let store = Store::open_with(d3.path(), written).unwrap();
        store.create_flow(flow(&r.opts)).unwrap();
        apply_commits(&r, &store);
        drop(store);
        let replayed = StoreOptions { folding: Folding::OneThread, ..store_options(&shares_opts) };
        let store = Store::open_with(d3.path(), replayed).unwrap();
        prop_assert_eq!(common::engine_rows(&store, "t"), common::engine_rows(&one, "t"));
        let report = store.verify().unwrap();
        prop_assert!(report.ok(), "{:?}", report);
    }
}

/// Checks that the store `parted` (at `dir`, opened with `opts`) reads like `whole`: each
/// commit's metrics, the table at every version, the change feed, a replay of its log
/// (`verify`) and a reopen.
fn reads_like_whole(
    whole: &Store,
    parted: Store,
    (dir, opts): (&std::path::Path, &Options),
) -> Result<(), TestCaseError> {
    let (x, y) = (whole.history("t").unwrap(), parted.history("t").unwrap());
    prop_assert_eq!(x.len(), y.len());
    for (a, b) in x.iter().zip(&y) {
        prop_assert_eq!(&a.metrics, &b.metrics, "metrics of version {}", a.version);
    }
    let last = x.last().map_or(0, |c| c.version);
    for v in 0..=last {
        prop_assert_eq!(
            common::engine_rows_at(&parted, "t", Some(v)),
            common::engine_rows_at(whole, "t", Some(v)),
            "version {}",
            v
        );
    }
    prop_assert_eq!(
        common::engine_changes(&parted, "t", 1, last).unwrap(),
        common::engine_changes(whole, "t", 1, last).unwrap()
    );
    let report = parted.verify().unwrap();
    prop_assert!(report.ok(), "{:?}", report);
    drop(parted);
    let parted = open(dir, opts);
    prop_assert_eq!(
        common::engine_rows(&parted, "t"),
        common::engine_rows(whole, "t")
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 100, ..ProptestConfig::default() })]

    /// A full refresh of a table whose history is larger than `commit_part_rows` resets and
    /// reapplies it a part of its keys at a time: the same table, change feed and metrics as a
    /// full refresh applied whole (rows it retires and writes again pair up as updates in
    /// either), and the same after `verify` replays the log and after a reopen.
    #[test]
    fn a_full_refresh_in_parts_equals_one_applied_whole(r in run(), part_rows in 1u64..4) {
        let (d1, d2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let parted_opts = Options { part_rows, ..r.opts.clone() };
        let stores = [
            open(d1.path(), &Options { part_rows: u64::MAX, ..r.opts.clone() }),
            open(d2.path(), &parted_opts),
        ];
        for store in &stores {
            store.create_source("s", &source_schema()).unwrap();
            store.create_flow(flow_builder(&r.opts).source_table("s").build().unwrap()).unwrap();
            let mut pending = Vec::new();
            for (i, &e) in r.order.iter().enumerate() {
                pending.push(r.events[e].clone());
                if i == r.order.len() - 1 || r.cuts[i] {
                    store.append("s", &batch(&pending)).unwrap();
                    store.refresh("f", RefreshMode::Incremental).unwrap();
                    pending.clear();
                }
            }
        }
        for s in &stores {
            s.refresh("f", RefreshMode::Full).unwrap().unwrap();
        }
        let [whole, parted] = stores;
        reads_like_whole(&whole, parted, (d2.path(), &parted_opts))?;
    }
}
