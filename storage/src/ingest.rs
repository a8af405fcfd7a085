//! From an Arrow batch of source rows to validated events (docs/SEMANTICS.md §2: all or nothing).

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray};
use arrow::compute::cast;
use arrow::datatypes::DataType;
use arrow::record_batch::RecordBatch;

use crate::engine::fold::{Bytes, Event, EventKind};
use crate::engine::Incoming;
use crate::error::{Error, Result};
use crate::flow::{Condition, Flow, StoredAs};
use crate::format::event_block::EventHead;
use crate::format::source_cells::SourceCells;
use crate::keycodec::{encode_tuple, encode_tuple_into, encode_value};
use crate::record::Origin;
use crate::value::{cast_column, column_values, ColumnType, Value};

/// Evaluates [`Condition::Expr`] conditions over a batch of source rows. The SQL layer registers one
/// that runs SQL expressions; tests and embedders may register their own.
pub trait ConditionEvaluator: Send + Sync {
    /// One boolean per row (NULL counts as false), or a message saying why the expression fails.
    fn evaluate(
        &self,
        expr: &str,
        batch: &RecordBatch,
    ) -> std::result::Result<BooleanArray, String>;

    /// The value of `expr` for each row (a generated column's), or a message saying why the
    /// expression fails.
    fn value(
        &self,
        expr: &str,
        batch: &RecordBatch,
    ) -> std::result::Result<arrow::array::ArrayRef, String> {
        let _ = batch;
        Err(format!("`{expr}`: this evaluator computes conditions only"))
    }
}

fn invalid(column: &str, problem: impl Into<String>, rows: usize) -> Error {
    Error::InvalidBatch {
        column: column.to_string(),
        problem: problem.into(),
        rows,
    }
}

fn eval(
    cond: &Condition,
    clause: &str,
    batch: &RecordBatch,
    evaluator: Option<&Arc<dyn ConditionEvaluator>>,
) -> Result<Vec<bool>> {
    let n = batch.num_rows();
    match cond {
        Condition::Equals { column, value } => {
            let col = batch.column_by_name(column).ok_or_else(|| {
                invalid(
                    column,
                    format!("{clause} needs it, but it is missing from the batch"),
                    n,
                )
            })?;
            let s = cast(col, &DataType::Utf8).map_err(|e| invalid(column, e.to_string(), n))?;
            let s = s.as_string::<i32>();
            Ok((0..n)
                .map(|i| s.is_valid(i) && s.value(i) == value)
                .collect())
        }
        Condition::Expr(expr) => {
            let ev = evaluator.ok_or_else(|| {
                invalid(
                    clause,
                    format!("no condition evaluator is registered to evaluate `{expr}`"),
                    n,
                )
            })?;
            let mask = ev
                .evaluate(expr, batch)
                .map_err(|e| invalid(clause, format!("`{expr}`: {e}"), n))?;
            if mask.len() != n {
                return Err(invalid(
                    clause,
                    "the condition did not give one value per row",
                    n,
                ));
            }
            Ok((0..n).map(|i| mask.is_valid(i) && mask.value(i)).collect())
        }
    }
}

/// The source column `i` of `flow`, cast to its declared type.
fn source_column(flow: &Flow, batch: &RecordBatch, i: usize) -> Result<ArrayRef> {
    let col = &flow.spec.source[i];
    let n = batch.num_rows();
    let arr = batch
        .column_by_name(&col.name)
        .ok_or_else(|| invalid(&col.name, "missing from the batch", n))?;
    let (arr, failed) = cast_column(arr, &col.ty).map_err(|e| {
        invalid(
            &col.name,
            format!("cannot be converted to {}: {e}", col.ty),
            n,
        )
    })?;
    if failed > 0 {
        return Err(invalid(
            &col.name,
            format!("has values that cannot be converted to {}", col.ty),
            failed,
        ));
    }
    Ok(arr)
}

fn require_non_null(name: &str, arr: &ArrayRef, skip: &[bool], what: &str) -> Result<()> {
    let bad = (0..arr.len())
        .filter(|&i| !skip[i] && arr.is_null(i))
        .count();
    if bad > 0 {
        return Err(invalid(name, format!("{what} is NULL"), bad));
    }
    Ok(())
}

/// Validates `batch` against `flow` and turns it into events and truncate sequences.
/// `commit_ts` is the system time of the events when the flow has no SYSTEM SEQUENCE BY.
pub(crate) fn prepare(
    flow: &Flow,
    batch: &RecordBatch,
    evaluator: Option<&Arc<dyn ConditionEvaluator>>,
    commit_ts: i64,
) -> Result<(Vec<Incoming>, Vec<Bytes>)> {
    let mut checked = CheckedRows::check(flow, batch, evaluator, commit_ts)?;
    let made = checked.events(0..checked.len())?;
    checked.finish()?;
    Ok(made)
}

