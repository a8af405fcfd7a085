//! The CDC engine: applies validated events to a table's in-memory state and says which target
//! row versions a commit adds and retires. It does no I/O; [`crate::store`] makes commits durable.

pub(crate) mod cold;
pub(crate) mod fold;
pub(crate) mod lookup;
mod persist;
mod rows;

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::ops::Bound;
use std::sync::OnceLock;

use crate::error::Result;
use crate::flow::{StoredAs, TableSchema};
use crate::value::{ColumnType, Row};
use cold::{ColdStats, Frozen, Pages};
pub(crate) use cold::{PageSource, PageWrite};
use fold::{
    refold, Bytes, Event, EventMap, FoldRules, Limit, RowId, Timeline, TimelineDiff, Version,
};
pub(crate) use persist::Scope;
pub(crate) use rows::RowStore;
pub use rows::StoredRow;

pub(crate) use crate::record::Incoming;

/// The counters of one commit (docs/SEMANTICS.md §7).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CommitMetrics {
    /// Target row versions written.
    pub num_upserted_rows: u64,
    /// Target row versions removed.
    pub num_deleted_rows: u64,
    /// Source rows read.
    pub num_events_read: u64,
    /// Events that arrived after a later one of the same key (on business or system time).
    pub num_late_events: u64,
    /// Events identical to one already ingested, ignored.
    pub num_duplicates_ignored: u64,
    /// Different events with the same identity, resolved by docs/SEMANTICS.md §3.
    pub num_conflicts_resolved: u64,
    /// Keys whose tombstone was garbage-collected.
    pub num_tombstones_collected: u64,
    /// Source rows left out because they violate an expectation declared `ON VIOLATION DROP
    /// ROW` (absent from records written before expectations existed: 0).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub num_dropped_rows: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[derive(Default)]
pub(crate) struct KeyState {
    pub events: EventMap,
    pub timeline: Timeline,
    /// The key's row versions in memory (all but the frozen ones), in id order.
    pub rows: Vec<RowId>,
    /// Greatest system sequence among the key's events (bitemporal).
    pub max_sys: Option<Bytes>,
    /// SCD1: commit timestamp since which the key has been deleted.
    pub deleted_since: Option<i64>,
    /// Point-lookup index over past system times, built on first use. Boxed: most keys never
    /// build one, and the key map keeps its states inline, so a small state keeps it compact.
    pub lookup: OnceLock<Box<lookup::PointIndex>>,
    /// The part of `events`, `timeline` and `rows` moved to frozen pages ([`cold`]), if any.
    pub frozen: Option<Box<Frozen>>,
    /// The key's number, which its rows carry ([`RowStore::key_of`]).
    pub no: u32,
    /// The number of the key's next frozen page ([`cold`]).
    pub next_page: u32,
}

/// What one commit did to a table, for the commit log and the row blocks.
#[derive(Default, Debug)]
pub(crate) struct CommitEffects {
    /// Events that changed the event set, to be logged (empty on replay, which logs nothing).
    pub events: Vec<Incoming>,
    /// Whether to collect `events`.
    record: bool,
    pub truncates: Vec<Bytes>,
    /// Ids of the first row added; rows `first_row..rows.len()` are new.
    pub first_row: RowId,
    pub metrics: CommitMetrics,
}

enum Outcome {
    New,
    Duplicate,
    ConflictWon,
    ConflictLost,
}

fn insert_event(events: &mut EventMap, seq: &Bytes, sys: &Bytes, ev: Event) -> Outcome {
    let cands = events.entry(seq.clone()).or_default();
    match cands.binary_search_by(|(s, _)| s[..].cmp(&sys[..])) {
        Ok(i) => {
            let cur = &mut cands[i].1;
            if cur.same_as(&ev) {
                Outcome::Duplicate
            } else if ev.beats(cur) {
                *cur = ev;
                Outcome::ConflictWon
            } else {
                Outcome::ConflictLost
            }
        }
        Err(i) => {
            cands.insert(i, (sys.clone(), ev));
            Outcome::New
        }
    }
}

