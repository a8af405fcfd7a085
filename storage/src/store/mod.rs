//! The store: tables, flows and durable commits on the key-value layer.
//!
//! The handle ([`Store`]) and what it holds ([`Inner`]: the tables, the sources, the views, and
//! whether an earlier write failed), opening a store, and the locks every operation goes through:
//! [`Store::read_inner`] and [`Store::write_inner`] are the one place that checks poisoning. The
//! operations live beside it, one file each: `catalog` (tables, flows, views, opening the catalog),
//! `sources`, `refresh` (applying source rows through flows: the commit path), `properties`,
//! `vacuum`, `replay` (rebuilding a table from its log) and `reader` (scans, lookups, the change
//! feed). Key layout: `crate::format::keys`.
//!
//! A commit is one atomic batch of entries followed by a flush; only then is it acknowledged.
//! A table's state (events per key, business timelines, row versions with the commits that wrote
//! and retired them) is a deterministic function of the commits' events; each commit also writes
//! what it changed of that state (`pages`: key heads, frozen pages, row directories), so that a
//! table is read back from those records on its first use instead of being replayed.

mod append_flows;
mod catalog;
mod chain;
mod change_groups;
mod cold_reader;
mod commit;
mod dml;
mod erase;
mod erase_intent;
mod erase_sources;
mod event_spill;
mod flow_commit;
mod key_cache;
mod key_log;
mod lineage;
mod load;
mod page_pins;
mod pages;
mod part_writer;
mod properties;
mod reader;
mod records;
mod redefine;
mod refresh;
mod replay;
mod retention;
mod row_view;
mod schemas;
mod source_rows;
mod sources;
#[cfg(test)]
mod tests;
mod time_filter;
mod vacuum;
mod verify;
mod widen;
mod written_ahead;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::engine::{Caching, ColdConfig, Folding, TableState};
use crate::error::{corrupt, Error, Result};
use crate::expectation::Expectation;
use crate::flow::{Flow, FlowSpec, TableSchema};
use crate::ingest::ConditionEvaluator;
use crate::kv::{KvStore, ManifestCheck, SledKv, WriteBatch};
use crate::progress::Progress;
use crate::source::SourceTable;

use crate::format::keys::FORMAT_KEY;
pub use append_flows::{append_offset_parameter, source_version_parameter};
pub use catalog::TableOptions;
pub use change_groups::{ChangePass, KeyGroup};
pub use commit::CommitInfo;
pub use dml::{Dml, DmlOperation, Edit};
pub use erase::EraseReport;
pub use key_log::{EventKind, LoggedEvent, Origin};
pub use lineage::SourceRow;
pub use load::Increments;
use load::Load;
use reader::ReadScope;
pub use reader::{ChangeType, ScanCursor, ScanSpec, TableGeneration, TableReader, Values};
pub use records::{
    ERASE, ERASED_BY, ERASE_REASON, FULL_REFRESH, REDEFINED, SOURCE_OFFSET, TOMBSTONE_GC_PROPERTY,
};
pub use refresh::RefreshMode;
pub use retention::RETENTION_PROPERTY;
pub use row_view::{RowSink, RowValues, RowView, StoredRows, TemporalBound};
pub use source_rows::{SourceRead, SourceRows};
pub use time_filter::TimeFilter;
pub use vacuum::{
    RetentionCheck, VacuumReport, MIN_RETAIN, PINNED_VERSION_PROPERTY, RETENTION_CHECK_PROPERTY,
};
pub use verify::{Problem, TableCheck, VerifyReport};

/// The on-disk format version this build writes. Older stores are upgraded in place: the format
/// record is set to this one on open, and each table of a store before version 9 then writes its
/// derived records again on its first use (a version-1 store has none; those of versions 2 to 4
/// lack the pages' zone maps, those of versions 5 and 6 the deletion times that retention reads,
/// those of version 7 the shared values of a page's rows, those of version 8 the packed row
/// blocks); a store of versions 9 to 12 is read as it is: docs/FORMAT.md §8.
pub const FORMAT_VERSION: u32 = 13;

