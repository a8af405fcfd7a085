//! Identifiers match without regard to case, as in Databricks: a column created as `CompanyId` is
//! found as `companyid` or `COMPANYID`, and results keep the spelling it was created with.
//!
//! DataFusion matches identifiers exactly (asof turns its lower-casing off, so that `CompanyId`
//! stays `CompanyId`). So before a statement reaches it, every unquoted word that names a known
//! table, source, view or column in another case is replaced by that name, quoted. A word is left
//! as written when it matches a known name exactly, when two known names differ only in case
//! (which one is meant is for the writer to say, with backticks), when it calls a function
//! (`count(`), names an alias or a type (after `AS` or `::`), or starts a typed literal
//! (`TIMESTAMP '...'`).

use std::collections::HashMap;

use datafusion::sql::sqlparser::dialect::DatabricksDialect;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};

use super::parse::{quote_ident, upper};
use crate::error::{QueryError, Result};

/// Known names by their lower-case spelling; `None` when two spellings share it.
#[derive(Default)]
pub(super) struct Names {
    by_lower: HashMap<String, Option<String>>,
}

impl Names {
    /// Knowing `names`.
    pub fn of(names: &[String]) -> Names {
        let mut known = Names::default();
        for n in names {
            known.add(n);
        }
        known
    }

    /// Knows `name`, and each part of a qualified name (`sales.t`).
    pub fn add(&mut self, name: &str) {
        if name.contains('.') {
            for part in name.split('.') {
                self.add(part);
            }
        }
        let entry = self
            .by_lower
            .entry(name.to_lowercase())
            .or_insert_with(|| Some(name.to_string()));
        if entry.as_deref().is_some_and(|known| known != name) {
            *entry = None;
        }
    }

    /// The known spelling of `name`, if it has one other than its own, else `name`.
    pub fn spelling(&self, name: &str) -> String {
        self.by_lower
            .get(&name.to_lowercase())
            .and_then(Option::clone)
            .unwrap_or_else(|| name.to_string())
    }

    /// `sql` with the words that name a known name in another case replaced by that name.
    pub fn resolve(&self, sql: &str) -> Result<String> {
        let tokens = Tokenizer::new(&DatabricksDialect {}, sql)
            .tokenize()
            .map_err(|e| QueryError::Invalid(format!("cannot read the statement: {e}")))?;
        let sig: Vec<usize> = (0..tokens.len())
            .filter(|&i| !matches!(tokens[i], Token::Whitespace(_)))
            .collect();
        let mut out = String::with_capacity(sql.len());
        let mut next_sig = 0;
        for (i, t) in tokens.iter().enumerate() {
            let at = next_sig;
            if sig.get(at) == Some(&i) {
                next_sig += 1;
            }
            let replaced = match t {
                Token::Word(w) if w.quote_style.is_none() => {
                    let prev = at.checked_sub(1).map(|p| &tokens[sig[p]]);
                    let next = sig.get(at + 1).map(|&n| &tokens[n]);
                    // Not a call, a typed literal (`TIMESTAMP '...'`), an alias or a type
                    // (`AS date`, `::date`), an interval's unit (`INTERVAL '1' DAY`) or a field
                    // of `EXTRACT(YEAR FROM ts)`.
                    let call_or_literal =
                        matches!(next, Some(Token::LParen | Token::SingleQuotedString(_)));
                    let alias_type_or_unit = prev.is_some_and(|p| {
                        matches!(p, Token::DoubleColon | Token::SingleQuotedString(_))
                            || upper(p) == "AS"
                    });
                    let extract_field =
                        prev == Some(&Token::LParen) && next.is_some_and(|n| upper(n) == "FROM");
                    let names_something = !call_or_literal && !alias_type_or_unit && !extract_field;
                    self.by_lower
                        .get(&w.value.to_lowercase())
                        .and_then(Option::as_deref)
                        .filter(|known| names_something && *known != w.value)
                        .map(quote_ident)
                }
                _ => None,
            };
            match replaced {
                Some(r) => out.push_str(&r),
                None => out.push_str(&super::parse::sql_text(t)),
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Names {
        let mut n = Names::default();
        for name in ["CompanyId", "Points", "t", "ID", "Id", "Date"] {
            n.add(name);
        }
        n
    }

    #[test]
    fn words_in_another_case_become_the_known_name() {
        let sql = "SELECT companyid, POINTS FROM T WHERE companyId = 3 ORDER BY points";
        assert_eq!(
            names().resolve(sql).unwrap(),
            "SELECT `CompanyId`, `Points` FROM `t` WHERE `CompanyId` = 3 ORDER BY `Points`"
        );
    }

    #[test]
    fn calls_aliases_types_literals_and_ambiguous_words_stay() {
        let sql = "SELECT points(1), x AS points, CAST(y AS date), TIMESTAMP '2024-01-01', id, T.companyid FROM t";
        assert_eq!(
            names().resolve(sql).unwrap(),
            "SELECT points(1), x AS points, CAST(y AS date), TIMESTAMP '2024-01-01', id, `t`.`CompanyId` FROM t"
        );
        let sql = "SELECT EXTRACT(date FROM x), x + INTERVAL '1' date FROM t";
        assert_eq!(names().resolve(sql).unwrap(), sql);
    }
}
