//! The change data feed of a table (docs/SEMANTICS.md §7.3): `table_changes` read whole, or
//! `change_feed`, a window of commits at a time.

use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Builder, StringBuilder, TimestampMicrosecondBuilder};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use asof_storage::{Caching, ChangePass, ChangeType, KeyGroup, RowView, Store};

use crate::arrow_conv::table_arrow_schema;
use crate::error::{QueryError, Result};
use crate::scan::{make_cols, Clamps, Col};

/// Where a change feed starts or ends: a commit version, or a time (µs since the epoch, UTC).
#[derive(Clone, Debug, PartialEq)]
pub enum ChangeBound {
    /// A commit version.
    Version(u64),
    /// A commit time: from the first commit at or after it; up to the last commit at or before it.
    Timestamp(i64),
}

/// The change data feed of `table` between two commits, both included (docs/SEMANTICS.md §7): the changed
/// rows with `_change_type` (`insert`, `delete`, `update_preimage`, `update_postimage`),
/// `_commit_version` and `_commit_timestamp`. `end = None` means the latest commit. Read into
/// memory whole: [`change_feed`] streams it.
pub fn table_changes(
    store: &Store,
    table: &str,
    start: &ChangeBound,
    end: Option<&ChangeBound>,
) -> Result<(SchemaRef, Vec<RecordBatch>)> {
    let feed = change_feed(store, table, start, end)?;
    let schema = feed.schema();
    Ok((schema, feed.collect::<Result<_>>()?))
}

/// [`table_changes`], read a few commits at a time: the commits between `start` and `end` are
/// fixed when it is made, and each window of commits (about [`CHANGE_WINDOW_ROWS`] changed rows,
/// at least one commit) is read under one short read of the table.
pub fn change_feed(
    store: &Store,
    table: &str,
    start: &ChangeBound,
    end: Option<&ChangeBound>,
) -> Result<ChangeFeed> {
    // A table that is not in memory is read a span of its keys at a time, for a few commits
    // (each commit one pass over the keys, two when its changes other than deletes are more than
    // a window's); anything else from the table in memory.
    if let Some(mut first) = store.key_span(
        table,
        (Bound::Unbounded, Bound::Unbounded),
        1,
        Caching::Pass,
    )? {
        let read = store.read_span(&mut first, |r| {
            let (from, to) = commit_range(r, table, start, end)?;
            let commits = commits_in(r, from, to).count();
            Ok::<_, QueryError>((from, to, commits, r.schema().clone(), r.generation()))
        })??;
        let (from, to, commits, schema, generation) = read;
        if commits <= SPAN_FEED_COMMITS {
            let keys = store.key_count(table)?.unwrap_or(0);
            let reading = Reading::Spans {
                at: SpanCursor {
                    version: from,
                    pass: ChangePass::Deletes,
                    after: None,
                },
                keys,
            };
            return Ok(ChangeFeed::new(
                store,
                table,
                &schema,
                (from, to),
                generation,
                reading,
            ));
        }
    }
    let (from, to, sizes, schema, generation) = store.read(table, |r| {
        let (from, to) = commit_range(r, table, start, end)?;
        let sizes = commit_sizes(r, from, to);
        Ok::<_, QueryError>((from, to, sizes, r.schema().clone(), r.generation()))
    })??;
    Ok(ChangeFeed::new(
        store,
        table,
        &schema,
        (from, to),
        generation,
        Reading::Windows(sizes),
    ))
}

/// The commits `start..=end` of the table `r` reads, as versions; a reversed range, or one past
/// the last commit, is refused (a vacuumed start when its changes are read).
fn commit_range(
    r: &asof_storage::TableReader<'_>,
    table: &str,
    start: &ChangeBound,
    end: Option<&ChangeBound>,
) -> Result<(u64, u64)> {
    let history = r.history();
    let from = match start {
        ChangeBound::Version(v) => *v,
        ChangeBound::Timestamp(t) => match history.iter().find(|c| c.timestamp_us >= *t) {
            Some(c) => c.version,
            None => {
                return Err(QueryError::Invalid(format!(
                    "`{table}` has no commit at or after the start of the change feed"
                )))
            }
        },
    };
    let to = match end {
        None => r.latest_version(),
        Some(ChangeBound::Version(v)) => *v,
        Some(ChangeBound::Timestamp(t)) => {
            match history.iter().rev().find(|c| c.timestamp_us <= *t) {
                Some(c) => c.version,
                None => {
                    return Err(QueryError::Invalid(format!(
                        "`{table}` has no commit at or before the end of the change feed"
                    )))
                }
            }
        }
    };
    if from > to || to > r.latest_version() {
        r.check_change_range(from, to)?;
    }
    Ok((from, to))
}

