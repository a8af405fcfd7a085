//! The AUTO CDC dialect's pieces: statement splitting, the token cursor, and the flow grammar of
//! Databricks (`... AUTO CDC INTO t FROM stream(s) KEYS (...) ...`). [`super::statement`] says
//! what each statement is with them.

use sqlparser::dialect::DatabricksDialect;
use sqlparser::tokenizer::{Token, TokenWithSpan, Tokenizer};

use crate::error::{QueryError, Result};
use crate::files::FileSource;

/// One statement of a script: its tokens (whitespace included) and its text.
#[derive(Clone, Debug)]
pub(crate) struct Stmt {
    pub tokens: Vec<TokenWithSpan>,
}

impl Stmt {
    /// The significant tokens (no whitespace or comments).
    pub fn words(&self) -> Vec<&TokenWithSpan> {
        self.tokens
            .iter()
            .filter(|t| !matches!(t.token, Token::Whitespace(_)))
            .collect()
    }

    /// The first `n` significant tokens, upper-cased when they are words.
    pub fn head(&self, n: usize) -> Vec<String> {
        self.words()
            .iter()
            .take(n)
            .map(|t| upper(&t.token))
            .collect()
    }

    /// The line the statement starts on, from 1.
    pub fn line(&self) -> u64 {
        self.words().first().map_or(1, |t| t.span.start.line)
    }
}

pub(crate) fn upper(t: &Token) -> String {
    match t {
        Token::Word(w) if w.quote_style.is_none() => w.value.to_uppercase(),
        other => other.to_string(),
    }
}

pub(super) fn syntax(t: Option<&TokenWithSpan>, msg: impl std::fmt::Display) -> QueryError {
    match t {
        Some(t) => QueryError::Invalid(format!(
            "syntax error at line {}, column {}: {msg} (found `{}`)",
            t.span.start.line, t.span.start.column, t.token
        )),
        None => QueryError::Invalid(format!("syntax error at the end of the statement: {msg}")),
    }
}

/// Splits a script into statements at `;`.
pub(crate) fn split(sql: &str) -> Result<Vec<Stmt>> {
    let tokens = Tokenizer::new(&DatabricksDialect {}, sql)
        .tokenize_with_location()
        .map_err(|e| QueryError::Invalid(format!("syntax error: {e}")))?;
    let mut out = Vec::new();
    let mut cur = Vec::new();
    for t in tokens {
        if t.token == Token::SemiColon {
            out.push(Stmt {
                tokens: std::mem::take(&mut cur),
            });
        } else {
            cur.push(t);
        }
    }
    out.push(Stmt { tokens: cur });
    Ok(out.into_iter().filter(|s| !s.words().is_empty()).collect())
}

/// A column list clause: all, these, or all but these.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Cols {
    All,
    Only(Vec<String>),
    Except(Vec<String>),
}

/// Where a flow reads from.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Source {
    Table(String),
    /// `read_files(...)`, or `stream(read_files(...))`.
    Files(FileSource),
    /// `SNAPSHOT t`: a table of full snapshots, told apart by the `SEQUENCE BY` column.
    Snapshots(String),
    /// `SNAPSHOT read_files('folder', ...)`: each file one full snapshot.
    SnapshotFiles(FileSource),
}

/// A parsed AUTO CDC flow.
#[derive(Clone, Debug, Default)]
pub(crate) struct FlowAst {
    pub name: String,
    /// `AUTO CDC ONCE`: processed when created and on a full refresh only.
    pub once: bool,
    pub target: String,
    pub source: Option<Source>,
    pub keys: Vec<String>,
    pub sequence_by: Vec<String>,
    pub system_sequence_by: Option<String>,
    pub stored_as: Option<String>,
    pub delete_when: Option<Vec<TokenWithSpan>>,
    pub truncate_when: Option<Vec<TokenWithSpan>>,
    pub ignore_null_updates: Option<Cols>,
    pub columns: Option<Cols>,
    pub track_history: Option<Cols>,
    pub columns_to_update: Option<String>,
    /// `CREATE FLOW f COMMENT '...' AS ...`.
    pub comment: Option<String>,
    /// `FROM stream(t) WITH (skipChangeCommits = true)`.
    pub change_commits: asof_storage::ChangeCommits,
}

