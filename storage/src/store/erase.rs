//! ERASE: removing every trace of some keys of a table (docs/SEMANTICS.md §12.2): their events,
//! their row versions on both timelines, their change-feed entries, the source rows they came
//! from, and the bytes of all of it in the store's files, while the hash chains stay verifiable.
//!
//! One batch rewrites the event blocks (`E`) of every commit that held an event of those keys,
//! the chunks (`A`) of every append of the table's sources that held one of their rows
//! (`erase_sources`), and the records of the commits rewritten (marked `erased_by`; a DML
//! statement's text is replaced); it writes an `ERASE` commit in the table's log (and one in each
//! source's) that records, for each commit it rewrote, its digest before and after
//! (docs/FORMAT.md §3.8), deletes the table's derived records, and sets the purge record. Then the table is
//! rebuilt from its log, and the key-value files are rewritten without the deleted bytes
//! ([`crate::kv::KvStore::purge`]); an open finishes a purge a crash interrupted.

use std::collections::BTreeSet;

use super::chain::{self, put_commit, rewrote_parameter, Link, Rewrite, Wrote, REWROTE};
use super::commit::{now_us, put_json, write_or_poison, CommitInfo};
use super::erase_sources::{
    erase_source_rows, readers_of_source, source_flows, source_history, ErasedRows,
};
use super::load::Load;
use super::pages;
use super::records::{ERASE, ERASED_BY, ERASE_REASON};
use super::replay::{load_commits, VACUUM_BASE};
use super::{Inner, Store, Table};
use crate::engine::fold::Bytes;
use crate::error::{corrupt, Error, Result};
use crate::format::event_block::one_event_block;
use crate::format::keys::parse_version;
use crate::format::keys::{self, key};
use crate::format::packed_events::{decode_block, encode_block};
use crate::format::Codec;
use crate::keycodec::{decode_tuple, encode_tuple};
use crate::kv::{KvStore, WriteBatch};
use crate::value::Value;

/// What a DML commit's `statement` parameter says once an ERASE removed some of its events.
const REDACTED: &str = "[erased]";

/// Which rows of a table's source tables an erasure removes, among those that carry an erased
/// key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum SourceRows {
    /// Every one (`ERASE`: the keys must go, wherever they are).
    Every,
    /// Those a flow of the table has read (retention: a row not read yet is not part of the
    /// history that aged out; it comes in as a new key).
    Read,
}

/// What an ERASE did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EraseReport {
    /// The table's `ERASE` commit; `None` if no key matched, and nothing was changed.
    pub version: Option<u64>,
    /// Keys erased.
    pub keys: u64,
    /// Events removed from the log.
    pub events: u64,
    /// Commits whose events (and record) were rewritten.
    pub commits_rewritten: u64,
    /// Rows removed from the table's source tables.
    pub source_rows: u64,
    /// Tables that read what was erased, each with how (`t2 reads source s`): ERASE does not
    /// follow them, and they may still hold the keys' data.
    pub also_read_by: Vec<String>,
}

impl Store {
    /// The keys of `table`, decoded, in key order: every key that has events, deleted ones too.
    /// Read from the names of the key heads when the table is not in memory and its checkpoint
    /// is current (the table is not read); else from the table.
    pub fn table_keys(&self, table: &str) -> Result<Vec<Vec<Value>>> {
        {
            let g = self.read_inner()?;
            let t = g.table(table)?;
            let types = t.state.schema.key_types();
            if !t.load.in_memory() {
                if let Some(keys) = pages::key_list(g.kv.as_ref(), t)? {
                    return keys
                        .iter()
                        .map(|k| {
                            decode_tuple(k, &types)
                                .map_err(|e| corrupt(format!("a key of `{table}`: {e}")))
                        })
                        .collect();
                }
            }
        }
        let g = self.read_replayed(table)?;
        let t = g.table(table)?;
        let types = t.state.schema.key_types();
        t.state
            .key_list()
            .map(|k| {
                decode_tuple(k, &types).map_err(|e| corrupt(format!("a key of `{table}`: {e}")))
            })
            .collect()
    }

