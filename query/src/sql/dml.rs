//! DML on target tables: `INSERT INTO`, `UPDATE`, `DELETE FROM` and `MERGE INTO`, with SQL:2011's
//! `FOR PORTION OF BUSINESS_TIME FROM a TO b` on `UPDATE` and `DELETE`. Each statement is turned
//! into the rows it writes or removes (queries DataFusion runs over the table), which the store
//! applies as one commit ([`Store::apply_dml`]; docs/SEMANTICS.md §2.4).

use std::sync::Arc;

use arrow::array::{new_null_array, ArrayRef, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema};
use asof_storage::{Dml, DmlOperation, Edit, StoredAs, TableSchema};
use sqlparser::ast::{
    AssignmentTarget, Expr, FromTable, MergeAction, MergeClauseKind, MergeInsertKind, ObjectName,
    Statement, TableFactor,
};
use sqlparser::dialect::DatabricksDialect;
use sqlparser::parser::Parser;
use sqlparser::tokenizer::Token;

use super::parse::{quote_ident, split, upper, Stmt};
use super::{Output, SqlSession};
use crate::error::{QueryError, Result};

const START: &str = "__START_AT";
const END: &str = "__END_AT";
const SYSTEM_COLUMNS: [&str; 2] = ["__SYSTEM_START_AT", "__SYSTEM_END_AT"];

/// `FOR PORTION OF BUSINESS_TIME FROM a TO b`: the range, as SQL expressions.
struct Portion {
    from: String,
    to: String,
}

/// A target table as its DML sees it.
struct Target {
    name: String,
    schema: TableSchema,
    /// Its generated columns: the store computes them, a statement does not set them.
    generated: Vec<String>,
}

impl Target {
    fn history(&self) -> bool {
        self.schema.mode != StoredAs::Scd1
    }

    fn columns(&self) -> impl Iterator<Item = &str> {
        self.schema.columns.iter().map(|(n, _)| n.as_str())
    }

    /// The condition that selects the rows a statement may change: on a bitemporal table, what
    /// is believed now (rows of the table `qualifier` names, when given).
    fn current(&self, qualifier: Option<&str>) -> String {
        match (self.schema.mode, qualifier) {
            (StoredAs::Bitemporal, Some(q)) => {
                format!("{}.__SYSTEM_END_AT IS NULL", quote_ident(q))
            }
            (StoredAs::Bitemporal, None) => "__SYSTEM_END_AT IS NULL".to_string(),
            _ => "TRUE".to_string(),
        }
    }

    fn is_key(&self, column: &str) -> bool {
        self.schema
            .key_columns
            .iter()
            .any(|&k| self.schema.columns[k].0.eq_ignore_ascii_case(column))
    }

    /// The output column named `column` in any case, as the table spells it.
    fn column(&self, column: &str) -> Option<&str> {
        self.columns().find(|c| c.eq_ignore_ascii_case(column))
    }
}

/// The last part of a column reference (`t.c` is `c`).
fn column_name(name: &ObjectName) -> String {
    name.0
        .last()
        .and_then(|p| p.as_ident())
        .map_or_else(|| name.to_string(), |i| i.value.clone())
}

