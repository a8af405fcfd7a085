//! `AUTO CDC FROM SNAPSHOT` (docs/SEMANTICS.md §1.8): a flow whose source is a table of full
//! snapshots, told apart by its `SEQUENCE BY` column (the snapshot's version). Each refresh turns
//! the snapshots that arrived since into events, appended to a hidden events table that an
//! ordinary AUTO CDC flow reads: for snapshot `v`, an upsert of every row of `v`, a delete at `v`
//! of every key of the snapshot before it (in version order) that `v` lacks, and a delete at the
//! snapshot after it of every key of `v` that one lacks. So a late snapshot corrects history
//! like a late event, and since the table depends only on the set of events (§3), snapshots may
//! arrive in any order and a refresh may be repeated.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::row::{RowConverter, SortField};
use asof_storage::{append_offset_parameter, RETENTION_PROPERTY};
use serde::{Deserialize, Serialize};

use super::parse::{split, Cols, FlowAst};
use super::{Output, SqlSession};
use crate::error::{QueryError, Result};

/// The column of the hidden events table that says upsert (`U`) or delete (`D`).
const OP: &str = "__asof_op";

/// The checkpoint name of the feed (`append_offset.snapshots`: snapshot rows read).
const FEED: &str = "snapshots";

/// The hidden events table of snapshot flow `flow`.
fn events_table(flow: &str) -> String {
    super::hidden::snapshot_events(flow)
}

/// What the hidden events table remembers (its origin): the snapshot table, its keys and its
/// version column.
#[derive(Serialize, Deserialize)]
pub(super) struct SnapshotOrigin {
    pub(super) snapshot_of: String,
    keys: Vec<String>,
    version: String,
}

impl SnapshotOrigin {
    /// The origin of a hidden events table, if `text` is one.
    pub(super) fn parse(text: &str) -> Option<SnapshotOrigin> {
        serde_json::from_str(text).ok()
    }
}

/// The AUTO CDC flow of snapshot flow `f`: from its hidden events table, their deletes applied,
/// their operation column left out.
fn events_flow(mut f: FlowAst) -> Result<FlowAst> {
    let delete = split(&format!("`{OP}` = 'D'"))?.remove(0).tokens;
    f.delete_when = Some(delete);
    f.columns = Some(match f.columns.take() {
        None | Some(Cols::All) => Cols::Except(vec![OP.into()]),
        Some(Cols::Except(mut v)) => {
            v.push(OP.into());
            Cols::Except(v)
        }
        Some(only) => only,
    });
    Ok(f)
}

impl SqlSession {
    /// Refuses `what` (statements that remove rows) on `table` if it holds a snapshot flow's
    /// snapshots: they are its appends, in order, and a removed row would change what they were.
    pub(super) fn refuse_if_snapshots(&self, table: &str, what: &str) -> Result<()> {
        for s in self.store.sources()? {
            let origin = self.store.source_origin(&s)?.0;
            if origin
                .and_then(|o| SnapshotOrigin::parse(&o))
                .is_some_and(|o| o.snapshot_of == table)
            {
                return Err(QueryError::Invalid(format!(
                    "`{table}` holds the snapshots of a snapshot flow: {what} on it are not supported (its snapshots are its appends); nothing was changed"
                )));
            }
        }
        Ok(())
    }

    /// Refuses `what` on `table` if a flow of it reads snapshots: the snapshots it diffs would
    /// bring an erased key back.
    pub(super) fn refuse_if_fed_by_snapshots(&self, table: &str, what: &str) -> Result<()> {
        for f in self.store.flows(table)? {
            let Some(source) = f.source_table else {
                continue;
            };
            let origin = self.store.source_origin(&source)?.0;
            if let Some(o) = origin.as_deref().and_then(SnapshotOrigin::parse) {
                return Err(QueryError::Invalid(format!(
                    "{what} `{table}` refused, nothing changed: flow `{}` reads snapshots of `{}`, and erasing from a table fed by snapshots is not supported yet",
                    f.name, o.snapshot_of
                )));
            }
        }
        Ok(())
    }

