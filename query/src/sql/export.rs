//! `EXPORT [TABLE] t TO DELTA 'folder' [VERSION AS OF n]`, parsed: the table to write as a Delta
//! table (`commands.rs` runs it: [`crate::export_delta`]; docs/EXPORT.md).

use sqlparser::tokenizer::{Token, TokenWithSpan};

use super::parse::{syntax, P};
use crate::error::Result;

/// An `EXPORT` statement.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ExportAst {
    pub name: String,
    pub dir: String,
    pub version: Option<u64>,
}

/// The statement after `EXPORT`.
pub(super) fn parse(p: &mut P<'_>) -> Result<ExportAst> {
    p.eat("TABLE");
    let name = p.table_name("a table name")?;
    p.expect("TO")?;
    p.expect("DELTA")?;
    let dir = match p.next() {
        Some(TokenWithSpan {
            token: Token::SingleQuotedString(s),
            ..
        }) => s.clone(),
        t => {
            return Err(syntax(
                t,
                "expected the Delta table's folder, quoted: 'path'",
            ))
        }
    };
    let version = if p.eat("VERSION") {
        p.expect("AS")?;
        p.expect("OF")?;
        match p.next() {
            Some(TokenWithSpan {
                token: Token::Number(n, _),
                ..
            }) if n.parse::<u64>().is_ok() => n.parse::<u64>().ok(),
            t => return Err(syntax(t, "VERSION AS OF takes a commit version")),
        }
    } else {
        None
    };
    if let Some(t) = p.peek() {
        return Err(syntax(
            Some(t),
            "expected VERSION AS OF n or the end of the statement",
        ));
    }
    Ok(ExportAst { name, dir, version })
}
