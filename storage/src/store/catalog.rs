//! The catalog: target tables and their flows, views, dropping, and loading it all on open.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::record_batch::RecordBatch;

use super::chain::{put_commit, Link, Wrote};
use super::commit::{now_us, put_json, write_or_poison, CommitInfo};
use super::load::Load;
use super::pages;
use super::records::{gc_property, TableRecord};
use super::replay::{load_commits, remove_unfinished};
use super::retention::{check_retention_source, retention_period};
use super::sources::{remove_unclaimed_appends, remove_unclaimed_sources, WRITE};
use super::OpenMode;
use super::{Inner, Store, Table};
use crate::engine::TableState;
use crate::error::{corrupt, Error, FlowError, Result};
use crate::expectation::{self, Expectation};
use crate::flow::{Condition, Flow};
use crate::format::keys::{self, key, parse_version};
use crate::ingest::ConditionEvaluator;
use crate::kv::WriteBatch;
use crate::source::{SourceRecord, SourceTable};

/// What a table is created with besides its first flow.
#[derive(Clone, Debug, Default)]
pub struct TableOptions {
    /// `TBLPROPERTIES`; [`TOMBSTONE_GC_PROPERTY`] overrides the flow's GC threshold.
    pub properties: BTreeMap<String, String>,
    /// Expectations on the rows its flows read.
    pub expectations: Vec<Expectation>,
    /// Generated columns (`GENERATED ALWAYS AS (expr)`; an identity is refused): columns of the
    /// flow's source that its rows do not hold, computed from the others whenever rows are
    /// applied.
    pub generated: Vec<crate::generated::GeneratedColumn>,
}

impl Store {
    /// Creates a flow, and its target table if it does not exist yet (commit 0 of the table). A
    /// flow into an existing table must agree with it on mode, keys, columns and sequence types.
    pub fn create_flow(&self, flow: Flow) -> Result<()> {
        self.create_flow_with_properties(flow, BTreeMap::new())
    }

    /// [`Store::create_flow`], with table properties (`TBLPROPERTIES`) for the target when this
    /// flow creates it; [`TOMBSTONE_GC_PROPERTY`] overrides the flow's GC threshold. Properties
    /// for a target that exists already are refused (use [`Store::set_properties`]).
    pub fn create_flow_with_properties(
        &self,
        flow: Flow,
        properties: BTreeMap<String, String>,
    ) -> Result<()> {
        self.create_flow_with(
            flow,
            TableOptions {
                properties,
                ..Default::default()
            },
        )
    }

