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
    /// Arrow failed to assemble a batch.
    #[error("arrow: {0}")]
    Arrow(#[from] arrow::error::ArrowError),
}

/// The result type of the query layer.
pub type Result<T, E = QueryError> = std::result::Result<T, E>;
