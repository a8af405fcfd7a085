//! Temporal scans of target tables into Arrow record batches (docs/SEMANTICS.md §8), with key, time and
//! projection selection pushed into the storage scan.

use std::ops::Bound;
use std::sync::Arc;

use arrow::array::ArrayRef;
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use asof_storage::keycodec::{decode_tuple, encode_value};
use asof_storage::{
    Caching, ColumnType, KeySpan, ScanCursor, ScanSpec, Store, StoredAs, TableSchema, TimeFilter,
    Value, Values,
};

use crate::arrow_conv::table_arrow_schema;
use crate::error::{QueryError, Result};

mod columns;
mod workers;

pub(crate) use columns::{make_cols, Clamps, Col};
use columns::{Clamp, Filling};
use workers::{Next, SpanRead, SpanWorkers};

/// A selection on one timeline (docs/SEMANTICS.md §8). Bounds are values of the timeline's type; strings are
/// parsed (`"2025-07-18T12:00:00"`). For `SEQUENCE BY STRUCT(...)`, give one value per component.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum TimeSelection {
    /// Every row (`FOR ... ALL`), the default.
    #[default]
    All,
    /// Rows valid at `t`: `start <= t < end` (`AS OF t`).
    AsOf(Vec<Value>),
    /// Rows overlapping `[a, b)` (`FROM a TO b`).
    FromTo(Vec<Value>, Vec<Value>),
    /// Rows overlapping `[a, b]` (`BETWEEN a AND b`).
    Between(Vec<Value>, Vec<Value>),
    /// Rows overlapping `[a, b)`, their interval trimmed to it (`ONLY FROM a TO b`): what each
    /// row says about that window only.
    Within(Vec<Value>, Vec<Value>),
}

impl TimeSelection {
    /// `AS OF t` with a single-component timeline.
    pub fn as_of(t: impl Into<Value>) -> Self {
        TimeSelection::AsOf(vec![t.into()])
    }
    /// `FROM a TO b` with a single-component timeline.
    pub fn from_to(a: impl Into<Value>, b: impl Into<Value>) -> Self {
        TimeSelection::FromTo(vec![a.into()], vec![b.into()])
    }
    /// `BETWEEN a AND b` with a single-component timeline.
    pub fn between(a: impl Into<Value>, b: impl Into<Value>) -> Self {
        TimeSelection::Between(vec![a.into()], vec![b.into()])
    }

    fn encode(&self, types: &[ColumnType], what: &str) -> Result<TimeFilter> {
        let enc = |vs: &[Value]| -> Result<Vec<u8>> { encode_values(vs, types, what) };
        Ok(match self {
            TimeSelection::All => TimeFilter::All,
            TimeSelection::AsOf(t) => TimeFilter::AsOf(enc(t)?),
            TimeSelection::FromTo(a, b) | TimeSelection::Within(a, b) => {
                TimeFilter::FromTo(enc(a)?, enc(b)?)
            }
            TimeSelection::Between(a, b) => TimeFilter::Between(enc(a)?, enc(b)?),
        })
    }

    /// The window rows are trimmed to (`Within`), encoded.
    fn clamp(&self, types: &[ColumnType], what: &str) -> Result<Option<Clamp>> {
        match self {
            TimeSelection::Within(a, b) => Ok(Some(Clamp {
                from: encode_values(a, types, what)?,
                to: encode_values(b, types, what)?,
            })),
            _ => Ok(None),
        }
    }
}

fn encode_values(vs: &[Value], types: &[ColumnType], what: &str) -> Result<Vec<u8>> {
    let refs: Vec<&ColumnType> = types.iter().collect();
    encode_refs(vs, &refs, what)
}

fn encode_refs(vs: &[Value], types: &[&ColumnType], what: &str) -> Result<Vec<u8>> {
    if vs.len() != types.len() {
        return Err(QueryError::Invalid(format!(
            "{what} needs {} value(s), got {}",
            types.len(),
            vs.len()
        )));
    }
    let mut out = Vec::with_capacity(types.len() * 9);
    for (v, t) in vs.iter().zip(types) {
        let v = v
            .coerce(t)
            .map_err(|e| QueryError::Invalid(format!("{what}: {e}")))?;
        encode_value(&v, t, &mut out).map_err(|e| QueryError::Invalid(format!("{what}: {e}")))?;
    }
    Ok(out)
}

