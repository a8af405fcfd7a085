//! The SQL front door: Databricks AUTO CDC statements handled here, everything else run by
//! DataFusion over the store's tables.
//!
//! Source tables are registered as in-memory tables; target tables through [`provider::TargetTable`],
//! which reads the store only when a query scans them. Temporal clauses on a table reference
//! (`t FOR SYSTEM_TIME AS OF x`, `FROM a TO b`, `BETWEEN a AND b`, `ALL`, and the same with
//! `BUSINESS_TIME` or `VALID_TIME`) are rewritten into a reference to a provider that carries the
//! selection into the storage scan.

mod options;
pub(crate) mod parse;
mod provider;

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use asof_storage::{ColumnSelection, Condition, FlowSpec, Progress, Store, StoredAs};
use datafusion::datasource::MemTable;
use datafusion::prelude::SessionContext;
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan};

use crate::arrow_conv::table_arrow_schema;
use crate::error::{QueryError, Result};
use crate::files::FileSource;
use crate::scan::{ChangeBound, TimeSelection};
pub use options::{ExternalAccess, SessionOptions};
use parse::{classify, expr_sql, read_files_args, split, upper, Cols, FlowAst, Kind, Source, Stmt};
pub use provider::DataFusionEvaluator;
use provider::TargetTable;

/// What one statement produced.
#[derive(Debug)]
pub enum Output {
    /// A query's result.
    Batches(SchemaRef, Vec<RecordBatch>),
    /// A statement that changed something, with a line saying what.
    Done(String),
}

/// A SQL session over a store.
pub struct SqlSession {
    store: Store,
    ctx: SessionContext,
    runtime: tokio::runtime::Runtime,
    /// Streaming tables declared in this session whose flow has not been created yet, with their
    /// declared columns.
    declared: Vec<Declared>,
    progress: Option<Arc<dyn Progress>>,
    /// Scratch tables registered for the statement being run.
    scratch: usize,
    options: SessionOptions,
}

/// A script stopped at a statement that failed: which one, and what was committed before it.
#[derive(Debug)]
pub struct ScriptError {
    /// The failed statement's number, from 1.
    pub statement: usize,
    /// The line it starts on, from 1.
    pub line: u64,
    /// How many statements the script has.
    pub statements: usize,
    /// Why it failed.
    pub error: Box<QueryError>,
}

impl std::fmt::Display for ScriptError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let k = self.statement;
        if self.statements == 1 {
            return write!(f, "{}", self.error);
        }
        write!(
            f,
            "statement {k} (line {}) failed: {}",
            self.line, self.error
        )?;
        let done = match k {
            1 => "nothing before it ran".to_string(),
            2 => "statement 1 is committed".to_string(),
            _ => format!("statements 1..{} are committed", k - 1),
        };
        let rest = if k == self.statements {
            format!("statement {k} is not")
        } else {
            format!("statements {k}..{} are not", self.statements)
        };
        write!(f, "\n{done}; {rest}")
    }
}

impl std::error::Error for ScriptError {}

/// A streaming table declared by `CREATE OR REFRESH STREAMING TABLE`, waiting for its flow.
struct Declared {
    name: String,
    /// Its declared columns, checked against the flow's.
    schema: Option<SchemaRef>,
    /// Its `TBLPROPERTIES`, given to the table when the flow creates it.
    properties: BTreeMap<String, String>,
    /// Its expectations, likewise.
    expectations: Vec<asof_storage::Expectation>,
}

/// `VACUUM t` without `RETAIN`: seven days, as Delta Lake.
const DEFAULT_RETAIN_HOURS: f64 = 168.0;

/// The name of the hidden source table that holds the files a `read_files` flow loaded.
fn files_source(flow: &str) -> String {
    format!("__asof_files_{flow}")
}

