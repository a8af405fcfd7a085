//! The CDC engine: applies validated events to a table's in-memory state and says which target
//! row versions a commit adds and retires. It does no I/O; [`crate::store`] makes commits durable.

mod apply;
mod bitemporal;
pub(crate) mod changes;
pub(crate) mod cold;
pub(crate) mod fold;
mod fold_keys;
mod key_commit;
mod key_numbers;
pub(crate) mod lookup;
mod persist;
mod row_keys;
mod rows;
mod rows_aside;
mod scd;
pub(crate) mod statement;

use roaring::RoaringBitmap;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::ops::Bound;
use std::sync::{Arc, OnceLock};

use crate::error::Result;
use crate::flow::{StoredAs, TableSchema};
use crate::format::cold_batch::{BlockRows, ColdBatch};
use crate::format::page_boxes::PageTest;
use crate::format::zone::PageZone;
use crate::value::ColumnType;
pub use cold::Caching;
pub(crate) use cold::{page_rows, PageSource, PageWrite, RowPart};
use cold::{ColdStats, Frozen, Pages};
use fold::{Bytes, EventMap, RowId, Timeline};
pub use fold_keys::Folding;
pub(crate) use persist::{RowsHead, Scope};
pub(crate) use row_keys::RowKeys;
pub use rows::StoredRow;
pub(crate) use rows::{DirPart, RowStore};

pub(crate) use crate::record::Incoming;

/// The counters of one commit (docs/SEMANTICS.md §7).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CommitMetrics {
    /// Rows of the target inserted or updated, as the commit's change feed lists them.
    pub num_upserted_rows: u64,
    /// Rows of the target deleted, as the commit's change feed lists them.
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

impl CommitMetrics {
    /// Adds the metrics of another part of the same commit.
    pub(crate) fn add(&mut self, part: &CommitMetrics) {
        self.num_upserted_rows += part.num_upserted_rows;
        self.num_deleted_rows += part.num_deleted_rows;
        self.num_events_read += part.num_events_read;
        self.num_late_events += part.num_late_events;
        self.num_duplicates_ignored += part.num_duplicates_ignored;
        self.num_conflicts_resolved += part.num_conflicts_resolved;
        self.num_tombstones_collected += part.num_tombstones_collected;
        self.num_dropped_rows += part.num_dropped_rows;
    }

    /// Takes the rows upserted and deleted as the change feed lists them, when they were
    /// counted ([`TableState::settle`]).
    fn apply_counts(&mut self, counts: Option<(u64, u64)>) {
        if let Some((upserted, deleted)) = counts {
            self.num_upserted_rows = upserted;
            self.num_deleted_rows = deleted;
        }
    }
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
    /// The commit timestamp since which the key has been deleted (its business timeline, as now
    /// believed, ends), in every mode; kept after SCD1's tombstone GC collects the key, for
    /// retention (`store/retention.rs`).
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

/// Whether an apply lists the events that changed the event set, for the commit log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Logging {
    /// A commit: its effects list the events to log.
    Log,
    /// A replay of the log, which logs nothing, and so never holds a second copy of a commit's
    /// events.
    #[default]
    Replay,
}

/// A commit's events for one table, or one part of them: what [`TableState::apply`] and
/// [`TableState::apply_part`] take.
pub(crate) struct CommitPart {
    pub incoming: Vec<Incoming>,
    /// SCD1 truncate sequences.
    pub truncates: Vec<Bytes>,
    /// The commit's version and timestamp (µs).
    pub version: u64,
    pub ts: i64,
    pub logging: Logging,
}

/// What one commit did to a table, for the commit log and the row blocks.
#[derive(Default, Debug)]
pub(crate) struct CommitEffects {
    /// Events that changed the event set, to be logged (empty on replay, which logs nothing).
    pub events: Vec<Incoming>,
    /// Whether to collect `events`.
    logging: Logging,
    pub truncates: Vec<Bytes>,
    /// Ids of the first row added; rows `first_row..rows.len()` are new.
    pub first_row: RowId,
    pub metrics: CommitMetrics,
}

/// One key's row versions and events, read back whole ([`TableState::key_contents`]).
#[derive(Debug, PartialEq)]
pub(crate) struct KeyContents {
    pub rows: Vec<(RowId, StoredRow)>,
    pub events: Vec<Incoming>,
}

/// What a reset of keys ([`TableState::reset_keys`]) leaves for the next
/// [`TableState::apply`]: the rows it retired, which that apply counts as its own, and the keys,
/// whose rows it freezes if it brings them no event.
#[derive(Default)]
struct ResetPending {
    keys: Vec<Bytes>,
    retired: RoaringBitmap,
}

