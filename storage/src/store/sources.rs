//! Source tables: creating them, and writes that commit as one append however many batches.

use std::collections::{BTreeMap, BTreeSet};

use arrow::record_batch::RecordBatch;

use super::chain::{put_commit, put_commit_written, Link, Wrote};
use super::commit::{delete_from, now_us, put_json, write_or_poison, CommitInfo};
use super::source_rows::{positioned_table, SourceRead, SourceRows};
use super::Store;
use crate::engine::CommitMetrics;
use crate::error::{Error, Result};
use crate::flow::ChangeCommits;
use crate::format::keys::{self, key};
use crate::kv::WriteBatch;
use crate::source::{SourceTable, SourceWrite, WriteKind};
use crate::source_dml::{self, SourceChange, SourceDmlOperation};

/// The operation of a source commit that appended rows.
pub(super) use crate::source::WRITE;

use crate::source::ADD_COLUMNS;

/// A statement's source rows written ahead of its commit record go in batches of about this many
/// bytes ([`write_ahead`]).
const WRITE_AHEAD_BYTES: usize = crate::source_chunks::IN_MEMORY_BYTES;

/// Writes `content` (an append's chunks and name, in key order) ahead of the batch `b` that
/// holds the commit record, in batches of [`WRITE_AHEAD_BYTES`], the last of them left in `b`;
/// puts the record, its digest computed over the content as it goes, into `b`. Nothing reads the
/// chunks before the record names them: a reader reads a source's rows up to the count its
/// commit records give, and an open deletes the chunks no record claims (a crash between the
/// batches; [`remove_unclaimed_appends`]). An error after a batch was written poisons the store,
/// so that it is reopened, and the chunks deleted, before anything takes their append's number.
fn write_ahead(
    kv: &dyn crate::kv::KvStore,
    poisoned: &mut Option<String>,
    b: &mut WriteBatch,
    at: Link<'_>,
    commit: &mut CommitInfo,
    content: impl Iterator<Item = Result<(Vec<u8>, Vec<u8>)>>,
) -> Result<()> {
    let mut ahead = WriteBatch::default();
    let (mut bytes, mut wrote) = (0usize, false);
    let content = content.map(|pair| {
        let (k, v) = pair?;
        bytes += k.len() + v.len();
        ahead.put(k.clone(), v.clone());
        // Only chunks go ahead: the append's name (the last pair) stays with the record, since
        // an open reads names before it deletes what no record claims.
        if bytes >= WRITE_AHEAD_BYTES && k.first() == Some(&keys::APPEND) {
            bytes = 0;
            wrote = true;
            kv.write(std::mem::take(&mut ahead))?;
        }
        Ok((k, v))
    });
    let put = put_commit_written(b, at, commit, content);
    if let Err(e) = &put {
        if wrote {
            *poisoned = Some(format!("a statement's rows were written in part: {e}"));
        }
    }
    put?;
    b.ops.append(&mut ahead.ops);
    Ok(())
}

/// Deletes the chunks of source `id` from append `from` on, which no commit record claims (a
/// statement whose rows were written ahead, [`write_ahead`], stopped before its last batch), in
/// batches of a few thousand.
pub(super) fn remove_unclaimed_appends(
    kv: &dyn crate::kv::KvStore,
    id: u32,
    from: u64,
) -> Result<()> {
    delete_from(
        kv,
        &key(keys::APPEND, id, None, None),
        &key(keys::APPEND, id, Some(from), None),
    )
}

/// Deletes the chunks of every source numbered `from` or above: those of a `CREATE TABLE ... AS
/// SELECT` that stopped before its last batch, whose number no table has (the next table created
/// takes it).
pub(super) fn remove_unclaimed_sources(kv: &dyn crate::kv::KvStore, from: u32) -> Result<()> {
    delete_from(kv, &[keys::APPEND], &key(keys::APPEND, from, None, None))
}

