//! `DELETE FROM`, `UPDATE` and `MERGE INTO` on source tables (docs/SEMANTICS.md §2.6). Each is
//! turned into the positions of the rows it removes and the rows it appends (queries DataFusion
//! runs over the table with each row's position), committed as one statement by the store
//! ([`asof_storage::Store::begin_source_dml`]).

use std::sync::Arc;

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::UInt64Type;
use asof_storage::{SourceDmlOperation, SourceWrite};
use sqlparser::ast::{
    AssignmentTarget, FromTable, MergeAction, MergeClauseKind, MergeInsertKind, ObjectName,
    Statement, TableFactor,
};
use sqlparser::dialect::DatabricksDialect;
use sqlparser::parser::Parser;

use super::names::Names;
use super::parse::quote_ident;
use super::provider::{Positions, SourceProvider, POSITION};
use super::{Output, SqlSession};
use crate::error::{QueryError, Result};

/// A source table as its DML sees it.
struct Source {
    name: String,
    /// Its columns, in order.
    columns: Vec<String>,
    /// The columns the statement may give values: not generated.
    writable: Vec<String>,
}

impl Source {
    /// Column `c` in any case, as the table spells it, if it may be given a value.
    fn writable(&self, c: &str) -> Result<String> {
        let spelled = Names::of(&self.columns).spelling(c);
        if self.writable.contains(&spelled) {
            Ok(spelled)
        } else if self.columns.contains(&spelled) {
            Err(QueryError::Invalid(format!(
                "`{spelled}` of `{}` is generated: it cannot be set",
                self.name
            )))
        } else {
            Err(QueryError::Invalid(format!(
                "`{}` has no column `{c}`",
                self.name
            )))
        }
    }