/// Which keys to read. Values are given in key-column order; fewer values than key columns select
/// a prefix (all keys that start with them).
#[derive(Clone, Debug, Default, PartialEq)]
pub enum KeySelection {
    /// Every key.
    #[default]
    All,
    /// Keys equal to (or starting with) these values.
    Eq(Vec<Value>),
    /// Keys within bounds.
    Range(Bound<Vec<Value>>, Bound<Vec<Value>>),
}

/// A scan of one target table.
#[derive(Clone, Debug, PartialEq)]
pub struct ScanRequest {
    /// Selection on business time (`__START_AT`/`__END_AT`).
    pub business: TimeSelection,
    /// Selection on system time (`__SYSTEM_START_AT`/`__SYSTEM_END_AT`).
    pub system: TimeSelection,
    /// Which keys.
    pub keys: KeySelection,
    /// Columns to return, by name (output and temporal columns); `None` = all.
    pub projection: Option<Vec<String>>,
    /// Read the table as it was after this commit (time travel); `None` = latest.
    pub version: Option<u64>,
    /// Rows per record batch, at most (a scan on worker threads ends a batch where a span of
    /// keys ends).
    pub batch_size: usize,
    /// Comparisons on business time a query's filter makes (pushed down from `WHERE`: the scan
    /// may return more rows, never fewer).
    pub business_bounds: Vec<PeriodBound>,
    /// The same on system time.
    pub system_bounds: Vec<PeriodBound>,
    /// The threads that read a table that is not in memory.
    pub threads: ScanThreads,
}

/// The threads a scan of a table that is not in memory reads its keys' pages with, a span of
/// keys each; the scan returns their rows in key order whatever their number. A table in
/// memory, and a scan of one key, are read on the scan's own thread.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ScanThreads {
    /// One worker per core of the machine, at most four; on one core, [`ScanThreads::One`].
    #[default]
    Cores,
    /// The scan's own thread.
    One,
    /// This many workers (at least one, at most [`ScanThreads::MOST`]), beside the scan's own
    /// thread, which reads the keys' heads and hands the spans out.
    Workers(usize),
}

/// The most workers [`ScanThreads::Cores`] starts.
const CORES_AT_MOST: usize = 4;

impl ScanThreads {
    /// The most workers [`ScanThreads::Workers`] starts.
    pub const MOST: usize = 64;

    /// The workers to start; `None`: none, the scan reads on its own thread.
    fn workers(self) -> Option<usize> {
        match self {
            ScanThreads::One => None,
            ScanThreads::Workers(n) => Some(n.clamp(1, Self::MOST)),
            ScanThreads::Cores => {
                // Asked once: on Linux it reads the process's cgroup limits.
                static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
                let cores = *CORES
                    .get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
                (cores > 1).then_some(cores.min(CORES_AT_MOST))
            }
        }
    }
}

impl Default for ScanRequest {
    fn default() -> Self {
        ScanRequest {
            business: TimeSelection::All,
            system: TimeSelection::All,
            keys: KeySelection::All,
            projection: None,
            version: None,
            batch_size: 8192,
            business_bounds: Vec::new(),
            system_bounds: Vec::new(),
            threads: ScanThreads::Cores,
        }
    }
}

/// A comparison on a timeline's interval that a query filters on (`__START_AT < x`, `__END_AT >
/// x OR __END_AT IS NULL`, what a period predicate means): the storage scan skips the pages and
/// rows that cannot pass it. Values are of the timeline's type (one component).
#[derive(Clone, Debug, PartialEq)]
pub enum PeriodBound {
    /// The interval starts below the value (`inclusive`: or at it).
    StartsBelow { value: Value, inclusive: bool },
    /// The interval ends above the value (`inclusive`: or at it); an open end is above all.
    EndsAbove { value: Value, inclusive: bool },
}