/// Checks write `w` against the store's state, puts its commit into `b` (its rows written ahead
/// if they are many, [`write_ahead`]) and updates the state as if `b` were written: the caller
/// writes it, or the store is poisoned. Returns the row count of its table.
fn stage_write(
    inner: &mut super::Inner,
    mut w: SourceWrite,
    name: Option<&str>,
    b: &mut WriteBatch,
) -> Result<u64> {
    w.removed(); // the positions a statement removes, in order, each once
    let mut created = None;
    let id = match w.kind {
        WriteKind::Create => {
            inner.name_is_free(&w.table.name)?;
            let id = inner.next_table_id;
            let rec = w.table.record();
            let mut commit = CommitInfo::bare(0, now_us(), "CREATE TABLE", BTreeMap::new());
            put_json(b, key(keys::SOURCE, id, None, None), &rec)?;
            let at = Link {
                tag: keys::SOURCE_COMMIT,
                id,
                prev: None,
                wrote: Wrote::Nothing,
            };
            put_commit(b, at, &mut commit)?;
            let mut src = SourceTable::new(id, w.table.name.clone(), w.table.columns.clone());
            src.origin = w.table.origin.clone();
            src.append_flows = w.table.append_flows.clone();
            src.generated = w.table.generated.clone();
            src.history.push(commit);
            created = Some(src);
            id
        }
        WriteKind::Append => {
            let src = inner.sources.get(&w.table.name);
            if src.is_none_or(|s| s.id != w.table.id) {
                return Err(Error::InvalidQuery(format!(
                    "source table `{}` was dropped or replaced while rows were written to it; nothing was written",
                    w.table.name
                )));
            }
            if src.is_some_and(|s| s.columns != w.table.columns) {
                return Err(Error::InvalidQuery(format!(
                    "the columns of `{}` changed while rows were written to it; nothing was written (write again)",
                    w.table.name
                )));
            }
            if crate::generated::has_identity(&w.table.generated)
                && w.rows > 0
                && src.is_some_and(|s| s.rows != w.table.rows)
            {
                return Err(Error::InvalidQuery(format!(
                    "`{}` was written to while these rows were: their identity values would repeat; nothing was written (write again)",
                    w.table.name
                )));
            }
            if let (Some(change), Some(src)) = (&w.change, src) {
                let gone = change.deleted.iter().find(|&&p| {
                    p >= src.rows || src.deleted.contains(p) || src.erased.binary_search(&p).is_ok()
                });
                if let Some(&position) = gone {
                    return Err(Error::ChangedMeanwhile {
                        table: w.table.name.clone(),
                        position,
                        operation: change.operation.name(),
                    });
                }
            }
            w.table.id
        }
    };
    if let Some(src) = inner.sources.get(&w.table.name) {
        for (flow, expected) in &w.checkpoints {
            let key = super::append_flows::append_offset_parameter(flow);
            let now = src
                .history
                .iter()
                .rev()
                .find_map(|c| c.parameters.get(&key).and_then(|v| v.parse::<u64>().ok()));
            if now != *expected {
                return Err(Error::FlowRanMeanwhile {
                    flow: flow.clone(),
                    table: w.table.name.clone(),
                });
            }
        }
        // A full refresh removes every row there was when it began: rows written since
        // would stay.
        let full = w
            .change
            .as_ref()
            .is_some_and(|c| c.operation == SourceDmlOperation::FullRefresh);
        if full && Some(src.rows) != w.written {
            return Err(Error::FlowRanMeanwhile {
                flow: "every flow".into(),
                table: w.table.name.clone(),
            });
        }
    }
    if let Some((source, flow, version)) = &w.read {
        let removed_since = inner.sources.get(source).is_some_and(|s| {
            s.history.iter().any(|c| {
                c.version > *version
                    && c.parameters
                        .get(source_dml::DELETED_ROWS)
                        .is_some_and(|l| !l.is_empty())
            })
        });
        if removed_since {
            return Err(Error::SourceChangedMeanwhile {
                flow: flow.clone(),
                source_table: source.clone(),
            });
        }
    }
    let breaks = match &w.change {
        Some(change) => flows_that_read(inner, &w.table.name, &change.deleted),
        None => Vec::new(),
    };
    let src = match created.as_mut() {
        Some(s) => s,
        None => inner.sources.get_mut(&w.table.name).expect("checked"),
    };
    let commits = w.rows > 0 || name.is_some() || !w.parameters.is_empty() || w.change.is_some();
    if commits {
        let append = src.appends;
        let loaded = name.map(|n| (key(keys::LOADED, id, Some(append), None), n.into()));
        let chunks = std::mem::take(&mut w.chunks);
        // A source written before source tables had commit records counts its rows from its
        // chunks when it opens, so it could not tell chunks written ahead from committed
        // ones: its statements write in one batch.
        let ahead = chunks.in_file() && src.full_history();
        // The append's content, in key order: its chunks, then its name.
        let content = chunks
            .read_back()?
            .enumerate()
            .map(|(i, c)| c.map(|c| (key(keys::APPEND, id, Some(append), Some(i as u32)), c)))
            .chain(loaded.map(Ok));
        let last = src.history.last();
        let prev = last.and_then(|c| c.chain.clone());
        let appended = src.rows..src.rows + w.rows;
        let mut commit = CommitInfo {
            version: last.map_or(0, |c| c.version + 1),
            timestamp_us: now_us().max(last.map_or(0, |c| c.timestamp_us + 1)),
            operation: w
                .change
                .as_ref()
                .map_or(WRITE, |c| c.operation.name())
                .into(),
            parameters: name
                .map(|n| ("file".to_string(), n.to_string()))
                .into_iter()
                .chain(w.parameters.clone())
                .chain(
                    w.change
                        .iter()
                        .flat_map(|c| c.parameters(appended.clone(), &breaks)),
                )
                .collect(),
            metrics: CommitMetrics {
                num_upserted_rows: w.rows,
                num_deleted_rows: w.change.as_ref().map_or(0, |c| c.deleted.len() as u64),
                ..Default::default()
            },
            duration_us: w.clock.elapsed_us(),
            peak_memory_bytes: w.clock.peak_memory_bytes(),
            chain: None,
        };
        // A DML statement that appends nothing writes no append.
        let wrote = if w.change.is_some() && w.rows == 0 {
            Wrote::Nothing
        } else {
            Wrote::Append(src.appends)
        };
        let at = Link {
            tag: keys::SOURCE_COMMIT,
            id,
            prev: prev.as_deref(),
            wrote,
        };
        if ahead {
            let kv = inner.kv.as_ref();
            write_ahead(kv, &mut inner.poisoned, b, at, &mut commit, content)?;
        } else {
            for pair in content {
                let (k, v) = pair?;
                b.put(k, v);
            }
            put_commit(b, at, &mut commit)?;
        }
        src.history.push(commit);
    }
    let src = match created {
        Some(s) => {
            inner.next_table_id += 1;
            inner.sources.entry(w.table.name.clone()).or_insert(s)
        }
        None => inner.sources.get_mut(&w.table.name).expect("checked"),
    };
    if commits && !(w.change.is_some() && w.rows == 0) {
        src.appends += 1;
    }
    if let Some(change) = &w.change {
        let version = src.history.last().map_or(0, |c| c.version);
        src.deleted.insert_all(&change.deleted, version);
        // Rows of a statement that removed none (a MERGE that only inserted) are inserts.
        if w.rows > 0 && !change.deleted.is_empty() {
            src.changed.push((src.rows, src.rows + w.rows));
        }
    }
    src.rows += w.rows;
    if let Some(n) = name {
        src.loaded.insert(n.to_string());
    }
    Ok(src.rows_there())
}

