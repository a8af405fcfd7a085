//! Ingest behaviour: batch validation (docs/SEMANTICS.md §2), value types, STRUCT sequences, composite keys,
//! the commit clock as system time, truncates, tombstone GC and conditions.

use crate::common;

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, BinaryArray, BooleanArray, BooleanBuilder, Date32Array, Decimal128Array,
    Float32Array, Float64Array, Int16Array, ListBuilder, RecordBatch, StringArray, StringBuilder,
    TimestampMicrosecondArray, TimestampMillisecondArray, UInt8Array,
};
use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use asof::{
    ColumnSelection, Condition, ConditionEvaluator, Error, FlowSpec, ScanRequest, Store, StoredAs,
    TimeSelection, Value,
};
use common::{string_batch, table_strings, table_strings_with};

fn strings(h: &[&str], rows: &[&[Option<&str>]]) -> RecordBatch {
    let header: Vec<String> = h.iter().map(|s| s.to_string()).collect();
    let rows: Vec<Vec<Option<String>>> = rows
        .iter()
        .map(|r| r.iter().map(|c| c.map(str::to_string)).collect())
        .collect();
    string_batch(&header, &rows)
}

fn scd2_store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let schema = Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("ts", DataType::Int64, false),
        Field::new("v", DataType::Int32, true),
        Field::new("op", DataType::Utf8, true),
    ]);
    let flow = FlowSpec::builder("f", "t", &schema)
        .keys(["id"])
        .sequence_by(["ts"])
        .delete_when(Condition::equals("op", "D"))
        .columns(ColumnSelection::all_except(["op"]))
        .stored_as(StoredAs::Scd2)
        .build()
        .unwrap();
    store.create_flow(flow).unwrap();
    (dir, store)
}

fn rejected(store: &Store, batch: &RecordBatch) -> (String, String, usize) {
    let before = (store.history("t").unwrap().len(), table_strings(store, "t"));
    match store.apply("f", batch) {
        Err(Error::InvalidBatch {
            column,
            problem,
            rows,
        }) => {
            assert_eq!(
                (store.history("t").unwrap().len(), table_strings(store, "t")),
                before,
                "nothing applied"
            );
            (column, problem, rows)
        }
        other => panic!("expected a rejected batch, got {other:?}"),
    }
}

#[test]
fn bad_batches_are_rejected_whole_and_the_store_stays_usable() {
    let (_dir, store) = scd2_store();
    let h = ["id", "ts", "v", "op"];
    store
        .apply(
            "f",
            &strings(&h, &[&[Some("1"), Some("1"), Some("10"), None]]),
        )
        .unwrap();

    let (col, problem, rows) = rejected(
        &store,
        &strings(
            &h,
            &[
                &[Some("2"), Some("1"), Some("1"), None],
                &[None, Some("2"), Some("1"), None],
                &[None, Some("3"), Some("1"), None],
            ],
        ),
    );
    assert_eq!((col.as_str(), rows), ("id", 2));
    assert!(problem.contains("key is NULL"), "{problem}");

    let (col, problem, rows) =
        rejected(&store, &strings(&h, &[&[Some("2"), None, Some("1"), None]]));
    assert_eq!((col.as_str(), rows), ("ts", 1));
    assert!(problem.contains("SEQUENCE BY"), "{problem}");

    let (col, problem, rows) = rejected(
        &store,
        &strings(
            &h,
            &[
                &[Some("2"), Some("5"), Some("x1"), None],
                &[Some("2"), Some("6"), Some("99999999999"), None],
                &[Some("2"), Some("7"), Some("3"), None],
            ],
        ),
    );
    assert_eq!((col.as_str(), rows), ("v", 2));
    assert!(
        problem.contains("cannot be converted to Int32"),
        "{problem}"
    );

    let (col, problem, rows) = rejected(
        &store,
        &strings(&["id", "ts", "op"], &[&[Some("2"), Some("5"), None]]),
    );
    assert_eq!((col.as_str(), rows), ("v", 1));
    assert!(problem.contains("missing"), "{problem}");

    // The message names the column, the problem and the count.
    let e = store
        .apply("f", &strings(&h, &[&[None, Some("2"), Some("1"), None]]))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("`id`") && e.contains("1 row") && e.contains("nothing applied"),
        "{e}"
    );

    let c = store
        .apply(
            "f",
            &strings(&h, &[&[Some("1"), Some("2"), Some("11"), None]]),
        )
        .unwrap();
    assert_eq!(c.version, 2);
    assert_eq!(table_strings(&store, "t").1.len(), 2);
}

