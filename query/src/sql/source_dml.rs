//! `DELETE FROM`, `UPDATE` and `MERGE INTO` on source tables (docs/SEMANTICS.md §2.6). Each is
//! turned into the positions of the rows it removes and the rows it appends (queries DataFusion
//! runs over the table with each row's position), committed as one statement by the store
//! ([`asof_storage::Store::begin_source_dml`]).

use std::sync::Arc;

use arrow::array::{Array, AsArray, RecordBatch, UInt64Array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, UInt64Type};
use asof_storage::SourceDmlOperation;
use datafusion::datasource::MemTable;
use sqlparser::ast::{
    AssignmentTarget, FromTable, MergeAction, MergeClauseKind, MergeInsertKind, ObjectName,
    Statement, TableFactor,
};
use sqlparser::dialect::DatabricksDialect;
use sqlparser::parser::Parser;

use super::names::Names;
use super::parse::quote_ident;
use super::{df, Output, SqlSession};
use crate::error::{QueryError, Result};

/// The column that carries each row's position while a statement runs.
pub(super) const POSITION: &str = "__asof_position";

/// Rows of a source table (of `schema`) with their positions, as a table with the column
/// [`POSITION`] after the table's own.
pub(super) fn with_positions(
    schema: &SchemaRef,
    positioned: Vec<asof_storage::PositionedRows>,
) -> Result<MemTable> {
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .chain([Field::new(POSITION, DataType::UInt64, false)])
        .collect();
    let with_positions: SchemaRef = Arc::new(Schema::new(fields));
    let batches = positioned
        .into_iter()
        .map(|p| {
            let mut cols = p.rows.columns().to_vec();
            cols.push(Arc::new(UInt64Array::from(p.positions)));
            RecordBatch::try_new(with_positions.clone(), cols)
        })
        .collect::<std::result::Result<Vec<_>, _>>()?;
    MemTable::try_new(with_positions, vec![batches]).map_err(df)
}

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

/// What a statement removes (positions) and appends (rows, possibly several batches).
struct Change {
    operation: SourceDmlOperation,
    removed: Vec<u64>,
    added: Vec<RecordBatch>,
}

impl SqlSession {
    /// Runs `DELETE`, `UPDATE` or `MERGE INTO` on source table `name`.
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
        // The table, each row with its position, under its own name for this statement.
        self.clear_scratch()?;
        self.register_all()?;
        let t = self.store.source_rows_positioned(name)?;
        let (schema, positioned) = (t.schema, t.rows);
        let table = with_positions(&schema, positioned)?;
        self.register_named(name, Arc::new(table))?;
        let change = match parsed.remove(0) {
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
                let rows =
                    self.rows_of(&format!("SELECT {POSITION} FROM {} WHERE {cond}", from[0]))?;
                Change {
                    operation: SourceDmlOperation::Delete,
                    removed: positions(&rows)?,
                    added: Vec::new(),
                }
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
                let rows = self.rows_of(&format!(
                    "SELECT {POSITION}, {} FROM {} WHERE {cond}",
                    source.output(&assigned, &qualifier),
                    u.table
                ))?;
                Change {
                    operation: SourceDmlOperation::Update,
                    removed: positions(&rows)?,
                    added: vec![without_position(&rows)?],
                }
            }
            Statement::Merge(m) => self.merge(&source, &m)?,
            other => {
                return Err(QueryError::Invalid(format!(
                    "`{}` is not a DML statement asof runs on a source table",
                    other.to_string().split_whitespace().next().unwrap_or("")
                )))
            }
        };
        let mut w =
            self.store
                .begin_source_dml(name, change.operation, change.removed.clone(), &text)?;
        for b in &change.added {
            w.push(b)?;
        }
        let added = w.rows();
        self.store.commit_write(w, None)?;
        let version = self
            .store
            .source_history(name)?
            .last()
            .map_or(0, |c| c.version);
        Ok(Output::Done(format!(
            "{name}: {} ({} row{} removed, {added} written; commit {version})",
            change.operation.name(),
            change.removed.len(),
            if change.removed.len() == 1 { "" } else { "s" },
        )))
    }

    /// What a `MERGE INTO` on a source does: each row matched by the source goes through the
    /// first `WHEN MATCHED` clause whose condition holds (`UPDATE SET`: removed and written
    /// anew; `DELETE`: removed); each source row that matches none through the first `WHEN NOT
    /// MATCHED` clause (`INSERT`); each row no source row matches through the first `WHEN NOT
    /// MATCHED BY SOURCE` clause.
    fn merge(&mut self, source: &Source, m: &sqlparser::ast::Merge) -> Result<Change> {
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
                "SELECT count(*) FROM (SELECT {pos} FROM {t_rel} JOIN {s_rel} ON {on} GROUP BY {pos} HAVING count(*) > 1)"
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
        let mut removed = Vec::new();
        let mut added = Vec::new();
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
                (MergeClauseKind::Matched, _) => Some((
                    0,
                    format!("FROM {t_rel} JOIN {s_rel} ON {on} WHERE {pred}"),
                )),
                (MergeClauseKind::NotMatchedBySource, _) => Some((
                    2,
                    format!(
                        "FROM {t_rel} WHERE NOT EXISTS (SELECT 1 FROM {s_rel} WHERE {on}) AND {pred}"
                    ),
                )),
                _ => None,
            };
            if let Some((kind, from)) = on_rows {
                let from = format!("{from}{}", not_earlier(&earlier[kind]));
                match &clause.action {
                    MergeAction::Update(u) => {
                        let assigned = assignments(source, &u.assignments)?;
                        let rows = self.rows_of(&format!(
                            "SELECT {pos} AS {POSITION}, {} {from}",
                            source.output(&assigned, &t_ref)
                        ))?;
                        removed.extend(positions(&rows)?);
                        added.push(without_position(&rows)?);
                    }
                    MergeAction::Delete { .. } => {
                        let rows = self.rows_of(&format!("SELECT {pos} AS {POSITION} {from}"))?;
                        removed.extend(positions(&rows)?);
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
            added.push(self.rows_of(&format!("SELECT {select} {not_matched}"))?);
            earlier[1].push(pred);
        }
        removed.sort_unstable();
        removed.dedup();
        Ok(Change {
            operation: SourceDmlOperation::Merge,
            removed,
            added,
        })
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