/// The in-memory state of one target table.
pub(crate) struct TableState {
    pub schema: TableSchema,
    pub tracked: Vec<bool>,
    pub ignore_null: Vec<bool>,
    pub tombstone_gc_us: i64,
    pub keys: BTreeMap<Bytes, KeyState>,
    /// Keys by number ([`KeyState::no`]).
    key_list: Vec<Bytes>,
    pub truncates: BTreeSet<Bytes>,
    pub rows: RowStore,
    gc_queue: VecDeque<(i64, Bytes)>,
    /// Where frozen key history goes ([`cold`]).
    pages: Pages,
    /// The keys changed since the store last persisted them ([`persist`]).
    dirty: Dirty,
    /// Sequences per key kept in memory after a freeze.
    hot_tail: usize,
    types: Vec<ColumnType>,
}

/// Where and how a table keeps the history commits no longer touch ([`cold`]).
#[derive(Clone)]
pub(crate) struct ColdConfig {
    /// Where frozen pages are read back once the store has written them (`None`: a state that is
    /// never persisted keeps them in memory).
    pub pages: Option<std::sync::Arc<dyn PageSource>>,
    /// Sequences per key kept in memory after a freeze.
    pub hot_tail: usize,
}

/// Which keys changed since the store last took the changes ([`persist`]).
#[derive(Debug)]
enum Dirty {
    Keys(BTreeSet<Bytes>),
    All,
}

impl Dirty {
    fn add(&mut self, key: &Bytes) {
        if let Dirty::Keys(keys) = self {
            keys.insert(key.clone());
        }
    }
}

/// A row computed by a system-time replay: (start, values, end, system start, system end).
type NewRow = (Bytes, Row, Option<Bytes>, Bytes, Option<Bytes>);

/// Marks a timeline version as "exists at the previous change point" during a replay.
const MARK: RowId = RowId::MAX;

impl TableState {
    pub fn new(
        schema: TableSchema,
        tracked: Vec<bool>,
        ignore_null: Vec<bool>,
        gc_secs: u64,
        cold: ColdConfig,
    ) -> Self {
        TableState {
            types: schema.columns.iter().map(|(_, t)| t.clone()).collect(),
            pages: Pages::new(cold.pages),
            dirty: Dirty::Keys(BTreeSet::new()),
            hot_tail: cold.hot_tail.max(1),
            schema,
            tracked,
            ignore_null,
            tombstone_gc_us: i64::try_from(gc_secs.saturating_mul(1_000_000)).unwrap_or(i64::MAX),
            keys: BTreeMap::new(),
            key_list: Vec::new(),
            truncates: BTreeSet::new(),
            rows: RowStore::default(),
            gc_queue: VecDeque::new(),
        }
    }

    /// Changes the tombstone GC threshold from now on (`TBLPROPERTIES`).
    pub fn set_tombstone_gc_secs(&mut self, secs: u64) {
        self.tombstone_gc_us = i64::try_from(secs.saturating_mul(1_000_000)).unwrap_or(i64::MAX);
    }

    fn mode(&self) -> StoredAs {
        self.schema.mode
    }

    /// Every event the state holds (the candidates of every key, and the truncates): applied in
    /// one commit to an empty state they give this state back (docs/SEMANTICS.md §3: the table depends only on
    /// the set of events). VACUUM compacts the log this way.
    pub fn event_set(&self) -> Result<(Vec<Incoming>, Vec<Bytes>)> {
        let mut out = Vec::new();
        let width = self.types.len();
        for (key, ks) in &self.keys {
            for e in ks.frozen_events(key, &self.pages, width)? {
                out.push(Incoming {
                    key: key.clone(),
                    ..e
                });
            }
            for (seq, cands) in &ks.events {
                for (sys, ev) in cands {
                    out.push(Incoming {
                        key: key.clone(),
                        seq: seq.clone(),
                        sys: sys.clone(),
                        event: ev.clone(),
                    });
                }
            }
        }
        Ok((out, self.truncates.iter().cloned().collect()))
    }

    /// The frozen rows of `key` (whose state is `ks`), read back, in id order.
    pub fn cold_rows(&self, key: &Bytes, ks: &KeyState) -> Result<cold::ColdRows> {
        let width = self.types.len();
        let mut rows = Vec::new();
        for b in ks.frozen_rows(key, &self.pages)? {
            rows.extend(b.rows(key, width)?);
        }
        rows.sort_by_key(|r| r.0);
        Ok(rows)
    }

