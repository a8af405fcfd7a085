//! A target that gains the columns its source gained (schema evolution, docs/SEMANTICS.md §11,
//! `schemaEvolutionMode`): when the source table of a flow has columns at its end that the flow's `COLUMNS`
//! selection takes (`*`, or `* EXCEPT` not naming them) and the target lacks, a refresh first
//! widens the target in one commit (operation `ADD COLUMNS`). The catalog record then holds the
//! flow over the wider source and the width the table had before (`widened_from`): the events
//! its log holds from before read NULL in the new columns, so rows written before read NULL in
//! them, and history is otherwise unchanged. The derived records are rebuilt from the log (rows
//! are stored in the table's width), which costs a replay of its whole log, once.
//!
//! A table fed by several flows, or with generated columns, keeps its columns (the flows would
//! disagree on its shape; generated columns sit after the flow's).

use std::collections::BTreeMap;

use super::chain::{put_commit, Link, Wrote};
use super::commit::{now_us, put_json, write_or_poison, CommitInfo};
use super::load::Load;
use super::pages;
use super::Inner;
use crate::engine::TableState;
use crate::error::Result;
use crate::flow::Flow;
use crate::format::keys::{self, key};
use crate::kv::WriteBatch;
use crate::source::ADD_COLUMNS;

impl Inner {
    /// Widens `table` to the columns the source of its flow gained, if it should (see the
    /// module); the `ADD COLUMNS` commit, or `None`.
    pub(super) fn widen_to_source(&mut self, table: &str) -> Result<Option<CommitInfo>> {
        let Some(flow) = self.widened_flow(table)? else {
            return Ok(None);
        };
        let kv = self.kv.clone();
        let t = self.tables.get_mut(table).expect("checked");
        let old = t.state.schema.clone();
        let new = flow.target_schema();
        let added: Vec<String> = new.columns[old.columns.len()..]
            .iter()
            .map(|(n, _)| n.clone())
            .collect();
        let narrowest = t.widened_from.unwrap_or(old.columns.len());
        let last = t.commits.last().expect("a commit");
        let mut commit = CommitInfo::bare(
            last.version + 1,
            now_us().max(last.timestamp_us + 1),
            ADD_COLUMNS,
            BTreeMap::from([("columns".to_string(), added.join(","))]),
        );
        let prev = last.chain.clone();
        let mut rec = t.record();
        rec.schema = new.clone();
        rec.flows = vec![flow.spec.clone()];
        rec.widened_from = Some(narrowest);
        // The record, the commit, and the summary's removal in one batch: the derived records
        // hold rows of the old width, and a table without a summary is rebuilt from its log.
        let mut b = WriteBatch::default();
        put_json(&mut b, key(keys::TABLE, t.id, None, None), &rec)?;
        let at = Link {
            tag: keys::COMMIT,
            id: t.id,
            prev: prev.as_deref(),
            wrote: Wrote::Events,
        };
        put_commit(&mut b, at, &mut commit)?;
        b.delete(key(keys::SUMMARY, t.id, None, None));
        write_or_poison(kv.as_ref(), &mut self.poisoned, b)?;
        let t = self.tables.get_mut(table).expect("checked");
        let mut state = TableState::new(
            new,
            flow.tracked.clone(),
            flow.ignore_null.clone(),
            flow.spec.tombstone_gc_threshold_secs,
            t.cold.clone(),
        );
        state.log_narrowest = narrowest;
        t.state = state;
        t.flows = vec![flow];
        t.widened_from = Some(narrowest);
        t.commits.push(commit.clone());
        t.generation += 1;
        t.recent_keys.clear();
        t.load = Load::Pending;
        // On an error memory is behind disk: refuse everything until the store is reopened.
        pages::rebuild(kv.as_ref(), t, self.progress.as_ref(), &self.checkpoints)
            .inspect_err(|e| self.poisoned = Some(e.to_string()))?;
        let t = self.tables.get_mut(table).expect("checked");
        t.load = Load::Replayed;
        t.unsaved = 0;
        Ok(Some(commit))
    }

    /// The flow of `table` over its source's columns now, if that widens the table.
    fn widened_flow(&self, table: &str) -> Result<Option<Flow>> {
        let t = self.table(table)?;
        let [f] = t.flows.as_slice() else {
            return Ok(None);
        };
        if !t.generated.is_empty() {
            return Ok(None);
        }
        let Some(src) = f
            .spec
            .source_table
            .as_ref()
            .and_then(|s| self.sources.get(s))
        else {
            return Ok(None);
        };
        let had = f.spec.source.len();
        if src.columns.len() <= had || src.columns[..had] != f.spec.source[..] {
            return Ok(None);
        }
        let mut spec = f.spec.clone();
        spec.source = src.columns.clone();
        // A new column the flow cannot take (a reserved name) leaves the table as it is.
        let Ok(wider) = Flow::new(spec) else {
            return Ok(None);
        };
        let (old, new) = (&t.state.schema, wider.target_schema());
        let n = old.columns.len();
        let widens = new.columns.len() > n
            && new.columns[..n] == old.columns[..]
            && (
                new.mode,
                &new.key_columns,
                &new.sequence,
                &new.system_sequence,
            ) == (
                old.mode,
                &old.key_columns,
                &old.sequence,
                &old.system_sequence,
            )
            && wider.tracked[..n] == f.tracked[..]
            && wider.ignore_null[..n] == f.ignore_null[..];
        Ok(widens.then_some(wider))
    }
}
