//! The reference case of docs/SEMANTICS.md §6 (`tests/data/seed_bitemporal`): the table
//! after each event, and the final table for every arrival order and every way of batching it.

use crate::common;

use asof::Store;
use common::{data_dir, read_csv, sorted, string_batch, table_strings};
use itertools::Itertools;

fn seed_flow() -> asof::Flow {
    common::seed_flow_builder("company_points_cdc", "company_points")
        .build()
        .expect("valid flow")
}

fn expected(n: usize) -> (Vec<String>, Vec<Vec<Option<String>>>) {
    let (h, rows) = read_csv(&data_dir().join(format!("seed_bitemporal/expected_after_{n}.csv")));
    (h, sorted(rows))
}

fn new_store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    store.create_flow(seed_flow()).unwrap();
    (dir, store)
}

#[test]
fn table_after_each_event_matches_the_reference() {
    let (header, events) = read_csv(&data_dir().join("seed_bitemporal/events.csv"));
    let (_dir, store) = new_store();
    for n in 1..=events.len() {
        store
            .apply(
                "company_points_cdc",
                &string_batch(&header, &events[n - 1..n]),
            )
            .unwrap();
        let (names, rows) = table_strings(&store, "company_points");
        let (exp_names, exp_rows) = expected(n);
        assert_eq!(names, exp_names);
        assert_eq!(rows, exp_rows, "after event {n}");
    }
}

#[test]
fn every_arrival_order_and_batching_gives_the_reference_table() {
    let (header, events) = read_csv(&data_dir().join("seed_bitemporal/events.csv"));
    let (_, exp) = expected(4);
    let mut runs = 0;
    for order in (0..events.len()).permutations(events.len()) {
        // Each of the 3 gaps between consecutive events is a batch boundary or not.
        for cuts in 0..(1u32 << (events.len() - 1)) {
            let (_dir, store) = new_store();
            let mut batch = Vec::new();
            for (i, &e) in order.iter().enumerate() {
                batch.push(events[e].clone());
                if i == order.len() - 1 || cuts & (1 << i) != 0 {
                    store
                        .apply("company_points_cdc", &string_batch(&header, &batch))
                        .unwrap();
                    batch.clear();
                }
            }
            let (_, rows) = table_strings(&store, "company_points");
            assert_eq!(rows, exp, "order {order:?}, cuts {cuts:b}");
            runs += 1;
        }
    }
    assert_eq!(runs, 24 * 8);
}

#[test]
fn reopening_between_events_changes_nothing() {
    let (header, events) = read_csv(&data_dir().join("seed_bitemporal/events.csv"));
    let dir = tempfile::tempdir().unwrap();
    {
        let store = Store::open(dir.path()).unwrap();
        store.create_flow(seed_flow()).unwrap();
    }
    for n in [3usize, 1, 4, 2] {
        let store = Store::open(dir.path()).unwrap();
        store
            .apply(
                "company_points_cdc",
                &string_batch(&header, &events[n - 1..n]),
            )
            .unwrap();
    }
    let store = Store::open(dir.path()).unwrap();
    let (_, rows) = table_strings(&store, "company_points");
    assert_eq!(rows, expected(4).1);
    // Replaying everything is a no-op.
    let c = store
        .apply("company_points_cdc", &string_batch(&header, &events))
        .unwrap();
    assert_eq!(c.metrics.num_duplicates_ignored, 4);
    assert_eq!(
        (c.metrics.num_upserted_rows, c.metrics.num_deleted_rows),
        (0, 0)
    );
    assert_eq!(table_strings(&store, "company_points").1, expected(4).1);
}
