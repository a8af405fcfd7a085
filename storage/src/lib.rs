//! # asof-storage
//!
//! The storage engine of asof: flow definitions and their validation ([`FlowSpec`], [`Flow`]),
//! order-preserving key encoding ([`keycodec`]), the row codec (rkyv), the key-value layer (sled
//! behind [`KvStore`]), the CDC engine (SCD TYPE 1, SCD TYPE 2, BITEMPORAL) and the commit log.
//! It knows nothing of SQL.
//!
//! See `docs/ARCHITECTURE.md` at the repository root for the layers, the key layout and the
//! durability contract.
#![warn(missing_docs)]

mod bytes;
mod commit_clock;
mod commit_info;
mod engine;
mod error;
mod expectation;
mod flow;
mod format;
#[doc(hidden)]
pub mod fuzzing;
mod generated;
mod ingest;
pub mod keycodec;
mod kv;
mod nested;
mod positions;
mod prefetch;
mod progress;
mod record;
mod removed;
mod source;
mod source_chunks;
mod source_dml;
mod store;
mod two_threads;
mod value;

pub use engine::cold::ColdStats;
pub use engine::CommitMetrics;
pub use engine::{Caching, Folding};
pub use error::{catch_panic, Error, FlowError, Result, StoppedFlow};
pub use expectation::{Expectation, OnViolation};
pub use flow::ChangeCommits;
pub use flow::{
    ColumnSelection, Condition, Flow, FlowBuilder, FlowSpec, SourceColumn, StoredAs, TableSchema,
    DEFAULT_TOMBSTONE_GC_SECONDS, END_AT, START_AT, SYSTEM_END_AT, SYSTEM_START_AT,
};
pub use generated::{Generated, GeneratedColumn};
pub use ingest::ConditionEvaluator;
pub use kv::{
    DecodedValue, Decoder, KeepAt, KvPair, KvStore, ManifestCheck, MemKv, Scanned, SledKv,
    WriteBatch, LOCK_WAIT,
};
pub use nested::NestedBuilder;
pub use progress::{Progress, Reporter};
pub use source::{AppendFlow, PositionedRows, PositionedTable, SourceWrite, StreamRead};
pub use source_dml::SourceDmlOperation;
pub use store::{
    append_offset_parameter, source_version_parameter, ChangePass, ChangeType, Checkpoints,
    CommitInfo, Dml, DmlOperation, Edit, EraseReport, EventKind, Increments, KeyGroup, KeySpan,
    LiveRows, LoggedEvent, OnClose, OpenMode, Origin, Problem, RefreshMode, RetentionCheck,
    RowSink, RowValues, RowView, ScanCursor, ScanSpec, SourceRead, SourceRow, SourceRows, Store,
    StoreOptions, StoredRows, TableCheck, TableGeneration, TableOptions, TableReader,
    TemporalBound, TimeFilter, VacuumReport, Values, VerifyReport, DEFAULT_COMMIT_PART_ROWS,
    DEFAULT_HOT_EVENTS_PER_KEY, DEFAULT_READ_CACHE_BYTES, ERASE, ERASED_BY, ERASE_REASON,
    FORMAT_VERSION, FULL_REFRESH, MIN_RETAIN, PINNED_VERSION_PROPERTY, REDEFINED,
    RETENTION_CHECK_PROPERTY, RETENTION_PROPERTY, SOURCE_OFFSET, TOMBSTONE_GC_PROPERTY,
};
pub use value::{cmp_rows, ColumnType, Row, TimeUnit, Value, ValueRef};