    /// [`Store::create_flow`], with the target's [`TableOptions`] when this flow creates it. The
    /// flow's conditions (`APPLY AS DELETE WHEN`, ...) and the expectations are checked against
    /// its source columns here, so that a missing column is refused now, not at a refresh.
    pub fn create_flow_with(&self, mut flow: Flow, options: TableOptions) -> Result<()> {
        let TableOptions {
            properties,
            expectations,
            generated,
        } = options;
        if let Some(secs) = gc_property(&properties)? {
            flow.spec.tombstone_gc_threshold_secs = secs;
        }
        retention_period(&properties)?;
        let mut g = self.write_inner()?;
        check_flow_conditions(&flow, g.evaluator.as_ref())?;
        let target_expectations = match g.tables.get(&flow.spec.target) {
            Some(t) => &t.expectations,
            None => &expectations,
        };
        for e in target_expectations {
            expectation::validate(
                &flow.spec.target,
                e,
                &flow.source_schema(),
                g.evaluator.as_ref(),
            )?;
        }
        let name = flow.spec.name.clone();
        if !properties.is_empty() && g.tables.contains_key(&flow.spec.target) {
            return Err(Error::InvalidQuery(format!(
                "`{}` exists already; set its properties with ALTER STREAMING TABLE ... SET TBLPROPERTIES",
                flow.spec.target
            )));
        }
        if g.tables
            .values()
            .any(|t| t.flows.iter().any(|f| f.spec.name == name))
        {
            return Err(Error::AlreadyExists { kind: "flow", name });
        }
        let target = flow.spec.target.clone();
        let schema = flow.target_schema();
        let inner = &mut *g;
        let retention = match inner.tables.get(&target) {
            Some(t) => retention_period(&t.properties)?,
            None => retention_period(&properties)?,
        };
        if let (Some(_), Some(source)) = (retention, &flow.spec.source_table) {
            check_retention_source(inner, &target, source)?;
        }
        match inner.tables.get_mut(&target) {
            Some(t) => {
                if t.state.schema != schema {
                    return Err(FlowError::TargetMismatch {
                        table: target,
                        detail: "mode, keys, output columns or sequence types differ".into(),
                    }
                    .into());
                }
                let mut rec = t.record();
                rec.flows.push(flow.spec.clone());
                let mut b = WriteBatch::default();
                put_json(&mut b, key(keys::TABLE, t.id, None, None), &rec)?;
                write_or_poison(inner.kv.as_ref(), &mut inner.poisoned, b)?;
                t.flows.push(flow);
            }
            None => {
                inner.name_is_free(&target)?;
                check_generated(&flow, &generated, inner.evaluator.as_ref())?;
                let id = inner.next_table_id;
                let rec = TableRecord {
                    name: target.clone(),
                    schema: schema.clone(),
                    flows: vec![flow.spec.clone()],
                    properties: properties.clone(),
                    expectations: expectations.clone(),
                    generated: generated.clone(),
                    widened_from: None,
                };
                let ts = now_us();
                let mut parameters = BTreeMap::from([
                    ("flow".to_string(), name.clone()),
                    ("stored_as".to_string(), schema.mode.to_string()),
                ]);
                for (k, v) in &properties {
                    parameters.insert(format!("property.{k}"), v.clone());
                }
                let mut commit = CommitInfo::bare(0, ts, "CREATE TABLE", parameters);
                let mut b = WriteBatch::default();
                put_json(&mut b, key(keys::TABLE, id, None, None), &rec)?;
                let at = Link {
                    tag: keys::COMMIT,
                    id,
                    prev: None,
                    wrote: Wrote::Events,
                };
                put_commit(&mut b, at, &mut commit)?;
                let mut state = TableState::new(
                    schema,
                    flow.tracked.clone(),
                    flow.ignore_null.clone(),
                    flow.spec.tombstone_gc_threshold_secs,
                    inner.cold_config(id),
                );
                pages::put_changes(&mut b, id, &mut state, 0, pages::Checkpoint::Now)?;
                write_or_poison(inner.kv.as_ref(), &mut inner.poisoned, b)?;
                inner.next_table_id += 1;
                inner.tables.insert(
                    target.clone(),
                    Table {
                        id,
                        name: target,
                        flows: vec![flow],
                        state,
                        load: Load::Replayed,
                        commits: vec![commit],
                        properties,
                        expectations,
                        generated,
                        widened_from: None,
                        generation: 0,
                        cold: inner.cold_config(id),
                        unsaved: 0,
                        recent_keys: Default::default(),
                        pins: Default::default(),
                    },
                );
            }
        }
        Ok(())
    }

    /// Keeps a view definition (`CREATE VIEW name AS ...`) with the database.
    pub fn create_view(&self, name: &str, sql: &str) -> Result<()> {
        let mut g = self.write_inner()?;
        let inner = &mut *g;
        inner.name_is_free(name)?;
        let mut b = WriteBatch::default();
        b.put(keys::view(name), sql.as_bytes().to_vec());
        write_or_poison(inner.kv.as_ref(), &mut inner.poisoned, b)?;
        inner.views.insert(name.to_string(), sql.to_string());
        Ok(())
    }

    /// The generated columns of target table `table` ([`TableOptions::generated`]).
    pub fn table_generated(&self, table: &str) -> Result<Vec<crate::generated::GeneratedColumn>> {
        let g = self.read_inner()?;
        let t = g.tables.get(table).ok_or_else(|| Error::NotFound {
            kind: "table",
            name: table.to_string(),
        })?;
        Ok(t.generated.clone())
    }