/// How many row versions each commit `from..=to` of the table `r` reads wrote or retired: what
/// reading its changes reads.
fn commit_sizes(r: &asof_storage::TableReader<'_>, from: u64, to: u64) -> BTreeMap<u64, u64> {
    commits_in(r, from, to)
        .map(|v| (v, r.changed_row_versions(v)))
        .collect()
}

/// The versions of the commits `from..=to` the table `r` reads has kept.
fn commits_in<'r>(
    r: &'r asof_storage::TableReader<'_>,
    from: u64,
    to: u64,
) -> impl Iterator<Item = u64> + 'r {
    (r.history().iter())
        .map(|c| c.version)
        .filter(move |v| (from..=to).contains(v))
}

/// About how many changed rows [`ChangeFeed`] reads at a time.
pub const CHANGE_WINDOW_ROWS: u64 = 262_144;

/// A change feed read a window of commits at a time, or a span of keys at a time ([`change_feed`]).
pub struct ChangeFeed {
    store: Store,
    table: String,
    out: SchemaRef,
    /// The first commit not read yet.
    next: u64,
    to: u64,
    /// How it reads the table.
    reading: Reading,
    /// The rows it reads: every window must read the same.
    generation: asof_storage::TableGeneration,
    /// About how many changed rows a window holds.
    window_rows: u64,
    /// Read by spans: the other changes of the commit whose deletes are being read, held until
    /// its last span, so that the commit is read in one pass over its keys, not two.
    held: Held,
    /// What is left of a commit larger than a window, read a group of its keys at a time: each
    /// group's deletes, then each group's other changes, with about how many rows each step
    /// reads (for the progress report).
    steps: VecDeque<(u64, KeyGroup, ChangePass, u64)>,
    pending: VecDeque<RecordBatch>,
    failed: bool,
    /// Where a feed longer than one window reports how far it is: the rows (or, read by spans,
    /// the keys) read so far, of about how many.
    progress: Option<(asof_storage::Reporter, u64, u64)>,
}

/// How a [`ChangeFeed`] reads its table.
enum Reading {
    /// From the table in memory, windows of commits of about `window_rows` changed rows; the
    /// map holds how many row versions each commit in the range wrote or retired.
    Windows(BTreeMap<u64, u64>),
    /// A table not in memory, a span of keys at a time ([`Store::key_span`]): each commit's
    /// deletes over all the spans, then its other changes, which is the commit's order
    /// (`TableReader::span_changes`). `keys` is how many keys the table has.
    Spans { at: SpanCursor, keys: u64 },
    /// Every span of every commit read.
    Done,
}

/// The changes other than deletes a commit read by spans listed in its pass of deletes
/// ([`ChangeFeed::read_span`]).
enum Held {
    /// These batches, of this many rows: listed after the commit's last delete.
    Rows(Vec<RecordBatch>, u64),
    /// More than a window's rows: dropped, and read in a second pass over the keys.
    Overflowed,
}

impl Held {
    fn none() -> Held {
        Held::Rows(Vec::new(), 0)
    }
}

/// Where a change feed read by spans of keys is.
#[derive(Clone)]
struct SpanCursor {
    version: u64,
    pass: ChangePass,
    /// The last key read in this pass.
    after: Option<Vec<u8>>,
}

/// The most commits a change feed of a table that is not in memory reads span by span: each
/// commit reads the table's heads (and the pages that hold its changes) once, or twice when its
/// changes other than deletes are more than a window's rows and cannot be held until its last
/// delete; a feed of more commits reads the table into memory instead.
const SPAN_FEED_COMMITS: usize = 4;

/// How many keys a change feed read by spans reads at a time: their rows that a commit wrote or
/// retired are held until the span's changes are listed.
const SPAN_FEED_KEYS: usize = 64;

impl ChangeFeed {
    fn new(
        store: &Store,
        table: &str,
        schema: &asof_storage::TableSchema,
        (from, to): (u64, u64),
        generation: asof_storage::TableGeneration,
        reading: Reading,
    ) -> ChangeFeed {
        let full = table_arrow_schema(schema);
        let mut fields: Vec<arrow::datatypes::FieldRef> = full.fields().iter().cloned().collect();
        fields.push(Arc::new(Field::new("_change_type", DataType::Utf8, false)));
        fields.push(Arc::new(Field::new(
            "_commit_version",
            DataType::Int64,
            false,
        )));
        fields.push(Arc::new(Field::new(
            "_commit_timestamp",
            DataType::Timestamp(arrow::datatypes::TimeUnit::Microsecond, Some("UTC".into())),
            false,
        )));
        ChangeFeed {
            store: store.clone(),
            table: table.to_string(),
            out: Arc::new(Schema::new(fields)),
            next: from,
            to,
            reading,
            generation,
            window_rows: CHANGE_WINDOW_ROWS,
            held: Held::none(),
            steps: VecDeque::new(),
            pending: VecDeque::new(),
            failed: false,
            progress: None,
        }
    }

