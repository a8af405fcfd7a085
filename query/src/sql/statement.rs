//! What a statement is ([`classify`]): the statements asof handles itself (streaming tables,
//! flows, refreshes, properties, DESCRIBE, VACUUM, DROP STREAMING TABLE), parsed with the token
//! cursor and the flow grammar of [`super::parse`]; anything else is SQL for DataFusion.

use std::collections::BTreeMap;

use asof_storage::RefreshMode;
use sqlparser::tokenizer::{Token, TokenWithSpan};

use super::parse::{flow_body, syntax, text_from_token, upper, FlowAst, Stmt, P};
use crate::error::{QueryError, Result};
use crate::schedule::{Schedule, SCHEDULE_PROPERTY};

/// `CONSTRAINT name EXPECT (condition) [ON VIOLATION DROP ROW | FAIL UPDATE]`, as tokens.
fn expectation(el: &[&TokenWithSpan], all: &[TokenWithSpan]) -> Result<asof_storage::Expectation> {
    use asof_storage::{Expectation, OnViolation};
    let at = |i: usize| el.get(i).map(|t| upper(&t.token)).unwrap_or_default();
    let bad = |i: usize, msg: &str| syntax(el.get(i).or(el.last()).copied(), msg);
    let name = match el.get(1).map(|t| &t.token) {
        Some(Token::Word(w)) => w.value.clone(),
        _ => return Err(bad(1, "CONSTRAINT needs a name")),
    };
    if at(2) != "EXPECT" || el.get(3).map(|t| &t.token) != Some(&Token::LParen) {
        return Err(bad(
            2,
            "expected EXPECT (condition) after the constraint's name",
        ));
    }
    // The condition: the statement's own text between the parentheses.
    let mut depth = 0;
    let mut close = None;
    for (i, t) in el.iter().enumerate().skip(3) {
        match t.token {
            Token::LParen => depth += 1,
            Token::RParen => {
                depth -= 1;
                if depth == 0 {
                    close = Some(i);
                    break;
                }
            }
            _ => {}
        }
    }
    let close = close.ok_or_else(|| bad(3, "the condition's `)` is missing"))?;
    let pos = |t: &TokenWithSpan| all.iter().position(|u| std::ptr::eq(u, t)).expect("own");
    let condition: String = all[pos(el[3]) + 1..pos(el[close])]
        .iter()
        .map(|t| super::parse::sql_text(&t.token))
        .collect::<String>()
        .trim()
        .to_string();
    if condition.is_empty() {
        return Err(bad(3, "the condition is empty"));
    }
    let rest: Vec<String> = (close + 1..el.len()).map(at).collect();
    let on_violation = match rest.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        [] => OnViolation::Warn,
        ["ON", "VIOLATION", "DROP", "ROW"] => OnViolation::DropRow,
        ["ON", "VIOLATION", "FAIL", "UPDATE"] => OnViolation::FailUpdate,
        _ => {
            return Err(bad(
                close + 1,
                "expected ON VIOLATION DROP ROW, ON VIOLATION FAIL UPDATE or nothing after the condition",
            ))
        }
    };
    Ok(Expectation {
        name,
        condition,
        on_violation,
    })
}

/// The table property that holds a streaming table's `COMMENT`.
pub(crate) const COMMENT_PROPERTY: &str = "comment";

/// The table property that holds a streaming table's `CLUSTER BY` columns (or `AUTO`), comma
/// separated: stored and shown, not used to order storage (rows are ordered by key).
pub(crate) const CLUSTER_BY_PROPERTY: &str = "asof.clusterBy";

/// The table property that holds a streaming table's `PARTITIONED BY` columns, comma separated:
/// stored and shown; asof does not partition.
pub(crate) const PARTITIONED_BY_PROPERTY: &str = "asof.partitionedBy";

/// Whether `DESCRIBE` shows the detailed section (`EXTENDED`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Detail {
    Columns,
    Extended,
}

