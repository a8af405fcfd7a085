//! Rebuilding a table from its log: commit records in order, and their events replayed.

use super::commit::{delete_from, CommitInfo};
use super::records::{gc_property, SET_PROPERTIES};
use super::records::{parts_of, FULL_REFRESH};
use crate::engine::fold::Bytes;
use crate::engine::{CommitPart, Incoming, Logging, TableState};
use crate::error::{corrupt, Result};
use crate::format::keys::{self, key, parse_chunk, parse_version};
use crate::kv::KvStore;

/// A commit whose events are the compacted log of everything up to it (written by VACUUM).
pub(crate) const VACUUM_BASE: &str = "vacuum_base";

/// A table's commit records, in version order and without gaps.
pub(crate) fn load_commits(kv: &dyn KvStore, id: u32, table: &str) -> Result<Vec<CommitInfo>> {
    let mut commits: Vec<CommitInfo> = Vec::new();
    for kv in kv.scan_prefix(&key(keys::COMMIT, id, None, None)) {
        let (_, v) = kv?;
        let c: CommitInfo =
            serde_json::from_slice(&v).map_err(|e| corrupt(format!("commit record: {e}")))?;
        if let Some(prev) = commits.last() {
            if c.version != prev.version + 1 {
                return Err(corrupt(format!(
                    "table {table}: commit {} follows {}",
                    c.version, prev.version
                )));
            }
        } else if c.version != 0 && !c.parameters.contains_key(VACUUM_BASE) {
            return Err(corrupt(format!(
                "table {table}: the log starts at commit {} with no vacuum base",
                c.version
            )));
        }
        commits.push(c);
    }
    if commits.is_empty() {
        return Err(corrupt(format!("table {table} has no commit")));
    }
    Ok(commits)
}

/// The tombstone GC threshold in force after `commits` (the last one a property commit or a VACUUM
/// base set; `default` if none did).
pub(crate) fn gc_secs_in(commits: &[CommitInfo], default: u64) -> Result<u64> {
    let mut secs = default;
    for c in commits {
        if c.operation == SET_PROPERTIES || c.parameters.contains_key(VACUUM_BASE) {
            secs = gc_property(&c.parameters)?.unwrap_or(secs);
        }
    }
    Ok(secs)
}

/// About how many events of one commit a replay applies at a time (a few under test, so that the
/// unit tests replay in parts). 65,536 rather than 262,144: a 10M-event VACUUM peaked at 649 MiB
/// against 780 MiB, for about a tenth more CPU (docs/PERFORMANCE.md, session 39).
pub(crate) const REPLAY_PART: usize = if cfg!(test) { 5 } else { 1 << 16 };

/// How many keys a replayed full refresh resets at a time among those its events did not reach
/// (a few under test).
const RESET_KEYS: usize = if cfg!(test) { 2 } else { 4096 };

/// A full refresh being replayed: each part resets the keys its events reach before it is
/// applied, and the keys no event reached are reset when the commit's last part is done, a few
/// at a time. Resetting every key at once would thaw the whole table's history into memory. A
/// reset only retires rows, and each key's reset comes before its events, so the table is the
/// one the commit made (SEMANTICS.md §2.7).
struct FullRefresh {
    version: u64,
    ts: i64,
    /// The keys not reset yet.
    unreset: std::collections::BTreeSet<Bytes>,
}

impl FullRefresh {
    /// Begins the full refresh of commit `version` at `ts`: the state's table-wide part is reset.
    fn begin(state: &mut TableState, version: u64, ts: i64) -> FullRefresh {
        state.reset_table();
        FullRefresh {
            version,
            ts,
            unreset: state.keys.keys().cloned().collect(),
        }
    }

    /// Resets the keys of `events` not reset yet.
    fn reset_for(&mut self, state: &mut TableState, events: &[Incoming]) -> Result<()> {
        let keys: Vec<Bytes> = events
            .iter()
            .filter(|e| self.unreset.remove(&e.key))
            .map(|e| e.key.clone())
            .collect();
        state.reset_keys(self.version, self.ts, &keys)
    }

