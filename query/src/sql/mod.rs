//! The SQL front door: Databricks AUTO CDC statements handled here, everything else run by
//! DataFusion over the store's tables.
//!
//! Source tables are registered as in-memory tables; target tables through [`provider::TargetTable`],
//! which reads the store only when a query scans them. Temporal clauses on a table reference
//! (`t FOR SYSTEM_TIME AS OF x`, `FROM a TO b`, `BETWEEN a AND b`, `ALL`, and the same with
//! `BUSINESS_TIME` or `VALID_TIME`) are rewritten into a reference to a provider that carries the
//! selection into the storage scan.

mod parse;
mod provider;

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use asof_storage::{ColumnSelection, Condition, FlowSpec, Store, StoredAs};
use datafusion::datasource::MemTable;
use datafusion::prelude::SessionContext;
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan};

use crate::error::{QueryError, Result};
use crate::scan::TimeSelection;
use parse::{classify, expr_sql, split, upper, Cols, FlowAst, Kind, Source, Stmt};
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
    /// Streaming tables declared in this session whose flow has not been created yet.
    declared: Vec<String>,
}

fn df(e: datafusion::error::DataFusionError) -> QueryError {
    QueryError::Invalid(e.to_string())
}

impl SqlSession {
    /// A session over `store`. Registers the DataFusion evaluator for flow conditions.
    pub fn new(store: Store) -> Result<Self> {
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
        })
    }

    /// Runs `;`-separated statements in order; stops at the first error.
    pub fn execute(&mut self, sql: &str) -> Result<Vec<Output>> {
        let mut out = Vec::new();
        for stmt in split(sql)? {
            out.push(self.statement(&stmt)?);
        }
        Ok(out)
    }

    fn statement(&mut self, stmt: &Stmt) -> Result<Output> {
        match classify(stmt)? {
            Kind::StreamingTable {
                name,
                flow: Some(f),
            } => {
                let _ = name;
                self.create_flow(f)
            }
            Kind::StreamingTable { name, flow: None } => {
                if self.store.tables()?.contains(&name) {
                    // CREATE OR REFRESH of an existing table: refresh its flows.
                    return self.refresh(&name, false);
                }
                self.declared.push(name.clone());
                Ok(Output::Done(format!(
                    "streaming table {name} declared; it is created with its flow"
                )))
            }
            Kind::Flow(f) => self.create_flow(f),
            Kind::Refresh { name, full } => self.refresh(&name, full),
            Kind::Sql => self.sql(stmt),
        }
    }

    fn refresh(&mut self, table: &str, full: bool) -> Result<Output> {
        let flows = self.store.flows(table)?;
        let mut lines = Vec::new();
        for f in flows {
            match self.store.refresh(&f.name, full)? {
                Some(c) => lines.push(format!(
                    "{}: commit {} read {} events, wrote {} and retired {} row versions",
                    f.name,
                    c.version,
                    c.metrics.num_events_read,
                    c.metrics.num_upserted_rows,
                    c.metrics.num_deleted_rows
                )),
                None => lines.push(format!("{}: nothing new", f.name)),
            }
        }
        Ok(Output::Done(lines.join("\n")))
    }

    fn create_flow(&mut self, f: FlowAst) -> Result<Output> {
        let Some(Source::Table(source)) = f.source.clone() else {
            return Err(QueryError::Invalid("a flow needs a source".into()));
        };
        let (schema, _) = self.store.source_data(&source).map_err(|e| match e {
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
            .source_table(&source);
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
        self.store.create_flow(flow)?;
        self.declared.retain(|d| d != &f.target);
        let line = match self.store.refresh(&f.name, false)? {
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

    /// Registers every table and view of the store with DataFusion.
    fn register_all(&mut self) -> Result<()> {
        for name in self.store.sources()? {
            let (schema, batches) = self.store.source_data(&name)?;
            let t = MemTable::try_new(schema, vec![batches]).map_err(df)?;
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
            )?;
            self.ctx.deregister_table(name.as_str()).map_err(df)?;
            self.ctx
                .register_table(name.as_str(), Arc::new(t))
                .map_err(df)?;
        }
        for (name, sql) in self.store.views()? {
            self.ctx.deregister_table(name.as_str()).map_err(df)?;
            let plan = self.runtime.block_on(self.ctx.sql(&sql)).map_err(df)?;
            self.ctx
                .register_table(name.as_str(), plan.into_view())
                .map_err(df)?;
        }
        Ok(())
    }

    fn sql(&mut self, stmt: &Stmt) -> Result<Output> {
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
                self.runtime.block_on(self.ctx.sql(&body)).map_err(df)?;
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
                let text = self.rewrite_temporal(stmt)?;
                let frame = self.runtime.block_on(self.ctx.sql(&text)).map_err(df)?;
                let schema: SchemaRef = Arc::new(frame.schema().as_arrow().clone());
                let batches = self.runtime.block_on(frame.collect()).map_err(df)?;
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
            let query = text_from(stmt, words[name_at + 2]);
            let (schema, batches) = self.query(&query)?;
            self.store.create_source(&name, &schema)?;
            let mut n = 0;
            for b in &batches {
                n = self.store.append(&name, b)?;
            }
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
        let (target_schema, _) = self.store.source_data(&name).map_err(|e| match e {
            asof_storage::Error::NotFound { .. } => {
                QueryError::Invalid(format!("`{name}` is not a table that accepts INSERT"))
            }
            e => e.into(),
        })?;
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
        let (_, batches) = self.query(&text_from(stmt, first))?;
        let mut total = 0;
        let mut rows = 0;
        for b in batches {
            if b.num_columns() != cols.len() {
                return Err(QueryError::Invalid(format!(
                    "INSERT gives {} values per row for {} columns",
                    b.num_columns(),
                    cols.len()
                )));
            }
            rows += b.num_rows();
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
            total = self.store.append(&name, &renamed)?;
        }
        Ok(Output::Done(format!(
            "{rows} rows inserted into {name} ({total} in all)"
        )))
    }

    fn query(&mut self, sql: &str) -> Result<(SchemaRef, Vec<RecordBatch>)> {
        let frame = self.runtime.block_on(self.ctx.sql(sql)).map_err(df)?;
        let schema: SchemaRef = Arc::new(frame.schema().as_arrow().clone());
        let batches = self.runtime.block_on(frame.collect()).map_err(df)?;
        Ok((schema, batches))
    }

    /// Rewrites `t FOR SYSTEM_TIME ... [FOR BUSINESS_TIME ...]` into a registered provider that
    /// carries the selections into the storage scan.
    fn rewrite_temporal(&mut self, stmt: &Stmt) -> Result<String> {
        let toks = &stmt.tokens;
        let sig: Vec<usize> = (0..toks.len())
            .filter(|&i| !matches!(toks[i].token, Token::Whitespace(_)))
            .collect();
        let mut out = String::new();
        let mut copied = 0; // tokens before this index are in `out`
        let mut k = 0;
        let mut n = 0;
        while k < sig.len() {
            let at = |j: usize| {
                sig.get(j)
                    .map(|&i| upper(&toks[i].token))
                    .unwrap_or_default()
            };
            if at(k + 1) == "FOR"
                && matches!(
                    at(k + 2).as_str(),
                    "SYSTEM_TIME" | "BUSINESS_TIME" | "VALID_TIME"
                )
            {
                let table = word(Some(&toks[sig[k]]))?;
                let mut system = TimeSelection::All;
                let mut business = TimeSelection::All;
                let mut j = k + 1;
                while at(j) == "FOR"
                    && matches!(
                        at(j + 2 - 1).as_str(),
                        "SYSTEM_TIME" | "BUSINESS_TIME" | "VALID_TIME"
                    )
                {
                    let which = at(j + 1);
                    j += 2;
                    let (sel, next) = temporal(toks, &sig, j)?;
                    j = next;
                    if which == "SYSTEM_TIME" {
                        system = sel;
                    } else {
                        business = sel;
                    }
                }
                n += 1;
                let scratch = format!("__asof_{n}_{table}");
                let provider = TargetTable::new(self.store.clone(), &table, business, system)?;
                self.ctx.deregister_table(scratch.as_str()).map_err(df)?;
                self.ctx
                    .register_table(scratch.as_str(), Arc::new(provider))
                    .map_err(df)?;
                for t in &toks[copied..sig[k]] {
                    out.push_str(&t.token.to_string());
                }
                // Keep the table's name as the alias unless the query gives one.
                let alias_follows = at(j) == "AS"
                    || sig.get(j).is_some_and(|&i| matches!(&toks[i].token, Token::Word(w) if w.keyword == datafusion::sql::sqlparser::keywords::Keyword::NoKeyword));
                out.push_str(&format!("\"{scratch}\""));
                if !alias_follows {
                    out.push_str(&format!(" AS \"{table}\""));
                }
                copied = sig.get(j).copied().unwrap_or(toks.len());
                if j > 0 {
                    copied = sig[j - 1] + 1;
                }
                k = j;
                continue;
            }
            k += 1;
        }
        for t in &toks[copied..] {
            out.push_str(&t.token.to_string());
        }
        Ok(out)
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
