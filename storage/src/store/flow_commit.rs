//! The commit of a flow: source rows checked, turned into events, applied to the table's state
//! and written as one commit (docs/FORMAT.md §7.1).
//!
//! A commit of more source rows than [`super::StoreOptions::commit_part_rows`] is applied in
//! parts, so that neither its events nor the rows they write are ever all in memory: its events
//! are parted by key into temporary files ([`EventSpill`]), then each part is applied and its
//! event blocks and frozen pages are written ahead, in batches of their own. Nothing reads them
//! until the last batch writes the commit's row directory, a checkpoint and the commit record; an
//! open removes the event blocks of a commit that has no record (`store/catalog.rs`), and pages
//! no head lists are never read. So the commit is still all or nothing, and one version.

use std::collections::BTreeMap;
use std::ops::Range;

use arrow::record_batch::RecordBatch;

use super::chain::{put_commit, put_commit_written, Link, Wrote};
use super::commit::{event_block_entries, now_us, put_json, CommitInfo};
use super::event_spill::EventSpill;
use super::load::{self, KeysFrom, Load};
use super::pages;
use super::part_writer::{PartWrite, PartWriter, Target};
use super::records::{TableRecord, FULL_REFRESH, PARTS, REDEFINED};
use super::written_ahead::WrittenAhead;
use super::{Inner, Table};
use crate::commit_clock::CommitClock;
use crate::engine::fold::Bytes;
use crate::engine::{CommitEffects, CommitMetrics, CommitPart, Evicted, Logging};
use crate::error::{Error, Result};
use crate::expectation;
use crate::flow::Flow;
use crate::format::keys::{self, key};
use crate::ingest::CheckedRows;
use crate::kv::{KvStore, WriteBatch};
use crate::progress::Reporter;
use crate::record::Incoming;
use crate::two_threads;

/// What a commit that applies source rows does besides applying them.
#[derive(Debug, PartialEq)]
pub(super) enum Apply {
    /// Nothing: the rows go on from the table as it is.
    Increment,
    /// Empties the table first (a full refresh).
    Full,
    /// Empties the table first and writes its catalog record, in the same batch: a flow was
    /// redefined (`store/redefine.rs`).
    Redefine(Box<TableRecord>),
}

/// The source rows one flow applies in a commit: how many there are, and their batches, read
/// one at a time.
pub(super) struct FlowRows {
    pub flow: String,
    pub rows: u64,
    pub batches: Box<dyn Iterator<Item = Result<RecordBatch>> + Send>,
}

impl FlowRows {
    /// Rows already in memory.
    pub(super) fn batch(flow: &str, batch: &RecordBatch) -> FlowRows {
        FlowRows {
            flow: flow.to_string(),
            rows: batch.num_rows() as u64,
            batches: Box::new(std::iter::once(Ok(batch.clone()))),
        }
    }
}

/// A commit's events as they are gathered: in memory, or parted by key into temporary files.
enum Gathered {
    Whole(Vec<Incoming>),
    Parted(EventSpill),
}

impl Gathered {
    /// Makes the events of `rows` of a checked batch and keeps them; returns the sequences of
    /// the truncates among them. A spill takes their values from the batch's columns: a row of
    /// values built for each event, only to be spilled and let go of, was a third of the commit
    /// thread's time while it gathered a large load (docs/PERFORMANCE.md, session 51).
    fn take(&mut self, checked: &mut CheckedRows, rows: Range<usize>) -> Result<Vec<Bytes>> {
        match self {
            Gathered::Whole(all) => {
                let (events, truncates) = checked.events(rows)?;
                all.extend(events);
                Ok(truncates)
            }
            Gathered::Parted(spill) => {
                let (slice, truncates) = checked.slice(rows)?;
                spill.push_slice(&slice)?;
                Ok(truncates)
            }
        }
    }

    fn len(&self) -> u64 {
        match self {
            Gathered::Whole(all) => all.len() as u64,
            Gathered::Parted(spill) => spill.len(),
        }
    }
}

/// What the checks of a commit's source rows found, over all its batches.
#[derive(Default)]
struct Checks {
    dropped: u64,
    /// Rows that failed each expectation: its action and how many.
    failed: BTreeMap<String, (crate::expectation::OnViolation, u64)>,
    /// The first problem that rejects the commit, its rows counted over every batch that has it.
    rejection: Option<Error>,
}

