//! The store: tables, flows and durable commits on the key-value layer.
//!
//! Key layout (one sled tree; integers big-endian so that key order is numeric order):
//!
//! | key | value |
//! |---|---|
//! | `M format` | format version (u32) |
//! | `T` table id | table record (JSON: name, schema, flows) |
//! | `C` table id, version | commit record (JSON: version, timestamp, operation, metrics) |
//! | `E` table id, version, chunk | event block (columnar, rkyv, LZ4): the events the commit logged |
//!
//! A commit is one atomic batch of these entries followed by a flush; only then is it acknowledged.
//! The in-memory state (events per key, business timelines, row versions with the commits that
//! wrote and retired them) is a deterministic function of the commits' events and is rebuilt by
//! replaying them on open.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::ops::Bound;
use std::path::Path;
use std::rc::Rc;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Instant;

use arrow::record_batch::RecordBatch;
use serde::{Deserialize, Serialize};

use crate::codec;
use crate::engine::cold::{ColdRows, ColdStats};
use crate::engine::fold::{Bytes, RowId};
use crate::engine::lookup::PointIndex;
use crate::engine::{ColdConfig, CommitMetrics, Incoming, StoredRow, TableState};
use crate::error::{corrupt, Error, FlowError, Result};
use crate::expectation::{self, Expectation, OnViolation};
use crate::flow::{Condition, Flow, FlowSpec, StoredAs, TableSchema};
use crate::ingest::{prepare, ConditionEvaluator};
use crate::kv::{KvStore, ManifestCheck, SledKv, WriteBatch};
use crate::progress::Progress;
use crate::source::{SourceRecord, SourceTable, SourceWrite, WriteKind};
use crate::value::Value;

/// The on-disk format version this build reads and writes.
pub const FORMAT_VERSION: u32 = 1;
const FORMAT_KEY: &[u8] = b"M format";

/// Options for [`Store::open_with`].
#[derive(Clone, Debug)]
pub struct StoreOptions {
    /// sled's page cache, in bytes (default 256 MiB).
    pub cache_bytes: u64,
    /// How many of each key's latest sequences the engine keeps in memory (default 16). A key
    /// that gathers twice as many moves the older ones to a spill file beside the store, and
    /// reads them back only for an event that lands among them or is late on system time (see
    /// "Cold history" in docs/ARCHITECTURE.md). Smaller saves memory; larger saves reads when
    /// events arrive very late.
    pub hot_events_per_key: usize,
    /// How long an open waits for another process that has the store open (default 2 s).
    pub lock_wait: std::time::Duration,
    /// What an open does with the manifest (default: verify it).
    pub manifest: ManifestCheck,
}

/// The default of [`StoreOptions::hot_events_per_key`].
pub const DEFAULT_HOT_EVENTS_PER_KEY: usize = 16;

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            cache_bytes: 256 << 20,
            hot_events_per_key: DEFAULT_HOT_EVENTS_PER_KEY,
            lock_wait: crate::kv::LOCK_WAIT,
            manifest: ManifestCheck::Verify,
        }
    }
}

/// One entry of a table's commit log (SPEC §7).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitInfo {
    /// 0, 1, 2, ... per table.
    pub version: u64,
    /// Commit time, µs since the epoch (UTC); strictly increasing per table.
    pub timestamp_us: i64,
    /// What wrote it: `CREATE TABLE`, `FLOW <name>`, ...
    pub operation: String,
    /// Parameters of the operation.
    pub parameters: BTreeMap<String, String>,
    /// Counters.
    pub metrics: CommitMetrics,
    /// Time spent applying and persisting, µs.
    pub duration_us: u64,
}

impl CommitInfo {
    /// A commit that applied no events (DDL, properties, VACUUM, a source append's record).
    fn bare(
        version: u64,
        timestamp_us: i64,
        operation: &str,
        parameters: BTreeMap<String, String>,
    ) -> Self {
        CommitInfo {
            version,
            timestamp_us,
            operation: operation.to_string(),
            parameters,
            metrics: CommitMetrics::default(),
            duration_us: 0,
        }
    }
}

#[derive(Serialize, Deserialize)]
struct TableRecord {
    name: String,
    schema: TableSchema,
    flows: Vec<FlowSpec>,
    /// `TBLPROPERTIES`, as last set.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    properties: BTreeMap<String, String>,
    /// The expectations on the rows its flows read, as last set.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    expectations: Vec<Expectation>,
}

/// What a table is created with besides its first flow.
#[derive(Clone, Debug, Default)]
pub struct TableOptions {
    /// `TBLPROPERTIES`; [`TOMBSTONE_GC_PROPERTY`] overrides the flow's GC threshold.
    pub properties: BTreeMap<String, String>,
    /// Expectations on the rows its flows read.
    pub expectations: Vec<Expectation>,
}

struct Table {
    id: u32,
    name: String,
    flows: Vec<Flow>,
    state: TableState,
    /// The commit log from the oldest version kept (0 unless vacuumed), in version order.
    commits: Vec<CommitInfo>,
    properties: BTreeMap<String, String>,
    expectations: Vec<Expectation>,
    /// Bumped when VACUUM rebuilds the row store: running scans notice and stop.
    generation: u64,
    /// Where the table's cold history goes.
    cold: ColdConfig,
}

/// The table property that sets the SCD1 tombstone GC threshold (SPEC §6).
pub const TOMBSTONE_GC_PROPERTY: &str = "pipelines.cdc.tombstoneGCThresholdInSeconds";

/// The table property that, set to `false`, lets VACUUM keep less than [`MIN_RETAIN`] of history.
pub const RETENTION_CHECK_PROPERTY: &str = "asof.vacuum.retentionCheck";

/// The shortest history [`Store::vacuum`] keeps unless told otherwise: seven days, as Delta Lake.
pub const MIN_RETAIN: std::time::Duration = std::time::Duration::from_secs(168 * 3600);

/// Whether VACUUM refuses to keep less than [`MIN_RETAIN`] of history.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RetentionCheck {
    /// Refuse, unless the table property [`RETENTION_CHECK_PROPERTY`] is `false`.
    Enforced,
    /// Keep whatever the caller asks, even nothing.
    Disabled,
}

/// The operation name of a commit that set table properties.
const SET_PROPERTIES: &str = "SET TBLPROPERTIES";

/// What a VACUUM did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VacuumReport {
    /// The oldest version that can still be read (time travel, change feed).
    pub oldest_version: u64,
    /// Commit records removed.
    pub commits_removed: u64,
    /// Row versions dropped from the row store (retired before the oldest version kept).
    pub row_versions_removed: u64,
    /// Events in the log before, and in the compacted log after.
    pub events_before: u64,
    /// See `events_before`.
    pub events_after: u64,
    /// Bytes of the table's log (commit records and event blocks) before and after.
    pub bytes_before: u64,
    /// See `bytes_before`.
    pub bytes_after: u64,
}

/// How a commit changed one row (SPEC §7 change data feed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeType {
    /// A row that was not there before.
    Insert,
    /// A row that is gone.
    Delete,
    /// A row as it was before an update (same row identity).
    UpdatePreimage,
    /// A row as it is after an update.
    UpdatePostimage,
}

impl ChangeType {
    /// The `_change_type` value: `insert`, `delete`, `update_preimage`, `update_postimage`.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeType::Insert => "insert",
            ChangeType::Delete => "delete",
            ChangeType::UpdatePreimage => "update_preimage",
            ChangeType::UpdatePostimage => "update_postimage",
        }
    }
}

struct Inner {
    kv: Box<dyn KvStore>,
    tables: BTreeMap<String, Table>,
    sources: BTreeMap<String, SourceTable>,
    views: BTreeMap<String, String>,
    next_table_id: u32,
    poisoned: Option<String>,
    evaluator: Option<Arc<dyn ConditionEvaluator>>,
    progress: Option<Arc<dyn Progress>>,
    cold: ColdConfig,
}

/// An asof store: a folder with target tables and the flows that feed them.
///
/// `Store` is cheap to clone and can be shared between threads: writes are serialised, reads run
/// in parallel with each other.
#[derive(Clone)]
pub struct Store {
    inner: Arc<RwLock<Inner>>,
}

fn key(tag: u8, id: u32, version: Option<u64>, chunk: Option<u32>) -> Vec<u8> {
    let mut k = Vec::with_capacity(17);
    k.push(tag);
    k.extend_from_slice(&id.to_be_bytes());
    if let Some(v) = version {
        k.extend_from_slice(&v.to_be_bytes());
    }
    if let Some(c) = chunk {
        k.extend_from_slice(&c.to_be_bytes());
    }
    k
}

fn parse_version(k: &[u8]) -> Result<u64> {
    k.get(5..13)
        .and_then(|b| b.try_into().ok())
        .map(u64::from_be_bytes)
        .ok_or_else(|| corrupt("short key"))
}

/// Adds a put of `value` as JSON (the catalog and commit records).
fn put_json(b: &mut WriteBatch, k: Vec<u8>, value: &impl Serialize) -> Result<()> {
    b.put(k, serde_json::to_vec(value).map_err(corrupt)?);
    Ok(())
}

/// Puts the blocks holding `events` and `truncates` as the event log of commit `version`.
fn put_event_blocks(
    b: &mut WriteBatch,
    table_id: u32,
    version: u64,
    schema: &TableSchema,
    events: &[Incoming],
    truncates: &[Bytes],
) -> Result<()> {
    let types: Vec<_> = schema.columns.iter().map(|(_, t)| t.clone()).collect();
    for (i, blk) in codec::event_blocks(events, truncates, &types)
        .iter()
        .enumerate()
    {
        b.put(
            key(b'E', table_id, Some(version), Some(i as u32)),
            codec::encode_block(blk)?,
        );
    }
    Ok(())
}

