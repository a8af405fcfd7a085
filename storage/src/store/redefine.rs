//! Redefining a flow: the target is rebuilt from all its sources under the new definition, in
//! one commit that also writes the new catalog record, as Databricks rebuilds a streaming table
//! whose flow changed.
//!
//! Only definitions that keep what the table's history was computed with may change: the
//! target's columns, keys, storage mode and sequence types (its schema) and the fold rules
//! (`TRACK HISTORY`, `IGNORE NULL UPDATES`). The log holds each commit's events as its flow
//! prepared them, so the commits before the redefinition replay as they were applied, and the
//! rebuild's commit holds the events the new definition prepares; but a replay folds every
//! commit with the table's current rules, so a change of those would rewrite the past.

use super::commit::CommitInfo;
use super::flow_commit::Apply;
use super::Store;
use crate::error::{Error, Result};
use crate::flow::Flow;

impl Store {
    /// Replaces the definition of the flow named `flow.spec().name` and rebuilds its target from
    /// all the source data of all its flows, in one commit (operation `FLOW <names>`, parameters
    /// `full_refresh` and [`super::REDEFINED`]). A definition equal to the current one changes nothing
    /// and returns `None` (or the `ADD COLUMNS` commit of a table whose source gained columns,
    /// see [`Store::refresh`]). An error names what the new definition may not change; nothing is
    /// changed then, but for that `ADD COLUMNS` commit, which comes first and stands.
    pub fn redefine_flow(&self, flow: Flow) -> Result<Option<CommitInfo>> {
        let mut g = self.write_inner()?;
        let name = flow.spec.name.clone();
        let table = g.flow_table(&name)?;
        // A table whose source gained columns gains them first: the definition run again over
        // that source is then the one it has.
        let widened = g.widen_to_source(&table)?;
        g.ensure_replayed(&table)?;
        let t = g.tables.get_mut(&table).expect("the flow's table");
        let refuse = |what: &str| {
            Err(Error::InvalidQuery(format!(
                "flow `{name}` of `{table}` cannot be redefined with another {what}: drop the table and create it again (its history goes with it)"
            )))
        };
        if flow.spec.target != table {
            return refuse("target");
        }
        let at = t
            .flows
            .iter()
            .position(|f| f.spec.name == name)
            .expect("the flow of its table");
        let old = &t.flows[at];
        if old.spec == flow.spec {
            return Ok(widened);
        }
        if flow.target_schema() != t.state.schema {
            return refuse("target shape (columns, keys, storage mode or sequence types)");
        }
        if (&flow.tracked, &flow.ignore_null) != (&old.tracked, &old.ignore_null) {
            return refuse("TRACK HISTORY or IGNORE NULL UPDATES");
        }
        let old = std::mem::replace(&mut t.flows[at], flow);
        let record = t.record();
        let rebuilt = g.rebuild_from_sources(&table, Apply::Redefine(Box::new(record)));
        if rebuilt
            .as_ref()
            .is_err_and(|e| !matches!(e, Error::RetentionFailed { .. }))
        {
            // Nothing was written (or the store is poisoned): the old definition stands. (After
            // a retention failure the redefinition stands: its commit landed.)
            if let Some(t) = g.tables.get_mut(&table) {
                t.flows[at] = old;
            }
        }
        rebuilt.map(Some)
    }
}