impl Store {
    /// Creates a source table: a durable, append-only table flows can read from.
    pub fn create_source(&self, name: &str, schema: &arrow::datatypes::Schema) -> Result<()> {
        self.create_source_with_origin(name, schema, None)
    }

    /// Creates a source table that remembers where its rows come from: `origin` is opaque to the
    /// store (the SQL layer keeps a `read_files` call there) and is given back by
    /// [`Store::source_origin`].
    pub fn create_source_with_origin(
        &self,
        name: &str,
        schema: &arrow::datatypes::Schema,
        origin: Option<&str>,
    ) -> Result<()> {
        let w = self.begin_create_source(name, schema, origin)?;
        self.commit_write(w, None).map(|_| ())
    }

    /// Starts `CREATE TABLE name AS SELECT ...`: a source table created together with its rows,
    /// in one commit, by [`Store::commit_write`].
    pub fn begin_create_source(
        &self,
        name: &str,
        schema: &arrow::datatypes::Schema,
        origin: Option<&str>,
    ) -> Result<SourceWrite> {
        self.read_inner()?.name_is_free(name)?;
        let columns = SourceTable::columns_of(schema)?;
        let mut table = SourceTable::new(0, name.to_string(), columns);
        table.origin = origin.map(str::to_string);
        let evaluator = self.read_inner()?.evaluator.clone();
        Ok(SourceWrite::new(table, WriteKind::Create, evaluator))
    }