/// Writes a batch; a failure poisons the store (memory may be ahead of disk until it is reopened).
fn write_or_poison(kv: &dyn KvStore, poisoned: &mut Option<String>, b: WriteBatch) -> Result<()> {
    kv.write(b).inspect_err(|e| *poisoned = Some(e.to_string()))
}

fn now_us() -> i64 {
    chrono::Utc::now().timestamp_micros()
}

fn format_us(us: i64) -> String {
    chrono::DateTime::from_timestamp_micros(us)
        .map(|t| t.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string())
        .unwrap_or_else(|| us.to_string())
}

/// A commit whose events are the compacted log of everything up to it (written by VACUUM).
const VACUUM_BASE: &str = "vacuum_base";

/// The GC threshold among `properties`, checked.
fn gc_property(properties: &BTreeMap<String, String>) -> Result<Option<u64>> {
    properties
        .get(TOMBSTONE_GC_PROPERTY)
        .map(|v| {
            v.trim().parse::<u64>().map_err(|_| {
                Error::InvalidQuery(format!(
                    "{TOMBSTONE_GC_PROPERTY} is a whole number of seconds, not `{v}`"
                ))
            })
        })
        .transpose()
}

/// A table's commit records, in version order and without gaps.
fn load_commits(kv: &dyn KvStore, id: u32, table: &str) -> Result<Vec<CommitInfo>> {
    let mut commits: Vec<CommitInfo> = Vec::new();
    for kv in kv.scan_prefix(&key(b'C', id, None, None)) {
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

/// Replays a table's log into `state`: every data commit's events, in commit order, through the
/// same engine path as when they were first applied (up to commit `up_to` if given). The engine is
/// deterministic, so this rebuilds the timelines and every row version with the commits that
/// wrote and retired it. Property commits take effect where they are in the log.
/// About how many events of one commit a replay applies at a time (a few under test, so that the
/// unit tests replay in parts).
const REPLAY_PART: usize = if cfg!(test) { 5 } else { 1 << 18 };

fn replay_log(
    kv: &dyn KvStore,
    id: u32,
    state: &mut TableState,
    commits: &[CommitInfo],
    up_to: Option<u64>,
) -> Result<()> {
    let width = state.schema.columns.len();
    let mut settings = commits
        .iter()
        .filter(|c| c.operation == SET_PROPERTIES || c.parameters.contains_key(VACUUM_BASE))
        .peekable();
    // The last version replayed: a commit replayed in parts is reset (full refresh) only once.
    let mut last = None;
    let mut replay = |state: &mut TableState,
                      (version, events, truncates): (u64, Vec<Incoming>, Vec<Bytes>)|
     -> Result<()> {
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
        if c.parameters.contains_key(FULL_REFRESH) && last != Some(version) {
            state.reset(version)?;
        }
        last = Some(version);
        state.apply(
            events,
            truncates,
            version,
            c.timestamp_us,
            false,
            &mut |_| {},
        )?;
        Ok(())
    };
    // After a VACUUM the log starts with a base commit: every block up to it is its events.
    let base = commits
        .first()
        .filter(|c| c.parameters.contains_key(VACUUM_BASE))
        .map_or(0, |c| c.version);
    let mut pending: Option<(u64, Vec<Incoming>, Vec<Bytes>)> = None;
    for kv in kv.scan_prefix(&key(b'E', id, None, None)) {
        let (k, v) = kv?;
        let version = parse_version(&k)?.max(base);
        if up_to.is_some_and(|h| version > h) {
            break;
        }
        // A commit is replayed in parts of about REPLAY_PART events: a VACUUM base holds every
        // event up to it, and one apply would hold them all in memory at once. Parts of one
        // commit give the same table: rows written by one part and replaced by a later one are
        // written and retired by the same version, so no version ever shows them.
        if pending
            .as_ref()
            .is_some_and(|p| p.0 != version || p.1.len() >= REPLAY_PART)
        {
            replay(state, pending.take().expect("pending"))?;
        }
        let blk = codec::decode_block(&v)?;
        let p = pending.get_or_insert_with(|| (version, Vec::new(), Vec::new()));
        p.1.extend(blk.events(width)?);
        p.2.extend(blk.truncates.into_iter().map(Bytes::from));
    }
    if let Some(p) = pending.take() {
        replay(state, p)?;
    }
    // Settings after the last data commit.
    for c in settings.filter(|c| up_to.is_none_or(|h| c.version <= h)) {
        if let Some(secs) = gc_property(&c.parameters)? {
            state.set_tombstone_gc_secs(secs);
        }
    }
    Ok(())
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
        )?;
        let cold = ColdConfig {
            dir: Some(path.as_ref().to_path_buf()),
            hot_tail: options.hot_events_per_key,
        };
        Self::open_kv(Box::new(kv), cold)
    }

    /// Opens a store on any key-value implementation (tests use this to inject failures). Cold
    /// history spills to the system's temporary folder.
    pub fn with_kv(kv: Box<dyn KvStore>) -> Result<Store> {
        let cold = ColdConfig {
            dir: None,
            hot_tail: DEFAULT_HOT_EVENTS_PER_KEY,
        };
        Self::open_kv(kv, cold)
    }

    fn open_kv(kv: Box<dyn KvStore>, cold: ColdConfig) -> Result<Store> {
        match kv.get(FORMAT_KEY)? {
            Some(v) => {
                let found = v
                    .as_slice()
                    .try_into()
                    .map(u32::from_be_bytes)
                    .map_err(|_| corrupt("bad format record"))?;
                if found != FORMAT_VERSION {
                    return Err(Error::FormatVersion {
                        found,
                        supported: FORMAT_VERSION,
                    });
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
            next_table_id: 0,
            poisoned: None,
            evaluator: None,
            progress: None,
            cold,
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

    /// Registers the evaluator of [`crate::Condition::Expr`] conditions.
    pub fn set_condition_evaluator(&self, evaluator: Arc<dyn ConditionEvaluator>) {
        if let Ok(mut g) = self.inner.write() {
            g.evaluator = Some(evaluator);
        }
    }

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
        } = options;
        if let Some(secs) = gc_property(&properties)? {
            flow.spec.tombstone_gc_threshold_secs = secs;
        }
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
                &source_schema(&flow),
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
        match inner.tables.get_mut(&target) {
            Some(t) => {
                if t.state.schema != schema {
                    return Err(FlowError::TargetMismatch {
                        table: target,
                        detail: "mode, keys, output columns or sequence types differ".into(),
                    }
                    .into());
                }
                let mut specs: Vec<FlowSpec> = t.flows.iter().map(|f| f.spec.clone()).collect();
                specs.push(flow.spec.clone());
                let rec = TableRecord {
                    name: t.name.clone(),
                    schema,
                    flows: specs,
                    properties: t.properties.clone(),
                    expectations: t.expectations.clone(),
                };
                let mut b = WriteBatch::default();
                put_json(&mut b, key(b'T', t.id, None, None), &rec)?;
                write_or_poison(inner.kv.as_ref(), &mut inner.poisoned, b)?;
                t.flows.push(flow);
            }
            None => {
                inner.name_is_free(&target)?;
                let id = inner.next_table_id;
                let rec = TableRecord {
                    name: target.clone(),
                    schema: schema.clone(),
                    flows: vec![flow.spec.clone()],
                    properties: properties.clone(),
                    expectations: expectations.clone(),
                };
                let ts = now_us();
                let mut parameters = BTreeMap::from([
                    ("flow".to_string(), name.clone()),
                    ("stored_as".to_string(), schema.mode.to_string()),
                ]);
                for (k, v) in &properties {
                    parameters.insert(format!("property.{k}"), v.clone());
                }
                let commit = CommitInfo::bare(0, ts, "CREATE TABLE", parameters);
                let mut b = WriteBatch::default();
                put_json(&mut b, key(b'T', id, None, None), &rec)?;
                put_json(&mut b, key(b'C', id, Some(0), None), &commit)?;
                write_or_poison(inner.kv.as_ref(), &mut inner.poisoned, b)?;
                inner.next_table_id += 1;
                let state = TableState::new(
                    schema,
                    flow.tracked.clone(),
                    flow.ignore_null.clone(),
                    flow.spec.tombstone_gc_threshold_secs,
                    inner.cold.clone(),
                );
                inner.tables.insert(
                    target.clone(),
                    Table {
                        id,
                        name: target,
                        flows: vec![flow],
                        state,
                        commits: vec![commit],
                        properties,
                        expectations,
                        generation: 0,
                        cold: inner.cold.clone(),
                    },
                );
            }
        }
        Ok(())
    }

    /// Applies a batch of source rows through flow `flow`: one durable commit of its target table.
    ///
    /// The batch is validated as a whole first (SPEC §2); on any error nothing is applied.
    pub fn apply(&self, flow: &str, batch: &RecordBatch) -> Result<CommitInfo> {
        let mut g = self.write_inner()?;
        g.apply(&[(flow, batch)], BTreeMap::new(), false)
    }

    /// Creates a source table: a durable, append-only table flows can read from.
    pub fn create_source(&self, name: &str, schema: &arrow::datatypes::Schema) -> Result<()> {
        self.create_source_with_origin(name, schema, None)
    }

    /// Creates a source table that remembers where its rows come from: `origin` is opaque to the
    /// store (the SQL layer keeps a `read_files` call there) and is given back by
    /// [`Store::source_origin`].
    pub fn create_source_with_origin(
        &self,
        name: &str,
        schema: &arrow::datatypes::Schema,
        origin: Option<&str>,
    ) -> Result<()> {
        let w = self.begin_create_source(name, schema, origin)?;
        self.commit_write(w, None).map(|_| ())
    }

    /// Starts `CREATE TABLE name AS SELECT ...`: a source table created together with its rows,
    /// in one commit, by [`Store::commit_write`].
    pub fn begin_create_source(
        &self,
        name: &str,
        schema: &arrow::datatypes::Schema,
        origin: Option<&str>,
    ) -> Result<SourceWrite> {
        self.read_inner()?.name_is_free(name)?;
        let columns = SourceTable::columns_of(schema)?;
        let mut table = SourceTable::new(0, name.to_string(), columns);
        table.origin = origin.map(str::to_string);
        Ok(SourceWrite::new(table, WriteKind::Create))
    }

    /// Starts an append of any number of batches to a source table that commits as one
    /// (`INSERT INTO t SELECT ...`): push the rows into the [`SourceWrite`], then
    /// [`Store::commit_write`] it. Nothing is written before that, and nothing if it is dropped.
    pub fn begin_append(&self, source: &str) -> Result<SourceWrite> {
        let g = self.read_inner()?;
        let src = g.sources.get(source).ok_or_else(|| Error::NotFound {
            kind: "source table",
            name: source.to_string(),
        })?;
        let mut table = SourceTable::new(src.id, src.name.clone(), src.columns.clone());
        table.origin = src.origin.clone();
        Ok(SourceWrite::new(table, WriteKind::Append))
    }

    /// Commits a [`SourceWrite`] atomically: its rows are one append (one `WRITE` commit; after
    /// `CREATE TABLE` for a new table), named `name` if given (see [`Store::append_loaded`]).
    /// Returns the table's row count. A table dropped or replaced since the write began is an
    /// error, and nothing is written.
    pub fn commit_write(&self, w: SourceWrite, name: Option<&str>) -> Result<u64> {
        let mut g = self.write_inner()?;
        let inner = &mut *g;
        let mut b = WriteBatch::default();
        let mut created = None;
        let id = match w.kind {
            WriteKind::Create => {
                inner.name_is_free(&w.table.name)?;
                let id = inner.next_table_id;
                let rec = SourceRecord {
                    name: w.table.name.clone(),
                    columns: w.table.columns.clone(),
                    origin: w.table.origin.clone(),
                };
                let commit = CommitInfo::bare(0, now_us(), "CREATE TABLE", BTreeMap::new());
                put_json(&mut b, key(b'S', id, None, None), &rec)?;
                put_json(&mut b, key(b'H', id, Some(0), None), &commit)?;
                let mut src = SourceTable::new(id, w.table.name.clone(), w.table.columns.clone());
                src.origin = w.table.origin.clone();
                src.history.push(commit);
                created = Some(src);
                id
            }
            WriteKind::Append => {
                let src = inner.sources.get(&w.table.name);
                if src.is_none_or(|s| s.id != w.table.id) {
                    return Err(Error::InvalidQuery(format!(
                        "source table `{}` was dropped or replaced while rows were written to it; nothing was written",
                        w.table.name
                    )));
                }
                w.table.id
            }
        };
        let src = match created.as_mut() {
            Some(s) => s,
            None => inner.sources.get_mut(&w.table.name).expect("checked"),
        };
        let mut new_batches = Vec::new();
        if w.rows > 0 || name.is_some() {
            for (i, chunk) in w.chunks.iter().enumerate() {
                b.put(
                    key(b'A', id, Some(src.appends), Some(i as u32)),
                    chunk.clone(),
                );
                new_batches.extend(SourceTable::decode_chunk(chunk)?);
            }
            if let Some(n) = name {
                b.put(
                    key(b'L', id, Some(src.appends), None),
                    n.as_bytes().to_vec(),
                );
            }
            let last = src.history.last();
            let commit = CommitInfo {
                version: last.map_or(0, |c| c.version + 1),
                timestamp_us: now_us().max(last.map_or(0, |c| c.timestamp_us + 1)),
                operation: "WRITE".into(),
                parameters: name
                    .map(|n| BTreeMap::from([("file".to_string(), n.to_string())]))
                    .unwrap_or_default(),
                metrics: CommitMetrics {
                    num_upserted_rows: w.rows,
                    ..Default::default()
                },
                duration_us: 0,
            };
            put_json(&mut b, key(b'H', id, Some(commit.version), None), &commit)?;
            src.history.push(commit);
        }
        write_or_poison(inner.kv.as_ref(), &mut inner.poisoned, b)?;
        let src = match created {
            Some(s) => {
                inner.next_table_id += 1;
                inner.sources.entry(w.table.name.clone()).or_insert(s)
            }
            None => inner.sources.get_mut(&w.table.name).expect("checked"),
        };
        if w.rows > 0 || name.is_some() {
            src.appends += 1;
        }
        src.rows += w.rows;
        if let Some(n) = name {
            src.loaded.insert(n.to_string());
        }
        for batch in new_batches {
            let batch = RecordBatch::try_new(src.schema.clone(), batch.columns().to_vec())
                .map_err(|e| corrupt(e.to_string()))?;
            src.batches.push(batch);
        }
        Ok(src.rows)
    }

    /// The origin a source table was created with, and the names of the appends made with
    /// [`Store::append_loaded`].
    pub fn source_origin(&self, source: &str) -> Result<(Option<String>, BTreeSet<String>)> {
        let g = self.read_inner()?;
        let src = g.sources.get(source).ok_or_else(|| Error::NotFound {
            kind: "source table",
            name: source.to_string(),
        })?;
        Ok((src.origin.clone(), src.loaded.clone()))
    }

    /// Appends rows to a source table, durably; returns its new row count. Columns are matched by
    /// name and cast to the table's types; missing columns are NULL.
    pub fn append(&self, source: &str, batch: &RecordBatch) -> Result<u64> {
        self.append_inner(source, batch, None)
    }

    /// Appends rows under a name (a file's path, say), durably and atomically with the name: after
    /// a crash either both are there or neither. [`Store::source_origin`] lists the names, so a
    /// loader can skip what it already loaded. An empty batch still records its name.
    pub fn append_loaded(&self, source: &str, batch: &RecordBatch, name: &str) -> Result<u64> {
        self.append_inner(source, batch, Some(name))
    }

    fn append_inner(&self, source: &str, batch: &RecordBatch, name: Option<&str>) -> Result<u64> {
        let mut w = self.begin_append(source)?;
        w.push(batch)?;
        if w.rows() == 0 && name.is_none() {
            let g = self.read_inner()?;
            return Ok(g.sources.get(source).map_or(0, |s| s.rows));
        }
        self.commit_write(w, name)
    }

    /// The schema and rows of a source table.
    pub fn source_data(
        &self,
        source: &str,
    ) -> Result<(arrow::datatypes::SchemaRef, Vec<RecordBatch>)> {
        let g = self.read_inner()?;
        let src = g.sources.get(source).ok_or_else(|| Error::NotFound {
            kind: "source table",
            name: source.to_string(),
        })?;
        Ok((src.schema.clone(), src.batches.clone()))
    }

    /// The commits of a source table (`CREATE TABLE`, then one `WRITE` per append, with the rows
    /// written as `num_upserted_rows`).
    pub fn source_history(&self, source: &str) -> Result<Vec<CommitInfo>> {
        let g = self.read_inner()?;
        let src = g.sources.get(source).ok_or_else(|| Error::NotFound {
            kind: "table",
            name: source.to_string(),
        })?;
        Ok(src.history.clone())
    }

    /// Names of the source tables.
    pub fn sources(&self) -> Result<Vec<String>> {
        Ok(self.read_inner()?.sources.keys().cloned().collect())
    }

    /// Processes what the flow's source table received since the flow's checkpoint as one commit.
    /// The new checkpoint is part of the commit record, so it is durable exactly when the data it
    /// describes is. Returns `None` when there was nothing new, or when an `AUTO CDC ONCE` flow
    /// has already run.
    ///
    /// With `full`, the flow's whole target is rebuilt from all the data of all its flows: see
    /// [`Store::refresh_table`].
    pub fn refresh(&self, flow: &str, full: bool) -> Result<Option<CommitInfo>> {
        let mut g = self.write_inner()?;
        let table = g.flow_table(flow)?;
        if full {
            return g.refresh_full(&table).map(Some);
        }
        g.refresh_flow(&table, flow)
    }

    /// Refreshes every flow of target `table`: without `full`, one commit per flow that has new
    /// source rows; with `full`, one commit that empties the table and applies all the source
    /// data of all its flows (`AUTO CDC ONCE` flows included), so readers never see it half
    /// rebuilt.
    pub fn refresh_table(&self, table: &str, full: bool) -> Result<Vec<CommitInfo>> {
        let mut g = self.write_inner()?;
        if !g.tables.contains_key(table) {
            return Err(Error::NotFound {
                kind: "table",
                name: table.to_string(),
            });
        }
        if full {
            return Ok(vec![g.refresh_full(table)?]);
        }
        let flows: Vec<String> = g.tables[table]
            .flows
            .iter()
            .map(|f| f.spec.name.clone())
            .collect();
        let mut out = Vec::new();
        for f in flows {
            out.extend(g.refresh_flow(table, &f)?);
        }
        Ok(out)
    }

    /// Keeps a view definition (`CREATE VIEW name AS ...`) with the database.
    pub fn create_view(&self, name: &str, sql: &str) -> Result<()> {
        let mut g = self.write_inner()?;
        let inner = &mut *g;
        inner.name_is_free(name)?;
        let mut b = WriteBatch::default();
        b.put(
            [b"V".as_slice(), name.as_bytes()].concat(),
            sql.as_bytes().to_vec(),
        );
        write_or_poison(inner.kv.as_ref(), &mut inner.poisoned, b)?;
        inner.views.insert(name.to_string(), sql.to_string());
        Ok(())
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

    /// Drops a table (target, source) or view and all its data.
    pub fn drop_table(&self, name: &str) -> Result<()> {
        let mut g = self.write_inner()?;
        let inner = &mut *g;
        let mut b = WriteBatch::default();
        let mut prefixes: Vec<Vec<u8>> = Vec::new();
        if let Some(t) = inner.tables.get(name) {
            for tag in [b'T', b'C', b'E'] {
                prefixes.push(key(tag, t.id, None, None));
            }
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
            for tag in [b'S', b'A', b'L', b'H'] {
                prefixes.push(key(tag, s.id, None, None));
            }
        } else if inner.views.contains_key(name) {
            b.delete([b"V".as_slice(), name.as_bytes()].concat());
        } else {
            return Err(Error::NotFound {
                kind: "table",
                name: name.to_string(),
            });
        }
        for p in prefixes {
            for kv in inner.kv.scan_prefix(&p) {
                b.delete(kv?.0);
            }
        }
        write_or_poison(inner.kv.as_ref(), &mut inner.poisoned, b)?;
        inner.tables.remove(name);
        inner.sources.remove(name);
        inner.views.remove(name);
        Ok(())
    }
}

/// A refresh's error, with the way out when source rows were rejected: an expectation that
/// drops them.
fn rejected(table: &str, flow: &str, e: Error) -> Error {
    match e {
        Error::InvalidBatch {
            ref column,
            ref problem,
            ..
        } => {
            let (constraint, condition) = if problem.contains("NULL") {
                (format!("{column}_present"), format!("{column} IS NOT NULL"))
            } else {
                (
                    format!("valid_{column}"),
                    format!("<condition on {column}>"),
                )
            };
            Error::SourceRowsRejected {
                table: table.to_string(),
                flow: flow.to_string(),
                cause: Box::new(e),
                constraint,
                condition,
            }
        }
        e => e,
    }
}

/// The Arrow schema of a flow's source rows.
fn source_schema(flow: &Flow) -> arrow::datatypes::SchemaRef {
    Arc::new(arrow::datatypes::Schema::new(
        flow.spec
            .source
            .iter()
            .map(|c| arrow::datatypes::Field::new(&c.name, c.ty.to_arrow(), true))
            .collect::<Vec<_>>(),
    ))
}

/// Checks that a flow's SQL conditions evaluate on its source columns (a missing column, a
/// condition that is not a boolean), so that the flow is refused when it is created.
fn check_flow_conditions(
    flow: &Flow,
    evaluator: Option<&Arc<dyn ConditionEvaluator>>,
) -> Result<()> {
    let Some(ev) = evaluator else {
        return Ok(()); // nothing can evaluate them now; the first refresh will say
    };
    let empty = RecordBatch::new_empty(source_schema(flow));
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

/// The commit parameter that records how many source rows a flow has consumed.
pub const SOURCE_OFFSET: &str = "source_offset";
/// The commit parameter that marks a full refresh (the target was rebuilt).
pub const FULL_REFRESH: &str = "full_refresh";

impl Table {
    /// An empty state for this table, as its first flow and creation properties define it.
    fn new_state(&self) -> TableState {
        let first = &self.flows[0];
        TableState::new(
            self.state.schema.clone(),
            first.tracked.clone(),
            first.ignore_null.clone(),
            first.spec.tombstone_gc_threshold_secs,
            self.cold.clone(),
        )
    }

    /// How many rows of its source `flow` has consumed: the offset of its last refresh.
    /// How many rows of its source `flow` has processed, from the last commit that says so:
    /// `source_offset` in a commit of that flow alone, `source_offset.<flow>` in a full refresh of
    /// the table. `None` if the flow never wrote a commit.
    fn checkpoint(&self, flow: &str) -> Option<u64> {
        let per_flow = format!("{SOURCE_OFFSET}.{flow}");
        self.commits.iter().rev().find_map(|c| {
            let own = (c.parameters.get("flow").map(String::as_str) == Some(flow))
                .then(|| c.parameters.get(SOURCE_OFFSET))
                .flatten();
            own.or_else(|| c.parameters.get(&per_flow))
                .and_then(|v| v.parse().ok())
        })
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

    /// The source of `flow` (of `table`) and the rows it holds.
    fn flow_source(&self, table: &str, flow: &str) -> Result<(&SourceTable, &FlowSpec)> {
        let spec = &self.tables[table]
            .flows
            .iter()
            .find(|f| f.spec.name == flow)
            .ok_or_else(|| Error::NotFound {
                kind: "flow",
                name: flow.to_string(),
            })?
            .spec;
        let source = spec.source_table.as_ref().ok_or_else(|| {
            Error::InvalidQuery(format!("flow `{flow}` has no source table to refresh from"))
        })?;
        let src = self.sources.get(source).ok_or_else(|| Error::NotFound {
            kind: "source table",
            name: source.clone(),
        })?;
        Ok((src, spec))
    }

    fn refresh_flow(&mut self, table: &str, flow: &str) -> Result<Option<CommitInfo>> {
        let t = &self.tables[table];
        let checkpoint = t.checkpoint(flow);
        let (src, spec) = self.flow_source(table, flow)?;
        if spec.once && checkpoint.is_some() {
            return Ok(None);
        }
        let from = checkpoint.unwrap_or(0);
        if from >= src.rows {
            return Ok(None);
        }
        let total = src.rows;
        let batch = arrow::compute::concat_batches(&src.schema, &src.rows_from(from))
            .map_err(|e| Error::InvalidQuery(e.to_string()))?;
        let params = BTreeMap::from([(SOURCE_OFFSET.to_string(), total.to_string())]);
        self.apply(&[(flow, &batch)], params, false)
            .map(Some)
            .map_err(|e| rejected(table, flow, e))
    }

    fn refresh_full(&mut self, table: &str) -> Result<CommitInfo> {
        let flows: Vec<String> = self.tables[table]
            .flows
            .iter()
            .map(|f| f.spec.name.clone())
            .collect();
        let mut params = BTreeMap::new();
        let mut batches = Vec::new();
        for f in &flows {
            let (src, _) = self.flow_source(table, f)?;
            params.insert(format!("{SOURCE_OFFSET}.{f}"), src.rows.to_string());
            batches.push(
                arrow::compute::concat_batches(&src.schema, &src.batches)
                    .map_err(|e| Error::InvalidQuery(e.to_string()))?,
            );
        }
        let parts: Vec<(&str, &RecordBatch)> =
            flows.iter().map(String::as_str).zip(&batches).collect();
        let flow = flows.join(",");
        self.apply(&parts, params, true)
            .map_err(|e| rejected(table, &flow, e))
    }

    /// Applies batches of source rows, each through its flow (all flows of one table), as one
    /// commit; with `full`, the table is emptied first.
    fn apply(
        &mut self,
        parts: &[(&str, &RecordBatch)],
        mut params: BTreeMap<String, String>,
        full: bool,
    ) -> Result<CommitInfo> {
        let started = Instant::now();
        let inner = self;
        let first = parts.first().map(|p| p.0).unwrap_or_default();
        let table = inner
            .tables
            .values_mut()
            .find(|t| t.flows.iter().any(|f| f.spec.name == first))
            .ok_or_else(|| Error::NotFound {
                kind: "flow",
                name: first.to_string(),
            })?;
        let last = table.commits.last().expect("commit 0 exists");
        let version = last.version + 1;
        let ts = now_us().max(last.timestamp_us + 1);
        let mut events = Vec::new();
        let mut truncates = Vec::new();
        let mut dropped = 0;
        let mut failed_rows = BTreeMap::new();
        for (flow, batch) in parts {
            let f = table
                .flows
                .iter()
                .find(|f| f.spec.name == *flow)
                .ok_or_else(|| Error::NotFound {
                    kind: "flow",
                    name: flow.to_string(),
                })?;
            let (batch, violations) = expectation::check(
                &table.name,
                &table.expectations,
                batch,
                inner.evaluator.as_ref(),
            )?;
            for (name, action, n) in violations {
                if action == OnViolation::DropRow {
                    dropped += n;
                }
                let failed = failed_rows.entry(name).or_insert((action, 0));
                failed.1 += n;
            }
            let (e, t) = prepare(f, &batch, inner.evaluator.as_ref(), ts)?;
            events.extend(e);
            truncates.extend(t);
        }
        for (name, (action, n)) in failed_rows {
            params.insert(
                format!("expectation.{name}"),
                format!("{n} rows failed ({action})"),
            );
        }
        let flow = parts.iter().map(|p| p.0).collect::<Vec<_>>().join(",");

        let reset = if full {
            params.insert(FULL_REFRESH.to_string(), "true".to_string());
            // An error comes from the spill file, with the state half-reset: refuse everything
            // until the store is reopened.
            table
                .state
                .reset(version)
                .inspect_err(|e| inner.poisoned = Some(e.to_string()))?
        } else {
            0
        };
        let progress = inner.progress.clone();
        let n_events = events.len() as u64;
        // Only work big enough to be noticed gets a bar.
        let progress = progress.filter(|_| n_events >= 100_000);
        if let Some(p) = &progress {
            p.begin(&format!("applying events to {}", table.name), n_events);
        }
        let mut tick = |done: u64| {
            if let Some(p) = &progress {
                p.advance(done)
            }
        };
        let applied = table
            .state
            .apply(events, truncates, version, ts, true, &mut tick);
        if let Some(p) = &progress {
            p.end();
        }
        // The state may be half-applied: refuse everything until the store is reopened.
        let mut fx = applied.inspect_err(|e| inner.poisoned = Some(e.to_string()))?;
        fx.metrics.num_deleted_rows += reset;
        fx.metrics.num_dropped_rows = dropped;
        params.insert("flow".to_string(), flow.to_string());
        let commit = CommitInfo {
            version,
            timestamp_us: ts,
            operation: format!("FLOW {flow}"),
            parameters: params,
            metrics: fx.metrics.clone(),
            duration_us: 0,
        };
        let persist = || -> Result<CommitInfo> {
            let mut b = WriteBatch::default();
            put_event_blocks(
                &mut b,
                table.id,
                version,
                &table.state.schema,
                &fx.events,
                &fx.truncates,
            )?;
            let mut commit = commit.clone();
            commit.duration_us = started.elapsed().as_micros() as u64;
            put_json(&mut b, key(b'C', table.id, Some(version), None), &commit)?;
            inner.kv.write(b)?;
            Ok(commit)
        };
        match persist() {
            Ok(commit) => {
                table.commits.push(commit.clone());
                Ok(commit)
            }
            Err(e) => {
                // Memory is ahead of disk now: refuse everything until the store is reopened.
                inner.poisoned = Some(e.to_string());
                Err(e)
            }
        }
    }
}

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
        let mut g = self.write_inner()?;
        let inner = &mut *g;
        let t = inner.tables.get_mut(table).ok_or_else(|| Error::NotFound {
            kind: "table",
            name: table.to_string(),
        })?;
        let mut all = t.properties.clone();
        all.extend(properties.clone());
        let rec = TableRecord {
            name: t.name.clone(),
            schema: t.state.schema.clone(),
            flows: t.flows.iter().map(|f| f.spec.clone()).collect(),
            properties: all.clone(),
            expectations: t.expectations.clone(),
        };
        let last = t.commits.last().expect("a commit");
        let commit = CommitInfo::bare(
            last.version + 1,
            now_us().max(last.timestamp_us + 1),
            SET_PROPERTIES,
            properties,
        );
        let mut b = WriteBatch::default();
        put_json(&mut b, key(b'T', t.id, None, None), &rec)?;
        put_json(&mut b, key(b'C', t.id, Some(commit.version), None), &commit)?;
        write_or_poison(inner.kv.as_ref(), &mut inner.poisoned, b)?;
        if let Some(secs) = gc {
            t.state.set_tombstone_gc_secs(secs);
        }
        t.properties = all;
        t.commits.push(commit.clone());
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
        let t = inner.tables.get_mut(table).ok_or_else(|| Error::NotFound {
            kind: "table",
            name: table.to_string(),
        })?;
        for f in &t.flows {
            for e in &expectations {
                expectation::validate(table, e, &source_schema(f), inner.evaluator.as_ref())?;
            }
        }
        let rec = TableRecord {
            name: t.name.clone(),
            schema: t.state.schema.clone(),
            flows: t.flows.iter().map(|f| f.spec.clone()).collect(),
            properties: t.properties.clone(),
            expectations: expectations.clone(),
        };
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
        let commit = CommitInfo::bare(
            last.version + 1,
            now_us().max(last.timestamp_us + 1),
            "SET EXPECTATIONS",
            parameters,
        );
        let mut b = WriteBatch::default();
        put_json(&mut b, key(b'T', t.id, None, None), &rec)?;
        put_json(&mut b, key(b'C', t.id, Some(commit.version), None), &commit)?;
        write_or_poison(inner.kv.as_ref(), &mut inner.poisoned, b)?;
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
        let g = self.read_inner()?;
        let t = g.table(table)?;
        let mut p = t.properties.clone();
        p.entry(TOMBSTONE_GC_PROPERTY.to_string())
            .or_insert_with(|| (t.state.tombstone_gc_us / 1_000_000).to_string());
        Ok(p)
    }

    /// The version of `table` current at `timestamp_us` (µs since the epoch, UTC): the last commit
    /// at or before it (`TIMESTAMP AS OF`).
    pub fn version_at(&self, table: &str, timestamp_us: i64) -> Result<u64> {
        let g = self.read_inner()?;
        let t = g.table(table)?;
        let i = t
            .commits
            .partition_point(|c| c.timestamp_us <= timestamp_us);
        if i == 0 {
            let first = &t.commits[0];
            return Err(Error::InvalidQuery(format!(
                "`{table}` has no version at that time: its {} commit {} is at {}",
                if first.version == 0 {
                    "first"
                } else {
                    "oldest kept"
                },
                first.version,
                format_us(first.timestamp_us)
            )));
        }
        Ok(t.commits[i - 1].version)
    }

    /// VACUUM: forgets the history older than `retain` (time travel and the change feed can no
    /// longer reach it) and frees what only that history used.
    ///
    /// The oldest version kept, `h`, is the one that was current `retain` ago. Commit records
    /// before it are deleted and commit `h` becomes the *base*: on replay, every event block up to
    /// it is applied as one commit at `h`, which gives the table at `h` exactly (SPEC §3: a table
    /// depends only on its set of events), so the row versions retired before `h` are never
    /// rebuilt. Event blocks before the last full refresh up to `h` are deleted; if a tombstone GC
    /// dropped events up to `h`, the blocks up to `h` are instead replaced by the event set the
    /// table held at `h`. The table is rebuilt from the new log; the current table and every
    /// version kept read exactly as before. The vacuum is itself a commit (operation `VACUUM`).
    ///
    /// A `retain` under [`MIN_RETAIN`] (seven days) is refused unless the table property
    /// [`RETENTION_CHECK_PROPERTY`] is `false`, as Delta Lake does: see [`Store::vacuum_with`].
    pub fn vacuum(&self, table: &str, retain: std::time::Duration) -> Result<VacuumReport> {
        self.vacuum_with(table, retain, RetentionCheck::Enforced)
    }

    /// [`Store::vacuum`], with the retention check [`RetentionCheck::Disabled`] for callers that
    /// mean to drop recent history whatever the table's properties say (tests, tools).
    pub fn vacuum_with(
        &self,
        table: &str,
        retain: std::time::Duration,
        check: RetentionCheck,
    ) -> Result<VacuumReport> {
        let mut g = self.write_inner()?;
        let inner = &mut *g;
        let t = inner.tables.get(table).ok_or_else(|| Error::NotFound {
            kind: "table",
            name: table.to_string(),
        })?;
        let checked = t
            .properties
            .get(RETENTION_CHECK_PROPERTY)
            .is_none_or(|v| !v.trim().eq_ignore_ascii_case("false"));
        if matches!(check, RetentionCheck::Enforced) && checked && retain < MIN_RETAIN {
            return Err(Error::RetentionTooShort {
                table: table.to_string(),
                hours: retain.as_secs_f64() / 3600.0,
            });
        }
        let now = now_us().max(t.commits.last().expect("a commit").timestamp_us + 1);
        let cutoff = now.saturating_sub(i64::try_from(retain.as_micros()).unwrap_or(i64::MAX));
        let oldest_kept = t.commits[0].version;
        let i = t.commits.partition_point(|c| c.timestamp_us <= cutoff);
        let h = if i == 0 {
            oldest_kept
        } else {
            t.commits[i - 1].version
        };
        let id = t.id;
        let next = t.commits.last().expect("a commit").version + 1;
        let vacuum_commit = |removed: u64| {
            let parameters = BTreeMap::from([
                (
                    "retain_hours".to_string(),
                    format!("{:.3}", retain.as_secs_f64() / 3600.0),
                ),
                ("oldest_version".to_string(), h.to_string()),
                ("commits_removed".to_string(), removed.to_string()),
            ]);
            CommitInfo::bare(next, now, "VACUUM", parameters)
        };
        if h == oldest_kept {
            // Nothing old enough to forget: the vacuum is only recorded.
            let commit = vacuum_commit(0);
            let mut b = WriteBatch::default();
            put_json(&mut b, key(b'C', id, Some(commit.version), None), &commit)?;
            write_or_poison(inner.kv.as_ref(), &mut inner.poisoned, b)?;
            inner
                .tables
                .get_mut(table)
                .expect("found")
                .commits
                .push(commit);
            return Ok(VacuumReport {
                oldest_version: h,
                commits_removed: 0,
                row_versions_removed: 0,
                events_before: 0,
                events_after: 0,
                bytes_before: 0,
                bytes_after: 0,
            });
        }
        let log_bytes = |kv: &dyn KvStore| -> Result<(u64, u64)> {
            let mut bytes = 0;
            let mut events = 0;
            for tag in [b'C', b'E'] {
                for kv in kv.scan_prefix(&key(tag, id, None, None)) {
                    let (k, v) = kv?;
                    bytes += (k.len() + v.len()) as u64;
                    if tag == b'E' {
                        events += codec::decode_block(&v)?.flags.len() as u64;
                    }
                }
            }
            Ok((bytes, events))
        };
        let (bytes_before, events_before) = log_bytes(inner.kv.as_ref())?;
        let rows_before = t.state.rows.len() as u64;

        let mut b = WriteBatch::default();
        let mut commits_removed = 0;
        let h_at = t.commits.partition_point(|c| c.version < h);
        let kept_from = &t.commits[..=h_at];
        // The GC threshold in force at `h`, which the removed commits may have set.
        let mut gc_secs = t.flows[0].spec.tombstone_gc_threshold_secs;
        for c in kept_from {
            if c.operation == SET_PROPERTIES || c.parameters.contains_key(VACUUM_BASE) {
                gc_secs = gc_property(&c.parameters)?.unwrap_or(gc_secs);
            }
        }
        if kept_from
            .iter()
            .any(|c| c.metrics.num_tombstones_collected > 0)
        {
            // A tombstone GC dropped events the log still has: write the event set the table held
            // at `h` (from a replay up to it) as the base, in place of the blocks up to `h`.
            let mut at_h = t.new_state();
            replay_log(inner.kv.as_ref(), id, &mut at_h, &t.commits, Some(h))?;
            let (events, truncates) = at_h.event_set()?;
            for kv in inner.kv.scan_prefix(&key(b'E', id, None, None)) {
                let (k, _) = kv?;
                if parse_version(&k)? > h {
                    break;
                }
                b.delete(k);
            }
            put_event_blocks(&mut b, id, h, &t.state.schema, &events, &truncates)?;
        } else if let Some(f) = kept_from
            .iter()
            .rev()
            .find(|c| c.parameters.contains_key(FULL_REFRESH))
        {
            // Otherwise the blocks up to `h` are the event set already, and stay where they are;
            // only those before the last full refresh, which it made irrelevant, go.
            for kv in inner.kv.scan_prefix(&key(b'E', id, None, None)) {
                let (k, _) = kv?;
                if parse_version(&k)? >= f.version {
                    break;
                }
                b.delete(k);
            }
        }
        for c in t.commits.iter().take_while(|c| c.version < h) {
            b.delete(key(b'C', id, Some(c.version), None));
            commits_removed += 1;
        }
        // Commit `h` becomes the base: on replay, every block up to it is applied as one commit
        // at `h` (never reset: what a full refresh dropped is gone already).
        let mut base = t.commits[h_at].clone();
        base.parameters.remove(FULL_REFRESH);
        base.parameters
            .insert(VACUUM_BASE.to_string(), "true".to_string());
        base.parameters
            .insert(TOMBSTONE_GC_PROPERTY.to_string(), gc_secs.to_string());
        put_json(&mut b, key(b'C', id, Some(h), None), &base)?;
        let commit = vacuum_commit(commits_removed);
        put_json(&mut b, key(b'C', id, Some(commit.version), None), &commit)?;
        write_or_poison(inner.kv.as_ref(), &mut inner.poisoned, b)?;
        // Free the old state before rebuilding, so a VACUUM never holds two copies of the table
        // (it doubled peak memory). Nobody can see the empty state: the write lock is held, and if
        // the rebuild fails the store is poisoned and refuses reads until it is reopened.
        {
            let t = inner.tables.get_mut(table).expect("found");
            t.state = t.new_state();
            t.generation += 1;
        }
        // Rebuild from the log as it now is, as an open would.
        let rebuilt = (|| -> Result<(TableState, Vec<CommitInfo>)> {
            let t = &inner.tables[table];
            let commits = load_commits(inner.kv.as_ref(), id, &t.name)?;
            let mut state = t.new_state();
            replay_log(inner.kv.as_ref(), id, &mut state, &commits, None)?;
            Ok((state, commits))
        })();
        let (state, commits) = rebuilt.inspect_err(|e| inner.poisoned = Some(e.to_string()))?;
        let t = inner.tables.get_mut(table).expect("found");
        t.state = state;
        t.commits = commits;
        let rows_after = t.state.rows.len() as u64;
        // Measured only once the table is whole again: an error here leaves a correct store.
        let (bytes_after, events_after) = log_bytes(inner.kv.as_ref())?;
        Ok(VacuumReport {
            oldest_version: h,
            commits_removed,
            row_versions_removed: rows_before.saturating_sub(rows_after),
            events_before,
            events_after,
            bytes_before,
            bytes_after,
        })
    }

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

    /// The commit log of `table`, oldest first.
    pub fn history(&self, table: &str) -> Result<Vec<CommitInfo>> {
        Ok(self.read_inner()?.table(table)?.commits.clone())
    }

    /// Runs `f` on a consistent read view of `table`.
    pub fn read<R>(&self, table: &str, f: impl FnOnce(&TableReader<'_>) -> R) -> Result<R> {
        let g = self.read_inner()?;
        let t = g.table(table)?;
        Ok(f(&TableReader { table: t }))
    }
}

impl Inner {
    fn table(&self, name: &str) -> Result<&Table> {
        self.tables.get(name).ok_or_else(|| Error::NotFound {
            kind: "table",
            name: name.to_string(),
        })
    }

    fn load(&mut self) -> Result<()> {
        let records: Vec<(Vec<u8>, Vec<u8>)> = self.kv.scan_prefix(b"T").collect::<Result<_>>()?;
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
                self.cold.clone(),
            );
            let commits = load_commits(self.kv.as_ref(), id, &rec.name)?;
            replay_log(self.kv.as_ref(), id, &mut state, &commits, None)?;
            self.next_table_id = self.next_table_id.max(id + 1);
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
                    generation: 0,
                    cold: self.cold.clone(),
                },
            );
        }
        let records: Vec<(Vec<u8>, Vec<u8>)> = self.kv.scan_prefix(b"S").collect::<Result<_>>()?;
        for (k, v) in records {
            let id = k
                .get(1..5)
                .and_then(|b| b.try_into().ok())
                .map(u32::from_be_bytes)
                .ok_or_else(|| corrupt("short source key"))?;
            let rec: SourceRecord =
                serde_json::from_slice(&v).map_err(|e| corrupt(format!("source record: {e}")))?;
            let mut src = SourceTable::new(id, rec.name.clone(), rec.columns);
            src.origin = rec.origin;
            let mut last_append = None;
            for kv in self.kv.scan_prefix(&key(b'L', id, None, None)) {
                let (k, v) = kv?;
                src.appends = src.appends.max(parse_version(&k)? + 1);
                src.loaded
                    .insert(String::from_utf8(v).map_err(|_| corrupt("loaded name is not UTF-8"))?);
            }
            let named_appends = src.appends;
            for kv in self.kv.scan_prefix(&key(b'H', id, None, None)) {
                let (_, v) = kv?;
                src.history.push(
                    serde_json::from_slice(&v)
                        .map_err(|e| corrupt(format!("source commit record: {e}")))?,
                );
            }
            src.appends = 0;
            for kv in self.kv.scan_prefix(&key(b'A', id, None, None)) {
                let (k, v) = kv?;
                let append = parse_version(&k)?;
                if last_append != Some(append) {
                    src.appends += 1;
                    last_append = Some(append);
                }
                for b in SourceTable::decode_chunk(&v)? {
                    if b.schema().fields().len() != src.columns.len() {
                        return Err(corrupt(format!(
                            "source `{}`: chunk does not match the table",
                            rec.name
                        )));
                    }
                    let b = RecordBatch::try_new(src.schema.clone(), b.columns().to_vec())
                        .map_err(|e| corrupt(e.to_string()))?;
                    src.rows += b.num_rows() as u64;
                    src.batches.push(b);
                }
            }
            // Appends are numbered densely except that an empty named append has no chunk.
            src.appends = src
                .appends
                .max(named_appends)
                .max(last_append.map_or(0, |a| a + 1));
            self.next_table_id = self.next_table_id.max(id + 1);
            self.sources.insert(rec.name, src);
        }
        for kv in self.kv.scan_prefix(b"V") {
            let (k, v) = kv?;
            let name = String::from_utf8(k[1..].to_vec()).map_err(|_| corrupt("view name"))?;
            let sql = String::from_utf8(v).map_err(|_| corrupt("view text"))?;
            self.views.insert(name, sql);
        }
        Ok(())
    }
}