pub(super) struct P<'a> {
    pub toks: Vec<&'a TokenWithSpan>,
    pub i: usize,
}

const CLAUSES: &[&str] = &[
    "KEYS", "IGNORE", "APPLY", "SEQUENCE", "SYSTEM", "COLUMNS", "STORED", "TRACK",
];

impl<'a> P<'a> {
    pub fn peek(&self) -> Option<&'a TokenWithSpan> {
        self.toks.get(self.i).copied()
    }
    pub fn peek_upper(&self) -> Option<String> {
        self.peek().map(|t| upper(&t.token))
    }
    pub fn next(&mut self) -> Option<&'a TokenWithSpan> {
        let t = self.peek();
        self.i += 1;
        t
    }
    pub fn eat(&mut self, kw: &str) -> bool {
        if self.peek_upper().as_deref() == Some(kw) {
            self.i += 1;
            true
        } else {
            false
        }
    }
    pub fn expect(&mut self, kw: &str) -> Result<()> {
        if self.eat(kw) {
            Ok(())
        } else {
            Err(syntax(self.peek(), format!("expected {kw}")))
        }
    }
    pub fn ident(&mut self, what: &str) -> Result<String> {
        match self.next() {
            Some(TokenWithSpan {
                token: Token::Word(w),
                ..
            }) => {
                let mut name = w.value.clone();
                // Qualified names keep their last part.
                while self.peek().is_some_and(|t| t.token == Token::Period) {
                    self.i += 1;
                    match self.next() {
                        Some(TokenWithSpan {
                            token: Token::Word(w),
                            ..
                        }) => name = w.value.clone(),
                        t => return Err(syntax(t, format!("expected {what}"))),
                    }
                }
                Ok(name)
            }
            t => Err(syntax(t, format!("expected {what}"))),
        }
    }
    /// A table's name as written: one to three parts (`t`, `schema.t`, `catalog.schema.t`),
    /// joined by `.` (see `namespace.rs` for how the session reads them).
    pub fn table_name(&mut self, what: &str) -> Result<String> {
        let mut parts = Vec::new();
        loop {
            match self.next() {
                Some(TokenWithSpan {
                    token: Token::Word(w),
                    ..
                }) if !w.value.contains('.') => parts.push(w.value.clone()),
                Some(
                    t @ TokenWithSpan {
                        token: Token::Word(_),
                        ..
                    },
                ) => return Err(syntax(Some(t), "a name's parts cannot hold `.`")),
                t => return Err(syntax(t, format!("expected {what}"))),
            }
            if self.peek().is_none_or(|t| t.token != Token::Period) || parts.len() == 3 {
                break;
            }
            self.i += 1;
        }
        Ok(parts.join("."))
    }
    /// The end of the statement.
    pub fn end(&self) -> Result<()> {
        match self.peek() {
            Some(t) => Err(syntax(Some(t), "expected the end of the statement")),
            None => Ok(()),
        }
    }
    /// A string in single or double quotes.
    pub fn quoted(&mut self, what: &str) -> Result<String> {
        match self.next() {
            Some(TokenWithSpan {
                token: Token::SingleQuotedString(s) | Token::DoubleQuotedString(s),
                ..
            }) => Ok(s.clone()),
            t => Err(syntax(t, format!("expected {what} in quotes"))),
        }
    }
    pub fn ident_list(&mut self, what: &str) -> Result<Vec<String>> {
        if self.peek().is_none_or(|t| t.token != Token::LParen) {
            return Err(syntax(self.peek(), "expected `(`"));
        }
        self.i += 1;
        let mut out = vec![self.ident(what)?];
        loop {
            match self.next() {
                Some(TokenWithSpan {
                    token: Token::Comma,
                    ..
                }) => out.push(self.ident(what)?),
                Some(TokenWithSpan {
                    token: Token::RParen,
                    ..
                }) => return Ok(out),
                t => return Err(syntax(t, "expected `,` or `)`")),
            }
        }
    }
    /// `(a, b)` or `* EXCEPT (a, b)` (or a bare `*`).
    pub fn cols(&mut self) -> Result<Cols> {
        if self.peek().is_some_and(|t| t.token == Token::Mul) {
            self.i += 1;
            if self.eat("EXCEPT") {
                return Ok(Cols::Except(self.ident_list("a column")?));
            }
            return Ok(Cols::All);
        }
        Ok(Cols::Only(self.ident_list("a column")?))
    }
    /// The tokens of an expression, up to the next clause keyword at depth 0.
    pub fn expr(&mut self, all: &'a [TokenWithSpan]) -> Result<Vec<TokenWithSpan>> {
        let start = self.i;
        let mut depth = 0i32;
        while let Some(t) = self.peek() {
            match &t.token {
                Token::LParen => depth += 1,
                Token::RParen => depth -= 1,
                _ if depth == 0 && CLAUSES.contains(&upper(&t.token).as_str()) => break,
                _ => {}
            }
            self.i += 1;
        }
        if self.i == start {
            return Err(syntax(self.peek(), "expected an expression"));
        }
        // Keep the original whitespace between the expression's first and last tokens.
        let (first, last) = (self.toks[start], self.toks[self.i - 1]);
        let a = all
            .iter()
            .position(|t| std::ptr::eq(t, first))
            .expect("token of this statement");
        let b = all
            .iter()
            .position(|t| std::ptr::eq(t, last))
            .expect("token of this statement");
        Ok(all[a..=b].to_vec())
    }
}

