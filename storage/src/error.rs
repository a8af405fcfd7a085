//! The one error type of the storage layer.

use std::fmt;

/// Everything that can go wrong in `asof-storage`.
///
/// Errors that come from user input ([`Error::InvalidFlow`], [`Error::InvalidBatch`]) leave the store
/// untouched and usable. [`Error::Poisoned`] means an earlier write failed half-way through the
/// key-value layer: the store refuses further writes until it is reopened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A flow definition breaks one of the rules of docs/SEMANTICS.md §1.
    #[error("invalid flow definition: {0}")]
    InvalidFlow(#[from] FlowError),
    /// A batch of events was rejected as a whole (docs/SEMANTICS.md §2); nothing of it was applied.
    #[error("batch rejected, nothing applied: column `{column}`: {problem} ({rows} row{s})", s = plural(*rows))]
    InvalidBatch {
        /// The column at fault.
        column: String,
        /// What is wrong with it.
        problem: String,
        /// How many rows of the batch have the problem.
        rows: usize,
    },
    /// A DML statement was rejected as a whole (docs/SEMANTICS.md §2.4); nothing of it was
    /// applied.
    #[error("statement rejected, nothing changed: column `{column}`: {problem} ({rows} row{s})", s = plural(*rows))]
    InvalidStatement {
        /// The column at fault.
        column: String,
        /// What is wrong, and the rule it breaks.
        problem: String,
        /// How many rows of the statement have the problem.
        rows: usize,
    },
    /// No table or flow of that name.
    #[error("no {kind} named `{name}`")]
    NotFound {
        /// `table` or `flow`.
        kind: &'static str,
        /// The name asked for.
        name: String,
    },
    /// A table or flow of that name exists already.
    #[error("a {kind} named `{name}` exists already")]
    AlreadyExists {
        /// `table` or `flow`.
        kind: &'static str,
        /// The name.
        name: String,
    },
    /// A query argument does not fit the table (wrong number of key values, a type that cannot be
    /// converted, an unknown column...).
    #[error("invalid query: {0}")]
    InvalidQuery(String),
    /// A flow cannot go on from its checkpoint: a DML statement on its source (or a full refresh
    /// of it) removed rows the flow had read (docs/SEMANTICS.md §2.6).
    #[error("{0}")]
    FlowStopped(Box<StoppedFlow>),
    /// Rows a statement names by position were removed by another statement meanwhile; nothing
    /// was written (run it again).
    #[error("row {position} of `{table}` was removed by another statement while this {operation} ran; nothing was changed (run it again)")]
    ChangedMeanwhile {
        /// The source table.
        table: String,
        /// The position of the row.
        position: u64,
        /// The statement's operation.
        operation: &'static str,
    },
    /// A flow's rows were computed from its source while a DML statement removed rows of it;
    /// nothing was written (run the refresh again).
    #[error("a statement changed `{source_table}` while flow `{flow}` read it; nothing was written (refresh again)")]
    SourceChangedMeanwhile {
        /// The flow.
        flow: String,
        /// Its source.
        source_table: String,
    },
    /// An ERASE or a DROP TABLE rewrote the chunks of a source table while a read of it was under
    /// way; the read stopped before returning rows that mix two states (run it again).
    #[error("source table `{table}` was erased from or dropped while it was read; run the statement again")]
    SourceRewritten {
        /// The source table.
        table: String,
    },
    /// A flow's run was based on a checkpoint (or a table) that another run changed meanwhile;
    /// nothing was written (refresh again).
    #[error("flow `{flow}` of `{table}` ran elsewhere while this run did; nothing was written (refresh again)")]
    FlowRanMeanwhile {
        /// The flow.
        flow: String,
        /// The table it writes.
        table: String,
    },
    /// A commit version that the table does not have.
    #[error("table `{table}` has no version {version} (its latest is {latest})")]
    NoSuchVersion {
        /// The table.
        table: String,
        /// The version asked for.
        version: u64,
        /// The latest version.
        latest: u64,
    },
    /// A version older than the history VACUUM kept.
    #[error("version {version} of `{table}` was removed by VACUUM; its history starts at version {oldest}")]
    VersionVacuumed {
        /// The table.
        table: String,
        /// The version asked for.
        version: u64,
        /// The oldest version still readable.
        oldest: u64,
    },
    /// The table was vacuumed while a scan of it was running; run the scan again.
    #[error("`{0}` was vacuumed while it was being read; read it again")]
    ScanInterrupted(String),
    /// The stored data cannot be read back: a damaged file, or a value that fails validation.
    #[error("the store is corrupt: {0}")]
    Corrupt(String),
    /// The store was written by a format version this build does not read.
    #[error("unsupported store format version {found} (this build reads version {supported})")]
    FormatVersion {
        /// The version found on disk.
        found: u32,
        /// The version this build reads and writes.
        supported: u32,
    },
    /// An earlier write failed in the key-value layer; reopen the store to continue.
    #[error("the store refuses writes after an earlier I/O failure ({0}); reopen it")]
    Poisoned(String),
    /// A row violated an expectation declared `ON VIOLATION FAIL UPDATE`: the refresh applied
    /// nothing.
    #[error("refresh of `{table}` failed, nothing applied: {rows} row{s} violate expectation `{expectation}` ({condition}), which is declared ON VIOLATION FAIL UPDATE", s = plural(*rows as usize))]
    ExpectationFailed {
        /// The table.
        table: String,
        /// The expectation's name.
        expectation: String,
        /// Its condition.
        condition: String,
        /// How many rows of the refresh violate it.
        rows: u64,
    },
    /// An expectation that cannot be evaluated on the rows of the table's flows.
    #[error("expectation `{expectation}` of `{table}`: {problem}")]
    InvalidExpectation {
        /// The table.
        table: String,
        /// The expectation's name.
        expectation: String,
        /// What is wrong with it.
        problem: String,
    },
    /// A refresh found source rows its flow cannot apply (a NULL key or sequence, a value of the
    /// wrong type): nothing was applied, and the next refresh meets the same rows.
    #[error("refresh of `{table}` (flow `{flow}`) rejected its source rows: {cause}. To skip such rows and keep the table's history, declare an expectation that drops them, then refresh: CREATE OR REFRESH STREAMING TABLE {table} (CONSTRAINT {constraint} EXPECT ({condition}) ON VIOLATION DROP ROW)")]
    SourceRowsRejected {
        /// The table.
        table: String,
        /// The flow.
        flow: String,
        /// Why the rows were rejected ([`Error::InvalidBatch`]).
        cause: Box<Error>,
        /// A name for the expectation the hint suggests.
        constraint: String,
        /// The condition the hint suggests.
        condition: String,
    },
    /// VACUUM was asked to keep less history than the table allows.
    #[error("VACUUM `{table}` RETAIN {hours} HOURS would remove history that time travel, the change feed and running readers may still need: the minimum is 168 hours. To allow it, set the table property: ALTER STREAMING TABLE {table} SET TBLPROPERTIES ('asof.vacuum.retentionCheck' = 'false')")]
    RetentionTooShort {
        /// The table.
        table: String,
        /// The retention asked for, in hours.
        hours: f64,
    },
    /// VACUUM would remove a version a table property keeps (a receipt needs it).
    #[error("VACUUM of `{table}` would make its history start at version {oldest}, but version {pinned} is pinned (table property `asof.vacuum.pinnedVersion`, set for a receipt that reads it); nothing was changed. Keep more history, or unset the property if that receipt may no longer verify")]
    VersionPinned {
        /// The table.
        table: String,
        /// The version pinned.
        pinned: u64,
        /// The oldest version the VACUUM would keep.
        oldest: u64,
    },
    /// An ERASE was refused; nothing was changed.
    #[error("ERASE FROM `{table}` refused, nothing changed: {problem}")]
    InvalidErasure {
        /// The table.
        table: String,
        /// What is wrong, and the rule it breaks.
        problem: String,
    },
    /// A commit landed, and the retention erasure that follows it (table property
    /// `asof.erase.deletedKeysAfter`) failed.
    #[error("`{table}`: version {version} is committed; the erasure of keys deleted for longer than its retention period (table property asof.erase.deletedKeysAfter) then failed, and is tried again at its next commit: {problem}")]
    RetentionFailed {
        /// The table.
        table: String,
        /// The commit that stands.
        version: u64,
        /// What failed.
        problem: String,
    },
    /// Another process has the store open.
    #[error("the store at {path} is in use by {} (waited {waited_ms} ms; wait longer with --wait SECONDS or ASOF_WAIT)", holder.as_deref().unwrap_or("another process"))]
    InUse {
        /// The store's folder.
        path: String,
        /// The process that holds it, when the OS can tell: `process 1234 (asof sql ...)`.
        holder: Option<String>,
        /// How long the open waited for it, in milliseconds.
        waited_ms: u64,
    },
    /// The manifest, which lets an open check that no acknowledged commit was lost, is missing,
    /// empty or damaged in a store that has commits.
    #[error("the manifest {path} is {problem}, and the store has commits: asof cannot check that no acknowledged commit was lost. If these files are yours and complete, rebuild it with `asof --db DIR repair` (or StoreOptions::manifest = ManifestCheck::Rebuild)")]
    ManifestLost {
        /// The manifest file.
        path: String,
        /// `missing`, `empty` or `damaged (...)`.
        problem: String,
    },
    /// The key-value layer failed.
    #[error("storage I/O error: {0}")]
    Io(String),
}

