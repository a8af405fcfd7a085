//! What a SQL session may do beyond reading and writing the store.

/// Whether statements may reach files and settings outside the store: `read_files`, `COPY ...
/// TO`, `CREATE EXTERNAL TABLE`, `SET` / `RESET` of DataFusion settings. As DuckDB's
/// `enable_external_access`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ExternalAccess {
    /// Everything DataFusion allows (the CLI: its user owns the machine).
    #[default]
    Allowed,
    /// Refused, with an error naming the statement: for applications that pass their users' SQL
    /// to a session. `REFRESH` of a `read_files` flow created earlier still loads the folder the
    /// flow was created with.
    Denied,
}

/// Options of a [`crate::sql::SqlSession`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct SessionOptions {
    /// See [`ExternalAccess`].
    pub external_access: ExternalAccess,
    /// Values of `${name}` in statements (the CLI's `--var name=value`): each `${name}` is
    /// replaced by its value before the statement is read, as Databricks substitutes pipeline
    /// parameters; a `${name}` with no value is an error naming it.
    pub variables: std::collections::BTreeMap<String, String>,
    /// How many bytes a statement's sort may hold in memory before it spills sorted runs to
    /// temporary files (the snapshot diff of `AUTO CDC FROM SNAPSHOT`); default
    /// [`SessionOptions::DEFAULT_SORT_MEMORY`].
    pub sort_memory: usize,
    /// How many bytes the operators of a query may hold together (DataFusion's memory pool):
    /// a sort, a grouping or a window spills to temporary files beyond it; an operator that
    /// cannot (the side a join holds) fails with an error that names the limit. Scans of tables
    /// and sources stream and hold none of it. Default [`SessionOptions::DEFAULT_QUERY_MEMORY`].
    pub query_memory: usize,
    /// How a query's result is handed over: whole, or as a stream read as it is consumed.
    pub results: Results,
}

/// How [`crate::sql::SqlSession`] hands over a query's result ([`SessionOptions::results`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Results {
    /// Every batch, read before the statement returns (`Output::Batches`).
    #[default]
    Collected,
    /// A stream of batches, computed as the caller reads them (`Output::Stream`): a query over
    /// a large table costs the memory of a few batches, not of its result. The caller reads it
    /// before the session runs its next statement.
    Streamed,
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions {
            external_access: ExternalAccess::default(),
            variables: Default::default(),
            sort_memory: Self::DEFAULT_SORT_MEMORY,
            query_memory: Self::DEFAULT_QUERY_MEMORY,
            results: Results::default(),
        }
    }
}

impl SessionOptions {
    /// The default of [`SessionOptions::sort_memory`]: 64 MiB.
    pub const DEFAULT_SORT_MEMORY: usize = 64 << 20;

    /// The default of [`SessionOptions::query_memory`]: 128 MiB.
    pub const DEFAULT_QUERY_MEMORY: usize = 128 << 20;

    /// Options with `query_memory` set.
    pub fn with_query_memory(mut self, bytes: usize) -> Self {
        self.query_memory = bytes;
        self
    }

    /// Options with `results` set.
    pub fn with_results(mut self, results: Results) -> Self {
        self.results = results;
        self
    }

    /// Options with `sort_memory` set.
    pub fn with_sort_memory(mut self, bytes: usize) -> Self {
        self.sort_memory = bytes;
        self
    }

    /// Options with the variable `name` set to `value`.
    pub fn with_variable(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.variables.insert(name.into(), value.into());
        self
    }

    /// Options with `external_access` set.
    pub fn with_external_access(mut self, external_access: ExternalAccess) -> Self {
        self.external_access = external_access;
        self
    }
}