/// Big batches are converted in slices on several threads: errors still count the rows of the
/// whole batch, and a good big batch gives the table its events give in small batches.
#[test]
fn big_batches_count_errors_over_the_whole_batch() {
    let n = 20_000usize;
    let h = ["id", "ts", "v", "op"];
    let cell = |i: usize, bad_key: &[usize], bad_v: &[usize]| -> Vec<Option<String>> {
        vec![
            (!bad_key.contains(&i)).then(|| (i % 97).to_string()),
            Some(i.to_string()),
            Some(if bad_v.contains(&i) {
                "x".to_string()
            } else {
                (i % 13).to_string()
            }),
            Some(if i.is_multiple_of(31) { "D" } else { "U" }.to_string()),
        ]
    };
    let header: Vec<String> = h.iter().map(|s| s.to_string()).collect();
    let batch = |bad_key: &[usize], bad_v: &[usize]| {
        let rows: Vec<Vec<Option<String>>> = (0..n).map(|i| cell(i, bad_key, bad_v)).collect();
        string_batch(&header, &rows)
    };

    let (_dir, store) = scd2_store();
    let (col, _, rows) = rejected(&store, &batch(&[3, 12_000, 19_999], &[]));
    assert_eq!((col.as_str(), rows), ("id", 3));
    let (col, _, rows) = rejected(&store, &batch(&[], &[0, 9_999, 10_000, 19_998]));
    assert_eq!((col.as_str(), rows), ("v", 4));

    let good = batch(&[], &[]);
    store.apply("f", &good).unwrap();
    let (_dir2, small) = scd2_store();
    for start in (0..n).step_by(2_857) {
        small
            .apply("f", &good.slice(start, 2_857.min(n - start)))
            .unwrap();
    }
    let (big_rows, small_rows) = (table_strings(&store, "t").1, table_strings(&small, "t").1);
    assert!(big_rows.len() > 1_000);
    assert_eq!(big_rows, small_rows);
}

/// A store whose commits of more than 1,000 rows are applied in parts (their source batches
/// turned into events a slice of rows at a time), or one that applies them whole; a flow with
/// COLUMNS TO UPDATE.
fn columns_to_update_store(parted: bool) -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let options = asof::StoreOptions {
        commit_part_rows: if parted { 1_000 } else { 1 << 30 },
        ..Default::default()
    };
    let store = Store::open_with(dir.path(), options).unwrap();
    let list = DataType::List(Arc::new(Field::new("item", DataType::Utf8, true)));
    let schema = Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("ts", DataType::Int64, false),
        Field::new("v", DataType::Int64, true),
        Field::new("upd", list, true),
    ]);
    let flow = FlowSpec::builder("f", "t", &schema)
        .keys(["id"])
        .sequence_by(["ts"])
        .columns_to_update("upd")
        .columns(ColumnSelection::all_except(["upd"]))
        .stored_as(StoredAs::Scd2)
        .build()
        .unwrap();
    store.create_flow(flow).unwrap();
    (dir, store)
}