/// An append flow as written: `CREATE FLOW name [COMMENT '...'] AS INSERT [ONCE] INTO target BY
/// NAME query` (the docs also write `INSERT INTO ONCE`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AppendAst {
    pub name: String,
    pub target: String,
    pub once: bool,
    pub comment: Option<String>,
    /// The query's text, `STREAM(source)` and all.
    pub query: String,
}

/// What a statement is.
#[derive(Debug)]
pub(crate) enum Kind {
    /// `CREATE [OR REFRESH] STREAMING TABLE t [(schema)]`, with the standalone flow if any.
    StreamingTable {
        name: String,
        /// The declared column list, as SQL text (`a INT, b STRING`).
        schema: Option<String>,
        /// The declared expectations (`CONSTRAINT name EXPECT (cond) ...`).
        expectations: Vec<asof_storage::Expectation>,
        /// `TBLPROPERTIES ('k' = 'v', ...)`.
        properties: BTreeMap<String, String>,
        flow: Option<FlowAst>,
        /// `AS query`: a standalone streaming table, filled by an append flow of its name.
        query: Option<String>,
    },
    /// `ALTER [STREAMING] TABLE t SET TBLPROPERTIES (...)`.
    SetProperties {
        name: String,
        properties: BTreeMap<String, String>,
    },
    /// `DESCRIBE HISTORY t`.
    DescribeHistory(String),
    /// `SHOW TBLPROPERTIES t [('key')]`.
    ShowProperties { name: String, key: Option<String> },
    /// `DESCRIBE [TABLE] [EXTENDED] t` (`DESC` too).
    Describe { name: String, detail: Detail },
    /// `DROP STREAMING TABLE [IF EXISTS] t`.
    DropStreamingTable { name: String, if_exists: bool },
    /// `VACUUM t [RETAIN n HOURS]`.
    Vacuum {
        name: String,
        retain_hours: Option<f64>,
    },
    /// `CREATE FLOW f AS AUTO CDC ...`.
    Flow(FlowAst),
    /// `CREATE FLOW f AS INSERT [ONCE] INTO t BY NAME query`.
    AppendFlow(AppendAst),
    /// `REFRESH STREAMING TABLE t [FULL]`.
    Refresh { name: String, mode: RefreshMode },
    /// `RECEIPT [PINNED] FOR query`: the query's receipt, as one row.
    Receipt {
        pinned: bool,
        /// The query's text.
        query: String,
    },
    /// `VERIFY RECEIPT 'token'`: the check, as one row.
    VerifyReceipt(String),
    /// `ERASE FROM t WHERE condition REASON 'why'`.
    Erase {
        name: String,
        /// The condition on the table's keys, as SQL text.
        condition: String,
        reason: String,
    },
    /// `EXPORT [TABLE] t TO DELTA 'folder' [VERSION AS OF n]`.
    Export(super::export::ExportAst),
    /// `UPDATE t ...`, `DELETE FROM t ...`, `MERGE INTO t ...` (`INSERT` goes by the table it
    /// names: [`super::tables`]).
    Dml { name: String },
    /// `CREATE SCHEMA`, `DROP SCHEMA`, `USE`, `SHOW SCHEMAS` and the same for catalogs.
    Namespace(NamespaceStmt),
    /// Anything else: SQL for DataFusion.
    Sql,
}

/// The statements of schemas and catalogs (`DATABASE` is a synonym of `SCHEMA`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NamespaceStmt {
    /// `CREATE SCHEMA [IF NOT EXISTS] [catalog.]s [COMMENT '...']`.
    CreateSchema {
        name: String,
        if_not_exists: bool,
        comment: String,
    },
    /// `CREATE CATALOG [IF NOT EXISTS] c [COMMENT '...']`: the catalog and its `default` schema.
    CreateCatalog {
        name: String,
        if_not_exists: bool,
        comment: String,
    },
    /// `DROP SCHEMA [IF EXISTS] [catalog.]s [CASCADE | RESTRICT]`.
    DropSchema {
        name: String,
        if_exists: bool,
        cascade: bool,
    },
    /// `USE [SCHEMA] [catalog.]s`.
    UseSchema(String),
    /// `USE CATALOG c`.
    UseCatalog(String),
    /// `SHOW SCHEMAS [IN catalog]`.
    ShowSchemas { catalog: Option<String> },
}