/// A batch of source rows checked whole against a flow (its conditions evaluated, its columns
/// converted, no NULL key or sequence), to be turned into events a slice of rows at a time
/// ([`CheckedRows::events`], or [`CheckedRows::slice`] for a spill): the values of a slice are
/// built while they are in the cache. What the checks find, and their row counts, are the whole
/// batch's however it is sliced.
pub(crate) struct CheckedRows<'a> {
    flow: &'a Flow,
    truncate: Vec<bool>,
    delete: Vec<bool>,
    /// The output columns, the sequence's, the system sequence's (with its type) and COLUMNS
    /// TO UPDATE's (with its name), converted.
    out: Vec<ArrayRef>,
    seq: Vec<ArrayRef>,
    sys: Option<(ArrayRef, ColumnType)>,
    ctu: Option<(String, ArrayRef)>,
    /// The events' system time when the flow has no SYSTEM SEQUENCE BY.
    commit_sys: Bytes,
    types: Types,
    /// A name in COLUMNS TO UPDATE that is not an output column, and the rows that give one.
    unknown_update: Option<(String, usize)>,
}

/// The events of a slice of a checked batch ([`CheckedRows::slice`]), their values in the
/// slice's columns (`SourceCells`): what a large commit spills (`EventSpill::push_slice`),
/// without a row of values built for each event and let go of once spilled.
pub(crate) struct SourceSlice {
    pub heads: Vec<MadeHead>,
    /// The output columns of the slice's rows.
    pub cells: Vec<SourceCells>,
}

/// What an event of a [`SourceSlice`] is besides its values, and its row in the slice.
pub(crate) struct MadeHead {
    pub key: Bytes,
    pub seq: Bytes,
    pub sys: Bytes,
    pub kind: EventKind,
    pub update: Option<Box<[u32]>>,
    pub row: usize,
}

impl MadeHead {
    /// The head as a block takes it.
    pub(crate) fn head(&self) -> EventHead<'_> {
        EventHead {
            key: &self.key,
            seq: &self.seq,
            sys: &self.sys,
            kind: self.kind,
            update: self.update.as_deref(),
        }
    }
}

/// The types of a flow's output columns, of its sequence and of its key, found once per batch.
struct Types {
    out: Vec<ColumnType>,
    seq: Vec<ColumnType>,
    key: Vec<ColumnType>,
}

