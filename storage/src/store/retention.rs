//! Retention by erasure: a table whose property [`DELETED_RETENTION_PROPERTY`] is set erases,
//! after its commits, the keys that have been deleted for longer than it says
//! (docs/SEMANTICS.md §12.3). Applied at commit, whatever schedules the commits.

use std::collections::BTreeSet;

use super::erase::EraseReport;
use super::records::{ERASE, ERASE_REASON};
use super::Inner;
use crate::engine::fold::Bytes;
use crate::engine::Deleted;
use crate::error::{Error, Result};

/// The table property that erases, at its next commit, every key deleted more than this many
/// hours before (a number, fractions allowed): for data that may be kept only so long after a
/// customer, an account or a contract is gone.
pub const DELETED_RETENTION_PROPERTY: &str = "asof.erase.deletedAfterHours";

/// How the reason of a retention erasure starts.
const REASON: &str = "retention: ";

/// At most one retention erasure per table in this long (µs): each rewrites the store's files.
const AT_MOST_EVERY_US: i64 = 3_600_000_000;

/// The hours `value` of [`DELETED_RETENTION_PROPERTY`] says, or why it is not one.
pub(crate) fn retention_hours(value: &str) -> std::result::Result<f64, String> {
    value
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|h| h.is_finite() && *h >= 0.0 && *h <= 876_000_000.0)
        .ok_or_else(|| {
            format!("`{DELETED_RETENTION_PROPERTY}` takes a number of hours, from 0 to 876000000, not `{value}`")
        })
}

impl Inner {
    /// Applies `table`'s retention property after its commit `committed`: erases the keys
    /// deleted longer ago than it says, unless a retention erasure ran in the last hour. An error
    /// says that the commit was made.
    pub(super) fn apply_retention(
        &mut self,
        table: &str,
        committed: u64,
    ) -> Result<Option<EraseReport>> {
        self.retention(table).map_err(|e| Error::RetentionFailed {
            table: table.to_string(),
            committed,
            cause: Box::new(e),
        })
    }

    fn retention(&mut self, table: &str) -> Result<Option<EraseReport>> {
        let t = self.table(table)?;
        let Some(value) = t.properties.get(DELETED_RETENTION_PROPERTY) else {
            return Ok(None);
        };
        let hours = retention_hours(value).map_err(Error::InvalidQuery)?;
        let now = t.commits.last().expect("a commit").timestamp_us;
        let recent = t
            .commits
            .iter()
            .rev()
            .take_while(|c| now - c.timestamp_us < AT_MOST_EVERY_US)
            .any(|c| {
                c.operation == ERASE
                    && c.parameters
                        .get(ERASE_REASON)
                        .is_some_and(|r| r.starts_with(REASON))
            });
        if recent {
            return Ok(None);
        }
        self.ensure_replayed(table)?;
        let t = self.table(table)?;
        let cutoff = now.saturating_sub((hours * 3.6e9) as i64);
        // A commit's timestamp; a version VACUUM removed is older than the oldest kept.
        let at = |v: u64| match t.commits.binary_search_by_key(&v, |c| c.version) {
            Ok(i) => t.commits[i].timestamp_us,
            Err(i) => t.commits[i.saturating_sub(1)].timestamp_us,
        };
        let erased: BTreeSet<Bytes> = t
            .state
            .deleted_keys()
            .into_iter()
            .filter(|(_, when)| match *when {
                Deleted::Since(ts) => ts <= cutoff,
                Deleted::AtCommit(v) => at(v) <= cutoff,
            })
            .map(|(k, _)| k)
            .collect();
        if erased.is_empty() {
            return Ok(None);
        }
        let reason =
            format!("{REASON}deleted more than {hours} hours ago ({DELETED_RETENTION_PROPERTY})");
        self.erase_keys(table, &erased, &reason).map(Some)
    }
}
