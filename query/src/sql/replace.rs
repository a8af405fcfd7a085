//! Replace flows: `CREATE FLOW f AS INSERT INTO t BY NAME REPLACE USING (cols) [SEQUENCE BY
//! col] query` and `... REPLACE WHERE condition query` (docs/SEMANTICS.md §1.7). Each run
//! replaces, in one commit, the rows of `t` that the new rows replace: those that match them on
//! `cols` (unless they are newer by the sequence: a late batch does not overwrite them), or that
//! the condition selects.

use std::sync::Arc;

use arrow::array::{AsArray, RecordBatch};
use arrow::datatypes::{Schema, UInt64Type};
use datafusion::datasource::MemTable;
use datafusion::sql::sqlparser::dialect::DatabricksDialect;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};

use super::context::df;
use super::parse::{quote_ident, sql_text, upper};
use super::provider::{with_position_column, Positions, SourceProvider, POSITION};
use super::SqlSession;
use crate::error::{QueryError, Result};

/// What a replace flow replaces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Replace {
    /// `REPLACE USING (cols) [SEQUENCE BY col]`.
    Using {
        columns: Vec<String>,
        sequence: Option<String>,
    },
    /// `REPLACE WHERE condition`.
    Where(String),
}

/// An append flow's query: its `REPLACE ...` clause if it has one, and the query after it.
pub(super) fn split_replace(query: &str) -> Result<(Option<Replace>, String)> {
    let tokens = Tokenizer::new(&DatabricksDialect {}, query)
        .tokenize()
        .map_err(|e| QueryError::Invalid(format!("cannot read the flow's query: {e}")))?;
    let sig: Vec<usize> = (0..tokens.len())
        .filter(|&i| !matches!(tokens[i], Token::Whitespace(_)))
        .collect();
    let at = |j: usize| sig.get(j).map(|&i| upper(&tokens[i])).unwrap_or_default();
    if at(0) != "REPLACE" {
        return Ok((None, query.to_string()));
    }
    let text = |from: usize, to: usize| -> String {
        let (a, b) = (sig[from], sig.get(to).copied().unwrap_or(tokens.len()));
        tokens[a..b]
            .iter()
            .map(sql_text)
            .collect::<String>()
            .trim()
            .to_string()
    };
    let bad = |msg: &str| QueryError::Invalid(format!("REPLACE: {msg}"));
    let (replace, rest) = match at(1).as_str() {
        "USING" => {
            if sig.get(2).map(|&i| &tokens[i]) != Some(&Token::LParen) {
                return Err(bad("expected USING (columns)"));
            }
            let mut columns = Vec::new();
            let mut j = 3;
            loop {
                match sig.get(j).map(|&i| &tokens[i]) {
                    Some(Token::Word(w)) => columns.push(w.value.clone()),
                    Some(Token::Comma) => {}
                    Some(Token::RParen) => break,
                    _ => return Err(bad("expected column names in USING (...)")),
                }
                j += 1;
            }
            j += 1;
            if columns.is_empty() {
                return Err(bad("USING needs at least one column"));
            }
            let sequence = if at(j) == "SEQUENCE" && at(j + 1) == "BY" {
                let col = match sig.get(j + 2).map(|&i| &tokens[i]) {
                    Some(Token::Word(w)) => w.value.clone(),
                    _ => return Err(bad("expected a column after SEQUENCE BY")),
                };
                j += 3;
                Some(col)
            } else {
                None
            };
            (Replace::Using { columns, sequence }, j)
        }
        "WHERE" => {
            // The condition runs to the query, which starts at a top-level SELECT or WITH.
            let mut depth = 0;
            let mut j = 2;
            while j < sig.len() {
                match &tokens[sig[j]] {
                    Token::LParen => depth += 1,
                    Token::RParen => depth -= 1,
                    _ if depth == 0 && matches!(at(j).as_str(), "SELECT" | "WITH") => break,
                    _ => {}
                }
                j += 1;
            }
            if j == 2 || j == sig.len() {
                return Err(bad("expected WHERE condition, then the query"));
            }
            (Replace::Where(text(2, j)), j)
        }
        _ => {
            return Err(bad(
                "expected REPLACE USING (columns) or REPLACE WHERE condition",
            ))
        }
    };
    if rest >= sig.len() {
        return Err(bad("the query is missing"));
    }
    Ok((Some(replace), text(rest, sig.len())))
}

impl SqlSession {
    /// What a run of a replace flow does to `target` with its `new` rows: the positions of the
    /// rows it removes, and the new rows it keeps (those of a key whose rows in `target` are
    /// newer by the sequence are left out).
    pub(super) fn replaced(
        &mut self,
        target: &str,
        replace: &Replace,
        new: &[RecordBatch],
        new_schema: &Arc<Schema>,
    ) -> Result<(Vec<u64>, Vec<RecordBatch>)> {
        // The table is streamed as each query reads it, as of one version.
        let version = self.store.source_latest_version(target)?;
        let old = SourceProvider::with(self.store.clone(), target, version, Positions::Shown)?;
        self.replace_in(Arc::new(old), replace, new, new_schema)
    }