impl Checks {
    /// Notes a batch's error: the first one rejects the commit, and the same problem in a later
    /// batch adds its rows. Errors that are not about rows end the commit at once.
    fn reject(&mut self, e: Error) -> Result<()> {
        match (&mut self.rejection, e) {
            (None, e @ (Error::InvalidBatch { .. } | Error::ExpectationFailed { .. })) => {
                self.rejection = Some(e);
                Ok(())
            }
            (
                Some(Error::InvalidBatch {
                    column,
                    problem,
                    rows,
                }),
                Error::InvalidBatch {
                    column: c,
                    problem: p,
                    rows: more,
                },
            ) if *column == c && *problem == p => {
                *rows += more;
                Ok(())
            }
            (
                Some(Error::ExpectationFailed {
                    expectation, rows, ..
                }),
                Error::ExpectationFailed {
                    expectation: x,
                    rows: more,
                    ..
                },
            ) if *expectation == x => {
                *rows += more;
                Ok(())
            }
            (Some(_), Error::InvalidBatch { .. } | Error::ExpectationFailed { .. }) => Ok(()),
            (_, e) => Err(e),
        }
    }
}

impl Inner {
    /// Applies the source rows of flows (all of one table) as one commit; see [`Apply`] for what
    /// else the commit does. The rows are checked as a whole first (docs/SEMANTICS.md §2): on any
    /// error nothing is applied.
    pub(super) fn apply(
        &mut self,
        inputs: Vec<FlowRows>,
        mut params: BTreeMap<String, String>,
        how: Apply,
    ) -> Result<CommitInfo> {
        let mut clock = CommitClock::start();
        let first = inputs.first().map(|p| p.flow.clone()).unwrap_or_default();
        let name = self.flow_table(&first)?;
        let part_rows = self.commit_part_rows;
        // A full refresh of a large table not in memory reads each part's keys when the part
        // comes, and an increment of a table not in memory the keys its events bring, instead
        // of the whole table first.
        let keys_from = match how {
            Apply::Full => self.load_without_keys(&name, part_rows)?,
            Apply::Increment => self.load_for_increment(&name)?,
            Apply::Redefine(_) => {
                self.ensure_replayed(&name)?;
                KeysFrom::Memory
            }
        };
        let inner = self;
        let table = inner.tables.get_mut(&name).expect("the flow's table");
        let last = table.commits.last().expect("commit 0 exists");
        let version = last.version + 1;
        let ts = now_us().max(last.timestamp_us + 1);
        let rows: u64 = inputs.iter().map(|i| i.rows).sum();
        // A full refresh also resets the table's history, a part's keys at a time.
        let size = match how {
            Apply::Increment => rows,
            _ => rows.max(table.state.rows.len() as u64),
        };
        let types = table.state.schema.column_types();
        let mut gathered = match size > part_rows {
            true => Gathered::Parted(EventSpill::new(size, part_rows, types)),
            false => Gathered::Whole(Vec::new()),
        };
        let flow = inputs
            .iter()
            .map(|p| p.flow.as_str())
            .collect::<Vec<_>>()
            .join(",");
        let task = format!("reading {rows} source rows for {}", table.name);
        let bar = Reporter::begin(inner.progress.as_ref(), &task, rows, PROGRESS_ROWS);
        let at = Gathering {
            table,
            evaluator: inner.evaluator.as_ref(),
            ts,
            bar: &bar,
        };
        let (checks, truncates) = match at.gather(inputs, &mut gathered) {
            Ok(gathered) => gathered,
            Err(e) => {
                // Nothing applied: a state read without its keys is not kept.
                if keys_from == KeysFrom::Heads {
                    table.state = table.new_state();
                    table.load = Load::Pending;
                }
                return Err(e);
            }
        };
        drop(bar);
        for (name, (action, n)) in checks.failed {
            params.insert(
                format!("expectation.{name}"),
                format!("{n} rows failed ({action})"),
            );
        }
        // A truncate changes every key: such a commit is applied whole.
        let gathered = match gathered {
            Gathered::Parted(spill) if !truncates.is_empty() => Gathered::Whole(
                spill
                    .buckets()
                    .collect::<Result<Vec<_>>>()?
                    .into_iter()
                    .flatten()
                    .collect(),
            ),
            g => g,
        };

        if let Apply::Redefine(_) = &how {
            params.insert(REDEFINED.to_string(), first.to_string());
        }
        let before = match how {
            Apply::Increment => Before::Nothing,
            _ => Before::ResetKeys,
        };
        // A state read without its keys is reset (a full refresh) only in parts, a part's keys
        // at a time, and never meets a truncate (SCD TYPE 1 is always loaded whole).
        debug_assert!(
            keys_from == KeysFrom::Memory
                || (truncates.is_empty()
                    && (before == Before::Nothing || matches!(gathered, Gathered::Parted(_))))
        );
        if before == Before::ResetKeys {
            params.insert(FULL_REFRESH.to_string(), "true".to_string());
            // An error comes from reading a page, with the state half-reset: refuse everything
            // until the store is reopened. Applied in parts, each resets its keys first.
            match &gathered {
                Gathered::Whole(_) => table.state.reset(version, ts),
                Gathered::Parted(_) => {
                    table.state.reset_table();
                    Ok(())
                }
            }
            .inspect_err(|e| inner.poisoned = Some(e.to_string()))?;
        }
        clock.sample(); // the source read and checked
        let n_events = gathered.len();
        let task = format!("applying events to {}", table.name);
        let bar = Reporter::begin(inner.progress.as_ref(), &task, n_events, PROGRESS_ROWS);
        let mut tick = |done: u64| bar.advance(done);
        params.insert("flow".to_string(), flow.clone());
        let record = match &how {
            Apply::Redefine(record) => Some(&**record),
            _ => None,
        };
        let commit = CommitInfo {
            version,
            timestamp_us: ts,
            operation: format!("FLOW {flow}"),
            parameters: params,
            metrics: CommitMetrics::default(),
            duration_us: 0,
            peak_memory_bytes: None,
            chain: None,
        };
        let kv = inner.kv.as_ref();
        let every = inner.checkpoints.every_events;
        // An increment applied whole to a table not in memory reads its keys now, or the whole
        // table once the increments since it was read have read enough keys (`Increments`); on
        // an error nothing is applied, and the table is read again by its next use.
        let mut keys_from = keys_from;
        if let (KeysFrom::Heads, Gathered::Whole(events), Load::Skeleton { keys_read }) =
            (keys_from, &gathered, table.load)
        {
            let keys = keys_of(events);
            let n = keys.len() as u64;
            let numbered = u64::from(table.state.numbered());
            let read = match inner.increments.reads_whole(keys_read, n, numbered) {
                true => load::read_whole(kv, inner.progress.as_ref(), &inner.checkpoints, table)
                    .map(|()| KeysFrom::Memory),
                false => read_keys(kv, table, &keys).map(|()| {
                    table.load = Load::Skeleton {
                        keys_read: keys_read + n,
                    };
                    KeysFrom::Heads
                }),
            };
            keys_from = match read {
                Ok(from) => from,
                Err(e) => {
                    table.state = table.new_state();
                    table.load = Load::Pending;
                    return Err(e);
                }
            };
        }
        // From here on, on an error memory is ahead of disk: refuse everything until the store
        // is reopened.
        let written = match gathered {
            Gathered::Whole(events) => {
                // The log's blocks are encoded on a second thread while this one counts the
                // commit's changes and freezes its keys.
                let types = table.state.schema.column_types();
                let id = table.id;
                let (fx, blocks) = table
                    .state
                    .apply_beside(
                        CommitPart {
                            incoming: events,
                            truncates,
                            version,
                            ts,
                            logging: Logging::Log,
                        },
                        &mut tick,
                        |events, truncates| {
                            event_block_entries((id, version), &types, events, truncates)
                        },
                    )
                    .inspect_err(|e| inner.poisoned = Some(e.to_string()))?;
                tick(n_events);
                let mut commit = commit;
                commit.metrics = fx.metrics;
                commit.metrics.num_dropped_rows = checks.dropped;
                // The commit's events are logged (`blocks`): they need not outlive the write.
                drop(fx.events);
                let applied = Applied {
                    log: Log::InBatch(
                        blocks.inspect_err(|e| inner.poisoned = Some(e.to_string()))?,
                    ),
                    commit,
                    events: n_events,
                    clock,
                    record,
                };
                write_applied(kv, every, table, applied)
            }
            Gathered::Parted(spill) => {
                let parts = Parts {
                    version,
                    ts,
                    dropped: checks.dropped,
                    before,
                    keys_from,
                };
                apply_parts(kv, table, spill, parts, &mut tick, &mut clock).and_then(
                    |(metrics, starts, ahead)| {
                        let mut commit = CommitInfo { metrics, ..commit };
                        let starts: Vec<String> = starts.iter().map(u32::to_string).collect();
                        commit
                            .parameters
                            .insert(PARTS.to_string(), starts.join(","));
                        let applied = Applied {
                            log: Log::WrittenAhead(ahead),
                            commit,
                            events: n_events,
                            clock,
                            record,
                        };
                        write_applied(kv, every, table, applied)
                    },
                )
            }
        };
        drop(bar);
        let commit = written.inspect_err(|e| inner.poisoned = Some(e.to_string()))?;
        // A commit that dropped keys from memory leaves a state that is no longer the table:
        // its next use reads it from the records just written. An increment that read its keys
        // from their heads drops them, its checkpoint written, and the next one starts from
        // what is left ([`Load::Skeleton`]).
        if keys_from == KeysFrom::Heads && matches!(how, Apply::Increment) {
            debug_assert!(matches!(table.load, Load::Skeleton { .. }));
            table.state.evict_all();
        } else if table.state.evicted() == Evicted::Keys {
            table.state = table.new_state();
            table.load = Load::Pending;
        }
        inner.retention_after(&name, commit.version, commit.timestamp_us)?;
        Ok(commit)
    }
}