    /// Starts an append of any number of batches to a source table that commits as one
    /// (`INSERT INTO t SELECT ...`): push the rows into the [`SourceWrite`], then
    /// [`Store::commit_write`] it. Nothing is written before that, and nothing if it is dropped.
    pub fn begin_append(&self, source: &str) -> Result<SourceWrite> {
        let g = self.read_inner()?;
        let src = g.source(source)?;
        let mut table = SourceTable::new(src.id, src.name.clone(), src.columns.clone());
        table.origin = src.origin.clone();
        table.generated = src.generated.clone();
        // Identity values count from the rows written before.
        table.rows = src.rows;
        Ok(SourceWrite::new(
            table,
            WriteKind::Append,
            g.evaluator.clone(),
        ))
    }

    /// Commits a [`SourceWrite`] atomically: its rows are one append (one `WRITE` commit; after
    /// `CREATE TABLE` for a new table), named `name` if given (see [`Store::append_loaded`]).
    /// Returns the table's row count (rows erased since they were appended not counted). A table dropped or replaced since the write began is an
    /// error, and nothing is written.
    pub fn commit_write(&self, w: SourceWrite, name: Option<&str>) -> Result<u64> {
        self.commit_writes(vec![(w, name.map(str::to_string))])
    }

    /// Commits [`SourceWrite`]s in one durable write (one flush), each as its own commit, as
    /// [`Store::commit_write`] would one after the other: a loader of many small files flushes
    /// once for several. Returns the row count of the last one's table. A write that cannot
    /// commit (its table dropped meanwhile, say) is the error, after the ones before it are
    /// committed; none after it is.
    pub fn commit_writes(&self, writes: Vec<(SourceWrite, Option<String>)>) -> Result<u64> {
        let mut g = self.write_inner()?;
        let inner = &mut *g;
        let mut b = WriteBatch::default();
        let mut rows = 0;
        for (w, name) in writes {
            let mut one = WriteBatch::default();
            match stage_write(inner, w, name.as_deref(), &mut one) {
                Ok(n) => {
                    rows = n;
                    b.ops.append(&mut one.ops);
                }
                Err(e) => {
                    if !b.is_empty() {
                        write_or_poison(inner.kv.as_ref(), &mut inner.poisoned, b)?;
                    }
                    return Err(e);
                }
            }
        }
        write_or_poison(inner.kv.as_ref(), &mut inner.poisoned, b)?;
        Ok(rows)
    }

    /// The origin a source table was created with, and the names of the appends made with
    /// [`Store::append_loaded`].
    pub fn source_origin(&self, source: &str) -> Result<(Option<String>, BTreeSet<String>)> {
        let g = self.read_inner()?;
        let src = g.source(source)?;
        Ok((src.origin.clone(), src.loaded.clone()))
    }

    /// Appends rows to a source table, durably; returns its new row count. Columns are matched by
    /// name and cast to the table's types; missing columns are NULL.
    pub fn append(&self, source: &str, batch: &RecordBatch) -> Result<u64> {
        self.append_inner(source, batch, None)
    }

    /// Appends rows under a name (a file's path, say), durably and atomically with the name: after
    /// a crash either both are there or neither. [`Store::source_origin`] lists the names, so a
    /// loader can skip what it already loaded. An empty batch still records its name.
    pub fn append_loaded(&self, source: &str, batch: &RecordBatch, name: &str) -> Result<u64> {
        self.append_inner(source, batch, Some(name))
    }

    pub(super) fn append_inner(
        &self,
        source: &str,
        batch: &RecordBatch,
        name: Option<&str>,
    ) -> Result<u64> {
        let mut w = self.begin_append(source)?;
        w.push(batch)?;
        if w.rows() == 0 && name.is_none() {
            let g = self.read_inner()?;
            return Ok(g.sources.get(source).map_or(0, SourceTable::rows_there));
        }
        self.commit_write(w, name)
    }