/// `FROM source KEYS (...) clauses...`
pub(super) fn flow_body<'a>(
    p: &mut P<'a>,
    all: &'a [TokenWithSpan],
    ast: &mut FlowAst,
) -> Result<()> {
    if ast.source.is_none() {
        p.expect("FROM")?;
        ast.source = Some(source(p)?);
        // `FROM stream(t) WITH (skipChangeCommits = true)`.
        if p.peek_upper().as_deref() == Some("WITH")
            && p.toks
                .get(p.i + 1)
                .is_some_and(|t| t.token == Token::LParen)
        {
            let (options, next) = stream_options(&p.toks, p.i + 2)?;
            p.i = next;
            ast.change_commits = match (options.get("skipchangecommits"), options.len()) {
                (Some(v), 1) if v == "true" => asof_storage::ChangeCommits::Skip,
                (Some(v), 1) if v == "false" => asof_storage::ChangeCommits::Read,
                _ => {
                    return Err(QueryError::Invalid(format!(
                        "an AUTO CDC flow's source takes WITH (skipChangeCommits = true | false), not {:?}",
                        options
                    )))
                }
            };
        }
    }
    while let Some(t) = p.peek() {
        match upper(&t.token).as_str() {
            "KEYS" => {
                p.i += 1;
                ast.keys = p.ident_list("a key column")?;
            }
            "IGNORE" => {
                p.i += 1;
                p.expect("NULL")?;
                p.expect("UPDATES")?;
                ast.ignore_null_updates = Some(if p.eat("ON") { p.cols()? } else { Cols::All });
            }
            "APPLY" => {
                p.i += 1;
                p.expect("AS")?;
                if p.eat("DELETE") {
                    p.expect("WHEN")?;
                    ast.delete_when = Some(p.expr(all)?);
                } else if p.eat("TRUNCATE") {
                    p.expect("WHEN")?;
                    ast.truncate_when = Some(p.expr(all)?);
                } else {
                    return Err(syntax(p.peek(), "expected DELETE or TRUNCATE"));
                }
            }
            "SEQUENCE" => {
                p.i += 1;
                p.expect("BY")?;
                ast.sequence_by = if p.eat("STRUCT") {
                    p.ident_list("a sequence column")?
                } else {
                    vec![p.ident("a sequence column")?]
                };
            }
            "SYSTEM" => {
                p.i += 1;
                p.expect("SEQUENCE")?;
                p.expect("BY")?;
                ast.system_sequence_by = Some(p.ident("a system sequence column")?);
            }
            "COLUMNS" => {
                p.i += 1;
                if p.eat("TO") {
                    p.expect("UPDATE")?;
                    ast.columns_to_update = Some(p.ident("a column")?);
                } else {
                    ast.columns = Some(p.cols()?);
                }
            }
            "STORED" => {
                p.i += 1;
                p.expect("AS")?;
                ast.stored_as = Some(if p.eat("BITEMPORAL") {
                    "BITEMPORAL".into()
                } else {
                    p.expect("SCD")?;
                    p.expect("TYPE")?;
                    match p.next() {
                        Some(TokenWithSpan {
                            token: Token::Number(n, _),
                            ..
                        }) if n == "1" || n == "2" => format!("SCD{n}"),
                        t => return Err(syntax(t, "expected SCD TYPE 1 or SCD TYPE 2")),
                    }
                });
            }
            "TRACK" => {
                p.i += 1;
                p.expect("HISTORY")?;
                p.expect("ON")?;
                ast.track_history = Some(p.cols()?);
            }
            _ => {
                return Err(syntax(
                    Some(t),
                    "expected a flow clause (KEYS, SEQUENCE BY, APPLY AS, COLUMNS, STORED AS, ...)",
                ))
            }
        }
    }
    Ok(())
}