#[test]
fn a_batch_applied_in_parts_is_checked_whole_though_its_events_are_made_in_slices() {
    let n = 5_000usize;
    // Rows in `null_key` have no key; rows in `unknown` name a column to update that is not one.
    let batch = |null_key: &[usize], unknown: &[usize]| {
        let mut upd = ListBuilder::new(StringBuilder::new());
        for i in 0..n {
            upd.values().append_value("v");
            if unknown.contains(&i) {
                upd.values().append_value("nope");
            }
            upd.append(true);
        }
        let id: arrow::array::Int64Array = (0..n)
            .map(|i| (!null_key.contains(&i)).then_some((i % 101) as i64))
            .collect();
        let cols: Vec<ArrayRef> = vec![
            Arc::new(id),
            Arc::new(arrow::array::Int64Array::from_iter_values(0..n as i64)),
            Arc::new(arrow::array::Int64Array::from_iter_values(
                (0..n as i64).map(|i| i * 7 % 13),
            )),
            Arc::new(upd.finish()),
        ];
        let schema = store_schema(&cols);
        RecordBatch::try_new(schema, cols).unwrap()
    };
    fn store_schema(cols: &[ArrayRef]) -> Arc<Schema> {
        let names = ["id", "ts", "v", "upd"];
        Arc::new(Schema::new(
            (names.iter().zip(cols))
                .map(|(n, c)| Field::new(*n, c.data_type().clone(), true))
                .collect::<Vec<_>>(),
        ))
    }
    for parted in [false, true] {
        let (_dir, store) = columns_to_update_store(parted);
        // Unknown names in three slices of the batch: counted over all of them.
        let (col, problem, rows) = rejected(&store, &batch(&[], &[5, 2_000, 4_999]));
        assert_eq!((col.as_str(), rows), ("upd", 3), "parted: {parted}");
        assert!(problem.contains("`nope`"), "{problem}");
        // A NULL key late in the batch is found first: the whole batch is checked before any
        // of its events is made.
        let (col, problem, rows) = rejected(&store, &batch(&[4_500, 4_600], &[5]));
        assert_eq!((col.as_str(), rows), ("id", 2), "parted: {parted}");
        assert!(problem.contains("key is NULL"), "{problem}");
    }
    // A good batch: the same table and metrics either way (each event a new version).
    let tables: Vec<_> = [false, true]
        .map(|parted| {
            let (_dir, store) = columns_to_update_store(parted);
            let info = store.apply("f", &batch(&[], &[])).unwrap();
            (info.metrics.num_upserted_rows, table_strings(&store, "t"))
        })
        .into();
    assert_eq!(tables[0].1 .1.len(), 5_000);
    assert_eq!(tables[0], tables[1]);
}

#[test]
fn bitemporal_rejects_null_system_sequence() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let schema = Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("b", DataType::Int64, false),
        Field::new("s", DataType::Int64, false),
    ]);
    store
        .create_flow(
            FlowSpec::builder("f", "t", &schema)
                .keys(["id"])
                .sequence_by(["b"])
                .system_sequence_by("s")
                .stored_as(StoredAs::Bitemporal)
                .build()
                .unwrap(),
        )
        .unwrap();
    let (col, problem, rows) = rejected(
        &store,
        &strings(&["id", "b", "s"], &[&[Some("a"), Some("1"), None]]),
    );
    assert_eq!((col.as_str(), rows), ("s", 1));
    assert!(problem.contains("SYSTEM SEQUENCE BY"), "{problem}");
}