    /// How snapshot flow `f` (over the snapshots of `snapshots`) differs from the flow of its
    /// name: not at all, in its AUTO CDC clauses only (the flow over its events table, as it would
    /// be defined now), or in its snapshots, keys or version.
    pub(super) fn snapshot_flow_change(
        &mut self,
        f: &FlowAst,
        snapshots: &str,
    ) -> Result<SnapshotChange> {
        let events = events_table(&f.name);
        let origin = self
            .store
            .source_origin(&events)?
            .0
            .and_then(|o| SnapshotOrigin::parse(&o));
        let same_origin = origin.is_some_and(|o| {
            o.snapshot_of == snapshots
                && o.keys == f.keys
                && f.sequence_by.first() == Some(&o.version)
        });
        if !same_origin {
            return Ok(SnapshotChange::Origin);
        }
        let fields = self.generated_fields_of(&f.target)?;
        let spec = self.flow_spec(&events_flow(f.clone())?, &events, &fields)?;
        if self
            .store
            .flows(&f.target)?
            .iter()
            .any(|e| e == spec.spec())
        {
            return Ok(SnapshotChange::None);
        }
        Ok(SnapshotChange::Clauses(Box::new(spec)))
    }
}

/// How a snapshot flow run again differs from the one of its name.
pub(super) enum SnapshotChange {
    /// It is the same flow.
    None,
    /// Its AUTO CDC clauses differ: the flow over its events table, as defined now.
    Clauses(Box<asof_storage::Flow>),
    /// Its snapshots, keys or version differ.
    Origin,
}

fn arrow_err(e: arrow::error::ArrowError) -> QueryError {
    QueryError::Invalid(e.to_string())
}

impl SqlSession {
    /// Creates snapshot flow `f` over `snapshots`: its hidden events table, fed with the
    /// snapshots there are, and the AUTO CDC flow from it into `f.target`.
    pub(super) fn create_snapshot_flow(&mut self, f: FlowAst, snapshots: String) -> Result<Output> {
        let [version] = f.sequence_by.as_slice() else {
            return Err(QueryError::Invalid(format!(
                "flow `{}` reads snapshots: SEQUENCE BY names the one column that tells them apart (their version)",
                f.name
            )));
        };
        // The property may be declared with the statement, or the table may have it already.
        let declared = self
            .declared
            .iter()
            .any(|d| d.name == f.target && d.properties.contains_key(RETENTION_PROPERTY));
        let stored = self.store.tables()?.contains(&f.target)
            && self
                .store
                .properties(&f.target)?
                .contains_key(RETENTION_PROPERTY);
        let retention = declared || stored;
        if retention {
            return Err(QueryError::Invalid(format!(
                "flow `{}` reads snapshots, and `{}` has table property {RETENTION_PROPERTY}: erasing from a table fed by snapshots is not supported yet (the snapshots it diffs would bring an erased key back); nothing was changed",
                f.name, f.target
            )));
        }
        let schema = self.store.source_schema(&snapshots)?;
        if schema.fields().iter().any(|c| c.name() == OP) {
            return Err(QueryError::Invalid(format!(
                "`{snapshots}` has a column `{OP}`, which asof uses"
            )));
        }
        let mut fields: Vec<Field> = schema.fields().iter().map(|c| c.as_ref().clone()).collect();
        fields.push(Field::new(OP, DataType::Utf8, false));
        let origin = SnapshotOrigin {
            snapshot_of: snapshots.clone(),
            keys: f.keys.clone(),
            version: version.clone(),
        };
        let origin =
            serde_json::to_string(&origin).map_err(|e| QueryError::Invalid(e.to_string()))?;
        let events = events_table(&f.name);
        self.store
            .create_source_with_origin(&events, &Schema::new(fields), Some(&origin))?;
        let made = self
            .feed_snapshots(&events)
            .and_then(|_| events_flow(f))
            .and_then(|f| self.create_flow_from(f, events.clone()));
        made.inspect_err(|_| {
            let _ = self.store.drop_table(&events);
        })
    }