    /// The frozen rows of `key` (whose state is `ks`), decoded for a scan.
    pub fn cold_batch(
        &self,
        key: &Bytes,
        ks: &KeyState,
    ) -> Result<crate::format::cold_page::ColdBatch> {
        crate::format::cold_page::ColdBatch::new(
            key.clone(),
            self.types.len(),
            ks.frozen_rows(key, &self.pages)?,
        )
    }

    /// The key numbered `no` ([`KeyState::no`]).
    pub fn key_by_no(&self, no: u32) -> Option<(&Bytes, &KeyState)> {
        let key = self.key_list.get(no as usize)?;
        self.keys.get_key_value(key)
    }

    /// Brings every key's frozen history back into memory.
    fn thaw_all(&mut self) -> Result<()> {
        let width = self.types.len();
        self.dirty = Dirty::All;
        for (key, ks) in self.keys.iter_mut() {
            ks.thaw(key, &mut self.rows, &mut self.pages, width)?;
        }
        Ok(())
    }

    /// The sizes of the table's cold history.
    pub fn cold_stats(&self) -> ColdStats {
        let mut stats = ColdStats::default();
        for ks in self.keys.values() {
            stats.hot_events += ks.events.len() as u64;
            if let Some(f) = &ks.frozen {
                f.add_stats(&mut stats);
            }
        }
        self.pages.add_stats(&mut stats);
        stats
    }

    /// Forgets every event and retires every current row, by commit `version` (a full refresh
    /// rebuilds the table from its source this way). Every key is thawed first, so the error is
    /// a page's; the state must then not be used.
    pub fn reset(&mut self, version: u64) -> Result<u64> {
        self.thaw_all()?;
        let live: Vec<RowId> = self.rows.live.iter().collect();
        for &r in &live {
            self.rows.retire(r, version);
        }
        for ks in self.keys.values_mut() {
            ks.events.clear();
            ks.timeline.clear();
            ks.max_sys = None;
            ks.deleted_since = None;
            ks.lookup = OnceLock::new();
        }
        self.truncates.clear();
        self.gc_queue.clear();
        Ok(live.len() as u64)
    }

    /// Applies one commit's events. `truncates` are SCD1 truncate sequences. With `record`, the
    /// effects list the events that changed the event set, for the log; a replay of the log
    /// passes `false` and so never holds a second copy of a commit's events.
    ///
    /// Keys whose change reaches into their frozen history are thawed first, and keys that grew
    /// past their hot tail are frozen after ([`cold`]). An error comes from reading a page; the
    /// state may then be half-applied, and the caller must stop using it.
    pub fn apply(
        &mut self,
        mut incoming: Vec<Incoming>,
        truncates: Vec<Bytes>,
        version: u64,
        ts: i64,
        record: bool,
        tick: &mut dyn FnMut(u64),
    ) -> Result<CommitEffects> {
        incoming.sort_by(|a, b| a.key.cmp(&b.key));
        self.thaw_for(&incoming, !truncates.is_empty())?;
        let touched: Vec<Bytes> = {
            let mut keys: Vec<Bytes> = incoming.iter().map(|e| e.key.clone()).collect();
            keys.dedup();
            keys
        };
        let mut fx = self.apply_thawed(incoming, truncates, version, ts, record, tick);
        if self.mode() == StoredAs::Scd1 {
            self.collect_tombstones(ts, &mut fx)?;
        }
        for key in &touched {
            self.dirty.add(key);
            if let Some(ks) = self.keys.get_mut(key) {
                ks.freeze(
                    key,
                    &mut self.rows,
                    &mut self.pages,
                    &self.types,
                    self.hot_tail,
                )?;
            }
        }
        Ok(fx)
    }

    /// Thaws every key whose frozen history this commit's events (sorted by key) would read:
    /// events at or before a key's `hot_from`, bitemporal events late on system time, and, for a
    /// truncate, every key.
    fn thaw_for(&mut self, incoming: &[Incoming], truncates: bool) -> Result<()> {
        if truncates {
            return self.thaw_all();
        }
        let width = self.types.len();
        for evs in incoming.chunk_by(|a, b| a.key == b.key) {
            let key = &evs[0].key;
            let Some(ks) = self.keys.get_mut(key) else {
                continue;
            };
            if evs
                .iter()
                .any(|e| ks.needs_thaw_at(&e.seq) || ks.needs_thaw_since(&e.sys))
            {
                ks.thaw(key, &mut self.rows, &mut self.pages, width)?;
            }
        }
        Ok(())
    }

