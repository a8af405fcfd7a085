//! The SQL front door: Databricks AUTO CDC statements handled here, everything else run by
//! DataFusion over the store's tables.
//!
//! Source tables are registered as in-memory tables; target tables through [`provider::TargetTable`],
//! which reads the store only when a query scans them. Temporal clauses on a table reference
//! (`t FOR SYSTEM_TIME AS OF x`, `FROM a TO b`, `BETWEEN a AND b`, `ALL`, and the same with
//! `BUSINESS_TIME` or `VALID_TIME`) are rewritten into a reference to a provider that carries the
//! selection into the storage scan.

mod describe;
mod guard;
mod names;
mod options;
pub(crate) mod parse;
mod period;
mod provider;
mod rewrite;
mod script;

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use asof_storage::{ColumnSelection, Condition, FlowSpec, Progress, Store, StoredAs};
use datafusion::common::TableReference;
use datafusion::prelude::SessionContext;
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan};

use crate::arrow_conv::table_arrow_schema;
use crate::error::{QueryError, Result};
use crate::files::FileSource;
use crate::scan::TimeSelection;
pub use options::{ExternalAccess, SessionOptions};
use parse::{classify, expr_sql, split, upper, Cols, FlowAst, Kind, Source, Stmt};
pub use provider::DataFusionEvaluator;
use provider::TargetTable;
pub use script::{ScriptError, Steps};

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
        let sql = self.substitute(sql)?;
        let mut out = Vec::new();
        for stmt in split(&sql)? {
            out.push(self.statement(&stmt)?);
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
            let out = self.statement(stmt).map_err(|error| ScriptError {
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
        let known = self.known_names()?;
        let name = |n: &mut String| *n = known.spelling(n);
        let flow_names = |f: &mut FlowAst| {
            name(&mut f.target);
            if let Some(Source::Table(s)) = &mut f.source {
                name(s);
            }
        };
        let mut kind = classify(stmt)?;
        match &mut kind {
            Kind::StreamingTable { name: n, flow, .. } => {
                name(n);
                if let Some(f) = flow {
                    flow_names(f);
                }
            }
            Kind::Flow(f) => flow_names(f),
            Kind::Refresh { name: n, .. }
            | Kind::SetProperties { name: n, .. }
            | Kind::ShowProperties { name: n, .. }
            | Kind::Describe { name: n, .. }
            | Kind::DropStreamingTable { name: n, .. }
            | Kind::DescribeHistory(n)
            | Kind::Vacuum { name: n, .. } => name(n),
            Kind::Sql => {}
        }
        Ok(kind)
    }

    fn statement(&mut self, stmt: &Stmt) -> Result<Output> {
        match self.classify(stmt)? {
            Kind::StreamingTable {
                name,
                schema,
                expectations,
                properties,
                flow,
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
                        None => self.refresh(&name, false)?,
                    };
                    match done {
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
            Kind::ShowProperties { name, key } => {
                let mut props = self.store.properties(&name)?;
                if let Some(key) = key {
                    let value = props
                        .remove(&key)
                        .unwrap_or_else(|| format!("Table {name} does not have property: {key}"));
                    props = BTreeMap::from([(key, value)]);
                }
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
            Kind::Describe { name, detail } => {
                match describe::describe(&self.store, &name, detail)? {
                    Some((schema, batch)) => Ok(Output::Batches(schema, vec![batch])),
                    // A view, or DataFusion's to say what is wrong.
                    None => self.sql(stmt),
                }
            }
            Kind::DropStreamingTable { name, if_exists } => {
                if !self.store.tables()?.contains(&name) {
                    if if_exists {
                        return Ok(Output::Done(format!("{name} does not exist")));
                    }
                    return Err(QueryError::Invalid(format!(
                        "`{name}` is not a streaming table"
                    )));
                }
                self.store.drop_table(&name)?;
                self.ctx
                    .deregister_table(TableReference::bare(name.as_str()))
                    .map_err(df)?;
                Ok(Output::Done(format!("{name} dropped")))
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
        if self.flow_exists(&f.name)? {
            return self.rerun_flow(f);
        }
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
        let flow = self.flow_spec(&f, &source)?;
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
        // The statement creates the table and fills it, or does nothing: a table whose first
        // refresh failed is dropped again (it holds only its creation), and its declaration is
        // kept for the next try.
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
        self.declared.retain(|d| d.name != f.target);
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

    /// The flow `f` describes, reading the source table `source`.
    fn flow_spec(&self, f: &FlowAst, source: &str) -> Result<asof_storage::Flow> {
        let schema = self.store.source_schema(source).map_err(|e| match e {
            asof_storage::Error::NotFound { .. } => QueryError::Invalid(format!(
                "flow `{}` reads `{source}`, which is not a table",
                f.name
            )),
            e => e.into(),
        })?;
        let columns: Vec<String> = schema.fields().iter().map(|f| f.name().clone()).collect();
        // Column names match without regard to case (see `names`).
        let known = names::Names::of(&columns);
        let one = |n: &String| known.spelling(n);
        let all = |v: &Vec<String>| v.iter().map(one).collect::<Vec<_>>();
        let sel = |c: &Cols| match c {
            Cols::All => ColumnSelection::All,
            Cols::Only(v) => ColumnSelection::Only(all(v)),
            Cols::Except(v) => ColumnSelection::AllExcept(all(v)),
        };
        let condition = |e: &[TokenWithSpan]| known.resolve(&expr_sql(e, &columns));
        let mut b = FlowSpec::builder(&f.name, &f.target, &schema)
            .keys(all(&f.keys))
            .sequence_by(all(&f.sequence_by))
            .source_table(source)
            .once(f.once)
            .comment(f.comment.clone());
        if let Some(s) = &f.system_sequence_by {
            b = b.system_sequence_by(one(s));
        }
        b = b.stored_as(match f.stored_as.as_deref() {
            Some("SCD2") => StoredAs::Scd2,
            Some("BITEMPORAL") => StoredAs::Bitemporal,
            _ => StoredAs::Scd1,
        });
        if let Some(e) = &f.delete_when {
            b = b.delete_when(Condition::Expr(condition(e)?));
        }
        if let Some(e) = &f.truncate_when {
            b = b.truncate_when(Condition::Expr(condition(e)?));
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
            b = b.columns_to_update(one(c));
        }
        Ok(b.build().map_err(asof_storage::Error::from)?)
    }

    /// The Arrow schema of a declared column list (`a INT, b STRING`), read by DataFusion.
    fn declared_schema(&mut self, table: &str, columns: Option<&str>) -> Result<Option<SchemaRef>> {
        let Some(columns) = columns else {
            return Ok(None);
        };
        let scratch = format!("__asof_declare_{table}");
        let ddl = format!("CREATE TABLE {} ({columns})", parse::quote_ident(&scratch));
        self.runtime
            .block_on(async { self.ctx.sql(&ddl).await?.collect().await })
            .map_err(|e| {
                QueryError::Invalid(format!("the columns of streaming table `{table}`: {e}"))
            })?;
        let provider = self
            .runtime
            .block_on(
                self.ctx
                    .table_provider(TableReference::bare(scratch.as_str())),
            )
            .map_err(df)?;
        self.ctx
            .deregister_table(TableReference::bare(scratch.as_str()))
            .map_err(df)?;
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

    /// The statement that created flow `f` run again: a refresh of its table when `f` is
    /// defined as the flow is, else the flow redefined and its table rebuilt
    /// ([`Store::redefine_flow`]), as Databricks does.
    fn rerun_flow(&mut self, f: FlowAst) -> Result<Output> {
        let source = match &f.source {
            Some(Source::Table(t)) => t.clone(),
            Some(Source::Files(files)) => {
                let name = files_source(&f.name);
                let mut files = files.clone();
                files.path = std::fs::canonicalize(&files.path).unwrap_or(files.path);
                let now = serde_json::to_string(&files).ok();
                if self.store.source_origin(&name)?.0 != now {
                    return Err(QueryError::Invalid(format!(
                        "flow `{}` reads files from another folder or with other options than it was created with; asof cannot change that yet: drop `{}` and create it again (its history goes with it)",
                        f.name, f.target
                    )));
                }
                name
            }
            None => return Err(QueryError::Invalid("a flow needs a source".into())),
        };
        let spec = self.flow_spec(&f, &source)?;
        if self
            .store
            .flows(&f.target)?
            .iter()
            .any(|e| e == spec.spec())
        {
            return self.refresh(&f.target, false);
        }
        match self.store.redefine_flow(spec)? {
            Some(c) => Ok(Output::Done(format!(
                "flow {} redefined: commit {} rebuilt {} from all its sources ({} events read, {} row versions written, {} retired)",
                f.name,
                c.version,
                f.target,
                c.metrics.num_events_read,
                c.metrics.num_upserted_rows,
                c.metrics.num_deleted_rows
            ))),
            None => self.refresh(&f.target, false),
        }
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
            self.ctx
                .deregister_table(TableReference::bare(name.as_str()))
                .map_err(df)?;
            self.ctx
                .register_table(TableReference::bare(name.as_str()), Arc::new(t))
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
            self.ctx
                .deregister_table(TableReference::bare(name.as_str()))
                .map_err(df)?;
            self.ctx
                .register_table(TableReference::bare(name.as_str()), Arc::new(t))
                .map_err(df)?;
        }
        for (name, sql) in self.store.views()? {
            self.ctx
                .deregister_table(TableReference::bare(name.as_str()))
                .map_err(df)?;
            let mut text = String::new();
            for stmt in split(&sql)? {
                text = self.rewrite(&stmt)?;
            }
            let plan = self.runtime.block_on(self.ctx.sql(&text)).map_err(df)?;
            self.ctx
                .register_table(TableReference::bare(name.as_str()), plan.into_view())
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
                let name = word(words.get(if if_exists { 4 } else { 2 }).copied())?;
                let name = self.known_names()?.spelling(&name);
                match self.store.drop_table(&name) {
                    Err(asof_storage::Error::NotFound { .. }) if if_exists => {}
                    r => r?,
                }
                self.ctx
                    .deregister_table(TableReference::bare(name.as_str()))
                    .map_err(df)?;
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
            let first = words.get(name_at + 2).copied().ok_or_else(|| {
                QueryError::Invalid("CREATE TABLE ... AS needs a query after AS".into())
            })?;
            let (schema, mut stream) = self.query_stream(&sub_stmt(stmt, first))?;
            let mut w = self.store.begin_create_source(&name, &schema, None)?;
            while let Some(b) = self.next_batch(&mut stream)? {
                w.push(&b)?;
            }
            let n = self.store.commit_write(w, None)?;
            return Ok(Output::Done(format!("table {name} created with {n} rows")));
        }
        // `CREATE TABLE t (cols) AS query`: the declared columns, filled by position.
        if words.get(name_at + 1).map(|t| &t.token) == Some(&Token::LParen) {
            let mut depth = 0;
            let close = words[name_at + 1..].iter().position(|t| {
                match t.token {
                    Token::LParen => depth += 1,
                    Token::RParen => depth -= 1,
                    _ => {}
                }
                depth == 0
            });
            let close = close.map(|c| name_at + 1 + c);
            if let Some(c) =
                close.filter(|&c| words.get(c + 1).is_some_and(|t| upper(&t.token) == "AS"))
            {
                let columns: String = words[name_at + 2..c]
                    .iter()
                    .map(|t| t.token.to_string())
                    .collect::<Vec<_>>()
                    .join(" ");
                let declared = self
                    .declared_schema(&name, Some(&columns))?
                    .expect("a column list");
                let first = words.get(c + 2).copied().ok_or_else(|| {
                    QueryError::Invalid("CREATE TABLE ... AS needs a query after AS".into())
                })?;
                let (_, mut stream) = self.query_stream(&sub_stmt(stmt, first))?;
                let mut w = self.store.begin_create_source(&name, &declared, None)?;
                while let Some(b) = self.next_batch(&mut stream)? {
                    if b.num_columns() != declared.fields().len() {
                        return Err(QueryError::Invalid(format!(
                            "CREATE TABLE {name}: the query gives {} columns for {} declared",
                            b.num_columns(),
                            declared.fields().len()
                        )));
                    }
                    w.push(&by_position(
                        &b,
                        declared.fields().iter().map(|f| f.name().as_str()),
                    )?)?;
                }
                let n = self.store.commit_write(w, None)?;
                return Ok(Output::Done(format!("table {name} created with {n} rows")));
            }
        }
        // Let DataFusion read the column list, under a scratch name.
        let scratch = format!("__asof_create_{name}");
        let ddl = text_from(stmt, words[0]).replacen(
            &words[name_at].token.to_string(),
            &parse::quote_ident(&scratch),
            1,
        );
        self.runtime
            .block_on(async { self.ctx.sql(&ddl).await?.collect().await })
            .map_err(df)?;
        let provider = self
            .runtime
            .block_on(
                self.ctx
                    .table_provider(TableReference::bare(scratch.as_str())),
            )
            .map_err(df)?;
        self.ctx
            .deregister_table(TableReference::bare(scratch.as_str()))
            .map_err(df)?;
        self.store.create_source(&name, &provider.schema())?;
        Ok(Output::Done(format!("table {name} created")))
    }

    /// `INSERT INTO t [(cols)] VALUES ... | SELECT ...`.
    fn insert(&mut self, stmt: &Stmt) -> Result<Output> {
        let words = stmt.words();
        let name = self.known_names()?.spelling(&word(words.get(2).copied())?);
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
            let known = names::Names::of(&cols);
            cols = named.iter().map(|n| known.spelling(n)).collect();
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
            w.push(&by_position(&b, cols.iter().map(String::as_str))?)?;
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
}

/// A DataFusion context as asof uses it: identifiers keep their case (`CompanyId` stays
/// `CompanyId`, as Databricks shows it; names must then be written as they were created), and
/// strings are plain `Utf8`.
pub(crate) fn new_context() -> SessionContext {
    let mut config = datafusion::prelude::SessionConfig::new();
    config.options_mut().sql_parser.enable_ident_normalization = false;
    // Databricks SQL: "x" is a string, `x` an identifier (docs/SEMANTICS.md §11).
    config.options_mut().sql_parser.dialect = datafusion::common::config::Dialect::Databricks;
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

/// `batch`'s columns under `names`, by position (their types stay; the store casts them).
fn by_position<'a>(
    batch: &RecordBatch,
    names: impl IntoIterator<Item = &'a str>,
) -> Result<RecordBatch> {
    let fields: Vec<arrow::datatypes::Field> = batch
        .schema()
        .fields()
        .iter()
        .zip(names)
        .map(|(f, n)| arrow::datatypes::Field::new(n, f.data_type().clone(), true))
        .collect();
    Ok(RecordBatch::try_new(
        Arc::new(arrow::datatypes::Schema::new(fields)),
        batch.columns().to_vec(),
    )?)
}