    /// Erases `keys` (values of the table's key columns, in order) from `table`, for `reason`:
    /// every version of those keys on both timelines, their events, their lineage and change
    /// feed, and the rows of the table's source tables that carry them, physically (the store's
    /// files are rewritten before this returns). An erasure is a commit (operation `ERASE`); the
    /// hash chains stay verifiable ([`Store::verify`]). Keys the table does not have are
    /// ignored. A reason is required; it is stored, so it must not hold what is erased.
    ///
    /// The sources' origins are opaque to the store: SQL's `ERASE` refuses a table fed by a
    /// snapshot flow (whose snapshots would bring the key back), and so should a caller of this.
    pub fn erase(&self, table: &str, keys: &[Vec<Value>], reason: &str) -> Result<EraseReport> {
        let mut g = self.write_inner()?;
        let inner = &mut *g;
        inner.table(table)?;
        let refuse = |problem: String| Error::InvalidErasure {
            table: table.to_string(),
            problem,
        };
        if reason.trim().is_empty() {
            return Err(refuse(
                "a reason is required (ERASE FROM t WHERE ... REASON '...'); it is kept in the table's history".into(),
            ));
        }
        // The table is not read: its log is, and it is rebuilt from it.
        let erased = encoded_keys(inner.table(table)?, keys).map_err(refuse)?;
        inner.erase_keys(table, &erased, reason, SourceRows::Every)
    }
}

impl Inner {
    /// Erases the encoded keys `erased` of `table` (replayed) for `reason`: see [`Store::erase`].
    pub(super) fn erase_keys(
        &mut self,
        table: &str,
        erased: &BTreeSet<Bytes>,
        reason: &str,
        rows: SourceRows,
    ) -> Result<EraseReport> {
        let inner = self;
        if erased.is_empty() {
            return Ok(EraseReport {
                version: None,
                keys: 0,
                events: 0,
                commits_rewritten: 0,
                source_rows: 0,
                also_read_by: Vec::new(),
            });
        }
        let plan = plan(inner, inner.table(table)?, erased, reason, rows)?;
        if plan.report.events == 0 && plan.report.source_rows == 0 {
            // None of the keys has anything in the table or its sources.
            return Ok(EraseReport {
                version: None,
                keys: 0,
                ..plan.report
            });
        }
        // Reads of the source tables under way stop rather than mix chunks before and after.
        if plan.report.source_rows > 0 {
            inner.rewrites.bump();
        }
        write_or_poison(inner.kv.as_ref(), &mut inner.poisoned, plan.batch)?;
        let report = plan.report;
        // Rebuild the table from its rewritten log (its rows change ids, as after VACUUM); on an
        // error memory is behind disk: refuse everything until the store is reopened.
        {
            let t = inner.tables.get_mut(table).expect("checked");
            t.state = t.new_state();
            t.load = Load::Pending;
            t.generation += 1;
            t.recent_keys.clear();
            let rebuilt = load_commits(inner.kv.as_ref(), t.id, &t.name).and_then(|commits| {
                t.commits = commits;
                pages::rebuild(
                    inner.kv.as_ref(),
                    t,
                    inner.progress.as_ref(),
                    &inner.checkpoints,
                )
            });
            rebuilt.inspect_err(|e| inner.poisoned = Some(e.to_string()))?;
            t.load = Load::Replayed;
            t.unsaved = 0;
        }
        for (name, positions) in plan.sources {
            let src = inner.sources.get_mut(&name).expect("planned");
            src.erased.extend(positions);
            src.erased.sort_unstable();
            src.history = source_history(inner.kv.as_ref(), src.id)
                .inspect_err(|e| inner.poisoned = Some(e.to_string()))?;
        }
        inner
            .kv
            .purge()
            .inspect_err(|e| inner.poisoned = Some(e.to_string()))?;
        Ok(report)
    }
}

/// The encoded keys among `keys` that `t` has; an error says which value does not fit.
fn encoded_keys(t: &Table, keys: &[Vec<Value>]) -> std::result::Result<BTreeSet<Bytes>, String> {
    let schema = &t.state.schema;
    let types = schema.key_types();
    let names = schema.key_names();
    let mut out = BTreeSet::new();
    for k in keys {
        if k.len() != types.len() {
            return Err(format!(
                "a key of `{}` has {} values ({}), not {}",
                t.name,
                types.len(),
                names.join(", "),
                k.len()
            ));
        }
        let mut values = Vec::with_capacity(k.len());
        for ((v, ty), name) in k.iter().zip(&types).zip(&names) {
            values.push(
                v.coerce(ty)
                    .map_err(|e| format!("column `{name}`: {e} (1 key)"))?,
            );
        }
        let enc = encode_tuple(values.iter(), &types).map_err(|e| format!("the key: {e}"))?;
        out.insert(Bytes::from(enc));
    }
    Ok(out)
}