    /// The feed, reporting to `progress` as it reads, if it is longer than one window (or, read
    /// by spans, than two spans).
    pub fn with_progress(mut self, progress: Arc<dyn asof_storage::Progress>) -> ChangeFeed {
        let task = format!("reading the change feed of {}", self.table);
        let (total, least) = match &self.reading {
            Reading::Windows(sizes) => (sizes.values().sum(), CHANGE_WINDOW_ROWS + 1),
            Reading::Spans { keys, .. } => {
                let passes = 2 * (self.to + 1).saturating_sub(self.next);
                (passes * keys, 2 * SPAN_FEED_KEYS as u64 + 1)
            }
            Reading::Done => (0, 1),
        };
        let report = asof_storage::Reporter::begin(Some(&progress), &task, total, least);
        self.progress = Some((report, 0, total));
        self
    }

    /// The feed, reading about `rows` changed rows at a time instead of [`CHANGE_WINDOW_ROWS`]
    /// (at least one commit, or one key of a larger commit; read by spans, as many keys as
    /// `rows`, up to the span's usual size); it lists the same rows in the same order.
    pub fn with_window_rows(mut self, rows: u64) -> ChangeFeed {
        self.window_rows = rows.max(1);
        self
    }

    /// The schema of its batches: the table's columns, then `_change_type`, `_commit_version`,
    /// `_commit_timestamp`.
    pub fn schema(&self) -> SchemaRef {
        self.out.clone()
    }

    /// The commits it reads, `(first, last)`, both included.
    pub fn commits(&self) -> (u64, u64) {
        (self.next, self.to)
    }

    /// Reads the next window of commits, or the next step of a commit larger than a window,
    /// into `pending`.
    fn read_window(&mut self) -> Result<()> {
        if let Reading::Spans { at, .. } = &self.reading {
            let at = at.clone();
            return self.read_span(at);
        }
        if let Some((version, group, pass, rows)) = self.steps.pop_front() {
            let batches = self.read(|r, out| {
                changes_batches(r, out, |f| r.group_changes(version, &group, pass, f))
            })?;
            self.done(batches, rows);
            return Ok(());
        }
        let from = self.next;
        let size = self.size_of(from);
        if size > self.window_rows {
            let window = self.window_rows;
            let groups = self.read(|r, _| Ok(r.change_groups(from, window)?))?;
            if groups.len() > 1 {
                // Each group's rows are reported half after its deletes, half after the rest.
                for pass in [ChangePass::Deletes, ChangePass::Others] {
                    let steps = groups.iter().map(|g| {
                        let half = g.rows() / 2;
                        let rows = match pass {
                            ChangePass::Deletes => half,
                            _ => g.rows() - half,
                        };
                        (from, g.clone(), pass, rows)
                    });
                    self.steps.extend(steps);
                }
                self.next = from + 1;
                return self.read_window();
            }
        }
        let mut to = from;
        let mut rows = size;
        while to < self.to {
            let more = self.size_of(to + 1);
            if rows + more > self.window_rows {
                break;
            }
            rows += more;
            to += 1;
        }
        let batches = self.read(|r, out| changes_batches(r, out, |f| r.changes(from, to, f)))?;
        self.next = to + 1;
        self.done(batches, rows);
        Ok(())
    }

    /// How many row versions commit `version` wrote or retired (0 if not known).
    fn size_of(&self, version: u64) -> u64 {
        match &self.reading {
            Reading::Windows(sizes) => sizes.get(&version).copied().unwrap_or(0),
            Reading::Spans { .. } | Reading::Done => 0,
        }
    }