/// `selection`'s filter, and the `bounds`, as one filter of the storage scan.
fn with_bounds(
    selection: TimeFilter,
    bounds: &[PeriodBound],
    types: &[ColumnType],
    what: &str,
) -> Result<TimeFilter> {
    if bounds.is_empty() {
        return Ok(selection);
    }
    let mut all = vec![selection];
    for b in bounds {
        let (v, inclusive) = match b {
            PeriodBound::StartsBelow { value, inclusive }
            | PeriodBound::EndsAbove { value, inclusive } => (value, *inclusive),
        };
        let enc = encode_values(std::slice::from_ref(v), types, what)?;
        let bound = if inclusive {
            Bound::Included(enc)
        } else {
            Bound::Excluded(enc)
        };
        all.push(match b {
            PeriodBound::StartsBelow { .. } => TimeFilter::Bounds {
                start: bound,
                end: Bound::Unbounded,
            },
            PeriodBound::EndsAbove { .. } => TimeFilter::Bounds {
                start: Bound::Unbounded,
                end: bound,
            },
        });
    }
    Ok(TimeFilter::Every(all))
}

/// Bounds on the encoded key.
type KeyBounds = (Bound<Vec<u8>>, Bound<Vec<u8>>);

/// A prefix's exclusive upper bound: every encoded value starts with 0x00 or 0x01.
fn prefix_end(mut p: Vec<u8>) -> Vec<u8> {
    p.push(0x02);
    p
}

fn key_bounds(sel: &KeySelection, schema: &TableSchema) -> Result<KeyBounds> {
    let types = schema.key_types();
    let enc = |vs: &Vec<Value>| -> Result<(Vec<u8>, bool)> {
        if vs.len() > types.len() {
            return Err(QueryError::Invalid(format!(
                "the key has {} column(s), got {} values",
                types.len(),
                vs.len()
            )));
        }
        Ok((
            encode_values(vs, &types[..vs.len()], "key")?,
            vs.len() < types.len(),
        ))
    };
    Ok(match sel {
        KeySelection::All => (Bound::Unbounded, Bound::Unbounded),
        KeySelection::Eq(vs) => {
            let (k, prefix) = enc(vs)?;
            if prefix {
                (Bound::Included(k.clone()), Bound::Excluded(prefix_end(k)))
            } else {
                (Bound::Included(k.clone()), Bound::Included(k))
            }
        }
        KeySelection::Range(lo, hi) => {
            let lo = match lo {
                Bound::Unbounded => Bound::Unbounded,
                Bound::Included(v) => Bound::Included(enc(v)?.0),
                Bound::Excluded(v) => match enc(v)? {
                    (k, true) => Bound::Included(prefix_end(k)),
                    (k, false) => Bound::Excluded(k),
                },
            };
            let hi = match hi {
                Bound::Unbounded => Bound::Unbounded,
                Bound::Included(v) => match enc(v)? {
                    (k, true) => Bound::Excluded(prefix_end(k)),
                    (k, false) => Bound::Included(k),
                },
                Bound::Excluded(v) => Bound::Excluded(enc(v)?.0),
            };
            (lo, hi)
        }
    })
}

/// A running scan: an iterator of record batches. Each batch is read under a short read lock; the
/// scan is pinned to the table version current when it started, so it is consistent even while
/// commits land.
pub struct TableScan {
    store: Store,
    table: String,
    spec: ScanSpec,
    /// Whether the spans it reads keep their keys' heads in the read cache.
    caching: Caching,
    cursor: ScanCursor,
    shape: BatchShape,
    /// The keys the scan reads now, when it reads a table that is not in memory span by span on
    /// its own thread.
    span: Option<KeySpan>,
    /// The workers that read the spans, when the scan has them (`ScanRequest::threads`).
    workers: Option<SpanWorkers>,
    /// How many workers the scan starts once it knows the table is read span by span
    /// (`ScanRequest::threads`); `None`: it reads on its own thread.
    workers_wanted: Option<usize>,
    /// Whether the scan reads the table whole, as it is in memory (or its records are not
    /// current).
    whole_table: bool,
    /// Where a scan read span by span reports the keys it has read ([`TableScan::with_progress`]).
    progress: Option<(asof_storage::Reporter, u64)>,
    /// Whether the scan has ended before its last key (an error), or its workers read to the end.
    ended: bool,
}

/// What a scan's batches hold: the table's columns it returns (output columns, then the
/// temporal ones), as Arrow fields, how many rows a batch holds at most, and the windows its
/// intervals are trimmed to.
#[derive(Clone)]
struct BatchShape {
    schema: TableSchema,
    columns: Vec<usize>,
    out: SchemaRef,
    batch_size: usize,
    clamps: Clamps,
}

