//! The error type of the query layer.

/// Everything that can go wrong in `asof-query`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum QueryError {
    /// The storage layer failed or refused.
    #[error(transparent)]
    Storage(#[from] asof_storage::Error),
    /// A query that does not fit the table.
    #[error("invalid query: {0}")]
    Invalid(String),
    /// A Delta export failed (`EXPORT ... TO DELTA`): an [`crate::ExportError`], boxed (so that
    /// this type does not depend on the export's).
    #[error(transparent)]
    Export(Box<dyn std::error::Error + Send + Sync>),
    /// A thread that reads a scan's spans of keys ([`crate::ScanThreads`]) stopped: it
    /// panicked (`what` is its message).
    #[error("a thread scanning `{table}` stopped: {what}")]
    ScanThread {
        /// The table scanned.
        table: String,
        /// Why it stopped.
        what: String,
    },
    /// Arrow failed to assemble a batch.
    #[error("arrow: {0}")]
    Arrow(#[from] arrow::error::ArrowError),
}

/// The result type of the query layer.
pub type Result<T, E = QueryError> = std::result::Result<T, E>;
