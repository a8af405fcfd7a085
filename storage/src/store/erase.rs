//! ERASE: removing every trace of some keys of a table (docs/SEMANTICS.md §12.2): their events,
//! their row versions on both timelines, their change-feed entries, the source rows they came
//! from, and the bytes of all of it in the store's files, while the hash chains stay verifiable.
//!
//! It first finds what it rewrites, without writing: the event blocks (`E`) of every commit that
//! held an event of those keys, the chunks (`A`) of every append of the table's sources that held
//! one of their rows (`erase_sources`), and the digests of those commits before. It writes that
//! down, its intent (`erase_intent`), in a batch of its own. Then it rewrites the blocks and
//! chunks in batches of at most 64 records and 16 MiB, each under its own key, and ends with one batch: the
//! records of the commits rewritten (marked `erased_by`; a DML statement's text is replaced), an
//! `ERASE` commit in the table's log (and one in each source's) that records, for each commit
//! it rewrote, its digest before and after (docs/FORMAT.md §3.8), the deletion of the table's
//! derived records and of the intent, and the purge record. Then the table is rebuilt from its
//! log, and the key-value files are rewritten without the deleted bytes
//! ([`crate::kv::KvStore::purge`]). An open finishes an erasure whose intent it finds, and a
//! purge a crash interrupted.

use std::collections::BTreeSet;