#[test]
fn every_value_type_round_trips_with_its_arrow_type() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let list = DataType::List(Arc::new(Field::new("item", DataType::Utf8, true)));
    let fields = vec![
        Field::new("k", DataType::Utf8, false),
        Field::new(
            "seq",
            DataType::Timestamp(TimeUnit::Millisecond, Some("+02:00".into())),
            false,
        ),
        Field::new("b", DataType::Boolean, true),
        Field::new("i16", DataType::Int16, true),
        Field::new("u8", DataType::UInt8, true),
        Field::new("f32", DataType::Float32, true),
        Field::new("f64", DataType::Float64, true),
        Field::new("dec", DataType::Decimal128(12, 3), true),
        Field::new("s", DataType::Utf8, true),
        Field::new("bin", DataType::Binary, true),
        Field::new("d", DataType::Date32, true),
        Field::new(
            "tsus",
            DataType::Timestamp(TimeUnit::Microsecond, None),
            true,
        ),
        Field::new("l", list.clone(), true),
    ];
    let schema = Arc::new(Schema::new(fields));
    store
        .create_flow(
            FlowSpec::builder("f", "t", &schema)
                .keys(["k"])
                .sequence_by(["seq"])
                .stored_as(StoredAs::Scd2)
                .build()
                .unwrap(),
        )
        .unwrap();
    let mut lb = ListBuilder::new(StringBuilder::new());
    lb.values().append_value("x");
    lb.values().append_null();
    lb.append(true);
    lb.append(false);
    let cols: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from(vec!["a", "b"])),
        Arc::new(TimestampMillisecondArray::from(vec![1_000, 2_000]).with_timezone("+02:00")),
        Arc::new(BooleanArray::from(vec![Some(true), None])),
        Arc::new(Int16Array::from(vec![Some(-3), None])),
        Arc::new(UInt8Array::from(vec![Some(250), None])),
        Arc::new(Float32Array::from(vec![Some(1.5), None])),
        Arc::new(Float64Array::from(vec![Some(f64::NAN), None])),
        Arc::new(
            Decimal128Array::from(vec![Some(12_345), None])
                .with_precision_and_scale(12, 3)
                .unwrap(),
        ),
        Arc::new(StringArray::from(vec![Some("héllo\0"), None])),
        Arc::new(BinaryArray::from(vec![Some(&b"\x00\xff"[..]), None])),
        Arc::new(Date32Array::from(vec![Some(19_000), None])),
        Arc::new(TimestampMicrosecondArray::from(vec![Some(-5), None])),
        Arc::new(lb.finish()),
    ];
    store
        .apply("f", &RecordBatch::try_new(schema.clone(), cols).unwrap())
        .unwrap();
    drop(store);
    let store = Store::open(dir.path()).unwrap();
    let batches = asof::scan_all(&store, "t", &ScanRequest::default()).unwrap();
    let b = &batches[0];
    for f in schema.fields() {
        assert_eq!(
            b.schema().field_with_name(f.name()).unwrap().data_type(),
            f.data_type(),
            "{}",
            f.name()
        );
    }
    assert_eq!(
        b.schema()
            .field_with_name("__START_AT")
            .unwrap()
            .data_type(),
        schema.field_with_name("seq").unwrap().data_type()
    );
    let (_, rows) = table_strings(&store, "t");
    let a = rows.iter().find(|r| r[0].as_deref() == Some("a")).unwrap();
    let shown: Vec<&str> = a.iter().map(|c| c.as_deref().unwrap_or("NULL")).collect();
    assert_eq!(
        &shown[2..13],
        &[
            "true",
            "-3",
            "250",
            "1.5",
            "NaN",
            "12.345",
            "héllo\0",
            "00ff",
            "2022-01-08",
            "1969-12-31T23:59:59.999995",
            "[x, ]"
        ]
    );
    let bnull = rows.iter().find(|r| r[0].as_deref() == Some("b")).unwrap();
    assert!(bnull[2..13].iter().all(Option::is_none), "{bnull:?}");
}