    /// The views: name and defining SQL.
    pub fn views(&self) -> Result<Vec<(String, String)>> {
        Ok(self
            .read_inner()?
            .views
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }

    /// Drops a table (target, source) or view and all its data. The catalog record goes first,
    /// with a record that the table is being dropped ([`keys::DROPPING`]); its other records go
    /// in batches after (a table of millions of keys is not one batch), and an open finishes a
    /// drop a stop interrupted.
    pub fn drop_table(&self, name: &str) -> Result<()> {
        let mut g = self.write_inner()?;
        let inner = &mut *g;
        let (id, tags): (u32, &[u8]) = if let Some(t) = inner.tables.get(name) {
            (t.id, &keys::TABLE_TAGS)
        } else if let Some(s) = inner.sources.get(name) {
            if let Some(t) = inner.tables.values().find(|t| {
                t.flows
                    .iter()
                    .any(|f| f.spec.source_table.as_deref() == Some(name))
            }) {
                return Err(Error::InvalidQuery(format!(
                    "source table `{name}` feeds `{}`; drop that first",
                    t.name
                )));
            }
            // An append flow's checkpoint counts this table's rows: a new table of its name would
            // be read from the wrong place.
            if let Some(t) = inner.sources.values().find(|t| {
                t.name != name
                    && t.append_flows
                        .iter()
                        .any(|f| f.source == name && f.reads == crate::source::StreamRead::Rows)
            }) {
                return Err(Error::InvalidQuery(format!(
                    "source table `{name}` feeds `{}` through an append flow; drop that first",
                    t.name
                )));
            }
            (s.id, &keys::SOURCE_TAGS)
        } else if inner.views.contains_key(name) {
            let mut b = WriteBatch::default();
            b.delete(keys::view(name));
            write_or_poison(inner.kv.as_ref(), &mut inner.poisoned, b)?;
            inner.views.remove(name);
            return Ok(());
        } else {
            return Err(Error::NotFound {
                kind: "table",
                name: name.to_string(),
            });
        };
        let mut b = WriteBatch::default();
        b.delete(key(tags[0], id, None, None));
        b.put(key(keys::DROPPING, id, None, None), Vec::new());
        // Reads of a source table under way stop rather than find its chunks gone.
        if inner.sources.contains_key(name) {
            inner.rewrites.bump();
        }
        write_or_poison(inner.kv.as_ref(), &mut inner.poisoned, b)?;
        inner.tables.remove(name);
        inner.sources.remove(name);
        // The rest, in batches: an error leaves it to the next open.
        finish_drop(inner.kv.as_ref(), id, tags)
            .inspect_err(|e| inner.poisoned = Some(e.to_string()))
    }
}

/// Deletes the records of table `id` under `tags` but the first (its catalog record, gone
/// already), in batches, then its [`keys::DROPPING`] record.
fn finish_drop(kv: &dyn crate::kv::KvStore, id: u32, tags: &[u8]) -> Result<()> {
    for &tag in &tags[1..] {
        let prefix = key(tag, id, None, None);
        super::commit::delete_from(kv, &prefix, &prefix)?;
    }
    let mut b = WriteBatch::default();
    b.delete(key(keys::DROPPING, id, None, None));
    kv.write(b)
}

/// Finishes the drops a stop interrupted ([`Store::drop_table`]): every record of each table
/// being dropped, whichever kind it was.
fn finish_drops(kv: &dyn crate::kv::KvStore) -> Result<()> {
    let mut ids = Vec::new();
    for pair in kv.scan_prefix(&[keys::DROPPING]) {
        let (k, _) = pair?;
        let id = k
            .get(1..5)
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
            .ok_or_else(|| corrupt("a record of a dropped table"))?;
        ids.push(u32::from_be_bytes(id));
    }
    for id in ids {
        let catalog = [keys::TABLE, keys::SOURCE].map(|tag| key(tag, id, None, None));
        // A binary that knows no `D` record may have given the id to a new table: its records
        // cannot be told from the dropped one's, and stay.
        let taken = catalog
            .iter()
            .map(|k| kv.get(k))
            .collect::<Result<Vec<_>>>()?;
        if taken.iter().all(Option::is_none) {
            for tags in [&keys::TABLE_TAGS[1..], &keys::SOURCE_TAGS[1..]] {
                for &tag in tags {
                    let prefix = key(tag, id, None, None);
                    super::commit::delete_from(kv, &prefix, &prefix)?;
                }
            }
        }
        let mut b = WriteBatch::default();
        // Deleting the catalog records (there are none) lets the manifest go of the table's
        // commits, should a rebuilt manifest have counted them (`asof repair`).
        if taken.iter().all(Option::is_none) {
            for k in catalog {
                b.delete(k);
            }
        }
        b.delete(key(keys::DROPPING, id, None, None));
        kv.write(b)?;
    }
    Ok(())
}

/// Checks the generated columns of a new target: expressions (an identity would number rows
/// by arrival, which a late event changes), each a column of the flow's source, computed from
/// its other columns.
fn check_generated(
    flow: &Flow,
    generated: &[crate::generated::GeneratedColumn],
    evaluator: Option<&Arc<dyn ConditionEvaluator>>,
) -> Result<()> {
    if let Some(g) = generated
        .iter()
        .find(|g| !matches!(g.generated, crate::generated::Generated::Expression(_)))
    {
        return Err(Error::InvalidQuery(format!(
            "`{}` of `{}` is {}: an AUTO CDC target takes no identity column (as in Databricks); use a generated expression or a key",
            g.column, flow.spec.target, g.generated
        )));
    }
    let spec = &flow.spec;
    for g in generated {
        let used = spec.keys.contains(&g.column)
            || spec.sequence_by.contains(&g.column)
            || spec.system_sequence_by.as_ref() == Some(&g.column);
        if used {
            return Err(Error::InvalidQuery(format!(
                "`{}` of `{}` is generated: it cannot be a key or a sequence",
                g.column, spec.target
            )));
        }
    }
    // The column is computed from each event's own values; merged rows would not match it.
    if let Some(g) = generated.first() {
        if spec.ignore_null_updates.is_some() || spec.columns_to_update.is_some() {
            return Err(Error::InvalidQuery(format!(
                "`{}` of `{}` is generated: IGNORE NULL UPDATES and COLUMNS TO UPDATE merge an event with the row before it, and the column would not follow the merged row; asof does not combine them",
                g.column, spec.target
            )));
        }
    }
    crate::generated::validate(&flow.spec.source, generated, evaluator)
}

/// Checks that a flow's SQL conditions evaluate on its source columns (a missing column, a
/// condition that is not a boolean), so that the flow is refused when it is created.
pub(crate) fn check_flow_conditions(
    flow: &Flow,
    evaluator: Option<&Arc<dyn ConditionEvaluator>>,
) -> Result<()> {
    let Some(ev) = evaluator else {
        return Ok(()); // nothing can evaluate them now; the first refresh will say
    };
    let empty = RecordBatch::new_empty(flow.source_schema());
    let spec = &flow.spec;
    for (clause, cond) in [
        ("APPLY AS DELETE WHEN", &spec.delete_when),
        ("APPLY AS TRUNCATE WHEN", &spec.truncate_when),
    ] {
        if let Some(Condition::Expr(expr)) = cond {
            ev.evaluate(expr, &empty).map_err(|problem| {
                Error::InvalidFlow(FlowError::InvalidCondition {
                    clause,
                    condition: expr.clone(),
                    problem,
                })
            })?;
        }
    }
    Ok(())
}

impl Inner {
    pub(super) fn load(&mut self) -> Result<()> {
        // A drop a stop interrupted: its catalog record is gone, its other records go now.
        finish_drops(self.kv.as_ref())?;
        let records: Vec<(Vec<u8>, Vec<u8>)> =
            self.kv.scan_prefix(&[keys::TABLE]).collect::<Result<_>>()?;
        let mut eager = Vec::new();
        for (k, v) in records {
            let id = k
                .get(1..5)
                .and_then(|b| b.try_into().ok())
                .map(u32::from_be_bytes)
                .ok_or_else(|| corrupt("short table key"))?;
            let rec: TableRecord =
                serde_json::from_slice(&v).map_err(|e| corrupt(format!("table record: {e}")))?;
            let flows: Vec<Flow> = rec
                .flows
                .into_iter()
                .map(|s| Flow::new(s).map_err(|e| corrupt(format!("stored flow: {e}"))))
                .collect::<Result<_>>()?;
            let first = flows.first().ok_or_else(|| corrupt("table without flow"))?;
            let mut state = TableState::new(
                rec.schema,
                first.tracked.clone(),
                first.ignore_null.clone(),
                first.spec.tombstone_gc_threshold_secs,
                self.cold_config(id),
            );
            if let Some(n) = rec.widened_from {
                state.log_narrowest = n;
            }
            let commits = load_commits(self.kv.as_ref(), id, &rec.name)?;
            if let Some(last) = commits.last() {
                remove_unfinished(self.kv.as_ref(), id, last.version)?;
            }
            pages::free_pages(self.kv.as_ref(), id)?;
            self.next_table_id = self.next_table_id.max(id + 1);
            let name = rec.name.clone();
            self.tables.insert(
                rec.name.clone(),
                Table {
                    id,
                    name: rec.name,
                    flows,
                    state,
                    commits,
                    properties: rec.properties,
                    expectations: rec.expectations,
                    generated: rec.generated,
                    widened_from: rec.widened_from,
                    generation: 0,
                    cold: self.cold_config(id),
                    load: Load::Pending,
                    unsaved: 0,
                    recent_keys: Default::default(),
                    pins: Default::default(),
                },
            );
            // Read now only when asked (once an erasure a stop interrupted is finished, below);
            // otherwise on first use (`Inner::ensure_replayed`).
            if self.open == OpenMode::Eager {
                eager.push(name);
            }
        }
        let records: Vec<(Vec<u8>, Vec<u8>)> = self
            .kv
            .scan_prefix(&[keys::SOURCE])
            .collect::<Result<_>>()?;
        for (k, v) in records {
            let id = k
                .get(1..5)
                .and_then(|b| b.try_into().ok())
                .map(u32::from_be_bytes)
                .ok_or_else(|| corrupt("short source key"))?;
            let rec: SourceRecord =
                serde_json::from_slice(&v).map_err(|e| corrupt(format!("source record: {e}")))?;
            let name = rec.name.clone();
            let mut src = SourceTable::from_record(id, rec);
            for kv in self.kv.scan_prefix(&key(keys::LOADED, id, None, None)) {
                let (_, v) = kv?;
                src.loaded
                    .insert(String::from_utf8(v).map_err(|_| corrupt("loaded name is not UTF-8"))?);
            }
            // The rows stay on disk, read by each reader (`source_rows`); the commit records
            // say how many there are: one `WRITE` commit per append.
            for kv in self
                .kv
                .scan_prefix(&key(keys::SOURCE_COMMIT, id, None, None))
            {
                let (_, v) = kv?;
                let c: CommitInfo = serde_json::from_slice(&v)
                    .map_err(|e| corrupt(format!("source commit record: {e}")))?;
                if crate::source_dml::appends_rows(&c, WRITE) {
                    src.appends += 1;
                    src.rows += c.metrics.num_upserted_rows;
                }
                src.history.push(c);
            }
            if src.full_history() {
                src.erased = crate::source::erased_positions(&src.history)?;
                // Chunks past the last append a record claims: a statement stopped before its
                // last batch (`sources::write_ahead`).
                let claimed = src
                    .history
                    .iter()
                    .filter_map(|c| match Wrote::of(keys::SOURCE_COMMIT, c) {
                        Wrote::Append(n) => Some(n + 1),
                        _ => None,
                    })
                    .max()
                    .unwrap_or(0);
                remove_unclaimed_appends(self.kv.as_ref(), id, claimed.max(src.appends))?;
            } else {
                // Written before source tables had commit records (or partly so): count the rows
                // and appends from the chunks and names themselves.
                src.rows = 0;
                src.appends = 0;
                let mut last = None;
                for kv in self.kv.scan_prefix(&key(keys::APPEND, id, None, None)) {
                    let (k, v) = kv?;
                    let append = parse_version(&k)?;
                    last = Some(append);
                    for b in SourceTable::decode_chunk(&v)? {
                        src.rows += b.num_rows() as u64;
                    }
                }
                let named = self
                    .kv
                    .scan_prefix(&key(keys::LOADED, id, None, None))
                    .map(|kv| kv.and_then(|(k, _)| parse_version(&k)))
                    .collect::<Result<Vec<u64>>>()?;
                src.appends = named
                    .into_iter()
                    .chain(last)
                    .map(|a| a + 1)
                    .max()
                    .unwrap_or(0);
            }
            // What DML statements did, whatever history the table has.
            let changes = crate::source_dml::changes_of(&src.history)?;
            src.deleted = changes.deleted;
            src.changed = changes.changed;
            self.next_table_id = self.next_table_id.max(id + 1);
            self.sources.insert(name, src);
        }
        // The chunks of a `CREATE TABLE ... AS SELECT` stopped before its last batch, under the
        // number the next table takes.
        remove_unclaimed_sources(self.kv.as_ref(), self.next_table_id)?;
        for kv in self.kv.scan_prefix(&keys::view("")) {
            let (k, v) = kv?;
            let name = String::from_utf8(k[1..].to_vec()).map_err(|_| corrupt("view name"))?;
            let sql = String::from_utf8(v).map_err(|_| corrupt("view text"))?;
            self.views.insert(name, sql);
        }
        for kv in self.kv.scan_prefix(&keys::schema("")) {
            let (k, v) = kv?;
            let name = String::from_utf8(k[1..].to_vec()).map_err(|_| corrupt("schema name"))?;
            let comment = String::from_utf8(v).map_err(|_| corrupt("schema comment"))?;
            self.schemas.insert(name, comment);
        }
        // An erasure a stop interrupted after it wrote its intent.
        self.finish_erasures()?;
        for name in eager {
            self.ensure_replayed(&name)?;
        }
        Ok(())
    }
}
