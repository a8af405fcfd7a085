//! `explain_changes('t', key, from, to)` (docs/SEMANTICS.md §7.4): the corrections of one key's
//! history between two commits, each with the event (or DML statement) that caused it and how
//! late that event was on each timeline.
//!
//! The changes are the key's rows of the change feed; the causes come from the table's log
//! ([`Store::key_events`]): for each commit, the key's event with the smallest sequence (where the
//! refold of its history started), and the greatest sequence and system sequence among the key's
//! events logged before that commit, which say how late it came.

use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanBuilder, Int64Builder, RecordBatch, StringBuilder};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use asof_storage::{cmp_rows, ColumnType, EventKind, Origin, Store, StoredAs, Value};

use crate::arrow_conv::ValueBuilder;
use crate::error::{QueryError, Result};

/// The causes of the commits that logged events for `key`: one row per commit, with
/// `_commit_version`, `_cause` (`upsert`, `delete`), `_cause_origin` (`feed`, `statement`),
/// `_cause_business` and `_cause_system` (the event's sequence and system sequence),
/// `_latest_business_before` and `_latest_system_before` (the greatest among the key's events
/// logged before that commit), `_late_on_business` and `_late_on_system`.
pub fn change_causes(
    store: &Store,
    table: &str,
    key: &[Value],
) -> Result<(SchemaRef, RecordBatch)> {
    let events = store.key_events(table, key)?;
    let seq_type = sequence_type(store, table)?;
    let table_schema = store.schema(table)?;
    let sys_type = system_type(&table_schema);
    let seq_arrow = seq_type
        .as_ref()
        .map_or(DataType::Utf8, ColumnType::to_arrow);
    let sys_arrow = sys_type
        .as_ref()
        .map_or(DataType::Utf8, ColumnType::to_arrow);
    let schema = Arc::new(Schema::new(vec![
        Field::new("_commit_version", DataType::Int64, false),
        Field::new("_cause", DataType::Utf8, false),
        Field::new("_cause_origin", DataType::Utf8, false),
        Field::new("_cause_business", seq_arrow.clone(), true),
        Field::new("_cause_system", sys_arrow.clone(), true),
        Field::new("_latest_business_before", seq_arrow, true),
        Field::new("_latest_system_before", sys_arrow, true),
        Field::new("_late_on_business", DataType::Boolean, true),
        Field::new("_late_on_system", DataType::Boolean, true),
    ]));
    let mut version = Int64Builder::new();
    let mut cause = StringBuilder::new();
    let mut origin = StringBuilder::new();
    let mut seq = Sequences::new(seq_type.as_ref());
    let mut sys = Sequences::new(sys_type.as_ref());
    let mut seq_before = Sequences::new(seq_type.as_ref());
    let mut sys_before = Sequences::new(sys_type.as_ref());
    let mut late_b = BooleanBuilder::new();
    let mut late_s = BooleanBuilder::new();
    // The greatest sequence and system sequence of the key's events before each commit.
    let mut max_seq: Option<Vec<Value>> = None;
    let mut max_sys: Option<Value> = None;
    for commit in events.chunk_by(|a, b| a.version == b.version) {
        let first = commit
            .iter()
            .min_by(|a, b| cmp_rows(&a.sequence, &b.sequence))
            .expect("a commit's events");
        version.append_value(first.version as i64);
        cause.append_value(kind_name(first.kind));
        origin.append_value(origin_name(first.origin));
        seq.append(Some(&first.sequence));
        sys.append(first.system.as_ref().map(std::slice::from_ref));
        seq_before.append(max_seq.as_deref());
        sys_before.append(max_sys.as_ref().map(std::slice::from_ref));
        late_b.append_option(
            max_seq
                .as_ref()
                .map(|m| cmp_rows(&first.sequence, m).is_lt()),
        );
        late_s.append_option(match (&first.system, &max_sys) {
            (Some(s), Some(m)) => Some(s.canonical_cmp(m).is_lt()),
            _ => None,
        });
        for e in commit {
            if max_seq
                .as_ref()
                .is_none_or(|m| cmp_rows(&e.sequence, m).is_gt())
            {
                max_seq = Some(e.sequence.clone());
            }
            if let Some(s) = &e.system {
                if max_sys.as_ref().is_none_or(|m| s.canonical_cmp(m).is_gt()) {
                    max_sys = Some(s.clone());
                }
            }
        }
    }
    let columns: Vec<ArrayRef> = vec![
        Arc::new(version.finish()),
        Arc::new(cause.finish()),
        Arc::new(origin.finish()),
        seq.finish()?,
        sys.finish()?,
        seq_before.finish()?,
        sys_before.finish()?,
        Arc::new(late_b.finish()),
        Arc::new(late_s.finish()),
    ];
    let batch = RecordBatch::try_new(schema.clone(), columns)?;
    Ok((schema, batch))
}

