//! Table properties (`TBLPROPERTIES`) and expectations: each change is a commit.

use std::collections::BTreeMap;

use super::chain::{put_commit, Link, Wrote};
use super::commit::{now_us, put_json, write_or_poison, CommitInfo};
use super::load::Load;
use super::records::{gc_property, TableRecord, SET_PROPERTIES, TOMBSTONE_GC_PROPERTY};
use super::retention::{check_retention, retention_period};
use super::{table_mut, Store};
use crate::error::Result;
use crate::expectation::{self, Expectation};
use crate::format::keys::{self, key};
use crate::kv::{KvStore, WriteBatch};

impl Store {
    /// Sets table properties (`ALTER STREAMING TABLE t SET TBLPROPERTIES (...)`): one commit
    /// (operation `SET TBLPROPERTIES`) that records them. [`TOMBSTONE_GC_PROPERTY`] takes effect
    /// from this commit on.
    pub fn set_properties(
        &self,
        table: &str,
        properties: BTreeMap<String, String>,
    ) -> Result<CommitInfo> {
        let gc = gc_property(&properties)?;
        let retention = retention_period(&properties)?;
        let mut g = self.write_inner()?;
        let inner = &mut *g;
        if retention.is_some() {
            check_retention(inner, inner.table(table)?)?;
        }
        let t = table_mut(&mut inner.tables, table)?;
        let mut all = t.properties.clone();
        all.extend(properties.clone());
        let mut rec = t.record();
        rec.properties = all.clone();
        let last = t.commits.last().expect("a commit");
        let mut commit = CommitInfo::bare(
            last.version + 1,
            now_us().max(last.timestamp_us + 1),
            SET_PROPERTIES,
            properties,
        );
        let prev = last.chain.clone();
        write_record_commit(
            inner.kv.as_ref(),
            &mut inner.poisoned,
            t.id,
            &rec,
            &mut commit,
            prev.as_deref(),
        )?;
        // A table not replayed yet takes the setting from this commit when it is.
        if let (Some(secs), Load::Replayed) = (gc, t.load) {
            t.state.set_tombstone_gc_secs(secs);
        }
        t.properties = all;
        t.commits.push(commit.clone());
        // A retention set applies from its commit on, to every key deleted long enough already;
        // other properties are no change of the table, and erase nothing.
        if retention.is_some() {
            inner.retention_after(table, commit.version, commit.timestamp_us)?;
        }
        Ok(commit)
    }

    /// Replaces the expectations of `table` (`CREATE OR REFRESH STREAMING TABLE t (CONSTRAINT
    /// ...)` on a table that exists): one commit (operation `SET EXPECTATIONS`). They apply from
    /// the next refresh on; the rows applied before stay. Each is checked against the source
    /// columns of every flow of the table first.
    pub fn set_expectations(
        &self,
        table: &str,
        expectations: Vec<Expectation>,
    ) -> Result<CommitInfo> {
        let mut g = self.write_inner()?;
        let inner = &mut *g;
        let t = table_mut(&mut inner.tables, table)?;
        for f in &t.flows {
            for e in &expectations {
                expectation::validate(table, e, &f.source_schema(), inner.evaluator.as_ref())?;
            }
        }
        let mut rec = t.record();
        rec.expectations = expectations.clone();
        let last = t.commits.last().expect("a commit");
        let parameters = expectations
            .iter()
            .map(|e| {
                (
                    format!("expectation.{}", e.name),
                    format!("{} ON VIOLATION {}", e.condition, e.on_violation),
                )
            })
            .collect();
        let mut commit = CommitInfo::bare(
            last.version + 1,
            now_us().max(last.timestamp_us + 1),
            "SET EXPECTATIONS",
            parameters,
        );
        let prev = last.chain.clone();
        write_record_commit(
            inner.kv.as_ref(),
            &mut inner.poisoned,
            t.id,
            &rec,
            &mut commit,
            prev.as_deref(),
        )?;
        t.expectations = expectations;
        t.commits.push(commit.clone());
        Ok(commit)
    }

    /// The expectations of `table`.
    pub fn expectations(&self, table: &str) -> Result<Vec<Expectation>> {
        Ok(self.read_inner()?.table(table)?.expectations.clone())
    }

    /// The table's properties (`SHOW TBLPROPERTIES`), the GC threshold always among them.
    pub fn properties(&self, table: &str) -> Result<BTreeMap<String, String>> {
        let g = self.read_replayed(table)?;
        let t = g.table(table)?;
        let mut p = t.properties.clone();
        p.entry(TOMBSTONE_GC_PROPERTY.to_string())
            .or_insert_with(|| (t.state.tombstone_gc_us / 1_000_000).to_string());
        Ok(p)
    }
}

/// Writes a table's rewritten catalog record and the commit that records the change, in one batch.
fn write_record_commit(
    kv: &dyn KvStore,
    poisoned: &mut Option<String>,
    id: u32,
    rec: &TableRecord,
    commit: &mut CommitInfo,
    prev: Option<&str>,
) -> Result<()> {
    let mut b = WriteBatch::default();
    put_json(&mut b, key(keys::TABLE, id, None, None), rec)?;
    let at = Link {
        tag: keys::COMMIT,
        id,
        prev,
        wrote: Wrote::Events,
    };
    put_commit(&mut b, at, commit)?;
    write_or_poison(kv, poisoned, b)
}
