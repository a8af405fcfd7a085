//! Temporal scans (docs/SEMANTICS.md §8): selections on both timelines, keys, projection, batching, pinning, and
//! point lookups that agree with scans.

use crate::common;

use std::ops::Bound;
use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use asof::{
    ColumnSelection, Condition, FlowSpec, KeySelection, ScanRequest, Store, StoredAs,
    TimeSelection, Value,
};
use common::{data_dir, read_csv, string_batch, table_strings_with};
use proptest::prelude::*;

fn golden_store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let flow = common::seed_flow_builder("cdc", "points").build().unwrap();
    store.create_flow(flow).unwrap();
    let (h, mut rows) = read_csv(&data_dir().join("seed_bitemporal/events.csv"));
    // A second company with the same events shifted to B, to have more than one key.
    let more: Vec<_> = rows
        .iter()
        .map(|r| {
            let mut r = r.clone();
            r[0] = Some("B".into());
            r
        })
        .collect();
    rows.extend(more);
    store.apply("cdc", &string_batch(&h, &rows)).unwrap();
    (dir, store)
}

fn t(s: &str) -> Vec<Value> {
    vec![Value::Str(format!("2025-07-18T{s}").into())]
}

/// (DataPoint, __START_AT, __END_AT, __SYSTEM_START_AT, __SYSTEM_END_AT) of company A, as HH:MM:SS.
fn select(store: &Store, business: TimeSelection, system: TimeSelection) -> Vec<String> {
    let req = ScanRequest {
        business,
        system,
        keys: KeySelection::Eq(vec!["A".into()]),
        ..Default::default()
    };
    let (_, rows) = table_strings_with(store, "points", &req);
    rows.iter()
        .map(|r| {
            r[1..]
                .iter()
                .map(|c| {
                    c.as_deref().map_or("-".to_string(), |s| {
                        s.trim_start_matches("2025-07-18T").to_string()
                    })
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

#[test]
fn both_timelines_as_of_from_to_between_all() {
    let (_dir, store) = golden_store();
    use TimeSelection::*;
    assert_eq!(
        select(&store, AsOf(t("12:10:00")), AsOf(t("12:22:00"))),
        ["XFv1 10:01:00 12:15:43 12:20:00 12:25:00"]
    );
    assert_eq!(
        select(&store, AsOf(t("12:10:00")), AsOf(t("12:40:00"))),
        ["XFv3 12:05:00 12:15:43 12:25:00 -"]
    );
    // What was believed at 12:10 (before the first update was known): XFv1, open-ended.
    assert_eq!(
        select(&store, AsOf(t("13:00:00")), AsOf(t("12:10:00"))),
        ["XFv1 10:01:00 - 10:05:00 12:20:00"]
    );
    assert_eq!(
        select(&store, All, AsOf(t("10:00:00"))),
        Vec::<String>::new()
    );
    assert_eq!(select(&store, All, All).len(), 6);
    // Half-open [a, b) against closed [a, b]: a row starting exactly at b is in BETWEEN only.
    assert_eq!(
        select(&store, All, FromTo(t("12:00:00"), t("12:20:00"))),
        ["XFv1 10:01:00 - 10:05:00 12:20:00"]
    );
    assert_eq!(
        select(&store, All, Between(t("12:00:00"), t("12:20:00"))).len(),
        3
    );
    assert_eq!(
        select(
            &store,
            FromTo(t("12:15:43"), t("12:16:00")),
            AsOf(t("12:35:00"))
        ),
        ["XFv2 12:15:43 12:30:00 12:30:00 -"]
    );
    assert_eq!(
        select(
            &store,
            Between(t("12:00:00"), t("12:05:00")),
            AsOf(t("12:35:00"))
        )
        .len(),
        2
    );
}

#[test]
fn keys_projection_and_history() {
    let (_dir, store) = golden_store();
    let count = |keys: KeySelection| {
        asof::scan(
            &store,
            "points",
            &ScanRequest {
                keys,
                ..Default::default()
            },
        )
        .unwrap()
        .map(|b| b.unwrap().num_rows())
        .sum::<usize>()
    };
    assert_eq!(count(KeySelection::All), 12);
    assert_eq!(count(KeySelection::Eq(vec!["B".into()])), 6);
    assert_eq!(count(KeySelection::Eq(vec!["C".into()])), 0);
    assert_eq!(
        count(KeySelection::Range(
            Bound::Excluded(vec!["A".into()]),
            Bound::Unbounded
        )),
        6
    );
    assert_eq!(
        count(KeySelection::Range(
            Bound::Included(vec!["A".into()]),
            Bound::Included(vec!["B".into()])
        )),
        12
    );
    assert_eq!(
        count(KeySelection::Range(
            Bound::Unbounded,
            Bound::Excluded(vec!["B".into()])
        )),
        6
    );

    let req = ScanRequest {
        projection: Some(vec!["__SYSTEM_END_AT".into(), "DataPoint".into()]),
        ..Default::default()
    };
    let batches = asof::scan_all(&store, "points", &req).unwrap();
    let names: Vec<String> = batches[0]
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    assert_eq!(names, ["__SYSTEM_END_AT", "DataPoint"]);
    assert!(asof::scan(
        &store,
        "points",
        &ScanRequest {
            projection: Some(vec!["nope".into()]),
            ..Default::default()
        }
    )
    .is_err());

    let hist = asof::key_history(&store, "points", vec!["A".into()]).unwrap();
    assert_eq!(hist.iter().map(|b| b.num_rows()).sum::<usize>(), 6);
}

#[test]
fn scans_stream_in_batches_pinned_to_their_version() {
    let (_dir, store) = golden_store();
    let req = ScanRequest {
        batch_size: 5,
        ..Default::default()
    };
    let mut scan = asof::scan(&store, "points", &req).unwrap();
    let first = scan.next().unwrap().unwrap();
    assert_eq!(first.num_rows(), 5);
    // A commit lands mid-scan: the scan goes on reading the version it started on.
    let (h, rows) = read_csv(&data_dir().join("seed_bitemporal/events.csv"));
    let mut late = rows[0].clone();
    late[0] = Some("C".into());
    store.apply("cdc", &string_batch(&h, &[late])).unwrap();
    let rest: usize = scan.map(|b| b.unwrap().num_rows()).sum();
    assert_eq!(first.num_rows() + rest, 12);
    assert_eq!(
        asof::scan(&store, "points", &ScanRequest::default())
            .unwrap()
            .map(|b| b.unwrap().num_rows())
            .sum::<usize>(),
        13
    );
}

#[test]
fn wrong_selections_are_clear_errors() {
    let (_dir, store) = golden_store();
    let e = asof::scan(
        &store,
        "points",
        &ScanRequest {
            business: TimeSelection::AsOf(t("not a time")),
            ..Default::default()
        },
    );
    assert!(e.is_err_and(|e| e.to_string().contains("business time")));
    let e = asof::scan(
        &store,
        "points",
        &ScanRequest {
            keys: KeySelection::Eq(vec!["A".into(), "B".into()]),
            ..Default::default()
        },
    );
    assert!(e.is_err());
    let e = asof::scan(&store, "nope", &ScanRequest::default());
    assert!(e.is_err_and(|e| e.to_string().contains("no table named `nope`")));
    let e = asof::scan(
        &store,
        "points",
        &ScanRequest {
            version: Some(99),
            ..Default::default()
        },
    );
    assert!(e.is_err_and(|e| e.to_string().contains("no version 99")));
}

fn int_store(evs: &[(i64, i64, i64, bool, i64)]) -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, false),
        Field::new("b", DataType::Int64, false),
        Field::new("s", DataType::Int64, false),
        Field::new("op", DataType::Utf8, false),
        Field::new("v", DataType::Int64, true),
    ]));
    store
        .create_flow(
            FlowSpec::builder("f", "t", &schema)
                .keys(["k"])
                .sequence_by(["b"])
                .system_sequence_by("s")
                .delete_when(Condition::equals("op", "D"))
                .columns(ColumnSelection::all_except(["b", "s", "op"]))
                .stored_as(StoredAs::Bitemporal)
                .build()
                .unwrap(),
        )
        .unwrap();
    for chunk in evs.chunks(3) {
        let cols: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(
                chunk.iter().map(|e| e.0).collect::<Vec<_>>(),
            )),
            Arc::new(Int64Array::from(
                chunk.iter().map(|e| e.1).collect::<Vec<_>>(),
            )),
            Arc::new(Int64Array::from(
                chunk.iter().map(|e| e.2).collect::<Vec<_>>(),
            )),
            Arc::new(StringArray::from(
                chunk
                    .iter()
                    .map(|e| if e.3 { "D" } else { "U" })
                    .collect::<Vec<_>>(),
            )),
            Arc::new(Int64Array::from(
                chunk.iter().map(|e| e.4).collect::<Vec<_>>(),
            )),
        ];
        store
            .apply("f", &RecordBatch::try_new(schema.clone(), cols).unwrap())
            .unwrap();
    }
    (dir, store)
}

