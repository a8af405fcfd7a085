//! DML statements on target tables (`INSERT`, `UPDATE`, `DELETE`, `MERGE`): one commit each, whose
//! events the engine derives from the rows the statement gives ([`crate::engine::statement`];
//! docs/SEMANTICS.md §2.4).

use std::collections::BTreeMap;

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::record_batch::RecordBatch;

use super::commit::{now_us, CommitInfo};
use super::flow_commit::{read_keys, write_applied, Applied, Log};
use super::load::{KeysFrom, Load};
use super::{table_mut, Store};
use crate::commit_clock::CommitClock;
use crate::engine::fold::Bytes;
use crate::engine::statement::{Patch, Planned};
use crate::engine::{CommitPart, Logging};
use crate::error::{Error, Result};
use crate::flow::{StoredAs, TableSchema, END_AT, START_AT};
use crate::keycodec::{encode_tuple, encode_value};
use crate::value::{cast_column, column_values, ColumnType, TimeUnit, Value};

pub use crate::engine::statement::Edit;

/// The statement a [`Dml`] commit is named after in the table's history.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DmlOperation {
    /// `INSERT INTO`.
    Insert,
    /// `UPDATE`.
    Update,
    /// `DELETE FROM`.
    Delete,
    /// `MERGE INTO`.
    Merge,
}

impl DmlOperation {
    /// The commit's operation, as Delta Lake names it.
    pub fn name(self) -> &'static str {
        match self {
            DmlOperation::Insert => "WRITE",
            DmlOperation::Update => "UPDATE",
            DmlOperation::Delete => "DELETE",
            DmlOperation::Merge => "MERGE",
        }
    }
}

/// A DML statement's change to a target table, as rows: each row says what the table shows for
/// its key over a business range.
#[derive(Clone, Copy, Debug)]
pub struct Dml<'a> {
    /// What the commit is called.
    pub operation: DmlOperation,
    /// The rows: every output column of the table (by name); for SCD TYPE 2 and BITEMPORAL
    /// tables also `__START_AT` and, optionally, `__END_AT` (absent or NULL: open), the business
    /// range each row's edit covers. SCD TYPE 1 rows have no range.
    pub rows: &'a RecordBatch,
    /// Per row, what to do over its range.
    pub edits: &'a [Edit],
    /// The statement's text, kept with the commit (parameter `statement`).
    pub text: &'a str,
}

fn rejected(column: &str, problem: impl Into<String>, rows: usize) -> Error {
    Error::InvalidStatement {
        column: column.to_string(),
        problem: problem.into(),
        rows,
    }
}

