//! The SQL front door: Databricks AUTO CDC statements handled here, everything else run by
//! DataFusion over the store's tables.
//!
//! Source tables are registered as in-memory tables; target tables through [`provider::TargetTable`],
//! which reads the store only when a query scans them. Temporal clauses on a table reference
//! (`t FOR SYSTEM_TIME AS OF x`, `FROM a TO b`, `BETWEEN a AND b`, `ALL`, and the same with
//! `BUSINESS_TIME` or `VALID_TIME`) are rewritten into a reference to a provider that carries the
//! selection into the storage scan.

mod append;
mod append_text;
mod change_feed_table;
mod commands;
mod context;
mod describe;
mod dml;
mod erase;
mod evaluator;
mod export;
mod flows;
mod generated;
mod guard;
mod hidden;
mod map_type;
mod names;
mod namespace;
mod options;
pub(crate) mod parse;
mod period;
mod pins;
mod provider;
mod pushdown;
mod receipts;
mod registry;
mod replace;
mod rewrite;
mod runtime;
mod schemas;
mod script;
mod snapshot;
mod source_dml;
pub(crate) mod statement;
mod tables;

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use asof_storage::{Progress, RefreshMode, Store, RETENTION_PROPERTY};
use datafusion::prelude::SessionContext;
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan};

use crate::error::{QueryError, Result};
pub use crate::receipt::ReceiptCheck;
use context::{df, new_context};
pub use evaluator::DataFusionEvaluator;
pub use namespace::{full_name, full_schema_name};
pub use options::{ExternalAccess, Results, SessionOptions};
use parse::{split, upper, FlowAst, Source, Stmt};
use runtime::QueryRuntime;
pub use script::{ScriptError, Steps};
use statement::{classify, Kind};

/// What one statement produced.
#[derive(Debug)]
pub enum Output {
    /// A query's result.
    Batches(SchemaRef, Vec<RecordBatch>),
    /// A query's result as a stream ([`Results::Streamed`]).
    Stream(SchemaRef, BatchStream),
    /// A statement that changed something, with a line saying what.
    Done(String),
}

/// A query's batches, computed as they are read ([`Output::Stream`]). It keeps the session's
/// query runtime running, so it may be read after its session is dropped.
pub struct BatchStream {
    // Dropped before the runtime it runs on.
    stream: datafusion::physical_plan::SendableRecordBatchStream,
    runtime: QueryRuntime,
}

impl std::fmt::Debug for BatchStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BatchStream")
    }
}

impl Iterator for BatchStream {
    type Item = Result<RecordBatch>;

    fn next(&mut self) -> Option<Result<RecordBatch>> {
        use futures::StreamExt;
        self.runtime
            .block_on(self.stream.next())
            .map(|b| b.map_err(df))
    }
}

impl Output {
    /// The output with a streamed result read whole.
    pub fn collected(self) -> Result<Output> {
        match self {
            Output::Stream(schema, stream) => {
                Ok(Output::Batches(schema, stream.collect::<Result<_>>()?))
            }
            out => Ok(out),
        }
    }
}

/// A SQL session over a store.
pub struct SqlSession {
    store: Store,
    ctx: SessionContext,
    /// Shared with the streams of its results ([`BatchStream`]).
    runtime: QueryRuntime,
    /// Streaming tables declared in this session whose flow has not been created yet, with their
    /// declared columns.
    declared: Vec<Declared>,
    progress: Option<Arc<dyn Progress>>,
    /// Scratch tables registered for the statement being run.
    scratch: usize,
    options: SessionOptions,
    /// The versions tables are read at while a receipt's query runs.
    pins: Option<pins::Pins>,
    /// The catalog and schema names are read in (`USE`).
    ns: namespace::Namespace,
}

/// A streaming table declared by `CREATE OR REFRESH STREAMING TABLE`, waiting for its flow.
struct Declared {
    name: String,
    /// Its declared columns, checked against the flow's.
    schema: Option<SchemaRef>,
    /// Its generated columns (`GENERATED ALWAYS AS ...`), for a table an append flow fills.
    generated: Vec<asof_storage::GeneratedColumn>,
    /// Its `TBLPROPERTIES`, given to the table when the flow creates it.
    properties: BTreeMap<String, String>,
    /// Its expectations, likewise.
    expectations: Vec<asof_storage::Expectation>,
}

impl SqlSession {
    /// A session over `store` with the default options. Registers the DataFusion evaluator for
    /// flow conditions.
    pub fn new(store: Store) -> Result<Self> {
        Self::with_options(store, SessionOptions::default())
    }

