//! Source tables, flow checkpoints (refresh reads only what is new, durably with the data it
//! wrote), full refresh, views and DROP.

use crate::common;

use asof::{RefreshMode, Store};
use common::{data_dir, read_csv, sorted, string_batch, table_strings};

fn expected(n: usize) -> Vec<Vec<Option<String>>> {
    sorted(read_csv(&data_dir().join(format!("seed_bitemporal/expected_after_{n}.csv"))).1)
}

fn setup(store: &Store) -> (Vec<String>, Vec<Vec<Option<String>>>) {
    let (h, rows) = read_csv(&data_dir().join("seed_bitemporal/events.csv"));
    let schema = string_batch(&h, &rows[..1]).schema();
    store.create_source("company_events", &schema).unwrap();
    // The source holds strings; the flow reads its time columns as timestamps.
    let flow = common::seed_flow_builder("cdc", "company_points")
        .source_table("company_events")
        .build()
        .unwrap();
    store.create_flow(flow).unwrap();
    (h, rows)
}

#[test]
fn refresh_reads_only_what_is_new_and_survives_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let (h, rows) = {
        let store = Store::open(dir.path()).unwrap();
        let (h, rows) = setup(&store);
        assert_eq!(
            store.refresh("cdc", RefreshMode::Incremental).unwrap(),
            None,
            "nothing to read yet"
        );
        store
            .append("company_events", &string_batch(&h, &rows[..2]))
            .unwrap();
        let c = store
            .refresh("cdc", RefreshMode::Incremental)
            .unwrap()
            .unwrap();
        assert_eq!(c.metrics.num_events_read, 2);
        assert_eq!(c.parameters[asof::SOURCE_OFFSET], "2");
        assert_eq!(table_strings(&store, "company_points").1, expected(2));
        (h, rows)
    };
    // After a restart the checkpoint is where the last commit left it.
    let store = Store::open(dir.path()).unwrap();
    assert_eq!(
        store.refresh("cdc", RefreshMode::Incremental).unwrap(),
        None
    );
    store
        .append("company_events", &string_batch(&h, &rows[2..3]))
        .unwrap();
    store
        .append("company_events", &string_batch(&h, &rows[3..]))
        .unwrap();
    let c = store
        .refresh("cdc", RefreshMode::Incremental)
        .unwrap()
        .unwrap();
    assert_eq!(
        (c.metrics.num_events_read, c.metrics.num_duplicates_ignored),
        (2, 0)
    );
    assert_eq!(table_strings(&store, "company_points").1, expected(4));

    // A full refresh rebuilds the table from every source row: the same table, so its change feed
    // is empty and it upserts and deletes nothing.
    let c = store.refresh("cdc", RefreshMode::Full).unwrap().unwrap();
    assert_eq!(c.parameters[asof::FULL_REFRESH], "true");
    assert_eq!(
        (
            c.metrics.num_events_read,
            c.metrics.num_deleted_rows,
            c.metrics.num_upserted_rows
        ),
        (4, 0, 0)
    );
    assert_eq!(table_strings(&store, "company_points").1, expected(4));
    drop(store);
    let store = Store::open(dir.path()).unwrap();
    assert_eq!(table_strings(&store, "company_points").1, expected(4));
    let src = store
        .source_rows("company_events", asof::SourceRead::Now)
        .and_then(|r| r.collect_batches())
        .unwrap();
    assert_eq!(src.iter().map(|b| b.num_rows()).sum::<usize>(), 4);
}

#[test]
fn appends_are_validated_and_names_are_unique() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let (h, rows) = setup(&store);
    let mut bad_h = h.clone();
    bad_h[1] = "Nope".into();
    let e = store
        .append("company_events", &string_batch(&bad_h, &rows))
        .unwrap_err();
    assert!(e.to_string().contains("`Nope`"), "{e}");
    let schema = string_batch(&h, &rows).schema();
    assert!(
        store.create_source("company_points", &schema).is_err(),
        "a target has that name"
    );
    assert!(store.append("nope", &string_batch(&h, &rows)).is_err());
}