    /// Appends to hidden events table `events` the events of the snapshots that arrived since
    /// its checkpoint, with the new checkpoint, in one commit; `None` if `events` is not a
    /// snapshot flow's. Snapshots must arrive whole: the rows of one version in one append.
    pub(super) fn feed_snapshots(&mut self, events: &str) -> Result<Option<u64>> {
        let Some(origin) = self
            .store
            .source_origin(events)?
            .0
            .and_then(|o| SnapshotOrigin::parse(&o))
        else {
            return Ok(None);
        };
        // A folder of snapshots takes the files that arrived since first.
        self.load_new_files(Some(&origin.snapshot_of))?;
        let offset = self.store.append_offset(events, FEED)?.unwrap_or(0) as usize;
        let (schema, batches) = self.store.source_data(&origin.snapshot_of)?;
        let all = arrow::compute::concat_batches(&schema, &batches).map_err(arrow_err)?;
        if all.num_rows() <= offset {
            return Ok(Some(0));
        }
        let column = |name: &str| -> Result<ArrayRef> {
            all.column_by_name(name).cloned().ok_or_else(|| {
                QueryError::Invalid(format!("`{}` has no column `{name}`", origin.snapshot_of))
            })
        };
        let rows_of = |cols: Vec<ArrayRef>| -> Result<Vec<Vec<u8>>> {
            let fields = cols
                .iter()
                .map(|c| SortField::new(c.data_type().clone()))
                .collect();
            let conv = RowConverter::new(fields).map_err(arrow_err)?;
            let rows = conv.convert_columns(&cols).map_err(arrow_err)?;
            Ok(rows.iter().map(|r| r.as_ref().to_vec()).collect())
        };
        let keys = rows_of(
            origin
                .keys
                .iter()
                .map(|k| column(k))
                .collect::<Result<_>>()?,
        )?;
        // Order-preserving bytes of each row's version: snapshots sort by them.
        let versions = rows_of(vec![column(&origin.version)?])?;
        // Per version (in order), its keys and the row that holds each.
        let mut snapshots: BTreeMap<&[u8], BTreeMap<&[u8], usize>> = BTreeMap::new();
        for (i, (v, k)) in versions.iter().zip(&keys).enumerate() {
            snapshots.entry(v).or_default().insert(k, i);
        }
        let new: BTreeSet<&[u8]> = versions[offset..].iter().map(Vec::as_slice).collect();
        // Each event: the row its values come from, the row its version comes from, upsert.
        let mut out: Vec<(usize, usize, bool)> = Vec::new();
        for &v in &new {
            let rows = &snapshots[v];
            let first_of = |s: &BTreeMap<&[u8], usize>| *s.values().next().expect("a row");
            out.extend(rows.values().map(|&r| (r, r, true)));
            let before = snapshots.range(..v).next_back();
            if let Some((_, prev)) = before {
                let at = first_of(rows);
                out.extend(
                    prev.iter()
                        .filter(|(k, _)| !rows.contains_key(*k))
                        .map(|(_, &r)| (r, at, false)),
                );
            }
            let after = snapshots
                .range::<[u8], _>((std::ops::Bound::Excluded(v), std::ops::Bound::Unbounded))
                .next();
            if let Some((_, next)) = after {
                let at = first_of(next);
                out.extend(
                    rows.iter()
                        .filter(|(k, _)| !next.contains_key(*k))
                        .map(|(_, &r)| (r, at, false)),
                );
            }
        }
        let take = |idx: Vec<u32>| -> Result<Vec<ArrayRef>> {
            let idx = arrow::array::UInt32Array::from(idx);
            all.columns()
                .iter()
                .map(|c| arrow::compute::take(c, &idx, None).map_err(arrow_err))
                .collect()
        };
        let mut cols = take(out.iter().map(|e| e.0 as u32).collect())?;
        let version_at = schema.index_of(&origin.version).map_err(arrow_err)?;
        cols[version_at] = take(out.iter().map(|e| e.1 as u32).collect())?.swap_remove(version_at);
        cols.push(Arc::new(StringArray::from_iter_values(
            out.iter().map(|e| if e.2 { "U" } else { "D" }),
        )));
        let mut fields: Vec<Field> = schema.fields().iter().map(|c| c.as_ref().clone()).collect();
        fields.push(Field::new(OP, DataType::Utf8, false));
        let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), cols).map_err(arrow_err)?;
        let mut w = self.store.begin_append(events)?;
        w.push(&batch)?;
        w.set_parameter(append_offset_parameter(FEED), all.num_rows().to_string());
        self.store.commit_write(w, None)?;
        Ok(Some(out.len() as u64))
    }
}