/// After `SNAPSHOT`: a table of snapshots, or `read_files(...)` of a folder of them.
pub(super) fn snapshot_source(p: &mut P<'_>) -> Result<Source> {
    if p.peek_upper().as_deref() == Some("READ_FILES") {
        p.i += 1;
        let (files, next) = read_files_args(&p.toks, p.i)?;
        p.i = next;
        return Ok(Source::SnapshotFiles(files));
    }
    Ok(Source::Snapshots(p.table_name("a snapshot table")?))
}

/// `stream(t)`, `STREAM t`, `stream(read_files(...))`, `read_files(...)` or `t`.
fn source(p: &mut P<'_>) -> Result<Source> {
    let paren = |p: &P<'_>| p.peek().is_some_and(|t| t.token == Token::LParen);
    let mut wrapped = false;
    if p.peek_upper().as_deref() == Some("STREAM") {
        p.i += 1;
        if paren(p) {
            p.i += 1;
            wrapped = true;
        }
    }
    if !wrapped && p.eat("SNAPSHOT") {
        return snapshot_source(p);
    }
    let src = if p.peek_upper().as_deref() == Some("READ_FILES") {
        p.i += 1;
        let (files, next) = read_files_args(&p.toks, p.i)?;
        p.i = next;
        Source::Files(files)
    } else {
        Source::Table(p.table_name("a source table")?)
    };
    if wrapped {
        match p.next() {
            Some(TokenWithSpan {
                token: Token::RParen,
                ..
            }) => {}
            t => return Err(syntax(t, "expected `)`")),
        }
    }
    Ok(src)
}

