//! `DESCRIBE HISTORY`: a table's commit log as a record batch, newest first (as Delta Lake shows
//! it).

use std::sync::Arc;

use arrow::array::{
    ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray,
};
use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use asof_storage::CommitInfo;

use crate::error::Result;

/// Reads one metric of a commit.
type Metric = fn(&CommitInfo) -> u64;

/// The commit log as a batch: `version`, `timestamp`, `operation`, `operationParameters` (JSON),
/// one column per metric of docs/SEMANTICS.md §7, `duration_ms`, and `peak_memory_bytes` (the
/// process's peak resident memory during the commit; NULL where it was not measured).
pub fn history_batch(history: &[CommitInfo]) -> Result<RecordBatch> {
    let commits: Vec<&CommitInfo> = history.iter().rev().collect();
    let metric = |f: Metric| -> ArrayRef {
        Arc::new(Int64Array::from_iter_values(
            commits.iter().map(|c| f(c) as i64),
        ))
    };
    let mut fields = vec![
        Field::new("version", DataType::Int64, false),
        Field::new(
            "timestamp",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            false,
        ),
        Field::new("operation", DataType::Utf8, false),
        Field::new("operationParameters", DataType::Utf8, false),
    ];
    let mut columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(
            commits.iter().map(|c| c.version as i64),
        )),
        Arc::new(
            TimestampMicrosecondArray::from_iter_values(commits.iter().map(|c| c.timestamp_us))
                .with_timezone("UTC"),
        ),
        Arc::new(StringArray::from_iter_values(
            commits.iter().map(|c| c.operation.as_str()),
        )),
        Arc::new(StringArray::from_iter_values(commits.iter().map(|c| {
            serde_json::to_string(&c.parameters).unwrap_or_else(|_| "{}".into())
        }))),
    ];
    let metrics: [(&str, Metric); 8] = [
        ("num_events_read", |c| c.metrics.num_events_read),
        ("num_upserted_rows", |c| c.metrics.num_upserted_rows),
        ("num_deleted_rows", |c| c.metrics.num_deleted_rows),
        ("num_late_events", |c| c.metrics.num_late_events),
        ("num_duplicates_ignored", |c| {
            c.metrics.num_duplicates_ignored
        }),
        ("num_conflicts_resolved", |c| {
            c.metrics.num_conflicts_resolved
        }),
        ("num_tombstones_collected", |c| {
            c.metrics.num_tombstones_collected
        }),
        ("num_dropped_rows", |c| c.metrics.num_dropped_rows),
    ];
    for (name, f) in metrics {
        fields.push(Field::new(name, DataType::Int64, false));
        columns.push(metric(f));
    }
    fields.push(Field::new("duration_ms", DataType::Float64, false));
    columns.push(Arc::new(Float64Array::from_iter_values(
        commits.iter().map(|c| c.duration_us as f64 / 1000.0),
    )));
    fields.push(Field::new("peak_memory_bytes", DataType::Int64, true));
    columns.push(Arc::new(Int64Array::from_iter(
        commits
            .iter()
            .map(|c| c.peak_memory_bytes.map(|b| b as i64)),
    )));
    Ok(RecordBatch::try_new(
        Arc::new(Schema::new(fields)),
        columns,
    )?)
}
