//! Rewriting what DataFusion does not know (temporal clauses, `read_files`, the table functions,
//! `VALUES` as a table) into references to scratch tables registered for the statement.

use std::path::PathBuf;
use std::sync::Arc;

use datafusion::common::TableReference;
use datafusion::datasource::MemTable;
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan};

use super::context::df;
use super::names::Names;
use super::parse::{quote_ident, read_files_args, upper, Stmt};
use super::provider::TargetTable;
use super::{word, SqlSession};
use crate::arrow_conv::table_arrow_schema;
use crate::changes::ChangeBound;
use crate::error::{QueryError, Result};
use crate::scan::TimeSelection;

impl SqlSession {
    /// Rewrites what DataFusion does not know into references to scratch tables registered for
    /// this statement:
    /// - `t FOR SYSTEM_TIME ... [FOR BUSINESS_TIME ...]` (and `VALID_TIME`): a provider that
    ///   carries the selections into the storage scan;
    /// - `read_files('path', ...)`: the files, read now;
    /// - `temporal_scan('t', business, system)` and `table_as_of('t', b, s)`: the table functions
    ///   for clients that cannot write the clauses;
    /// - `VALUES` used as a table: its columns named `col1`, `col2`, ... as in Databricks.
    pub(super) fn rewrite(&mut self, stmt: &Stmt) -> Result<String> {
        let w = Words::new(&stmt.tokens);
        let mut out = String::new();
        let mut copied = 0; // tokens before this index are in `out`
        let mut k = 0;
        while k < w.sig.len() {
            let Some(r) = self.rewrite_at(&w, k)? else {
                k += 1;
                continue;
            };
            for t in &w.toks[copied..w.sig[r.start]] {
                out.push_str(&super::parse::sql_text(&t.token));
            }
            out.push_str(&r.text);
            copied = w.sig[r.next - 1] + 1;
            k = r.next;
        }
        for t in &w.toks[copied..] {
            out.push_str(&super::parse::sql_text(&t.token));
        }
        self.names()?
            .resolve(&super::period::rewrite_periods(&out)?)
    }

    /// The rewrite that starts at word `k`, if one does.
    fn rewrite_at(&mut self, w: &Words<'_>, k: usize) -> Result<Option<Rewritten>> {
        let travel_follows = k > 0 && w.travel(k + 1) && matches!(w.words[k].token, Token::Word(_));
        Ok(Some(if travel_follows {
            self.time_travel(w, k)?
        } else if w.call(k, "READ_FILES") {
            self.files_table(w, k)?
        } else if w.call(k, "TEMPORAL_SCAN") || w.call(k, "TABLE_AS_OF") {
            self.temporal_scan_call(w, k)?
        } else if w.call(k, "ROW_LINEAGE") {
            self.row_lineage_call(w, k)?
        } else if w.call(k, "PLOT_HISTORY") {
            self.plot_history_call(w, k)?
        } else if w.call(k, "EXPLAIN_CHANGES") {
            self.explain_changes_call(w, k)?
        } else if w.call(k, "TABLE_CHANGES") {
            self.table_changes_call(w, k)?
        } else if w.at(k) == "VALUES"
            && k > 0
            && (w.at(k - 1) == "FROM" || w.words[k - 1].token == Token::LParen)
        {
            values_table(w, k)
        } else {
            return Ok(None);
        }))
    }