/// From how many source rows or events a commit reports its progress.
const PROGRESS_ROWS: u64 = 100_000;

/// The reading of a commit's source rows: into which table, and how.
struct Gathering<'a> {
    table: &'a Table,
    evaluator: Option<&'a std::sync::Arc<dyn crate::ingest::ConditionEvaluator>>,
    /// The commit's timestamp.
    ts: i64,
    bar: &'a Reporter,
}

impl Gathering<'_> {
    /// Reads the batches of `inputs`, checks them and turns them into events in `gathered`;
    /// returns what the checks found and the truncates. The first problem that rejects the
    /// commit is an error once every batch was read (its rows counted over all of them).
    fn gather(
        &self,
        inputs: Vec<FlowRows>,
        gathered: &mut Gathered,
    ) -> Result<(Checks, Vec<Bytes>)> {
        let mut truncates = Vec::new();
        let mut checks = Checks::default();
        let mut read = 0u64;
        for input in inputs {
            let f = self
                .table
                .flows
                .iter()
                .find(|f| f.spec.name == input.flow)
                .ok_or_else(|| Error::NotFound {
                    kind: "flow",
                    name: input.flow.clone(),
                })?;
            let parted = matches!(gathered, Gathered::Parted(_));
            let mut take = |(rows, checked): (u64, Result<CheckedBatch>)| {
                read += rows;
                self.bar.advance(read);
                let c = match checked {
                    Err(e) => return checks.reject(e),
                    Ok(c) => c,
                };
                checks.dropped += c.dropped;
                for (name, action, n) in c.violations {
                    checks.failed.entry(name).or_insert((action, 0)).1 += n;
                }
                // Made into events a slice at a time (into a spill, straight from the slice's
                // columns), each kept while its values are in the cache. An error ends the
                // batch, as a whole batch's would; once the commit is rejected, the rest of
                // its rows are only checked, for the rows of each problem.
                let n = c.rows.len();
                let mut rows = c.rows;
                for from in (0..n).step_by(SLICE_ROWS) {
                    let range = from..(from + SLICE_ROWS).min(n);
                    let made = match checks.rejection {
                        Some(_) => rows.check_events(range),
                        None => gathered.take(&mut rows, range).map(|t| truncates.extend(t)),
                    };
                    if let Err(e) = made {
                        return checks.reject(e);
                    }
                }
                rows.finish().or_else(|e| checks.reject(e))
            };
            let check = |batch: &RecordBatch| {
                let rows = batch.num_rows() as u64;
                (
                    rows,
                    check_batch(self.table, f, batch, self.evaluator, self.ts),
                )
            };
            if parted {
                // Batches read and checked on a second thread while this one makes the events
                // of the batches before and spills them (docs/PERFORMANCE.md, sessions 48, 49).
                let checked = (input.batches).map(|batch| batch.map(|b| check(&b)));
                two_threads::ahead("asof-gather", checked, |c| take(c?))?;
            } else {
                // Checked as one batch, so that an error counts every row that has it.
                let all = input.batches.collect::<Result<Vec<_>>>()?;
                if let Some(batch) = concat(all) {
                    take(check(&batch?))?;
                }
            }
        }
        match checks.rejection.take() {
            Some(e) => Err(e),
            None => {
                // A failure of the spill's temporary file is this commit's error now, before
                // anything is applied.
                if let Gathered::Parted(spill) = gathered {
                    spill.finish_writing()?;
                }
                Ok((checks, truncates))
            }
        }
    }
}