/// Options for [`Store::open_with`].
#[derive(Clone, Debug)]
pub struct StoreOptions {
    /// sled's page cache, in bytes of memory (default 64 MiB: queries read pages once, in key
    /// order, so a larger cache mostly holds what was read already; see docs/PERFORMANCE.md).
    /// sled counts what it caches at about a quarter of the memory it takes, so it is told a
    /// quarter of this.
    pub cache_bytes: u64,
    /// The frozen pages and key heads that reads by time (as-of scans, time travel, point
    /// lookups) decode, kept decoded for their next reads, in bytes of memory (default 192 MiB;
    /// 0 keeps none). A page is kept the second time it is read, not the first, so that what a
    /// process reads once costs it no memory; the same as-of report run three times, or a
    /// service asking about the same keys, decodes each page twice and then finds it kept. An
    /// as-of snapshot of 10,000 keys at 10M events keeps a head and a row block per key, about
    /// 150 MB by their sizes, which the default holds (with 128 MiB, a warm snapshot decoded
    /// row blocks again, and ran no faster for its page lists' boxes). Scans of the current
    /// table and of whole histories read past it, and a read of more pages than it holds leaves
    /// those read more than once in place (docs/PERFORMANCE.md).
    pub read_cache_bytes: u64,
    /// How many of each key's latest sequences the engine keeps in its head (default 8). A key
    /// that gathers four times as many moves the older ones to a frozen page, and reads them back only
    /// for an event that lands among them or is late on system time (see "Cold history" in
    /// docs/ARCHITECTURE.md). Smaller saves memory and the bytes each commit rewrites; larger
    /// saves reads when events arrive very late.
    pub hot_events_per_key: usize,
    /// How long an open waits for another process that has the store open (default 2 s).
    pub lock_wait: std::time::Duration,
    /// What an open does with the manifest (default: verify it).
    pub manifest: ManifestCheck,
    /// When tables are rebuilt from their logs (default: on first use).
    pub open: OpenMode,
    /// When a table writes a checkpoint (its key heads and summary: docs/FORMAT.md §6).
    pub checkpoints: Checkpoints,
    /// A refresh that applies more source rows than this (default 65,536), or a full refresh of
    /// a table with more row versions, applies them in parts of about this many, parted by key,
    /// writing each part ahead of the commit record: still one commit, all or nothing, in memory
    /// bounded by the part instead of the refresh (docs/SEMANTICS.md §2.7).
    pub commit_part_rows: u64,
    /// How a commit folds its events into its keys (default: on two threads for a commit, or
    /// a part of one applied in parts, of 2,048 events or more over 64 keys or more; the rows
    /// are numbered as on one thread; docs/PERFORMANCE.md, session 53).
    pub folding: Folding,
    /// How an increment of a table not in memory reads it: the first after the table was read
    /// reads only the keys its events bring, and so do the next ones until those since it was
    /// read have read a quarter of its keys, then the table is read whole (the default); or
    /// only their keys, always.
    pub increments: Increments,
}

/// The default of [`StoreOptions::read_cache_bytes`].
pub const DEFAULT_READ_CACHE_BYTES: u64 = 192 << 20;

/// The default of [`StoreOptions::commit_part_rows`].
pub const DEFAULT_COMMIT_PART_ROWS: u64 = 1 << 16;

/// When a table writes a checkpoint: the heads of the keys changed since the last one, which an
/// open reads instead of replaying the log. Each commit writes its pages and row directory
/// whatever this says; an open replays the commits after the last checkpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Checkpoints {
    /// After the commit that brings the events since the last checkpoint to this many (default
    /// 1,000,000: an open after a crash replays at most about that many events per table, about
    /// 8 s). Smaller makes that replay shorter and costs ingest more: a checkpoint rewrites the
    /// head of every key changed since the last one (docs/PERFORMANCE.md).
    pub every_events: u64,
    /// Whether closing the store writes one (default: yes, so that the next open replays
    /// nothing).
    pub on_close: OnClose,
}