    /// [`TableState::apply`] once no key it touches is frozen.
    fn apply_thawed(
        &mut self,
        incoming: Vec<Incoming>,
        truncates: Vec<Bytes>,
        version: u64,
        ts: i64,
        record: bool,
        tick: &mut dyn FnMut(u64),
    ) -> CommitEffects {
        let mut fx = CommitEffects {
            first_row: self.rows.len() as RowId,
            record,
            ..Default::default()
        };
        fx.metrics.num_events_read = (incoming.len() + truncates.len()) as u64;
        let tracked = std::mem::take(&mut self.tracked);
        let ignore_null = std::mem::take(&mut self.ignore_null);
        let rules = FoldRules {
            tracked: &tracked,
            ignore_null: &ignore_null,
            any_ignore_null: ignore_null.iter().any(|&b| b),
        };

        // Truncates first: each is a delete at its sequence for every key, known or not yet.
        for t in truncates {
            if self.truncates.contains(&t) {
                fx.metrics.num_duplicates_ignored += 1;
                continue;
            }
            if self
                .truncates
                .iter()
                .next_back()
                .is_some_and(|m| m[..] > t[..])
            {
                fx.metrics.num_late_events += 1;
            }
            self.truncates.insert(t.clone());
            self.dirty = Dirty::All;
            let mode = self.schema.mode;
            for (key, ks) in self.keys.iter_mut() {
                let mut diff = TimelineDiff::default();
                refold(
                    &mut ks.timeline,
                    &ks.events,
                    &self.truncates,
                    Limit::None,
                    &rules,
                    &t,
                    &t,
                    false,
                    &mut diff,
                );
                emit_scd_rows(&mut self.rows, mode, key, ks, diff, version, &mut fx);
                note_tombstone(&mut self.gc_queue, key, ks, ts);
            }
            fx.truncates.push(t);
        }

        let mut incoming = incoming.into_iter().peekable();
        let (mut done, mut reported) = (0u64, 0u64);
        while let Some(first) = incoming.next() {
            let key = first.key.clone();
            let mut evs = vec![first];
            while let Some(e) = incoming.next_if(|e| e.key == key) {
                evs.push(e);
            }
            done += evs.len() as u64;
            if done - reported >= 16 * 1024 {
                tick(done);
                reported = done;
            }
            let mode = self.schema.mode;
            let ks = key_state(&mut self.keys, &mut self.key_list, &key);
            match mode {
                StoredAs::Bitemporal => {
                    apply_key_bitemporal(&mut self.rows, &key, ks, evs, &rules, version, &mut fx)
                }
                _ => {
                    apply_key_scd(
                        &mut self.rows,
                        mode,
                        &self.truncates,
                        &key,
                        ks,
                        evs,
                        &rules,
                        version,
                        &mut fx,
                    );
                    if mode == StoredAs::Scd1 {
                        note_tombstone(&mut self.gc_queue, &key, ks, ts);
                    }
                }
            }
        }
        self.tracked = tracked;
        self.ignore_null = ignore_null;
        fx.metrics.num_upserted_rows = self.rows.len() as u64 - u64::from(fx.first_row);
        fx
    }

    /// SCD1: forgets the events of keys deleted for longer than the GC threshold (their rows
    /// stay, as history). A frozen key is thawed first, since its pages hold rows too.
    fn collect_tombstones(&mut self, now: i64, fx: &mut CommitEffects) -> Result<()> {
        let width = self.types.len();
        while let Some((ts, _)) = self.gc_queue.front() {
            if now.saturating_sub(*ts) <= self.tombstone_gc_us {
                break;
            }
            let (ts, key) = self.gc_queue.pop_front().expect("front");
            if let Some(ks) = self.keys.get_mut(&key) {
                if ks.deleted_since == Some(ts) {
                    self.dirty.add(&key);
                    ks.thaw(&key, &mut self.rows, &mut self.pages, width)?;
                    ks.events.clear();
                    ks.timeline.clear();
                    ks.max_sys = None;
                    ks.deleted_since = None;
                    fx.metrics.num_tombstones_collected += 1;
                }
            }
        }
        Ok(())
    }