/// `CREATE SCHEMA ...`, `DROP SCHEMA ...`, `USE ...`, `SHOW SCHEMAS` (`h`: the first words).
fn namespace(h: &[&str], p: &mut P<'_>) -> Result<Option<NamespaceStmt>> {
    let schema_word = |w: &str| matches!(w, "SCHEMA" | "DATABASE");
    let if_words = |p: &mut P<'_>, second: &[&str]| -> Result<bool> {
        if !p.eat("IF") {
            return Ok(false);
        }
        for w in second {
            p.expect(w)?;
        }
        Ok(true)
    };
    let comment = |p: &mut P<'_>| -> Result<String> {
        if p.eat("COMMENT") {
            p.quoted("the comment")
        } else {
            Ok(String::new())
        }
    };
    let stmt = match h {
        ["CREATE", w, ..] if schema_word(w) || *w == "CATALOG" => {
            p.i = 2;
            let if_not_exists = if_words(p, &["NOT", "EXISTS"])?;
            let name = p.table_name(if *w == "CATALOG" {
                "a catalog name"
            } else {
                "a schema name"
            })?;
            let comment = comment(p)?;
            p.end()?;
            if *w == "CATALOG" {
                NamespaceStmt::CreateCatalog {
                    name,
                    if_not_exists,
                    comment,
                }
            } else {
                NamespaceStmt::CreateSchema {
                    name,
                    if_not_exists,
                    comment,
                }
            }
        }
        ["DROP", w, ..] if schema_word(w) => {
            p.i = 2;
            let if_exists = if_words(p, &["EXISTS"])?;
            let name = p.table_name("a schema name")?;
            let cascade = p.eat("CASCADE");
            if !cascade {
                p.eat("RESTRICT");
            }
            p.end()?;
            NamespaceStmt::DropSchema {
                name,
                if_exists,
                cascade,
            }
        }
        ["USE", "CATALOG", ..] => {
            p.i = 2;
            let name = p.table_name("a catalog name")?;
            p.end()?;
            NamespaceStmt::UseCatalog(name)
        }
        ["USE", ..] => {
            p.i = 1;
            if p.peek_upper().is_some_and(|w| schema_word(&w)) && p.toks.len() > 2 {
                p.i += 1;
            }
            let name = p.table_name("a schema name")?;
            p.end()?;
            NamespaceStmt::UseSchema(name)
        }
        ["SHOW", "SCHEMAS" | "DATABASES", ..] => {
            p.i = 2;
            let catalog = if p.eat("IN") || p.eat("FROM") {
                Some(p.table_name("a catalog name")?)
            } else {
                None
            };
            p.end()?;
            NamespaceStmt::ShowSchemas { catalog }
        }
        _ => return Ok(None),
    };
    Ok(Some(stmt))
}

