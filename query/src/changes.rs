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
use window_sort::{Draining, WindowSort};

mod window_sort;
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
    // A table that is not in memory is read a span of its keys at a time: a window of small
    // commits in one pass over the keys, a larger commit in one pass (two when its changes other
    // than deletes are more than a window's). A table in memory is read from memory.
    if let Some(mut first) = store.key_span(
        table,
        (Bound::Unbounded, Bound::Unbounded),
        1,
        Caching::Pass,
    )? {
        let read = store.read_span(&mut first, |r| {
            let (from, to) = commit_range(r, table, start, end)?;
            let sizes = listed_sizes(r, from, to);
            Ok::<_, QueryError>((from, to, sizes, r.schema().clone(), r.generation()))
        })??;
        let (from, to, sizes, schema, generation) = read;
        let keys = store.key_count(table)?.unwrap_or(0);
        let spans = Spans {
            at: SpanCursor::first(from),
            keys,
            sizes,
        };
        let feed = ChangeFeed::new(
            store,
            table,
            &schema,
            (from, to),
            generation,
            Reading::Spans(spans),
        );
        return Ok(feed.with_window_rows(CHANGE_WINDOW_ROWS));
    }
    let (from, to, sizes, schema, generation) = store.read(table, |r| {
        let (from, to) = commit_range(r, table, start, end)?;
        let sizes = commit_sizes(r, from, to)?;
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
fn commit_sizes(
    r: &asof_storage::TableReader<'_>,
    from: u64,
    to: u64,
) -> Result<BTreeMap<u64, u64>> {
    commits_in(r, from, to)
        .map(|v| Ok((v, r.changed_row_versions(v)?)))
        .collect()
}

/// How many rows the change feed lists of each commit `from..=to`, as its record counts them
/// (the table need not be in memory): what a window of commits read by spans is cut by.
fn listed_sizes(r: &asof_storage::TableReader<'_>, from: u64, to: u64) -> BTreeMap<u64, u64> {
    (r.history().iter())
        .filter(|c| (from..=to).contains(&c.version))
        .map(|c| {
            let m = &c.metrics;
            (c.version, m.num_upserted_rows + m.num_deleted_rows)
        })
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
    /// Read by spans: the sort that holds the changes of a window of small commits until its
    /// last span.
    window: Option<WindowSort>,
    /// A window's changes, read back in order.
    draining: Option<Draining>,
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
    /// A table not in memory, a span of keys at a time ([`Store::key_span`]).
    Spans(Spans),
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

/// A change feed of a table not in memory, read a span of keys at a time. A commit larger than a
/// window is read alone: its deletes over all the spans, then its other changes, which is the
/// commit's order (`TableReader::span_changes`). Smaller commits are read a window at a time in
/// one pass over the spans (`TableReader::span_changes_of`), every change held in an external
/// sort (a temporary file past its budget) until the last span, then listed commit by commit:
/// each pass reads every page that may hold a change of the window, so a window is
/// [`SPAN_WINDOW_FACTOR`] times larger than one held in memory.
struct Spans {
    at: SpanCursor,
    /// How many keys the table has.
    keys: u64,
    /// How many rows the records say each commit lists: what windows are cut by.
    sizes: BTreeMap<u64, u64>,
}

impl Spans {
    /// The window of commits that starts at `from`: as many as fit in `rows` listed rows (at
    /// least one), up to `to`.
    fn window(&self, from: u64, to: u64, rows: u64) -> SpanCursor {
        let size = |v: u64| self.sizes.get(&v).copied().unwrap_or(0);
        let (mut last, mut held) = (from, size(from));
        while last < to && held.saturating_add(size(last + 1)) <= rows {
            held += size(last + 1);
            last += 1;
        }
        SpanCursor {
            last,
            rows: held,
            ..SpanCursor::first(from)
        }
    }

    /// The windows from `from` to `to`, and how many passes over the keys each takes (at most).
    fn passes(&self, from: u64, to: u64, rows: u64) -> u64 {
        let mut passes = 0;
        let mut at = from;
        while at <= to {
            let w = self.window(at, to, rows);
            passes += if w.last == at { 2 } else { 1 };
            at = w.last + 1;
        }
        passes
    }
}

/// Where a change feed read by spans of keys is.
#[derive(Clone)]
struct SpanCursor {
    /// The first commit of the window read.
    version: u64,
    /// Its last: the same commit, or a window of small ones (read in one pass, `All`).
    last: u64,
    /// How many rows the records say the window lists.
    rows: u64,
    pass: ChangePass,
    /// The last key read in this pass.
    after: Option<Vec<u8>>,
}

impl SpanCursor {
    /// The start of commit `version`, read alone.
    fn first(version: u64) -> SpanCursor {
        SpanCursor {
            version,
            last: version,
            rows: 0,
            pass: ChangePass::Deletes,
            after: None,
        }
    }
}

/// How many times larger than a window held in memory a window of small commits read by spans
/// is: its changes go to an external sort.
const SPAN_WINDOW_FACTOR: u64 = 16;

/// About how many changed rows a span of a window of small commits holds while its changes are
/// listed: what its number of keys is cut by.
const SPAN_HELD_ROWS: u64 = 65_536;

/// How many keys a change feed read by spans reads at a time: their rows that a commit wrote or
/// retired are held until the span's changes are listed.
const SPAN_FEED_KEYS: usize = 64;

/// The most keys a span of a window of small commits reads at a time: larger spans make fewer,
/// larger batches.
const WINDOW_FEED_KEYS: u64 = 1024;

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
            window: None,
            draining: None,
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
            Reading::Spans(spans) => {
                let passes = spans.passes(self.next, self.to, self.span_window_rows());
                (passes * spans.keys, 2 * SPAN_FEED_KEYS as u64 + 1)
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
        let (to, rows) = (self.to, self.span_window_rows());
        if let Reading::Spans(spans) = &mut self.reading {
            if spans.at.after.is_none() && spans.at.pass == ChangePass::Deletes {
                spans.at = spans.window(spans.at.version, to, rows);
            }
        }
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
        if let Reading::Spans(spans) = &self.reading {
            let at = spans.at.clone();
            if at.last > at.version {
                return self.read_window_span(at);
            }
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
            Reading::Spans(..) | Reading::Done => 0,
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
                self.read(|r, _| Ok((r.change_groups(v, window)?, commit_sizes(r, v + 1, to)?)))?;
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
                self.held = Held::none();
                self.next_window(at.last)
            }
        };
        match (next, &mut self.reading) {
            (Some(next), Reading::Spans(spans)) => spans.at = next,
            _ => {
                self.next = self.to + 1;
                self.reading = Reading::Done;
            }
        }
        self.pending.extend(batches);
        self.done(held_others, counted);
        Ok(())
    }

    /// Where the window after commit `last` starts, if the feed reads one.
    fn next_window(&self, last: u64) -> Option<SpanCursor> {
        match &self.reading {
            Reading::Spans(spans) if last < self.to => {
                Some(spans.window(last + 1, self.to, self.span_window_rows()))
            }
            _ => None,
        }
    }

    /// How many changed rows a window of small commits read by spans lists, about.
    fn span_window_rows(&self) -> u64 {
        self.window_rows.saturating_mul(SPAN_WINDOW_FACTOR)
    }

    /// Reads the changes of the span of keys after `at` for a window of small commits
    /// (`at.version..=at.last`) into the window's sort; after the last span, lists the window's
    /// changes commit by commit, each commit's deletes first.
    fn read_window_span(&mut self, at: SpanCursor) -> Result<()> {
        let lo = at
            .after
            .as_deref()
            .map_or(Bound::Unbounded, Bound::Excluded);
        let keys = match &self.reading {
            Reading::Spans(spans) => spans.keys.max(1),
            _ => 1,
        };
        // About SPAN_HELD_ROWS changed rows per span, as the records spread them over the keys.
        let per_key = at.rows.div_ceil(keys).max(1);
        let span_keys = (SPAN_HELD_ROWS / per_key).clamp(1, WINDOW_FEED_KEYS);
        let span_keys = span_keys.min(self.window_rows) as usize;
        let Some(mut span) = self.store.key_span(
            &self.table,
            (lo, Bound::Unbounded),
            span_keys,
            Caching::Pass,
        )?
        else {
            // The table came into memory under the feed: the window, of which nothing was
            // listed yet, and the rest are read from it.
            let (v, to) = (at.version, self.to);
            let sizes = self.read(|r, _| commit_sizes(r, v, to))?;
            self.reading = Reading::Windows(sizes);
            self.next = v;
            self.progress = None;
            self.window = None;
            return Ok(());
        };
        let (table, generation, out) = (&self.table, self.generation, &self.out);
        let listed = self.store.read_span(&mut span, |r| {
            if r.generation() != generation {
                return Err(rewritten(table));
            }
            window_changes_batches(r, out, |f| {
                r.span_changes_of(at.version..=at.last, ChangePass::All, f)
            })
        })??;
        let sort = self.window.get_or_insert_with(WindowSort::new);
        for (version, (deletes, others)) in listed {
            sort.push(version, ChangePass::Deletes, &deletes)?;
            sort.push(version, ChangePass::Others, &others)?;
        }
        let counted = span.keys() as u64;
        if let Some(last) = span.last_key() {
            if let Reading::Spans(spans) = &mut self.reading {
                spans.at = SpanCursor {
                    after: Some(last.to_vec()),
                    ..at
                };
            }
            self.done(Vec::new(), counted);
            return Ok(());
        }
        if let Some(sort) = self.window.take() {
            self.draining = Some(sort.finish()?);
        }
        match self.next_window(at.last) {
            Some(next) => {
                if let Reading::Spans(spans) = &mut self.reading {
                    spans.at = next;
                }
            }
            None => {
                self.next = self.to + 1;
                self.reading = Reading::Done;
            }
        }
        self.done(Vec::new(), counted);
        Ok(())
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
        while self.pending.is_empty() && !self.failed {
            let read = match &mut self.draining {
                Some(d) => match d.next_batch(&self.out, ChangeBatches::BATCH) {
                    Ok(Some(b)) => {
                        self.pending.push_back(b);
                        Ok(())
                    }
                    Ok(None) => {
                        self.draining = None;
                        Ok(())
                    }
                    Err(e) => Err(e),
                },
                None if self.next <= self.to || !self.steps.is_empty() => self.read_window(),
                None => break,
            };
            if let Err(e) = read {
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

/// A window's changes that `list` calls its function with (`TableReader::span_changes_of`), as
/// batches of schema `out`: each commit's deletes, and its other changes.
type WindowBatches = BTreeMap<u64, (Vec<RecordBatch>, Vec<RecordBatch>)>;

fn window_changes_batches(
    r: &asof_storage::TableReader<'_>,
    out: &SchemaRef,
    list: impl FnOnce(&mut dyn FnMut(u64, ChangeType, RowView<'_>)) -> asof_storage::Result<()>,
) -> Result<WindowBatches> {
    let mut commits: BTreeMap<u64, (ChangeBatches, ChangeBatches)> = BTreeMap::new();
    list(&mut |v, kind, row| {
        let (deletes, others) = commits.entry(v).or_insert_with(|| {
            (
                ChangeBatches::sized(r, out, 256),
                ChangeBatches::sized(r, out, 256),
            )
        });
        match kind {
            ChangeType::Delete => deletes.push(v, kind, &row),
            _ => others.push(v, kind, &row),
        }
    })?;
    (commits.into_iter())
        .map(|(v, (deletes, others))| Ok((v, (deletes.finish()?, others.finish()?))))
        .collect()
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
        Self::sized(r, out, Self::BATCH)
    }

    /// Batches whose builders start with room for `capacity` rows (a span of a window lists a
    /// few rows of each commit).
    fn sized(r: &'a asof_storage::TableReader<'t>, out: &SchemaRef, capacity: usize) -> Self {
        let schema = r.schema();
        let columns: Vec<usize> = (0..table_arrow_schema(schema).fields().len()).collect();
        ChangeBatches {
            r,
            out: out.clone(),
            cols: make_cols(schema, &columns, capacity, &Clamps::default()),
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