/// What closing a store does with the commits since each table's last checkpoint.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum OnClose {
    /// Writes a checkpoint of each table that has some, then, if the process wrote anything,
    /// compacts the value log's segments a quarter dead or more (the deadest four at most: the
    /// checkpoint rewrites every key head it lists, and writes compact only what is half dead),
    /// so that a store at rest holds little dead room. Best effort: if the checkpoint fails, the
    /// next open replays the commits; if the compaction does, a later close or write does it.
    #[default]
    Checkpoint,
    /// Leaves them to be replayed by the next open (as after a crash; tests use this).
    Leave,
}

impl Default for Checkpoints {
    fn default() -> Self {
        Checkpoints {
            every_events: 1_000_000,
            on_close: OnClose::Checkpoint,
        }
    }
}

/// When an open reads each table's state (from its derived records, or by replaying its log if
/// they are not current).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum OpenMode {
    /// On first use: opening reads the catalog and the commit records only, and a table's state
    /// is read the first time a query or a commit needs it (a source table's rows likewise).
    #[default]
    Lazy,
    /// All of them while opening. (Source tables' rows are read on first use either way.)
    Eager,
}

/// The default of [`StoreOptions::hot_events_per_key`].
pub const DEFAULT_HOT_EVENTS_PER_KEY: usize = 8;

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            cache_bytes: 64 << 20,
            read_cache_bytes: DEFAULT_READ_CACHE_BYTES,
            hot_events_per_key: DEFAULT_HOT_EVENTS_PER_KEY,
            lock_wait: crate::kv::LOCK_WAIT,
            manifest: ManifestCheck::Verify,
            open: OpenMode::Lazy,
            checkpoints: Checkpoints::default(),
            commit_part_rows: DEFAULT_COMMIT_PART_ROWS,
            increments: Increments::default(),
            folding: Folding::default(),
        }
    }
}

struct Table {
    id: u32,
    name: String,
    flows: Vec<Flow>,
    /// Its rows, timelines and events: empty until `load` says it was read.
    state: TableState,
    load: Load,
    /// The commit log from the oldest version kept (0 unless vacuumed), in version order.
    commits: Vec<CommitInfo>,
    properties: BTreeMap<String, String>,
    expectations: Vec<Expectation>,
    /// Its generated columns, computed from the rows its flows apply (`TableRecord::generated`).
    generated: Vec<crate::generated::GeneratedColumn>,
    /// See `TableRecord::widened_from`.
    widened_from: Option<usize>,
    /// Bumped when VACUUM rebuilds the row store: running scans notice and stop.
    generation: u64,
    /// Where the table's cold history goes.
    cold: ColdConfig,
    /// Events applied since the table's last checkpoint (`pages`).
    unsaved: u64,
    /// Keys read lately without loading the table.
    recent_keys: key_cache::KeyCache,
    /// Held by the spans of keys read from its heads, whose pages must stay.
    pins: page_pins::PagePins,
}

struct Inner {
    kv: Arc<dyn KvStore>,
    tables: BTreeMap<String, Table>,
    sources: BTreeMap<String, SourceTable>,
    views: BTreeMap<String, String>,
    /// Schemas made by `CREATE SCHEMA`, with their comments.
    schemas: BTreeMap<String, String>,
    next_table_id: u32,
    poisoned: Option<String>,
    evaluator: Option<Arc<dyn ConditionEvaluator>>,
    progress: Option<Arc<dyn Progress>>,
    /// [`StoreOptions::hot_events_per_key`].
    hot_tail: usize,
    open: OpenMode,
    checkpoints: Checkpoints,
    /// See [`StoreOptions::commit_part_rows`].
    commit_part_rows: u64,
    increments: Increments,
    /// [`StoreOptions::folding`].
    folding: Folding,
    /// Moves when ERASE or DROP TABLE rewrites source chunks (reads under way stop).
    rewrites: source_rows::ChunkRewrites,
}