/// Classifies a statement and parses the AUTO CDC forms.
pub(crate) fn classify(stmt: &Stmt) -> Result<Kind> {
    let head = stmt.head(5);
    let h: Vec<&str> = head.iter().map(String::as_str).collect();
    let mut p = P {
        toks: stmt.words(),
        i: 0,
    };
    if let Some(n) = namespace(&h, &mut p)? {
        return Ok(Kind::Namespace(n));
    }
    match h.as_slice() {
        ["CREATE", "OR", "REFRESH", "STREAMING", "TABLE"]
        | ["CREATE", "STREAMING", "TABLE", ..] => {
            p.eat("CREATE");
            if p.eat("OR") {
                p.expect("REFRESH")?;
            }
            p.expect("STREAMING")?;
            p.expect("TABLE")?;
            let name = p.table_name("a table name")?;
            // An optional schema: the target's columns come from its flow, which is checked
            // against it.
            // Its elements are columns and expectations (`CONSTRAINT name EXPECT (cond) [ON
            // VIOLATION DROP ROW | FAIL UPDATE]`).
            let mut schema = None;
            let mut expectations = Vec::new();
            if p.peek().is_some_and(|t| t.token == Token::LParen) {
                let mut depth = 0;
                let mut elements: Vec<Vec<&TokenWithSpan>> = vec![Vec::new()];
                while let Some(t) = p.next() {
                    match t.token {
                        Token::LParen => depth += 1,
                        Token::RParen => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        Token::Comma if depth == 1 => {
                            elements.push(Vec::new());
                            continue;
                        }
                        _ => {}
                    }
                    if depth > 1 || !matches!(t.token, Token::LParen) {
                        elements.last_mut().expect("one").push(t);
                    }
                }
                let mut columns = Vec::new();
                for el in elements.into_iter().filter(|e| !e.is_empty()) {
                    if upper(&el[0].token) == "CONSTRAINT" {
                        expectations.push(expectation(&el, &stmt.tokens)?);
                    } else {
                        columns.push(
                            el.iter()
                                .map(|t| super::parse::sql_text(&t.token))
                                .collect::<Vec<_>>()
                                .join(" "),
                        );
                    }
                }
                if !columns.is_empty() {
                    schema = Some(columns.join(", "));
                }
                for (i, e) in expectations.iter().enumerate() {
                    if expectations[..i].iter().any(|o| o.name == e.name) {
                        return Err(QueryError::Invalid(format!(
                            "streaming table `{name}` declares CONSTRAINT `{}` twice",
                            e.name
                        )));
                    }
                }
            }
            let mut properties = BTreeMap::new();
            loop {
                if p.eat("TBLPROPERTIES") {
                    properties.extend(property_list(&mut p)?);
                } else if p.eat("COMMENT") {
                    properties.insert(COMMENT_PROPERTY.to_string(), p.quoted("the comment")?);
                } else if p.eat("CLUSTER") {
                    p.expect("BY")?;
                    let cols = if p.eat("AUTO") {
                        "AUTO".to_string()
                    } else {
                        p.ident_list("a column")?.join(",")
                    };
                    properties.insert(CLUSTER_BY_PROPERTY.to_string(), cols);
                } else if p.peek_upper().as_deref() == Some("SCHEDULE")
                    || p.peek_upper().as_deref() == Some("TRIGGER")
                {
                    let schedule = schedule(&mut p)?;
                    properties.insert(SCHEDULE_PROPERTY.to_string(), schedule.to_property());
                } else if p.eat("PARTITIONED") {
                    p.expect("BY")?;
                    let cols = p.ident_list("a column")?.join(",");
                    properties.insert(PARTITIONED_BY_PROPERTY.to_string(), cols);
                } else {
                    break;
                }
            }
            let query = if p.eat("AS") {
                let first = p
                    .peek()
                    .ok_or_else(|| syntax(None, "expected a query after AS"))?;
                p.i = p.toks.len();
                Some(text_from_token(&stmt.tokens, first))
            } else {
                None
            };
            let flow = if query.is_none() && p.eat("FLOW") {
                p.expect("AUTO")?;
                p.expect("CDC")?;
                let mut ast = FlowAst {
                    name: name.clone(),
                    target: name.clone(),
                    ..Default::default()
                };
                flow_body(&mut p, &stmt.tokens, &mut ast)?;
                Some(ast)
            } else {
                None
            };
            if let Some(t) = p.peek() {
                return Err(syntax(Some(t), "unexpected text after the streaming table"));
            }
            Ok(Kind::StreamingTable {
                name,
                schema,
                expectations,
                properties,
                flow,
                query,
            })
        }
        ["CREATE", "FLOW", ..] => {
            p.i = 2;
            let name = p.ident("a flow name")?;
            let comment = if p.eat("COMMENT") {
                Some(p.quoted("the comment")?)
            } else {
                None
            };
            p.expect("AS")?;
            if p.eat("INSERT") {
                let mut once = p.eat("ONCE");
                p.expect("INTO")?;
                once |= p.eat("ONCE");
                let target = p.table_name("a target table")?;
                p.expect("BY")?;
                p.expect("NAME")?;
                let first = p
                    .peek()
                    .ok_or_else(|| syntax(None, "expected a query after BY NAME"))?;
                return Ok(Kind::AppendFlow(AppendAst {
                    name,
                    target,
                    once,
                    comment,
                    query: text_from_token(&stmt.tokens, first),
                }));
            }
            p.expect("AUTO")?;
            p.expect("CDC")?;
            let once = p.eat("ONCE");
            // `AUTO CDC FROM SNAPSHOT s INTO t ...` (the source may also follow the target).
            let snapshots = if p.eat("FROM") {
                p.expect("SNAPSHOT")?;
                Some(super::parse::snapshot_source(&mut p)?)
            } else {
                None
            };
            p.expect("INTO")?;
            let target = p.table_name("a target table")?;
            let mut ast = FlowAst {
                name,
                target,
                once,
                comment,
                source: snapshots,
                ..Default::default()
            };
            flow_body(&mut p, &stmt.tokens, &mut ast)?;
            Ok(Kind::Flow(ast))
        }
        ["REFRESH", "STREAMING", "TABLE", ..] | ["REFRESH", "TABLE", ..] => {
            p.eat("REFRESH");
            p.eat("STREAMING");
            p.expect("TABLE")?;
            let name = p.table_name("a table name")?;
            let mode = match p.eat("FULL") {
                true => RefreshMode::Full,
                false => RefreshMode::Incremental,
            };
            if let Some(t) = p.peek() {
                return Err(syntax(Some(t), "expected the end of the statement"));
            }
            Ok(Kind::Refresh { name, mode })
        }
        ["ALTER", "STREAMING", "TABLE", ..] | ["ALTER", "TABLE", ..] => {
            p.eat("ALTER");
            p.eat("STREAMING");
            p.expect("TABLE")?;
            let name = p.table_name("a table name")?;
            // `ADD | ALTER SCHEDULE ...`, `DROP SCHEDULE`: the schedule property.
            if matches!(p.peek_upper().as_deref(), Some("ADD" | "ALTER" | "DROP")) {
                let drop = p.eat("DROP");
                if !drop {
                    p.i += 1;
                }
                let value = if drop {
                    p.expect("SCHEDULE")?;
                    String::new()
                } else {
                    schedule(&mut p)?.to_property()
                };
                p.end()?;
                let properties = BTreeMap::from([(SCHEDULE_PROPERTY.to_string(), value)]);
                return Ok(Kind::SetProperties { name, properties });
            }
            p.expect("SET")?;
            p.expect("TBLPROPERTIES")?;
            let properties = property_list(&mut p)?;
            if let Some(t) = p.peek() {
                return Err(syntax(Some(t), "expected the end of the statement"));
            }
            Ok(Kind::SetProperties { name, properties })
        }
        ["DESCRIBE", "HISTORY", ..] => {
            p.i = 2;
            let name = p.table_name("a table name")?;
            p.end()?;
            Ok(Kind::DescribeHistory(name))
        }
        ["SHOW", "TBLPROPERTIES", ..] => {
            p.i = 2;
            let name = p.table_name("a table name")?;
            let key = if p.peek().is_some_and(|t| t.token == Token::LParen) {
                p.i += 1;
                let key = match p.peek().map(|t| &t.token) {
                    Some(Token::Word(_)) => {
                        // A bare dotted name: pipelines.cdc.x
                        let mut k = String::new();
                        while let Some(t) = p.peek() {
                            match &t.token {
                                Token::Word(w) => k.push_str(&w.value),
                                Token::Period => k.push('.'),
                                _ => break,
                            }
                            p.i += 1;
                        }
                        k
                    }
                    _ => p.quoted("a property name")?,
                };
                match p.next() {
                    Some(TokenWithSpan {
                        token: Token::RParen,
                        ..
                    }) => {}
                    t => return Err(syntax(t, "expected `)`")),
                }
                Some(key)
            } else {
                None
            };
            p.end()?;
            Ok(Kind::ShowProperties { name, key })
        }
        ["DESCRIBE" | "DESC", ..] => {
            p.i = 1;
            p.eat("TABLE");
            let detail = if p.eat("EXTENDED") {
                Detail::Extended
            } else {
                Detail::Columns
            };
            let name = p.table_name("a table name")?;
            if p.peek().is_some() {
                // `DESCRIBE t col` and the like: DataFusion's.
                return Ok(Kind::Sql);
            }
            Ok(Kind::Describe { name, detail })
        }
        ["DROP", "STREAMING", "TABLE", ..] => {
            p.i = 3;
            let if_exists = p.eat("IF");
            if if_exists {
                p.expect("EXISTS")?;
            }
            let name = p.table_name("a table name")?;
            p.end()?;
            Ok(Kind::DropStreamingTable { name, if_exists })
        }
        ["VACUUM", ..] => {
            /// A hundred thousand years: any longer keeps everything anyway.
            const MAX_RETAIN_HOURS: f64 = 876_000_000.0;
            p.i = 1;
            let name = p.table_name("a table name")?;
            let retain_hours = if p.eat("RETAIN") {
                let n = match p.next() {
                    Some(TokenWithSpan {
                        token: Token::Number(n, _),
                        ..
                    }) => n
                        .parse::<f64>()
                        .ok()
                        .filter(|h| (0.0..=MAX_RETAIN_HOURS).contains(h)),
                    _ => None,
                };
                let Some(n) = n else {
                    return Err(syntax(
                        p.toks.get(p.i - 1).copied(),
                        format!("RETAIN takes a number of hours, from 0 to {MAX_RETAIN_HOURS}"),
                    ));
                };
                p.expect("HOURS")?;
                Some(n)
            } else {
                None
            };
            if let Some(t) = p.peek() {
                return Err(syntax(
                    Some(t),
                    "expected RETAIN n HOURS or the end of the statement",
                ));
            }
            Ok(Kind::Vacuum { name, retain_hours })
        }
        ["UPDATE", ..] => {
            p.i = 1;
            Ok(Kind::Dml {
                name: p.table_name("a table name")?,
            })
        }
        ["RECEIPT", ..] => {
            p.i = 1;
            let pinned = p.eat("PINNED");
            p.expect("FOR")?;
            let first = p.peek().ok_or_else(|| {
                syntax(p.toks.last().copied(), "expected a query after RECEIPT FOR")
            })?;
            Ok(Kind::Receipt {
                pinned,
                query: text_from_token(&stmt.tokens, first).trim().to_string(),
            })
        }
        ["VERIFY", "RECEIPT", ..] => {
            p.i = 2;
            let token = p.quoted("the receipt's token")?;
            p.end()?;
            Ok(Kind::VerifyReceipt(token))
        }
        ["EXPORT", ..] => {
            p.i = 1;
            Ok(Kind::Export(super::export::parse(&mut p)?))
        }
        ["ERASE", "FROM", ..] => {
            p.i = 2;
            let name = p.table_name("a table name")?;
            if !p.eat("WHERE") {
                return Err(syntax(
                    p.peek().or(p.toks.last().copied()),
                    "expected WHERE: ERASE FROM t WHERE <condition on its keys> REASON 'why'",
                ));
            }
            let n = p.toks.len();
            let reason =
                match (n.checked_sub(2).map(|i| &p.toks[i]), p.toks.last()) {
                    (
                        Some(r),
                        Some(TokenWithSpan {
                            token: Token::SingleQuotedString(s),
                            ..
                        }),
                    ) if upper(&r.token) == "REASON" && n - 2 > p.i => s.clone(),
                    _ => return Err(syntax(
                        p.toks.last().copied(),
                        "ERASE ends with REASON 'why' (the reason is kept in the table's history)",
                    )),
                };
            // The condition: the statement's own text between WHERE and REASON.
            let first = p.toks[p.i];
            let last = p.toks[n - 2];
            let at = |t: &TokenWithSpan| {
                stmt.tokens
                    .iter()
                    .position(|u| std::ptr::eq(u, t))
                    .expect("own token")
            };
            // The condition's own tokens, as the session writes every statement back (strings
            // escaped for this dialect).
            let condition: String = stmt.tokens[at(first)..at(last)]
                .iter()
                .map(|t| super::parse::sql_text(&t.token))
                .collect::<String>()
                .trim()
                .to_string();
            Ok(Kind::Erase {
                name,
                condition,
                reason,
            })
        }
        ["DELETE", "FROM", ..] | ["MERGE", "INTO", ..] => {
            p.i = 2;
            Ok(Kind::Dml {
                name: p.table_name("a table name")?,
            })
        }
        _ => Ok(Kind::Sql),
    }
}