    /// The new rows a replace flow's run keeps in an empty table (a full refresh's one run).
    pub(super) fn replaced_fresh(
        &mut self,
        replace: &Replace,
        new: &[RecordBatch],
        new_schema: &Arc<Schema>,
    ) -> Result<Vec<RecordBatch>> {
        let schema = with_position_column(new_schema);
        let empty = MemTable::try_new(schema, vec![Vec::new()]).map_err(df)?;
        Ok(self
            .replace_in(Arc::new(empty), replace, new, new_schema)?
            .1)
    }

    /// [`SqlSession::replaced`] over the rows of `old`, each with its position.
    fn replace_in(
        &mut self,
        old: Arc<dyn datafusion::catalog::TableProvider>,
        replace: &Replace,
        new: &[RecordBatch],
        new_schema: &Arc<Schema>,
    ) -> Result<(Vec<u64>, Vec<RecordBatch>)> {
        // The table, each row with its position, and the new rows, as scratch tables. The new
        // rows come first in each join: the side a join holds.
        let old = self.register_scratch("old", old)?;
        let fresh = self.register_scratch(
            "new",
            Arc::new(MemTable::try_new(new_schema.clone(), vec![new.to_vec()]).map_err(df)?),
        )?;
        let (old, fresh) = (quote_ident(&old), quote_ident(&fresh));
        let positions = |rows: RecordBatch| -> Vec<u64> {
            let p = rows.column(0).as_primitive::<UInt64Type>();
            p.values().to_vec()
        };
        match replace {
            Replace::Where(cond) => {
                let outside = self.rows_of(&format!(
                    "SELECT count(*) FROM {fresh} WHERE NOT coalesce(({cond}), FALSE)"
                ))?;
                let n = outside
                    .column(0)
                    .as_primitive::<arrow::datatypes::Int64Type>()
                    .value(0);
                if n > 0 {
                    return Err(QueryError::Invalid(format!(
                        "REPLACE WHERE {cond}: {n} new row(s) do not match the condition; nothing was written"
                    )));
                }
                let removed =
                    self.rows_of(&format!("SELECT {POSITION} FROM {old} WHERE {cond}"))?;
                Ok((positions(removed), new.to_vec()))
            }
            Replace::Using { columns, sequence } => {
                // The columns as the table spells them (names match in any case), quoted.
                let known = super::names::Names::of(
                    &new_schema
                        .fields()
                        .iter()
                        .map(|f| f.name().clone())
                        .collect::<Vec<_>>(),
                );
                let column = |c: &str| quote_ident(&known.spelling(c));
                let columns: Vec<String> = columns.iter().map(|c| column(c)).collect();
                let on = |a: &str, b: &str| {
                    columns
                        .iter()
                        .map(|c| format!("{a}.{c} IS NOT DISTINCT FROM {b}.{c}"))
                        .collect::<Vec<_>>()
                        .join(" AND ")
                };
                let keys = columns.join(", ");
                let Some(seq) = sequence.as_deref().map(column) else {
                    let removed = self.rows_of(&format!(
                        "SELECT o.{POSITION} FROM (SELECT DISTINCT {keys} FROM {fresh}) n JOIN {old} o ON {}",
                        on("o", "n")
                    ))?;
                    return Ok((positions(removed), new.to_vec()));
                };
                // A row without a sequence cannot be ordered against the others.
                let unordered =
                    self.rows_of(&format!("SELECT count(*) FROM {fresh} WHERE {seq} IS NULL"))?;
                let n = unordered
                    .column(0)
                    .as_primitive::<arrow::datatypes::Int64Type>()
                    .value(0);
                if n > 0 {
                    return Err(QueryError::Invalid(format!(
                        "REPLACE USING ... SEQUENCE BY {seq}: {n} new row(s) have no sequence (NULL); nothing was written"
                    )));
                }
                // Per key, the newest sequence of each side: the new rows of the newest sequence
                // win when it is at least the table's (several deliveries of a key in one run
                // are taken in sequence order: the last one stays).
                let newest = |t: &str| {
                    format!("(SELECT {keys}, max({seq}) AS __asof_newest FROM {t} GROUP BY {keys})")
                };
                let removed = self.rows_of(&format!(
                    "SELECT o.{POSITION} FROM {} n JOIN {old} o ON {} JOIN {} e ON {} \
                     WHERE n.__asof_newest >= e.__asof_newest",
                    newest(&fresh),
                    on("o", "n"),
                    newest(&old),
                    on("o", "e"),
                ))?;
                let kept = self.rows_of(&format!(
                    "SELECT n.* FROM {fresh} n JOIN {} nn ON {} LEFT JOIN {} e ON {} \
                     WHERE n.{seq} = nn.__asof_newest \
                     AND (e.__asof_newest IS NULL OR nn.__asof_newest >= e.__asof_newest)",
                    newest(&fresh),
                    on("n", "nn"),
                    newest(&old),
                    on("n", "e"),
                ))?;
                Ok((positions(removed), vec![kept]))
            }
        }
    }
}