impl SqlSession {
    /// Runs a DML statement on target table `name`.
    pub(super) fn dml(&mut self, stmt: &Stmt, name: &str) -> Result<Output> {
        let text = stmt
            .tokens
            .iter()
            .map(|t| super::parse::sql_text(&t.token))
            .collect::<String>()
            .trim()
            .to_string();
        let (plain, portion) = strip_portion(stmt)?;
        let mut parsed = Parser::parse_sql(&DatabricksDialect {}, &plain)
            .map_err(|e| QueryError::Invalid(format!("{e}")))?;
        if parsed.len() != 1 {
            return Err(QueryError::Invalid("expected one statement".into()));
        }
        let target = Target {
            name: name.to_string(),
            schema: self.store.schema(name)?,
            generated: self
                .store
                .table_generated(name)?
                .into_iter()
                .map(|g| g.column)
                .collect(),
        };
        if portion.is_some() && !target.history() {
            return Err(QueryError::Invalid(format!(
                "FOR PORTION OF BUSINESS_TIME needs a table with business history; `{name}` is SCD TYPE 1"
            )));
        }
        self.clear_scratch()?;
        self.register_all()?;
        let (operation, rows, edits) = match parsed.remove(0) {
            Statement::Update(u) => {
                if u.from.is_some() {
                    return Err(QueryError::Invalid(
                        "UPDATE ... FROM is not supported: use MERGE INTO".into(),
                    ));
                }
                let assignments = assignments(&target, &u.assignments)?;
                let relation = u.table.to_string();
                let sql = select_rows(
                    &target,
                    &relation,
                    &assignments,
                    u.selection.as_ref(),
                    portion.as_ref(),
                );
                let rows = self.rows_of(&sql)?;
                let n = rows.num_rows();
                (DmlOperation::Update, rows, vec![Edit::Write; n])
            }
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
                let relation = from[0].to_string();
                let sql = select_rows(
                    &target,
                    &relation,
                    &[],
                    d.selection.as_ref(),
                    portion.as_ref(),
                );
                let rows = self.rows_of(&sql)?;
                let n = rows.num_rows();
                (DmlOperation::Delete, rows, vec![Edit::Remove; n])
            }
            Statement::Insert(i) => {
                if portion.is_some() {
                    return Err(QueryError::Invalid("INSERT has no FOR PORTION OF".into()));
                }
                let source = i
                    .source
                    .ok_or_else(|| QueryError::Invalid("INSERT needs VALUES or a query".into()))?;
                let named: Vec<String> = i.columns.iter().map(column_name).collect();
                let columns = insert_columns(&target, &named)?;
                let got = self.rows_of(&source.to_string())?;
                if got.num_columns() != columns.len() {
                    return Err(QueryError::Invalid(format!(
                        "INSERT gives {} values per row for {} columns",
                        got.num_columns(),
                        columns.len()
                    )));
                }
                let rows = with_names(&target, &got, &columns)?;
                let n = rows.num_rows();
                (DmlOperation::Insert, rows, vec![Edit::Insert; n])
            }
            Statement::Merge(m) => {
                if portion.is_some() {
                    return Err(QueryError::Invalid("MERGE has no FOR PORTION OF".into()));
                }
                let (rows, edits) = self.merge_rows(&target, &m)?;
                (DmlOperation::Merge, rows, edits)
            }
            other => {
                return Err(QueryError::Invalid(format!(
                    "`{}` is not a DML statement asof runs on a table",
                    other.to_string().split_whitespace().next().unwrap_or("")
                )))
            }
        };
        let n = rows.num_rows();
        let commit = self.store.apply_dml(
            name,
            Dml {
                operation,
                rows: &rows,
                edits: &edits,
                text: &text,
            },
        )?;
        let what = match operation {
            DmlOperation::Insert => "inserted",
            DmlOperation::Update => "updated",
            DmlOperation::Delete => "deleted",
            _ => "merged",
        };
        let mut lines = vec![format!(
            "{name}: {n} row{} {what} (commit {}: {} rows upserted, {} deleted)",
            if n == 1 { "" } else { "s" },
            commit.version,
            commit.metrics.num_upserted_rows,
            commit.metrics.num_deleted_rows,
        )];
        lines.extend(self.erasures_after(name, commit.version)?);
        Ok(Output::Done(lines.join("\n")))
    }

    /// Runs `sql`, a query, and gathers its rows into one batch.
    pub(super) fn rows_of(&mut self, sql: &str) -> Result<RecordBatch> {
        let stmts = split(sql)?;
        let stmt = stmts
            .first()
            .ok_or_else(|| QueryError::Invalid("expected a query".into()))?;
        let (schema, batches) = self.query(stmt)?;
        Ok(arrow::compute::concat_batches(&schema, &batches)?)
    }

    /// The rows a `MERGE INTO` writes and removes: each target row matched by the source goes
    /// through the first `WHEN MATCHED` clause whose condition holds; each source row that
    /// matches none through the first `WHEN NOT MATCHED` clause whose condition holds.
    fn merge_rows(
        &mut self,
        target: &Target,
        m: &sqlparser::ast::Merge,
    ) -> Result<(RecordBatch, Vec<Edit>)> {
        let (t_ref, t_rel) = match &m.table {
            TableFactor::Table { name, alias, .. } => (
                alias
                    .as_ref()
                    .map_or_else(|| column_name(name), |a| a.name.value.clone()),
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
        let current = target.current(Some(&t_ref));
        // A target row matched by two source rows would be changed twice: refuse, as Delta does.
        let mut keys: Vec<String> = target
            .schema
            .key_columns
            .iter()
            .map(|&k| {
                format!(
                    "{}.{}",
                    quote_ident(&t_ref),
                    quote_ident(&target.schema.columns[k].0)
                )
            })
            .collect();
        if target.history() {
            keys.push(format!("{}.{START}", quote_ident(&t_ref)));
        }
        let keys = keys.join(", ");
        let twice = self.rows_of(&format!(
            "SELECT count(*) FROM (SELECT {keys} FROM {s_rel} JOIN {t_rel} ON {on} WHERE {current} GROUP BY {keys} HAVING count(*) > 1)"
        ))?;
        let twice =
            arrow::array::AsArray::as_primitive::<arrow::datatypes::Int64Type>(twice.column(0))
                .value(0);
        if twice > 0 {
            return Err(QueryError::Invalid(format!(
                "MERGE INTO {}: {twice} target row{} match more than one source row; nothing was changed",
                target.name,
                if twice == 1 { "" } else { "s" }
            )));
        }
        let mut parts: Vec<RecordBatch> = Vec::new();
        let mut edits = Vec::new();
        let mut earlier_matched: Vec<String> = Vec::new();
        let mut earlier_unmatched: Vec<String> = Vec::new();
        let mut earlier_by_source: Vec<String> = Vec::new();
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
            match (&clause.clause_kind, &clause.action) {
                (MergeClauseKind::Matched, action) => {
                    let (assigned, edit) = target_action(target, action, "WHEN MATCHED")?;
                    let cols = output_list(target, &assigned, Some(&t_ref), None);
                    let sql = format!(
                        "SELECT {cols} FROM {s_rel} JOIN {t_rel} ON {on} WHERE {current} AND {pred}{}",
                        not_earlier(&earlier_matched)
                    );
                    let rows = self.rows_of(&sql)?;
                    edits.extend(std::iter::repeat_n(edit, rows.num_rows()));
                    parts.push(rows);
                    earlier_matched.push(pred);
                }
                (
                    MergeClauseKind::NotMatched | MergeClauseKind::NotMatchedByTarget,
                    MergeAction::Insert(i),
                ) => {
                    let MergeInsertKind::Values(v) = &i.kind else {
                        return Err(QueryError::Invalid(
                            "WHEN NOT MATCHED THEN INSERT needs VALUES (...)".into(),
                        ));
                    };
                    let [row] = &v.rows[..] else {
                        return Err(QueryError::Invalid(
                            "WHEN NOT MATCHED THEN INSERT takes one row of VALUES".into(),
                        ));
                    };
                    let named: Vec<String> = i.columns.iter().map(column_name).collect();
                    let columns = insert_columns(target, &named)?;
                    if row.content.len() != columns.len() {
                        return Err(QueryError::Invalid(format!(
                            "MERGE INSERT gives {} values for {} columns",
                            row.content.len(),
                            columns.len()
                        )));
                    }
                    let select = row
                        .content
                        .iter()
                        .zip(&columns)
                        .map(|(e, c)| format!("{e} AS {}", quote_ident(c)))
                        .collect::<Vec<_>>()
                        .join(", ");
                    let sql = format!(
                        "SELECT {select} FROM {s_rel} WHERE NOT EXISTS (SELECT 1 FROM {t_rel} WHERE {on} AND {current}) AND {pred}{}",
                        not_earlier(&earlier_unmatched)
                    );
                    let got = self.rows_of(&sql)?;
                    let rows = with_names(target, &got, &columns)?;
                    edits.extend(std::iter::repeat_n(Edit::Insert, rows.num_rows()));
                    parts.push(rows);
                    earlier_unmatched.push(pred);
                }
                // Target rows no source row matches: updated (from the target's own columns) or
                // deleted, by the first such clause whose condition holds.
                (MergeClauseKind::NotMatchedBySource, action) => {
                    let (assigned, edit) =
                        target_action(target, action, "WHEN NOT MATCHED BY SOURCE")?;
                    let cols = output_list(target, &assigned, Some(&t_ref), None);
                    let sql = format!(
                        "SELECT {cols} FROM {s_rel} RIGHT ANTI JOIN {t_rel} ON {on} WHERE {current} AND {pred}{}",
                        not_earlier(&earlier_by_source)
                    );
                    let rows = self.rows_of(&sql)?;
                    edits.extend(std::iter::repeat_n(edit, rows.num_rows()));
                    parts.push(rows);
                    earlier_by_source.push(pred);
                }
                _ => return Err(QueryError::Invalid("WHEN NOT MATCHED takes INSERT".into())),
            }
        }
        let schema = row_schema(target);
        let parts: Vec<RecordBatch> = parts
            .iter()
            .map(|b| conform(b, &schema))
            .collect::<Result<_>>()?;
        let rows = arrow::compute::concat_batches(&schema, &parts)?;
        Ok((rows, edits))
    }
}