/// Which rows to read, on business and system time. Bounds are encoded with
/// [`crate::keycodec`] in the type of the sequence (resp. system sequence).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum TimeFilter {
    /// Every row.
    #[default]
    All,
    /// Rows whose interval contains `t`: `start <= t < end`.
    AsOf(Vec<u8>),
    /// Rows whose interval overlaps `[a, b)`.
    FromTo(Vec<u8>, Vec<u8>),
    /// Rows whose interval overlaps `[a, b]`.
    Between(Vec<u8>, Vec<u8>),
}

impl TimeFilter {
    fn matches(&self, start: Option<&[u8]>, end: Option<&[u8]>) -> bool {
        let Some(s) = start else { return true };
        match self {
            TimeFilter::All => true,
            TimeFilter::AsOf(t) => s <= &t[..] && end.is_none_or(|e| &t[..] < e),
            TimeFilter::FromTo(a, b) => s < &b[..] && end.is_none_or(|e| e > &a[..]),
            TimeFilter::Between(a, b) => s <= &b[..] && end.is_none_or(|e| e > &a[..]),
        }
    }
}

/// What a scan reads: a table version, a key range (encoded keys), and time filters.
#[derive(Clone, Debug)]
pub struct ScanSpec {
    /// Read the table as of this commit (default: the latest).
    pub version: Option<u64>,
    /// Lower bound on the encoded key.
    pub key_lo: Bound<Vec<u8>>,
    /// Upper bound on the encoded key.
    pub key_hi: Bound<Vec<u8>>,
    /// Selection on `__START_AT`/`__END_AT`.
    pub business: TimeFilter,
    /// Selection on `__SYSTEM_START_AT`/`__SYSTEM_END_AT`.
    pub system: TimeFilter,
}

