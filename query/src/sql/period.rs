//! Period predicates of SQL:2011 (as XTDB offers them): `PERIOD(s, e) OVERLAPS PERIOD(s2, e2)`,
//! `CONTAINS` (a period or a point), `PRECEDES`, `SUCCEEDS`, `IMMEDIATELY PRECEDES`, `IMMEDIATELY
//! SUCCEEDS` and `EQUALS`, over half-open periods `[s, e)` whose NULL end is open (true until
//! further notice, as `__END_AT` and `__SYSTEM_END_AT` are). Each is rewritten into the plain
//! comparisons it means before DataFusion reads the statement:
//!
//! | predicate | means |
//! |---|---|
//! | `P1 OVERLAPS P2` | `s1 < e2 AND s2 < e1` |
//! | `P1 CONTAINS P2` | `s1 <= s2 AND e2 <= e1` |
//! | `P1 CONTAINS x` | `s1 <= x AND x < e1` |
//! | `P1 PRECEDES P2` | `e1 <= s2` |
//! | `P1 SUCCEEDS P2` | `e2 <= s1` |
//! | `P1 IMMEDIATELY PRECEDES P2` | `e1 = s2` |
//! | `P1 IMMEDIATELY SUCCEEDS P2` | `e2 = s1` |
//! | `P1 EQUALS P2` | `s1 = s2 AND e1 = e2` |
//!
//! where an open end is greater than every time and equal only to another open end. The
//! comparisons they become are pushed into the storage scan where they bound an interval
//! (`pushdown.rs`).

use datafusion::sql::sqlparser::dialect::DatabricksDialect;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};

use super::parse::upper;
use crate::error::{QueryError, Result};

/// Words that end a point operand of `CONTAINS` at depth 0.
const ENDS: &[&str] = &[
    "AND",
    "OR",
    "THEN",
    "WHEN",
    "ELSE",
    "END",
    "ORDER",
    "GROUP",
    "LIMIT",
    "HAVING",
    "UNION",
    "EXCEPT",
    "INTERSECT",
    "AS",
    "IS",
    "NOT",
];

/// `sql` with its period predicates rewritten (unchanged if it has none).
pub(super) fn rewrite_periods(sql: &str) -> Result<String> {
    if !sql.to_uppercase().contains("PERIOD") {
        return Ok(sql.to_string());
    }
    let tokens = Tokenizer::new(&DatabricksDialect {}, sql)
        .tokenize()
        .map_err(|e| QueryError::Invalid(format!("cannot read the statement: {e}")))?;
    let mut out = String::with_capacity(sql.len());
    let mut i = 0;
    while i < tokens.len() {
        match period_at(&tokens, i)? {
            Some((left, next)) => {
                let (text, next) = predicate(&tokens, left, next)?;
                out.push_str(&text);
                i = next;
            }
            None => {
                out.push_str(&tokens[i].to_string());
                i += 1;
            }
        }
    }
    Ok(out)
}

/// The next significant token at or after `i`.
fn skip_ws(tokens: &[Token], mut i: usize) -> usize {
    while matches!(tokens.get(i), Some(Token::Whitespace(_))) {
        i += 1;
    }
    i
}

/// A period's start and end, as SQL text.
type Period = (String, String);

/// `PERIOD(s, e)` at `i`: its start and end, and the index after it.
fn period_at(tokens: &[Token], i: usize) -> Result<Option<(Period, usize)>> {
    let is_period = matches!(&tokens[i], Token::Word(w) if w.quote_style.is_none())
        && upper(&tokens[i]) == "PERIOD";
    let open = skip_ws(tokens, i + 1);
    if !is_period || tokens.get(open) != Some(&Token::LParen) {
        return Ok(None);
    }
    let mut depth = 0;
    let mut args = vec![String::new()];
    let mut j = open;
    loop {
        let Some(t) = tokens.get(j) else {
            return Err(QueryError::Invalid("PERIOD( without its `)`".into()));
        };
        j += 1;
        match t {
            Token::LParen => {
                depth += 1;
                if depth == 1 {
                    continue;
                }
            }
            Token::RParen => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            Token::Comma if depth == 1 => {
                args.push(String::new());
                continue;
            }
            _ => {}
        }
        args.last_mut().expect("one").push_str(&t.to_string());
    }
    match <[String; 2]>::try_from(args) {
        Ok([s, e]) if !s.trim().is_empty() && !e.trim().is_empty() => {
            Ok(Some(((s.trim().to_string(), e.trim().to_string()), j)))
        }
        _ => Err(QueryError::Invalid(
            "PERIOD takes a start and an end: PERIOD(__START_AT, __END_AT)".into(),
        )),
    }
}