    /// Resets every key not reset yet, at once.
    fn reset_all(&mut self, state: &mut TableState) -> Result<()> {
        let keys: Vec<Bytes> = std::mem::take(&mut self.unreset).into_iter().collect();
        state.reset_keys(self.version, self.ts, &keys)
    }

    /// Resets the keys no event reached, [`RESET_KEYS`] at a time, each group followed by an
    /// empty part that puts their retired rows back in pages.
    fn finish(
        self,
        state: &mut TableState,
        after_part: &mut dyn FnMut(&mut TableState, Replayed) -> Result<()>,
    ) -> Result<()> {
        let keys: Vec<Bytes> = self.unreset.into_iter().collect();
        for group in keys.chunks(RESET_KEYS) {
            state.reset_keys(self.version, self.ts, group)?;
            state.apply_part(
                CommitPart {
                    incoming: Vec::new(),
                    truncates: Vec::new(),
                    version: self.version,
                    ts: self.ts,
                    logging: Logging::Replay,
                },
                &mut |_| {},
            )?;
            after_part(state, Replayed::default())?;
        }
        Ok(())
    }
}

/// Deletes the event blocks and row directories of commit `last + 1` and after, which no commit
/// record claims: a commit applied in parts (`store/flow_commit.rs`) that a crash stopped before
/// its last batch. (A directory left would be read as part of the commit that takes that version
/// next.) The pages it wrote ahead are left: no head lists them, so nothing reads them; a later
/// freeze of the same numbers overwrites them, and a rebuild or a drop of the table deletes them.
pub(crate) fn remove_unfinished(kv: &dyn KvStore, id: u32, last: u64) -> Result<()> {
    for tag in [keys::EVENTS, keys::ROW_DIR] {
        let prefix = key(tag, id, None, None);
        delete_from(kv, &prefix, &key(tag, id, Some(last + 1), None))?;
    }
    Ok(())
}

/// Which commits a replay applies.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ReplayRange {
    /// Only those after this one (the state holds the table at it: a checkpoint).
    pub after: Option<u64>,
    /// Only those up to this one.
    pub up_to: Option<u64>,
}

/// One part of a commit's events, as the log is replayed.
struct Part {
    version: u64,
    events: Vec<Incoming>,
    truncates: Vec<Bytes>,
    /// The event blocks it was read from.
    blocks: u64,
}

/// What one part of a replay applied: the event blocks it read (a rebuild's progress) and its
/// events (when a rebuild writes its heads ahead).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Replayed {
    pub blocks: u64,
    pub events: u64,
}