impl<'a> CheckedRows<'a> {
    /// Checks `batch` against `flow`; `commit_ts` is the system time of its events when the
    /// flow has no SYSTEM SEQUENCE BY.
    pub fn check(
        flow: &'a Flow,
        batch: &RecordBatch,
        evaluator: Option<&Arc<dyn ConditionEvaluator>>,
        commit_ts: i64,
    ) -> Result<CheckedRows<'a>> {
        let n = batch.num_rows();
        let spec = &flow.spec;
        let truncate = match &spec.truncate_when {
            Some(c) => eval(c, "APPLY AS TRUNCATE WHEN", batch, evaluator)?,
            None => vec![false; n],
        };
        let delete = match &spec.delete_when {
            Some(c) => eval(c, "APPLY AS DELETE WHEN", batch, evaluator)?,
            None => vec![false; n],
        };
        let none = vec![false; n];
        let out: Vec<ArrayRef> = flow
            .output_src
            .iter()
            .map(|&i| source_column(flow, batch, i))
            .collect::<Result<_>>()?;
        for &k in &flow.key_out {
            require_non_null(
                &spec.source[flow.output_src[k]].name,
                &out[k],
                &truncate,
                "the key",
            )?;
        }
        let seq: Vec<ArrayRef> = flow
            .seq_src
            .iter()
            .map(|&i| source_column(flow, batch, i))
            .collect::<Result<_>>()?;
        for (a, &i) in seq.iter().zip(&flow.seq_src) {
            require_non_null(&spec.source[i].name, a, &none, "the sequence (SEQUENCE BY)")?;
        }
        let sys = match flow.sys_src {
            Some(i) => {
                let a = source_column(flow, batch, i)?;
                require_non_null(
                    &spec.source[i].name,
                    &a,
                    &none,
                    "the system sequence (SYSTEM SEQUENCE BY)",
                )?;
                Some((a, spec.source[i].ty.clone()))
            }
            None => None,
        };
        let ctu = match flow.ctu_src {
            Some(i) => Some((spec.source[i].name.clone(), source_column(flow, batch, i)?)),
            None => None,
        };
        let commit_sys: Bytes = {
            let mut b = Vec::new();
            encode_value(
                &Value::Int(commit_ts),
                &ColumnType::commit_timestamp(),
                &mut b,
            )
            .expect("int");
            b.into()
        };
        let out_types: Vec<ColumnType> = (flow.output_src.iter())
            .map(|&i| spec.source[i].ty.clone())
            .collect();
        let types = Types {
            key: flow.key_out.iter().map(|&k| out_types[k].clone()).collect(),
            seq: flow.seq_types(),
            out: out_types,
        };
        Ok(CheckedRows {
            flow,
            types,
            truncate,
            delete,
            out,
            seq,
            sys,
            ctu,
            commit_sys,
            unknown_update: None,
        })
    }

    /// How many rows.
    pub fn len(&self) -> usize {
        self.truncate.len()
    }

    /// The events of rows `rows`, and the sequences of the truncates among them. A value that
    /// cannot be encoded is an error (of one row: the first found).
    pub fn events(&mut self, rows: std::ops::Range<usize>) -> Result<(Vec<Incoming>, Vec<Bytes>)> {
        let (from, len) = (rows.start, rows.len());
        let mut out_vals: Vec<Vec<Value>> = (self.out.iter().zip(&self.types.out))
            .map(|(a, t)| column_values(&a.slice(from, len), t))
            .collect();
        let keys: Vec<&[Value]> = self
            .flow
            .key_out
            .iter()
            .map(|&k| &out_vals[k][..])
            .collect();
        let (heads, truncates) = self.heads(rows, &keys)?;
        let events = heads
            .into_iter()
            .map(|h| {
                // One allocation: an exact-size iterator collects straight into the shared row.
                let values: crate::value::Row = out_vals
                    .iter_mut()
                    .map(|c| std::mem::replace(&mut c[h.row], Value::Null))
                    .collect();
                Incoming {
                    key: h.key,
                    seq: h.seq,
                    sys: h.sys,
                    event: Event {
                        kind: h.kind,
                        values,
                        update: h.update,
                        origin: Origin::Feed,
                    },
                }
            })
            .collect();
        Ok((events, truncates))
    }

    /// [`CheckedRows::events`] as a [`SourceSlice`]: each event's head, with the slice's output
    /// columns as cells; and the sequences of the truncates.
    pub fn slice(&mut self, rows: std::ops::Range<usize>) -> Result<(SourceSlice, Vec<Bytes>)> {
        let (from, len) = (rows.start, rows.len());
        let (heads, truncates) = self.heads_alone(rows)?;
        let cells = (self.out.iter().zip(&self.types.out))
            .map(|(a, t)| SourceCells::new(&a.slice(from, len), t))
            .collect();
        Ok((SourceSlice { heads, cells }, truncates))
    }

    /// What [`CheckedRows::events`] finds wrong with rows `rows`, without making their events: a
    /// commit already rejected counts the rows of each problem over all its batches.
    pub fn check_events(&mut self, rows: std::ops::Range<usize>) -> Result<()> {
        self.heads_alone(rows).map(drop)
    }

    /// [`CheckedRows::heads`] with the key's values made here.
    fn heads_alone(&mut self, rows: std::ops::Range<usize>) -> Result<(Vec<MadeHead>, Vec<Bytes>)> {
        let (from, len) = (rows.start, rows.len());
        let key_vals: Vec<Vec<Value>> = (self.flow.key_out.iter().zip(&self.types.key))
            .map(|(&k, t)| column_values(&self.out[k].slice(from, len), t))
            .collect();
        let keys: Vec<&[Value]> = key_vals.iter().map(|v| &v[..]).collect();
        self.heads(rows, &keys)
    }

    /// What the events of rows `rows` are besides their values, and the sequences of the
    /// truncates among them; `keys` are the values of the key's columns in those rows.
    fn heads(
        &mut self,
        rows: std::ops::Range<usize>,
        keys: &[&[Value]],
    ) -> Result<(Vec<MadeHead>, Vec<Bytes>)> {
        let (flow, spec) = (self.flow, &self.flow.spec);
        let (from, len) = (rows.start, rows.len());
        let values = |a: &ArrayRef, t: &ColumnType| column_values(&a.slice(from, len), t);
        let out_names: Vec<&str> = flow
            .output_src
            .iter()
            .map(|&i| spec.source[i].name.as_str())
            .collect();
        let Types {
            seq: seq_types,
            key: key_types,
            ..
        } = &self.types;
        let seq_vals: Vec<Vec<Value>> = (self.seq.iter().zip(seq_types))
            .map(|(a, t)| values(a, t))
            .collect();
        let sys_vals = (self.sys.as_ref()).map(|(a, t)| (values(a, t), t));
        let ctu_vals = (self.ctu.as_ref()).map(|(_, a)| values(a, &ColumnType::ListUtf8));
        let bitemporal = spec.stored_as == StoredAs::Bitemporal;

        let mut heads = Vec::with_capacity(len);
        let mut truncates = Vec::new();
        // Encoded here and copied out: no allocation per event for bytes held in place.
        let mut buf = Vec::new();
        for r in 0..len {
            encode_tuple_into(seq_vals.iter().map(|c| &c[r]), seq_types, &mut buf)
                .map_err(|e| invalid(&spec.sequence_by[0], e, 1))?;
            let seq_b = Bytes::from(&buf[..]);
            if self.truncate[from + r] {
                truncates.push(seq_b);
                continue;
            }
            encode_tuple_into(keys.iter().map(|c| &c[r]), key_types, &mut buf)
                .map_err(|e| invalid(&spec.keys[0], e, 1))?;
            let key = Bytes::from(&buf[..]);
            let sys_b: Bytes = match (&sys_vals, bitemporal) {
                (Some((v, t)), _) => {
                    buf.clear();
                    encode_value(&v[r], t, &mut buf)
                        .map_err(|e| invalid("SYSTEM SEQUENCE BY", e, 1))?;
                    Bytes::from(&buf[..])
                }
                (None, true) => self.commit_sys.clone(),
                (None, false) => Bytes::default(),
            };
            let update = match &ctu_vals {
                Some(lists) => match &lists[r] {
                    Value::List(names) => {
                        let mut cols: Vec<u32> = Vec::new();
                        for name in names.iter().flatten() {
                            match out_names.iter().position(|n| **n == **name) {
                                Some(i) => cols.push(i as u32),
                                None => {
                                    let e =
                                        self.unknown_update.get_or_insert((name.to_string(), 0));
                                    e.1 += 1;
                                }
                            }
                        }
                        // Keys always come from the event.
                        cols.extend(flow.key_out.iter().map(|&k| k as u32));
                        cols.sort_unstable();
                        cols.dedup();
                        Some(cols.into_boxed_slice())
                    }
                    _ => None,
                },
                None => None,
            };
            heads.push(MadeHead {
                key,
                seq: seq_b,
                sys: sys_b,
                kind: if self.delete[from + r] {
                    EventKind::Delete
                } else {
                    EventKind::Upsert
                },
                update,
                row: r,
            });
        }
        Ok((heads, truncates))
    }

    /// What the events of every row found wrong besides values that cannot be encoded: a name
    /// in COLUMNS TO UPDATE that is not an output column, counted over the rows made.
    pub fn finish(self) -> Result<()> {
        match (self.unknown_update, self.ctu) {
            (Some((name, rows)), Some((col, _))) => Err(invalid(
                &col,
                format!("names `{name}`, which is not an output column"),
                rows,
            )),
            _ => Ok(()),
        }
    }
}