    /// `t FOR SYSTEM_TIME ... [FOR BUSINESS_TIME ...]`, `VERSION AS OF n`, `TIMESTAMP AS OF t`
    /// after a table's name (at word `k`, its last part): a provider that carries the selections
    /// into the storage scan.
    fn time_travel(&mut self, w: &Words<'_>, k: usize) -> Result<Rewritten> {
        // A qualified name (`sales.t FOR ...`) starts at its first part.
        let mut start = k;
        let (text, next) = {
            while start >= 2
                && w.words[start - 1].token == Token::Period
                && matches!(w.words[start - 2].token, Token::Word(_))
            {
                start -= 2;
            }
            let written = (start..=k)
                .step_by(2)
                .map(|i| word(Some(w.words[i])))
                .collect::<Result<Vec<_>>>()?
                .join(".");
            let table = self.stored_name(&written)?;
            let mut system = TimeSelection::All;
            let mut business = TimeSelection::All;
            let mut version = None;
            let mut j = k + 1;
            while w.travel(j) {
                if w.at(j) == "FOR" {
                    let which = w.at(j + 1);
                    let (sel, next) = temporal(w.toks, &w.sig, j + 2)?;
                    j = next;
                    if which == "SYSTEM_TIME" {
                        system = sel;
                    } else {
                        business = sel;
                    }
                    continue;
                }
                let by_version = w.at(j) == "VERSION";
                let lit = w.words.get(j + 3).map(|t| &t.token);
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
                            w.at(j),
                            other.map(super::parse::sql_text).unwrap_or_default()
                        )))
                    }
                });
                j += 4;
            }
            let scratch = self.register_target(&table, business, system, version)?;
            // Keep the table's name as the alias unless the query gives one.
            let alias_follows = w.at(j) == "AS"
            || w.words.get(j).is_some_and(|t| matches!(&t.token, Token::Word(w) if w.keyword == datafusion::sql::sqlparser::keywords::Keyword::NoKeyword));
            let text = if alias_follows {
                quote_ident(&scratch)
            } else {
                format!(
                    "{} AS {}",
                    quote_ident(&scratch),
                    quote_ident(super::namespace::last_part(&table))
                )
            };
            (text, j)
        };
        Ok(Rewritten { text, start, next })
    }
    /// `read_files('path', ...)`: the files listed now, read one at a time as the query scans
    /// them (each scan reads them again). Read whole into memory first, a query over 1,000
    /// Parquet files of 10M rows peaked at 868 MB (docs/PERFORMANCE.md, session 43).
    fn files_table(&mut self, w: &Words<'_>, k: usize) -> Result<Rewritten> {
        let (text, next) = {
            self.files_allowed()?;
            let (files, next) = read_files_args(&w.words, k + 1)?;
            let list = files.list()?;
            let schema = files.infer(&list)?;
            let of = schema.clone();
            let progress = self.progress.clone();
            let open: super::provider::OpenBatches = Box::new(move || {
                let (files, schema) = (files.clone(), of.clone());
                let size = |f: &PathBuf| std::fs::metadata(f).map_or(0, |m| m.len());
                let total: u64 = list.iter().map(size).sum();
                // A bar from 16 MiB of files on, as a `read_files` flow draws.
                let task = format!("reading {} file(s)", list.len());
                let bar = asof_storage::Reporter::begin(progress.as_ref(), &task, total, 16 << 20);
                let mut done = 0;
                let read = move |f: PathBuf| {
                    let batches = match files.read(&f, &schema) {
                        Ok(batches) => batches.into_iter().map(Ok).collect(),
                        Err(e) => vec![Err(to_df(e))],
                    };
                    done += size(&f);
                    bar.advance(done);
                    batches
                };
                Ok(Box::new(list.clone().into_iter().flat_map(read)))
            });
            let t = super::provider::RowsTable::reopened("read_files", schema, open);
            (
                quote_ident(&self.register_scratch("files", Arc::new(t))?),
                next,
            )
        };
        Ok(Rewritten {
            text,
            start: k,
            next,
        })
    }
    /// `temporal_scan('t', business, system)` and `table_as_of('t', b, s)`: the table functions
    /// for clients that cannot write the clauses.
    fn temporal_scan_call(&mut self, w: &Words<'_>, k: usize) -> Result<Rewritten> {
        let (text, next) = {
            let (args, next) = literal_args(&w.words, k + 1)?;
            let name = w.at(k).to_lowercase();
            let arg = |i: usize| -> Result<&asof_storage::Value> {
                args.get(i).ok_or_else(|| {
                    QueryError::Invalid(format!("{name}: argument {} is missing", i + 1))
                })
            };
            let table = match arg(0)? {
                asof_storage::Value::Str(s) => self.stored_name(s)?,
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
            (quote_ident(&scratch), next)
        };
        Ok(Rewritten {
            text,
            start: k,
            next,
        })
    }
    /// `row_lineage('t', key [, b [, s]])`.
    fn row_lineage_call(&mut self, w: &Words<'_>, k: usize) -> Result<Rewritten> {
        let (text, next) = {
            let (args, next) = literal_args(&w.words, k + 1)?;
            let usage = "row_lineage('table', key [, business_time [, system_time]])";
            let p = self.key_point_args(args, usage)?;
            let (schema, batch) = crate::explain::row_lineage(
                &self.store,
                &p.table,
                &p.key,
                p.business.as_ref(),
                p.system.as_ref(),
            )?;
            let t = MemTable::try_new(schema, vec![vec![batch]]).map_err(df)?;
            (
                quote_ident(&self.register_scratch("lineage", Arc::new(t))?),
                next,
            )
        };
        Ok(Rewritten {
            text,
            start: k,
            next,
        })
    }
    /// `plot_history('t', key [, b [, s]])`: the key's history as SVG.
    fn plot_history_call(&mut self, w: &Words<'_>, k: usize) -> Result<Rewritten> {
        let (text, next) = {
            let (args, next) = literal_args(&w.words, k + 1)?;
            let usage = "plot_history('table', key [, business_as_of [, system_as_of]])";
            let p = self.key_point_args(args, usage)?;
            let req = crate::plot::PlotRequest {
                key: vec![p.key],
                business_as_of: p.business,
                system_as_of: p.system,
            };
            let svg = crate::plot::key_history_svg(&self.store, &p.table, &req)?;
            let schema = Arc::new(arrow::datatypes::Schema::new(vec![
                arrow::datatypes::Field::new("svg", arrow::datatypes::DataType::Utf8, false),
            ]));
            let batch = arrow::array::RecordBatch::try_new(
                schema.clone(),
                vec![Arc::new(arrow::array::StringArray::from(vec![svg]))],
            )?;
            let t = MemTable::try_new(schema, vec![vec![batch]]).map_err(df)?;
            (
                quote_ident(&self.register_scratch("plot", Arc::new(t))?),
                next,
            )
        };
        Ok(Rewritten {
            text,
            start: k,
            next,
        })
    }
    /// `explain_changes('t', key, from [, to])`.
    fn explain_changes_call(&mut self, w: &Words<'_>, k: usize) -> Result<Rewritten> {
        let (text, next) = {
            let (args, next) = literal_args(&w.words, k + 1)?;
            (quote_ident(&self.explain_changes(&args)?), next)
        };
        Ok(Rewritten {
            text,
            start: k,
            next,
        })
    }
    /// `table_changes('t', start [, end])`: the change feed.
    fn table_changes_call(&mut self, w: &Words<'_>, k: usize) -> Result<Rewritten> {
        let (text, next) = {
            let (args, next) = literal_args(&w.words, k + 1)?;
            let bound = |v| change_bound(v, "table_changes");
            let table = match args.first() {
                Some(asof_storage::Value::Str(s)) => self.stored_name(s)?,
                _ => return Err(QueryError::Invalid(
                    "table_changes('table', start [, end]): the table name comes first, in quotes"
                        .into(),
                )),
            };
            if !(2..=3).contains(&args.len()) {
                return Err(QueryError::Invalid(
                    "table_changes('table', start [, end]) takes two or three arguments".into(),
                ));
            }
            let start = bound(args.get(1))?.ok_or_else(|| {
                QueryError::Invalid("table_changes needs a start version or timestamp".into())
            })?;
            // Open-ended: up to the version the statement reads the table at.
            let end = bound(args.get(2))?
                .or_else(|| self.pinned_version(&table).map(ChangeBound::Version));
            // Streamed a window of commits at a time, as the query reads it (each scan reads
            // the commits the range names now).
            let feed = crate::changes::change_feed(&self.store, &table, &start, end.as_ref())?;
            let schema = feed.schema();
            let (from, to) = feed.commits();
            let store = self.store.clone();
            let name = table.clone();
            let progress = self.progress.clone();
            let open: super::provider::OpenBatches = Box::new(move || {
                let (from, to) = (ChangeBound::Version(from), ChangeBound::Version(to));
                let mut feed =
                    crate::changes::change_feed(&store, &name, &from, Some(&to)).map_err(to_df)?;
                if let Some(p) = &progress {
                    feed = feed.with_progress(p.clone());
                }
                Ok(Box::new(feed.map(|b| b.map_err(to_df))))
            });
            let t = super::provider::RowsTable::reopened(&table, schema, open);
            (
                quote_ident(&self.register_scratch("changes", Arc::new(t))?),
                next,
            )
        };
        Ok(Rewritten {
            text,
            start: k,
            next,
        })
    }

    /// The names a statement may spell in another case: tables, sources, views, their columns.
    fn names(&self) -> Result<Names> {
        let mut names = Names::default();
        for t in self.store.tables()? {
            for f in table_arrow_schema(&self.store.schema(&t)?).fields() {
                names.add(f.name());
            }
            names.add(&t);
        }
        for s in self.store.sources()? {
            for f in self.store.source_schema(&s)?.fields() {
                names.add(f.name());
            }
            names.add(&s);
        }
        for (v, _) in self.store.views()? {
            names.add(&v);
        }
        Ok(names)
    }

    /// Registers a provider under a fresh scratch name and returns the name.
    /// The arguments of a function of one key at a point, `f('table', key [, business [,
    /// system]])` (NULL or absent times: none); `usage` is the error when they do not fit.
    fn key_point_args(&self, mut args: Vec<asof_storage::Value>, usage: &str) -> Result<KeyPoint> {
        if !(2..=4).contains(&args.len()) {
            return Err(QueryError::Invalid(usage.into()));
        }
        args.resize(4, asof_storage::Value::Null);
        let [table, key, b, s]: [asof_storage::Value; 4] = args.try_into().expect("four arguments");
        let asof_storage::Value::Str(table) = table else {
            return Err(QueryError::Invalid(usage.into()));
        };
        let time = |v: asof_storage::Value| (!matches!(v, asof_storage::Value::Null)).then_some(v);
        Ok(KeyPoint {
            table: self.stored_name(&table)?,
            key,
            business: time(b),
            system: time(s),
        })
    }

    pub(super) fn register_scratch(
        &mut self,
        what: &str,
        provider: Arc<dyn datafusion::catalog::TableProvider>,
    ) -> Result<String> {
        self.scratch += 1;
        let name = format!("__asof_{}_{what}", self.scratch);
        self.ctx
            .deregister_table(TableReference::bare(name.as_str()))
            .map_err(df)?;
        self.ctx
            .register_table(TableReference::bare(name.as_str()), provider)
            .map_err(df)?;
        Ok(name)
    }

    /// Registers target `table` seen through the selections; returns the scratch name.
    pub(super) fn register_target(
        &mut self,
        table: &str,
        business: TimeSelection,
        system: TimeSelection,
        version: Option<u64>,
    ) -> Result<String> {
        let version = version.or(self.pinned_version(table));
        let provider = TargetTable::new(self.store.clone(), table, business, system, version)?;
        self.register_scratch(table, Arc::new(provider))
    }

    /// Drops the scratch tables of the last statement.
    pub(super) fn clear_scratch(&mut self) -> Result<()> {
        let names: Vec<String> = self
            .ctx
            .catalog(&self.ns.catalog)
            .and_then(|c| c.schema(&self.ns.schema))
            .map(|s| s.table_names())
            .unwrap_or_default();
        for n in names.iter().filter(|n| n.starts_with("__asof_")) {
            self.ctx
                .deregister_table(TableReference::bare(n.as_str()))
                .map_err(df)?;
        }
        Ok(())
    }
}