    /// A read of a source table's rows, pinned to now and streamed from the store a few chunks
    /// at a time ([`SourceRows`]).
    pub fn source_rows(&self, source: &str, read: SourceRead) -> Result<SourceRows> {
        let g = self.read_inner()?;
        SourceRows::new(g.kv.clone(), g.source(source)?, read, &g.rewrites)
    }

    /// The rows of a source table after the first `from` ever appended (a flow's checkpoint, in
    /// which erased rows still count), as they are now: what append flow `flow` reads next
    /// ([`SourceRows::written`] is its next checkpoint). With [`ChangeCommits::Read`], a DML
    /// statement after source version `since` (what the flow last read whole, or first read)
    /// that removed rows the flow had read stops it (an error naming the statement's commit).
    pub fn source_rows_after(
        &self,
        source: &str,
        flow: &str,
        from: u64,
        change_commits: ChangeCommits,
        since: u64,
    ) -> Result<SourceRows> {
        let g = self.read_inner()?;
        let src = g.source(source)?;
        if change_commits == ChangeCommits::Read {
            if let Some(c) = source_dml::breaking_commit(&src.history, flow, since) {
                return Err(source_dml::broken_flow(flow, &src.name, c));
            }
        }
        let read = SourceRead::After {
            from,
            change_commits,
        };
        SourceRows::new(g.kv.clone(), src, read, &g.rewrites)
    }

    /// How many rows were ever written to a source table (those erased or removed since
    /// counted): what a flow's checkpoint counts.
    pub fn source_rows_written(&self, source: &str) -> Result<u64> {
        Ok(self.read_inner()?.source(source)?.rows)
    }

    /// The rows of a source table there now, each batch with the positions of its rows (what
    /// [`Store::begin_source_dml`] names rows by), read into memory.
    pub fn source_rows_positioned(&self, source: &str) -> Result<crate::source::PositionedTable> {
        positioned_table(self.source_rows(source, SourceRead::Now)?)
    }

    /// Starts a DML statement on a source table: it removes the rows at `deleted` (positions from
    /// [`Store::source_rows_positioned`]), and those given to [`SourceWrite::remove`], and appends the rows pushed to the write, in one commit
    /// ([`Store::commit_write`]) named `operation` in the table's history, with `statement`.
    pub fn begin_source_dml(
        &self,
        source: &str,
        operation: SourceDmlOperation,
        deleted: Vec<u64>,
        statement: &str,
    ) -> Result<SourceWrite> {
        let mut w = self.begin_append(source)?;
        let renumbers = matches!(
            operation,
            SourceDmlOperation::Update | SourceDmlOperation::Merge
        );
        if renumbers && crate::generated::has_identity(&w.table.generated) {
            return Err(Error::InvalidQuery(format!(
                "`{source}` has an identity column: {} would give its rows new numbers; asof does not do that yet (DELETE and INSERT work); nothing was changed",
                operation.name()
            )));
        }
        w.change = Some(SourceChange {
            operation,
            deleted,
            statement: statement.to_string(),
        });
        Ok(w)
    }

    /// The schema of a source table (its rows are not read).
    pub fn source_schema(&self, source: &str) -> Result<arrow::datatypes::SchemaRef> {
        let g = self.read_inner()?;
        let src = g.source(source)?;
        Ok(src.schema.clone())
    }

