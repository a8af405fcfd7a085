//! Applying source rows through flows: refreshes (incremental and full) and the commit path.

use std::collections::BTreeMap;
use std::time::Instant;

use arrow::record_batch::RecordBatch;

use super::chain::{put_commit, Link, Wrote};
use super::commit::{now_us, put_event_blocks, put_json, CommitInfo};
use super::pages;
use super::records::{TableRecord, FULL_REFRESH, REDEFINED, SOURCE_OFFSET};
use super::source_rows::{SourceRead, SourceRows};
use super::{Inner, Store, Table};
use crate::engine::CommitEffects;
use crate::error::{Error, Result};
use crate::expectation;
use crate::flow::ChangeCommits;
use crate::flow::FlowSpec;
use crate::format::keys::{self, key};
use crate::ingest::prepare;
use crate::kv::{KvStore, WriteBatch};
use crate::source::SourceTable;
use crate::source_dml;

impl Store {
    /// Applies a batch of source rows through flow `flow`: one durable commit of its target table.
    ///
    /// The batch is validated as a whole first (docs/SEMANTICS.md §2); on any error nothing is applied.
    pub fn apply(&self, flow: &str, batch: &RecordBatch) -> Result<CommitInfo> {
        let mut g = self.write_inner()?;
        g.apply(&[(flow, batch)], BTreeMap::new(), Apply::Increment)
    }

    /// Processes what the flow's source table received since the flow's checkpoint as one commit.
    /// The new checkpoint is part of the commit record, so it is durable exactly when the data it
    /// describes is. Returns `None` when there was nothing new, or when an `AUTO CDC ONCE` flow
    /// has already run.
    ///
    /// If the source gained columns that the flow's `COLUMNS` selection takes, the target gains
    /// them first, in an `ADD COLUMNS` commit (`store/widen.rs`); that commit is returned if
    /// the refresh has nothing new.
    ///
    /// With `full`, the flow's whole target is rebuilt from all the data of all its flows: see
    /// [`Store::refresh_table`].
    pub fn refresh(&self, flow: &str, full: bool) -> Result<Option<CommitInfo>> {
        let mut g = self.write_inner()?;
        let table = g.flow_table(flow)?;
        let widened = g.widen_to_source(&table)?;
        if full {
            return g.refresh_full(&table).map(Some);
        }
        Ok(g.refresh_flow(&table, flow)?.or(widened))
    }

    /// Refreshes every flow of target `table`: without `full`, one commit per flow that has new
    /// source rows; with `full`, one commit that empties the table and applies all the source
    /// data of all its flows (`AUTO CDC ONCE` flows included), so readers never see it half
    /// rebuilt. An `ADD COLUMNS` commit comes first if the table gains columns (see
    /// [`Store::refresh`]).
    pub fn refresh_table(&self, table: &str, full: bool) -> Result<Vec<CommitInfo>> {
        let mut g = self.write_inner()?;
        if !g.tables.contains_key(table) {
            return Err(Error::NotFound {
                kind: "table",
                name: table.to_string(),
            });
        }
        let mut out: Vec<CommitInfo> = g.widen_to_source(table)?.into_iter().collect();
        if full {
            out.push(g.refresh_full(table)?);
            return Ok(out);
        }
        let flows: Vec<String> = g.tables[table]
            .flows
            .iter()
            .map(|f| f.spec.name.clone())
            .collect();
        for f in flows {
            out.extend(g.refresh_flow(table, &f)?);
        }
        Ok(out)
    }
}

/// A refresh's error, with the way out when source rows were rejected: an expectation that
/// drops them.
pub(crate) fn rejected(table: &str, flow: &str, e: Error) -> Error {
    match e {
        Error::InvalidBatch {
            ref column,
            ref problem,
            ..
        } => {
            let (constraint, condition) = if problem.contains("NULL") {
                (format!("{column}_present"), format!("{column} IS NOT NULL"))
            } else {
                (
                    format!("valid_{column}"),
                    format!("<condition on {column}>"),
                )
            };
            Error::SourceRowsRejected {
                table: table.to_string(),
                flow: flow.to_string(),
                cause: Box::new(e),
                constraint,
                condition,
            }
        }
        e => e,
    }
}