impl BatchShape {
    /// Empty builders for a batch.
    fn cols(&self) -> Vec<Col> {
        make_cols(&self.schema, &self.columns, self.batch_size, &self.clamps)
    }

    /// The batch of the `n` rows in `cols`.
    fn finish(&self, cols: &mut [Col], n: usize) -> Result<RecordBatch> {
        let arrays = cols
            .iter_mut()
            .map(Col::finish)
            .collect::<Result<Vec<ArrayRef>>>()?;
        Ok(if arrays.is_empty() {
            RecordBatch::try_new_with_options(
                self.out.clone(),
                arrays,
                &arrow::record_batch::RecordBatchOptions::new().with_row_count(Some(n)),
            )
        } else {
            RecordBatch::try_new(self.out.clone(), arrays)
        }?)
    }
}

impl TableScan {
    /// The Arrow schema of the batches.
    pub fn schema(&self) -> SchemaRef {
        self.shape.out.clone()
    }

    /// The scan, reporting to `progress` as `task` the keys it has read, if it reads the table
    /// span by span (the table is not in memory) and it has more keys than one span.
    pub fn with_progress(
        mut self,
        progress: &Arc<dyn asof_storage::Progress>,
        task: &str,
    ) -> Result<TableScan> {
        if let Some(keys) = self.store.key_count(&self.table)? {
            let report =
                asof_storage::Reporter::begin(Some(progress), task, keys, SPAN_KEYS as u64 + 1);
            self.progress = Some((report, 0));
        }
        Ok(self)
    }
}

/// How many keys of a table that is not in memory a scan on one thread holds at a time (see
/// [`TableScan::read_some`]).
const SPAN_KEYS: usize = 256;

impl TableScan {
    /// Reads rows into `cols` (`n` of them so far) until the batch is full or the span of keys
    /// held ends. A point scan reads its key; any other scan of a table that is not in memory
    /// reads spans of keys from their heads and pages ([`Store::key_span`]), one at a time, or
    /// hands them to workers (see [`TableScan::start_workers`]); a table in memory is read as it
    /// is.
    fn read_some(&mut self, cols: &mut [Col], n: &mut usize) -> Result<()> {
        let max_rows = self.shape.batch_size - *n;
        let point = matches!(
            (&self.spec.key_lo, &self.spec.key_hi),
            (Bound::Included(lo), Bound::Included(hi)) if lo == hi
        );
        if !point && self.span.is_none() && !self.whole_table {
            let lo = self.spec.key_lo.as_ref().map(|k| &k[..]);
            let hi = self.spec.key_hi.as_ref().map(|k| &k[..]);
            // Workers start with a smaller span: the first is read by one of them alone.
            let (keys, workers) = match self.workers_wanted.take() {
                Some(w) if *n == 0 => (workers::FIRST_SPAN_KEYS, Some(w)),
                _ => (SPAN_KEYS, None),
            };
            self.span = self
                .store
                .key_span(&self.table, (lo, hi), keys, self.caching)?;
            // Once the table is read whole (it came into memory), the scan goes on that way.
            self.whole_table = self.span.is_none();
            if let (Some(workers), Some(_)) = (workers, &self.span) {
                self.start_workers(workers);
                if self.workers.is_some() {
                    return Ok(());
                }
            }
        }
        let spec = &self.spec;
        let cursor = &mut self.cursor;
        let mut filling = Filling {
            cols,
            n,
            failed: None,
        };
        let read =
            |r: &asof_storage::TableReader<'_>| r.scan_into(spec, cursor, max_rows, &mut filling);
        match (&mut self.span, &spec.key_lo) {
            (Some(span), _) => self.store.read_span(span, read)??,
            (None, Bound::Included(lo)) if point => {
                self.store.read_key(&self.table, &lo.clone(), read)??
            }
            (None, _) => self.store.read(&self.table, read)??,
        }
        if let Some(e) = filling.failed {
            return Err(e);
        }
        if self.cursor.is_done() {
            if let Some(span) = self.span.take() {
                if let Some((report, done)) = &mut self.progress {
                    *done += span.keys() as u64;
                    report.advance(*done);
                }
                if let Some(last) = span.last_key() {
                    self.spec.key_lo = Bound::Excluded(last.to_vec());
                    self.cursor.next_span();
                }
            }
        }
        Ok(())
    }