/// What a MERGE clause on target rows (`clause`) does to them: `UPDATE SET ...` (its
/// assignments) or `DELETE`.
fn target_action(
    target: &Target,
    action: &MergeAction,
    clause: &str,
) -> Result<(Vec<(String, String)>, Edit)> {
    match action {
        MergeAction::Update(u) => Ok((assignments(target, &u.assignments)?, Edit::Write)),
        MergeAction::Delete { .. } => Ok((Vec::new(), Edit::Remove)),
        MergeAction::Insert(_) => Err(QueryError::Invalid(format!(
            "{clause} takes UPDATE or DELETE, not INSERT"
        ))),
    }
}

/// `SET c = e, ...` as (output column, SQL expression); keys and the temporal columns are not
/// set this way.
fn assignments(
    target: &Target,
    list: &[sqlparser::ast::Assignment],
) -> Result<Vec<(String, String)>> {
    let mut out: Vec<(String, String)> = Vec::new();
    for a in list {
        let AssignmentTarget::ColumnName(name) = &a.target else {
            return Err(QueryError::Invalid(
                "SET (a, b) = ... is not supported: set each column".into(),
            ));
        };
        let c = column_name(name);
        let Some(col) = target.column(&c) else {
            if c.eq_ignore_ascii_case(START)
                || c.eq_ignore_ascii_case(END)
                || SYSTEM_COLUMNS.iter().any(|s| s.eq_ignore_ascii_case(&c))
            {
                return Err(QueryError::Invalid(format!(
                    "UPDATE cannot set `{c}`: business ranges change with FOR PORTION OF BUSINESS_TIME, and system time is the store's"
                )));
            }
            return Err(QueryError::Invalid(format!(
                "`{}` has no column `{c}`",
                target.name
            )));
        };
        if target.generated.iter().any(|g| g == col) {
            return Err(QueryError::Invalid(format!(
                "`{col}` of `{}` is generated: it cannot be set",
                target.name
            )));
        }
        if target.is_key(col) {
            return Err(QueryError::Invalid(format!(
                "UPDATE cannot set `{col}`, a key of `{}`: delete the row and insert it under its new key",
                target.name
            )));
        }
        if out.iter().any(|(o, _)| o == col) {
            return Err(QueryError::Invalid(format!("`{col}` is set twice")));
        }
        out.push((col.to_string(), a.value.to_string()));
    }
    Ok(out)
}