impl Table {
    /// Its flow `name`.
    pub(super) fn flow(&self, name: &str) -> Result<&crate::flow::Flow> {
        self.flows
            .iter()
            .find(|f| f.spec.name == name)
            .ok_or_else(|| Error::NotFound {
                kind: "flow",
                name: name.to_string(),
            })
    }

    /// How many rows of its source `flow` has processed: see [`checkpoint_in`].
    pub(super) fn checkpoint(&self, flow: &str) -> Option<u64> {
        checkpoint_in(&self.commits, flow)
    }
}

/// How many rows of its source `flow` has processed as of the last of `commits` that says so:
/// `source_offset` in a commit of that flow alone, `source_offset.<flow>` in a full refresh of
/// the table or a vacuum base. `None` if no commit says.
pub(super) fn checkpoint_in(commits: &[CommitInfo], flow: &str) -> Option<u64> {
    let per_flow = format!("{SOURCE_OFFSET}.{flow}");
    commits.iter().rev().find_map(|c| {
        let own = (c.parameters.get("flow").map(String::as_str) == Some(flow))
            .then(|| c.parameters.get(SOURCE_OFFSET))
            .flatten();
        own.or_else(|| c.parameters.get(&per_flow))
            .and_then(|v| v.parse().ok())
    })
}

/// The commit parameter (`source_version.<flow>`) of a full refresh: the version of the flow's
/// source it read whole.
pub(crate) const SOURCE_VERSION: &str = "source_version";