/// The hot part of a key read only to be scanned, as its head holds it (a cold page), with the
/// zone map of its rows (`None`: a head of format 9 or 10, which has none).
struct UnreadHot {
    zone: Option<Box<[u8]>>,
    part: Box<[u8]>,
}

/// The in-memory state of one target table.
pub(crate) struct TableState {
    pub schema: TableSchema,
    /// The fewest output columns an event of the table's log may have: its width when it was
    /// created (the log's events before it gained columns read NULL in them).
    pub log_narrowest: usize,
    pub tracked: Vec<bool>,
    pub ignore_null: Vec<bool>,
    pub tombstone_gc_us: i64,
    pub keys: BTreeMap<Bytes, KeyState>,
    /// Keys by number ([`KeyState::no`]); empty in a state that holds only some keys
    /// ([`TableState::restore_skeleton`], [`TableState::evict`]).
    key_list: Vec<Bytes>,
    /// How many keys are numbered (the length of `key_list` when it is kept).
    numbered: u32,
    pub truncates: BTreeSet<Bytes>,
    pub rows: RowStore,
    gc_queue: VecDeque<(i64, Bytes)>,
    /// Where frozen key history goes ([`cold`]).
    pages: Pages,
    /// The keys changed since the store last persisted them ([`persist`]).
    dirty: Dirty,
    /// What a reset ([`TableState::reset_keys`]) left for the next apply.
    reset_pending: ResetPending,
    /// Sequences per key kept in memory after a freeze.
    hot_tail: usize,
    /// How its commits fold their events into their keys.
    folding: Folding,
    types: Vec<ColumnType>,
    /// Keys read only to be scanned ([`TableState::restore_rows`]): each one's hot part as its
    /// head holds it (a cold page, shared with the head as the read cache keeps it), whose row
    /// versions [`TableState::cold_batch`] decodes with its frozen ones, so that a scan builds
    /// the values of the rows it returns only.
    unread_hot: foldhash::HashMap<Bytes, Arc<UnreadHot>>,
    /// For a state read for one key (a point query of a table not in memory): whether a lookup
    /// has read it already. Its first lookup reads only the pages that may hold the answer; the
    /// next builds the key's index from all of them (see `TableReader::lookup`).
    pub probed: std::sync::atomic::AtomicBool,
    /// Whether keys were written and dropped from memory ([`TableState::evict`]): the state is
    /// then no longer the table, and must be dropped once the commit is written.
    evicted: Evicted,
}

/// Whether a state still holds every key it was given ([`TableState::evict`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Evicted {
    #[default]
    Nothing,
    /// Some keys' states were dropped once their heads were written.
    Keys,
}

/// Where and how a table keeps the history commits no longer touch ([`cold`]), and how its
/// commits fold ([`Folding`]).
#[derive(Clone)]
pub(crate) struct ColdConfig {
    /// Where frozen pages are read back once the store has written them (`None`: a state that is
    /// never persisted keeps them in memory).
    pub pages: Option<std::sync::Arc<dyn PageSource>>,
    /// Sequences per key kept in memory after a freeze.
    pub hot_tail: usize,
    /// How commits fold their events into their keys.
    pub folding: Folding,
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

impl TableState {
    pub fn new(
        schema: TableSchema,
        tracked: Vec<bool>,
        ignore_null: Vec<bool>,
        gc_secs: u64,
        cold: ColdConfig,
    ) -> Self {
        TableState {
            types: schema.column_types(),
            log_narrowest: schema.columns.len(),
            pages: Pages::new(cold.pages),
            dirty: Dirty::Keys(BTreeSet::new()),
            reset_pending: ResetPending::default(),
            hot_tail: cold.hot_tail.max(1),
            folding: cold.folding,
            schema,
            tracked,
            ignore_null,
            tombstone_gc_us: i64::try_from(gc_secs.saturating_mul(1_000_000)).unwrap_or(i64::MAX),
            keys: BTreeMap::new(),
            key_list: Vec::new(),
            numbered: 0,
            truncates: BTreeSet::new(),
            rows: RowStore::default(),
            gc_queue: VecDeque::new(),
            unread_hot: Default::default(),
            probed: Default::default(),
            evicted: Evicted::Nothing,
        }
    }