/// A flow stopped by a statement on its source ([`Error::FlowStopped`]; boxed, so that every
/// `Result` of the store stays small).
#[derive(Debug, thiserror::Error)]
#[error("flow `{flow}` cannot go on: commit {version} of its source `{source_table}` ({operation}) changed or removed rows it had already read; read the source WITH (skipChangeCommits = true) to ignore such commits, or REFRESH ... FULL to read the source as it is now")]
pub struct StoppedFlow {
    /// The flow.
    pub flow: String,
    /// Its source.
    pub source_table: String,
    /// The source's commit that removed the rows.
    pub version: u64,
    /// That commit's operation (`DELETE`, `UPDATE`, `MERGE`, ...).
    pub operation: String,
}

/// A flow definition that breaks a rule of docs/SEMANTICS.md §1. Each rule has its own variant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FlowError {
    /// `KEYS` is required and may not be empty.
    #[error("KEYS is required: name at least one key column")]
    MissingKeys,
    /// `SEQUENCE BY` is required.
    #[error("SEQUENCE BY is required")]
    MissingSequence,
    /// A clause names a column the source does not have.
    #[error("{clause} names column `{column}`, which the source does not have")]
    UnknownColumn {
        /// The clause, e.g. `KEYS`.
        clause: &'static str,
        /// The column.
        column: String,
    },
    /// A SQL condition of the flow cannot be evaluated on its source rows (a column it does not
    /// have, a result that is not a boolean).
    #[error("{clause} `{condition}` cannot be evaluated on the source rows: {problem}")]
    InvalidCondition {
        /// The clause, e.g. `APPLY AS DELETE WHEN`.
        clause: &'static str,
        /// The condition.
        condition: String,
        /// Why.
        problem: String,
    },
    /// A column is listed twice in one clause.
    #[error("{clause} lists column `{column}` twice")]
    DuplicateColumn {
        /// The clause.
        clause: &'static str,
        /// The column.
        column: String,
    },
    /// Keys must be output columns.
    #[error("key column `{0}` must be an output column (it is left out by COLUMNS)")]
    KeyNotInOutput(String),
    /// A clause names a column that is not an output column.
    #[error("{clause} names column `{column}`, which is not an output column")]
    NotAnOutputColumn {
        /// The clause.
        clause: &'static str,
        /// The column.
        column: String,
    },
    /// Sequences must be of an orderable type.
    #[error("{clause} column `{column}` has type {ty}, which cannot be ordered (use an integer, decimal, date, timestamp or string)")]
    UnorderableType {
        /// The clause.
        clause: &'static str,
        /// The column.
        column: String,
        /// Its type.
        ty: String,
    },
    /// A column type asof does not store.
    #[error("column `{column}` has type {ty}, which asof does not support")]
    UnsupportedType {
        /// The column.
        column: String,
        /// Its type.
        ty: String,
    },
    /// Key columns must be of a type that can be encoded as a key.
    #[error("key column `{column}` has type {ty}, which cannot be a key")]
    UnsupportedKeyType {
        /// The column.
        column: String,
        /// Its type.
        ty: String,
    },
    /// `SYSTEM SEQUENCE BY` is for `STORED AS BITEMPORAL` only.
    #[error("SYSTEM SEQUENCE BY is only allowed with STORED AS BITEMPORAL")]
    SystemSequenceRequiresBitemporal,
    /// `APPLY AS TRUNCATE WHEN` is for `STORED AS SCD TYPE 1` only.
    #[error("APPLY AS TRUNCATE WHEN is only allowed with STORED AS SCD TYPE 1")]
    TruncateRequiresScd1,
    /// `TRACK HISTORY` needs a history.
    #[error("TRACK HISTORY is only allowed with STORED AS SCD TYPE 2 or BITEMPORAL")]
    TrackHistoryRequiresHistory,
    /// `IGNORE NULL UPDATES` and `COLUMNS TO UPDATE` exclude each other.
    #[error("IGNORE NULL UPDATES cannot be combined with COLUMNS TO UPDATE")]
    IgnoreNullUpdatesWithColumnsToUpdate,
    /// `COLUMNS TO UPDATE` is not available for bitemporal tables.
    #[error("COLUMNS TO UPDATE is not allowed with STORED AS BITEMPORAL")]
    ColumnsToUpdateWithBitemporal,
    /// The `COLUMNS TO UPDATE` column must hold `array<string>`.
    #[error("COLUMNS TO UPDATE column `{column}` must have type array<string>, not {ty}")]
    ColumnsToUpdateType {
        /// The column.
        column: String,
        /// Its type.
        ty: String,
    },
    /// Output columns may not use the names reserved for the temporal columns.
    #[error("output column `{0}` uses a name reserved for asof's temporal columns")]
    ReservedColumnName(String),
    /// `COLUMNS` left nothing but must keep the keys.
    #[error("COLUMNS leaves no output columns")]
    NoOutputColumns,
    /// A flow or table name that cannot be used.
    #[error("invalid name `{0}`: use a non-empty name without control characters")]
    InvalidName(String),
    /// Another flow of the same target disagrees on the table's shape.
    #[error("flow does not match target table `{table}`: {detail}")]
    TargetMismatch {
        /// The target table.
        table: String,
        /// What differs.
        detail: String,
    },
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// The result type of the storage layer.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl From<sled::Error> for Error {
    fn from(e: sled::Error) -> Self {
        Error::Io(e.to_string())
    }
}

pub(crate) fn corrupt(what: impl fmt::Display) -> Error {
    Error::Corrupt(what.to_string())
}

/// Runs `f`, a decoder from a third-party crate that may panic on damaged input instead of
/// returning an error; a panic comes back as `Err` with its message. (Used by the storage
/// decoders and by `read_files` in the query layer.)
#[doc(hidden)]
pub fn catch_panic<T>(f: impl FnOnce() -> T) -> std::result::Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|p| {
        p.downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_default()
    })
}

/// [`catch_panic`] for storage decoders: a panic is [`Error::Corrupt`].
pub(crate) fn no_panic<T>(what: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    catch_panic(f).unwrap_or_else(|msg| Err(Error::Corrupt(format!("{what} is damaged ({msg})"))))
}

#[cfg(test)]
mod size {
    /// Every `Result` of the store carries an `Error`: it does not grow (a large new variant is
    /// boxed, as `FlowStopped` is).
    #[test]
    fn an_error_does_not_grow() {
        let size = std::mem::size_of::<super::Error>();
        assert!(size <= 104, "{size} bytes");
    }
}