/// An asof store: a folder with target tables and the flows that feed them.
///
/// `Store` is cheap to clone and can be shared between threads: writes are serialised, reads run
/// in parallel with each other.
#[derive(Clone)]
pub struct Store {
    inner: Arc<RwLock<Inner>>,
}

impl Store {
    /// Opens the store in folder `path`, creating it if needed.
    pub fn open(path: impl AsRef<Path>) -> Result<Store> {
        Self::open_with(path, StoreOptions::default())
    }

    /// Opens the store with explicit options.
    pub fn open_with(path: impl AsRef<Path>, options: StoreOptions) -> Result<Store> {
        let kv = SledKv::open_with(
            path.as_ref(),
            options.cache_bytes,
            options.lock_wait,
            options.manifest,
        )?
        .with_read_cache(options.read_cache_bytes);
        Self::open_kv(Arc::new(kv), &options)
    }

    /// Opens a store on any key-value implementation (tests use this to inject failures).
    pub fn with_kv(kv: Box<dyn KvStore>) -> Result<Store> {
        Self::open_kv(Arc::from(kv), &StoreOptions::default())
    }

    /// [`Store::with_kv`] with options. Those about sled's files (`cache_bytes`,
    /// `read_cache_bytes`, `lock_wait`, `manifest`) are the key-value layer's business and are
    /// not read.
    pub fn with_kv_options(kv: Box<dyn KvStore>, options: StoreOptions) -> Result<Store> {
        Self::open_kv(Arc::from(kv), &options)
    }

    fn open_kv(kv: Arc<dyn KvStore>, options: &StoreOptions) -> Result<Store> {
        // An ERASE whose files were not yet rewritten when the process stopped: rewrite them now.
        if kv.get(crate::format::keys::PURGE_KEY)?.is_some() {
            kv.purge()?;
        }
        match kv.get(FORMAT_KEY)? {
            Some(v) => {
                let found = v
                    .as_slice()
                    .try_into()
                    .map(u32::from_be_bytes)
                    .map_err(|_| corrupt("bad format record"))?;
                match found {
                    FORMAT_VERSION => {}
                    9..=12 => {
                        // Version 12 is version 13 whose key heads' page lists store no boxes
                        // of their pages (bit 31 of a list's first word clear: a scan then
                        // chooses its pages by their zones, or by boxes made from them).
                        // Version 11 is version 12 whose pages keep their history's values
                        // apart from their rows' (flag bit 31 of a page's first word clear),
                        // version 10 is version 11 whose key heads hold no zone map of their
                        // hot rows (flag bit 30 clear), and version 9 is version 10 whose key
                        // heads list every page in their meta: this build reads them all as
                        // they are (a scan then decodes such a head's hot rows whatever its
                        // filter), and a page or head takes the new layout when it is next
                        // written. An older build would read such a page or head as damaged.
                        let mut b = WriteBatch::default();
                        b.put(FORMAT_KEY.to_vec(), FORMAT_VERSION.to_be_bytes().to_vec());
                        kv.write(b)?;
                    }
                    1..=8 => {
                        // Version 1 has no derived records; each table writes them on its first
                        // use, as when they are not current (`pages`). Version 2 is version 3
                        // without statement events (flag bit 3), version 3 is version 4 without
                        // erasures (source rows erased by position, rewritten commits). Version 4
                        // is version 5 without zone maps in the page entries of key heads.
                        // Version 5 is version 6 without what no version-5 store holds: DML
                        // commits on source tables (an older build would count their appends
                        // wrong and reuse their chunk numbers), schemas (`N`), nested values,
                        // generated columns. Version 6 is version 7 whose key heads say since
                        // when a key is deleted in SCD1 tables only, and forget it when the
                        // tombstone is collected (retention reads it in every mode). Version 7
                        // is version 8 with every row of a page storing its own values and
                        // bounds (none shared), and one row directory record per commit. Version 8
                        // is version 9 with row blocks of full-width numbers and event blocks and
                        // page histories in LZ4 (a version-8 build cannot read zstd). The summaries go in
                        // the batch that sets the format, so each table rebuilds its derived
                        // records on its first use. A build that reads
                        // version 3 only must not read a store whose source rows were erased:
                        // it would count them.
                        let mut b = WriteBatch::default();
                        for k in kv.scan_prefix_keys(&[crate::format::keys::SUMMARY]) {
                            b.delete(k?);
                        }
                        b.put(FORMAT_KEY.to_vec(), FORMAT_VERSION.to_be_bytes().to_vec());
                        kv.write(b)?;
                    }
                    _ => {
                        return Err(Error::FormatVersion {
                            found,
                            supported: FORMAT_VERSION,
                        })
                    }
                }
            }
            None => {
                if kv.scan_prefix(b"").next().is_some() {
                    return Err(corrupt("the store has data but no format record"));
                }
                let mut b = WriteBatch::default();
                b.put(FORMAT_KEY.to_vec(), FORMAT_VERSION.to_be_bytes().to_vec());
                kv.write(b)?;
            }
        }
        let mut inner = Inner {
            kv,
            tables: BTreeMap::new(),
            sources: BTreeMap::new(),
            views: BTreeMap::new(),
            schemas: BTreeMap::new(),
            next_table_id: 0,
            poisoned: None,
            evaluator: None,
            progress: None,
            hot_tail: options.hot_events_per_key,
            open: options.open,
            checkpoints: options.checkpoints,
            commit_part_rows: options.commit_part_rows.max(1),
            increments: options.increments,
            folding: options.folding,
            rewrites: Default::default(),
        };
        inner.load()?;
        Ok(Store {
            inner: Arc::new(RwLock::new(inner)),
        })
    }