/// The erasure, planned: one batch, the report, and the positions erased from each source.
struct Plan {
    batch: WriteBatch,
    report: EraseReport,
    sources: Vec<(String, Vec<u64>)>,
}

fn plan(
    inner: &Inner,
    t: &Table,
    erased: &BTreeSet<Bytes>,
    reason: &str,
    rows: SourceRows,
) -> Result<Plan> {
    let kv = inner.kv.as_ref();
    let last = t.commits.last().expect("a commit");
    let version = last.version + 1;
    let ts = now_us().max(last.timestamp_us + 1);
    let mut b = WriteBatch::default();

    // The table's log.
    let Removed {
        events,
        versions: touched,
        keys: found,
    } = rewrite_events(kv, t, erased, &mut b)?;
    let base = t
        .commits
        .first()
        .filter(|c| c.parameters.contains_key(VACUUM_BASE));
    let mut rewrites = Vec::new();
    let mut in_base = false;
    let mark = |c: &CommitInfo| {
        let mut marked = c.clone();
        if let Some(s) = marked.parameters.get_mut("statement") {
            *s = REDACTED.to_string();
        }
        marked
            .parameters
            .insert(ERASED_BY.to_string(), version.to_string());
        marked
    };
    for &v in &touched {
        if base.is_some_and(|c| v <= c.version) {
            in_base = true;
            continue;
        }
        let Ok(i) = t.commits.binary_search_by_key(&v, |c| c.version) else {
            continue;
        };
        let c = &t.commits[i];
        let marked = mark(c);
        if c.chain.is_some() {
            let old = chain::stored_digest(kv, keys::COMMIT, t.id, c, None)?;
            let new = chain::stored_digest(kv, keys::COMMIT, t.id, &marked, Some(&b))?;
            rewrites.push(Rewrite {
                by: version,
                version: v,
                old: chain::hex(&old),
                new: chain::hex(&new),
            });
        }
        put_json(&mut b, key(keys::COMMIT, t.id, Some(v), None), &marked)?;
    }
    if let (true, Some(base)) = (in_base, base) {
        // A vacuum base holds every block up to it: its digest is the one VACUUM recorded.
        let marked = mark(base);
        put_json(
            &mut b,
            key(keys::COMMIT, t.id, Some(base.version), None),
            &marked,
        )?;
        let old = chain::base_digest(kv, t.id, base, None)?;
        let new = chain::base_digest(kv, t.id, &marked, Some(&b))?;
        rewrites.push(Rewrite {
            by: version,
            version: base.version,
            old: chain::hex(&old),
            new: chain::hex(&new),
        });
    }

    // The table's sources.
    let mut also_read_by = Vec::new();
    let mut sources = Vec::new();
    let mut source_rows = 0;
    for (name, flows) in source_flows(t) {
        let src = inner.sources.get(&name).ok_or_else(|| Error::NotFound {
            kind: "source table",
            name: name.clone(),
        })?;
        erasable_by_position(&t.name, src)?;
        let through: Vec<u64> = flows
            .iter()
            .map(|f| match rows {
                SourceRows::Every => u64::MAX,
                SourceRows::Read => t.checkpoint(&f.spec.name).unwrap_or(0),
            })
            .collect();
        let to = ErasedRows {
            flows: &flows,
            through: &through,
            erased,
            evaluator: inner.evaluator.as_ref(),
            reason,
            table: &t.name,
        };
        let positions = erase_source_rows(kv, src, &to, &mut b)?;
        source_rows += positions.len() as u64;
        if !positions.is_empty() {
            sources.push((name.clone(), positions));
        }
        readers_of_source(inner, t, &name, &mut also_read_by);
    }
    for s in inner.sources.values() {
        for f in &s.append_flows {
            if f.source == t.name {
                also_read_by.push(format!(
                    "`{}` reads the change feed of `{}` (flow `{}`)",
                    s.name, t.name, f.name
                ));
            }
        }
    }
    also_read_by.sort();
    also_read_by.dedup();

    // The ERASE commit, the summary (the derived records are rebuilt), the purge record.
    let parameters = [
        (ERASE_REASON.to_string(), reason.to_string()),
        ("keys".to_string(), found.len().to_string()),
        ("events".to_string(), events.to_string()),
        ("source_rows".to_string(), source_rows.to_string()),
        (REWROTE.to_string(), rewrote_parameter(&rewrites)),
    ]
    .into_iter()
    .collect();
    let mut commit = CommitInfo::bare(version, ts, ERASE, parameters);
    let at = Link {
        tag: keys::COMMIT,
        id: t.id,
        prev: last.chain.as_deref(),
        wrote: Wrote::Events,
    };
    put_commit(&mut b, at, &mut commit)?;
    // The erased keys' heads and pages go in this batch (a crash before the rebuild must leave
    // nothing of them for the purge to copy), and the summary, so that the table is rebuilt
    // (which deletes the other derived records: row directories hold no values). One batch of
    // every derived record cost sled 1.6 GB on a 1M-event table.
    for k in &found {
        b.delete(keys::key_head(t.id, k));
        for p in kv.scan_prefix_keys(&keys::pages_of(t.id, k)) {
            b.delete(p?);
        }
    }
    b.delete(key(keys::SUMMARY, t.id, None, None));
    b.put(keys::PURGE_KEY.to_vec(), version.to_be_bytes().to_vec());
    Ok(Plan {
        batch: b,
        report: EraseReport {
            version: Some(version),
            keys: found.len() as u64,
            events,
            commits_rewritten: touched.len() as u64,
            source_rows,
            also_read_by,
        },
        sources,
    })
}