    /// Keys in `range`, in key order.
    pub fn key_range(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
    ) -> impl Iterator<Item = (&Bytes, &KeyState)> {
        self.keys.range::<[u8], _>((lo, hi))
    }
}

/// The state of `key`, created (and numbered in `list`) if new.
fn key_state<'a>(
    keys: &'a mut BTreeMap<Bytes, KeyState>,
    list: &mut Vec<Bytes>,
    key: &Bytes,
) -> &'a mut KeyState {
    keys.entry(key.clone()).or_insert_with(|| {
        list.push(key.clone());
        KeyState {
            no: (list.len() - 1) as u32,
            ..Default::default()
        }
    })
}

/// Inserts one event into the key's events, counting what happened. Returns whether the event
/// set changed, and whether the event was appended after all others of the key.
fn insert_one(ks: &mut KeyState, inc: Incoming, fx: &mut CommitEffects) -> Option<bool> {
    // Appending after every known sequence is the common case: one lookup of the last entry.
    let last_seq_cmp = ks
        .events
        .last_key_value()
        .map(|(m, _)| m[..].cmp(&inc.seq[..]));
    let late_biz = last_seq_cmp == Some(std::cmp::Ordering::Greater);
    let late_sys = !inc.sys.is_empty() && ks.max_sys.as_ref().is_some_and(|m| m[..] > inc.sys[..]);
    let outcome = if last_seq_cmp.is_none_or(|o| o == std::cmp::Ordering::Less) {
        ks.events.insert(
            inc.seq.clone(),
            smallvec::smallvec![(inc.sys.clone(), inc.event.clone())],
        );
        Outcome::New
    } else {
        insert_event(&mut ks.events, &inc.seq, &inc.sys, inc.event.clone())
    };
    let appended = last_seq_cmp.is_none_or(|o| o == std::cmp::Ordering::Less);
    match outcome {
        Outcome::Duplicate => {
            fx.metrics.num_duplicates_ignored += 1;
            None
        }
        Outcome::ConflictLost => {
            fx.metrics.num_conflicts_resolved += 1;
            None
        }
        o => {
            if matches!(o, Outcome::ConflictWon) {
                fx.metrics.num_conflicts_resolved += 1;
            }
            if late_biz || late_sys {
                fx.metrics.num_late_events += 1;
            }
            if ks.max_sys.as_ref().is_none_or(|m| m[..] < inc.sys[..]) {
                ks.max_sys = Some(inc.sys.clone());
            }
            if fx.record {
                fx.events.push(inc);
            }
            Some(appended)
        }
    }
}

/// SCD1 / SCD2: insert the key's events one by one, refolding what each changes.
#[allow(clippy::too_many_arguments)]
fn apply_key_scd(
    rows: &mut RowStore,
    mode: StoredAs,
    truncates: &BTreeSet<Bytes>,
    key: &Bytes,
    ks: &mut KeyState,
    mut evs: Vec<Incoming>,
    rules: &FoldRules<'_>,
    version: u64,
    fx: &mut CommitEffects,
) {
    evs.sort_by(|a, b| a.seq.cmp(&b.seq));
    let mut diff = TimelineDiff::default();
    for inc in evs {
        let seq = inc.seq.clone();
        if let Some(appended) = insert_one(ks, inc, fx) {
            refold(
                &mut ks.timeline,
                &ks.events,
                truncates,
                Limit::None,
                rules,
                &seq,
                &seq,
                appended,
                &mut diff,
            );
        }
    }
    emit_scd_rows(rows, mode, key, ks, diff, version, fx);
}

fn emit_scd_rows(
    rows: &mut RowStore,
    mode: StoredAs,
    key: &Bytes,
    ks: &mut KeyState,
    diff: TimelineDiff,
    version: u64,
    fx: &mut CommitEffects,
) {
    if diff.is_empty() {
        return;
    }
    ks.lookup = OnceLock::new();
    for (_, v) in diff.removed {
        if let Some(r) = v.row {
            retire(rows, r, version, fx);
        }
    }
    let scd2 = mode == StoredAs::Scd2;
    for start in diff.added {
        let open = ks.timeline.get(&start).is_some_and(|v| v.end.is_none());
        if !scd2 && !open {
            continue; // SCD1 shows only the open version.
        }
        show_version(rows, key, ks, &start, scd2, None, version);
    }
}