/// Replays a table's log into `state`: every data commit's events in `range`, in commit order,
/// through the same engine path as when they were first applied. The engine is
/// deterministic, so this rebuilds the timelines and every row version with the commits that
/// wrote and retired it. Property commits take effect where they are in the log. `after_part`
/// runs after each part applied, with what it applied (a rebuild writes the pages frozen so far,
/// and reports its progress).
pub(crate) fn replay_log(
    kv: &dyn KvStore,
    id: u32,
    state: &mut TableState,
    commits: &[CommitInfo],
    range: ReplayRange,
    after_part: &mut dyn FnMut(&mut TableState, Replayed) -> Result<()>,
) -> Result<()> {
    let ReplayRange { after, up_to } = range;
    let width = state.schema.columns.len();
    let mut settings = commits
        .iter()
        .filter(|c| after.is_none_or(|a| c.version > a))
        .filter(|c| c.operation == SET_PROPERTIES || c.parameters.contains_key(VACUUM_BASE))
        .peekable();
    // The last version replayed: a commit replayed in parts is reset (full refresh) only once.
    let mut last = None;
    let mut refresh: Option<FullRefresh> = None;
    // The timestamp of the last version replayed, whose tombstones are still to collect.
    let mut gc_due: Option<i64> = None;
    let mut replay = |state: &mut TableState, part: Part| -> Result<()> {
        let Part {
            version,
            events,
            truncates,
            blocks,
        } = part;
        while let Some(c) = settings.next_if(|c| {
            c.version < version || (c.version == version && c.parameters.contains_key(VACUUM_BASE))
        }) {
            if let Some(secs) = gc_property(&c.parameters)? {
                state.set_tombstone_gc_secs(secs);
            }
        }
        let c = commits
            .binary_search_by_key(&version, |c| c.version)
            .map(|i| &commits[i])
            .map_err(|_| corrupt(format!("events of missing commit {version}")))?;
        if last != Some(version) {
            // A full refresh resets what its events did not reach, and a commit's tombstones
            // are collected, after all its parts, as when it was applied.
            if let Some(r) = refresh.take() {
                r.finish(state, after_part)?;
            }
            if let Some(ts) = gc_due.take() {
                state.collect_tombstones_at(ts)?;
            }
            if c.parameters.contains_key(FULL_REFRESH) {
                refresh = Some(FullRefresh::begin(state, version, c.timestamp_us));
            }
        }
        if let Some(r) = &mut refresh {
            // A truncate refolds every key (and thaws them all): every key is reset before it,
            // as when the commit was applied.
            if truncates.is_empty() {
                r.reset_for(state, &events)?;
            } else {
                r.reset_all(state)?;
            }
        }
        last = Some(version);
        gc_due = Some(c.timestamp_us);
        let replayed = Replayed {
            blocks,
            events: events.len() as u64,
        };
        state.apply_part(
            CommitPart {
                incoming: events,
                truncates,
                version,
                ts: c.timestamp_us,
                logging: Logging::Replay,
            },
            &mut |_| {},
        )?;
        after_part(state, replayed)
    };
    // After a VACUUM the log starts with a base commit: every block up to it is its events.
    let base = commits
        .first()
        .filter(|c| c.parameters.contains_key(VACUUM_BASE))
        .map_or(0, |c| c.version);
    // Commits applied in parts, with the first block of each part (not a VACUUM base: its
    // blocks are those of every commit up to it).
    let mut parted = std::collections::HashMap::new();
    for c in commits.iter().filter(|c| c.version > base) {
        if let Some(starts) = parts_of(c)? {
            parted.insert(c.version, starts);
        }
    }
    let mut pending: Option<Part> = None;
    for kv in kv.scan_prefix(&key(keys::EVENTS, id, None, None)) {
        let (k, v) = kv?;
        let version = parse_version(&k)?.max(base);
        if up_to.is_some_and(|h| version > h) {
            break;
        }
        if after.is_some_and(|a| version <= a) {
            continue;
        }
        // A commit applied in parts is replayed in the same parts, so that its rows and keys
        // are numbered as when it was applied. Another is replayed in parts of about
        // REPLAY_PART events: a VACUUM base holds every event up to it, and one apply would hold
        // them all in memory at once. Parts of one commit give the same table: rows written by
        // one part and replaced by a later one are written and retired by the same version, so
        // no version ever shows them.
        let ends_part = |p: &Part| -> Result<bool> {
            Ok(p.version != version
                || match parted.get(&version) {
                    Some(starts) => starts.contains(&parse_chunk(&k)?),
                    None => p.events.len() >= REPLAY_PART,
                })
        };
        if let Some(p) = &pending {
            if ends_part(p)? {
                replay(state, pending.take().expect("pending"))?;
            }
        }
        let blk = crate::format::packed_events::decode_block(&v)?;
        let p = pending.get_or_insert_with(|| Part {
            version,
            events: Vec::new(),
            truncates: Vec::new(),
            blocks: 0,
        });
        p.events
            .extend(blk.events_from(state.log_narrowest, width)?);
        p.truncates
            .extend(blk.truncates.into_iter().map(Bytes::from));
        p.blocks += 1;
    }
    if let Some(p) = pending.take() {
        replay(state, p)?;
    }
    if let Some(r) = refresh {
        r.finish(state, after_part)?;
    }
    if let Some(ts) = gc_due {
        state.collect_tombstones_at(ts)?;
    }
    // Settings after the last data commit.
    for c in settings.filter(|c| up_to.is_none_or(|h| c.version <= h)) {
        if let Some(secs) = gc_property(&c.parameters)? {
            state.set_tombstone_gc_secs(secs);
        }
    }
    Ok(())
}