/// The select list of the rows a statement writes: each output column (assigned or as it is),
/// then the business range (clipped to `portion`).
fn output_list(
    target: &Target,
    assigned: &[(String, String)],
    qualifier: Option<&str>,
    portion: Option<&Portion>,
) -> String {
    let q = |c: &str| match qualifier {
        Some(t) => format!("{}.{}", quote_ident(t), quote_ident(c)),
        None => quote_ident(c),
    };
    let mut list: Vec<String> = target
        .columns()
        .map(|c| match assigned.iter().find(|(a, _)| a == c) {
            Some((_, e)) => format!("({e}) AS {}", quote_ident(c)),
            None => format!("{} AS {}", q(c), quote_ident(c)),
        })
        .collect();
    if target.history() {
        let (s, e) = (q(START), q(END));
        match portion {
            Some(Portion { from, to }) => {
                list.push(format!(
                    "CASE WHEN {s} < ({from}) THEN ({from}) ELSE {s} END AS {START}"
                ));
                list.push(format!(
                    "CASE WHEN {e} IS NULL OR {e} > ({to}) THEN ({to}) ELSE {e} END AS {END}"
                ));
            }
            None => {
                list.push(format!("{s} AS {START}"));
                list.push(format!("{e} AS {END}"));
            }
        }
    }
    list.join(", ")
}