#[test]
fn struct_sequences_order_by_each_component_and_show_as_structs() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let schema = Schema::new(vec![
        Field::new("k1", DataType::Utf8, false),
        Field::new("k2", DataType::Int32, false),
        Field::new("day", DataType::Date32, false),
        Field::new("n", DataType::Int64, false),
        Field::new("v", DataType::Utf8, true),
    ]);
    store
        .create_flow(
            FlowSpec::builder("f", "t", &schema)
                .keys(["k1", "k2"])
                .sequence_by(["day", "n"])
                .stored_as(StoredAs::Scd2)
                .build()
                .unwrap(),
        )
        .unwrap();
    let h = ["k1", "k2", "day", "n", "v"];
    // Arrives out of order: (day 2, n 1) before (day 1, n 9) and (day 2, n 0).
    store
        .apply(
            "f",
            &strings(
                &h,
                &[&[
                    Some("a"),
                    Some("1"),
                    Some("2025-01-02"),
                    Some("1"),
                    Some("late"),
                ]],
            ),
        )
        .unwrap();
    store
        .apply(
            "f",
            &strings(
                &h,
                &[
                    &[
                        Some("a"),
                        Some("1"),
                        Some("2025-01-01"),
                        Some("9"),
                        Some("first"),
                    ],
                    &[
                        Some("a"),
                        Some("1"),
                        Some("2025-01-02"),
                        Some("0"),
                        Some("second"),
                    ],
                    &[
                        Some("a"),
                        Some("2"),
                        Some("2025-01-01"),
                        Some("1"),
                        Some("other key"),
                    ],
                ],
            ),
        )
        .unwrap();
    let batches = asof::scan_all(
        &store,
        "t",
        &ScanRequest {
            keys: asof::KeySelection::Eq(vec!["a".into(), Value::Int(1)]),
            ..Default::default()
        },
    )
    .unwrap();
    let b = &batches[0];
    assert!(
        matches!(b.schema().field_with_name("__START_AT").unwrap().data_type(), DataType::Struct(f) if f.len() == 2)
    );
    let (_, rows) = table_strings_with(
        &store,
        "t",
        &ScanRequest {
            keys: asof::KeySelection::Eq(vec!["a".into(), Value::Int(1)]),
            ..Default::default()
        },
    );
    assert_eq!(rows.len(), 3);
    let start_of = |v: &str| {
        rows.iter().find(|r| r[4].as_deref() == Some(v)).unwrap()[5]
            .clone()
            .unwrap()
    };
    assert_eq!(start_of("first"), "{day: 2025-01-01, n: 9}");
    assert_eq!(start_of("second"), "{day: 2025-01-02, n: 0}");
    assert_eq!(start_of("late"), "{day: 2025-01-02, n: 1}");
    // As-of on a struct timeline: one value per component.
    let req = ScanRequest {
        business: TimeSelection::AsOf(vec!["2025-01-02".into(), Value::Int(0)]),
        ..Default::default()
    };
    let (_, rows) = table_strings_with(&store, "t", &req);
    let vs: Vec<&str> = rows.iter().map(|r| r[4].as_deref().unwrap()).collect();
    assert_eq!(vs, ["second", "other key"]);
}

#[test]
fn bitemporal_without_system_sequence_uses_the_commit_clock() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let schema = Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("b", DataType::Int64, false),
        Field::new("v", DataType::Utf8, true),
    ]);
    store
        .create_flow(
            FlowSpec::builder("f", "t", &schema)
                .keys(["id"])
                .sequence_by(["b"])
                .stored_as(StoredAs::Bitemporal)
                .build()
                .unwrap(),
        )
        .unwrap();
    let h = ["id", "b", "v"];
    let c1 = store
        .apply("f", &strings(&h, &[&[Some("a"), Some("10"), Some("x")]]))
        .unwrap();
    let c2 = store
        .apply("f", &strings(&h, &[&[Some("a"), Some("5"), Some("y")]]))
        .unwrap();
    assert!(c2.timestamp_us > c1.timestamp_us);
    let batches = asof::scan_all(&store, "t", &ScanRequest::default()).unwrap();
    assert_eq!(
        batches[0]
            .schema()
            .field_with_name("__SYSTEM_START_AT")
            .unwrap()
            .data_type(),
        &DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
    );
    // What we believed between the two commits: only x, from 10 on. The late y at 5 does not
    // change x's segment, so x's row stays open on system time.
    let between = asof::lookup(
        &store,
        "t",
        &["a".into()],
        Some(&[Value::Int(12)]),
        Some(&Value::Int(c1.timestamp_us)),
    )
    .unwrap()
    .unwrap();
    assert_eq!(between.values[2], Value::Str("x".into()));
    assert_eq!(
        (between.system_start, between.system_end),
        (Some(Value::Int(c1.timestamp_us)), None)
    );
    assert!(asof::lookup(
        &store,
        "t",
        &["a".into()],
        Some(&[Value::Int(7)]),
        Some(&Value::Int(c1.timestamp_us))
    )
    .unwrap()
    .is_none());
    let now = asof::lookup(&store, "t", &["a".into()], Some(&[Value::Int(7)]), None)
        .unwrap()
        .unwrap();
    assert_eq!(
        (now.values[2].clone(), now.end.clone()),
        (Value::Str("y".into()), Some(vec![Value::Int(10)]))
    );
}