/// The type of a bitemporal table's system times (the commit clock without `SYSTEM SEQUENCE BY`).
fn system_type(schema: &asof_storage::TableSchema) -> Option<ColumnType> {
    (schema.mode == StoredAs::Bitemporal).then(|| {
        schema
            .system_sequence
            .clone()
            .unwrap_or_else(ColumnType::commit_timestamp)
    })
}

fn kind_name(kind: EventKind) -> &'static str {
    match kind {
        EventKind::Upsert => "upsert",
        EventKind::Delete => "delete",
    }
}

fn origin_name(origin: Origin) -> &'static str {
    match origin {
        Origin::Feed => "feed",
        Origin::Statement => "statement",
    }
}

/// The type of the table's sequence, if it has one component (a `STRUCT(...)` sequence is shown
/// as text).
fn sequence_type(store: &Store, table: &str) -> Result<Option<ColumnType>> {
    let flows = store.flows(table)?;
    let flow = flows
        .first()
        .ok_or_else(|| QueryError::Invalid(format!("`{table}` has no flow")))?;
    let [name] = flow.sequence_by.as_slice() else {
        return Ok(None);
    };
    Ok(flow
        .source
        .iter()
        .find(|c| &c.name == name)
        .map(|c| c.ty.clone()))
}

/// A column of sequences: of their type, or as text for several components.
enum Sequences {
    Typed(ValueBuilder),
    Text(StringBuilder),
}

impl Sequences {
    fn new(ty: Option<&ColumnType>) -> Self {
        match ty {
            Some(t) => Sequences::Typed(ValueBuilder::new(t, 16)),
            None => Sequences::Text(StringBuilder::new()),
        }
    }

    fn append(&mut self, v: Option<&[Value]>) {
        match (self, v) {
            (Sequences::Typed(b), Some([one])) => b.append(one),
            (Sequences::Typed(b), _) => b.append_null(),
            (Sequences::Text(b), Some(parts)) => b.append_value(format!("{parts:?}")),
            (Sequences::Text(b), None) => b.append_null(),
        }
    }

    fn finish(&mut self) -> Result<ArrayRef> {
        Ok(match self {
            Sequences::Typed(b) => b.finish()?,
            Sequences::Text(b) => Arc::new(b.finish()),
        })
    }
}