/// One key with a long history, late on both timelines: the lookup index's flat arrays, samples
/// and segment tree agree with as-of scans at every probe.
#[test]
fn lookups_on_a_long_history_agree_with_scans() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    let evs: Vec<(i64, i64, i64, bool, i64)> = (0..600)
        .map(|i| {
            let b = if rng.gen_bool(0.2) {
                i - rng.gen_range(0..50)
            } else {
                i
            };
            let s = if rng.gen_bool(0.1) {
                i - rng.gen_range(0..30)
            } else {
                i
            };
            (0, b, s, rng.gen_bool(0.05), rng.gen_range(0..4))
        })
        .collect();
    let (_dir, store) = int_store(&evs);
    let (mut hits, mut superseded) = (0, 0);
    for _ in 0..300 {
        let (b, s) = (rng.gen_range(-60..620), rng.gen_range(-40..620));
        let got = asof::lookup(
            &store,
            "t",
            &[Value::Int(0)],
            Some(&[Value::Int(b)]),
            Some(&Value::Int(s)),
        )
        .unwrap()
        .map(|g| (g.start.map(|v| v[0].clone()), g.system_start));
        let req = ScanRequest {
            keys: KeySelection::Eq(vec![Value::Int(0)]),
            business: TimeSelection::as_of(Value::Int(b)),
            system: TimeSelection::as_of(Value::Int(s)),
            ..Default::default()
        };
        let (_, rows) = table_strings_with(&store, "t", &req);
        assert!(rows.len() <= 1, "{rows:?}");
        let int = |c: &Option<String>| c.as_ref().map(|v| Value::Int(v.parse().unwrap()));
        let want = rows.first().map(|r| (int(&r[2]), int(&r[4])));
        assert_eq!(got, want, "b = {b}, s = {s}");
        hits += usize::from(got.is_some());
        superseded += usize::from(rows.first().is_some_and(|r| r[5].is_some()));
    }
    // Both halves of the index answered: rows still believed and rows superseded since.
    assert!(
        hits > 150 && superseded > 20,
        "{hits} hits, {superseded} superseded"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 150, ..ProptestConfig::default() })]

    /// A point lookup is the one row an as-of scan of that key returns.
    #[test]
    fn lookups_agree_with_scans(
        evs in proptest::collection::vec((0i64..2, 0i64..12, 0i64..12, proptest::bool::weighted(0.2), 0i64..3), 1..40),
        probes in proptest::collection::vec((0i64..2, -1i64..14, -1i64..14), 20),
    ) {
        let (_dir, store) = int_store(&evs);
        for (k, b, s) in probes {
            let got = asof::lookup(&store, "t", &[Value::Int(k)], Some(&[Value::Int(b)]), Some(&Value::Int(s))).unwrap();
            let req = ScanRequest {
                keys: KeySelection::Eq(vec![Value::Int(k)]),
                business: TimeSelection::as_of(Value::Int(b)),
                system: TimeSelection::as_of(Value::Int(s)),
                ..Default::default()
            };
            let (_, rows) = table_strings_with(&store, "t", &req);
            prop_assert!(rows.len() <= 1, "as-of on both timelines gives at most one row per key: {:?}", rows);
            match (got, rows.first()) {
                (None, None) => {}
                (Some(g), Some(r)) => {
                    prop_assert_eq!(&g.values[1], &r[1].as_ref().map_or(Value::Null, |v| Value::Int(v.parse().unwrap())));
                    prop_assert_eq!(g.start.map(|s| s[0].clone()), r[2].as_ref().map(|v| Value::Int(v.parse().unwrap())));
                    prop_assert_eq!(g.system_start, r[4].as_ref().map(|v| Value::Int(v.parse().unwrap())));
                }
                (g, r) => prop_assert!(false, "lookup {:?} but scan {:?}", g, r),
            }
            // At the current system time too, before and after the past-time index exists.
            let now = asof::lookup(&store, "t", &[Value::Int(k)], Some(&[Value::Int(b)]), None).unwrap();
            let req = ScanRequest {
                keys: KeySelection::Eq(vec![Value::Int(k)]),
                business: TimeSelection::as_of(Value::Int(b)),
                // Later than every event: what is believed now.
                system: TimeSelection::as_of(Value::Int(1_000)),
                ..Default::default()
            };
            let (_, rows) = table_strings_with(&store, "t", &req);
            match (now, rows.first()) {
                (None, None) => {}
                (Some(g), Some(r)) => {
                    prop_assert_eq!(g.start.map(|s| s[0].clone()), r[2].as_ref().map(|v| Value::Int(v.parse().unwrap())));
                    prop_assert_eq!(g.system_start, r[4].as_ref().map(|v| Value::Int(v.parse().unwrap())));
                }
                (g, r) => prop_assert!(false, "current lookup {:?} but scan {:?}", g, r),
            }
        }
    }
}