    /// A session over `store` with `options` (for example [`ExternalAccess::Denied`] for SQL that
    /// comes from an application's users).
    pub fn with_options(store: Store, options: SessionOptions) -> Result<Self> {
        store.set_condition_evaluator(Arc::new(DataFusionEvaluator::default()));
        let runtime = QueryRuntime::new()?;
        Ok(SqlSession {
            store,
            ctx: new_context(options.query_memory)?,
            runtime,
            declared: Vec::new(),
            progress: None,
            scratch: 0,
            options,
            pins: None,
            ns: namespace::Namespace::default(),
        })
    }

    /// The store this session runs on.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Reports the progress of long work (loading files, a full refresh) to `progress`.
    pub fn set_progress(&mut self, progress: Arc<dyn Progress>) {
        self.store.set_progress(progress.clone());
        self.progress = Some(progress);
    }

    /// Runs `;`-separated statements in order; stops at the first error. Results are read whole
    /// (a streamed one before the next statement runs): [`SqlSession::execute_script`] hands
    /// each statement's output over as it is done.
    pub fn execute(&mut self, sql: &str) -> Result<Vec<Output>> {
        let sql = self.substitute(sql)?;
        let mut out = Vec::new();
        for stmt in split(&sql)? {
            out.push(self.statement(&stmt)?.collected()?);
        }
        Ok(out)
    }