    /// Hands the span just read (`self.span`) and the ones after it to `workers` threads, each
    /// span's cursor pinned to the generation the first span was read at; the scan then returns
    /// their batches ([`TableScan::next_from_workers`]). If no thread can start, the scan reads
    /// on its own.
    fn start_workers(&mut self, workers: usize) {
        let Some(first) = self.span.take() else {
            return;
        };
        let cursor = first.scan_cursor();
        self.cursor = cursor.clone();
        let read = SpanRead {
            spec: self.spec.clone(),
            caching: self.caching,
            cursor,
            shape: self.shape.clone(),
        };
        match SpanWorkers::spawn(&self.store, &self.table, read, workers) {
            Some(mut w) => {
                w.hand(first);
                self.workers = Some(w);
            }
            None => self.span = Some(first),
        }
    }

    /// The next batch the workers read; when they have read every span, the scan is done, or
    /// goes on by itself from where they stopped (the table came into memory meanwhile).
    fn next_from_workers(&mut self) -> Option<Result<RecordBatch>> {
        let workers = self.workers.as_mut()?;
        let progress = &mut self.progress;
        let next = workers.next_batch(|keys| {
            if let Some((report, done)) = progress {
                *done += keys as u64;
                report.advance(*done);
            }
        });
        match next {
            Ok(Next::Batch(b)) => return Some(Ok(b)),
            Ok(Next::Done) => {
                self.workers = None;
                self.ended = true;
            }
            Ok(Next::Rest(lo)) => {
                // The cursor is the pinned one the workers' were cloned from.
                self.spec.key_lo = lo;
                self.whole_table = true;
            }
            Err(e) => {
                self.end();
                return Some(Err(e));
            }
        }
        self.workers = None;
        self.next()
    }

    /// Ends the scan (after an error): nothing more is read.
    fn end(&mut self) {
        self.workers = None;
        self.span = None;
        self.ended = true;
    }
}

impl Iterator for TableScan {
    type Item = Result<RecordBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.workers.is_some() {
            return self.next_from_workers();
        }
        if self.ended || self.cursor.is_done() {
            self.progress = None; // ends the report
            return None;
        }
        let mut cols = self.shape.cols();
        let mut n = 0usize;
        // Spans of keys are read until the batch is full or the scan is done.
        while n < self.shape.batch_size && !self.cursor.is_done() {
            if let Err(e) = self.read_some(&mut cols, &mut n) {
                self.end();
                return Some(Err(e));
            }
            if self.workers.is_some() {
                return self.next_from_workers();
            }
        }
        if n == 0 && self.cursor.is_done() {
            return None;
        }
        Some(self.shape.finish(&mut cols, n))
    }
}

/// Starts a scan of `table`.
pub fn scan(store: &Store, table: &str, req: &ScanRequest) -> Result<TableScan> {
    let (schema, latest) = (store.schema(table)?, store.latest_version(table)?);
    if schema.mode == StoredAs::Scd1 && req.business != TimeSelection::All {
        return Err(QueryError::Invalid(format!(
            "`{table}` is SCD TYPE 1: it has no business time to select on"
        )));
    }
    if schema.system_sequence.is_none() && req.system != TimeSelection::All {
        return Err(QueryError::Invalid(format!(
            "`{table}` is not BITEMPORAL: it has no system time to select on"
        )));
    }
    if let Some(v) = req.version {
        if v > latest {
            return Err(QueryError::Storage(asof_storage::Error::NoSuchVersion {
                table: table.to_string(),
                version: v,
                latest,
            }));
        }
    }
    let sys_types: Vec<ColumnType> = schema.system_sequence.iter().cloned().collect();
    let (key_lo, key_hi) = key_bounds(&req.keys, &schema)?;
    let mut spec = ScanSpec {
        version: Some(req.version.unwrap_or(latest)),
        key_lo,
        key_hi,
        business: with_bounds(
            req.business
                .encode(&schema.sequence_types(), "business time")?,
            &req.business_bounds,
            &schema.sequence_types(),
            "business time",
        )?,
        system: with_bounds(
            req.system.encode(&sys_types, "system time")?,
            &req.system_bounds,
            &sys_types,
            "system time",
        )?,
        values: Values::All,
    };
    let clamps = Clamps {
        business: req
            .business
            .clamp(&schema.sequence_types(), "business time")?,
        system: req.system.clamp(&sys_types, "system time")?,
    };
    let full = table_arrow_schema(&schema);
    let columns: Vec<usize> = match &req.projection {
        None => (0..full.fields().len()).collect(),
        Some(names) => names
            .iter()
            .map(|n| {
                full.index_of(n)
                    .map_err(|_| QueryError::Invalid(format!("`{table}` has no column `{n}`")))
            })
            .collect::<Result<_>>()?,
    };
    let out = std::sync::Arc::new(full.project(&columns)?);
    // Only value columns need values (the temporal ones are the rows' bounds).
    if columns.iter().all(|&c| c >= schema.columns.len()) {
        spec.values = Values::Skip;
    }
    Ok(TableScan {
        store: store.clone(),
        table: table.to_string(),
        caching: spec.caching(latest),
        spec,
        cursor: ScanCursor::default(),
        shape: BatchShape {
            schema,
            columns,
            out,
            batch_size: req.batch_size.max(1),
            clamps,
        },
        span: None,
        workers: None,
        workers_wanted: req.threads.workers(),
        whole_table: false,
        progress: None,
        ended: false,
    })
}