/// `SCHEDULE [REFRESH] EVERY n unit`, `SCHEDULE [REFRESH] CRON 'expr' [AT TIME ZONE 'tz']` or
/// `TRIGGER ON UPDATE [AT MOST EVERY INTERVAL n unit]`.
fn schedule(p: &mut P<'_>) -> Result<Schedule> {
    let number_unit = |p: &mut P<'_>| -> Result<std::time::Duration> {
        let n = match p.next() {
            Some(TokenWithSpan {
                token: Token::Number(n, _),
                ..
            }) => n.parse::<u64>().ok(),
            _ => None,
        };
        let unit = p.peek_upper().unwrap_or_default();
        p.i += 1;
        n.and_then(|n| crate::schedule::duration(n, &unit))
            .filter(|d| !d.is_zero())
            .ok_or_else(|| {
                syntax(
                    p.toks.get(p.i - 1).copied(),
                    "expected a whole number and SECONDS, MINUTES, HOURS or DAYS",
                )
            })
    };
    if p.eat("TRIGGER") {
        p.expect("ON")?;
        p.expect("UPDATE")?;
        let at_most_every = if p.eat("AT") {
            p.expect("MOST")?;
            p.expect("EVERY")?;
            p.eat("INTERVAL");
            Some(number_unit(p)?)
        } else {
            None
        };
        return Ok(Schedule::OnUpdate { at_most_every });
    }
    p.expect("SCHEDULE")?;
    p.eat("REFRESH");
    if p.eat("EVERY") {
        return Ok(Schedule::Every(number_unit(p)?));
    }
    p.expect("CRON")?;
    let expr = p.quoted("the cron expression")?;
    let time_zone = if p.eat("AT") {
        p.expect("TIME")?;
        p.expect("ZONE")?;
        Some(p.quoted("the time zone")?)
    } else {
        None
    };
    let schedule = Schedule::Cron { expr, time_zone };
    schedule.check().map_err(QueryError::Invalid)?;
    Ok(schedule)
}