    fn read_inner(&self) -> Result<RwLockReadGuard<'_, Inner>> {
        let g = self
            .inner
            .read()
            .map_err(|_| Error::Poisoned("a writer panicked".into()))?;
        if let Some(p) = &g.poisoned {
            return Err(Error::Poisoned(p.clone()));
        }
        Ok(g)
    }

    fn write_inner(&self) -> Result<RwLockWriteGuard<'_, Inner>> {
        let g = self
            .inner
            .write()
            .map_err(|_| Error::Poisoned("a writer panicked".into()))?;
        if let Some(p) = &g.poisoned {
            return Err(Error::Poisoned(p.clone()));
        }
        Ok(g)
    }

    /// Registers where the progress of long work (a refresh, a large apply) is reported.
    pub fn set_progress(&self, progress: Arc<dyn Progress>) {
        if let Ok(mut g) = self.inner.write() {
            g.progress = Some(progress);
        }
    }

    /// Where the progress of long work is reported, if [`Store::set_progress`] registered it:
    /// readers built on the store (a scan, an export) report there too.
    pub fn progress(&self) -> Option<Arc<dyn Progress>> {
        self.inner.read().ok().and_then(|g| g.progress.clone())
    }

    /// Registers the evaluator of [`crate::flow::Condition::Expr`] conditions.
    pub fn set_condition_evaluator(&self, evaluator: Arc<dyn ConditionEvaluator>) {
        if let Ok(mut g) = self.inner.write() {
            g.evaluator = Some(evaluator);
        }
    }
}

impl Table {
    /// An empty state for this table, as its first flow and creation properties define it.
    fn new_state(&self) -> TableState {
        self.state_with(self.cold.clone())
    }

    /// An empty state whose frozen pages stay in memory: one that is read once and dropped, never
    /// persisted.
    fn detached_state(&self) -> TableState {
        self.state_with(ColdConfig {
            pages: None,
            hot_tail: self.cold.hot_tail,
            folding: self.cold.folding,
        })
    }

    fn state_with(&self, cold: ColdConfig) -> TableState {
        let first = &self.flows[0];
        let mut state = TableState::new(
            self.state.schema.clone(),
            first.tracked.clone(),
            first.ignore_null.clone(),
            first.spec.tombstone_gc_threshold_secs,
            cold,
        );
        if let Some(n) = self.widened_from {
            state.log_narrowest = n;
        }
        state
    }
}