/// The query of the rows an `UPDATE` or `DELETE` changes.
fn select_rows(
    target: &Target,
    relation: &str,
    assigned: &[(String, String)],
    selection: Option<&Expr>,
    portion: Option<&Portion>,
) -> String {
    let mut conditions = vec![target.current(None)];
    if let Some(s) = selection {
        conditions.push(format!("({s})"));
    }
    if let Some(Portion { from, to }) = portion {
        conditions.push(format!(
            "{START} < ({to}) AND ({END} IS NULL OR {END} > ({from})) AND ({from}) < ({to})"
        ));
    }
    format!(
        "SELECT {} FROM {relation} WHERE {}",
        output_list(target, assigned, None, portion),
        conditions.join(" AND ")
    )
}

/// The columns an `INSERT` names (all output columns, then the business range, when it names
/// none), spelled as the table has them.
fn insert_columns(target: &Target, named: &[String]) -> Result<Vec<String>> {
    if named.is_empty() {
        let mut all: Vec<String> = target
            .columns()
            .filter(|c| !target.generated.iter().any(|g| g == c))
            .map(str::to_string)
            .collect();
        if target.history() {
            all.extend([START.to_string(), END.to_string()]);
        }
        return Ok(all);
    }
    named
        .iter()
        .map(|n| {
            if let Some(c) = target.column(n) {
                if target.generated.iter().any(|g| g == c) {
                    return Err(QueryError::Invalid(format!(
                        "`{c}` of `{}` is generated: INSERT cannot give it a value",
                        target.name
                    )));
                }
                return Ok(c.to_string());
            }
            if target.history() {
                for t in [START, END] {
                    if n.eq_ignore_ascii_case(t) {
                        return Ok(t.to_string());
                    }
                }
            }
            Err(QueryError::Invalid(format!(
                "`{}` has no column `{n}` that INSERT can write{}",
                target.name,
                if SYSTEM_COLUMNS.iter().any(|s| s.eq_ignore_ascii_case(n)) {
                    " (system time is the store's: the commit's)"
                } else {
                    ""
                }
            )))
        })
        .collect()
}

/// The columns of the rows a statement gives the store.
fn row_schema(target: &Target) -> Arc<Schema> {
    let mut fields: Vec<Field> = target
        .schema
        .columns
        .iter()
        .map(|(n, t)| Field::new(n, t.to_arrow(), true))
        .collect();
    if target.history() {
        let seq = crate::arrow_conv::sequence_type(&target.schema.sequence);
        fields.push(Field::new(START, seq.clone(), true));
        fields.push(Field::new(END, seq, true));
    }
    Arc::new(Schema::new(fields))
}

/// `batch`'s columns under `names` (by position), with NULL for the output columns it does not
/// give.
fn with_names(target: &Target, batch: &RecordBatch, names: &[String]) -> Result<RecordBatch> {
    let schema = row_schema(target);
    let mut columns: Vec<ArrayRef> = Vec::new();
    for f in schema.fields() {
        let given = names.iter().position(|n| n == f.name());
        columns.push(match given {
            Some(i) => batch.column(i).clone(),
            None => new_null_array(&DataType::Null, batch.num_rows()),
        });
    }
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .zip(&columns)
        .map(|(f, c)| Field::new(f.name(), c.data_type().clone(), true))
        .collect();
    Ok(RecordBatch::try_new_with_options(
        Arc::new(Schema::new(fields)),
        columns,
        &arrow::array::RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
    )?)
}