    /// A number no other state has, nor this one before a page was frozen or thawed since
    /// ([`Pages::split`]): what a reader that keeps a key's frozen rows between calls checks
    /// (`ScanCursor`).
    pub fn split(&self) -> u64 {
        self.pages.split()
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

    /// The encoded keys of the table, in key order.
    pub fn key_list(&self) -> impl Iterator<Item = &Bytes> {
        self.keys.keys()
    }

    /// Every row version of `key`, frozen ones read back, in id order, and its events (frozen
    /// ones too) in sequence order; `None` if the table has no such key.
    pub fn key_contents(&self, key: &[u8]) -> Result<Option<KeyContents>> {
        let Some((key, ks)) = self.keys.get_key_value(key) else {
            return Ok(None);
        };
        let mut rows: Vec<(RowId, StoredRow)> = ks
            .rows
            .iter()
            .filter_map(|&id| Some((id, self.rows.get(id)?.clone())))
            .collect();
        rows.extend(self.cold_rows(key, ks)?);
        rows.sort_by_key(|r| r.0);
        let mut events = ks.frozen_events(key, &self.pages, self.types.len())?;
        for (seq, cands) in &ks.events {
            for (sys, ev) in cands {
                events.push(Incoming {
                    key: key.clone(),
                    seq: seq.clone(),
                    sys: sys.clone(),
                    event: ev.clone(),
                });
            }
        }
        for e in events.iter_mut() {
            e.key = key.clone();
        }
        events.sort_by(|a, b| (&a.seq, &a.sys).cmp(&(&b.seq, &b.sys)));
        Ok(Some(KeyContents { rows, events }))
    }

    /// The frozen rows of `key` (whose state is `ks`), read back, in id order.
    pub fn cold_rows(&self, key: &Bytes, ks: &KeyState) -> Result<cold::ColdRows> {
        let width = self.types.len();
        let mut rows = Vec::new();
        for b in ks.frozen_rows(key, &self.pages, &|_: PageZone<'_>| true, Caching::Pass)? {
            rows.extend(b.rows(key, width)?);
        }
        rows.sort_by_key(|r| r.0);
        Ok(rows)
    }

    /// The frozen rows of `key` (whose state is `ks`), decoded for a scan: those `keep_row`
    /// accepts of the pages `keep` accepts ([`PageTest`]; and, for a key read only to be scanned,
    /// of its hot rows); the pages read through the read cache or past it, as `caching` says.
    pub fn cold_batch(
        &self,
        key: &Bytes,
        ks: &KeyState,
        (keep, keep_row): (&impl PageTest, impl Fn(BlockRows<'_>, &mut Vec<u32>)),
        caching: Caching,
    ) -> Result<ColdBatch> {
        let mut blocks = ks.frozen_rows(key, &self.pages, keep, caching)?;
        if let Some(hot) = self.unread_hot.get(key) {
            // Decoded unless its zone rules every row out, as a page is read.
            if hot
                .zone
                .as_deref()
                .is_none_or(|z| keep.zone(PageZone::new(z)))
            {
                blocks.push(Arc::new(
                    crate::format::cold_page::decode_cold_rows(&hot.part)
                        .map_err(|e| cold::in_key(key, e))?,
                ));
            }
        }
        ColdBatch::new_where(key.clone(), self.types.len(), blocks, keep_row)
    }

    /// The frozen rows of `key` in the pages whose zone `keep` accepts, their values not decoded
    /// (read one row at a time with [`ColdBatch::stored_row`]).
    pub fn frozen_batch(
        &self,
        key: &Bytes,
        ks: &KeyState,
        keep: impl Fn(PageZone<'_>) -> bool,
    ) -> Result<ColdBatch> {
        let blocks = ks.frozen_rows(key, &self.pages, &keep, Caching::Pass)?;
        ColdBatch::new(key.clone(), self.types.len(), blocks)
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
        stats.row_slots = self.rows.slots() as u64;
        stats
    }

    /// Forgets every event and retires every current row, by commit `version` at `ts` (a full
    /// refresh rebuilds the table from its source this way): every key is deleted since `ts`
    /// until the commit's events say otherwise. Every key is thawed first, so the error is a
    /// page's; the state must then not be used.
    pub fn reset(&mut self, version: u64, ts: i64) -> Result<()> {
        self.reset_table();
        let keys: Vec<Bytes> = self.keys.keys().cloned().collect();
        self.reset_keys(version, ts, &keys)
    }

    /// The part of [`TableState::reset`] that is not any key's: the truncates and the tombstone
    /// GC's queue. A commit applied in parts resets the table once, then the keys of each part
    /// before applying it ([`TableState::reset_keys`]).
    pub fn reset_table(&mut self) {
        self.truncates.clear();
        self.gc_queue.clear();
    }

    /// `keys` reset: thawed, their current rows retired by `version`, their events forgotten,
    /// deleted since `ts`. The next [`TableState::apply_part`] counts the rows retired here
    /// with its own, and freezes those of the keys it brings no event to.
    pub fn reset_keys(&mut self, version: u64, ts: i64, keys: &[Bytes]) -> Result<()> {
        let width = self.types.len();
        for key in keys {
            let Some(ks) = self.keys.get_mut(key) else {
                continue;
            };
            self.dirty.add(key);
            ks.thaw(key, &mut self.rows, &mut self.pages, width)?;
            for &r in &ks.rows {
                if self.rows.live.contains(r) {
                    self.rows.retire(r, version);
                    self.reset_pending.retired.insert(r);
                }
            }
            ks.events.clear();
            ks.timeline.clear();
            ks.max_sys = None;
            // With no events left, like a key the tombstone GC collected: one the commit brings
            // events to starts afresh.
            ks.deleted_since = Some(ts);
            ks.lookup = OnceLock::new();
            self.reset_pending.keys.push(key.clone());
        }
        Ok(())
    }

    /// SCD1: forgets the events of keys deleted for longer than the GC threshold (their rows
    /// stay, as history). A frozen key is thawed first, since its pages hold rows too.
    /// SCD1: collects the tombstones due at commit timestamp `now` ([`TableState::apply`] does,
    /// after its events); returns how many keys it collected. Other modes collect none.
    pub fn collect_tombstones_at(&mut self, now: i64) -> Result<u64> {
        let mut fx = CommitEffects::default();
        if self.mode() == StoredAs::Scd1 {
            self.collect_tombstones(now, &mut fx)?;
        }
        Ok(fx.metrics.num_tombstones_collected)
    }

    /// [`TableState::collect_tombstones_at`] for `keys` (sorted) only: a commit applied in parts
    /// collects a part's keys after the part, before it drops them from memory. No other part
    /// brings them events, so that is as if after every part.
    pub fn collect_tombstones_of(&mut self, now: i64, keys: &[Bytes]) -> Result<u64> {
        if self.mode() != StoredAs::Scd1 {
            return Ok(0);
        }
        // The queue is in timestamp order: only its front is due, and of it only `keys`.
        let gc = self.tombstone_gc_us;
        let due = self
            .gc_queue
            .partition_point(|(ts, _)| now.saturating_sub(*ts) > gc);
        let (mine, others): (VecDeque<_>, VecDeque<_>) = self
            .gc_queue
            .drain(..due)
            .partition(|(_, k)| keys.binary_search(k).is_ok());
        let rest = std::mem::replace(&mut self.gc_queue, mine);
        let mut fx = CommitEffects::default();
        let collected = self.collect_tombstones(now, &mut fx);
        // Every entry of `keys` due was collected; the others are as they were.
        self.gc_queue = others.into_iter().chain(rest).collect();
        collected.map(|()| fx.metrics.num_tombstones_collected)
    }

    fn collect_tombstones(&mut self, now: i64, fx: &mut CommitEffects) -> Result<()> {
        let width = self.types.len();
        while let Some((ts, _)) = self.gc_queue.front() {
            if now.saturating_sub(*ts) <= self.tombstone_gc_us {
                break;
            }
            let (ts, key) = self.gc_queue.pop_front().expect("front");
            if let Some(ks) = self.keys.get_mut(&key) {
                // A key collected already keeps its `deleted_since` (retention reads it) and has
                // no events left.
                let collected = ks.eventless();
                if ks.deleted_since == Some(ts) && !collected {
                    self.dirty.add(&key);
                    ks.thaw(&key, &mut self.rows, &mut self.pages, width)?;
                    ks.events.clear();
                    ks.timeline.clear();
                    ks.max_sys = None;
                    fx.metrics.num_tombstones_collected += 1;
                }
            }
        }
        Ok(())
    }

    /// The commit timestamp since which `key` is deleted, if it is.
    pub fn deleted_since(&self, key: &[u8]) -> Option<i64> {
        self.keys.get(key).and_then(|ks| ks.deleted_since)
    }

    /// The keys deleted since before `limit` (a commit timestamp), in key order.
    pub fn deleted_before(&self, limit: i64) -> Vec<Bytes> {
        self.keys
            .iter()
            .filter(|(_, ks)| ks.deleted_since.is_some_and(|ts| ts < limit))
            .map(|(k, _)| k.clone())
            .collect()
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
