//! The read cache (`StoreOptions::read_cache_bytes`: frozen pages kept decoded for their next
//! read) never changes an answer. A store that keeps pages decoded answers every as-of scan,
//! time travel and point lookup, between commits that thaw, refreeze and rewrite its pages, as a
//! store that keeps none does.

use std::ops::Bound::Unbounded;

use asof::{
    Checkpoints, OnClose, OpenMode, ScanRequest, Store, StoreOptions, StoredAs, TimeSelection,
    Value,
};
use proptest::prelude::*;

use crate::common::keyed::{batch, flow, sorted_lines, Ev};

/// A store whose keys freeze after a few events, checkpointing every few: its pages are read
/// back by reads and rewritten by commits. `read_cache_bytes` is the one difference.
fn open(dir: &std::path::Path, read_cache_bytes: u64) -> Store {
    Store::open_with(
        dir,
        StoreOptions {
            hot_events_per_key: 1,
            read_cache_bytes,
            checkpoints: Checkpoints {
                every_events: 5,
                on_close: OnClose::Checkpoint,
            },
            ..Default::default()
        },
    )
    .unwrap()
}

/// The events of one commit over keys `0..4`, at business and system times `0..40`: many land
/// among a key's frozen ones (late), which thaws its pages and freezes them again.
fn events() -> impl Strategy<Value = Vec<Ev>> {
    prop::collection::vec(
        (
            0i64..4,
            0i64..40,
            0i64..40,
            prop::bool::weighted(0.1),
            prop::option::of("[a-c]{1,2}"),
        ),
        1..16,
    )
}

/// What is read between two commits.
#[derive(Clone, Debug)]
enum Read {
    /// An as-of scan at business time `b` and system time `s`, at the latest version or at
    /// version `v`.
    AsOf { b: i64, s: i64, v: Option<u64> },
    /// Every row version, at version `v`.
    All { v: Option<u64> },
    /// Point lookups of every key at `b`, `s`.
    Lookups { b: i64, s: i64 },
}

fn reads() -> impl Strategy<Value = Vec<Read>> {
    let version = prop::option::of(1u64..8);
    prop::collection::vec(
        prop_oneof![
            (0i64..40, 0i64..40, version.clone()).prop_map(|(b, s, v)| Read::AsOf { b, s, v }),
            version.prop_map(|v| Read::All { v }),
            (0i64..40, 0i64..40).prop_map(|(b, s)| Read::Lookups { b, s }),
        ],
        0..4,
    )
}