/// One batch of source rows checked: its rows kept, to be made into events, and what its
/// expectations found.
struct CheckedBatch<'a> {
    rows: CheckedRows<'a>,
    dropped: u64,
    violations: expectation::Violations,
}

/// Computes `batch`'s generated columns and checks it against the table's expectations and
/// flow `f`.
fn check_batch<'a>(
    table: &Table,
    f: &'a Flow,
    batch: &RecordBatch,
    evaluator: Option<&std::sync::Arc<dyn crate::ingest::ConditionEvaluator>>,
    ts: i64,
) -> Result<CheckedBatch<'a>> {
    // Generated columns are computed from the rows' other values first.
    let with_generated;
    let batch: &RecordBatch = if table.generated.is_empty() {
        batch
    } else {
        with_generated = crate::generated::add(batch, &f.spec.source, &table.generated, evaluator)?;
        &with_generated
    };
    let checked = expectation::check(&table.name, &table.expectations, batch, evaluator)?;
    Ok(CheckedBatch {
        rows: CheckedRows::check(f, &checked.rows, evaluator, ts)?,
        dropped: checked.dropped,
        violations: checked.violations,
    })
}

/// How many of a batch's rows are made into events at a time: their values are spilled while
/// they are in the cache (a batch of 10,000 rows makes 2.4 MB of them).
const SLICE_ROWS: usize = 1024;