    /// Adds `columns` (nullable) at the end of source table `source` (one commit `ADD
    /// COLUMNS`): rows written before read them NULL. A name it has already is refused.
    pub fn add_source_columns(
        &self,
        source: &str,
        columns: &[arrow::datatypes::FieldRef],
    ) -> Result<()> {
        let mut g = self.write_inner()?;
        let inner = &mut *g;
        let src = inner
            .sources
            .get_mut(source)
            .ok_or_else(|| Error::NotFound {
                kind: "source table",
                name: source.to_string(),
            })?;
        let added = SourceTable::columns_of(&arrow::datatypes::Schema::new(columns.to_vec()))?;
        if let Some(c) = added.iter().find(|c| {
            src.columns
                .iter()
                .any(|o| o.name.eq_ignore_ascii_case(&c.name))
        }) {
            return Err(Error::AlreadyExists {
                kind: "column",
                name: c.name.clone(),
            });
        }
        let mut rec = src.record();
        rec.columns.extend(added.iter().cloned());
        let last = src.history.last();
        let prev = last.and_then(|c| c.chain.clone());
        let mut commit = CommitInfo::bare(
            last.map_or(0, |c| c.version + 1),
            now_us().max(last.map_or(0, |c| c.timestamp_us + 1)),
            ADD_COLUMNS,
            BTreeMap::from([(
                "columns".to_string(),
                added
                    .iter()
                    .map(|c| c.name.clone())
                    .collect::<Vec<_>>()
                    .join(","),
            )]),
        );
        let mut b = WriteBatch::default();
        put_json(&mut b, key(keys::SOURCE, src.id, None, None), &rec)?;
        let at = Link {
            tag: keys::SOURCE_COMMIT,
            id: src.id,
            prev: prev.as_deref(),
            wrote: Wrote::Nothing,
        };
        put_commit(&mut b, at, &mut commit)?;
        write_or_poison(inner.kv.as_ref(), &mut inner.poisoned, b)?;
        let src = inner.sources.get_mut(source).expect("checked");
        let mut widened = SourceTable::from_record(src.id, rec);
        widened.history = src.history.clone();
        widened.history.push(commit);
        widened.rows = src.rows;
        widened.appends = src.appends;
        widened.loaded = std::mem::take(&mut src.loaded);
        widened.erased = std::mem::take(&mut src.erased);
        widened.deleted = std::mem::take(&mut src.deleted);
        widened.changed = std::mem::take(&mut src.changed);
        *src = widened;
        Ok(())
    }

    /// The generated columns of a source table ([`SourceWrite::set_generated`]).
    pub fn source_generated(&self, source: &str) -> Result<Vec<crate::generated::GeneratedColumn>> {
        Ok(self.read_inner()?.source(source)?.generated.clone())
    }

    /// The latest commit version of a source table (without reading its rows); `None` for a
    /// table whose history is not whole (written, or partly written, before source tables had
    /// commit records: its versions do not name its rows).
    pub fn source_latest_version(&self, source: &str) -> Result<Option<u64>> {
        let g = self.read_inner()?;
        let src = g.source(source)?;
        let whole = src.history.first().is_some_and(|c| c.version == 0);
        Ok(src.history.last().filter(|_| whole).map(|c| c.version))
    }

    /// The commits of a source table (`CREATE TABLE`, then one `WRITE` per append, with the rows
    /// written as `num_upserted_rows`).
    pub fn source_history(&self, source: &str) -> Result<Vec<CommitInfo>> {
        let g = self.read_inner()?;
        let src = g.sources.get(source).ok_or_else(|| Error::NotFound {
            kind: "table",
            name: source.to_string(),
        })?;
        Ok(src.history.clone())
    }

    /// Names of the source tables.
    pub fn sources(&self) -> Result<Vec<String>> {
        Ok(self.read_inner()?.sources.keys().cloned().collect())
    }
}

impl super::Inner {
    /// The source table `name`.
    pub(super) fn source(&self, name: &str) -> Result<&SourceTable> {
        self.sources.get(name).ok_or_else(|| Error::NotFound {
            kind: "source table",
            name: name.to_string(),
        })
    }
}

/// The flows (AUTO CDC and append) that have read one of the rows at `positions` of `source`:
/// those whose checkpoint is past one of them.
fn flows_that_read(inner: &super::Inner, source: &str, positions: &[u64]) -> Vec<String> {
    let Some(&first) = positions.first() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for t in inner.tables.values() {
        for f in &t.flows {
            if f.spec.source_table.as_deref() == Some(source)
                && t.checkpoint(&f.spec.name).is_some_and(|c| c > first)
            {
                out.push(f.spec.name.clone());
            }
        }
    }
    for s in inner.sources.values() {
        for f in &s.append_flows {
            if f.source != source || f.reads != crate::source::StreamRead::Rows {
                continue;
            }
            let key = super::append_flows::append_offset_parameter(&f.name);
            let checkpoint = s
                .history
                .iter()
                .rev()
                .find_map(|c| c.parameters.get(&key).and_then(|v| v.parse::<u64>().ok()));
            if checkpoint.is_some_and(|c| c > first) {
                out.push(f.name.clone());
            }
        }
    }
    out.sort();
    out
}
