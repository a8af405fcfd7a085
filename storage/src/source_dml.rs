//! `DELETE`, `UPDATE` and `MERGE` on source tables (docs/SEMANTICS.md §2.6).
//!
//! A source table stays append-only on disk: a statement removes rows by position (its commit
//! lists them, `deleted_rows`) and appends the rows it writes (their positions, `appended_rows`)
//! in one commit. Rows it removed stay in their chunks, so the table as of an earlier version
//! still reads them. A flow that had already read a row the statement removed is named in the
//! commit (`breaks_flows`): its next refresh fails, unless it skips change commits or a full
//! refresh re-reads the table after it.

use crate::commit_info::CommitInfo;
use crate::error::{Error, Result};
use crate::positions::{format_positions, positions_in, runs_in};

/// The positions of the rows a statement removed, as ranges (`3-7,12`).
pub(crate) const DELETED_ROWS: &str = "deleted_rows";
/// The positions of the rows a statement appended, as one range (`a-b`).
pub(crate) const APPENDED_ROWS: &str = "appended_rows";
/// The flows that had read a row the statement removed, comma separated.
pub(crate) const BREAKS_FLOWS: &str = "breaks_flows";
/// The statement's text.
pub(crate) const STATEMENT: &str = "statement";

/// What a DML statement on a source table is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SourceDmlOperation {
    /// `DELETE FROM s WHERE ...`: removes rows.
    Delete,
    /// `UPDATE s SET ... WHERE ...`: removes rows and appends their new values.
    Update,
    /// `MERGE INTO s USING ...`: removes, changes and appends rows.
    Merge,
    /// A run of a replace flow (`INSERT INTO t BY NAME REPLACE USING | WHERE ...`): removes the
    /// rows its new rows replace and appends them.
    Replace,
    /// `REFRESH ... FULL` of a table append flows fill: removes every row and appends what the
    /// flows give over all of their sources.
    FullRefresh,
}

impl SourceDmlOperation {
    /// Its name in the table's history.
    pub fn name(self) -> &'static str {
        match self {
            SourceDmlOperation::Delete => "DELETE",
            SourceDmlOperation::Update => "UPDATE",
            SourceDmlOperation::Merge => "MERGE",
            SourceDmlOperation::FullRefresh => "FULL REFRESH",
            SourceDmlOperation::Replace => "REPLACE",
        }
    }
}

/// The change a [`crate::SourceWrite`] makes besides appending its rows.
#[derive(Clone, Debug)]
pub(crate) struct SourceChange {
    pub operation: SourceDmlOperation,
    /// Positions removed, sorted, without repeats.
    pub deleted: Vec<u64>,
    pub statement: String,
}

impl SourceChange {
    /// The commit parameters of the change, given the positions it appended (`first..end`) and
    /// the flows it breaks.
    pub fn parameters(
        &self,
        appended: std::ops::Range<u64>,
        breaks: &[String],
    ) -> Vec<(String, String)> {
        let mut p = vec![
            (DELETED_ROWS.to_string(), format_positions(&self.deleted)),
            (STATEMENT.to_string(), self.statement.clone()),
        ];
        if !appended.is_empty() {
            p.push((
                APPENDED_ROWS.to_string(),
                format!("{}-{}", appended.start, appended.end - 1),
            ));
        }
        if !breaks.is_empty() {
            p.push((BREAKS_FLOWS.to_string(), breaks.join(",")));
        }
        p
    }
}

/// What the DML commits of a source's history did.
#[derive(Default)]
pub(crate) struct Changes {
    /// Each removed position, with the version that removed it.
    pub deleted: crate::removed::Removed,
    /// The ranges of positions they appended (`[a, b)`).
    pub changed: Vec<(u64, u64)>,
}

/// What the DML commits of `history` did.
pub(crate) fn changes_of(history: &[CommitInfo]) -> Result<Changes> {
    let mut deleted = crate::removed::Removed::default();
    let mut changed = Vec::new();
    for c in history {
        deleted.insert_runs(runs_in(c, DELETED_ROWS)?, c.version);
        // What a statement that removed nothing appended (a MERGE that only inserted) are inserts.
        let removed = c
            .parameters
            .get(DELETED_ROWS)
            .is_some_and(|l| !l.is_empty());
        let appended = positions_in(c, APPENDED_ROWS)?;
        if let (true, Some(a), Some(b)) = (removed, appended.first(), appended.last()) {
            changed.push((*a, b + 1));
        }
    }
    Ok(Changes { deleted, changed })
}

/// Whether commit `c` of a source appended rows (a `WRITE`, or a DML statement that did).
pub(crate) fn appends_rows(c: &CommitInfo, write: &str) -> bool {
    c.operation == write || c.parameters.contains_key(APPENDED_ROWS)
}

/// The first commit of a source's `history` after `since` (a source version) that removed rows
/// `flow` had read: the flow cannot go on from its checkpoint.
pub(crate) fn breaking_commit<'a>(
    history: &'a [CommitInfo],
    flow: &str,
    since: u64,
) -> Option<&'a CommitInfo> {
    history.iter().find(|c| {
        c.version > since
            && c.parameters
                .get(BREAKS_FLOWS)
                .is_some_and(|l| l.split(',').any(|f| f == flow))
    })
}

/// The error of a flow whose source (named `source`) changed rows it had read.
pub(crate) fn broken_flow(flow: &str, source: &str, c: &CommitInfo) -> Error {
    Error::FlowStopped(Box::new(crate::error::StoppedFlow {
        flow: flow.to_string(),
        source_table: source.to_string(),
        version: c.version,
        operation: c.operation.clone(),
    }))
}