impl Table {
    /// The table's catalog record as it stands.
    fn record(&self) -> records::TableRecord {
        records::TableRecord {
            name: self.name.clone(),
            schema: self.state.schema.clone(),
            flows: self.flows.iter().map(|f| f.spec.clone()).collect(),
            properties: self.properties.clone(),
            expectations: self.expectations.clone(),
            generated: self.generated.clone(),
            widened_from: self.widened_from,
        }
    }
}

impl Drop for Inner {
    /// A store closed in order writes a checkpoint of every table with commits after its last
    /// one, so that the next open replays nothing, and reclaims the room the last writes left
    /// dead ([`OnClose::Checkpoint`]). Best effort: if it fails, the next open replays those
    /// commits instead.
    fn drop(&mut self) {
        if self.poisoned.is_some() || self.checkpoints.on_close == OnClose::Leave {
            return;
        }
        for t in self.tables.values_mut() {
            if !t.load.in_memory() || t.unsaved == 0 {
                continue;
            }
            let last = t.commits.last().expect("a commit").version;
            let mut b = WriteBatch::default();
            if pages::write_pending_pages(self.kv.as_ref(), t.id, &mut t.state).is_ok()
                && pages::put_checkpoint(&mut b, t.id, &mut t.state, last).is_ok()
                && pages::write_checkpoint(self.kv.as_ref(), t.id, b, &mut t.state, &mut t.pins)
                    .is_ok()
            {
                t.unsaved = 0;
            }
        }
        let _ = self.kv.reclaim();
    }
}

impl Inner {
    /// How table `id` keeps its cold history: pages in this store.
    fn cold_config(&self, id: u32) -> ColdConfig {
        ColdConfig {
            pages: Some(Arc::new(pages::TablePages {
                kv: self.kv.clone(),
                id,
            })),
            hot_tail: self.hot_tail,
            folding: self.folding,
        }
    }
}

impl Inner {
    fn name_is_free(&self, name: &str) -> Result<()> {
        if self.tables.contains_key(name)
            || self.sources.contains_key(name)
            || self.views.contains_key(name)
        {
            return Err(Error::AlreadyExists {
                kind: "table",
                name: name.to_string(),
            });
        }
        Ok(())
    }

    fn flow_table(&self, flow: &str) -> Result<String> {
        self.tables
            .values()
            .find(|t| t.flows.iter().any(|f| f.spec.name == flow))
            .map(|t| t.name.clone())
            .ok_or_else(|| Error::NotFound {
                kind: "flow",
                name: flow.to_string(),
            })
    }
}

impl Store {
    /// Names of the target tables.
    pub fn tables(&self) -> Result<Vec<String>> {
        Ok(self.read_inner()?.tables.keys().cloned().collect())
    }

    /// The flow definitions writing `table`.
    pub fn flows(&self, table: &str) -> Result<Vec<FlowSpec>> {
        let g = self.read_inner()?;
        Ok(g.table(table)?
            .flows
            .iter()
            .map(|f| f.spec.clone())
            .collect())
    }

    /// The shape of `table`.
    pub fn schema(&self, table: &str) -> Result<TableSchema> {
        Ok(self.read_inner()?.table(table)?.state.schema.clone())
    }

    /// The latest commit version of `table` (without reading its rows).
    pub fn latest_version(&self, table: &str) -> Result<u64> {
        let g = self.read_inner()?;
        Ok(g.table(table)?.commits.last().expect("a commit").version)
    }

    /// The commit log of `table`, oldest first.
    pub fn history(&self, table: &str) -> Result<Vec<CommitInfo>> {
        Ok(self.read_inner()?.table(table)?.commits.clone())
    }

