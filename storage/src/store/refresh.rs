//! Refreshes: what a flow's source received since its checkpoint (incremental), or all of it
//! (full), applied as one commit (`store/flow_commit.rs`).

use std::collections::BTreeMap;

use arrow::record_batch::RecordBatch;

use super::commit::CommitInfo;
use super::flow_commit::{Apply, FlowRows};
use super::records::SOURCE_OFFSET;
use super::source_rows::{SourceRead, SourceRows};
use super::{Inner, Store, Table};
use crate::error::{Error, Result};
use crate::flow::ChangeCommits;
use crate::flow::FlowSpec;
use crate::source::SourceTable;
use crate::source_dml;

/// What a refresh applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefreshMode {
    /// What the sources received since the flows' checkpoints.
    Incremental,
    /// All the data of all the table's flows: the table emptied and rebuilt in one commit
    /// (`REFRESH STREAMING TABLE t FULL`).
    Full,
}

impl Store {
    /// Applies a batch of source rows through flow `flow`: one durable commit of its target table.
    ///
    /// The batch is validated as a whole first (docs/SEMANTICS.md §2); on any error nothing is applied.
    pub fn apply(&self, flow: &str, batch: &RecordBatch) -> Result<CommitInfo> {
        let mut g = self.write_inner()?;
        g.apply(
            vec![FlowRows::batch(flow, batch)],
            BTreeMap::new(),
            Apply::Increment,
        )
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
    /// [`RefreshMode::Full`] rebuilds the flow's whole target from all the data of all its flows:
    /// see [`Store::refresh_table`].
    pub fn refresh(&self, flow: &str, mode: RefreshMode) -> Result<Option<CommitInfo>> {
        let mut g = self.write_inner()?;
        let table = g.flow_table(flow)?;
        let widened = g.widen_to_source(&table)?;
        match mode {
            RefreshMode::Full => g.refresh_full(&table).map(Some),
            RefreshMode::Incremental => Ok(g.refresh_flow(&table, flow)?.or(widened)),
        }
    }

    /// Refreshes every flow of target `table`: [`RefreshMode::Incremental`] makes one commit per
    /// flow that has new source rows; [`RefreshMode::Full`] one commit that empties the table and
    /// applies all the source data of all its flows (`AUTO CDC ONCE` flows included), so readers
    /// never see it half rebuilt. An `ADD COLUMNS` commit comes first if the table gains columns
    /// (see [`Store::refresh`]).
    pub fn refresh_table(&self, table: &str, mode: RefreshMode) -> Result<Vec<CommitInfo>> {
        let mut g = self.write_inner()?;
        if !g.tables.contains_key(table) {
            return Err(Error::NotFound {
                kind: "table",
                name: table.to_string(),
            });
        }
        let mut out: Vec<CommitInfo> = g.widen_to_source(table)?.into_iter().collect();
        if mode == RefreshMode::Full {
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
        let rows = self.read_source(flow, src, read)?;
        let mut params = BTreeMap::from([(SOURCE_OFFSET.to_string(), total.to_string())]);
        if let Some(v) = first_read {
            params.insert(format!("{SOURCE_VERSION}.{flow}"), v.to_string());
        }
        self.apply(vec![rows], params, Apply::Increment)
            .map(Some)
            .map_err(|e| rejected(table, flow, e))
    }

    /// The rows `read` reads of source `src` for `flow`, as a commit applies them: a batch at a
    /// time.
    fn read_source(&self, flow: &str, src: &SourceTable, read: SourceRead) -> Result<FlowRows> {
        let n = match read {
            SourceRead::After { from, .. } => src.rows.saturating_sub(from),
            _ => src.rows,
        };
        let rows = SourceRows::new(self.kv.clone(), src, read, &self.rewrites)?;
        Ok(FlowRows {
            flow: flow.to_string(),
            rows: n,
            batches: Box::new(rows),
        })
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
        let mut inputs = Vec::new();
        for f in &flows {
            let (src, _) = self.flow_source(table, f)?;
            params.insert(format!("{SOURCE_OFFSET}.{f}"), src.rows.to_string());
            if let Some(last) = src.history.last() {
                params.insert(format!("{SOURCE_VERSION}.{f}"), last.version.to_string());
            }
            inputs.push(self.read_source(f, src, SourceRead::Now)?);
        }
        let flow = flows.join(",");
        self.apply(inputs, params, how)
            .map_err(|e| rejected(table, &flow, e))
    }
}