/// The predicate whose left period is `p1` and whose operator starts at or after `i`: its text
/// and the index after it.
fn predicate(tokens: &[Token], p1: Period, i: usize) -> Result<(String, usize)> {
    let word = |i: usize| tokens.get(i).map(upper).unwrap_or_default();
    let mut j = skip_ws(tokens, i);
    let mut op = word(j);
    if op == "IMMEDIATELY" {
        j = skip_ws(tokens, j + 1);
        op = format!("IMMEDIATELY {}", word(j));
    }
    let known = [
        "OVERLAPS",
        "CONTAINS",
        "PRECEDES",
        "SUCCEEDS",
        "EQUALS",
        "IMMEDIATELY PRECEDES",
        "IMMEDIATELY SUCCEEDS",
    ];
    if !known.contains(&op.as_str()) {
        return Err(QueryError::Invalid(format!(
            "a PERIOD is compared with OVERLAPS, CONTAINS, PRECEDES, SUCCEEDS, EQUALS, IMMEDIATELY PRECEDES or IMMEDIATELY SUCCEEDS, not `{op}`"
        )));
    }
    let at = skip_ws(tokens, j + 1);
    let (s1, e1) = (format!("({})", p1.0), format!("({})", p1.1));
    // `x < e` and `e <= x` where `e` may be open.
    let before_end = |x: &str, e: &str| format!("({e} IS NULL OR {x} < {e})");
    let end_at_or_before = |e: &str, x: &str| format!("({e} IS NOT NULL AND {e} <= {x})");
    if let Some(((s2, e2), next)) = period_at(tokens, at)? {
        let (s2, e2) = (format!("({s2})"), format!("({e2})"));
        let text = match op.as_str() {
            "OVERLAPS" => format!("({} AND {})", before_end(&s1, &e2), before_end(&s2, &e1)),
            "CONTAINS" => format!(
                "({s1} <= {s2} AND ({e1} IS NULL OR {}))",
                end_at_or_before(&e2, &e1)
            ),
            "PRECEDES" => end_at_or_before(&e1, &s2),
            "SUCCEEDS" => end_at_or_before(&e2, &s1),
            "IMMEDIATELY PRECEDES" => format!("({e1} = {s2})"),
            "IMMEDIATELY SUCCEEDS" => format!("({e2} = {s1})"),
            _ => format!("({s1} = {s2} AND ({e1} = {e2} OR ({e1} IS NULL AND {e2} IS NULL)))"),
        };
        return Ok((text, next));
    }
    if op != "CONTAINS" {
        return Err(QueryError::Invalid(format!(
            "`PERIOD(...) {op}` compares with another PERIOD(start, end)"
        )));
    }
    // A point: the tokens up to the end of the operand.
    let mut depth = 0i32;
    let mut end = at;
    while let Some(t) = tokens.get(end) {
        match t {
            Token::LParen => depth += 1,
            Token::RParen if depth == 0 => break,
            Token::RParen => depth -= 1,
            Token::Comma | Token::SemiColon if depth == 0 => break,
            Token::Word(w)
                if depth == 0 && w.quote_style.is_none() && ENDS.contains(&upper(t).as_str()) =>
            {
                break
            }
            _ => {}
        }
        end += 1;
    }
    // The whitespace after the point stays where it is.
    while end > at && matches!(tokens[end - 1], Token::Whitespace(_)) {
        end -= 1;
    }
    let point: String = tokens[at..end].iter().map(Token::to_string).collect();
    if point.is_empty() {
        return Err(QueryError::Invalid(
            "`PERIOD(...) CONTAINS` needs a point in time or a PERIOD".into(),
        ));
    }
    let x = format!("({point})");
    Ok((format!("({s1} <= {x} AND {})", before_end(&x, &e1)), end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlaps_with_open_ends() {
        assert_eq!(
            rewrite_periods("WHERE PERIOD(a, b) OVERLAPS PERIOD(c, d) AND x").unwrap(),
            "WHERE (((d) IS NULL OR (a) < (d)) AND ((b) IS NULL OR (c) < (b))) AND x"
        );
    }

    #[test]
    fn contains_a_point_up_to_the_next_condition() {
        assert_eq!(
            rewrite_periods("WHERE PERIOD(s, e) CONTAINS TIMESTAMP '2024-01-01' AND k = 1").unwrap(),
            "WHERE ((s) <= (TIMESTAMP '2024-01-01') AND ((e) IS NULL OR (TIMESTAMP '2024-01-01') < (e))) AND k = 1"
        );
    }

    #[test]
    fn no_period_no_change_and_bad_ones_are_errors() {
        assert_eq!(
            rewrite_periods("SELECT period FROM t").unwrap(),
            "SELECT period FROM t"
        );
        assert!(rewrite_periods("WHERE PERIOD(a) OVERLAPS PERIOD(c, d)").is_err());
        assert!(rewrite_periods("WHERE PERIOD(a, b) TOUCHES PERIOD(c, d)").is_err());
        assert!(rewrite_periods("WHERE PERIOD(a, b) PRECEDES 3").is_err());
    }
}