impl Store {
    /// Applies a DML statement to target table `table` as one durable commit (docs/SEMANTICS.md
    /// §2.4). The rows are checked as a whole first; on any error nothing is applied.
    pub fn apply_dml(&self, table: &str, dml: Dml<'_>) -> Result<CommitInfo> {
        let clock = CommitClock::start();
        let mut g = self.write_inner()?;
        let t = table_mut(&mut g.tables, table)?;
        let schema = t.state.schema.clone();
        let generated = t.generated.clone();
        // Generated columns take the values their expressions give the statement's rows.
        let recomputed;
        let dml = if generated.is_empty() {
            dml
        } else {
            let columns: Vec<crate::flow::SourceColumn> = schema
                .columns
                .iter()
                .map(|(name, ty)| crate::flow::SourceColumn {
                    name: name.clone(),
                    ty: ty.clone(),
                })
                .collect();
            recomputed = crate::generated::compute(
                dml.rows.clone(),
                &columns,
                &generated,
                0,
                g.evaluator.as_ref(),
            )?;
            Dml {
                rows: &recomputed,
                ..dml
            }
        };
        let rows = statement_rows(&schema, &dml)?;
        // A table not in memory whose records are current is not loaded: the heads of the keys
        // the statement touches are read, and dropped again once it is written, as an increment
        // of a flow does (`Load::Skeleton`).
        let keys_from = g.load_for_increment(table)?;
        let inner = &mut *g;
        let t = table_mut(&mut inner.tables, table)?;
        if keys_from == KeysFrom::Heads {
            let mut keys: Vec<Bytes> = rows.iter().map(|p| p.key.clone()).collect();
            keys.sort_unstable();
            keys.dedup();
            if let Err(e) = read_keys(inner.kv.as_ref(), t, &keys) {
                t.state = t.new_state();
                t.load = Load::Pending;
                return Err(e);
            }
            if let Load::Skeleton { keys_read } = &mut t.load {
                *keys_read += keys.len() as u64;
            }
        }
        let last = t.commits.last().expect("commit 0 exists");
        let version = last.version + 1;
        let ts = now_us().max(last.timestamp_us + 1);
        let sys = statement_system_time(&schema, ts)?;
        let planned = t.state.statement_events(rows, &sys);
        let events = match planned.inspect_err(|e| inner.poisoned = Some(e.to_string()))? {
            Planned::Events(events) => events,
            Planned::Overlaps(n) => {
                // Planning thawed the keys (their pages queued for deletion, their heads to be
                // written): a state that read them from their heads is dropped, and read again
                // by the table's next use.
                if keys_from == KeysFrom::Heads {
                    t.state = t.new_state();
                    t.load = Load::Pending;
                }
                let (column, rule) = match schema.mode {
                    StoredAs::Scd1 => (
                        key_names(&schema),
                        "the key has a row already: INSERT adds keys the table does not have (use UPDATE or MERGE to change a row)",
                    ),
                    _ => (
                        START_AT.to_string(),
                        "the row's business range [__START_AT, __END_AT) overlaps a version of its key, or another inserted row (use UPDATE ... FOR PORTION OF or MERGE to change history)",
                    ),
                };
                return Err(rejected(&column, rule, n));
            }
        };
        let n_events = events.len() as u64;
        let applied = t.state.apply(
            CommitPart {
                incoming: events,
                truncates: Vec::new(),
                version,
                ts,
                logging: Logging::Log,
            },
            &mut |_| {},
        );
        // The state may be half-applied: refuse everything until the store is reopened.
        let mut fx = applied.inspect_err(|e| inner.poisoned = Some(e.to_string()))?;
        // The counters of a feed (events read, late, duplicates) do not describe a statement.
        fx.metrics = crate::engine::CommitMetrics {
            num_upserted_rows: fx.metrics.num_upserted_rows,
            num_deleted_rows: fx.metrics.num_deleted_rows,
            ..Default::default()
        };
        let commit = CommitInfo {
            version,
            timestamp_us: ts,
            operation: dml.operation.name().to_string(),
            parameters: BTreeMap::from([("statement".to_string(), dml.text.to_string())]),
            metrics: fx.metrics.clone(),
            duration_us: 0,
            peak_memory_bytes: None,
            chain: None,
        };
        let every = inner.checkpoints.every_events;
        let applied = Applied {
            log: Log::of(t, version, &fx).inspect_err(|e| inner.poisoned = Some(e.to_string()))?,
            commit,
            events: n_events,
            clock,
            record: None,
        };
        let commit = write_applied(inner.kv.as_ref(), every, t, applied)
            .inspect_err(|e| inner.poisoned = Some(e.to_string()))?;
        if keys_from == KeysFrom::Heads {
            t.state.evict_all();
        }
        inner.retention_after(table, commit.version, commit.timestamp_us)?;
        Ok(commit)
    }
}

fn key_names(schema: &TableSchema) -> String {
    schema.key_names().join(", ")
}

/// The system time a statement's events carry: its commit time, in the type of the table's
/// system sequence (empty for SCD tables).
fn statement_system_time(schema: &TableSchema, ts: i64) -> Result<Bytes> {
    if schema.mode != StoredAs::Bitemporal {
        return Ok(Bytes::default());
    }
    let ty = schema
        .system_sequence
        .clone()
        .unwrap_or_else(ColumnType::commit_timestamp);
    let value = match &ty {
        ColumnType::Timestamp { unit, .. } => Value::Int(match unit {
            TimeUnit::Second => ts.div_euclid(1_000_000),
            TimeUnit::Millisecond => ts.div_euclid(1_000),
            TimeUnit::Microsecond => ts,
            TimeUnit::Nanosecond => ts.saturating_mul(1_000),
        }),
        other => {
            return Err(rejected(
                "__SYSTEM_START_AT",
                format!("a statement is stamped with its commit time, and this table's system sequence is {other}, not a timestamp"),
                0,
            ))
        }
    };
    let mut b = Vec::new();
    encode_value(&value, &ty, &mut b).map_err(|e| rejected("__SYSTEM_START_AT", e, 1))?;
    Ok(b.into())
}

