//! The catalog record of a target table, and the table settings that commits record.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{corrupt, Error, Result};
use crate::expectation::Expectation;
use crate::flow::{FlowSpec, TableSchema};

/// The commit parameter that records how many source rows a flow has consumed.
pub const SOURCE_OFFSET: &str = "source_offset";

/// The commit parameter that marks a full refresh (the target was rebuilt).
pub const FULL_REFRESH: &str = "full_refresh";

/// The commit parameter of a commit applied in parts (`store/flow_commit.rs`): the first event
/// block of each part, comma-separated. A replay applies each part alone, as it was applied.
pub(crate) const PARTS: &str = "parts";

/// The first event block of each part of commit `c`, if it was applied in parts.
pub(crate) fn parts_of(c: &super::commit::CommitInfo) -> Result<Option<Vec<u32>>> {
    c.parameters
        .get(PARTS)
        .map(|p| {
            p.split(',')
                .map(|n| {
                    n.parse()
                        .map_err(|_| corrupt(format!("commit {}: parts `{p}`", c.version)))
                })
                .collect()
        })
        .transpose()
}

/// The commit parameter of a full refresh that rebuilt the target because a flow was redefined:
/// the flow's name ([`super::Store::redefine_flow`]).
pub const REDEFINED: &str = "redefined_flow";

/// The catalog record of a target table (JSON, under its `T` key).
#[derive(Serialize, Deserialize, Debug, PartialEq)]
pub(super) struct TableRecord {
    pub(super) name: String,
    pub(super) schema: TableSchema,
    pub(super) flows: Vec<FlowSpec>,
    /// `TBLPROPERTIES`, as last set.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(super) properties: BTreeMap<String, String>,
    /// The expectations on the rows its flows read, as last set.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) expectations: Vec<Expectation>,
    /// Its generated columns (`GENERATED ALWAYS AS (expr)`): computed from each event's values.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) generated: Vec<crate::generated::GeneratedColumn>,
    /// How many output columns it had before it first gained some (`ADD COLUMNS`): the events
    /// its log holds from before read NULL in the others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) widened_from: Option<usize>,
}

/// The table property that sets the SCD1 tombstone GC threshold (docs/SEMANTICS.md §6).
pub const TOMBSTONE_GC_PROPERTY: &str = "pipelines.cdc.tombstoneGCThresholdInSeconds";

/// The operation name of a commit that set table properties.
pub(crate) const SET_PROPERTIES: &str = "SET TBLPROPERTIES";

/// The GC threshold among `properties`, checked.
pub(crate) fn gc_property(properties: &BTreeMap<String, String>) -> Result<Option<u64>> {
    properties
        .get(TOMBSTONE_GC_PROPERTY)
        .map(|v| {
            v.trim().parse::<u64>().map_err(|_| {
                Error::InvalidQuery(format!(
                    "{TOMBSTONE_GC_PROPERTY} is a whole number of seconds, not `{v}`"
                ))
            })
        })
        .transpose()
}

/// The operation of an erasure's commits.
pub const ERASE: &str = "ERASE";

/// The parameter of an `ERASE` commit that says why it was made.
pub const ERASE_REASON: &str = "reason";

/// The parameter set on every commit record an ERASE rewrote: the version of that ERASE in the
/// same log.
pub const ERASED_BY: &str = "erased_by";