/// The encoded key of each row of `batch` as `flow` would give its event (`None` for a row
/// whose key is NULL or does not convert, and for a truncate, which is no key's): ERASE finds
/// the source rows of the keys it erases with it.
pub(crate) fn row_keys(
    flow: &Flow,
    batch: &RecordBatch,
    evaluator: Option<&Arc<dyn ConditionEvaluator>>,
) -> Result<Vec<Option<Bytes>>> {
    let n = batch.num_rows();
    let truncate = match &flow.spec.truncate_when {
        Some(c) => eval(c, "APPLY AS TRUNCATE WHEN", batch, evaluator)?,
        None => vec![false; n],
    };
    let types: Vec<ColumnType> = flow
        .key_out
        .iter()
        .map(|&k| flow.spec.source[flow.output_src[k]].ty.clone())
        .collect();
    let values: Vec<Vec<Value>> = flow
        .key_out
        .iter()
        .zip(&types)
        .map(|(&k, t)| {
            let arr = source_column(flow, batch, flow.output_src[k])?;
            Ok(column_values(&arr, t))
        })
        .collect::<Result<_>>()?;
    Ok((0..n)
        .map(|r| {
            if truncate[r] || values.iter().any(|c| matches!(c[r], Value::Null)) {
                return None;
            }
            encode_tuple(values.iter().map(|c| &c[r]), &types)
                .ok()
                .map(Bytes::from)
        })
        .collect())
}