/// Batches as one (none if there are none).
fn concat(batches: Vec<RecordBatch>) -> Option<Result<RecordBatch>> {
    let schema = batches.first()?.schema();
    Some(
        arrow::compute::concat_batches(&schema, &batches)
            .map_err(|e| Error::InvalidQuery(e.to_string())),
    )
}

/// The commit a part belongs to.
struct Parts {
    version: u64,
    ts: i64,
    /// Source rows an expectation dropped.
    dropped: u64,
    before: Before,
    keys_from: KeysFrom,
}

/// What is done to a part's keys before its events are applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Before {
    Nothing,
    /// They are reset (a full refresh): their rows retired, their events forgotten.
    ResetKeys,
}

/// Applies a commit's events part by part (a bucket of `spill` each), writing each part's event
/// blocks and frozen pages ahead; returns the commit's metrics, the first block of each part
/// that logged events ([`PARTS`]) and the blocks written. An error leaves memory ahead of disk.
fn apply_parts(
    kv: &dyn KvStore,
    table: &mut Table,
    spill: EventSpill,
    at: Parts,
    tick: &mut dyn FnMut(u64),
    clock: &mut CommitClock,
) -> Result<(CommitMetrics, Vec<u32>, WrittenAhead)> {
    pages::forget_summary(kv, table.id)?;
    // Pages a replay froze before this commit may be of any key, a later part's too: they are
    // written here, so that no part reads one still on its way to the writer.
    pages::write_pending_pages(kv, table.id, &mut table.state)?;
    let target = Target {
        kv,
        table_id: table.id,
        version: at.version,
        types: table.state.schema.column_types(),
    };
    std::thread::scope(|scope| {
        let writer = PartWriter::start(scope, target)?;
        let applied = apply_each_part(kv, table, spill, &at, &writer, tick, clock);
        let (mut metrics, written) = writer.finish(applied)?;
        metrics.num_dropped_rows = at.dropped;
        Ok((metrics, written.starts, written.ahead))
    })
}