/// Retires row `r` by commit `version`, and counts it.
fn retire(rows: &mut RowStore, r: RowId, version: u64, fx: &mut CommitEffects) {
    rows.retire(r, version);
    fx.metrics.num_deleted_rows += 1;
}

/// Writes a row showing the timeline version at `start` (with its business interval when
/// `business`, open on system time from `sys_start` when given) and links the version to it.
fn show_version(
    rows: &mut RowStore,
    key: &Bytes,
    ks: &mut KeyState,
    start: &Bytes,
    business: bool,
    sys_start: Option<Bytes>,
    version: u64,
) {
    let v = ks
        .timeline
        .get_mut(start)
        .expect("the version is in the timeline");
    let id = rows.push(
        StoredRow {
            key: key.clone(),
            values: v.values.clone(),
            start: business.then(|| start.clone()),
            end: if business { v.end.clone() } else { None },
            sys_start,
            sys_end: None,
            added: version,
            retired: None,
        },
        ks.no,
    );
    v.row = Some(id);
    ks.rows.push(id);
}

fn note_tombstone(gc_queue: &mut VecDeque<(i64, Bytes)>, key: &Bytes, ks: &mut KeyState, ts: i64) {
    let live = ks
        .timeline
        .values()
        .next_back()
        .is_some_and(|v| v.end.is_none());
    if live {
        ks.deleted_since = None;
    } else if ks.deleted_since.is_none() && !ks.events.is_empty() {
        ks.deleted_since = Some(ts);
        gc_queue.push_back((ts, key.clone()));
    }
}

/// BITEMPORAL: events newer on system time than all of the key's extend its history at the end;
/// anything else replays the key's system history from the earliest system time it touches.
fn apply_key_bitemporal(
    rows: &mut RowStore,
    key: &Bytes,
    ks: &mut KeyState,
    mut evs: Vec<Incoming>,
    rules: &FoldRules<'_>,
    version: u64,
    fx: &mut CommitEffects,
) {
    ks.lookup = OnceLock::new();
    evs.sort_by(|a, b| (&a.sys, &a.seq).cmp(&(&b.sys, &b.seq)));
    let t_min = evs[0].sys.clone();
    let in_order = ks.max_sys.as_ref().is_none_or(|m| t_min[..] > m[..]);
    if in_order {
        let no_truncates = BTreeSet::new();
        let mut evs = evs.into_iter().peekable();
        while let Some(first) = evs.peek() {
            let t = first.sys.clone();
            let mut diff = TimelineDiff::default();
            while let Some(inc) = evs.next_if(|e| e.sys == t) {
                let seq = inc.seq.clone();
                if let Some(appended) = insert_one(ks, inc, fx) {
                    refold(
                        &mut ks.timeline,
                        &ks.events,
                        &no_truncates,
                        Limit::None,
                        rules,
                        &seq,
                        &seq,
                        appended,
                        &mut diff,
                    );
                }
            }
            emit_bitemporal_step(rows, key, ks, diff, &t, version, fx);
        }
    } else {
        let mut changed = false;
        for inc in evs {
            changed |= insert_one(ks, inc, fx).is_some();
        }
        if changed {
            replay_system_history(rows, key, ks, &t_min, rules, version, fx);
        }
    }
}

/// The business timeline changed at system time `t` (newer than every row's system start).
fn emit_bitemporal_step(
    rows: &mut RowStore,
    key: &Bytes,
    ks: &mut KeyState,
    diff: TimelineDiff,
    t: &Bytes,
    version: u64,
    fx: &mut CommitEffects,
) {
    for (start, v) in diff.removed {
        let r = v.row.expect("removed versions have rows");
        if rows[r].added == version {
            // Written by this very commit and never visible: close it in place.
            rows.get_mut(r).sys_end = Some(t.clone());
            continue;
        }
        retire(rows, r, version, fx);
        let old = &rows[r];
        let closed = StoredRow {
            key: key.clone(),
            values: old.values.clone(),
            start: Some(start),
            end: old.end.clone(),
            sys_start: old.sys_start.clone(),
            sys_end: Some(t.clone()),
            added: version,
            retired: None,
        };
        let id = rows.push(closed, ks.no);
        ks.rows.push(id);
    }
    for start in diff.added {
        show_version(rows, key, ks, &start, true, Some(t.clone()), version);
    }
}

