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

use arrow::array::{ArrayRef, BooleanArray, RecordBatch, StringArray, UInt32Array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::row::{RowConverter, SortField};
use asof_storage::{
    append_offset_parameter, SourceRead, SourceRows, SourceWrite, RETENTION_PROPERTY,
};
use serde::{Deserialize, Serialize};

use super::parse::{split, Cols, FlowAst};
use super::{Output, SqlSession};
use crate::error::{QueryError, Result};
use crate::spill::{Record, Sorted, Sorter};

/// The column of the hidden events table that says upsert (`U`) or delete (`D`).
const OP: &str = "__asof_op";

/// The checkpoint name of the feed (`append_offset.snapshots`: snapshot rows read).
const FEED: &str = "snapshots";

/// The version column of a snapshot flow over a table that holds one snapshot, replaced or
/// re-loaded in place (no `SEQUENCE BY`): the table's commit version each refresh took it at.
pub(super) const TABLE_VERSION: &str = "__asof_snapshot";

/// `f` with the version column of a flow over a whole table (`TABLE_VERSION`) if it names none:
/// the events flow sequences by it and leaves it out of the target.
pub(super) fn versioned(mut f: FlowAst) -> FlowAst {
    if !f.sequence_by.is_empty() {
        return f;
    }
    f.sequence_by = vec![TABLE_VERSION.into()];
    f.columns = Some(leave_out(f.columns.take(), TABLE_VERSION));
    f
}

/// A `COLUMNS` selection that also leaves out `column` (a list naming the columns it keeps
/// stays as it is).
pub(super) fn leave_out(columns: Option<Cols>, column: &str) -> Cols {
    match columns {
        None | Some(Cols::All) => Cols::Except(vec![column.into()]),
        Some(Cols::Except(mut v)) => {
            v.push(column.into());
            Cols::Except(v)
        }
        Some(only) => only,
    }
}

/// From how many snapshot rows a refresh reports its progress.
const PROGRESS_ROWS: u64 = 1_000_000;

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
    f.columns = Some(leave_out(f.columns.take(), OP));
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
                .is_some_and(|o| o.snapshot_of == table && o.version != TABLE_VERSION)
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
        let f = &versioned(f.clone());
        let events = events_table(&f.name);
        let origin = self
            .store
            .source_origin(&events)?
            .0
            .and_then(|o| SnapshotOrigin::parse(&o));
        let Some(o) = origin else {
            return Ok(SnapshotChange::Origin("snapshots".into()));
        };
        if o.keys != f.keys || f.sequence_by.first() != Some(&o.version) {
            return Ok(SnapshotChange::Origin(format!(
                "keys or version: they are the shape of `{}` (its KEYS and SEQUENCE BY), which an AUTO CDC flow may not change either",
                f.target
            )));
        }
        if o.snapshot_of != snapshots {
            return Ok(SnapshotChange::Origin(format!(
                "snapshots (`{snapshots}`, not `{}`)",
                o.snapshot_of
            )));
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
    /// Its snapshots, keys or version differ: which, in words.
    Origin(String),
}

fn arrow_err(e: arrow::error::ArrowError) -> QueryError {
    QueryError::Invalid(e.to_string())
}

impl SqlSession {
    /// Creates snapshot flow `f` over `snapshots`: its hidden events table, fed with the
    /// snapshots there are, and the AUTO CDC flow from it into `f.target`.
    pub(super) fn create_snapshot_flow(&mut self, f: FlowAst, snapshots: String) -> Result<Output> {
        let f = versioned(f);
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
        for used in [OP, TABLE_VERSION] {
            if schema.fields().iter().any(|c| c.name() == used) {
                return Err(QueryError::Invalid(format!(
                    "`{snapshots}` has a column `{used}`, which asof uses"
                )));
            }
        }
        let mut fields: Vec<Field> = schema.fields().iter().map(|c| c.as_ref().clone()).collect();
        if version == TABLE_VERSION {
            fields.push(Field::new(TABLE_VERSION, DataType::Int64, false));
        }
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
    ///
    /// The snapshots are read from the store a few chunks at a time, three times, and what is
    /// held in memory is the list of versions and a sort bounded by
    /// [`super::SessionOptions::sort_memory`] (it spills to temporary files), whatever the
    /// size of a snapshot:
    /// 1. the versions there are, and which arrived since the checkpoint;
    /// 2. the rows of each new snapshot become upserts, and the `(key, version, position)` of
    ///    every row of a new snapshot or of one next to it in version order are sorted by key;
    ///    each key's versions then give its deletes (a row, and the version it is deleted at),
    ///    sorted by position;
    /// 3. the rows the deletes name are read in position order.
    pub(super) fn feed_snapshots(&mut self, events: &str) -> Result<Option<u64>> {
        let Some(origin) = self
            .store
            .source_origin(events)?
            .0
            .and_then(|o| SnapshotOrigin::parse(&o))
        else {
            return Ok(None);
        };
        if origin.version == TABLE_VERSION {
            return self.feed_whole_table(events, &origin).map(Some);
        }
        // A folder of snapshots takes the files that arrived since first.
        self.load_new_files(Some(&origin.snapshot_of))?;
        let offset = self.store.append_offset(events, FEED)?.unwrap_or(0);
        // Every pass reads the snapshots as of one version of their table (a table written
        // before source tables kept their history is read as it is: rows of a snapshot that
        // arrives between the passes are not among the versions the first found, and wait).
        let read = match self.store.source_latest_version(&origin.snapshot_of)? {
            Some(version) => SourceRead::AsOf(version),
            None => SourceRead::Now,
        };
        let mut first = self.store.source_rows(&origin.snapshot_of, read)?;
        let schema = first.schema();
        let written = first.written();
        if written <= offset {
            return Ok(Some(0));
        }
        let diff = SnapshotDiff::new(&schema, &origin)?;
        // A large table of snapshots reports its three reads (each reads all of it).
        let bar = self.progress.clone().filter(|_| written >= PROGRESS_ROWS);
        let pass = |done: u64| {
            if let Some(b) = &bar {
                match done {
                    0 => b.begin(
                        &format!("diffing the snapshots of {}", origin.snapshot_of),
                        3,
                    ),
                    3 => b.end(),
                    n => b.advance(n),
                }
            }
        };
        pass(0);
        let diffed = (|| {
            let versions = diff.versions(&mut first, offset)?;
            pass(1);
            let mut w = self.store.begin_append(events)?;
            let mut sorter = Sorter::new(self.options.sort_memory);
            let second = self.store.source_rows(&origin.snapshot_of, read)?;
            let upserts = diff.upserts(second, &versions, &mut w, &mut sorter)?;
            pass(2);
            let deletes = diff.deletes(sorter.finish()?, &versions, self.options.sort_memory)?;
            let third = self.store.source_rows(&origin.snapshot_of, read)?;
            let deleted = diff.write_deletes(third, deletes, &mut w)?;
            Ok::<_, QueryError>((w, upserts, deleted))
        })();
        pass(3);
        let (mut w, upserts, deleted) = diffed?;
        // The three passes read the same rows: no ERASE or DROP rewrote chunks since the first.
        first.check_unchanged()?;
        w.set_parameter(append_offset_parameter(FEED), written.to_string());
        self.store.commit_write(w, None)?;
        Ok(Some(upserts + deleted))
    }
}

/// The snapshots, in version order, each with whether it arrived since the checkpoint.
type Versions = BTreeMap<Vec<u8>, bool>;

/// The row encodings the snapshot diff compares by (Arrow's row format: byte order is value
/// order).
struct SnapshotDiff {
    schema: SchemaRef,
    keys: Vec<usize>,
    version: usize,
    /// Keys, then version: sorting by it groups a key's rows, in version order.
    key_version: RowConverter,
    versions: RowConverter,
}

impl SnapshotDiff {
    fn new(schema: &SchemaRef, origin: &SnapshotOrigin) -> Result<SnapshotDiff> {
        let index = |name: &str| {
            schema.index_of(name).map_err(|_| {
                QueryError::Invalid(format!("`{}` has no column `{name}`", origin.snapshot_of))
            })
        };
        let keys = origin
            .keys
            .iter()
            .map(|k| index(k))
            .collect::<Result<Vec<_>>>()?;
        let version = index(&origin.version)?;
        let field = |i: usize| SortField::new(schema.field(i).data_type().clone());
        let key_version =
            RowConverter::new(keys.iter().chain([&version]).map(|&i| field(i)).collect())
                .map_err(arrow_err)?;
        let versions = RowConverter::new(vec![field(version)]).map_err(arrow_err)?;
        Ok(SnapshotDiff {
            schema: schema.clone(),
            keys,
            version,
            key_version,
            versions,
        })
    }

    /// The version of each row of `b`, encoded.
    fn version_rows(&self, b: &RecordBatch) -> Result<arrow::row::Rows> {
        self.versions
            .convert_columns(&[b.column(self.version).clone()])
            .map_err(arrow_err)
    }

    /// Pass 1: the versions of the snapshots, new if a row of it is past `offset`.
    fn versions(&self, rows: &mut SourceRows, offset: u64) -> Result<Versions> {
        let mut out = Versions::new();
        while let Some(b) = rows.next_positioned()? {
            let v = self.version_rows(&b.rows)?;
            for (i, &p) in b.positions.iter().enumerate() {
                let new = out.entry(v.row(i).as_ref().to_vec()).or_insert(false);
                *new |= p >= offset;
            }
        }
        Ok(out)
    }

    /// Pass 2: appends to `w` an upsert of every row of a new snapshot, and gives `sorter` the
    /// key, version and position of every row of a snapshot a new one is diffed with. The
    /// number of upserts.
    fn upserts(
        &self,
        mut rows: SourceRows,
        versions: &Versions,
        w: &mut SourceWrite,
        sorter: &mut Sorter,
    ) -> Result<u64> {
        let mut diffed: BTreeSet<&[u8]> = BTreeSet::new();
        let all: Vec<&Vec<u8>> = versions.keys().collect();
        for (i, (v, new)) in versions.iter().enumerate() {
            if *new {
                diffed.insert(v);
                diffed.extend(i.checked_sub(1).map(|p| all[p].as_slice()));
                diffed.extend(all.get(i + 1).map(|n| n.as_slice()));
            }
        }
        let mut n = 0;
        while let Some(b) = rows.next_positioned()? {
            let v = self.version_rows(&b.rows)?;
            let cols: Vec<ArrayRef> = self
                .keys
                .iter()
                .chain([&self.version])
                .map(|&i| b.rows.column(i).clone())
                .collect();
            let kv = self.key_version.convert_columns(&cols).map_err(arrow_err)?;
            let mut upsert = Vec::with_capacity(b.rows.num_rows());
            for (i, &p) in b.positions.iter().enumerate() {
                let version = v.row(i);
                upsert.push(versions.get(version.as_ref()) == Some(&true));
                if diffed.contains(version.as_ref()) {
                    let mut payload = Vec::with_capacity(version.as_ref().len() + 8);
                    payload.extend_from_slice(&p.to_be_bytes());
                    payload.extend_from_slice(version.as_ref());
                    sorter.push(Record {
                        key: kv.row(i).as_ref().to_vec(),
                        payload,
                    })?;
                }
            }
            let upsert = BooleanArray::from(upsert);
            let rows = arrow::compute::filter_record_batch(&b.rows, &upsert).map_err(arrow_err)?;
            if rows.num_rows() > 0 {
                n += rows.num_rows() as u64;
                let op = StringArray::from_iter_values(std::iter::repeat_n("U", rows.num_rows()));
                w.push(&self.with_op(rows.columns().to_vec(), Arc::new(op))?)?;
            }
        }
        Ok(n)
    }

    /// The rows of the events table: `cols`, then the operation column.
    fn with_op(&self, mut cols: Vec<ArrayRef>, op: ArrayRef) -> Result<RecordBatch> {
        let mut fields: Vec<Field> = self
            .schema
            .fields()
            .iter()
            .map(|c| c.as_ref().clone())
            .collect();
        fields.push(Field::new(OP, DataType::Utf8, false));
        cols.push(op);
        RecordBatch::try_new(Arc::new(Schema::new(fields)), cols).map_err(arrow_err)
    }

    /// The deletes of the sorted `(key, version, position)` records: for each new snapshot `v`,
    /// a delete at `v` of each key of the snapshot before it that `v` lacks, and a delete at the
    /// snapshot after it of each key of `v` that one lacks; sorted by the position of the row
    /// deleted (its values), each with the version it is deleted at.
    fn deletes(&self, sorted: Sorted, versions: &Versions, budget: usize) -> Result<Sorted> {
        let mut out = Sorter::new(budget);
        let all: Vec<&Vec<u8>> = versions.keys().collect();
        // The new snapshots, by their place among all: only they are diffed.
        let new: Vec<(usize, &Vec<u8>)> = versions
            .iter()
            .enumerate()
            .filter(|(_, (_, new))| **new)
            .map(|(i, (v, _))| (i, v))
            .collect();
        // One key's records: its versions (among those diffed) and the row of each.
        let mut key: Option<Vec<u8>> = None;
        let mut rows: BTreeMap<Vec<u8>, [u8; 8]> = BTreeMap::new();
        let mut flush = |rows: &mut BTreeMap<Vec<u8>, [u8; 8]>| -> Result<()> {
            for &(i, v) in &new {
                let mut delete = |at: &[u8], row: &[u8; 8]| {
                    out.push(Record {
                        key: row.to_vec(),
                        payload: at.to_vec(),
                    })
                };
                if let Some(prev) = i.checked_sub(1).map(|p| all[p]) {
                    if let (Some(row), None) = (rows.get(prev), rows.get(v)) {
                        delete(v, row)?;
                    }
                }
                if let Some(next) = all.get(i + 1) {
                    if let (Some(row), None) = (rows.get(v), rows.get(*next)) {
                        delete(next, row)?;
                    }
                }
            }
            rows.clear();
            Ok(())
        };
        for r in sorted {
            let r = r?;
            let (p, version) = r.payload.split_at(8);
            // The key's part of the record's sort key: all but the version's encoding.
            let k = &r.key[..r.key.len() - version.len()];
            if key.as_deref() != Some(k) {
                flush(&mut rows)?;
                key = Some(k.to_vec());
            }
            rows.insert(version.to_vec(), p.try_into().expect("8 bytes"));
        }
        flush(&mut rows)?;
        out.finish()
    }

    /// Pass 3: appends to `w` the deletes (sorted by position): each the row at its position,
    /// its version replaced by the one it is deleted at. The number of deletes.
    fn write_deletes(
        &self,
        mut rows: SourceRows,
        deletes: Sorted,
        w: &mut SourceWrite,
    ) -> Result<u64> {
        let mut deletes = deletes.peekable();
        let mut n = 0;
        let mut last: Option<Record> = None;
        while let Some(b) = rows.next_positioned()? {
            let mut take = Vec::new();
            let mut at = Vec::new();
            for (i, &p) in b.positions.iter().enumerate() {
                while let Some(d) = deletes.next_if(|d| {
                    d.as_ref().map_or(true, |d| {
                        u64::from_be_bytes(d.key[..].try_into().unwrap_or_default()) <= p
                    })
                }) {
                    let d = d?;
                    // The same delete may come from two diffs (two new snapshots in a row).
                    if last.as_ref() == Some(&d) {
                        continue;
                    }
                    let row = u64::from_be_bytes(d.key[..].try_into().unwrap_or_default());
                    if row != p {
                        return Err(missing_row(row));
                    }
                    take.push(i as u32);
                    at.push(d.payload.clone());
                    last = Some(d);
                }
            }
            if take.is_empty() {
                continue;
            }
            let idx = UInt32Array::from(take);
            let mut cols = b
                .rows
                .columns()
                .iter()
                .map(|c| arrow::compute::take(c, &idx, None).map_err(arrow_err))
                .collect::<Result<Vec<_>>>()?;
            let parser = self.versions.parser();
            let versions = self
                .versions
                .convert_rows(at.iter().map(|v| parser.parse(v)))
                .map_err(arrow_err)?;
            cols[self.version] = versions[0].clone();
            n += idx.len() as u64;
            let op = StringArray::from_iter_values(std::iter::repeat_n("D", idx.len()));
            w.push(&self.with_op(cols, Arc::new(op))?)?;
        }
        // Every delete names a row the passes read.
        if let Some(d) = deletes.next() {
            let d = d?;
            return Err(missing_row(u64::from_be_bytes(
                d.key[..].try_into().unwrap_or_default(),
            )));
        }
        Ok(n)
    }
}

/// The error of a delete whose row the diff's last pass did not read.
fn missing_row(position: u64) -> QueryError {
    QueryError::Invalid(format!(
        "the snapshot diff names row {position} of the snapshots, which its last read did not find; nothing was written (refresh again)"
    ))
}

impl SqlSession {
    /// Feeds a snapshot flow over a table that holds one snapshot, replaced or re-loaded in
    /// place: if the table changed since the version taken last, its rows now are the next
    /// snapshot, at version `TABLE_VERSION` = the table's commit version. Each of its rows is
    /// an upsert, and each key of the snapshot taken last (the table as of that version) that
    /// it lacks is deleted. The checkpoint is the version taken, plus one. Memory is bounded as
    /// for the other snapshots: the keys are sorted within `sort_memory`.
    fn feed_whole_table(&mut self, events: &str, origin: &SnapshotOrigin) -> Result<u64> {
        let table = &origin.snapshot_of;
        let taken = self.store.append_offset(events, FEED)?.unwrap_or(0);
        let Some(now) = self.store.source_latest_version(table)? else {
            return Err(QueryError::Invalid(format!(
                "`{table}` has no history to take snapshots of"
            )));
        };
        if now < taken {
            return Ok(0);
        }
        let mut current = self.store.source_rows(table, SourceRead::AsOf(now))?;
        let schema = current.schema();
        let keys = origin
            .keys
            .iter()
            .map(|k| {
                schema
                    .index_of(k)
                    .map_err(|_| QueryError::Invalid(format!("`{table}` has no column `{k}`")))
            })
            .collect::<Result<Vec<_>>>()?;
        let conv = RowConverter::new(
            keys.iter()
                .map(|&i| SortField::new(schema.field(i).data_type().clone()))
                .collect(),
        )
        .map_err(arrow_err)?;
        let key_rows = |b: &RecordBatch| {
            let cols: Vec<ArrayRef> = keys.iter().map(|&i| b.column(i).clone()).collect();
            conv.convert_columns(&cols).map_err(arrow_err)
        };
        let event = |cols: Vec<ArrayRef>, op: &str| -> Result<RecordBatch> {
            let n = cols.first().map_or(0, |c| c.len());
            let mut cols = cols;
            cols.push(Arc::new(arrow::array::Int64Array::from(vec![
                now as i64;
                n
            ])));
            cols.push(Arc::new(StringArray::from_iter_values(
                std::iter::repeat_n(op, n),
            )));
            let mut fields: Vec<Field> =
                schema.fields().iter().map(|c| c.as_ref().clone()).collect();
            fields.push(Field::new(TABLE_VERSION, DataType::Int64, false));
            fields.push(Field::new(OP, DataType::Utf8, false));
            RecordBatch::try_new(Arc::new(Schema::new(fields)), cols).map_err(arrow_err)
        };
        let mut w = self.store.begin_append(events)?;
        // Every row now is an upsert; its key is sorted (tag 1) against the last snapshot's (0).
        let mut sorter = Sorter::new(self.options.sort_memory);
        let mut n = 0;
        while let Some(b) = current.next_positioned()? {
            let k = key_rows(&b.rows)?;
            for i in 0..b.rows.num_rows() {
                let mut key = k.row(i).as_ref().to_vec();
                key.push(1);
                sorter.push(Record {
                    key,
                    payload: Vec::new(),
                })?;
            }
            n += b.rows.num_rows() as u64;
            w.push(&event(b.rows.columns().to_vec(), "U")?)?;
        }
        let previous = taken.checked_sub(1);
        if let Some(v) = previous {
            let mut last = self.store.source_rows(table, SourceRead::AsOf(v))?;
            while let Some(b) = last.next_positioned()? {
                let k = key_rows(&b.rows)?;
                for (i, p) in b.positions.iter().enumerate() {
                    let mut key = k.row(i).as_ref().to_vec();
                    key.push(0);
                    sorter.push(Record {
                        key,
                        payload: p.to_be_bytes().to_vec(),
                    })?;
                }
            }
        }
        // The rows of keys the last snapshot had and this one lacks, by position.
        let mut gone = Sorter::new(self.options.sort_memory);
        let mut group: Option<(Vec<u8>, Vec<Vec<u8>>, bool)> = None;
        let mut close = |g: Option<(Vec<u8>, Vec<Vec<u8>>, bool)>| -> Result<()> {
            if let Some((_, positions, false)) = g {
                // A key twice in the last snapshot: its last row stands for it.
                if let Some(p) = positions.into_iter().last() {
                    gone.push(Record {
                        key: p,
                        payload: Vec::new(),
                    })?;
                }
            }
            Ok(())
        };
        for r in sorter.finish()? {
            let r = r?;
            let (key, tag) = r.key.split_at(r.key.len() - 1);
            if group.as_ref().is_none_or(|g| g.0 != key) {
                close(group.take())?;
                group = Some((key.to_vec(), Vec::new(), false));
            }
            let g = group.as_mut().expect("a group");
            match tag {
                [0] => g.1.push(r.payload),
                _ => g.2 = true,
            }
        }
        close(group.take())?;
        let mut gone = gone.finish()?.peekable();
        if let (Some(v), true) = (previous, gone.peek().is_some()) {
            let mut last = self.store.source_rows(table, SourceRead::AsOf(v))?;
            while let Some(b) = last.next_positioned()? {
                let mut take = Vec::new();
                for (i, &p) in b.positions.iter().enumerate() {
                    let at = |d: &Result<Record>| {
                        d.as_ref()
                            .map_or(true, |d| d.key[..] <= p.to_be_bytes()[..])
                    };
                    while let Some(d) = gone.next_if(at) {
                        if d?.key[..] == p.to_be_bytes()[..] {
                            take.push(i as u32);
                        }
                    }
                }
                if take.is_empty() {
                    continue;
                }
                let idx = UInt32Array::from(take);
                let cols = b
                    .rows
                    .columns()
                    .iter()
                    .map(|c| arrow::compute::take(c, &idx, None).map_err(arrow_err))
                    .collect::<Result<Vec<_>>>()?;
                n += idx.len() as u64;
                w.push(&event(cols, "D")?)?;
            }
            current.check_unchanged()?;
        }
        w.set_parameter(append_offset_parameter(FEED), (now + 1).to_string());
        self.store.commit_write(w, None)?;
        Ok(n)
    }
}
