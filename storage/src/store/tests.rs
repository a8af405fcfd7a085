//! Unit tests of the store that need its insides.

use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema};

use super::*;
use crate::flow::{ColumnSelection, StoredAs};
use crate::kv::MemKv;

/// Every row of the table as of `version` (`None`: the latest), sorted.
fn rows(store: &Store, version: Option<u64>) -> Vec<String> {
    let mut out = Vec::new();
    store
        .read("t", |t| {
            let spec = ScanSpec {
                version,
                ..Default::default()
            };
            let mut cursor = ScanCursor::default();
            while !cursor.is_done() {
                t.scan(&spec, &mut cursor, 7, |r| out.push(format!("{r:?}")))
                    .unwrap();
            }
        })
        .unwrap();
    out.sort();
    out
}

/// VACUUM replays its base, which holds every event, in parts of `REPLAY_PART` events; the
/// table comes out the same as the one the commits built.
#[test]
fn a_commit_replayed_in_parts_gives_the_same_table() {
    let schema = Schema::new(vec![
        Field::new("k", DataType::Int64, false),
        Field::new("b", DataType::Int64, false),
        Field::new("s", DataType::Int64, false),
        Field::new("v", DataType::Int64, false),
    ]);
    let flow = FlowSpec::builder("f", "t", &schema)
        .keys(["k"])
        .sequence_by(["b"])
        .system_sequence_by("s")
        .columns(ColumnSelection::all_except(["b", "s"]))
        .stored_as(StoredAs::Bitemporal)
        .build()
        .unwrap();
    let store = Store::with_kv(Box::new(MemKv::default())).unwrap();
    store.create_flow(flow).unwrap();
    // Three keys; every seventh event late on business time, every fifth on system time.
    let events: Vec<[i64; 4]> = (0..60i64)
        .map(|i| {
            let b = if i % 7 == 3 { i - 9 } else { i };
            let s = if i % 5 == 2 { i - 6 } else { i };
            [i % 3, b, s, i % 4]
        })
        .collect();
    for part in [&events[..8], &events[8..40], &events[40..]] {
        let col = |j: usize| -> ArrayRef {
            Arc::new(Int64Array::from_iter_values(part.iter().map(|e| e[j])))
        };
        let batch =
            RecordBatch::try_new(Arc::new(schema.clone()), (0..4).map(col).collect()).unwrap();
        store.apply("f", &batch).unwrap();
    }
    let before = rows(&store, None);
    assert!(before.len() > 60, "{} rows", before.len());
    store
        .vacuum_with("t", std::time::Duration::ZERO, RetentionCheck::Disabled)
        .unwrap();
    assert_eq!(rows(&store, None), before);
}
