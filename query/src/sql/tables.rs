//! Source tables from SQL: `CREATE TABLE t (cols)`, `CREATE TABLE t [(cols)] AS query` and
//! `INSERT INTO t [(cols)] VALUES ... | query`, each one durable commit however many rows.

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use datafusion::common::TableReference;
use datafusion::sql::sqlparser::tokenizer::Token;

use super::context::df;
use super::parse::{self, upper, Stmt};
use super::{dotted_name_at, names, sub_stmt, text_from, Output, SqlSession};
use crate::error::{QueryError, Result};

impl SqlSession {
    /// `CREATE TABLE t (cols)` and `CREATE TABLE t AS query`: a source table.
    pub(super) fn create_table(&mut self, stmt: &Stmt) -> Result<Output> {
        let words = stmt.words();
        let name_at = words
            .iter()
            .position(|t| upper(&t.token) == "TABLE")
            .expect("classified")
            + 1;
        let (written, after) = dotted_name_at(&words, name_at)?;
        let name = self.stored_name(&written)?;
        self.schema_exists(&name)?;
        if words.get(after).is_some_and(|t| upper(&t.token) == "AS") {
            // One commit, however many rows: the rows stream into the write, nothing is stored
            // until the query has run to its end.
            let first = words.get(after + 1).copied().ok_or_else(|| {
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
        if words.get(after).map(|t| &t.token) == Some(&Token::LParen) {
            let mut depth = 0;
            let close = words[after..].iter().position(|t| {
                match t.token {
                    Token::LParen => depth += 1,
                    Token::RParen => depth -= 1,
                    _ => {}
                }
                depth == 0
            });
            let close = close.map(|c| after + c);
            if let Some(c) =
                close.filter(|&c| words.get(c + 1).is_some_and(|t| upper(&t.token) == "AS"))
            {
                let columns: String = words[after + 1..c]
                    .iter()
                    .map(|t| super::parse::sql_text(&t.token))
                    .collect::<Vec<_>>()
                    .join(" ");
                let (declared, generated) = self
                    .declared_schema(&name, Some(&columns))?
                    .expect("a column list");
                // The query fills the columns that are not generated, in order.
                let filled: Vec<String> = declared
                    .fields()
                    .iter()
                    .map(|f| f.name().clone())
                    .filter(|n| !generated.iter().any(|g| &g.column == n))
                    .collect();
                let first = words.get(c + 2).copied().ok_or_else(|| {
                    QueryError::Invalid("CREATE TABLE ... AS needs a query after AS".into())
                })?;
                let (_, mut stream) = self.query_stream(&sub_stmt(stmt, first))?;
                let mut w = self.store.begin_create_source(&name, &declared, None)?;
                w.set_generated(generated)?;
                while let Some(b) = self.next_batch(&mut stream)? {
                    if b.num_columns() != filled.len() {
                        return Err(QueryError::Invalid(format!(
                            "CREATE TABLE {name}: the query gives {} columns for {} declared (generated columns aside)",
                            b.num_columns(),
                            filled.len()
                        )));
                    }
                    w.push(&by_position(&b, filled.iter().map(String::as_str))?)?;
                }
                let n = self.store.commit_write(w, None)?;
                return Ok(Output::Done(format!("table {name} created with {n} rows")));
            }
        }
        // Let DataFusion read the column list, under a scratch name.
        let scratch = format!("__asof_create_{}", name.replace('.', "_"));
        let columns = words.get(after).copied().ok_or_else(|| {
            QueryError::Invalid(format!(
                "CREATE TABLE {written} needs its columns or AS query"
            ))
        })?;
        let (columns, generated) = super::generated::split_generated(&text_from(stmt, columns))?;
        let ddl = format!("CREATE TABLE {} {columns}", parse::quote_ident(&scratch));
        let schema = self.ddl_schema(&ddl, &scratch)?;
        let mut w = self.store.begin_create_source(&name, &schema, None)?;
        w.set_generated(generated)?;
        self.store.commit_write(w, None)?;
        Ok(Output::Done(format!("table {name} created")))
    }

    /// The columns of `ddl`, a `CREATE TABLE scratch (...)` that DataFusion reads (and forgets).
    pub(super) fn ddl_schema(&mut self, ddl: &str, scratch: &str) -> Result<SchemaRef> {
        let ddl = super::map_type::maps_as_structs(ddl)?;
        self.runtime
            .block_on(async { self.ctx.sql(&ddl).await?.collect().await })
            .map_err(df)?;
        let scratch = TableReference::bare(scratch);
        let provider = self
            .runtime
            .block_on(self.ctx.table_provider(scratch.clone()))
            .map_err(df)?;
        self.ctx.deregister_table(scratch).map_err(df)?;
        Ok(super::map_type::structs_as_maps(&provider.schema()))
    }

    /// `INSERT INTO t [(cols)] VALUES ... | SELECT ...`.
    pub(super) fn insert(&mut self, stmt: &Stmt) -> Result<Output> {
        let words = stmt.words();
        let (written, after) = dotted_name_at(&words, 2)?;
        let name = self.stored_name(&written)?;
        if self.store.tables()?.contains(&name) {
            return self.dml(stmt, &name);
        }
        let mut w = self.store.begin_append(&name).map_err(|e| match e {
            asof_storage::Error::NotFound { .. } => {
                QueryError::Invalid(format!("`{name}` is not a table that accepts INSERT"))
            }
            e => e.into(),
        })?;
        let target_schema = self.store.source_schema(&name)?;
        let mut i = after;
        // Without a column list, the columns that are not generated, in order.
        let generated = self.store.source_generated(&name)?;
        let mut cols: Vec<String> = target_schema
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .filter(|n| !generated.iter().any(|g| &g.column == n))
            .collect();
        if words.get(after).is_some_and(|t| t.token == Token::LParen) {
            let mut named = Vec::new();
            i = after + 1;
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
