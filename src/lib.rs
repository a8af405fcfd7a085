//! # asof
//!
//! An embedded bitemporal time-travel store. asof applies change feeds (CDC) whose events arrive
//! late, out of order and twice to target tables with the semantics of Databricks AUTO CDC —
//! SCD TYPE 1, SCD TYPE 2 and BITEMPORAL — and answers as-of queries on business time and system
//! time. The table is a pure function of the set of events ingested: arrival order, batching,
//! restarts and replays never change it.
//!
//! ```
//! use std::sync::Arc;
//! use arrow::array::{RecordBatch, StringArray, TimestampMicrosecondArray};
//! use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
//! use asof::{Condition, FlowSpec, ScanRequest, StoredAs, Store, TimeSelection, ColumnSelection};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let store = Store::open(dir.path())?;
//!
//! let schema = Arc::new(Schema::new(vec![
//!     Field::new("id", DataType::Utf8, false),
//!     Field::new("price", DataType::Utf8, true),
//!     Field::new("ts", DataType::Timestamp(TimeUnit::Microsecond, None), false),
//!     Field::new("op", DataType::Utf8, false),
//! ]));
//! let flow = FlowSpec::builder("prices_cdc", "prices", &schema)
//!     .keys(["id"])
//!     .sequence_by(["ts"])
//!     .delete_when(Condition::equals("op", "DELETE"))
//!     .columns(ColumnSelection::all_except(["op"]))
//!     .stored_as(StoredAs::Scd2)
//!     .build()?;
//! store.create_flow(flow)?;
//!
//! let events = |price: &str, ts: i64| {
//!     RecordBatch::try_new(schema.clone(), vec![
//!         Arc::new(StringArray::from(vec!["a"])),
//!         Arc::new(StringArray::from(vec![price])),
//!         Arc::new(TimestampMicrosecondArray::from(vec![ts])),
//!         Arc::new(StringArray::from(vec!["UPSERT"])),
//!     ])
//! };
//! // The update at 2 s arrives first, the one at 1 s later: history is corrected.
//! store.apply("prices_cdc", &events("12", 2_000_000)?)?;
//! let commit = store.apply("prices_cdc", &events("10", 1_000_000)?)?;
//! assert_eq!(commit.metrics.num_late_events, 1);
//!
//! // What was the price at business time 1.5 s?
//! let req = ScanRequest {
//!     business: TimeSelection::as_of("1970-01-01T00:00:01.500"),
//!     ..Default::default()
//! };
//! let batches = asof::scan_all(&store, "prices", &req)?;
//! let price = batches[0].column_by_name("price").unwrap();
//! assert_eq!(price.as_any().downcast_ref::<StringArray>().unwrap().value(0), "10");
//! # Ok(())
//! # }
//! ```
#![warn(missing_docs)]

mod memory;
pub use memory::tune_process_memory;

pub use asof_server::{serve, ServeError, ServeOptions, TlsFiles};

pub use asof_query::sql::{
    BatchStream, DataFusionEvaluator, ExternalAccess, Output as SqlOutput, ReceiptCheck, Results,
    ScriptError, SessionOptions, SqlSession, Steps,
};
pub use asof_query::{
    change_feed, export_delta, history_batch, key_history, key_history_svg, lookup, result_hash,
    scan, scan_all, sequence_type, table_arrow_schema, table_changes, ChangeBound, ChangeFeed,
    CronSchedule, DeltaExport, ExistingFiles, ExportError, ExportKind, ExportReport, FileFormat,
    FileSource, JsonLayout, KeySelection, LookupRow, PlotRequest, QueryError, Receipt, ScanRequest,
    ScanThreads, Schedule, TableScan, TimeSelection, SCHEDULE_PROPERTY,
};
pub use asof_storage::{
    append_offset_parameter, keycodec, source_version_parameter, AppendFlow, Caching,
    ChangeCommits, ChangePass, ChangeType, Checkpoints, ColdStats, ColumnSelection, ColumnType,
    CommitInfo, CommitMetrics, Condition, ConditionEvaluator, DecodedValue, Decoder, Dml,
    DmlOperation, Edit, EraseReport, Error, EventKind, Expectation, Flow, FlowBuilder, FlowError,
    FlowSpec, Folding, Generated, GeneratedColumn, Increments, KeepAt, KeyGroup, KeySpan, KvPair,
    KvStore, LiveRows, LoggedEvent, ManifestCheck, NestedBuilder, OnClose, OnViolation, OpenMode,
    Origin, PositionedRows, PositionedTable, Problem, Progress, RefreshMode, RetentionCheck,
    RowSink, RowValues, RowView, Scanned, SledKv, SourceColumn, SourceDmlOperation, SourceRead,
    SourceRow, SourceRows, SourceWrite, Store, StoreOptions, StoredAs, StoredRows, StreamRead,
    TableCheck, TableGeneration, TableOptions, TableReader, TableSchema, TemporalBound, TimeUnit,
    VacuumReport, Value, ValueRef, Values, VerifyReport, WriteBatch, DEFAULT_COMMIT_PART_ROWS,
    DEFAULT_HOT_EVENTS_PER_KEY, DEFAULT_READ_CACHE_BYTES, END_AT, FORMAT_VERSION, FULL_REFRESH,
    MIN_RETAIN, REDEFINED, RETENTION_CHECK_PROPERTY, RETENTION_PROPERTY, SOURCE_OFFSET, START_AT,
    SYSTEM_END_AT, SYSTEM_START_AT, TOMBSTONE_GC_PROPERTY,
};