#[test]
fn views_persist_and_drop_removes_everything() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = Store::open(dir.path()).unwrap();
        let (h, rows) = setup(&store);
        store
            .append("company_events", &string_batch(&h, &rows))
            .unwrap();
        store.refresh("cdc", RefreshMode::Incremental).unwrap();
        store
            .create_view("v", "SELECT * FROM company_points")
            .unwrap();
        assert!(
            store.drop_table("company_events").is_err(),
            "it feeds a flow"
        );
    }
    let store = Store::open(dir.path()).unwrap();
    assert_eq!(
        store.views().unwrap(),
        vec![("v".to_string(), "SELECT * FROM company_points".to_string())]
    );
    store.drop_table("company_points").unwrap();
    store.drop_table("company_events").unwrap();
    store.drop_table("v").unwrap();
    drop(store);
    let store = Store::open(dir.path()).unwrap();
    assert!(
        store.tables().unwrap().is_empty()
            && store.sources().unwrap().is_empty()
            && store.views().unwrap().is_empty()
    );
    // The names are free again.
    setup(&store);
}

/// A source table of `n` rows `(id BIGINT, payload STRING)`, in one append, so that its rows
/// span many stored chunks.
fn wide_source(store: &Store, name: &str, n: i64) {
    use arrow::datatypes::{DataType, Field, Schema};
    let schema = Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("payload", DataType::Utf8, true),
    ]);
    store.create_source(name, &schema).unwrap();
    append_ids(store, name, 0..n);
}

/// Appends to a [`wide_source`] table one row per id of `ids`, in one append.
fn append_ids(store: &Store, name: &str, ids: std::ops::Range<i64>) {
    use arrow::array::{Int64Array, StringArray};
    let batch = arrow::array::RecordBatch::try_new(
        store.source_schema(name).unwrap(),
        vec![
            std::sync::Arc::new(Int64Array::from_iter_values(ids.clone())),
            std::sync::Arc::new(StringArray::from_iter_values(
                ids.map(|i| format!("row {i} {}", "x".repeat(100))),
            )),
        ],
    )
    .unwrap();
    store.append(name, &batch).unwrap();
}

#[test]
fn a_source_read_streams_as_of_its_start_while_rows_are_appended() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    wide_source(&store, "big", 20_000);
    let mut read = store.source_rows("big", asof::SourceRead::Now).unwrap();
    assert_eq!(read.written(), 20_000);
    let first = read.next().unwrap().unwrap();
    assert!(
        first.num_rows() < 20_000,
        "the read gives the table a chunk at a time, not whole"
    );
    // Rows appended (and a DELETE-free table) after the read began are not part of it.
    append_ids(&store, "big", 100_000..100_005);
    let mut ids: Vec<i64> = Vec::new();
    for b in std::iter::once(Ok(first)).chain(read) {
        let b = b.unwrap();
        let col = b.column(0).as_any();
        let col = col.downcast_ref::<arrow::array::Int64Array>().unwrap();
        ids.extend(col.values().iter());
    }
    assert_eq!(ids, (0..20_000).collect::<Vec<_>>());
    let now = store.source_rows("big", asof::SourceRead::Now).unwrap();
    assert_eq!(now.written(), 20_005);
}

#[test]
fn a_source_dropped_while_it_is_read_stops_the_read_with_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    wide_source(&store, "big", 20_000);
    let mut read = store.source_rows("big", asof::SourceRead::Now).unwrap();
    read.next().unwrap().unwrap();
    store.drop_table("big").unwrap();
    let rest: Result<Vec<_>, _> = read.collect();
    match rest {
        Err(asof::Error::SourceRewritten { table }) => assert_eq!(table, "big"),
        other => panic!("expected SourceRewritten, got {other:?}"),
    }
}