/// A statement's tokens, and its significant ones (no whitespace) by index.
struct Words<'a> {
    toks: &'a [TokenWithSpan],
    sig: Vec<usize>,
    words: Vec<&'a TokenWithSpan>,
}

impl<'a> Words<'a> {
    fn new(toks: &'a [TokenWithSpan]) -> Self {
        let sig: Vec<usize> = (0..toks.len())
            .filter(|&i| !matches!(toks[i].token, Token::Whitespace(_)))
            .collect();
        let words = sig.iter().map(|&i| &toks[i]).collect();
        Words { toks, sig, words }
    }

    /// Word `j` in upper case (empty past the end).
    fn at(&self, j: usize) -> String {
        self.words
            .get(j)
            .map(|t| upper(&t.token))
            .unwrap_or_default()
    }

    /// Whether word `k` calls `name`: `name(`.
    fn call(&self, k: usize, name: &str) -> bool {
        self.at(k) == name
            && self
                .words
                .get(k + 1)
                .is_some_and(|t| t.token == Token::LParen)
    }

    /// Whether a temporal clause or time travel starts at word `j`.
    fn travel(&self, j: usize) -> bool {
        let is_timeline = |w: &str| matches!(w, "SYSTEM_TIME" | "BUSINESS_TIME" | "VALID_TIME");
        (self.at(j) == "FOR" && is_timeline(&self.at(j + 1)))
            || (matches!(self.at(j).as_str(), "VERSION" | "TIMESTAMP")
                && self.at(j + 1) == "AS"
                && self.at(j + 2) == "OF")
    }
}