impl Default for ScanSpec {
    fn default() -> Self {
        ScanSpec {
            version: None,
            key_lo: Bound::Unbounded,
            key_hi: Bound::Unbounded,
            business: TimeFilter::All,
            system: TimeFilter::All,
        }
    }
}

/// Where a scan stopped; pass it back to continue.
#[derive(Clone, Debug, Default)]
pub struct ScanCursor {
    /// Where a key-by-key scan goes on: the key, and the first row id to read in it.
    after: Option<(Vec<u8>, RowId)>,
    next_id: u32,
    /// Whether the scan goes key by key (decided on the first call: a table with frozen rows
    /// is read key by key, so each key's cold pages are decoded once).
    by_key: Option<bool>,
    done: bool,
    /// The row store generation the scan started on (see VACUUM).
    generation: Option<u64>,
}

impl ScanCursor {
    /// Whether the scan has read everything.
    pub fn is_done(&self) -> bool {
        self.done
    }
}

/// Row `id` among a key's frozen rows (sorted by id).
fn find_row(cold: &[(RowId, StoredRow)], id: RowId) -> Option<&StoredRow> {
    cold.binary_search_by_key(&id, |c| c.0)
        .ok()
        .map(|i| &cold[i].1)
}

/// Reads frozen rows back by id, keeping the last few keys' decoded rows.
struct ColdReader<'a> {
    state: &'a TableState,
    keys: RefCell<VecDeque<(u32, Rc<ColdRows>)>>,
}

