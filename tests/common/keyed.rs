//! The events the engine property tests commit (key, business sequence, system sequence,
//! delete, value), as Arrow batches, and the flow `f` into `t` that applies them.

use std::sync::Arc;

use arrow::array::{Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use asof::{Condition, FlowSpec, StoredAs};

pub fn schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, false),
        Field::new("seq", DataType::Int64, false),
        Field::new("sys", DataType::Int64, false),
        Field::new("op", DataType::Utf8, false),
        Field::new("v", DataType::Utf8, true),
    ]))
}

pub type Ev = (i64, i64, i64, bool, Option<String>);

pub fn batch(events: &[Ev]) -> RecordBatch {
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from_iter_values(events.iter().map(|e| e.0))),
            Arc::new(Int64Array::from_iter_values(events.iter().map(|e| e.1))),
            Arc::new(Int64Array::from_iter_values(events.iter().map(|e| e.2))),
            Arc::new(StringArray::from_iter_values(events.iter().map(|e| {
                if e.3 {
                    "D"
                } else {
                    "U"
                }
            }))),
            Arc::new(StringArray::from(
                events.iter().map(|e| e.4.clone()).collect::<Vec<_>>(),
            )),
        ],
    )
    .unwrap()
}

/// The flow `f` into `t`, stored as `mode`.
pub fn flow(mode: StoredAs) -> asof::Flow {
    let mut f = FlowSpec::builder("f", "t", &schema())
        .keys(["k"])
        .sequence_by(["seq"])
        .delete_when(Condition::equals("op", "D"))
        .stored_as(mode);
    if mode == StoredAs::Bitemporal {
        f = f.system_sequence_by("sys");
    }
    f.build().unwrap()
}

/// Batches as one line of text per row (with the table's frame), sorted: two scans compare
/// whatever order their rows come in.
pub fn sorted_lines(batches: &[RecordBatch]) -> Vec<String> {
    let text = arrow::util::pretty::pretty_format_batches(batches)
        .unwrap()
        .to_string();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    lines.sort();
    lines
}