/// The statement's rows as patches, checked against the table's schema.
fn statement_rows(schema: &TableSchema, dml: &Dml<'_>) -> Result<Vec<Patch>> {
    let batch = dml.rows;
    let n = batch.num_rows();
    if dml.edits.len() != n {
        return Err(Error::InvalidQuery(format!(
            "{} edits for {n} rows",
            dml.edits.len()
        )));
    }
    let column = |name: &str, ty: &ColumnType| -> Result<Option<ArrayRef>> {
        batch
            .column_by_name(name)
            .map(|a| cast_checked(name, a, ty))
            .transpose()
    };
    let mut values: Vec<Vec<Value>> = Vec::with_capacity(schema.columns.len());
    for (name, ty) in &schema.columns {
        let a = column(name, ty)?.ok_or_else(|| rejected(name, "missing from the rows", n))?;
        values.push(column_values(&a, ty));
    }
    let key_types = schema.key_types();
    let mut keys = Vec::with_capacity(n);
    let mut null_keys = 0;
    let key_values: Vec<&Vec<Value>> = schema.key_columns.iter().map(|&k| &values[k]).collect();
    for r in 0..n {
        if key_values.iter().any(|c| c[r].is_null()) {
            null_keys += 1;
            continue;
        }
        let k = encode_tuple(key_values.iter().map(|c| &c[r]), &key_types)
            .map_err(|e| rejected(&key_names(schema), e, 1))?;
        keys.push(Bytes::from(k));
    }
    if null_keys > 0 {
        return Err(rejected(&key_names(schema), "the key is NULL", null_keys));
    }
    let (from, to) = match schema.mode {
        StoredAs::Scd1 => (vec![Bytes::from(&[][..]); n], vec![None; n]),
        _ => ranges(schema, batch)?,
    };
    let mut patches = Vec::with_capacity(n);
    for (r, ((key, from), to)) in keys.into_iter().zip(from).zip(to).enumerate() {
        let row: crate::value::Row = values
            .iter_mut()
            .map(|c| std::mem::replace(&mut c[r], Value::Null))
            .collect();
        patches.push(Patch {
            key,
            from,
            to,
            row,
            edit: dml.edits[r],
        });
    }
    Ok(patches)
}

/// Column `name` cast to `ty`, every value converted (else the statement is rejected, naming it).
fn cast_checked(name: &str, a: &ArrayRef, ty: &ColumnType) -> Result<ArrayRef> {
    let (a, failed) = cast_column(a, ty)
        .map_err(|e| rejected(name, format!("cannot be converted to {ty}: {e}"), a.len()))?;
    if failed > 0 {
        return Err(rejected(
            name,
            format!("has values that cannot be converted to {ty}"),
            failed,
        ));
    }
    Ok(a)
}

/// Each row's business range `[__START_AT, __END_AT)`, encoded.
type Ranges = (Vec<Bytes>, Vec<Option<Bytes>>);

fn ranges(schema: &TableSchema, batch: &RecordBatch) -> Result<Ranges> {
    let n = batch.num_rows();
    let start = batch.column_by_name(START_AT).ok_or_else(|| {
        rejected(
            START_AT,
            "missing: a row of a table with history needs the start of its business range",
            n,
        )
    })?;
    let starts = encoded_sequences(schema, START_AT, start)?;
    let null_starts = starts.iter().filter(|s| s.is_none()).count();
    if null_starts > 0 {
        return Err(rejected(START_AT, "is NULL", null_starts));
    }
    let ends = match batch.column_by_name(END_AT) {
        Some(a) => encoded_sequences(schema, END_AT, a)?,
        None => vec![None; n],
    };
    let starts: Vec<Bytes> = starts.into_iter().map(|s| s.expect("checked")).collect();
    let empty = starts
        .iter()
        .zip(&ends)
        .filter(|(s, e)| e.as_ref().is_some_and(|e| e[..] <= s[..]))
        .count();
    if empty > 0 {
        return Err(rejected(END_AT, "is not after __START_AT", empty));
    }
    Ok((starts, ends))
}

/// A `__START_AT`/`__END_AT` column as encoded sequences (`None` for NULL): the sequence's type,
/// or a struct of its components.
fn encoded_sequences(schema: &TableSchema, name: &str, a: &ArrayRef) -> Result<Vec<Option<Bytes>>> {
    let n = a.len();
    let types: Vec<ColumnType> = schema.sequence_types();
    let parts: Vec<ArrayRef> = if types.len() == 1 {
        vec![a.clone()]
    } else {
        let s = a
            .as_struct_opt()
            .ok_or_else(|| rejected(name, "must be a struct of the sequence's components", n))?;
        if s.num_columns() != types.len() {
            return Err(rejected(
                name,
                format!("must have the sequence's {} components", types.len()),
                n,
            ));
        }
        s.columns().to_vec()
    };
    let mut cols = Vec::with_capacity(parts.len());
    for (p, ty) in parts.iter().zip(&types) {
        let p = cast_checked(name, p, ty)?;
        cols.push(column_values(&p, ty));
    }
    (0..n)
        .map(|r| {
            if a.is_null(r) || cols.iter().any(|c| c[r].is_null()) {
                return Ok(None);
            }
            encode_tuple(cols.iter().map(|c| &c[r]), &types)
                .map(|b| Some(Bytes::from(b)))
                .map_err(|e| rejected(name, e, 1))
        })
        .collect()
}