impl<'a> ColdReader<'a> {
    fn new(state: &'a TableState) -> Self {
        ColdReader {
            state,
            keys: RefCell::new(VecDeque::new()),
        }
    }

    /// Frozen row `id`.
    fn row(&self, id: RowId) -> Result<Cow<'a, StoredRow>> {
        let no = self.state.rows.key_of(id);
        let mut keys = self.keys.borrow_mut();
        let rows = match keys.iter().find(|k| k.0 == no) {
            Some((_, rows)) => rows.clone(),
            None => {
                let (key, ks) = self
                    .state
                    .key_by_no(no)
                    .ok_or_else(|| corrupt(format!("row {id} belongs to no key")))?;
                let rows = Rc::new(self.state.cold_rows(key, ks)?);
                if keys.len() == 8 {
                    keys.pop_front();
                }
                keys.push_back((no, rows.clone()));
                rows
            }
        };
        find_row(&rows, id)
            .cloned()
            .map(Cow::Owned)
            .ok_or_else(|| corrupt(format!("row {id} is in no cold page of its key")))
    }
}

/// One target row, borrowed from the store. Temporal bounds are encoded ([`crate::keycodec`]).
#[derive(Debug, Clone, Copy)]
pub struct RowView<'a> {
    /// The encoded key.
    pub key: &'a [u8],
    /// Output column values.
    pub values: &'a [Value],
    /// `__START_AT`.
    pub start: Option<&'a [u8]>,
    /// `__END_AT`.
    pub end: Option<&'a [u8]>,
    /// `__SYSTEM_START_AT`.
    pub sys_start: Option<&'a [u8]>,
    /// `__SYSTEM_END_AT`.
    pub sys_end: Option<&'a [u8]>,
}