fn scd1_store(gc_secs: u64) -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let schema = Schema::new(vec![
        Field::new("id", DataType::Utf8, true),
        Field::new("ts", DataType::Int64, false),
        Field::new("v", DataType::Utf8, true),
        Field::new("op", DataType::Utf8, true),
    ]);
    let flow = FlowSpec::builder("f", "t", &schema)
        .keys(["id"])
        .sequence_by(["ts"])
        .delete_when(Condition::Expr("op = 'D'".into()))
        .truncate_when(Condition::equals("op", "T"))
        .columns(ColumnSelection::all_except(["op", "ts"]))
        .tombstone_gc_threshold_secs(gc_secs)
        .build()
        .unwrap();
    store.create_flow(flow).unwrap();
    (dir, store)
}

/// A test evaluator for `Condition::Expr`: understands `col = 'literal'`.
struct Eq;
impl ConditionEvaluator for Eq {
    fn evaluate(&self, expr: &str, batch: &RecordBatch) -> Result<BooleanArray, String> {
        let (col, lit) = expr.split_once(" = ").ok_or("unsupported")?;
        let lit = lit.trim_matches('\'');
        let a = batch
            .column_by_name(col)
            .ok_or(format!("no column {col}"))?;
        let s = a
            .as_any()
            .downcast_ref::<StringArray>()
            .ok_or("not a string")?;
        let mut b = BooleanBuilder::new();
        for i in 0..s.len() {
            b.append_option(s.is_valid(i).then(|| s.value(i) == lit));
        }
        Ok(b.finish())
    }
}

#[test]
fn expression_conditions_need_an_evaluator() {
    let (_dir, store) = scd1_store(3600);
    let h = ["id", "ts", "v", "op"];
    let (col, problem, _) = rejected(
        &store,
        &strings(&h, &[&[Some("a"), Some("1"), Some("x"), Some("D")]]),
    );
    assert_eq!(col, "APPLY AS DELETE WHEN");
    assert!(problem.contains("evaluator"), "{problem}");
    store.set_condition_evaluator(Arc::new(Eq));
    store
        .apply(
            "f",
            &strings(
                &h,
                &[
                    &[Some("a"), Some("1"), Some("x"), None],
                    &[Some("b"), Some("1"), Some("y"), None],
                ],
            ),
        )
        .unwrap();
    store
        .apply(
            "f",
            &strings(&h, &[&[Some("a"), Some("2"), None, Some("D")]]),
        )
        .unwrap();
    assert_eq!(
        table_strings(&store, "t").1,
        vec![vec![Some("b".to_string()), Some("y".to_string())]]
    );
}