/// The version of its source that `flow` last read whole (a full refresh) or first read, or 0.
pub(super) fn source_version_in(commits: &[CommitInfo], flow: &str) -> u64 {
    let key = format!("{SOURCE_VERSION}.{flow}");
    commits
        .iter()
        .rev()
        .find_map(|c| c.parameters.get(&key).and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

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

impl Inner {
    /// The source of `flow` (of `table`) and the rows it holds.
    pub(super) fn flow_source(&self, table: &str, flow: &str) -> Result<(&SourceTable, &FlowSpec)> {
        let spec = &self.tables[table].flow(flow)?.spec;
        let source = spec.source_table.as_ref().ok_or_else(|| {
            Error::InvalidQuery(format!("flow `{flow}` has no source table to refresh from"))
        })?;
        let src = self.sources.get(source).ok_or_else(|| Error::NotFound {
            kind: "source table",
            name: source.clone(),
        })?;
        Ok((src, spec))
    }

    pub(super) fn refresh_flow(&mut self, table: &str, flow: &str) -> Result<Option<CommitInfo>> {
        let t = &self.tables[table];
        let checkpoint = t.checkpoint(flow);
        let (src, spec) = self.flow_source(table, flow)?;
        if spec.once && checkpoint.is_some() {
            return Ok(None);
        }
        // A DML statement on the source that removed rows the flow had read, since the flow
        // last read the whole source (or first read it), stops it, unless it skips such commits.
        // A flow that never read its source has read no row a statement removed.
        let since = source_version_in(&t.commits, flow);
        if checkpoint.is_some() && spec.change_commits == ChangeCommits::Read {
            if let Some(c) = source_dml::breaking_commit(&src.history, flow, since) {
                return Err(source_dml::broken_flow(flow, &src.name, c));
            }
        }
        let from = checkpoint.unwrap_or(0);
        if from >= src.rows {
            return Ok(None);
        }
        let first_read = checkpoint
            .is_none()
            .then(|| src.history.last().map(|c| c.version))
            .flatten();
        let read = SourceRead::After {
            from,
            change_commits: spec.change_commits,
        };
        let total = src.rows;
        let batch = self.read_source(src, read)?;
        let mut params = BTreeMap::from([(SOURCE_OFFSET.to_string(), total.to_string())]);
        if let Some(v) = first_read {
            params.insert(format!("{SOURCE_VERSION}.{flow}"), v.to_string());
        }
        self.apply(&[(flow, &batch)], params, Apply::Increment)
            .map(Some)
            .map_err(|e| rejected(table, flow, e))
    }

    /// The rows `read` reads of source `src`, as one batch (what one commit applies).
    fn read_source(&self, src: &SourceTable, read: SourceRead) -> Result<RecordBatch> {
        let rows = SourceRows::new(self.kv.clone(), src, read, &self.rewrites)?;
        let schema = rows.schema();
        let batches = rows.collect_batches()?;
        arrow::compute::concat_batches(&schema, &batches)
            .map_err(|e| Error::InvalidQuery(e.to_string()))
    }

    pub(super) fn refresh_full(&mut self, table: &str) -> Result<CommitInfo> {
        self.rebuild_from_sources(table, Apply::Full)
    }

    /// One commit that empties `table` and applies all the source data of all its flows (`how`
    /// is [`Apply::Full`] or [`Apply::Redefine`]).
    pub(super) fn rebuild_from_sources(&mut self, table: &str, how: Apply) -> Result<CommitInfo> {
        let flows: Vec<String> = self.tables[table]
            .flows
            .iter()
            .map(|f| f.spec.name.clone())
            .collect();
        let mut params = BTreeMap::new();
        let mut batches = Vec::new();
        for f in &flows {
            let (src, _) = self.flow_source(table, f)?;
            params.insert(format!("{SOURCE_OFFSET}.{f}"), src.rows.to_string());
            if let Some(last) = src.history.last() {
                params.insert(format!("{SOURCE_VERSION}.{f}"), last.version.to_string());
            }
            batches.push(self.read_source(src, SourceRead::Now)?);
        }
        let parts: Vec<(&str, &RecordBatch)> =
            flows.iter().map(String::as_str).zip(&batches).collect();
        let flow = flows.join(",");
        self.apply(&parts, params, how)
            .map_err(|e| rejected(table, &flow, e))
    }

    /// Applies batches of source rows, each through its flow (all flows of one table), as one
    /// commit; see [`Apply`] for what else the commit does.
    pub(super) fn apply(
        &mut self,
        parts: &[(&str, &RecordBatch)],
        mut params: BTreeMap<String, String>,
        how: Apply,
    ) -> Result<CommitInfo> {
        let started = Instant::now();
        let first = parts.first().map(|p| p.0).unwrap_or_default();
        let name = self.flow_table(first)?;
        self.ensure_replayed(&name)?;
        let inner = self;
        let table = inner
            .tables
            .values_mut()
            .find(|t| t.flows.iter().any(|f| f.spec.name == first))
            .ok_or_else(|| Error::NotFound {
                kind: "flow",
                name: first.to_string(),
            })?;
        let last = table.commits.last().expect("commit 0 exists");
        let version = last.version + 1;
        let ts = now_us().max(last.timestamp_us + 1);
        let mut events = Vec::new();
        let mut truncates = Vec::new();
        let mut dropped = 0;
        let mut failed_rows = BTreeMap::new();
        for (flow, batch) in parts {
            let f = table
                .flows
                .iter()
                .find(|f| f.spec.name == *flow)
                .ok_or_else(|| Error::NotFound {
                    kind: "flow",
                    name: flow.to_string(),
                })?;
            // Generated columns are computed from the rows' other values first.
            let with_generated;
            let batch: &RecordBatch = if table.generated.is_empty() {
                batch
            } else {
                with_generated = crate::generated::add(
                    batch,
                    &f.spec.source,
                    &table.generated,
                    inner.evaluator.as_ref(),
                )?;
                &with_generated
            };
            let checked = expectation::check(
                &table.name,
                &table.expectations,
                batch,
                inner.evaluator.as_ref(),
            )?;
            dropped += checked.dropped;
            for (name, action, n) in checked.violations {
                let failed = failed_rows.entry(name).or_insert((action, 0));
                failed.1 += n;
            }
            let (e, t) = prepare(f, &checked.rows, inner.evaluator.as_ref(), ts)?;
            events.extend(e);
            truncates.extend(t);
        }
        for (name, (action, n)) in failed_rows {
            params.insert(
                format!("expectation.{name}"),
                format!("{n} rows failed ({action})"),
            );
        }
        let flow = parts.iter().map(|p| p.0).collect::<Vec<_>>().join(",");

        if let Apply::Redefine(_) = &how {
            params.insert(REDEFINED.to_string(), first.to_string());
        }
        if how != Apply::Increment {
            params.insert(FULL_REFRESH.to_string(), "true".to_string());
            // An error comes from reading a page, with the state half-reset: refuse everything
            // until the store is reopened.
            table
                .state
                .reset(version, ts)
                .inspect_err(|e| inner.poisoned = Some(e.to_string()))?;
        }
        let progress = inner.progress.clone();
        let n_events = events.len() as u64;
        // Only work big enough to be noticed gets a bar.
        let progress = progress.filter(|_| n_events >= 100_000);
        if let Some(p) = &progress {
            p.begin(&format!("applying events to {}", table.name), n_events);
        }
        let mut tick = |done: u64| {
            if let Some(p) = &progress {
                p.advance(done)
            }
        };
        let applied = table
            .state
            .apply(events, truncates, version, ts, true, &mut tick);
        if let Some(p) = &progress {
            p.end();
        }
        // The state may be half-applied: refuse everything until the store is reopened.
        let mut fx = applied.inspect_err(|e| inner.poisoned = Some(e.to_string()))?;
        fx.metrics.num_dropped_rows = dropped;
        params.insert("flow".to_string(), flow.to_string());
        let commit = CommitInfo {
            version,
            timestamp_us: ts,
            operation: format!("FLOW {flow}"),
            parameters: params,
            metrics: fx.metrics.clone(),
            duration_us: 0,
            chain: None,
        };
        let every = inner.checkpoints.every_events;
        let record = match &how {
            Apply::Redefine(record) => Some(&**record),
            _ => None,
        };
        let applied = Applied {
            fx: &fx,
            commit,
            events: n_events,
            started,
            record,
        };
        // On an error memory is ahead of disk: refuse everything until the store is reopened.
        let commit = write_applied(inner.kv.as_ref(), every, table, applied)
            .inspect_err(|e| inner.poisoned = Some(e.to_string()))?;
        inner.retention_after(&name, commit.version, commit.timestamp_us)?;
        Ok(commit)
    }
}

/// A commit applied to a table's state, to be written.
pub(super) struct Applied<'a> {
    pub fx: &'a CommitEffects,
    pub commit: CommitInfo,
    /// How many events it applied (they count towards the next checkpoint).
    pub events: u64,
    pub started: Instant,
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
        fx,
        mut commit,
        events,
        started,
        record,
    } = applied;
    let version = commit.version;
    let mut b = WriteBatch::default();
    put_event_blocks(
        &mut b,
        table.id,
        version,
        &table.state.schema,
        &fx.events,
        &fx.truncates,
    )?;
    let unsaved = table.unsaved + events;
    let checkpoint = if unsaved >= every {
        pages::Checkpoint::Now
    } else {
        pages::Checkpoint::Later
    };
    // The first commit after a replay also writes the pages the replay froze: many of them go
    // ahead in batches of their own (`pages::write_pending_pages`).
    if table.state.pending_pages() > pages::PAGE_BATCH {
        pages::write_pending_pages(kv, table.id, &mut table.state)?;
    }
    pages::put_changes(&mut b, table.id, &mut table.state, version, checkpoint)?;
    if let Some(record) = record {
        put_json(&mut b, key(keys::TABLE, table.id, None, None), record)?;
    }
    commit.duration_us = started.elapsed().as_micros() as u64;
    let prev = table.commits.last().and_then(|c| c.chain.clone());
    let at = Link {
        tag: keys::COMMIT,
        id: table.id,
        prev: prev.as_deref(),
        wrote: Wrote::Events,
    };
    put_commit(&mut b, at, &mut commit)?;
    kv.write(b)?;
    table.commits.push(commit.clone());
    table.unsaved = if unsaved >= every { 0 } else { unsaved };
    Ok(commit)
}