/// The arguments of `read_files('path', name => value, ...)`, starting at the `(` at significant
/// token `i`; returns the source and the index after the `)`.
pub(crate) fn read_files_args(
    toks: &[&TokenWithSpan],
    mut i: usize,
) -> Result<(FileSource, usize)> {
    let at = |i: usize| toks.get(i).copied();
    if at(i).map(|t| &t.token) != Some(&Token::LParen) {
        return Err(syntax(at(i), "expected `(` after read_files"));
    }
    i += 1;
    let path = match at(i).map(|t| &t.token) {
        Some(Token::SingleQuotedString(s)) => s.clone(),
        _ => {
            return Err(syntax(
                at(i),
                "read_files takes a path in single quotes first",
            ))
        }
    };
    i += 1;
    let mut src = FileSource::new(path);
    loop {
        match at(i).map(|t| &t.token) {
            Some(Token::RParen) => return Ok((src, i + 1)),
            Some(Token::Comma) => i += 1,
            _ => return Err(syntax(at(i), "expected `,` or `)` in read_files(...)")),
        }
        let name = match at(i).map(|t| &t.token) {
            Some(Token::Word(w)) => w.value.clone(),
            _ => return Err(syntax(at(i), "expected an option name")),
        };
        if at(i + 1).map(|t| &t.token) != Some(&Token::RArrow) {
            return Err(syntax(at(i + 1), "expected `=>` after the option name"));
        }
        let value = match at(i + 2).map(|t| &t.token) {
            Some(Token::SingleQuotedString(s)) => s.clone(),
            Some(Token::Word(w)) => w.value.clone(),
            Some(Token::Number(n, _)) => n.clone(),
            _ => return Err(syntax(at(i + 2), "expected the option's value")),
        };
        src.set_option(&name, &value)?;
        i += 3;
    }
}

/// The text of `all` from token `first` (one of them) to the end.
pub(super) fn text_from_token(all: &[TokenWithSpan], first: &TokenWithSpan) -> String {
    let at = all
        .iter()
        .position(|t| std::ptr::eq(t, first))
        .expect("token of this statement");
    all[at..].iter().map(|t| sql_text(&t.token)).collect()
}

/// A token as SQL text that reads back as the same token. sqlparser's `Display` writes a string's
/// value between quotes as it is, so `'it''s'`, read as `it's`, came back as `'it's'`: the quote
/// inside is doubled here.
pub(crate) fn sql_text(t: &Token) -> String {
    match t {
        Token::SingleQuotedString(s) => format!("'{}'", s.replace('\'', "''")),
        Token::DoubleQuotedString(s) => format!("\"{}\"", s.replace('"', "\"\"")),
        other => other.to_string(),
    }
}

/// `name` as a quoted identifier of the dialect (Databricks: backticks, doubled inside).
pub(crate) fn quote_ident(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

/// The SQL text of a flow condition's tokens. Databricks reads `operation = "DELETE"` as a
/// string; a double-quoted word that names a source column (as standard SQL would read it) is
/// kept as that column, so both spellings of a condition work.
pub(crate) fn expr_sql(tokens: &[TokenWithSpan], columns: &[String]) -> String {
    tokens
        .iter()
        .map(|t| match &t.token {
            Token::DoubleQuotedString(s) if columns.contains(s) => quote_ident(s),
            Token::DoubleQuotedString(s) => format!("'{}'", s.replace('\'', "''")),
            other => sql_text(other),
        })
        .collect()
}

/// `name = value, ...)` from `i` (just after `WITH (`): the options by lower-case name, and the
/// index after the `)`.
pub(crate) fn stream_options(
    words: &[&TokenWithSpan],
    mut i: usize,
) -> Result<(std::collections::BTreeMap<String, String>, usize)> {
    let bad = || QueryError::Invalid("STREAM(t) WITH (name = value, ...)".into());
    let mut out = std::collections::BTreeMap::new();
    loop {
        let name = match words.get(i).map(|t| &t.token) {
            Some(Token::Word(w)) => w.value.to_lowercase(),
            Some(Token::SingleQuotedString(s)) => s.to_lowercase(),
            _ => return Err(bad()),
        };
        if words.get(i + 1).map(|t| &t.token) != Some(&Token::Eq) {
            return Err(bad());
        }
        let value = match words.get(i + 2).map(|t| &t.token) {
            Some(Token::Word(w)) => w.value.to_lowercase(),
            Some(Token::Number(n, _)) => n.clone(),
            Some(Token::SingleQuotedString(s) | Token::DoubleQuotedString(s)) => s.to_lowercase(),
            _ => return Err(bad()),
        };
        out.insert(name, value);
        i += 3;
        match words.get(i).map(|t| &t.token) {
            Some(Token::Comma) => i += 1,
            Some(Token::RParen) => return Ok((out, i + 1)),
            _ => return Err(bad()),
        }
    }
}