/// `batch` cast to `schema` (column by column, by position).
fn conform(batch: &RecordBatch, schema: &Arc<Schema>) -> Result<RecordBatch> {
    let columns: Vec<ArrayRef> = batch
        .columns()
        .iter()
        .zip(schema.fields())
        .map(|(c, f)| {
            // A value that does not convert is an error, never a silent NULL.
            let strict = arrow::compute::CastOptions {
                safe: false,
                ..Default::default()
            };
            arrow::compute::cast_with_options(c, f.data_type(), &strict)
        })
        .collect::<std::result::Result<_, _>>()?;
    Ok(RecordBatch::try_new_with_options(
        schema.clone(),
        columns,
        &arrow::array::RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
    )?)
}

/// The statement without its `FOR PORTION OF BUSINESS_TIME FROM a TO b` clause, and the range.
fn strip_portion(stmt: &Stmt) -> Result<(String, Option<Portion>)> {
    let toks = &stmt.tokens;
    let word_at = |i: usize| upper(&toks[i].token);
    let significant: Vec<usize> = (0..toks.len())
        .filter(|&i| !matches!(toks[i].token, Token::Whitespace(_)))
        .collect();
    let found = significant.windows(3).position(|w| {
        word_at(w[0]) == "FOR" && word_at(w[1]) == "PORTION" && word_at(w[2]) == "OF"
    });
    let Some(at) = found else {
        let text = toks
            .iter()
            .map(|t| super::parse::sql_text(&t.token))
            .collect();
        return Ok((text, None));
    };
    let mut j = at + 3;
    let period = significant.get(j).map(|&i| word_at(i)).unwrap_or_default();
    if period != "BUSINESS_TIME" && period != "VALID_TIME" {
        return Err(QueryError::Invalid(format!(
            "FOR PORTION OF takes BUSINESS_TIME (or VALID_TIME), not `{period}`: system time is the store's"
        )));
    }
    j += 1;
    if significant.get(j).map(|&i| word_at(i)).as_deref() != Some("FROM") {
        return Err(QueryError::Invalid(
            "FOR PORTION OF BUSINESS_TIME needs FROM a TO b".into(),
        ));
    }
    j += 1;
    // An expression runs to the next keyword at depth 0: TO for the start, SET or WHERE (or the
    // end) for the end.
    let take = |mut j: usize, stops: &[&str]| -> Result<(String, usize)> {
        let mut depth = 0i32;
        let start = j;
        while let Some(&i) = significant.get(j) {
            match &toks[i].token {
                Token::LParen => depth += 1,
                Token::RParen => depth -= 1,
                _ if depth == 0 && stops.contains(&word_at(i).as_str()) => break,
                _ => {}
            }
            j += 1;
        }
        if j == start {
            return Err(QueryError::Invalid(
                "FOR PORTION OF BUSINESS_TIME FROM a TO b: an expression is missing".into(),
            ));
        }
        let (a, b) = (significant[start], significant[j - 1]);
        Ok((
            toks[a..=b]
                .iter()
                .map(|t| super::parse::sql_text(&t.token))
                .collect(),
            j,
        ))
    };
    let (from, j) = take(j, &["TO"])?;
    let (to, end) = take(j + 1, &["SET", "WHERE"])?;
    let (cut_from, cut_to) = (
        significant[at],
        significant.get(end).copied().unwrap_or(toks.len()),
    );
    let text = format!(
        "{} {}",
        toks[..cut_from]
            .iter()
            .map(|t| super::parse::sql_text(&t.token))
            .collect::<String>(),
        toks[cut_to..]
            .iter()
            .map(|t| super::parse::sql_text(&t.token))
            .collect::<String>()
    );
    Ok((text, Some(Portion { from, to })))
}