/// The loop of [`apply_parts`]: each part applied, its writes handed to `writer`.
fn apply_each_part(
    kv: &dyn KvStore,
    table: &mut Table,
    spill: EventSpill,
    at: &Parts,
    writer: &PartWriter,
    tick: &mut dyn FnMut(u64),
    clock: &mut CommitClock,
) -> Result<CommitMetrics> {
    let mut metrics = CommitMetrics::default();
    let mut done = 0u64;
    let parting = spill.parting();
    // The table's keys by part, read once (not looked for among all the keys at every part): a
    // full refresh resets each part's before it, and every part drops its keys after it.
    let mut by_part: Vec<Vec<Bytes>> = Vec::new();
    by_part.resize_with(parting.parts(), Vec::new);
    let listed = match (at.keys_from, at.before) {
        (KeysFrom::Memory, _) => table.state.keys.keys().cloned().collect(),
        (KeysFrom::Heads, Before::ResetKeys) => pages::head_keys(kv, table.id)?,
        // An increment reads only the keys its events bring.
        (KeysFrom::Heads, Before::Nothing) => Vec::new(),
    };
    for k in listed {
        by_part[parting.bucket_of(&k)].push(k);
    }
    for (i, bucket) in spill.buckets().enumerate() {
        let events = bucket?;
        let mut keys = by_part.get_mut(i).map(std::mem::take).unwrap_or_default();
        // The keys the part brings to the table (its events come in key order, so each key
        // once).
        let mut brought: Vec<Bytes> = events.iter().map(|e| e.key.clone()).collect();
        brought.dedup();
        if at.keys_from == KeysFrom::Heads {
            let wanted = match at.before {
                Before::ResetKeys => &keys,
                Before::Nothing => &brought,
            };
            let heads = pages::read_heads(kv, table.id, wanted)?;
            table.state.load_keys(heads)?;
        }
        if at.before == Before::ResetKeys {
            table.state.reset_keys(at.version, at.ts, &keys)?;
        }
        // With the keys the part brings: every key of the part.
        keys.extend(brought);
        keys.sort_unstable();
        keys.dedup();
        let n = events.len() as u64;
        let fx = table.state.apply_part(
            CommitPart {
                incoming: events,
                truncates: Vec::new(),
                version: at.version,
                ts: at.ts,
                logging: Logging::Log,
            },
            &mut |d| tick(done + d),
        )?;
        done += n;
        tick(done);
        metrics.add(&fx.metrics);
        // SCD TYPE 1: the part's tombstones due, before its keys leave memory (and before its
        // pages are taken: a key collected is thawed, its pages freed).
        metrics.num_tombstones_collected += table.state.collect_tombstones_of(at.ts, &keys)?;
        writer.send(PartWrite::Events(fx.events))?;
        writer.send(PartWrite::Pages(table.state.take_pages()))?;
        let dir = pages::row_directory_ahead(table.id, &mut table.state, at.version)?;
        if let Some(b) = dir {
            writer.send(PartWrite::Batch(b))?;
        }
        pages::for_each_head_batch(table.id, &mut table.state, |b| {
            writer.send(PartWrite::Batch(b))
        })?;
        table.state.evict(&keys);
        clock.sample();
    }
    Ok(metrics)
}

/// The keys `events` bring, sorted, each once.
fn keys_of(events: &[Incoming]) -> Vec<Bytes> {
    let mut keys: Vec<Bytes> = events.iter().map(|e| e.key.clone()).collect();
    keys.sort_unstable();
    keys.dedup();
    keys
}

/// Reads into `table`'s state, which holds none of its keys ([`Load::Skeleton`]), the heads of
/// `keys` (sorted) that the table has.
pub(super) fn read_keys(kv: &dyn KvStore, table: &mut Table, keys: &[Bytes]) -> Result<()> {
    let heads = pages::read_heads(kv, table.id, keys)?;
    table.state.load_keys(heads)
}