fn df(e: datafusion::error::DataFusionError) -> QueryError {
    use datafusion::error::DataFusionError;
    // Errors of asof raised inside a DataFusion plan come back wrapped; unwrap them.
    match e.find_root() {
        DataFusionError::External(inner) => QueryError::Invalid(inner.to_string()),
        _ => QueryError::Invalid(e.to_string()),
    }
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
        store.set_condition_evaluator(Arc::new(DataFusionEvaluator));
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| QueryError::Invalid(format!("cannot start the query runtime: {e}")))?;
        Ok(SqlSession {
            store,
            ctx: new_context(),
            runtime,
            declared: Vec::new(),
            progress: None,
            scratch: 0,
            options,
        })
    }

    /// Reports the progress of long work (loading files, a full refresh) to `progress`.
    pub fn set_progress(&mut self, progress: Arc<dyn Progress>) {
        self.store.set_progress(progress.clone());
        self.progress = Some(progress);
    }

    /// Runs `;`-separated statements in order; stops at the first error.
    pub fn execute(&mut self, sql: &str) -> Result<Vec<Output>> {
        let mut out = Vec::new();
        for stmt in split(sql)? {
            out.push(self.statement(&stmt)?);
        }
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
        let stmts = split(sql).map_err(|error| ScriptError {
            statement: 1,
            line: 1,
            statements: 1,
            error: Box::new(error),
        })?;
        let n = stmts.len();
        for (i, stmt) in stmts.iter().enumerate() {
            let out = self.statement(stmt).map_err(|error| ScriptError {
                statement: i + 1,
                line: stmt.line(),
                statements: n,
                error: Box::new(error),
            })?;
            each(out);
        }
        Ok(())
    }

    fn statement(&mut self, stmt: &Stmt) -> Result<Output> {
        match classify(stmt)? {
            Kind::StreamingTable {
                name,
                schema,
                expectations,
                properties,
                flow,
            } => {
                if flow.is_none() && self.store.tables()?.contains(&name) {
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
                    match self.refresh(&name, false)? {
                        Output::Done(l) => lines.push(l),
                        other => return Ok(other),
                    }
                    return Ok(Output::Done(lines.join("\n")));
                }
                let schema = self.declared_schema(&name, schema.as_deref())?;
                self.declared.retain(|d| d.name != name);
                self.declared.push(Declared {
                    name: name.clone(),
                    schema,
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
            Kind::Flow(f) => self.create_flow(f),
            Kind::Refresh { name, full } => self.refresh(&name, full),
            Kind::SetProperties { name, properties } => {
                let c = self.store.set_properties(&name, properties)?;
                Ok(Output::Done(format!(
                    "{name}: properties set (commit {})",
                    c.version
                )))
            }
            Kind::ShowProperties(name) => {
                let props = self.store.properties(&name)?;
                let schema = Arc::new(arrow::datatypes::Schema::new(vec![
                    arrow::datatypes::Field::new("key", arrow::datatypes::DataType::Utf8, false),
                    arrow::datatypes::Field::new("value", arrow::datatypes::DataType::Utf8, false),
                ]));
                let batch = RecordBatch::try_new(
                    schema.clone(),
                    vec![
                        Arc::new(arrow::array::StringArray::from_iter_values(props.keys())),
                        Arc::new(arrow::array::StringArray::from_iter_values(props.values())),
                    ],
                )?;
                Ok(Output::Batches(schema, vec![batch]))
            }
            Kind::DescribeHistory(name) => {
                let history = match self.store.history(&name) {
                    Ok(h) => h,
                    Err(asof_storage::Error::NotFound { .. }) => {
                        self.store.source_history(&name)?
                    }
                    Err(e) => return Err(e.into()),
                };
                let batch = crate::history::history_batch(&history)?;
                Ok(Output::Batches(batch.schema(), vec![batch]))
            }
            Kind::Vacuum { name, retain_hours } => {
                let hours = retain_hours.unwrap_or(DEFAULT_RETAIN_HOURS);
                let retain =
                    std::time::Duration::try_from_secs_f64(hours * 3600.0).map_err(|e| {
                        QueryError::Invalid(format!("VACUUM RETAIN {hours} HOURS: {e}"))
                    })?;
                let r = self.store.vacuum(&name, retain)?;
                if r.commits_removed == 0 {
                    return Ok(Output::Done(format!(
                        "{name}: nothing older than {hours} hours to remove; history kept from version {}",
                        r.oldest_version
                    )));
                }
                Ok(Output::Done(format!(
                    "{name}: history kept from version {}; removed {} commits and {} row versions; log {} -> {} bytes",
                    r.oldest_version, r.commits_removed, r.row_versions_removed, r.bytes_before, r.bytes_after
                )))
            }
            Kind::Sql => self.sql(stmt),
        }
    }

    fn refresh(&mut self, table: &str, full: bool) -> Result<Output> {
        let flows = self.store.flows(table)?;
        let mut lines = Vec::new();
        for f in &flows {
            if let Some(n) = self.load_new_files(f.source_table.as_deref())? {
                lines.push(format!("{}: loaded {n} new files", f.name));
            }
        }
        let commits = self.store.refresh_table(table, full)?;
        for c in &commits {
            lines.push(format!(
                "{}: commit {} read {} events, wrote {} and retired {} row versions",
                c.parameters.get("flow").map_or("", String::as_str),
                c.version,
                c.metrics.num_events_read,
                c.metrics.num_upserted_rows,
                c.metrics.num_deleted_rows
            ));
        }
        for f in &flows {
            let wrote = commits.iter().any(|c| {
                c.parameters
                    .get("flow")
                    .is_some_and(|n| n.split(',').any(|n| n == f.name))
            });
            if !wrote {
                lines.push(format!("{}: nothing new", f.name));
            }
        }
        Ok(Output::Done(lines.join("\n")))
    }

    fn create_flow(&mut self, f: FlowAst) -> Result<Output> {
        match f.source.clone() {
            Some(Source::Table(source)) => self.create_flow_from(f, source),
            Some(Source::Files(files)) => {
                self.files_allowed()?;
                let source = self.create_files_source(&f.name, files)?;
                // The hidden source belongs to the flow: if the flow is refused, it goes too, so
                // that the statement can be corrected and run again.
                self.create_flow_from(f, source.clone()).inspect_err(|_| {
                    let _ = self.store.drop_table(&source);
                })
            }
            None => Err(QueryError::Invalid("a flow needs a source".into())),
        }
    }

    fn create_flow_from(&mut self, f: FlowAst, source: String) -> Result<Output> {
        let schema = self.store.source_schema(&source).map_err(|e| match e {
            asof_storage::Error::NotFound { .. } => QueryError::Invalid(format!(
                "flow `{}` reads `{source}`, which is not a table",
                f.name
            )),
            e => e.into(),
        })?;
        let columns: Vec<String> = schema.fields().iter().map(|f| f.name().clone()).collect();
        let sel = |c: &Cols| match c {
            Cols::All => ColumnSelection::All,
            Cols::Only(v) => ColumnSelection::Only(v.clone()),
            Cols::Except(v) => ColumnSelection::AllExcept(v.clone()),
        };
        let mut b = FlowSpec::builder(&f.name, &f.target, &schema)
            .keys(f.keys.clone())
            .sequence_by(f.sequence_by.clone())
            .source_table(&source)
            .once(f.once);
        if let Some(s) = &f.system_sequence_by {
            b = b.system_sequence_by(s);
        }
        b = b.stored_as(match f.stored_as.as_deref() {
            Some("SCD2") => StoredAs::Scd2,
            Some("BITEMPORAL") => StoredAs::Bitemporal,
            _ => StoredAs::Scd1,
        });
        if let Some(e) = &f.delete_when {
            b = b.delete_when(Condition::Expr(expr_sql(e, &columns)));
        }
        if let Some(e) = &f.truncate_when {
            b = b.truncate_when(Condition::Expr(expr_sql(e, &columns)));
        }
        if let Some(c) = &f.ignore_null_updates {
            b = b.ignore_null_updates(sel(c));
        }
        if let Some(c) = &f.columns {
            b = b.columns(sel(c));
        }
        if let Some(c) = &f.track_history {
            b = b.track_history(sel(c));
        }
        if let Some(c) = &f.columns_to_update {
            b = b.columns_to_update(c);
        }
        let flow = b.build().map_err(asof_storage::Error::from)?;
        let declared = self.declared.iter().find(|d| d.name == f.target);
        if let Some(Declared {
            schema: Some(schema),
            ..
        }) = declared
        {
            check_declared(
                &f.target,
                schema,
                &table_arrow_schema(&flow.target_schema()),
            )?;
        }
        let creates_table = !self.store.tables()?.contains(&f.target);
        if !creates_table {
            self.store.create_flow(flow)?;
        } else {
            let mut options = asof_storage::TableOptions::default();
            if let Some(d) = declared {
                options.properties = d.properties.clone();
                options.expectations = d.expectations.clone();
            }
            self.store.create_flow_with(flow, options)?;
        }
        self.declared.retain(|d| d.name != f.target);
        // The statement creates the table and fills it, or does nothing: a table whose first
        // refresh failed is dropped again (it holds only its creation).
        let refreshed = match self.store.refresh(&f.name, false) {
            Err(e) if creates_table => {
                self.store.drop_table(&f.target)?;
                return Err(QueryError::Invalid(format!(
                    "flow `{}` into `{}` was not created, nothing was committed: {e}",
                    f.name, f.target
                )));
            }
            r => r?,
        };
        let line = match refreshed {
            Some(c) => format!(
                "flow {} into {}: commit {} read {} events, wrote {} row versions",
                f.name, f.target, c.version, c.metrics.num_events_read, c.metrics.num_upserted_rows
            ),
            None => format!(
                "flow {} into {} created; its source is empty",
                f.name, f.target
            ),
        };
        Ok(Output::Done(line))
    }

    /// The Arrow schema of a declared column list (`a INT, b STRING`), read by DataFusion.
    fn declared_schema(&mut self, table: &str, columns: Option<&str>) -> Result<Option<SchemaRef>> {
        let Some(columns) = columns else {
            return Ok(None);
        };
        let scratch = format!("__asof_declare_{table}");
        let ddl = format!("CREATE TABLE \"{scratch}\" ({columns})");
        self.runtime
            .block_on(async { self.ctx.sql(&ddl).await?.collect().await })
            .map_err(|e| {
                QueryError::Invalid(format!("the columns of streaming table `{table}`: {e}"))
            })?;
        let provider = self
            .runtime
            .block_on(self.ctx.table_provider(scratch.as_str()))
            .map_err(df)?;
        self.ctx.deregister_table(scratch.as_str()).map_err(df)?;
        Ok(Some(provider.schema()))
    }

    /// Creates the hidden source table of a `read_files` flow and loads the files into it.
    fn create_files_source(&mut self, flow: &str, mut files: FileSource) -> Result<String> {
        files.path = std::fs::canonicalize(&files.path).map_err(|e| {
            QueryError::Invalid(format!("flow `{flow}` reads {}: {e}", files.path.display()))
        })?;
        let list = files.list()?;
        let schema = files.infer(&list)?;
        let name = files_source(flow);
        // A hidden source without its flow is what an interrupted `CREATE ... FLOW` left (it
        // loads files in several commits before the flow exists): start it again.
        if self.store.sources()?.contains(&name) && !self.flow_exists(flow)? {
            self.store.drop_table(&name)?;
        }
        let origin = serde_json::to_string(&files)
            .map_err(|e| QueryError::Invalid(format!("cannot keep read_files options: {e}")))?;
        self.store
            .create_source_with_origin(&name, &schema, Some(&origin))?;
        self.load_new_files(Some(&name))?;
        Ok(name)
    }

    /// Whether a flow of that name exists.
    fn flow_exists(&self, flow: &str) -> Result<bool> {
        for t in self.store.tables()? {
            if self.store.flows(&t)?.iter().any(|f| f.name == flow) {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Loads the files that appeared since the last load into the flow's hidden source table, one
    /// durable append per file, named by its path. Returns how many, or `None` when the flow does
    /// not read files.
    fn load_new_files(&mut self, source: Option<&str>) -> Result<Option<usize>> {
        let Some(source) = source else {
            return Ok(None);
        };
        let (origin, loaded) = self.store.source_origin(source)?;
        let Some(origin) = origin else {
            return Ok(None);
        };
        let files: FileSource = serde_json::from_str(&origin).map_err(|e| {
            QueryError::Invalid(format!(
                "the read_files options of `{source}` are damaged: {e}"
            ))
        })?;
        let schema = self.store.source_schema(source)?;
        let new: Vec<_> = files
            .list()?
            .into_iter()
            .filter(|p| !loaded.contains(&p.display().to_string()))
            .collect();
        let bytes: u64 = new
            .iter()
            .filter_map(|p| std::fs::metadata(p).ok())
            .map(|m| m.len())
            .sum();
        let bar = self.progress.clone().filter(|_| bytes >= 16 << 20);
        if let Some(b) = &bar {
            b.begin(&format!("loading {} file(s)", new.len()), bytes);
        }
        let mut done = 0;
        for path in &new {
            let batches = files.read(path, &schema)?;
            let batch = arrow::compute::concat_batches(&schema, &batches)?;
            self.store
                .append_loaded(source, &batch, &path.display().to_string())?;
            done += std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
            if let Some(b) = &bar {
                b.advance(done);
            }
        }
        if let Some(b) = &bar {
            b.end();
        }
        Ok(Some(new.len()))
    }

    /// Registers every table and view of the store with DataFusion.
    fn register_all(&mut self) -> Result<()> {
        for name in self.store.sources()? {
            let t = provider::SourceProvider::new(self.store.clone(), &name)?;
            self.ctx.deregister_table(name.as_str()).map_err(df)?;
            self.ctx
                .register_table(name.as_str(), Arc::new(t))
                .map_err(df)?;
        }
        for name in self.store.tables()? {
            let t = TargetTable::new(
                self.store.clone(),
                &name,
                TimeSelection::All,
                TimeSelection::All,
                None,
            )?;
            self.ctx.deregister_table(name.as_str()).map_err(df)?;
            self.ctx
                .register_table(name.as_str(), Arc::new(t))
                .map_err(df)?;
        }
        for (name, sql) in self.store.views()? {
            self.ctx.deregister_table(name.as_str()).map_err(df)?;
            let mut text = String::new();
            for stmt in split(&sql)? {
                text = self.rewrite(&stmt)?;
            }
            let plan = self.runtime.block_on(self.ctx.sql(&text)).map_err(df)?;
            self.ctx
                .register_table(name.as_str(), plan.into_view())
                .map_err(df)?;
        }
        Ok(())
    }

    fn sql(&mut self, stmt: &Stmt) -> Result<Output> {
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
                let name = word(words.get(name_at).copied())?;
                let as_at = words
                    .iter()
                    .position(|t| upper(&t.token) == "AS")
                    .ok_or_else(|| QueryError::Invalid("CREATE VIEW needs AS SELECT ...".into()))?;
                let body = text_from(stmt, words[as_at + 1]);
                // Check it plans before keeping it.
                let planned = self.rewrite(&sub_stmt(stmt, words[as_at + 1]))?;
                self.runtime.block_on(self.ctx.sql(&planned)).map_err(df)?;
                self.store.create_view(&name, &body)?;
                Ok(Output::Done(format!("view {name} created")))
            }
            ["DROP", "TABLE" | "VIEW", ..] => {
                let words = stmt.words();
                let if_exists = words.get(2).is_some_and(|t| upper(&t.token) == "IF");
                let name = word(words.get(if if_exists { 4 } else { 2 }).copied())?;
                match self.store.drop_table(&name) {
                    Err(asof_storage::Error::NotFound { .. }) if if_exists => {}
                    r => r?,
                }
                self.ctx.deregister_table(name.as_str()).map_err(df)?;
                Ok(Output::Done(format!("{name} dropped")))
            }
            _ => {
                let (schema, batches) = self.query(stmt)?;
                Ok(Output::Batches(schema, batches))
            }
        }
    }

    /// `CREATE TABLE t (cols)` and `CREATE TABLE t AS query`: a source table.
    fn create_table(&mut self, stmt: &Stmt) -> Result<Output> {
        let words = stmt.words();
        let name_at = words
            .iter()
            .position(|t| upper(&t.token) == "TABLE")
            .expect("classified")
            + 1;
        let name = word(words.get(name_at).copied())?;
        if words
            .get(name_at + 1)
            .is_some_and(|t| upper(&t.token) == "AS")
        {
            // One commit, however many rows: the rows stream into the write, nothing is stored
            // until the query has run to its end.
            let (schema, mut stream) = self.query_stream(&sub_stmt(stmt, words[name_at + 2]))?;
            let mut w = self.store.begin_create_source(&name, &schema, None)?;
            while let Some(b) = self.next_batch(&mut stream)? {
                w.push(&b)?;
            }
            let n = self.store.commit_write(w, None)?;
            return Ok(Output::Done(format!("table {name} created with {n} rows")));
        }
        // Let DataFusion read the column list, under a scratch name.
        let scratch = format!("__asof_create_{name}");
        let ddl =
            text_from(stmt, words[0]).replacen(&words[name_at].token.to_string(), &scratch, 1);
        self.runtime
            .block_on(async { self.ctx.sql(&ddl).await?.collect().await })
            .map_err(df)?;
        let provider = self
            .runtime
            .block_on(self.ctx.table_provider(scratch.as_str()))
            .map_err(df)?;
        self.ctx.deregister_table(scratch.as_str()).map_err(df)?;
        self.store.create_source(&name, &provider.schema())?;
        Ok(Output::Done(format!("table {name} created")))
    }

    /// `INSERT INTO t [(cols)] VALUES ... | SELECT ...`.
    fn insert(&mut self, stmt: &Stmt) -> Result<Output> {
        let words = stmt.words();
        let name = word(words.get(2).copied())?;
        let mut w = self.store.begin_append(&name).map_err(|e| match e {
            asof_storage::Error::NotFound { .. } => {
                QueryError::Invalid(format!("`{name}` is not a table that accepts INSERT"))
            }
            e => e.into(),
        })?;
        let target_schema = self.store.source_schema(&name)?;
        let mut i = 3;
        let mut cols: Vec<String> = target_schema
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        if words.get(3).is_some_and(|t| t.token == Token::LParen) {
            let mut named = Vec::new();
            i = 4;
            while let Some(t) = words.get(i) {
                i += 1;
                match &t.token {
                    Token::Word(w) => named.push(w.value.clone()),
                    Token::Comma => {}
                    Token::RParen => break,
                    _ => {
                        return Err(QueryError::Invalid(format!(
                            "unexpected `{}` in the column list",
                            t.token
                        )))
                    }
                }
            }
            cols = named;
        }
        let first = words
            .get(i)
            .copied()
            .ok_or_else(|| QueryError::Invalid("INSERT needs VALUES or a query".into()))?;
        // One commit, however many rows (see `create_table`).
        let (_, mut stream) = self.query_stream(&sub_stmt(stmt, first))?;
        while let Some(b) = self.next_batch(&mut stream)? {
            if b.num_columns() != cols.len() {
                return Err(QueryError::Invalid(format!(
                    "INSERT gives {} values per row for {} columns",
                    b.num_columns(),
                    cols.len()
                )));
            }
            let fields: Vec<arrow::datatypes::Field> = b
                .schema()
                .fields()
                .iter()
                .zip(&cols)
                .map(|(f, c)| arrow::datatypes::Field::new(c, f.data_type().clone(), true))
                .collect();
            let renamed = RecordBatch::try_new(
                Arc::new(arrow::datatypes::Schema::new(fields)),
                b.columns().to_vec(),
            )?;
            w.push(&renamed)?;
        }
        let rows = w.rows();
        let total = self.store.commit_write(w, None)?;
        Ok(Output::Done(format!(
            "{rows} rows inserted into {name} ({total} in all)"
        )))
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

    /// Plans a statement for DataFusion, refusing what it would do but asof must not: DML that
    /// would report rows changed while nothing durable changes, DDL that lasts only for the
    /// session, transactions asof does not have, and (with [`ExternalAccess::Denied`]) files and
    /// settings.
    fn plan(&mut self, stmt: &Stmt) -> Result<datafusion::dataframe::DataFrame> {
        let sql = self.rewrite(stmt)?;
        let state = self.ctx.state();
        let plan = self
            .runtime
            .block_on(state.create_logical_plan(&sql))
            .map_err(df)?;
        self.check_effect(stmt, &plan)?;
        self.runtime
            .block_on(self.ctx.execute_logical_plan(plan))
            .map_err(df)
    }

    fn check_effect(
        &self,
        stmt: &Stmt,
        plan: &datafusion::logical_expr::LogicalPlan,
    ) -> Result<()> {
        use datafusion::logical_expr::{DdlStatement, LogicalPlan, Statement};
        let what = stmt.head(2).join(" ");
        let denied = self.options.external_access == ExternalAccess::Denied;
        let external = |what: &str| {
            QueryError::Invalid(format!(
                "`{what}` is refused: this session does not allow access to files or settings outside the store (ExternalAccess::Denied)"
            ))
        };
        match plan {
            LogicalPlan::Dml(d) => Err(QueryError::Invalid(format!(
                "`{what}` on `{}` is not supported: asof does not run INSERT, UPDATE, DELETE or MERGE on this table; nothing was changed",
                d.table_name
            ))),
            LogicalPlan::Ddl(DdlStatement::CreateExternalTable(_)) if denied => {
                Err(external(&what))
            }
            LogicalPlan::Ddl(DdlStatement::CreateExternalTable(_)) => Ok(()),
            LogicalPlan::Ddl(_) => Err(QueryError::Invalid(format!(
                "`{what}` is not supported: it would not be stored with the database; nothing was changed"
            ))),
            LogicalPlan::Statement(
                Statement::TransactionStart(_) | Statement::TransactionEnd(_),
            ) => Err(QueryError::Invalid(format!(
                "`{what}` is not supported: each statement is its own atomic commit, and asof has no transactions across statements"
            ))),
            LogicalPlan::Statement(Statement::SetVariable(_) | Statement::ResetVariable(_))
                if denied =>
            {
                Err(external(&what))
            }
            LogicalPlan::Copy(_) if denied => Err(external(&what)),
            _ => Ok(()),
        }
    }

    /// Rewrites what DataFusion does not know into references to scratch tables registered for
    /// this statement:
    /// - `t FOR SYSTEM_TIME ... [FOR BUSINESS_TIME ...]` (and `VALID_TIME`): a provider that
    ///   carries the selections into the storage scan;
    /// - `read_files('path', ...)`: the files, read now;
    /// - `temporal_scan('t', business, system)` and `table_as_of('t', b, s)`: the table functions
    ///   for clients that cannot write the clauses;
    /// - `VALUES` used as a table: its columns named `col1`, `col2`, ... as in Databricks.
    fn rewrite(&mut self, stmt: &Stmt) -> Result<String> {
        let toks = &stmt.tokens;
        let sig: Vec<usize> = (0..toks.len())
            .filter(|&i| !matches!(toks[i].token, Token::Whitespace(_)))
            .collect();
        let words: Vec<&TokenWithSpan> = sig.iter().map(|&i| &toks[i]).collect();
        let at = |j: usize| words.get(j).map(|t| upper(&t.token)).unwrap_or_default();
        let is_timeline = |w: &str| matches!(w, "SYSTEM_TIME" | "BUSINESS_TIME" | "VALID_TIME");
        let mut out = String::new();
        let mut copied = 0; // tokens before this index are in `out`
        let mut k = 0;
        while k < sig.len() {
            let lparen_next = words.get(k + 1).is_some_and(|t| t.token == Token::LParen);
            let travel = |j: usize| {
                (at(j) == "FOR" && is_timeline(&at(j + 1)))
                    || (matches!(at(j).as_str(), "VERSION" | "TIMESTAMP")
                        && at(j + 1) == "AS"
                        && at(j + 2) == "OF")
            };
            let (text, next) = if k > 0 && travel(k + 1) && matches!(words[k].token, Token::Word(_))
            {
                let table = word(Some(words[k]))?;
                let mut system = TimeSelection::All;
                let mut business = TimeSelection::All;
                let mut version = None;
                let mut j = k + 1;
                while travel(j) {
                    if at(j) == "FOR" {
                        let which = at(j + 1);
                        let (sel, next) = temporal(toks, &sig, j + 2)?;
                        j = next;
                        if which == "SYSTEM_TIME" {
                            system = sel;
                        } else {
                            business = sel;
                        }
                        continue;
                    }
                    let by_version = at(j) == "VERSION";
                    let lit = words.get(j + 3).map(|t| &t.token);
                    version = Some(match (by_version, lit) {
                        (true, Some(Token::Number(n, _))) => n.parse::<u64>().map_err(|_| {
                            QueryError::Invalid(format!(
                                "VERSION AS OF takes a version number, not `{n}`"
                            ))
                        })?,
                        (false, Some(Token::SingleQuotedString(ts))) => {
                            self.store.version_at(&table, parse_timestamp(ts)?)?
                        }
                        (_, other) => {
                            return Err(QueryError::Invalid(format!(
                                "expected {} after {} AS OF, found `{}`",
                                if by_version {
                                    "a version number"
                                } else {
                                    "a timestamp in quotes"
                                },
                                at(j),
                                other.map(|t| t.to_string()).unwrap_or_default()
                            )))
                        }
                    });
                    j += 4;
                }
                let scratch = self.register_target(&table, business, system, version)?;
                // Keep the table's name as the alias unless the query gives one.
                let alias_follows = at(j) == "AS"
                    || words.get(j).is_some_and(|t| matches!(&t.token, Token::Word(w) if w.keyword == datafusion::sql::sqlparser::keywords::Keyword::NoKeyword));
                let text = if alias_follows {
                    format!("\"{scratch}\"")
                } else {
                    format!("\"{scratch}\" AS \"{table}\"")
                };
                (text, j)
            } else if at(k) == "READ_FILES" && lparen_next {
                self.files_allowed()?;
                let (files, next) = read_files_args(&words, k + 1)?;
                let list = files.list()?;
                let schema = files.infer(&list)?;
                let mut batches = Vec::new();
                for f in &list {
                    batches.extend(files.read(f, &schema)?);
                }
                let t = MemTable::try_new(schema, vec![batches]).map_err(df)?;
                (
                    format!("\"{}\"", self.register_scratch("files", Arc::new(t))?),
                    next,
                )
            } else if matches!(at(k).as_str(), "TEMPORAL_SCAN" | "TABLE_AS_OF") && lparen_next {
                let (args, next) = literal_args(&words, k + 1)?;
                let name = at(k).to_lowercase();
                let arg = |i: usize| -> Result<&asof_storage::Value> {
                    args.get(i).ok_or_else(|| {
                        QueryError::Invalid(format!("{name}: argument {} is missing", i + 1))
                    })
                };
                let table = match arg(0)? {
                    asof_storage::Value::Str(s) => s.to_string(),
                    _ => {
                        return Err(QueryError::Invalid(format!(
                            "{name}: the first argument is a table name in quotes"
                        )))
                    }
                };
                if args.len() > 3 {
                    return Err(QueryError::Invalid(format!(
                        "{name} takes at most 3 arguments"
                    )));
                }
                let sel = |i: usize| -> Result<TimeSelection> {
                    match (name.as_str(), args.get(i)) {
                        (_, None | Some(asof_storage::Value::Null)) => Ok(TimeSelection::All),
                        ("table_as_of", Some(v)) => Ok(TimeSelection::AsOf(vec![v.clone()])),
                        (_, Some(asof_storage::Value::Str(s))) => selection_text(s),
                        (_, Some(v)) => Err(QueryError::Invalid(format!(
                            "temporal_scan: a selection is text such as 'AS OF 2025-01-01', not {v:?}"
                        ))),
                    }
                };
                let (business, system) = (sel(1)?, sel(2)?);
                let scratch = self.register_target(&table, business, system, None)?;
                (format!("\"{scratch}\""), next)
            } else if at(k) == "TABLE_CHANGES" && lparen_next {
                let (args, next) = literal_args(&words, k + 1)?;
                let bound = |v: Option<&asof_storage::Value>| -> Result<Option<ChangeBound>> {
                    Ok(match v {
                        None | Some(asof_storage::Value::Null) => None,
                        Some(asof_storage::Value::Int(n)) if *n >= 0 => {
                            Some(ChangeBound::Version(*n as u64))
                        }
                        Some(asof_storage::Value::Str(s)) => {
                            Some(ChangeBound::Timestamp(parse_timestamp(s)?))
                        }
                        Some(other) => {
                            return Err(QueryError::Invalid(format!(
                                "table_changes takes versions or timestamps, not {other:?}"
                            )))
                        }
                    })
                };
                let table = match args.first() {
                    Some(asof_storage::Value::Str(s)) => s.to_string(),
                    _ => {
                        return Err(QueryError::Invalid(
                            "table_changes('table', start [, end]): the table name comes first, in quotes".into(),
                        ))
                    }
                };
                if !(2..=3).contains(&args.len()) {
                    return Err(QueryError::Invalid(
                        "table_changes('table', start [, end]) takes two or three arguments".into(),
                    ));
                }
                let start = bound(args.get(1))?.ok_or_else(|| {
                    QueryError::Invalid("table_changes needs a start version or timestamp".into())
                })?;
                let end = bound(args.get(2))?;
                let (schema, batches) =
                    crate::scan::table_changes(&self.store, &table, &start, end.as_ref())?;
                let t = MemTable::try_new(schema, vec![batches]).map_err(df)?;
                (
                    format!("\"{}\"", self.register_scratch("changes", Arc::new(t))?),
                    next,
                )
            } else if at(k) == "VALUES"
                && k > 0
                && (at(k - 1) == "FROM" || words[k - 1].token == Token::LParen)
            {
                // `VALUES (..), (..)`: count the first row's columns and find the end.
                let (mut j, mut depth, mut columns) = (k + 1, 0, 1);
                let mut rows = 0;
                while let Some(t) = words.get(j) {
                    match t.token {
                        Token::LParen => depth += 1,
                        Token::RParen => {
                            depth -= 1;
                            if depth == 0 {
                                rows += 1;
                                if words.get(j + 1).map(|t| &t.token) != Some(&Token::Comma) {
                                    j += 1;
                                    break;
                                }
                            }
                        }
                        Token::Comma if depth == 1 && rows == 0 => columns += 1,
                        _ => {}
                    }
                    j += 1;
                }
                let inner: String = toks[sig[k]..=sig[j - 1]]
                    .iter()
                    .map(|t| t.token.to_string())
                    .collect();
                let select = (1..=columns)
                    .map(|i| format!("column{i} AS col{i}"))
                    .collect::<Vec<_>>()
                    .join(", ");
                let text = if at(k - 1) == "FROM" {
                    format!("(SELECT {select} FROM ({inner}))")
                } else {
                    format!("SELECT {select} FROM ({inner})")
                };
                (text, j)
            } else {
                k += 1;
                continue;
            };
            for t in &toks[copied..sig[k]] {
                out.push_str(&t.token.to_string());
            }
            out.push_str(&text);
            copied = sig[next - 1] + 1;
            k = next;
        }
        for t in &toks[copied..] {
            out.push_str(&t.token.to_string());
        }
        Ok(out)
    }

    /// Whether this session may read files (`read_files`).
    fn files_allowed(&self) -> Result<()> {
        if self.options.external_access == ExternalAccess::Denied {
            return Err(QueryError::Invalid(
                "`read_files` is refused: this session does not allow access to files outside the store (ExternalAccess::Denied)".into(),
            ));
        }
        Ok(())
    }

    /// Registers a provider under a fresh scratch name and returns the name.
    fn register_scratch(
        &mut self,
        what: &str,
        provider: Arc<dyn datafusion::catalog::TableProvider>,
    ) -> Result<String> {
        self.scratch += 1;
        let name = format!("__asof_{}_{what}", self.scratch);
        self.ctx.deregister_table(name.as_str()).map_err(df)?;
        self.ctx
            .register_table(name.as_str(), provider)
            .map_err(df)?;
        Ok(name)
    }

    /// Registers target `table` seen through the selections; returns the scratch name.
    fn register_target(
        &mut self,
        table: &str,
        business: TimeSelection,
        system: TimeSelection,
        version: Option<u64>,
    ) -> Result<String> {
        let provider = TargetTable::new(self.store.clone(), table, business, system, version)?;
        self.register_scratch(table, Arc::new(provider))
    }

    /// Drops the scratch tables of the last statement.
    fn clear_scratch(&mut self) -> Result<()> {
        let names: Vec<String> = self
            .ctx
            .catalog("datafusion")
            .and_then(|c| c.schema("public"))
            .map(|s| s.table_names())
            .unwrap_or_default();
        for n in names.iter().filter(|n| n.starts_with("__asof_")) {
            self.ctx.deregister_table(n.as_str()).map_err(df)?;
        }
        Ok(())
    }
}

/// A timestamp literal (`2025-07-18T10:00:00`, `2025-07-18 10:00:00`, `2025-07-18`, with or
/// without a zone; no zone means UTC) as µs since the epoch.
fn parse_timestamp(s: &str) -> Result<i64> {
    let ty = asof_storage::ColumnType::Timestamp {
        unit: asof_storage::TimeUnit::Microsecond,
        tz: None,
    };
    match asof_storage::Value::parse(s, &ty) {
        Ok(asof_storage::Value::Int(us)) => Ok(us),
        _ => Err(QueryError::Invalid(format!("`{s}` is not a timestamp"))),
    }
}

/// A selection written as text, for `temporal_scan`: `AS OF t`, `FROM a TO b`, `BETWEEN a AND b`
/// or `ALL`, with bare time literals (`AS OF 2025-01-01T00:00:00`).
fn selection_text(s: &str) -> Result<TimeSelection> {
    let t = s.trim();
    let u = t.to_ascii_uppercase();
    let lit = |x: &str| -> asof_storage::Value {
        let x = x.trim().trim_matches('\'');
        match x.parse::<i64>() {
            Ok(n) => asof_storage::Value::Int(n),
            Err(_) => asof_storage::Value::Str(x.into()),
        }
    };
    let bad = || {
        QueryError::Invalid(format!(
            "temporal_scan: `{s}` is not a selection (AS OF t, FROM a TO b, BETWEEN a AND b or ALL)"
        ))
    };
    if u == "ALL" || u.is_empty() {
        Ok(TimeSelection::All)
    } else if let Some(rest) = u.strip_prefix("AS OF ") {
        Ok(TimeSelection::AsOf(vec![lit(&t[t.len() - rest.len()..])]))
    } else if let Some(rest) = u.strip_prefix("FROM ") {
        let at = rest.find(" TO ").ok_or_else(bad)?;
        let off = t.len() - rest.len();
        Ok(TimeSelection::FromTo(
            vec![lit(&t[off..off + at])],
            vec![lit(&t[off + at + 4..])],
        ))
    } else if let Some(rest) = u.strip_prefix("BETWEEN ") {
        let at = rest.find(" AND ").ok_or_else(bad)?;
        let off = t.len() - rest.len();
        Ok(TimeSelection::Between(
            vec![lit(&t[off..off + at])],
            vec![lit(&t[off + at + 5..])],
        ))
    } else {
        Err(bad())
    }
}

/// The literal arguments of a table function, `(lit, lit, ...)` from the `(` at significant token
/// `i`: strings, numbers and NULL. Returns them and the index after the `)`.
fn literal_args(
    words: &[&TokenWithSpan],
    mut i: usize,
) -> Result<(Vec<asof_storage::Value>, usize)> {
    let mut out = Vec::new();
    i += 1; // `(`
    loop {
        let t = words
            .get(i)
            .ok_or_else(|| QueryError::Invalid("a table function's `)` is missing".into()))?;
        match &t.token {
            Token::RParen => return Ok((out, i + 1)),
            Token::Comma => {}
            Token::SingleQuotedString(s) => out.push(asof_storage::Value::Str(s.as_str().into())),
            Token::Number(n, _) => out
                .push(asof_storage::Value::Int(n.parse().map_err(|_| {
                    QueryError::Invalid(format!("`{n}` is not a whole number"))
                })?)),
            Token::Word(w) if w.value.eq_ignore_ascii_case("NULL") => {
                out.push(asof_storage::Value::Null)
            }
            Token::Word(w)
                if w.value.eq_ignore_ascii_case("TIMESTAMP")
                    || w.value.eq_ignore_ascii_case("DATE") => {}
            other => {
                return Err(QueryError::Invalid(format!(
                    "a table function takes literals here, not `{other}`"
                )))
            }
        }
        i += 1;
    }
}

/// A DataFusion context as asof uses it: identifiers keep their case (`CompanyId` stays
/// `CompanyId`, as Databricks shows it; names must then be written as they were created), and
/// strings are plain `Utf8`.
pub(crate) fn new_context() -> SessionContext {
    let mut config = datafusion::prelude::SessionConfig::new();
    config.options_mut().sql_parser.enable_ident_normalization = false;
    config.options_mut().sql_parser.map_string_types_to_utf8view = false;
    SessionContext::new_with_config(config)
}

/// Checks a flow's target columns against the columns its streaming table declared: each declared
/// column must exist, with a type the flow's can be cast to.
fn check_declared(table: &str, declared: &SchemaRef, actual: &SchemaRef) -> Result<()> {
    for d in declared.fields() {
        let Ok(a) = actual.field_with_name(d.name()) else {
            return Err(QueryError::Invalid(format!(
                "streaming table `{table}` declares column `{}`, which its flow does not produce (it produces {})",
                d.name(),
                actual.fields().iter().map(|f| f.name().as_str()).collect::<Vec<_>>().join(", ")
            )));
        };
        if a.data_type() != d.data_type()
            && !arrow::compute::can_cast_types(a.data_type(), d.data_type())
        {
            return Err(QueryError::Invalid(format!(
                "streaming table `{table}` declares column `{}` as {}, but its flow produces {}",
                d.name(),
                d.data_type(),
                a.data_type()
            )));
        }
    }
    Ok(())
}

/// `AS OF x` | `FROM a TO b` | `BETWEEN a AND b` | `ALL`, starting at significant token `j`.
fn temporal(toks: &[TokenWithSpan], sig: &[usize], mut j: usize) -> Result<(TimeSelection, usize)> {
    let at = |j: usize| {
        sig.get(j)
            .map(|&i| upper(&toks[i].token))
            .unwrap_or_default()
    };
    let lit = |j: usize| -> Result<(asof_storage::Value, usize)> {
        let mut j = j;
        // TIMESTAMP '...' / DATE '...' literals: the keyword is optional here.
        if matches!(at(j).as_str(), "TIMESTAMP" | "DATE") {
            j += 1;
        }
        match sig.get(j).map(|&i| &toks[i].token) {
            Some(Token::SingleQuotedString(s)) => {
                Ok((asof_storage::Value::Str(s.as_str().into()), j + 1))
            }
            Some(Token::Number(n, _)) => n
                .parse::<i64>()
                .map(|v| (asof_storage::Value::Int(v), j + 1))
                .map_err(|_| QueryError::Invalid(format!("`{n}` is not a whole number"))),
            Some(t) => Err(QueryError::Invalid(format!(
                "expected a time literal after the temporal clause, found `{t}`"
            ))),
            None => Err(QueryError::Invalid(
                "expected a time literal after the temporal clause".into(),
            )),
        }
    };
    Ok(match at(j).as_str() {
        "ALL" => (TimeSelection::All, j + 1),
        "AS" => {
            if at(j + 1) != "OF" {
                return Err(QueryError::Invalid("expected AS OF".into()));
            }
            let (v, n) = lit(j + 2)?;
            (TimeSelection::AsOf(vec![v]), n)
        }
        "FROM" => {
            let (a, n) = lit(j + 1)?;
            j = n;
            if at(j) != "TO" {
                return Err(QueryError::Invalid("expected TO in FROM ... TO ...".into()));
            }
            let (b, n) = lit(j + 1)?;
            (TimeSelection::FromTo(vec![a], vec![b]), n)
        }
        "BETWEEN" => {
            let (a, n) = lit(j + 1)?;
            j = n;
            if at(j) != "AND" {
                return Err(QueryError::Invalid(
                    "expected AND in BETWEEN ... AND ...".into(),
                ));
            }
            let (b, n) = lit(j + 1)?;
            (TimeSelection::Between(vec![a], vec![b]), n)
        }
        other => {
            return Err(QueryError::Invalid(format!(
                "expected AS OF, FROM, BETWEEN or ALL after the timeline, found `{other}`"
            )))
        }
    })
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
        .map(|t| t.token.to_string())
        .collect::<String>()
        .trim()
        .to_string()
}