/// What a rewrite puts in place of words `start..next`.
struct Rewritten {
    text: String,
    start: usize,
    next: usize,
}

/// `VALUES (..), (..)` used as a table (at word `k`): its columns named `col1`, `col2`, ... as in
/// Databricks.
fn values_table(w: &Words<'_>, k: usize) -> Rewritten {
    let (text, next) = {
        // `VALUES (..), (..)`: count the first row's columns and find the end.
        let (mut j, mut depth, mut columns) = (k + 1, 0, 1);
        let mut rows = 0;
        while let Some(t) = w.words.get(j) {
            match t.token {
                Token::LParen => depth += 1,
                Token::RParen => {
                    depth -= 1;
                    if depth == 0 {
                        rows += 1;
                        if w.words.get(j + 1).map(|t| &t.token) != Some(&Token::Comma) {
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
        let inner: String = w.toks[w.sig[k]..=w.sig[j - 1]]
            .iter()
            .map(|t| super::parse::sql_text(&t.token))
            .collect();
        let select = (1..=columns)
            .map(|i| format!("column{i} AS col{i}"))
            .collect::<Vec<_>>()
            .join(", ");
        let text = if w.at(k - 1) == "FROM" {
            format!("(SELECT {select} FROM ({inner}))")
        } else {
            format!("SELECT {select} FROM ({inner})")
        };
        (text, j)
    };
    Rewritten {
        text,
        start: k,
        next,
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

/// A bound of the change feed given to a table function: a version, or a timestamp in quotes
/// (NULL or absent: none).
fn change_bound(v: Option<&asof_storage::Value>, function: &str) -> Result<Option<ChangeBound>> {
    Ok(match v {
        None | Some(asof_storage::Value::Null) => None,
        Some(asof_storage::Value::Int(n)) if *n >= 0 => Some(ChangeBound::Version(*n as u64)),
        Some(asof_storage::Value::Str(s)) => Some(ChangeBound::Timestamp(parse_timestamp(s)?)),
        Some(other) => {
            return Err(QueryError::Invalid(format!(
                "{function} takes versions or timestamps, not {other:?}"
            )))
        }
    })
}

/// A value of `literal_args` as a SQL literal.
fn sql_literal(v: &asof_storage::Value) -> String {
    match v {
        asof_storage::Value::Str(s) => format!("'{}'", s.replace('\'', "''")),
        asof_storage::Value::Null => "NULL".into(),
        asof_storage::Value::Int(n) => n.to_string(),
        other => format!("{other:?}"),
    }
}

impl SqlSession {
    /// `explain_changes('t', key, from [, to])`: the key's rows of the change feed from `from` to
    /// `to` (versions or timestamps), each with the cause of its commit ([`change_causes`]);
    /// returns the name of the view registered for it.
    fn explain_changes(&mut self, args: &[asof_storage::Value]) -> Result<String> {
        let usage = "explain_changes('table', key, from [, to]): the table in quotes, the key, and versions or timestamps";
        let (Some(asof_storage::Value::Str(table)), Some(key)) = (args.first(), args.get(1)) else {
            return Err(QueryError::Invalid(usage.into()));
        };
        if !(3..=4).contains(&args.len()) {
            return Err(QueryError::Invalid(usage.into()));
        }
        let table = self.stored_name(table)?;
        let schema = self.store.schema(&table)?;
        let [k] = schema.key_columns.as_slice() else {
            return Err(QueryError::Invalid(format!(
                "explain_changes takes one key value: `{table}` has {} key columns",
                schema.key_columns.len()
            )));
        };
        let key_column = schema.columns[*k].0.clone();
        let from = change_bound(args.get(2), "explain_changes")?
            .ok_or_else(|| QueryError::Invalid(usage.into()))?;
        let to = change_bound(args.get(3), "explain_changes")?
            .or_else(|| self.pinned_version(&table).map(ChangeBound::Version));
        let (schema, batches) =
            crate::changes::table_changes(&self.store, &table, &from, to.as_ref())?;
        let changes = self.register_scratch(
            "changes",
            Arc::new(MemTable::try_new(schema, vec![batches]).map_err(df)?),
        )?;
        let (schema, batch) =
            crate::explain::change_causes(&self.store, &table, std::slice::from_ref(key))?;
        let causes = self.register_scratch(
            "causes",
            Arc::new(MemTable::try_new(schema, vec![vec![batch]]).map_err(df)?),
        )?;
        let sql = format!(
            "SELECT c.*, e._cause, e._cause_origin, e._cause_business, e._cause_system, \
             e._latest_business_before, e._latest_system_before, e._late_on_business, e._late_on_system \
             FROM {} c LEFT JOIN {} e ON c._commit_version = e._commit_version \
             WHERE c.{} = {} ORDER BY c._commit_version",
            quote_ident(&changes),
            quote_ident(&causes),
            quote_ident(&key_column),
            sql_literal(key)
        );
        let view = self.runtime.block_on(self.ctx.sql(&sql)).map_err(df)?;
        self.register_scratch("explain", view.into_view())
    }
}

/// A selection written as text, for `temporal_scan`: `AS OF t`, `FROM a TO b`, `ONLY FROM a TO
/// b`, `BETWEEN a AND b` or `ALL`, with time literals bare (`AS OF 2025-01-01T00:00:00`) or
/// quoted. Read by the grammar of the temporal clauses ([`temporal`]), once its bare literals
/// are quoted.
fn selection_text(s: &str) -> Result<TimeSelection> {
    const WORDS: [&str; 10] = [
        "ALL",
        "AS",
        "OF",
        "FROM",
        "TO",
        "ONLY",
        "BETWEEN",
        "AND",
        "TIMESTAMP",
        "DATE",
    ];
    let bad = || {
        QueryError::Invalid(format!(
            "temporal_scan: `{s}` is not a selection (AS OF t, FROM a TO b, ONLY FROM a TO b, BETWEEN a AND b or ALL)"
        ))
    };
    // Pieces split at spaces outside quotes; a bare piece that is not a word or a whole number
    // is a time literal.
    let mut pieces: Vec<String> = vec![String::new()];
    let mut quoted = false;
    for c in s.trim().chars() {
        if c == '\'' {
            quoted = !quoted;
        }
        if c.is_whitespace() && !quoted {
            pieces.push(String::new());
        } else {
            pieces.last_mut().expect("one").push(c);
        }
    }
    let text = pieces
        .iter()
        .filter(|p| !p.is_empty())
        .map(|p| {
            let bare_literal = !p.starts_with('\'')
                && !WORDS.contains(&p.to_ascii_uppercase().as_str())
                && p.parse::<i64>().is_err();
            if bare_literal {
                format!("'{}'", p.replace('\'', "''"))
            } else {
                p.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(" ");
    if text.is_empty() {
        return Ok(TimeSelection::All);
    }
    let tokens = datafusion::sql::sqlparser::tokenizer::Tokenizer::new(
        &datafusion::sql::sqlparser::dialect::DatabricksDialect {},
        &text,
    )
    .tokenize_with_location()
    .map_err(|_| bad())?;
    let w = Words::new(&tokens);
    match temporal(w.toks, &w.sig, 0) {
        Ok((sel, next)) if next == w.sig.len() => Ok(sel),
        _ => Err(bad()),
    }
}

/// The arguments of `row_lineage` and `plot_history`: a table, a key and a point on both
/// timelines.
struct KeyPoint {
    table: String,
    key: asof_storage::Value,
    business: Option<asof_storage::Value>,
    system: Option<asof_storage::Value>,
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
        // `ONLY FROM a TO b`: the rows of `FROM a TO b`, their intervals trimmed to the window.
        "ONLY" => {
            let (sel, n) = temporal(toks, sig, j + 1)?;
            match sel {
                TimeSelection::FromTo(a, b) => (TimeSelection::Within(a, b), n),
                _ => {
                    return Err(QueryError::Invalid(
                        "ONLY takes FROM a TO b: the window the intervals are trimmed to".into(),
                    ))
                }
            }
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
            "expected AS OF, FROM, ONLY FROM, BETWEEN or ALL after the timeline, found `{other}`"
        )))
        }
    })
}

/// A query error inside a DataFusion plan.
fn to_df(e: QueryError) -> datafusion::error::DataFusionError {
    datafusion::error::DataFusionError::External(Box::new(e))
}