/// Where a commit's events are logged.
pub(super) enum Log {
    /// In the commit's batch: the entries of its event blocks
    /// ([`super::commit::event_block_entries`]).
    InBatch(Vec<(Vec<u8>, Vec<u8>)>),
    /// Written ahead, in batches of their own (a commit applied in parts), and kept to compute
    /// the commit's digest: the commit writes a checkpoint, so that an open never replays it
    /// from its log in other parts.
    WrittenAhead(WrittenAhead),
}

impl Log {
    /// The events a commit applied whole to `table` as `version` logs, in its batch.
    pub(super) fn of(table: &Table, version: u64, fx: &CommitEffects) -> Result<Log> {
        let types = table.state.schema.column_types();
        event_block_entries((table.id, version), &types, &fx.events, &fx.truncates)
            .map(Log::InBatch)
    }
}

/// A commit applied to a table's state, to be written.
pub(super) struct Applied<'a> {
    pub log: Log,
    pub commit: CommitInfo,
    /// How many events it applied (they count towards the next checkpoint).
    pub events: u64,
    /// Its clock and memory probe, started with it.
    pub clock: CommitClock,
    /// The table's record, rewritten with the commit (a redefined flow).
    pub record: Option<&'a TableRecord>,
}

/// Writes a commit applied to `table`'s state in one batch: its events, the pages it froze (and
/// a checkpoint, when `every` events have been applied since the last), its commit record. On an
/// error memory is ahead of disk, and the caller must poison the store.
pub(super) fn write_applied(
    kv: &dyn KvStore,
    every: u64,
    table: &mut Table,
    applied: Applied<'_>,
) -> Result<CommitInfo> {
    let Applied {
        mut log,
        mut commit,
        events,
        mut clock,
        record,
    } = applied;
    let version = commit.version;
    let mut b = WriteBatch::default();
    if let Log::InBatch(blocks) = &mut log {
        for (k, v) in std::mem::take(blocks) {
            b.put(k, v);
        }
    }
    let unsaved = table.unsaved + events;
    // A state that is not the whole table (it read only the keys it changes) cannot be
    // replayed onto later: its commit is a checkpoint.
    let partial = table.state.evicted() == Evicted::Keys;
    let checkpoint = match (&log, unsaved >= every || partial) {
        (Log::WrittenAhead(_), _) | (_, true) => pages::Checkpoint::Now,
        _ => pages::Checkpoint::Later,
    };
    // The first commit after a replay also writes the pages the replay froze: many of them go
    // ahead in batches of their own (`pages::write_pending_pages`).
    if table.state.pending_pages() > pages::PAGE_BATCH {
        pages::write_pending_pages(kv, table.id, &mut table.state)?;
    }
    // A commit applied in parts changed many keys: their heads go ahead in batches of their
    // own, and its record's batch writes the summary that makes them current.
    if let Log::WrittenAhead(_) = log {
        pages::write_heads_ahead(kv, table.id, &mut table.state)?;
    }
    pages::put_changes(&mut b, table.id, &mut table.state, version, checkpoint)?;
    if let Some(record) = record {
        put_json(&mut b, key(keys::TABLE, table.id, None, None), record)?;
    }
    commit.duration_us = clock.elapsed_us();
    commit.peak_memory_bytes = clock.peak_memory_bytes();
    let prev = table.commits.last().and_then(|c| c.chain.clone());
    let at = Link {
        tag: keys::COMMIT,
        id: table.id,
        prev: prev.as_deref(),
        wrote: Wrote::Events,
    };
    match log {
        Log::InBatch(_) => put_commit(&mut b, at, &mut commit)?,
        Log::WrittenAhead(ahead) => put_commit_written(&mut b, at, &mut commit, ahead.pairs()?)?,
    }
    match checkpoint {
        pages::Checkpoint::Now => {
            pages::write_checkpoint(kv, table.id, b, &mut table.state, &mut table.pins)?
        }
        pages::Checkpoint::Later => kv.write(b)?,
    }
    // The batch holds the commit's row directory: the rows it retired are read from there now.
    table.state.let_go_directories(version);
    table.commits.push(commit.clone());
    table.unsaved = match checkpoint {
        pages::Checkpoint::Now => 0,
        pages::Checkpoint::Later => unsaved,
    };
    Ok(commit)
}