    /// Reads the changes of the span of keys after `at` into `pending`, and moves on to the next
    /// span, the next pass or the next commit.
    fn read_span(&mut self, at: SpanCursor) -> Result<()> {
        let lo = at
            .after
            .as_deref()
            .map_or(Bound::Unbounded, Bound::Excluded);
        let keys = (self.window_rows as usize).min(SPAN_FEED_KEYS);
        let Some(mut span) =
            self.store
                .key_span(&self.table, (lo, Bound::Unbounded), keys, Caching::Pass)?
        else {
            // The table came into memory under the feed (another reader loaded it, or a commit
            // made its records stale): the rest is read from it, the rest of this commit a group
            // of keys at a time. Its progress is no longer counted in keys: the report ends.
            let (v, window, to) = (at.version, self.window_rows, self.to);
            let (groups, sizes) =
                self.read(|r, _| Ok((r.change_groups(v, window)?, commit_sizes(r, v + 1, to))))?;
            let rest = groups
                .iter()
                .filter_map(|g| at.after.as_deref().map_or(Some(g.clone()), |k| g.after(k)));
            self.steps.extend(rest.map(|g| (v, g, at.pass, 0)));
            if at.pass == ChangePass::Deletes {
                let others = groups.into_iter().map(|g| (v, g, ChangePass::Others, 0));
                self.steps.extend(others);
            }
            self.reading = Reading::Windows(sizes);
            self.next = v + 1;
            self.progress = None;
            // The steps list every group's other changes again.
            self.held = Held::none();
            return Ok(());
        };
        let (table, generation, out) = (&self.table, self.generation, &self.out);
        // In the pass of deletes, the span's other changes are listed too and held, unless the
        // commit's held ones outgrew a window already.
        let hold = at.pass == ChangePass::Deletes && matches!(self.held, Held::Rows(..));
        let (batches, others) = self.store.read_span(&mut span, |r| {
            if r.generation() != generation {
                return Err(rewritten(table));
            }
            match hold {
                true => split_changes_batches(r, out, |f| {
                    r.span_changes(at.version, ChangePass::All, f)
                })
                .map(|(deletes, others)| (deletes, Some(others))),
                false => changes_batches(r, out, |f| r.span_changes(at.version, at.pass, f))
                    .map(|b| (b, None)),
            }
        })??;
        if let (Some(others), Held::Rows(held, rows)) = (others, &mut self.held) {
            *rows += others.iter().map(|b| b.num_rows() as u64).sum::<u64>();
            held.extend(others);
            if *rows > self.window_rows {
                self.held = Held::Overflowed;
            }
        }
        // A span read in one pass counts for both.
        let counted = span.keys() as u64 * if hold { 2 } else { 1 };
        // After the commit's last span of deletes come its other changes: held, they follow,
        // and the pass over the others is not needed.
        let mut held_others = Vec::new();
        let next = match span.last_key() {
            Some(last) => Some(SpanCursor {
                after: Some(last.to_vec()),
                ..at
            }),
            None if at.pass == ChangePass::Deletes && matches!(self.held, Held::Overflowed) => {
                Some(SpanCursor {
                    pass: ChangePass::Others,
                    after: None,
                    ..at
                })
            }
            None => {
                if let (ChangePass::Deletes, Held::Rows(held, _)) = (at.pass, &mut self.held) {
                    held_others = std::mem::take(held);
                }
                self.next_commit(at.version)
            }
        };
        match (next, &mut self.reading) {
            (Some(next), Reading::Spans { at, .. }) => *at = next,
            _ => {
                self.next = self.to + 1;
                self.reading = Reading::Done;
            }
        }
        self.pending.extend(batches);
        self.done(held_others, counted);
        Ok(())
    }

    /// Where the commit after `version` starts, if the feed reads it; its held changes start
    /// afresh.
    fn next_commit(&mut self, version: u64) -> Option<SpanCursor> {
        self.held = Held::none();
        (version < self.to).then_some(SpanCursor {
            version: version + 1,
            pass: ChangePass::Deletes,
            after: None,
        })
    }

    /// What `read` gives under one short read of the table, checked to be of the rows the feed
    /// started on.
    fn read<T>(
        &self,
        read: impl FnOnce(&asof_storage::TableReader<'_>, &SchemaRef) -> Result<T>,
    ) -> Result<T> {
        let (table, generation) = (&self.table, self.generation);
        self.store.read(table, |r| {
            // ERASE, VACUUM, a widening or a new table of the name would mix two tables' rows.
            if r.generation() != generation {
                return Err(rewritten(table));
            }
            read(r, &self.out)
        })?
    }

    /// Takes the batches of a window or step of about `rows` rows, and reports them.
    fn done(&mut self, batches: Vec<RecordBatch>, rows: u64) {
        self.pending.extend(batches);
        if let Some((report, done, total)) = &mut self.progress {
            // A commit read by spans whose held changes outgrew a window reads its spans again
            // (each first counted for both passes): what is done never passes the total.
            *done = (*done + rows).min(*total);
            report.advance(*done);
        }
        if self.next > self.to && self.steps.is_empty() {
            self.progress = None; // ends the report
        }
    }
}

impl Iterator for ChangeFeed {
    type Item = Result<RecordBatch>;