    /// Runs `f` on a consistent read view of `table`.
    pub fn read<R>(&self, table: &str, f: impl FnOnce(&TableReader<'_>) -> R) -> Result<R> {
        let g = self.read_replayed(table)?;
        let t = g.table(table)?;
        Ok(f(&TableReader {
            table: t,
            state: &t.state,
            scope: ReadScope::Table,
        }))
    }

    /// Runs `f` on a read view of `table` that holds the key `key` (encoded, [`crate::keycodec`])
    /// and nothing else: scans of that key and lookups of it read as [`Store::read`] would, and
    /// the counts cover that key only. If the table is not in memory, only that key's head and
    /// pages are read (a point query does not load the table), and its events, which no read
    /// uses, are not decoded (`cold_stats().hot_events` counts none); if its records are not
    /// current (commits since its last checkpoint), the table is loaded and read as usual.
    pub fn read_key<R>(
        &self,
        table: &str,
        key: &[u8],
        f: impl FnOnce(&TableReader<'_>) -> R,
    ) -> Result<R> {
        {
            let g = self.read_inner()?;
            let t = g.table(table)?;
            if !t.load.in_memory() {
                let version = t.commits.last().expect("a commit").version;
                let state = match t.recent_keys.get(key, version) {
                    Some(state) => Some(state),
                    None => pages::read_key(g.kv.as_ref(), t, key)?.map(|state| {
                        let state = Arc::new(state);
                        t.recent_keys.put(key, version, state.clone());
                        state
                    }),
                };
                if let Some(state) = state {
                    return Ok(f(&TableReader {
                        table: t,
                        state: &state,
                        scope: ReadScope::Keys,
                    }));
                }
            }
        }
        self.read(table, f)
    }

    /// The keys of `table` between `lo` and `hi` (encoded, [`crate::keycodec`]), at most
    /// `max_keys` of them, in key order, read from their heads and pages without loading the
    /// table; to be read with [`Store::read_span`], so that a full scan made of spans holds one
    /// span at a time. `None` if the table is in memory or its records are not current (commits
    /// since its last checkpoint): read it with [`Store::read`] then.
    ///
    /// `caching` says whether the heads it reads, decoded by the span's first read, are kept in
    /// the read cache ([`ScanSpec::caching`]); heads the cache holds are found there either way.
    pub fn key_span(
        &self,
        table: &str,
        (lo, hi): (Bound<&[u8]>, Bound<&[u8]>),
        max_keys: usize,
        caching: Caching,
    ) -> Result<Option<KeySpan>> {
        let g = self.read_inner()?;
        let t = g.table(table)?;
        if t.load.in_memory() {
            return Ok(None);
        }
        let span = pages::KeySpan { lo, hi, max_keys };
        Ok(
            pages::read_keys(g.kv.as_ref(), t, &span, caching)?.map(|(heads, last)| KeySpan {
                table: table.to_string(),
                id: t.id,
                generation: t.generation,
                _pin: t.pins.pin(),
                keys: heads.keys(),
                heads: Some(heads),
                state: None,
                last,
            }),
        )
    }

    /// The number of keys of `table`, read from its summary, when a scan would read it span by
    /// span ([`Store::key_span`]); `None` when the table is in memory or its derived records are
    /// not current.
    pub fn key_count(&self, table: &str) -> Result<Option<u64>> {
        let g = self.read_inner()?;
        let t = g.table(table)?;
        if t.load.in_memory() {
            return Ok(None);
        }
        pages::key_count(g.kv.as_ref(), t)
    }

    /// The rows of `table`'s latest version (its row versions that no commit retired: what a
    /// scan without time travel or filters returns), when they are known without reading them:
    /// counted in memory, or recorded by its last checkpoint if no commit since wrote rows.
    /// `None` otherwise (the table is read from the log, or its summary was written before
    /// summaries kept the count): scan it then.
    pub fn live_rows(&self, table: &str) -> Result<Option<LiveRows>> {
        let g = self.read_inner()?;
        let t = g.table(table)?;
        let version = t.commits.last().expect("a commit").version;
        let rows = match t.load.in_memory() {
            true => Some(t.state.rows.live.len()),
            false => pages::live_count(g.kv.as_ref(), t)?,
        };
        Ok(rows.map(|rows| LiveRows { version, rows }))
    }

    /// Runs `f` on a read view of the keys of `span` (see [`Store::key_span`]): scans of those
    /// keys read them as [`Store::read`] would (at any version up to the one current when the
    /// span was read); counts (`live_rows`, `cold_stats`) do not cover its keys (their hot rows
    /// stay encoded until the scan reaches them); lookups (read them with [`Store::read_key`])
    /// are refused, and the change feed reads a commit's changes to those keys
    /// ([`TableReader::span_changes`]).
    ///
    /// The span's heads are decoded by its first read (on the thread that reads it: a scan may
    /// read spans on several).
    pub fn read_span<R>(
        &self,
        span: &mut KeySpan,
        f: impl FnOnce(&TableReader<'_>) -> R,
    ) -> Result<R> {
        let g = self.read_inner()?;
        let t = g.table(&span.table)?;
        // Rewritten since (VACUUM, ERASE, a widening), or dropped and made again: its heads
        // list pages that are gone.
        if (t.id, t.generation) != (span.id, span.generation) {
            return Err(Error::ScanInterrupted(span.table.clone()));
        }
        let state = match (span.heads.take(), &mut span.state) {
            (_, Some(state)) => state,
            (Some(heads), state) => state.insert(pages::restore_span(g.kv.as_ref(), t, heads)?),
            (None, None) => {
                return Err(corrupt(
                    "a span of keys read again after its heads failed to decode",
                ))
            }
        };
        Ok(f(&TableReader {
            table: t,
            state,
            scope: ReadScope::Rows,
        }))
    }
}

/// How many rows a table's latest version has ([`Store::live_rows`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LiveRows {
    /// The version counted: the table's latest commit.
    pub version: u64,
    /// Its rows.
    pub rows: u64,
}

/// Some keys of a table, read from their heads and pages ([`Store::key_span`]).
pub struct KeySpan {
    table: String,
    /// The id of the table it was read from.
    id: u32,
    /// The generation of the table's rows its heads were read at.
    generation: u64,
    /// Keeps the pages its heads list (`page_pins`).
    _pin: page_pins::PagePin,
    /// Its keys' heads as read, until its first read decodes them into `state`.
    heads: Option<pages::SpanHeads>,
    state: Option<TableState>,
    keys: usize,
    last: Option<Vec<u8>>,
}

impl KeySpan {
    /// The last key of the span when keys of the range it was asked for follow it (read on
    /// after it); `None` when the span reaches the end of the range.
    pub fn last_key(&self) -> Option<&[u8]> {
        self.last.as_deref()
    }

    /// The number of keys it holds.
    pub fn keys(&self) -> usize {
        self.keys
    }

    /// A cursor for a scan that starts with this span, pinned to the generation of the table's
    /// rows the span was read at: a scan read by several cursors at once (a span each) gives
    /// each a clone of it, so that every span checks that generation
    /// ([`Error::ScanInterrupted`]).
    pub fn scan_cursor(&self) -> ScanCursor {
        ScanCursor::pinned(self.generation)
    }
}

impl std::fmt::Debug for KeySpan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeySpan")
            .field("table", &self.table)
            .field("keys", &self.keys)
            .field("last", &self.last)
            .finish()
    }
}

/// Table `name` among `tables`, to change it (a free function: callers keep using the store's
/// other fields, the key-value layer among them, while they hold it).
fn table_mut<'a>(tables: &'a mut BTreeMap<String, Table>, name: &str) -> Result<&'a mut Table> {
    tables.get_mut(name).ok_or_else(|| Error::NotFound {
        kind: "table",
        name: name.to_string(),
    })
}

/// A corruption found in table `name`'s records, naming the table.
fn in_table(name: &str, e: Error) -> Error {
    match e {
        Error::Corrupt(m) => Error::Corrupt(format!("table `{name}`: {m}")),
        e => e,
    }
}

impl Inner {
    fn table(&self, name: &str) -> Result<&Table> {
        self.tables.get(name).ok_or_else(|| Error::NotFound {
            kind: "table",
            name: name.to_string(),
        })
    }
}