    /// The select list of rows written: each writable column, assigned or as it is (read from
    /// the table `qualifier` names).
    fn output(&self, assigned: &[(String, String)], qualifier: &str) -> String {
        self.writable
            .iter()
            .map(|c| match assigned.iter().find(|(a, _)| a == c) {
                Some((_, e)) => format!("({e}) AS {}", quote_ident(c)),
                None => format!(
                    "{}.{} AS {}",
                    quote_ident(qualifier),
                    quote_ident(c),
                    quote_ident(c)
                ),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The last part of a name (`t.c` is `c`).
fn last_name(name: &ObjectName) -> String {
    name.0
        .last()
        .and_then(|p| p.as_ident())
        .map_or_else(|| name.to_string(), |i| i.value.clone())
}

/// What each row a statement's query yields is to its write ([`SqlSession::stream_into`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Yields {
    /// A position (the only column): the row there is removed.
    Positions,
    /// A position (the first column), then a row written in place of the one there.
    Replacements,
    /// A row written.
    Rows,
}

impl SqlSession {
    /// Runs `DELETE`, `UPDATE` or `MERGE INTO` on source table `name`. Its queries stream the
    /// positions they remove and the rows they write into one write, committed once they ran:
    /// nothing of the table is held in memory.
    pub(super) fn source_dml(&mut self, stmt: &super::parse::Stmt, name: &str) -> Result<Output> {
        let text: String = stmt
            .tokens
            .iter()
            .map(|t| super::parse::sql_text(&t.token))
            .collect::<String>()
            .trim()
            .to_string();
        let mut parsed = Parser::parse_sql(&DatabricksDialect {}, &text)
            .map_err(|e| QueryError::Invalid(format!("{e}")))?;
        if parsed.len() != 1 {
            return Err(QueryError::Invalid("expected one statement".into()));
        }
        let statement = parsed.remove(0);
        let operation = match &statement {
            Statement::Delete(_) => SourceDmlOperation::Delete,
            Statement::Update(_) => SourceDmlOperation::Update,
            Statement::Merge(_) => SourceDmlOperation::Merge,
            other => {
                return Err(QueryError::Invalid(format!(
                    "`{}` is not a DML statement asof runs on a source table",
                    other.to_string().split_whitespace().next().unwrap_or("")
                )))
            }
        };
        self.refuse_if_snapshots(name, "DELETE, UPDATE and MERGE")?;
        let generated = self.store.source_generated(name)?;
        let columns: Vec<String> = self
            .store
            .source_schema(name)?
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        let source = Source {
            name: name.to_string(),
            writable: columns
                .iter()
                .filter(|c| !generated.iter().any(|g| &g.column == *c))
                .cloned()
                .collect(),
            columns,
        };
        // The table, each row with its position, under its own name for this statement: every
        // query of the statement reads it as of the same version.
        self.clear_scratch()?;
        self.register_all()?;
        let version = self.store.source_latest_version(name)?;
        let table = SourceProvider::with(self.store.clone(), name, version, Positions::Shown)?;
        self.register_named(name, Arc::new(table))?;
        let mut w = self
            .store
            .begin_source_dml(name, operation, Vec::new(), &text)?;
        match statement {
            Statement::Delete(d) => {
                let from = match &d.from {
                    FromTable::WithFromKeyword(t) | FromTable::WithoutKeyword(t) => t,
                };
                if from.len() != 1 || d.using.is_some() {
                    return Err(QueryError::Invalid(
                        "DELETE FROM takes one table: use MERGE INTO to delete by another table"
                            .into(),
                    ));
                }
                let cond = d
                    .selection
                    .as_ref()
                    .map_or_else(|| "TRUE".to_string(), |s| format!("({s})"));
                let sql = format!("SELECT {POSITION} FROM {} WHERE {cond}", from[0]);
                self.stream_into(&sql, &mut w, Yields::Positions)?;
            }
            Statement::Update(u) => {
                if u.from.is_some() {
                    return Err(QueryError::Invalid(
                        "UPDATE ... FROM is not supported: use MERGE INTO".into(),
                    ));
                }
                // Without an alias, the table's own name as it is kept (any spelling finds it).
                let own = super::namespace::last_part(&source.name).to_string();
                let qualifier = match &u.table.relation {
                    TableFactor::Table { alias, .. } => alias
                        .as_ref()
                        .map_or_else(|| own.clone(), |a| a.name.value.clone()),
                    other => {
                        return Err(QueryError::Invalid(format!(
                            "UPDATE needs a table, not `{other}`"
                        )))
                    }
                };
                let assigned = assignments(&source, &u.assignments)?;
                let cond = u
                    .selection
                    .as_ref()
                    .map_or_else(|| "TRUE".to_string(), |s| format!("({s})"));
                let sql = format!(
                    "SELECT {POSITION}, {} FROM {} WHERE {cond}",
                    source.output(&assigned, &qualifier),
                    u.table
                );
                self.stream_into(&sql, &mut w, Yields::Replacements)?;
            }
            Statement::Merge(m) => self.merge(&source, &m, &mut w)?,
            _ => unreachable!("the operation was matched above"),
        }
        let (removed, added) = (w.removed(), w.rows());
        self.store.commit_write(w, None)?;
        let version = self
            .store
            .source_latest_version(name)?
            .map_or_else(String::new, |v| format!("; commit {v}"));
        Ok(Output::Done(format!(
            "{name}: {} ({removed} row{} removed, {added} written{version})",
            operation.name(),
            if removed == 1 { "" } else { "s" },
        )))
    }

    /// Runs `sql`, a query, and gives `w` each batch it yields as `yields` says.
    fn stream_into(&mut self, sql: &str, w: &mut SourceWrite, yields: Yields) -> Result<()> {
        let stmts = super::parse::split(sql)?;
        let stmt = stmts
            .first()
            .ok_or_else(|| QueryError::Invalid("expected a query".into()))?;
        let (_, mut stream) = self.query_stream(stmt)?;
        while let Some(rows) = self.next_batch(&mut stream)? {
            match yields {
                Yields::Positions => w.remove(&positions(&rows)?)?,
                Yields::Replacements => {
                    w.remove(&positions(&rows)?)?;
                    w.push(&without_position(&rows)?)?;
                }
                Yields::Rows => w.push(&rows)?,
            }
        }
        Ok(())
    }

    /// What a `MERGE INTO` on a source does: each row matched by the source goes through the
    /// first `WHEN MATCHED` clause whose condition holds (`UPDATE SET`: removed and written
    /// anew; `DELETE`: removed); each source row that matches none through the first `WHEN NOT
    /// MATCHED` clause (`INSERT`); each row no source row matches through the first `WHEN NOT
    /// MATCHED BY SOURCE` clause.
    fn merge(
        &mut self,
        source: &Source,
        m: &sqlparser::ast::Merge,
        w: &mut SourceWrite,
    ) -> Result<()> {
        let own = super::namespace::last_part(&source.name).to_string();
        let (t_ref, t_rel) = match &m.table {
            TableFactor::Table { alias, .. } => (
                alias.as_ref().map_or(own, |a| a.name.value.clone()),
                m.table.to_string(),
            ),
            other => {
                return Err(QueryError::Invalid(format!(
                    "MERGE INTO needs a table, not `{other}`"
                )))
            }
        };
        let s_rel = m.source.to_string();
        let on = m.on.to_string();
        let pos = format!("{}.{POSITION}", quote_ident(&t_ref));
        // A row matched by two source rows would be changed twice: refuse, as Delta does.
        // (Only when a WHEN MATCHED clause changes matched rows.)
        let changes_matched = m
            .clauses
            .iter()
            .any(|c| c.clause_kind == MergeClauseKind::Matched);
        let twice = if changes_matched {
            self.rows_of(&format!(
                "SELECT count(*) FROM (SELECT {pos} FROM {s_rel} JOIN {t_rel} ON {on} GROUP BY {pos} HAVING count(*) > 1)"
            ))?
            .column(0)
            .as_primitive::<arrow::datatypes::Int64Type>()
            .value(0)
        } else {
            0
        };
        if twice > 0 {
            return Err(QueryError::Invalid(format!(
                "MERGE INTO {}: {twice} row{} match more than one source row; nothing was changed",
                source.name,
                if twice == 1 { "" } else { "s" }
            )));
        }
        let mut earlier = [Vec::<String>::new(), Vec::new(), Vec::new()];
        for clause in &m.clauses {
            let pred = clause
                .predicate
                .as_ref()
                .map_or_else(|| "TRUE".to_string(), |p| format!("({p})"));
            let not_earlier = |earlier: &[String]| {
                earlier
                    .iter()
                    .map(|p| format!(" AND NOT coalesce({p}, FALSE)"))
                    .collect::<String>()
            };
            let on_rows = match (&clause.clause_kind, &clause.action) {
                (MergeClauseKind::Matched, _) => {
                    Some((0, format!("FROM {s_rel} JOIN {t_rel} ON {on} WHERE {pred}")))
                }
                (MergeClauseKind::NotMatchedBySource, _) => Some((
                    2,
                    format!("FROM {s_rel} RIGHT ANTI JOIN {t_rel} ON {on} WHERE {pred}"),
                )),
                _ => None,
            };
            if let Some((kind, from)) = on_rows {
                let from = format!("{from}{}", not_earlier(&earlier[kind]));
                match &clause.action {
                    MergeAction::Update(u) => {
                        let assigned = assignments(source, &u.assignments)?;
                        let sql = format!(
                            "SELECT {pos} AS {POSITION}, {} {from}",
                            source.output(&assigned, &t_ref)
                        );
                        self.stream_into(&sql, w, Yields::Replacements)?;
                    }
                    MergeAction::Delete { .. } => {
                        let sql = format!("SELECT {pos} AS {POSITION} {from}");
                        self.stream_into(&sql, w, Yields::Positions)?;
                    }
                    MergeAction::Insert(_) => {
                        return Err(QueryError::Invalid(
                            "WHEN MATCHED takes UPDATE or DELETE, not INSERT".into(),
                        ))
                    }
                }
                earlier[kind].push(pred);
                continue;
            }
            let MergeAction::Insert(i) = &clause.action else {
                return Err(QueryError::Invalid("WHEN NOT MATCHED takes INSERT".into()));
            };
            let not_matched = format!(
                "FROM {s_rel} WHERE NOT EXISTS (SELECT 1 FROM {t_rel} WHERE {on}) AND {pred}{}",
                not_earlier(&earlier[1])
            );
            let select = match &i.kind {
                MergeInsertKind::Values(v) => {
                    let [row] = &v.rows[..] else {
                        return Err(QueryError::Invalid(
                            "WHEN NOT MATCHED THEN INSERT takes one row of VALUES".into(),
                        ));
                    };
                    let named: Vec<String> = if i.columns.is_empty() {
                        source.writable.clone()
                    } else {
                        i.columns
                            .iter()
                            .map(|c| source.writable(&last_name(c)))
                            .collect::<Result<_>>()?
                    };
                    if row.content.len() != named.len() {
                        return Err(QueryError::Invalid(format!(
                            "MERGE INSERT gives {} values for {} columns",
                            row.content.len(),
                            named.len()
                        )));
                    }
                    row.content
                        .iter()
                        .zip(&named)
                        .map(|(e, c)| format!("{e} AS {}", quote_ident(c)))
                        .collect::<Vec<_>>()
                        .join(", ")
                }
                // `INSERT *`: the source's columns of the table's names.
                _ => source
                    .writable
                    .iter()
                    .map(|c| format!("{} AS {}", quote_ident(c), quote_ident(c)))
                    .collect::<Vec<_>>()
                    .join(", "),
            };
            self.stream_into(&format!("SELECT {select} {not_matched}"), w, Yields::Rows)?;
            earlier[1].push(pred);
        }
        Ok(())
    }
}

/// `SET c = e, ...` as (column, SQL expression).
fn assignments(
    source: &Source,
    list: &[sqlparser::ast::Assignment],
) -> Result<Vec<(String, String)>> {
    let mut out: Vec<(String, String)> = Vec::new();
    for a in list {
        let AssignmentTarget::ColumnName(name) = &a.target else {
            return Err(QueryError::Invalid(
                "SET (a, b) = ... is not supported: set each column".into(),
            ));
        };
        let c = source.writable(&last_name(name))?;
        if out.iter().any(|(o, _)| *o == c) {
            return Err(QueryError::Invalid(format!("`{c}` is set twice")));
        }
        out.push((c, a.value.to_string()));
    }
    Ok(out)
}

/// The positions in the first column of `rows`.
fn positions(rows: &RecordBatch) -> Result<Vec<u64>> {
    let col = rows.column(0);
    let p = col
        .as_primitive_opt::<UInt64Type>()
        .ok_or_else(|| QueryError::Invalid("row positions of another type".into()))?;
    Ok((0..p.len())
        .filter(|&i| p.is_valid(i))
        .map(|i| p.value(i))
        .collect())
}

/// `rows` without its first column (the positions).
fn without_position(rows: &RecordBatch) -> Result<RecordBatch> {
    let mut rows = rows.clone();
    rows.remove_column(0);
    Ok(rows)
}