    /// `sql` with each `${name}` replaced by the value of variable `name` (see
    /// [`SessionOptions::variables`]).
    fn substitute(&self, sql: &str) -> Result<String> {
        let mut out = String::with_capacity(sql.len());
        let mut rest = sql;
        while let Some(at) = rest.find("${") {
            out.push_str(&rest[..at]);
            let after = &rest[at + 2..];
            let end = after
                .find('}')
                .ok_or_else(|| QueryError::Invalid("`${` without its closing `}`".to_string()))?;
            let name = after[..end].trim();
            let value = self.options.variables.get(name).ok_or_else(|| {
                QueryError::Invalid(format!(
                    "no value for the variable `${{{name}}}` (set it with --var {name}=VALUE)"
                ))
            })?;
            out.push_str(value);
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }

    /// Runs a script statement by statement, handing each output to `each` as soon as the
    /// statement is done (each statement is its own commit). Stops at the first statement that
    /// fails, and says which, on which line, and what is committed.
    pub fn execute_script(
        &mut self,
        sql: &str,
        mut each: impl FnMut(Output),
    ) -> std::result::Result<(), ScriptError> {
        let stmts = self
            .substitute(sql)
            .and_then(|sql| split(&sql))
            .map_err(|error| ScriptError {
                statement: 1,
                line: 1,
                statements: 1,
                error: Box::new(error),
                steps: Steps::One,
            })?;
        let n = stmts.len();
        for (i, stmt) in stmts.iter().enumerate() {
            // A streamed result is handed over as a stream only by the last statement: an error
            // while an earlier one is read must stop the script before the next statement runs.
            let last = i + 1 == n;
            let out = self
                .statement(stmt)
                .and_then(|out| if last { Ok(out) } else { out.collected() })
                .map_err(|error| ScriptError {
                    statement: i + 1,
                    line: stmt.line(),
                    statements: n,
                    error: Box::new(error),
                    steps: self.steps_of(stmt),
                })?;
            each(out);
        }
        Ok(())
    }

    /// Whether every statement of `sql` only reads the store: a query (`SELECT`, `WITH`,
    /// `VALUES`) or a statement that shows what is stored (`DESCRIBE`, `DESCRIBE HISTORY`,
    /// `SHOW TBLPROPERTIES`). `false` for a script that does not parse. It needs no store: the
    /// `asof` binary asks it, before it opens one, to choose how soon its allocator hands freed
    /// memory back (docs/PERFORMANCE.md, session 45).
    pub fn reads_only(sql: &str) -> bool {
        let Ok(stmts) = split(sql) else {
            return false;
        };
        stmts.iter().all(|stmt| match classify(stmt) {
            Ok(Kind::Sql) => is_query(stmt),
            Ok(Kind::Describe { .. } | Kind::DescribeHistory(_) | Kind::ShowProperties { .. }) => {
                true
            }
            _ => false,
        })
    }

    /// Whether `stmt` commits in one step or several (docs/SEMANTICS.md §2.3).
    fn steps_of(&self, stmt: &Stmt) -> Steps {
        let exists = |t: &str| {
            self.store
                .tables()
                .is_ok_and(|ts| ts.iter().any(|n| n == t))
        };
        match self.classify(stmt) {
            Ok(Kind::Refresh { .. }) => Steps::Several,
            Ok(Kind::StreamingTable { name, .. }) if exists(&name) => Steps::Several,
            Ok(Kind::Flow(f)) if exists(&f.target) => Steps::Several,
            _ => Steps::One,
        }
    }

    /// The names of the store's tables, sources and views.
    fn known_names(&self) -> Result<names::Names> {
        let mut known = names::Names::default();
        for t in self.store.tables()?.iter().chain(&self.store.sources()?) {
            known.add(t);
        }
        for (v, _) in self.store.views()? {
            known.add(&v);
        }
        Ok(known)
    }

    /// The statement's kind, with the tables it names spelled as they were created.
    fn classify(&self, stmt: &Stmt) -> Result<Kind> {
        let name = |n: &mut String| -> Result<()> {
            *n = self.stored_name(n)?;
            Ok(())
        };
        let flow_names = |f: &mut FlowAst| -> Result<()> {
            name(&mut f.target)?;
            if let Some(Source::Table(s) | Source::Snapshots(s)) = &mut f.source {
                name(s)?;
            }
            Ok(())
        };
        let mut kind = classify(stmt)?;
        match &mut kind {
            Kind::StreamingTable { name: n, flow, .. } => {
                let written = n.clone();
                name(n)?;
                if let Some(f) = flow {
                    // The table's own flow is named as the table is kept (flow names are the
                    // store's, not a schema's).
                    if f.name == written {
                        f.name = n.clone();
                    }
                    flow_names(f)?;
                }
            }
            Kind::Flow(f) => flow_names(f)?,
            Kind::AppendFlow(a) => name(&mut a.target)?,
            Kind::Refresh { name: n, .. }
            | Kind::SetProperties { name: n, .. }
            | Kind::ShowProperties { name: n, .. }
            | Kind::Describe { name: n, .. }
            | Kind::DropStreamingTable { name: n, .. }
            | Kind::DescribeHistory(n)
            | Kind::Vacuum { name: n, .. }
            | Kind::Erase { name: n, .. }
            | Kind::Export(export::ExportAst { name: n, .. })
            | Kind::Dml { name: n } => name(n)?,
            Kind::Sql | Kind::Receipt { .. } | Kind::VerifyReceipt(_) | Kind::Namespace(_) => {}
        }
        Ok(kind)
    }

    fn statement(&mut self, stmt: &Stmt) -> Result<Output> {
        match self.classify(stmt)? {
            Kind::StreamingTable {
                name,
                query: Some(query),
                schema,
                expectations,
                properties,
                ..
            } => {
                if schema.is_some() || !expectations.is_empty() || !properties.is_empty() {
                    return Err(QueryError::Invalid(format!(
                        "streaming table `{name}` is filled by its query: declared columns, expectations, COMMENT and TBLPROPERTIES on it are not supported yet"
                    )));
                }
                self.schema_exists(&name)?;
                self.create_streaming_query(&name, &query)
            }
            Kind::AppendFlow(a) => {
                self.schema_exists(&a.target)?;
                self.create_append_flow(a)
            }
            Kind::StreamingTable {
                name,
                schema,
                expectations,
                properties,
                flow,
                query: None,
            } => {
                let exists = self.store.tables()?.contains(&name);
                let rerun = flow
                    .as_ref()
                    .map_or(Ok(true), |f| self.flow_exists(&f.name))?;
                if exists && rerun {
                    let current = self.store.properties(&name)?;
                    if let Some((k, v)) =
                        properties.iter().find(|(k, v)| current.get(*k) != Some(*v))
                    {
                        return Err(QueryError::Invalid(format!(
                            "`{name}` exists already and its property `{k}` is not `{v}`: set properties of an existing table with ALTER STREAMING TABLE {name} SET TBLPROPERTIES (...)"
                        )));
                    }
                    // CREATE OR REFRESH of an existing table: its expectations as declared now,
                    // then a refresh of its flows.
                    let mut lines = Vec::new();
                    let declares = schema.is_some() || !expectations.is_empty();
                    if declares && expectations != self.store.expectations(&name)? {
                        let c = self.store.set_expectations(&name, expectations)?;
                        lines.push(format!("{name}: expectations set (commit {})", c.version));
                    }
                    let done = match flow {
                        Some(f) => self.rerun_flow(f)?,
                        None => self.refresh(&name, RefreshMode::Incremental)?,
                    };
                    match done {
                        Output::Done(l) => lines.push(l),
                        other => return Ok(other),
                    }
                    return Ok(Output::Done(lines.join("\n")));
                }
                self.schema_exists(&name)?;
                let (schema, generated) = match self.declared_schema(&name, schema.as_deref())? {
                    Some((schema, generated)) => (Some(schema), generated),
                    None => (None, Vec::new()),
                };
                self.declared.retain(|d| d.name != name);
                self.declared.push(Declared {
                    name: name.clone(),
                    schema,
                    generated,
                    properties,
                    expectations,
                });
                match flow {
                    Some(f) => self.create_flow(f),
                    None => Ok(Output::Done(format!(
                        "streaming table {name} declared; it is created with its flow"
                    ))),
                }
            }
            Kind::Flow(f) => {
                self.schema_exists(&f.target)?;
                self.create_flow(f)
            }
            Kind::Refresh { name, mode } => self.refresh(&name, mode),
            Kind::SetProperties { name, properties } => {
                if properties.contains_key(RETENTION_PROPERTY) {
                    self.refuse_if_fed_by_snapshots(
                        &name,
                        &format!("table property {RETENTION_PROPERTY} on"),
                    )?;
                }
                let c = self.store.set_properties(&name, properties)?;
                let mut lines = vec![format!("{name}: properties set (commit {})", c.version)];
                lines.extend(self.erasures_after(&name, c.version)?);
                Ok(Output::Done(lines.join("\n")))
            }
            Kind::ShowProperties { name, key } => self.show_properties(&name, key),
            Kind::DropStreamingTable { name, if_exists } => {
                self.drop_streaming_table(&name, if_exists)
            }
            Kind::DescribeHistory(name) => self.describe_history(&name),
            Kind::Vacuum { name, retain_hours } => self.vacuum(&name, retain_hours),
            Kind::Describe { name, detail } => {
                match describe::describe(&self.store, &name, detail)? {
                    Some((schema, batch)) => Ok(Output::Batches(schema, vec![batch])),
                    // A view, or DataFusion's to say what is wrong.
                    None => self.sql(stmt),
                }
            }
            Kind::Erase {
                name,
                condition,
                reason,
            } => self.erase(&name, &condition, &reason),
            Kind::Export(e) => self.export(&e),
            Kind::Receipt { pinned, query } => self.receipt_statement(&query, pinned),
            Kind::VerifyReceipt(token) => self.verify_receipt_statement(&token),
            Kind::Dml { name } => {
                if self.store.tables()?.contains(&name) {
                    self.dml(stmt, &name)
                } else if self.store.sources()?.contains(&name) {
                    self.source_dml(stmt, &name)
                } else {
                    Err(QueryError::Invalid(format!("no table named `{name}`")))
                }
            }
            Kind::Namespace(n) => self.namespace(n),
            Kind::Sql => self.sql(stmt),
        }
    }

    /// A statement DataFusion runs (a query, `CREATE TABLE`, `INSERT`, a view): every table it
    /// reads is read at the version it had when the statement started, so a query that reads a
    /// table twice, or two tables, never sees a commit that landed while it ran.
    fn sql(&mut self, stmt: &Stmt) -> Result<Output> {
        if self.pins.is_some() {
            return self.sql_pinned(stmt);
        }
        self.pins = Some(self.pins_now()?);
        let out = self.sql_pinned(stmt);
        self.pins = None;
        out
    }

    fn sql_pinned(&mut self, stmt: &Stmt) -> Result<Output> {
        self.clear_scratch()?;
        self.register_all()?;
        let head = stmt.head(4);
        let h: Vec<&str> = head.iter().map(String::as_str).collect();
        match h.as_slice() {
            ["CREATE", "TABLE", ..] | ["CREATE", "OR", "REPLACE", "TABLE"] => {
                self.create_table(stmt)
            }
            ["INSERT", "INTO", ..] => self.insert(stmt),
            ["CREATE", "VIEW", ..] | ["CREATE", "OR", "REPLACE", "VIEW"] => {
                let words = stmt.words();
                let name_at = if h[1] == "OR" { 4 } else { 2 };
                let name = self.stored_name(&dotted_name(&words, name_at)?)?;
                self.schema_exists(&name)?;
                let as_at = words
                    .iter()
                    .position(|t| upper(&t.token) == "AS")
                    .ok_or_else(|| QueryError::Invalid("CREATE VIEW needs AS SELECT ...".into()))?;
                let first = words.get(as_at + 1).copied().ok_or_else(|| {
                    QueryError::Invalid("CREATE VIEW needs a query after AS".into())
                })?;
                let body = text_from(stmt, first);
                // Check it plans before keeping it.
                let planned = self.rewrite(&sub_stmt(stmt, first))?;
                self.runtime.block_on(self.ctx.sql(&planned)).map_err(df)?;
                self.store.create_view(&name, &body)?;
                Ok(Output::Done(format!("view {name} created")))
            }
            ["DROP", "TABLE" | "VIEW", ..] => {
                let words = stmt.words();
                let if_exists = words.get(2).is_some_and(|t| upper(&t.token) == "IF");
                let name = dotted_name(&words, if if_exists { 4 } else { 2 })?;
                let name = self.stored_name(&name)?;
                match self.store.drop_table(&name) {
                    Err(asof_storage::Error::NotFound { .. }) if if_exists => {}
                    r => r?,
                }
                self.deregister_named(&name)?;
                Ok(Output::Done(format!("{name} dropped")))
            }
            _ if self.options.results == Results::Streamed => {
                let (schema, stream) = self.query_stream(stmt)?;
                let runtime = self.runtime.clone();
                Ok(Output::Stream(schema, BatchStream { runtime, stream }))
            }
            _ => {
                let (schema, batches) = self.query(stmt)?;
                Ok(Output::Batches(schema, batches))
            }
        }
    }

    fn query(&mut self, stmt: &Stmt) -> Result<(SchemaRef, Vec<RecordBatch>)> {
        let frame = self.plan(stmt)?;
        let schema: SchemaRef = Arc::new(frame.schema().as_arrow().clone());
        let batches = self.runtime.block_on(frame.collect()).map_err(df)?;
        Ok((schema, batches))
    }

    /// A query's schema and its batches as a stream, for statements that consume them one at a
    /// time.
    fn query_stream(
        &mut self,
        stmt: &Stmt,
    ) -> Result<(
        SchemaRef,
        datafusion::physical_plan::SendableRecordBatchStream,
    )> {
        let frame = self.plan(stmt)?;
        let schema: SchemaRef = Arc::new(frame.schema().as_arrow().clone());
        let stream = self.runtime.block_on(frame.execute_stream()).map_err(df)?;
        Ok((schema, stream))
    }

    /// The next batch of a stream from [`SqlSession::query_stream`].
    fn next_batch(
        &self,
        stream: &mut datafusion::physical_plan::SendableRecordBatchStream,
    ) -> Result<Option<RecordBatch>> {
        use futures::StreamExt;
        self.runtime.block_on(stream.next()).transpose().map_err(df)
    }
}

/// Whether `stmt`, a statement for DataFusion ([`Kind::Sql`]), is a query: it begins with
/// `SELECT`, `WITH` or `VALUES`.
fn is_query(stmt: &Stmt) -> bool {
    matches!(
        stmt.head(1).first().map(String::as_str),
        Some("SELECT" | "WITH" | "VALUES")
    )
}

/// The table name that starts at word `i` of `words`, its parts joined by `.`.
fn dotted_name(words: &[&TokenWithSpan], i: usize) -> Result<String> {
    Ok(dotted_name_at(words, i)?.0)
}

/// [`dotted_name`], and the index of the word after it.
fn dotted_name_at(words: &[&TokenWithSpan], i: usize) -> Result<(String, usize)> {
    // The one reader of table names (`P::table_name`): one to three parts, none holding a `.`.
    let mut p = parse::P {
        toks: words.to_vec(),
        i,
    };
    let name = p.table_name("a table name")?;
    Ok((name, p.i))
}

fn word(t: Option<&TokenWithSpan>) -> Result<String> {
    match t.map(|t| &t.token) {
        Some(Token::Word(w)) => Ok(w.value.clone()),
        Some(other) => Err(QueryError::Invalid(format!(
            "expected a name, found `{other}`"
        ))),
        None => Err(QueryError::Invalid("expected a name".into())),
    }
}

/// The statement from token `first` on.
fn sub_stmt(stmt: &Stmt, first: &TokenWithSpan) -> Stmt {
    let i = stmt
        .tokens
        .iter()
        .position(|t| std::ptr::eq(t, first))
        .expect("token of the statement");
    Stmt {
        tokens: stmt.tokens[i..].to_vec(),
    }
}

/// The statement's text from token `first` on.
fn text_from(stmt: &Stmt, first: &TokenWithSpan) -> String {
    let i = stmt
        .tokens
        .iter()
        .position(|t| std::ptr::eq(t, first))
        .expect("token of the statement");
    stmt.tokens[i..]
        .iter()
        .map(|t| parse::sql_text(&t.token))
        .collect::<String>()
        .trim()
        .to_string()
}