use super::chain::{self, put_commit, rewrote_parameter, Link, Rewrite, Wrote, REWROTE};
use super::commit::{count_keys, now_us, put_json, write_or_poison, CommitInfo};
use super::erase_intent::{self, Batches, Intent, Marked};
use super::erase_sources::{
    commit_source_erasure, readers_of_source, rewrite_chunks, source_flows, source_history,
    survey_source, ErasedRows,
};
use super::load::Load;
use super::pages::{self, Progressing};
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
use crate::progress::Reporter;
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
    /// Erases the encoded keys `erased` of `table` for `reason`: see [`Store::erase`]. Finds
    /// everything it rewrites first and writes that down (`erase_intent`); from then on an error
    /// poisons the store, and the next open finishes the erasure.
    pub(super) fn erase_keys(
        &mut self,
        table: &str,
        erased: &BTreeSet<Bytes>,
        reason: &str,
        rows: SourceRows,
    ) -> Result<EraseReport> {
        let t = self.table(table)?;
        let also_read_by = also_read_by(self, t);
        let nothing = EraseReport {
            version: None,
            keys: 0,
            events: 0,
            commits_rewritten: 0,
            source_rows: 0,
            also_read_by,
        };
        if erased.is_empty() {
            return Ok(EraseReport {
                also_read_by: Vec::new(),
                ..nothing
            });
        }
        let intent = survey(self, t, erased, reason, rows)?;
        if intent.events == 0 && intent.source_rows() == 0 {
            // None of the keys has anything in the table or its sources.
            return Ok(nothing);
        }
        let report = EraseReport {
            version: Some(intent.version),
            keys: intent.keys.len() as u64,
            events: intent.events,
            commits_rewritten: intent.commits_rewritten,
            source_rows: intent.source_rows(),
            ..nothing
        };
        let mut b = WriteBatch::default();
        intent.put(t.id, &mut b)?;
        write_or_poison(self.kv.as_ref(), &mut self.poisoned, b)?;
        self.carry_out(&intent)
            .inspect_err(|e| self.poisoned = Some(e.to_string()))?;
        Ok(report)
    }

    /// Finishes the erasures a stop interrupted (their intents are stored): the open calls it
    /// once the catalog is read.
    pub(super) fn finish_erasures(&mut self) -> Result<()> {
        for (id, intent) in erase_intent::unfinished(self.kv.as_ref())? {
            self.check_unfinished(id, &intent)?;
            self.carry_out(&intent)
                .inspect_err(|e| self.poisoned = Some(e.to_string()))?;
        }
        Ok(())
    }

    /// Refuses to finish `intent`, of table `id`, if the store changed since it was written (a
    /// binary that knows no intent opened it meanwhile): its table or a source has other commits
    /// than it was planned on.
    fn check_unfinished(&self, id: u32, intent: &Intent) -> Result<()> {
        let next = |last: Option<&CommitInfo>| last.map_or(0, |c| c.version + 1);
        let table = self.tables.get(&intent.table).filter(|t| t.id == id);
        let fits = table.is_some_and(|t| next(t.commits.last()) == intent.version)
            && intent.sources.iter().all(|cut| {
                self.sources
                    .get(&cut.name)
                    .is_some_and(|s| next(s.history.last()) == cut.version)
            });
        if fits {
            return Ok(());
        }
        Err(corrupt(format!(
            "an erasure of `{}` (its version {}) stopped before it ended, and the store changed since: it cannot be finished",
            intent.table, intent.version
        )))
    }

    /// Carries out `intent`, written already: rewrites its blocks and chunks in batches, then
    /// writes the commits' records and the `ERASE` commits in one batch that deletes the
    /// intent, rebuilds the table from its log and rewrites the key-value files without the
    /// bytes deleted. Each step may have been done before, by a run a stop interrupted.
    fn carry_out(&mut self, intent: &Intent) -> Result<()> {
        let kv = self.kv.clone();
        let kv = kv.as_ref();
        if intent.source_rows() > 0 {
            // Reads of the source tables under way stop rather than mix chunks before and after.
            self.rewrites.bump();
        }
        {
            let t = self.table(&intent.table)?;
            let chunks: usize = intent.sources.iter().map(|c| c.chunks.len()).sum();
            let total = (intent.blocks.len() + chunks) as u64;
            let task = format!("erasing from {}: rewriting its log and sources", t.name);
            let bar = Reporter::begin(self.progress.as_ref(), &task, total, PROGRESS_RECORDS);
            let mut w = Batches::new(kv, bar);
            rewrite_events(kv, t, intent, &mut w)?;
            for cut in &intent.sources {
                rewrite_chunks(kv, self.source(&cut.name)?, cut, &mut w)?;
            }
            w.finish()?;
            kv.write(commit_erasure(self, t, intent)?)?;
        }
        // Rebuild the table from its rewritten log (its rows change ids, as after VACUUM).
        let t = self.tables.get_mut(&intent.table).expect("checked");
        t.state = t.new_state();
        t.load = Load::Pending;
        t.generation += 1;
        t.recent_keys.clear();
        t.commits = load_commits(kv, t.id, &t.name)?;
        pages::rebuild(kv, t, self.progress.as_ref(), &self.checkpoints)?;
        t.load = Load::Replayed;
        t.unsaved = 0;
        for cut in &intent.sources {
            let src = self.sources.get_mut(&cut.name).expect("checked");
            src.erased.extend(&cut.positions);
            src.erased.sort_unstable();
            src.history = source_history(kv, src.id)?;
        }
        kv.purge()
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

/// What erasing `erased` from `t` (and, as `rows` says, from its sources) rewrites, read from
/// the store without writing anything.
fn survey(
    inner: &Inner,
    t: &Table,
    erased: &BTreeSet<Bytes>,
    reason: &str,
    rows: SourceRows,
) -> Result<Intent> {
    let kv = inner.kv.as_ref();
    let last = t.commits.last().expect("a commit");
    let version = last.version + 1;
    let Found {
        events,
        blocks,
        versions: touched,
        keys: found,
    } = find_events(kv, t, erased, inner.progress.as_ref())?;
    let base = t
        .commits
        .first()
        .filter(|c| c.parameters.contains_key(VACUUM_BASE));
    let mut commits = Vec::new();
    let mut in_base = false;
    for &v in &touched {
        if base.is_some_and(|c| v <= c.version) {
            in_base = true;
            continue;
        }
        let Ok(i) = t.commits.binary_search_by_key(&v, |c| c.version) else {
            continue;
        };
        commits.push(Marked::before(kv, keys::COMMIT, t.id, &t.commits[i])?);
    }
    let base = match (in_base, base) {
        (true, Some(base)) => Some(Marked {
            version: base.version,
            old: Some(chain::hex(&chain::base_digest(kv, t.id, base, None)?)),
        }),
        _ => None,
    };
    let mut sources = Vec::new();
    for (name, flows) in source_flows(t) {
        let src = inner.source(&name)?;
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
        };
        sources.extend(survey_source(kv, src, &to, inner.progress.as_ref())?);
    }
    Ok(Intent {
        table: t.name.clone(),
        version,
        timestamp_us: now_us().max(last.timestamp_us + 1),
        reason: reason.to_string(),
        keys: found.into_iter().map(|k| k.to_vec()).collect(),
        events,
        blocks,
        commits_rewritten: touched.len() as u64,
        commits,
        base,
        sources,
    })
}