/// Runs a scan to the end and collects its batches.
pub fn scan_all(store: &Store, table: &str, req: &ScanRequest) -> Result<Vec<RecordBatch>> {
    scan(store, table, req)?.collect()
}

/// The full history of one key: every current row version of it, on both timelines.
pub fn key_history(store: &Store, table: &str, key: Vec<Value>) -> Result<Vec<RecordBatch>> {
    scan_all(
        store,
        table,
        &ScanRequest {
            keys: KeySelection::Eq(key),
            ..Default::default()
        },
    )
}

/// One row found by [`lookup`], with its temporal bounds decoded.
#[derive(Clone, Debug, PartialEq)]
pub struct LookupRow {
    /// Output column values.
    pub values: Vec<Value>,
    /// `__START_AT` (one value per sequence component), if the table has business time.
    pub start: Option<Vec<Value>>,
    /// `__END_AT`.
    pub end: Option<Vec<Value>>,
    /// `__SYSTEM_START_AT`.
    pub system_start: Option<Value>,
    /// `__SYSTEM_END_AT`.
    pub system_end: Option<Value>,
}

/// "What did we believe at system time `system` about business time `business`" for one key: one
/// index lookup, whatever the length of the key's history. `system = None` means now; both times
/// are ignored for SCD1 tables.
pub fn lookup(
    store: &Store,
    table: &str,
    key: &[Value],
    business: Option<&[Value]>,
    system: Option<&Value>,
) -> Result<Option<LookupRow>> {
    let schema = store.schema(table)?;
    let key_types: Vec<&ColumnType> = schema
        .key_columns
        .iter()
        .map(|&i| &schema.columns[i].1)
        .collect();
    let seq_types: Vec<ColumnType> = schema.sequence.iter().map(|(_, t)| t.clone()).collect();
    let sys_types: Vec<ColumnType> = schema.system_sequence.iter().cloned().collect();
    let k = encode_refs(key, &key_types, "key")?;
    let b = business
        .map(|b| encode_values(b, &seq_types, "business time"))
        .transpose()?;
    let s = match (system, sys_types.is_empty()) {
        (Some(s), false) => Some(encode_values(
            std::slice::from_ref(s),
            &sys_types,
            "system time",
        )?),
        _ => None,
    };
    // One key: read from its head and pages, without loading the table.
    store.read_key(table, &k, |r| {
        let dec = |b: Option<&[u8]>, t: &[ColumnType]| b.and_then(|b| decode_tuple(b, t).ok());
        let hit = r.lookup(&k, b.as_deref(), s.as_deref(), |row| {
            Ok::<_, asof_storage::Error>(LookupRow {
                values: row.values.to_vec()?,
                start: dec(row.start, &seq_types),
                end: dec(row.end, &seq_types),
                system_start: dec(row.sys_start, &sys_types).and_then(|mut v| v.pop()),
                system_end: dec(row.sys_end, &sys_types).and_then(|mut v| v.pop()),
            })
        })?;
        Ok(hit.transpose()?)
    })?
}