impl<'a> RowView<'a> {
    fn of(r: &'a StoredRow) -> Self {
        RowView {
            key: &r.key,
            values: &r.values,
            start: r.start.as_deref(),
            end: r.end.as_deref(),
            sys_start: r.sys_start.as_deref(),
            sys_end: r.sys_end.as_deref(),
        }
    }
}

/// A read view of one table, valid inside [`Store::read`].
pub struct TableReader<'a> {
    table: &'a Table,
}

impl TableReader<'_> {
    /// The table's shape.
    pub fn schema(&self) -> &TableSchema {
        &self.table.state.schema
    }

    /// The latest commit version.
    pub fn latest_version(&self) -> u64 {
        self.table.commits.last().expect("a commit").version
    }

    /// The oldest version that can be read: 0, or where the last VACUUM cut the history.
    pub fn oldest_version(&self) -> u64 {
        self.table.commits[0].version
    }

    /// The commit record of `version`, if kept.
    pub fn commit(&self, version: u64) -> Option<&CommitInfo> {
        let i = self
            .table
            .commits
            .binary_search_by_key(&version, |c| c.version)
            .ok()?;
        Some(&self.table.commits[i])
    }

    /// Checks that `version` can be read.
    fn check_version(&self, version: u64) -> Result<()> {
        let latest = self.latest_version();
        if version > latest {
            return Err(Error::NoSuchVersion {
                table: self.table.name.clone(),
                version,
                latest,
            });
        }
        let oldest = self.oldest_version();
        if version < oldest {
            return Err(Error::VersionVacuumed {
                table: self.table.name.clone(),
                version,
                oldest,
            });
        }
        Ok(())
    }

    /// The change data feed of commits `from..=to` (SPEC §7): calls `f` with each commit's
    /// changed rows, in commit order. Within a commit, a retired row and a written row with the
    /// same row identity (the keys; plus `coalesce(__START_AT, __END_AT)` for SCD2; plus
    /// `__SYSTEM_START_AT` for BITEMPORAL) are an update (pre-image, then post-image) unless they
    /// are equal, which is no change; other retired rows are deletes, other written rows inserts.
    /// `from` must be after the oldest version kept: that commit holds the compacted history.
    pub fn changes(
        &self,
        from: u64,
        to: u64,
        mut f: impl FnMut(u64, ChangeType, RowView<'_>),
    ) -> Result<()> {
        if from > to {
            return Err(Error::InvalidQuery(format!(
                "the change feed from version {from} to {to}: the start is after the end"
            )));
        }
        self.check_version(to)?;
        self.check_version(from)?;
        let oldest = self.oldest_version();
        if from <= oldest && oldest > 0 {
            return Err(Error::VersionVacuumed {
                table: self.table.name.clone(),
                version: from,
                oldest: oldest + 1,
            });
        }
        let rows = &self.table.state.rows;
        let cold = ColdReader::new(&self.table.state);
        let row = |id: RowId| -> Result<Cow<'_, StoredRow>> {
            match rows.get(id) {
                Some(r) => Ok(Cow::Borrowed(r)),
                None => cold.row(id),
            }
        };
        let mode = self.table.state.schema.mode;
        let identity = |r: &StoredRow| -> Vec<u8> {
            let mut id = Vec::with_capacity(r.key.len() + 32);
            let mut part = |b: &[u8]| {
                id.extend_from_slice(&(b.len() as u32).to_be_bytes());
                id.extend_from_slice(b);
            };
            part(&r.key);
            if mode != StoredAs::Scd1 {
                part(r.start.as_deref().or(r.end.as_deref()).unwrap_or_default());
            }
            if mode == StoredAs::Bitemporal {
                part(r.sys_start.as_deref().unwrap_or_default());
            }
            id
        };
        for v in from..=to {
            let mut pre: HashMap<Vec<u8>, RowId> = HashMap::new();
            let mut deletes = Vec::new();
            if let Some(ids) = rows.retired_by(v) {
                for id in ids {
                    let r = row(id)?;
                    if r.added < v {
                        pre.insert(identity(&r), id);
                        deletes.push(id);
                    }
                }
            }
            let mut matched = HashSet::new();
            let mut out: Vec<(ChangeType, RowId)> = Vec::new();
            for id in rows.first_added(v)..rows.first_added(v + 1) {
                let r = row(id)?;
                if r.retired == Some(v) {
                    continue; // written and replaced within the commit
                }
                match pre.get(&identity(&r)) {
                    Some(&p) => {
                        matched.insert(p);
                        let q = row(p)?;
                        let same = q.values == r.values
                            && q.start == r.start
                            && q.end == r.end
                            && q.sys_start == r.sys_start
                            && q.sys_end == r.sys_end;
                        if !same {
                            out.push((ChangeType::UpdatePreimage, p));
                            out.push((ChangeType::UpdatePostimage, id));
                        }
                    }
                    None => out.push((ChangeType::Insert, id)),
                }
            }
            for id in deletes {
                if !matched.contains(&id) {
                    let r = row(id)?;
                    f(v, ChangeType::Delete, RowView::of(&r));
                }
            }
            for (t, id) in out {
                let r = row(id)?;
                f(v, t, RowView::of(&r));
            }
        }
        Ok(())
    }

    /// The commit log.
    pub fn history(&self) -> &[CommitInfo] {
        &self.table.commits
    }

    /// Number of row versions held (current, retired, and closed on system time), which time
    /// travel and the change feed read.
    pub fn row_versions(&self) -> u64 {
        self.table.state.rows.len() as u64
    }

    /// Number of rows in the current table.
    pub fn live_rows(&self) -> u64 {
        self.table.state.rows.live.len()
    }

    /// How much of the table's event history is frozen to the spill file, and how much is in
    /// memory (see [`StoreOptions::hot_events_per_key`]).
    pub fn cold_stats(&self) -> ColdStats {
        self.table.state.cold_stats()
    }

    /// Calls `f` on up to `max_rows` rows that `spec` selects, in key order, continuing from
    /// `cursor`. Sets `cursor.is_done()` when nothing is left.
    pub fn scan(
        &self,
        spec: &ScanSpec,
        cursor: &mut ScanCursor,
        max_rows: usize,
        mut f: impl FnMut(RowView<'_>),
    ) -> Result<()> {
        let latest = self.latest_version();
        let version = spec.version.unwrap_or(latest);
        self.check_version(version)?;
        match cursor.generation {
            None => cursor.generation = Some(self.table.generation),
            Some(g) if g != self.table.generation => {
                return Err(Error::ScanInterrupted(self.table.name.clone()))
            }
            Some(_) => {}
        }
        let current = version == latest;
        let lo: Bound<&[u8]> = match (&cursor.after, &spec.key_lo) {
            (Some((k, _)), _) => Bound::Included(&k[..]),
            (None, Bound::Included(k)) => Bound::Included(&k[..]),
            (None, Bound::Excluded(k)) => Bound::Excluded(&k[..]),
            (None, Bound::Unbounded) => Bound::Unbounded,
        };
        let hi: Bound<&[u8]> = match &spec.key_hi {
            Bound::Included(k) => Bound::Included(&k[..]),
            Bound::Excluded(k) => Bound::Excluded(&k[..]),
            Bound::Unbounded => Bound::Unbounded,
        };
        if let (Bound::Included(l) | Bound::Excluded(l), Bound::Included(h) | Bound::Excluded(h)) =
            (lo, hi)
        {
            if l > h {
                cursor.done = true;
                return Ok(());
            }
        }
        let rows = &self.table.state.rows;
        let matches_at = |v: &RowView<'_>, added: u64, retired: Option<u64>| {
            (if current {
                retired.is_none()
            } else {
                added <= version && retired.is_none_or(|r| r > version)
            }) && spec.business.matches(v.start, v.end)
                && spec.system.matches(v.sys_start, v.sys_end)
        };
        let matches = |row: &StoredRow| matches_at(&RowView::of(row), row.added, row.retired);
        let mut n = 0;
        let unbounded = matches!(
            (&spec.key_lo, &spec.key_hi),
            (Bound::Unbounded, Bound::Unbounded)
        );
        let by_key = *cursor.by_key.get_or_insert(!unbounded || rows.any_cold());
        if !by_key {
            // No key range and nothing frozen when the scan began: read the row store in storage
            // order, sequentially. (Rows frozen since are read back from their keys' pages.)
            let cold = ColdReader::new(&self.table.state);
            let mut id = cursor.next_id;
            let len = rows.len();
            while (id as usize) < len {
                if n == max_rows {
                    cursor.next_id = id;
                    return Ok(());
                }
                rows.prefetch_ahead(id as usize, |p| (p < len).then_some(p as RowId));
                let row = match rows.get(id) {
                    Some(row) => Cow::Borrowed(row),
                    None => cold.row(id)?,
                };
                if matches(&row) {
                    f(RowView::of(&row));
                    n += 1;
                }
                id += 1;
            }
            cursor.done = true;
            return Ok(());
        }
        let state = &self.table.state;
        let resume = cursor.after.as_ref().map_or(0, |(_, r)| *r);
        let mut values = Vec::new();
        for (ki, (k, ks)) in state.key_range(lo, hi).enumerate() {
            // A key's rows in id order: those in memory merged with its frozen ones.
            let from = if ki == 0 { resume } else { 0 };
            let cold = state.cold_batch(k, ks)?;
            let mut h = ks.rows.partition_point(|&r| r < from);
            let mut c = cold.first_at_or_after(from);
            loop {
                let (hot, frozen) = (ks.rows.get(h).copied(), cold.id_at(c));
                let Some(id) = hot.into_iter().chain(frozen).min() else {
                    break;
                };
                if n == max_rows {
                    cursor.after = Some((k.to_vec(), id));
                    return Ok(());
                }
                if hot == Some(id) {
                    rows.prefetch_ahead(h, |p| ks.rows.get(p).copied());
                    h += 1;
                    let row = rows
                        .get(id)
                        .ok_or_else(|| corrupt(format!("row {id} of a key is missing")))?;
                    if matches(row) {
                        f(RowView::of(row));
                        n += 1;
                    }
                    continue;
                }
                let row = cold.at(c);
                let [start, end, sys_start, sys_end] = row.bounds;
                let mut view = RowView {
                    key: row.key,
                    values: &[],
                    start,
                    end,
                    sys_start,
                    sys_end,
                };
                // The values are built only for a row the scan returns.
                if matches_at(&view, row.added, row.retired) {
                    cold.values(c, &mut values)?;
                    view.values = &values;
                    f(view);
                    n += 1;
                }
                c += 1;
            }
        }
        cursor.done = true;
        Ok(())
    }

    /// Calls `f` on the current row of `key` (encoded) at business time `business` and system
    /// time `system` (encoded; `None` = now), if there is one. SCD1 tables ignore both times.
    pub fn lookup<R>(
        &self,
        key: &[u8],
        business: Option<&[u8]>,
        system: Option<&[u8]>,
        f: impl FnOnce(RowView<'_>) -> R,
    ) -> Result<Option<R>> {
        let state = &self.table.state;
        let Some((k, ks)) = state.keys.get_key_value(key) else {
            return Ok(None);
        };
        let rows = &state.rows;
        let mode = state.schema.mode;
        if mode == StoredAs::Scd1 {
            // The open version is in the hot part, and so is its row.
            let cur = ks.timeline.values().next_back().and_then(|v| v.row);
            return Ok(cur.and_then(|r| rows.get(r)).map(|r| f(RowView::of(r))));
        }
        let b =
            business.ok_or_else(|| Error::InvalidQuery("a business time is required".into()))?;
        let now = match (mode, system) {
            (StoredAs::Bitemporal, Some(s)) => ks.max_sys.as_deref().is_none_or(|m| s >= m),
            _ => true,
        };
        // The timeline answers "now" without an index, unless part of it is frozen.
        if now && ks.lookup.get().is_none() && ks.frozen.is_none() {
            let hit = ks
                .timeline
                .range::<[u8], _>((Bound::Unbounded, Bound::Included(b)))
                .next_back()
                .filter(|(_, v)| v.end.as_deref().is_none_or(|e| b < e))
                .and_then(|(_, v)| v.row);
            return Ok(hit.map(|r| f(RowView::of(&rows[r]))));
        }
        let index = match ks.lookup.get() {
            Some(index) => index,
            None => {
                // Built from every live row of the key; the frozen ones are read back once and
                // kept by the index.
                let cold = state.cold_rows(k, ks)?;
                let live = (cold.iter().map(|(r, row)| (*r, row)))
                    .chain(ks.rows.iter().filter_map(|&r| Some((r, rows.get(r)?))))
                    .filter(|(_, row)| row.retired.is_none());
                let mut index = PointIndex::build(live);
                index.cold = cold.into_iter().collect();
                // Another reader may have built it meanwhile; either copy is the same.
                let _ = ks.lookup.set(Box::new(index));
                ks.lookup.get().expect("just set")
            }
        };
        let hit = match system {
            Some(s) if !now => index.find(b, s),
            _ => index.find_now(b),
        };
        Ok(hit
            .and_then(|r| index.row(rows, r))
            .map(|r| f(RowView::of(r))))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{ArrayRef, Int64Array, RecordBatch};
    use arrow::datatypes::{DataType, Field, Schema};

    use super::*;
    use crate::{ColumnSelection, MemKv};

    /// Every row of the table as of `version` (`None`: the latest), sorted.
    fn rows(store: &Store, version: Option<u64>) -> Vec<String> {
        let mut out = Vec::new();
        store
            .read("t", |t| {
                let spec = ScanSpec {
                    version,
                    ..Default::default()
                };
                let mut cursor = ScanCursor::default();
                while !cursor.is_done() {
                    t.scan(&spec, &mut cursor, 7, |r| out.push(format!("{r:?}")))
                        .unwrap();
                }
            })
            .unwrap();
        out.sort();
        out
    }

    /// VACUUM replays its base, which holds every event, in parts of `REPLAY_PART` events; the
    /// table comes out the same as the one the commits built.
    #[test]
    fn a_commit_replayed_in_parts_gives_the_same_table() {
        let schema = Schema::new(vec![
            Field::new("k", DataType::Int64, false),
            Field::new("b", DataType::Int64, false),
            Field::new("s", DataType::Int64, false),
            Field::new("v", DataType::Int64, false),
        ]);
        let flow = FlowSpec::builder("f", "t", &schema)
            .keys(["k"])
            .sequence_by(["b"])
            .system_sequence_by("s")
            .columns(ColumnSelection::all_except(["b", "s"]))
            .stored_as(StoredAs::Bitemporal)
            .build()
            .unwrap();
        let store = Store::with_kv(Box::new(MemKv::default())).unwrap();
        store.create_flow(flow).unwrap();
        // Three keys; every seventh event late on business time, every fifth on system time.
        let events: Vec<[i64; 4]> = (0..60i64)
            .map(|i| {
                let b = if i % 7 == 3 { i - 9 } else { i };
                let s = if i % 5 == 2 { i - 6 } else { i };
                [i % 3, b, s, i % 4]
            })
            .collect();
        for part in [&events[..8], &events[8..40], &events[40..]] {
            let col = |j: usize| -> ArrayRef {
                Arc::new(Int64Array::from_iter_values(part.iter().map(|e| e[j])))
            };
            let batch =
                RecordBatch::try_new(Arc::new(schema.clone()), (0..4).map(col).collect()).unwrap();
            store.apply("f", &batch).unwrap();
        }
        let before = rows(&store, None);
        assert!(before.len() > 60, "{} rows", before.len());
        store
            .vacuum_with("t", std::time::Duration::ZERO, RetentionCheck::Disabled)
            .unwrap();
        assert_eq!(rows(&store, None), before);
    }
}