/// Who else reads what an erasure of `t` removes: readers of its sources and of its change feed.
fn also_read_by(inner: &Inner, t: &Table) -> Vec<String> {
    let mut also_read_by = Vec::new();
    for (name, _) in source_flows(t) {
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
    also_read_by
}

/// The batch that ends an erasure of `t` whose blocks and chunks are rewritten: the records of
/// the commits it rewrote, marked, with their digests after; the `ERASE` commits of the table and
/// its sources; the deletion of the erased keys' heads and pages (a crash before the rebuild
/// must leave nothing of them for the purge to copy) and of the summary, so that the table is
/// rebuilt (which deletes the other derived records: row directories hold no values); the purge
/// record; and the deletion of the intent.
fn commit_erasure(inner: &Inner, t: &Table, intent: &Intent) -> Result<WriteBatch> {
    let kv = inner.kv.as_ref();
    let version = intent.version;
    let mut b = WriteBatch::default();
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
    let commit = |v: u64| {
        t.commits
            .binary_search_by_key(&v, |c| c.version)
            .map(|i| &t.commits[i])
            .map_err(|_| corrupt(format!("`{}` has no commit {v}", t.name)))
    };
    let mut rewrites = Vec::new();
    for m in &intent.commits {
        let marked = mark(commit(m.version)?);
        if let Some(old) = &m.old {
            let new = chain::stored_digest(kv, keys::COMMIT, t.id, &marked)?;
            rewrites.push(Rewrite {
                by: version,
                version: m.version,
                old: old.clone(),
                new: chain::hex(&new),
            });
        }
        put_json(
            &mut b,
            key(keys::COMMIT, t.id, Some(m.version), None),
            &marked,
        )?;
    }
    if let Some(m) = &intent.base {
        // A vacuum base holds every block up to it: its digest is the one VACUUM recorded.
        let marked = mark(commit(m.version)?);
        put_json(
            &mut b,
            key(keys::COMMIT, t.id, Some(m.version), None),
            &marked,
        )?;
        let new = chain::base_digest(kv, t.id, &marked, None)?;
        rewrites.push(Rewrite {
            by: version,
            version: m.version,
            old: m.old.clone().unwrap_or_default(),
            new: chain::hex(&new),
        });
    }
    for cut in &intent.sources {
        commit_source_erasure(
            kv,
            inner.source(&cut.name)?,
            cut,
            &intent.reason,
            &t.name,
            &mut b,
        )?;
    }
    let parameters = [
        (ERASE_REASON.to_string(), intent.reason.clone()),
        ("keys".to_string(), intent.keys.len().to_string()),
        ("events".to_string(), intent.events.to_string()),
        ("source_rows".to_string(), intent.source_rows().to_string()),
        (REWROTE.to_string(), rewrote_parameter(&rewrites)),
    ]
    .into_iter()
    .collect();
    let last = t.commits.last().expect("a commit");
    let mut commit = CommitInfo::bare(version, intent.timestamp_us, ERASE, parameters);
    let at = Link {
        tag: keys::COMMIT,
        id: t.id,
        prev: last.chain.as_deref(),
        wrote: Wrote::Events,
    };
    put_commit(&mut b, at, &mut commit)?;
    // One batch of every derived record cost sled 1.6 GB on a 1M-event table: the others go
    // with the rebuild.
    for k in &intent.keys {
        b.delete(keys::key_head(t.id, k));
        for p in kv.scan_prefix_keys(&keys::pages_of(t.id, k)) {
            b.delete(p?);
        }
    }
    b.delete(key(keys::SUMMARY, t.id, None, None));
    b.put(keys::PURGE_KEY.to_vec(), version.to_be_bytes().to_vec());
    b.delete(erase_intent::record_key(t.id));
    Ok(b)
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

/// The fewest blocks or chunks a step of an erasure reads for it to report its progress.
const PROGRESS_RECORDS: u64 = 16;

/// Where the events of some keys are in a table's log.
struct Found {
    events: u64,
    /// The keys of the blocks that hold one.
    blocks: Vec<Vec<u8>>,
    /// The commits whose blocks those are.
    versions: Vec<u64>,
    /// The erased keys that have events.
    keys: BTreeSet<Bytes>,
}

/// Finds the event blocks of `t` that hold an event of `erased`, reading a block at a time (a
/// load of 10M events is one commit: decoded whole it took gigabytes).
fn find_events(
    kv: &dyn KvStore,
    t: &Table,
    erased: &BTreeSet<Bytes>,
    progress: Option<&Progressing>,
) -> Result<Found> {
    let width = t.state.schema.columns.len();
    let prefix = key(keys::EVENTS, t.id, None, None);
    let total = count_keys(kv, &prefix)?;
    let task = format!("erasing from {}: finding the keys in its log", t.name);
    let bar = Reporter::begin(progress, &task, total, PROGRESS_RECORDS);
    let mut found = Found {
        events: 0,
        blocks: Vec::new(),
        versions: Vec::new(),
        keys: BTreeSet::new(),
    };
    for (read, pair) in kv.scan_prefix(&prefix).enumerate() {
        bar.advance(read as u64 + 1);
        let (k, bytes) = pair?;
        let block = decode_block(&bytes)?;
        let mut hits = 0;
        for e in block.events_from(t.state.log_narrowest, width)? {
            if erased.contains(&e.key) {
                hits += 1;
                if !found.keys.contains(&e.key) {
                    found.keys.insert(e.key.clone());
                }
            }
        }
        if hits == 0 {
            continue;
        }
        found.events += hits;
        let version = parse_version(&k)?;
        if found.versions.last() != Some(&version) {
            found.versions.push(version);
        }
        found.blocks.push(k);
    }
    Ok(found)
}

/// Rewrites each event block of `intent` without the events of its keys, under its own key
/// (the blocks keep their numbers, which the `parts` of a commit applied in parts name). A
/// block rewritten already holds none of them and is left as it is.
fn rewrite_events(kv: &dyn KvStore, t: &Table, intent: &Intent, w: &mut Batches<'_>) -> Result<()> {
    let width = t.state.schema.columns.len();
    let types = t.state.schema.column_types();
    let erased: BTreeSet<Bytes> = intent.keys.iter().map(|k| Bytes::from(k.clone())).collect();
    for k in &intent.blocks {
        w.visited();
        let bytes = kv
            .get(k)?
            .ok_or_else(|| corrupt(format!("an event block of `{}` is missing", t.name)))?;
        let block = decode_block(&bytes)?;
        let mut events = block.events_from(t.state.log_narrowest, width)?;
        let before = events.len();
        events.retain(|e| !erased.contains(&e.key));
        if events.len() == before {
            continue;
        }
        let truncates: Vec<Bytes> = block
            .truncates
            .iter()
            .map(|s| Bytes::from(s.clone()))
            .collect();
        let one = one_event_block(&events, &truncates, &types);
        w.put(k.clone(), encode_block(one, Codec::Small)?)?;
    }
    Ok(())
}
