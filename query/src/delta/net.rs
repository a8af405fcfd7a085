//! The net effect of a change feed on a table's rows, as a multiset: rows to add and rows to take
//! away. The feed of commits `a+1..=b` applied to the table as of `a` gives the table as of `b`
//! (docs/SEMANTICS.md §7.3), so counting `insert`/`update_postimage` as +1 and
//! `delete`/`update_preimage` as -1 per whole row, over all the commits, leaves exactly what an
//! export of `a` lacks and what it holds too much of.

use std::collections::{HashMap, HashSet};

use arrow::array::{Array, BooleanArray, RecordBatch, StringArray};
use arrow::compute::{concat_batches, filter_record_batch};
use arrow::datatypes::SchemaRef;
use arrow::row::{RowConverter, SortField};

use super::types::conform;
use super::ExportError;

/// Rows compared whole, and by key.
pub(super) struct RowKeys {
    rows: RowConverter,
    keys: RowConverter,
    key_columns: Vec<usize>,
}

impl RowKeys {
    pub(super) fn new(target: &SchemaRef, key_columns: Vec<usize>) -> Result<Self, ExportError> {
        let sort = |i: usize| SortField::new(target.field(i).data_type().clone());
        Ok(RowKeys {
            rows: RowConverter::new((0..target.fields().len()).map(sort).collect())?,
            keys: RowConverter::new(key_columns.iter().map(|&i| sort(i)).collect())?,
            key_columns,
        })
    }

    /// The positions of the key columns in the target.
    pub(super) fn key_columns(&self) -> &[usize] {
        &self.key_columns
    }

    /// The whole rows of `batch` (conformed to the target).
    pub(super) fn rows(&self, batch: &RecordBatch) -> Result<arrow::row::Rows, ExportError> {
        Ok(self.rows.convert_columns(batch.columns())?)
    }

    /// The keys of `batch`, which holds the target's columns.
    pub(super) fn keys(&self, batch: &RecordBatch) -> Result<arrow::row::Rows, ExportError> {
        let columns: Vec<_> = self
            .key_columns
            .iter()
            .map(|&i| batch.column(i).clone())
            .collect();
        Ok(self.keys.convert_columns(&columns)?)
    }

    /// The keys of `batch`, which holds only the key columns, in the order of `key_columns`.
    pub(super) fn keys_only(&self, batch: &RecordBatch) -> Result<arrow::row::Rows, ExportError> {
        Ok(self.keys.convert_columns(batch.columns())?)
    }
}

/// What a change feed does to the rows of a table.
pub(super) struct NetChanges {
    /// Rows to add (the net additions), in the target's schema.
    pub(super) added: Option<RecordBatch>,
    /// Rows to take away, with how many copies of each.
    pub(super) removed: HashMap<Vec<u8>, u64>,
    /// The keys of the rows to take away.
    pub(super) removed_keys: HashSet<Vec<u8>>,
}

impl NetChanges {
    /// The net effect of `feed` (batches of `table_changes`, with `_change_type`).
    pub(super) fn of_feed(
        feed: &[RecordBatch],
        target: &SchemaRef,
        rk: &RowKeys,
    ) -> Result<Self, ExportError> {
        // Per distinct row: its count and where it is first found.
        let mut counts: HashMap<Vec<u8>, (i64, usize, usize)> = HashMap::new();
        let mut batches = Vec::with_capacity(feed.len());
        for (b, raw) in feed.iter().enumerate() {
            let kinds = raw
                .column_by_name("_change_type")
                .and_then(|c| c.as_any().downcast_ref::<StringArray>())
                .ok_or_else(|| {
                    ExportError::Arrow(arrow::error::ArrowError::SchemaError(
                        "the change feed has no _change_type".into(),
                    ))
                })?;
            let batch = conform(raw, target)?;
            let rows = rk.rows(&batch)?;
            for (i, row) in rows.iter().enumerate() {
                let sign = match kinds.value(i) {
                    "insert" | "update_postimage" => 1,
                    _ => -1,
                };
                counts.entry(row.as_ref().to_vec()).or_insert((0, b, i)).0 += sign;
            }
            batches.push(batch);
        }
        let mut keep: Vec<Vec<bool>> = batches.iter().map(|b| vec![false; b.num_rows()]).collect();
        let mut extra_copies = Vec::new();
        let mut removed = HashMap::new();
        let mut removed_keys = HashSet::new();
        for (row, (count, b, i)) in counts {
            if count > 0 {
                keep[b][i] = true;
                for _ in 1..count {
                    extra_copies.push(batches[b].slice(i, 1));
                }
            } else if count < 0 {
                let key = rk.keys(&batches[b].slice(i, 1))?;
                removed_keys.insert(key.row(0).as_ref().to_vec());
                removed.insert(row, count.unsigned_abs());
            }
        }
        let mut parts = Vec::new();
        for (batch, keep) in batches.iter().zip(keep) {
            if keep.iter().any(|k| *k) {
                parts.push(filter_record_batch(batch, &BooleanArray::from(keep))?);
            }
        }
        parts.extend(extra_copies);
        let added = if parts.is_empty() {
            None
        } else {
            Some(concat_batches(target, &parts)?)
        };
        Ok(NetChanges {
            added,
            removed,
            removed_keys,
        })
    }

    /// `batch` (rows of an exported file, conformed to the target) without the rows to take
    /// away, each taken once per copy owed.
    pub(super) fn take_away(
        &mut self,
        batch: &RecordBatch,
        rk: &RowKeys,
    ) -> Result<RecordBatch, ExportError> {
        let rows = rk.rows(batch)?;
        let mut keep = Vec::with_capacity(batch.num_rows());
        for row in rows.iter() {
            let owed = self.removed.get_mut(row.as_ref());
            keep.push(match owed {
                Some(n) if *n > 0 => {
                    *n -= 1;
                    false
                }
                _ => true,
            });
        }
        Ok(filter_record_batch(batch, &BooleanArray::from(keep))?)
    }

    /// How many rows to take away were not found.
    pub(super) fn missing(&self) -> u64 {
        self.removed.values().sum()
    }
}