/// Refuses a source of `t` written before source tables had commit records: its rows cannot be
/// erased by position.
pub(super) fn erasable_by_position(table: &str, src: &crate::source::SourceTable) -> Result<()> {
    let full_history = src
        .history
        .first()
        .is_some_and(|c| c.version == 0 && c.operation == "CREATE TABLE");
    if full_history {
        return Ok(());
    }
    Err(Error::InvalidErasure {
        table: table.to_string(),
        problem: format!("source table `{}` was written before source tables had commit records, and its rows cannot be erased by position; nothing was changed", src.name),
    })
}

/// What [`rewrite_events`] took out of a table's log.
struct Removed {
    events: u64,
    /// The commits rewritten.
    versions: Vec<u64>,
    /// The erased keys that had events.
    keys: BTreeSet<Bytes>,
}

/// Rewrites, into `b`, each event block of `t` that holds an event of `erased`, without those
/// events, under its own key: a block at a time (a load of 10M events is one commit, decoded
/// whole it took gigabytes), and the blocks keep their numbers, which the `parts` of a commit
/// applied in parts name.
fn rewrite_events(
    kv: &dyn KvStore,
    t: &Table,
    erased: &BTreeSet<Bytes>,
    b: &mut WriteBatch,
) -> Result<Removed> {
    let width = t.state.schema.columns.len();
    let types = t.state.schema.column_types();
    let mut found = BTreeSet::new();
    let mut removed = 0u64;
    let mut touched: Vec<u64> = Vec::new();
    for pair in kv.scan_prefix(&key(keys::EVENTS, t.id, None, None)) {
        let (k, bytes) = pair?;
        let block = decode_block(&bytes)?;
        let mut events = block.events_from(t.state.log_narrowest, width)?;
        let before = events.len();
        events.retain(|e| {
            let gone = erased.contains(&e.key);
            if gone && !found.contains(&e.key) {
                found.insert(e.key.clone());
            }
            !gone
        });
        if events.len() == before {
            continue;
        }
        removed += (before - events.len()) as u64;
        let version = parse_version(&k)?;
        if touched.last() != Some(&version) {
            touched.push(version);
        }
        let truncates: Vec<Bytes> = block
            .truncates
            .iter()
            .map(|s| Bytes::from(s.clone()))
            .collect();
        let one = one_event_block(&events, &truncates, &types);
        b.put(k, encode_block(one, Codec::Small)?);
    }
    Ok(Removed {
        events: removed,
        versions: touched,
        keys: found,
    })
}