/// Recomputes the key's rows whose system interval reaches `t` or later, and replaces those
/// that differ.
fn replay_system_history(
    rows: &mut RowStore,
    key: &Bytes,
    ks: &mut KeyState,
    t: &Bytes,
    rules: &FoldRules<'_>,
    version: u64,
    fx: &mut CommitEffects,
) {
    let no_truncates = BTreeSet::new();
    // Old rows the replay may change, and when each segment alive just before `t` opened.
    // Frozen rows are never in the region: a key is thawed before a replay from a system time
    // its frozen rows or events reach (see `cold`).
    let region: Vec<RowId> = ks
        .rows
        .iter()
        .copied()
        .filter(|&r| {
            let row = &rows[r];
            row.retired.is_none() && row.sys_end.as_deref().is_none_or(|e| e >= &t[..])
        })
        .collect();
    // The rows alive just before `t` are the business timeline then: no refold of the events
    // known before `t` is needed.
    let mut opened: HashMap<Bytes, Bytes> = HashMap::new();
    let mut tl = Timeline::new();
    for &r in &region {
        let row = &rows[r];
        let ss = row.sys_start.as_ref().expect("bitemporal row");
        if ss[..] < t[..] {
            let start = row.start.clone().expect("bitemporal row");
            opened.insert(start.clone(), ss.clone());
            tl.insert(
                start,
                Version {
                    values: row.values.clone(),
                    end: row.end.clone(),
                    row: Some(MARK),
                },
            );
        }
    }
    let mut points: BTreeMap<Bytes, Vec<Bytes>> = BTreeMap::new();
    for (seq, cands) in &ks.events {
        for (s, _) in cands {
            if s[..] >= t[..] {
                points.entry(s.clone()).or_default().push(seq.clone());
            }
        }
    }
    // (start, values, end, sys_start, sys_end)
    let mut new_rows: Vec<NewRow> = Vec::new();
    for (ti, seqs) in points {
        let mut diff = TimelineDiff::default();
        for seq in seqs {
            refold(
                &mut tl,
                &ks.events,
                &no_truncates,
                Limit::UpTo(&ti),
                rules,
                &seq,
                &seq,
                false,
                &mut diff,
            );
        }
        for (start, v) in diff.removed {
            let since = opened.remove(&start).unwrap_or_else(|| ti.clone());
            if since < ti {
                new_rows.push((start, v.values, v.end, since, Some(ti.clone())));
            }
        }
        for start in diff.added {
            opened.insert(start.clone(), ti.clone());
            tl.get_mut(&start).expect("added").row = Some(MARK);
        }
    }
    for (start, v) in tl.iter_mut() {
        v.row = None;
        let since = opened.get(start).cloned().unwrap_or_else(|| t.clone());
        new_rows.push((start.clone(), v.values.clone(), v.end.clone(), since, None));
    }
    // Keep old rows that came out the same; retire the rest; add the new ones.
    let mut old_by_id: HashMap<(Bytes, Bytes), RowId> = HashMap::new();
    for &r in &region {
        let row = &rows[r];
        old_by_id.insert(
            (
                row.start.clone().expect("bt"),
                row.sys_start.clone().expect("bt"),
            ),
            r,
        );
    }
    for (start, values, end, since, until) in new_rows {
        let kept = old_by_id
            .get(&(start.clone(), since.clone()))
            .copied()
            .filter(|&r| {
                let row = &rows[r];
                row.end == end && row.sys_end == until && row.values[..] == values[..]
            });
        let id = match kept {
            Some(r) => {
                old_by_id.remove(&(start.clone(), since.clone()));
                r
            }
            None => {
                let id = rows.push(
                    StoredRow {
                        key: key.clone(),
                        values,
                        start: Some(start.clone()),
                        end,
                        sys_start: Some(since),
                        sys_end: until.clone(),
                        added: version,
                        retired: None,
                    },
                    ks.no,
                );
                ks.rows.push(id);
                id
            }
        };
        if until.is_none() {
            tl.get_mut(&start).expect("current version").row = Some(id);
        }
    }
    for (_, r) in old_by_id {
        retire(rows, r, version, fx);
    }
    ks.timeline = tl;
}