/// `row_lineage('t', key [, business [, system]])` (docs/SEMANTICS.md §7.5): the events behind the
/// row version of `key` valid at business time `business` as known at system time `system` (the
/// current row without them), read from the table's log: each with the commit that logged it, what
/// wrote it (a flow, with the rows of its source that commit read, or a DML statement), and its
/// business and system times. Empty when no row is valid there.
pub fn row_lineage(
    store: &Store,
    table: &str,
    key: &Value,
    business: Option<&Value>,
    system: Option<&Value>,
) -> Result<(SchemaRef, RecordBatch)> {
    let table_schema = store.schema(table)?;
    let seq_type = sequence_type(store, table)?;
    let sys_type = system_type(&table_schema);
    let schema = Arc::new(Schema::new(vec![
        Field::new("_commit_version", DataType::Int64, false),
        Field::new("_commit_timestamp", DataType::Utf8, false),
        Field::new("_operation", DataType::Utf8, false),
        Field::new("_event", DataType::Utf8, false),
        Field::new("_origin", DataType::Utf8, false),
        Field::new(
            "_business",
            seq_type
                .as_ref()
                .map_or(DataType::Utf8, ColumnType::to_arrow),
            true,
        ),
        Field::new(
            "_system",
            sys_type
                .as_ref()
                .map_or(DataType::Utf8, ColumnType::to_arrow),
            true,
        ),
        Field::new("_source", DataType::Utf8, true),
        Field::new("_source_rows", DataType::Utf8, true),
        Field::new("_source_row", DataType::Int64, true),
        Field::new("_source_file", DataType::Utf8, true),
        Field::new("_source_file_row", DataType::Int64, true),
        Field::new("_statement", DataType::Utf8, true),
    ]));
    let row = crate::scan::lookup(
        store,
        table,
        std::slice::from_ref(key),
        business.map(std::slice::from_ref),
        system,
    )?;
    let events = match &row {
        None => Vec::new(),
        Some(row) => {
            let all = store.key_events(table, std::slice::from_ref(key))?;
            match (&row.start, &row.end) {
                (Some(start), end) => all
                    .into_iter()
                    .filter(|e| cmp_rows(&e.sequence, start).is_ge())
                    .filter(|e| {
                        end.as_ref()
                            .is_none_or(|end| cmp_rows(&e.sequence, end).is_lt())
                    })
                    .filter(|e| match (&e.system, &row.system_start) {
                        (Some(s), Some(known)) => s.canonical_cmp(known).is_le(),
                        _ => true,
                    })
                    .collect(),
                // SCD TYPE 1: the events since the key's last delete.
                (None, _) => {
                    let mut all = all;
                    all.sort_by(|a, b| cmp_rows(&a.sequence, &b.sequence));
                    let from = all
                        .iter()
                        .rposition(|e| e.kind == EventKind::Delete)
                        .map_or(0, |i| i + 1);
                    all.split_off(from)
                }
            }
        }
    };
    let history = store.history(table)?;
    let flows = store.flows(table)?;
    let mut version = Int64Builder::new();
    let mut stamp = StringBuilder::new();
    let mut operation = StringBuilder::new();
    let mut event = StringBuilder::new();
    let mut origin = StringBuilder::new();
    let mut seq = Sequences::new(seq_type.as_ref());
    let mut sys = Sequences::new(sys_type.as_ref());
    let mut source = StringBuilder::new();
    let mut source_rows = StringBuilder::new();
    let mut source_row = Int64Builder::new();
    let mut source_file = StringBuilder::new();
    let mut source_file_row = Int64Builder::new();
    let mut statement = StringBuilder::new();
    for e in &events {
        let commit = history.iter().find(|c| c.version == e.version);
        version.append_value(e.version as i64);
        stamp.append_value(commit.map_or(String::new(), |c| {
            chrono::DateTime::from_timestamp_micros(c.timestamp_us)
                .map(|t| t.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string())
                .unwrap_or_default()
        }));
        operation.append_value(commit.map_or("", |c| c.operation.as_str()));
        event.append_value(kind_name(e.kind));
        origin.append_value(origin_name(e.origin));
        seq.append(Some(&e.sequence));
        sys.append(e.system.as_ref().map(std::slice::from_ref));
        // A flow's commit read its source's rows from the flow's previous checkpoint to this one.
        let flow = commit
            .and_then(|c| c.parameters.get("flow"))
            .filter(|f| !f.contains(','))
            .and_then(|f| flows.iter().find(|x| &x.name == f));
        match (flow, commit) {
            (Some(f), Some(c)) if e.origin == Origin::Feed => {
                source.append_option(f.source_table.as_deref());
                let offset = |c: &asof_storage::CommitInfo| {
                    c.parameters
                        .get(asof_storage::SOURCE_OFFSET)
                        .filter(|_| c.parameters.get("flow") == Some(&f.name))
                        .or_else(|| {
                            c.parameters
                                .get(&format!("{}.{}", asof_storage::SOURCE_OFFSET, f.name))
                        })
                        .cloned()
                };
                let to = offset(c);
                let from = history
                    .iter()
                    .filter(|p| p.version < c.version)
                    .rev()
                    .find_map(offset)
                    .unwrap_or_else(|| "0".into());
                // The one row of that range the event came from, read through the flow again.
                let range = to
                    .as_deref()
                    .and_then(|to| Some(from.parse().ok()?..to.parse().ok()?));
                let row = match range {
                    Some(r) => store.source_row_of(table, &f.name, r, e)?,
                    None => None,
                };
                source_rows.append_option(to.map(|to| format!("{from}..{to}")));
                source_row.append_option(row.as_ref().map(|r| r.position as i64));
                source_file.append_option(row.as_ref().and_then(|r| r.file.clone()));
                source_file_row.append_option(
                    row.as_ref()
                        .filter(|r| r.file.is_some())
                        .map(|r| r.row_in_append as i64 + 1),
                );
            }
            _ => {
                source.append_null();
                source_rows.append_null();
                source_row.append_null();
                source_file.append_null();
                source_file_row.append_null();
            }
        }
        statement.append_option(commit.and_then(|c| c.parameters.get("statement")));
    }
    let columns: Vec<ArrayRef> = vec![
        Arc::new(version.finish()),
        Arc::new(stamp.finish()),
        Arc::new(operation.finish()),
        Arc::new(event.finish()),
        Arc::new(origin.finish()),
        seq.finish()?,
        sys.finish()?,
        Arc::new(source.finish()),
        Arc::new(source_rows.finish()),
        Arc::new(source_row.finish()),
        Arc::new(source_file.finish()),
        Arc::new(source_file_row.finish()),
        Arc::new(statement.finish()),
    ];
    Ok((schema.clone(), RecordBatch::try_new(schema, columns)?))
}