    fn next(&mut self) -> Option<Result<RecordBatch>> {
        while self.pending.is_empty()
            && (self.next <= self.to || !self.steps.is_empty())
            && !self.failed
        {
            if let Err(e) = self.read_window() {
                self.failed = true;
                return Some(Err(e));
            }
        }
        self.pending.pop_front().map(Ok)
    }
}

/// The error of a change feed whose table was rewritten under it.
fn rewritten(table: &str) -> QueryError {
    QueryError::Invalid(format!(
        "`{table}` was rewritten (ERASE, VACUUM, new columns) or made again while its change feed was read; run the statement again"
    ))
}

/// The changes `list` calls its function with (`TableReader::changes` or
/// `TableReader::group_changes` of the table `r` reads), as batches of schema `out`.
fn changes_batches(
    r: &asof_storage::TableReader<'_>,
    out: &SchemaRef,
    list: impl FnOnce(&mut dyn FnMut(u64, ChangeType, RowView<'_>)) -> asof_storage::Result<()>,
) -> Result<Vec<RecordBatch>> {
    let mut batches = ChangeBatches::new(r, out);
    list(&mut |v, kind, row| batches.push(v, kind, &row))?;
    batches.finish()
}

/// The same, the deletes in one list of batches and the other changes in another (for
/// `ChangePass::All`).
fn split_changes_batches(
    r: &asof_storage::TableReader<'_>,
    out: &SchemaRef,
    list: impl FnOnce(&mut dyn FnMut(u64, ChangeType, RowView<'_>)) -> asof_storage::Result<()>,
) -> Result<(Vec<RecordBatch>, Vec<RecordBatch>)> {
    let (mut deletes, mut others) = (ChangeBatches::new(r, out), ChangeBatches::new(r, out));
    list(&mut |v, kind, row| match kind {
        ChangeType::Delete => deletes.push(v, kind, &row),
        _ => others.push(v, kind, &row),
    })?;
    Ok((deletes.finish()?, others.finish()?))
}

/// Changed rows on their way into batches of a change feed's schema.
struct ChangeBatches<'a, 't> {
    r: &'a asof_storage::TableReader<'t>,
    out: SchemaRef,
    cols: Vec<Col>,
    kinds: StringBuilder,
    versions: Int64Builder,
    stamps: TimestampMicrosecondBuilder,
    /// Rows appended since the last batch.
    rows: usize,
    batches: Vec<RecordBatch>,
    /// The first error, after which rows are ignored.
    failed: Option<QueryError>,
}

impl<'a, 't> ChangeBatches<'a, 't> {
    const BATCH: usize = 8192;

    fn new(r: &'a asof_storage::TableReader<'t>, out: &SchemaRef) -> Self {
        let schema = r.schema();
        let columns: Vec<usize> = (0..table_arrow_schema(schema).fields().len()).collect();
        ChangeBatches {
            r,
            out: out.clone(),
            cols: make_cols(schema, &columns, Self::BATCH, &Clamps::default()),
            kinds: StringBuilder::new(),
            versions: Int64Builder::new(),
            stamps: TimestampMicrosecondBuilder::new(),
            rows: 0,
            batches: Vec::new(),
            failed: None,
        }
    }

    fn push(&mut self, v: u64, kind: ChangeType, row: &RowView<'_>) {
        if self.failed.is_some() {
            return;
        }
        for c in self.cols.iter_mut() {
            if let Err(e) = c.append(row) {
                self.failed = Some(e);
                return;
            }
        }
        self.kinds.append_value(kind.as_str());
        self.versions.append_value(v as i64);
        self.stamps
            .append_value(self.r.commit(v).map_or(0, |c| c.timestamp_us));
        self.rows += 1;
        if self.rows == Self::BATCH {
            if let Err(e) = self.flush() {
                self.failed = Some(e);
            }
        }
    }

    fn flush(&mut self) -> Result<()> {
        let mut arrays = self
            .cols
            .iter_mut()
            .map(Col::finish)
            .collect::<Result<Vec<ArrayRef>>>()?;
        arrays.push(Arc::new(self.kinds.finish()));
        arrays.push(Arc::new(self.versions.finish()));
        arrays.push(Arc::new(self.stamps.finish().with_timezone("UTC")));
        self.batches
            .push(RecordBatch::try_new(self.out.clone(), arrays)?);
        self.rows = 0;
        Ok(())
    }

    fn finish(mut self) -> Result<Vec<RecordBatch>> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        if self.rows > 0 {
            self.flush()?;
        }
        Ok(self.batches)
    }
}
