//! Source tables, flow checkpoints (refresh reads only what is new, durably with the data it
//! wrote), full refresh, views and DROP.

mod common;

use asof::Store;
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
            store.refresh("cdc", false).unwrap(),
            None,
            "nothing to read yet"
        );
        store
            .append("company_events", &string_batch(&h, &rows[..2]))
            .unwrap();
        let c = store.refresh("cdc", false).unwrap().unwrap();
        assert_eq!(c.metrics.num_events_read, 2);
        assert_eq!(c.parameters[asof::SOURCE_OFFSET], "2");
        assert_eq!(table_strings(&store, "company_points").1, expected(2));
        (h, rows)
    };
    // After a restart the checkpoint is where the last commit left it.
    let store = Store::open(dir.path()).unwrap();
    assert_eq!(store.refresh("cdc", false).unwrap(), None);
    store
        .append("company_events", &string_batch(&h, &rows[2..3]))
        .unwrap();
    store
        .append("company_events", &string_batch(&h, &rows[3..]))
        .unwrap();
    let c = store.refresh("cdc", false).unwrap().unwrap();
    assert_eq!(
        (c.metrics.num_events_read, c.metrics.num_duplicates_ignored),
        (2, 0)
    );
    assert_eq!(table_strings(&store, "company_points").1, expected(4));

    // A full refresh rebuilds the table from every source row: the same table, so its change feed
    // is empty and it upserts and deletes nothing.
    let c = store.refresh("cdc", true).unwrap().unwrap();
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
    let (_, src) = store.source_data("company_events").unwrap();
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
        store.refresh("cdc", false).unwrap();
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