#[test]
fn truncates_delete_every_key_including_later_ones() {
    let (_dir, store) = scd1_store(3600);
    store.set_condition_evaluator(Arc::new(Eq));
    let h = ["id", "ts", "v", "op"];
    store
        .apply(
            "f",
            &strings(
                &h,
                &[
                    &[Some("a"), Some("1"), Some("x"), None],
                    &[Some("b"), Some("6"), Some("y"), None],
                ],
            ),
        )
        .unwrap();
    // A truncate at 5 (NULL key allowed): a goes, b (at 6) stays.
    store
        .apply("f", &strings(&h, &[&[None, Some("5"), None, Some("T")]]))
        .unwrap();
    assert_eq!(
        table_strings(&store, "t").1,
        vec![vec![Some("b".into()), Some("y".into())]]
    );
    // A late event for a new key before the truncate is truncated too; one after it is not.
    store
        .apply(
            "f",
            &strings(
                &h,
                &[
                    &[Some("c"), Some("4"), Some("z"), None],
                    &[Some("d"), Some("7"), Some("w"), None],
                ],
            ),
        )
        .unwrap();
    let keys: Vec<String> = table_strings(&store, "t")
        .1
        .iter()
        .map(|r| r[0].clone().unwrap())
        .collect();
    assert_eq!(keys, ["b", "d"]);
}

#[test]
fn tombstones_are_collected_after_the_threshold() {
    let h = ["id", "ts", "v", "op"];
    for (gc, comes_back) in [(0u64, true), (3600, false)] {
        let (dir, store) = scd1_store(gc);
        store.set_condition_evaluator(Arc::new(Eq));
        store
            .apply(
                "f",
                &strings(&h, &[&[Some("a"), Some("10"), Some("x"), None]]),
            )
            .unwrap();
        store
            .apply(
                "f",
                &strings(&h, &[&[Some("a"), Some("20"), None, Some("D")]]),
            )
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(5));
        let c = store
            .apply(
                "f",
                &strings(&h, &[&[Some("zz"), Some("1"), Some("other"), None]]),
            )
            .unwrap();
        assert_eq!(c.metrics.num_tombstones_collected, u64::from(comes_back));
        // A late upsert older than the delete.
        store
            .apply(
                "f",
                &strings(&h, &[&[Some("a"), Some("15"), Some("late"), None]]),
            )
            .unwrap();
        let has_a = |s: &Store| {
            table_strings(s, "t")
                .1
                .iter()
                .any(|r| r[0].as_deref() == Some("a"))
        };
        assert_eq!(has_a(&store), comes_back, "gc threshold {gc}");
        // The same after a restart (the collection is replayed).
        drop(store);
        let store = Store::open(dir.path()).unwrap();
        store.set_condition_evaluator(Arc::new(Eq));
        assert_eq!(has_a(&store), comes_back, "gc threshold {gc}, reopened");
    }
}

#[test]
fn zoned_and_naive_timestamps_compare_as_instants() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let schema = Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            false,
        ),
        Field::new("v", DataType::Int64, true),
    ]);
    store
        .create_flow(
            FlowSpec::builder("f", "t", &schema)
                .keys(["id"])
                .sequence_by(["ts"])
                .stored_as(StoredAs::Scd2)
                .build()
                .unwrap(),
        )
        .unwrap();
    // The same instant written with a +02:00 zone, and a naive (UTC) one an hour later.
    store
        .apply(
            "f",
            &strings(
                &["id", "ts", "v"],
                &[
                    &[Some("1"), Some("2025-01-01T12:00:00+02:00"), Some("1")],
                    &[Some("1"), Some("2025-01-01T11:00:00"), Some("2")],
                ],
            ),
        )
        .unwrap();
    let (_, rows) = table_strings(&store, "t");
    assert_eq!(rows.len(), 2);
    let first = rows
        .iter()
        .find(|r| r[2].as_deref() == Some("1"))
        .unwrap_or_else(|| panic!("{rows:?}"));
    assert_eq!(first[3].as_deref(), Some("2025-01-01T10:00:00Z"));
    assert_eq!(first[4].as_deref(), Some("2025-01-01T11:00:00Z"));
}