/// `('key' = 'value', ...)`: keys and values are quoted strings (or bare words and numbers).
fn property_list(p: &mut P<'_>) -> Result<BTreeMap<String, String>> {
    let text = |t: Option<&TokenWithSpan>| match t.map(|t| &t.token) {
        Some(Token::SingleQuotedString(s)) | Some(Token::DoubleQuotedString(s)) => Some(s.clone()),
        Some(Token::Number(n, _)) => Some(n.clone()),
        Some(Token::Word(w)) => Some(w.value.clone()),
        _ => None,
    };
    match p.next() {
        Some(TokenWithSpan {
            token: Token::LParen,
            ..
        }) => {}
        t => return Err(syntax(t, "expected `(` and the properties")),
    }
    let mut out = BTreeMap::new();
    loop {
        let k = text(p.peek()).ok_or_else(|| syntax(p.peek(), "expected a property name"))?;
        p.i += 1;
        // Dotted names may come as words and dots: pipelines.cdc.x
        let mut k = k;
        while p.peek().is_some_and(|t| t.token == Token::Period) {
            p.i += 1;
            k.push('.');
            k.push_str(&text(p.next()).ok_or_else(|| syntax(p.peek(), "expected a name part"))?);
        }
        match p.next() {
            Some(TokenWithSpan {
                token: Token::Eq, ..
            }) => {}
            t => return Err(syntax(t, "expected `=` after the property name")),
        }
        let v = text(p.peek()).ok_or_else(|| syntax(p.peek(), "expected a property value"))?;
        p.i += 1;
        out.insert(k, v);
        match p.next() {
            Some(TokenWithSpan {
                token: Token::Comma,
                ..
            }) => {}
            Some(TokenWithSpan {
                token: Token::RParen,
                ..
            }) => return Ok(out),
            t => return Err(syntax(t, "expected `,` or `)` in the properties")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::parse::{expr_sql, split, Cols, Source};
    use super::*;

    #[test]
    fn parses_the_reference_flow() {
        let sql = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/data/seed_bitemporal/flow.sql"
        ))
        .unwrap();
        let stmts = split(&sql).unwrap();
        assert_eq!(stmts.len(), 2);
        assert!(
            matches!(classify(&stmts[0]).unwrap(), Kind::StreamingTable { ref name, flow: None, .. } if name == "company_points")
        );
        let Kind::Flow(f) = classify(&stmts[1]).unwrap() else {
            panic!("a flow")
        };
        assert_eq!(
            (f.name.as_str(), f.target.as_str()),
            ("company_points_cdc", "company_points")
        );
        assert_eq!(f.source, Some(Source::Table("company_events".into())));
        assert_eq!(f.keys, ["CompanyId"]);
        assert_eq!(f.sequence_by, ["business_time"]);
        assert_eq!(f.system_sequence_by.as_deref(), Some("system_time"));
        assert_eq!(f.stored_as.as_deref(), Some("BITEMPORAL"));
        assert_eq!(
            f.columns,
            Some(Cols::Except(vec![
                "business_time".into(),
                "system_time".into(),
                "operation".into()
            ]))
        );
        assert_eq!(
            expr_sql(&f.delete_when.unwrap(), &[]),
            "operation = 'DELETE'"
        );
    }

    #[test]
    fn double_quoted_literals_and_errors_with_positions() {
        let stmts = split("CREATE FLOW f AS AUTO CDC INTO t FROM STREAM s KEYS (id) APPLY AS DELETE WHEN op = \"D\" AND (x > 1) SEQUENCE BY STRUCT(a, b) STORED AS SCD TYPE 2").unwrap();
        let Kind::Flow(f) = classify(&stmts[0]).unwrap() else {
            panic!()
        };
        assert_eq!(
            expr_sql(&f.delete_when.unwrap(), &["x".into()]),
            "op = 'D' AND (x > 1)"
        );
        assert_eq!(f.sequence_by, ["a", "b"]);
        assert_eq!(f.stored_as.as_deref(), Some("SCD2"));
        let e = classify(&split("CREATE FLOW f AS AUTO CDC INTO t FROM s KEYS id").unwrap()[0])
            .unwrap_err();
        assert!(e.to_string().contains("line 1, column 46"), "{e}");
        let e = classify(
            &split("CREATE FLOW f AS AUTO CDC INTO t FROM s KEYS (id) STORED AS SCD TYPE 3")
                .unwrap()[0],
        )
        .unwrap_err();
        assert!(e.to_string().contains("SCD TYPE 1 or SCD TYPE 2"), "{e}");
    }
}
