//! The record of one commit: what every table's and source table's log is made of. Plain data
//! with the counters of the engine; the store writes it (`store/commit.rs`, `store/chain.rs`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::engine::CommitMetrics;

/// One entry of a table's commit log (docs/SEMANTICS.md §7).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitInfo {
    /// 0, 1, 2, ... per table.
    pub version: u64,
    /// Commit time, µs since the epoch (UTC); strictly increasing per table.
    pub timestamp_us: i64,
    /// What wrote it: `CREATE TABLE`, `FLOW <name>`, ...
    pub operation: String,
    /// Parameters of the operation.
    pub parameters: BTreeMap<String, String>,
    /// Counters.
    pub metrics: CommitMetrics,
    /// Time spent applying and persisting, µs.
    pub duration_us: u64,
    /// The process's peak resident memory while the commit ran, in bytes: exact when the commit
    /// raised the process's high-water mark, else the highest sampled at its steps (Linux only;
    /// absent elsewhere, on commits that apply no events and write no source rows, and on
    /// commits written before it was measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_memory_bytes: Option<u64>,
    /// The commit's link in the table's hash chain (lower-case hex SHA-256; docs/FORMAT.md §3.8);
    /// absent on commits written before format 3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chain: Option<String>,
}

impl CommitInfo {
    /// A commit that applied no events (DDL, properties, VACUUM, a source append's record).
    pub(crate) fn bare(
        version: u64,
        timestamp_us: i64,
        operation: &str,
        parameters: BTreeMap<String, String>,
    ) -> Self {
        CommitInfo {
            version,
            timestamp_us,
            operation: operation.to_string(),
            parameters,
            metrics: CommitMetrics::default(),
            duration_us: 0,
            peak_memory_bytes: None,
            chain: None,
        }
    }
}