/// What `read` returns from `store`, as text lines (a version past the latest reads as the
/// latest; one before a VACUUM's cut as its error).
fn answer(store: &Store, mode: StoredAs, read: &Read) -> Vec<String> {
    let latest = store.history("t").unwrap().last().unwrap().version;
    let at = |t: i64| TimeSelection::as_of(Value::Int(t));
    let req = match read {
        Read::AsOf { b, s, v } => ScanRequest {
            business: at(*b),
            system: if mode == StoredAs::Bitemporal {
                at(*s)
            } else {
                TimeSelection::All
            },
            version: v.map(|v| v.min(latest)),
            ..Default::default()
        },
        Read::All { v } => ScanRequest {
            version: v.map(|v| v.min(latest)),
            ..Default::default()
        },
        Read::Lookups { b, s } => {
            return (0..4)
                .map(|k| {
                    let found = asof::lookup(
                        store,
                        "t",
                        &[Value::Int(k)],
                        Some(&[Value::Int(*b)]),
                        (mode == StoredAs::Bitemporal)
                            .then_some(&Value::Int(*s))
                            .as_ref()
                            .copied(),
                    );
                    format!("{k}: {found:?}")
                })
                .collect();
        }
    };
    match asof::scan_all(store, "t", &req) {
        Ok(batches) => sorted_lines(&batches),
        Err(e) => vec![e.to_string()],
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn a_store_that_keeps_pages_decoded_answers_as_one_that_keeps_none(
        mode in prop_oneof![Just(StoredAs::Scd2), Just(StoredAs::Bitemporal)],
        steps in prop::collection::vec((events(), reads(), prop::bool::weighted(0.2)), 1..8),
    ) {
        let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let mut none = open(a_dir.path(), 0);
        let mut kept = open(b_dir.path(), 64 << 20);
        none.create_flow(flow(mode)).unwrap();
        kept.create_flow(flow(mode)).unwrap();
        for (events, reads, reopen) in &steps {
            let a = none.apply("f", &batch(events)).unwrap();
            let b = kept.apply("f", &batch(events)).unwrap();
            prop_assert_eq!(&a.metrics, &b.metrics);
            // Each read three times: the second keeps what it reads again, the third finds it.
            for read in reads.iter().chain(reads).chain(reads) {
                prop_assert_eq!(answer(&kept, mode, read), answer(&none, mode, read), "{:?}", read);
            }
            if *reopen {
                drop((none, kept));
                none = open(a_dir.path(), 0);
                kept = open(b_dir.path(), 64 << 20);
            }
        }
        for read in [Read::All { v: None }, Read::AsOf { b: 20, s: 20, v: None }] {
            prop_assert_eq!(answer(&kept, mode, &read), answer(&none, mode, &read));
        }
    }
}

/// A table's pages rewritten under a store that keeps them decoded (VACUUM rebuilds its
/// derived records; a full rewrite of one key's history thaws and refreezes every page it has)
/// read as written, not as kept.
#[test]
fn pages_rewritten_in_the_same_process_read_as_rewritten() {
    let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let none = open(a_dir.path(), 0);
    let kept = open(b_dir.path(), 64 << 20);
    let mode = StoredAs::Bitemporal;
    for s in [&none, &kept] {
        s.create_flow(flow(mode)).unwrap();
        // Key 0 gathers 30 versions in order (frozen into pages), then one late event on both
        // timelines reaches back to its start.
        for i in 0..30 {
            s.apply("f", &batch(&[(0, i, i, false, Some(format!("v{i}")))]))
                .unwrap();
        }
    }
    let reads: Vec<Read> = (0..30)
        .step_by(3)
        .map(|t| Read::AsOf {
            b: t,
            s: 29,
            v: None,
        })
        .chain([Read::All { v: Some(20) }, Read::Lookups { b: 5, s: 29 }])
        .collect();
    let same = |note: &str| {
        for read in &reads {
            assert_eq!(
                answer(&kept, mode, read),
                answer(&none, mode, read),
                "{note}: {read:?}"
            );
        }
    };
    same("before");
    same("again");
    same("kept");
    for s in [&none, &kept] {
        s.apply("f", &batch(&[(0, 1, 0, false, Some("late".into()))]))
            .unwrap();
    }
    same("after a late event");
    for s in [&none, &kept] {
        s.vacuum_with(
            "t",
            std::time::Duration::ZERO,
            asof::RetentionCheck::Disabled,
        )
        .unwrap();
    }
    same("after VACUUM");
}

/// The key heads an as-of scan keeps decoded are read again once a commit rewrites them: after
/// an open, scans read the table span by span from its heads (and keep them), a late event
/// rewrites one key's head and pages, and every read answers as a store that keeps nothing.
#[test]
fn key_heads_a_scan_kept_read_as_rewritten_after_a_commit() {
    let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mode = StoredAs::Bitemporal;
    for dir in [a_dir.path(), b_dir.path()] {
        let s = open(dir, 0);
        s.create_flow(flow(mode)).unwrap();
        for i in 0..20 {
            let events: Vec<Ev> = (0..4)
                .map(|k| (k, i, i, false, Some(format!("k{k}v{i}"))))
                .collect();
            s.apply("f", &batch(&events)).unwrap();
        }
    }
    let (none, kept) = (open(a_dir.path(), 0), open(b_dir.path(), 64 << 20));
    let reads: Vec<Read> = (0..20)
        .step_by(4)
        .map(|t| Read::AsOf {
            b: t,
            s: 19,
            v: None,
        })
        .collect();
    let same = |note: &str| {
        // Read span by span (the table is not in memory, its records are current), or the
        // heads are not what is read.
        let span = kept
            .key_span("t", (Unbounded, Unbounded), 16, asof::Caching::Keep)
            .unwrap();
        assert!(span.is_some(), "{note}: the scan reads the table whole");
        for read in reads.iter().chain(&reads).chain(&reads) {
            assert_eq!(
                answer(&kept, mode, read),
                answer(&none, mode, read),
                "{note}: {read:?}"
            );
        }
    };
    same("after the open");
    for s in [&none, &kept] {
        s.apply(
            "f",
            &batch(&[
                (0, 2, 3, false, Some("late".into())),
                (2, 0, 20, true, None),
            ]),
        )
        .unwrap();
    }
    same("after a late event and a delete");
}

/// Keys of many pages (their heads list the pages apart, in chunks, with the boxes of their
/// pages' live rows) read by as-of scans: a scan of the latest version chooses a key's pages by
/// those boxes, on its first read and once the read cache keeps the head. Every as-of point, on
/// and off the diagonal of both timelines, answers as the same table read whole into memory
/// (whose pages are chosen by their zones), on every read; so do reads of a past version, which
/// the boxes leave to the zones.
#[test]
fn as_of_scans_of_keys_of_many_pages_answer_as_the_table_in_memory_on_every_read() {
    let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mode = StoredAs::Bitemporal;
    for dir in [a_dir.path(), b_dir.path()] {
        let s = open(dir, 0);
        s.create_flow(flow(mode)).unwrap();
        // Three keys of 1,200 versions, in commits of 10 events a key: one event in 7 late on
        // business time, one in 11 late on system time too.
        for c in 0..120 {
            let events: Vec<Ev> = (0..30)
                .map(|j| {
                    let (k, i) = (j % 3, c * 10 + j / 3);
                    let b = if i % 7 == 3 { i - 25 } else { i };
                    let s = if i % 11 == 5 { i - 4 } else { i };
                    (k, b, s, i % 53 == 17, Some(format!("k{k}v{i}")))
                })
                .collect();
            s.apply("f", &batch(&events)).unwrap();
        }
        let (pages, keys) = s
            .read("t", |r| {
                let c = r.cold_stats();
                (c.pages, c.frozen_keys)
            })
            .unwrap();
        assert!(
            keys == 3 && pages > 3 * 16,
            "{pages} pages over {keys} keys"
        );
    }
    let none = Store::open_with(
        a_dir.path(),
        StoreOptions {
            hot_events_per_key: 1,
            read_cache_bytes: 0,
            open: OpenMode::Eager,
            ..Default::default()
        },
    )
    .unwrap();
    let kept = open(b_dir.path(), 64 << 20);
    let mut reads: Vec<Read> = Vec::new();
    for b in (-30..1210).step_by(61) {
        for s in (-10..1210).step_by(89) {
            reads.push(Read::AsOf { b, s, v: None });
        }
    }
    reads.extend([
        Read::AsOf {
            b: 1199,
            s: 0,
            v: None,
        },
        Read::AsOf {
            b: 0,
            s: 1199,
            v: None,
        },
        Read::AsOf {
            b: 600,
            s: 700,
            v: Some(90),
        },
        Read::Lookups { b: 450, s: 900 },
    ]);
    let span = kept
        .key_span("t", (Unbounded, Unbounded), 16, asof::Caching::Keep)
        .unwrap();
    assert!(span.is_some(), "the scan reads the table whole");
    for (round, read) in ["first", "second", "third"]
        .iter()
        .flat_map(|r| reads.iter().map(move |x| (r, x)))
    {
        assert_eq!(
            answer(&kept, mode, read),
            answer(&none, mode, read),
            "{round} read: {read:?}"
        );
    }
}
