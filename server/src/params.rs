//! A prepared statement's parameters (`?` in order, or `$1`, `$2`, ...), written into its text
//! as SQL literals of their Arrow types, so that every statement `asof sql` takes can have them.
//! Placeholders are found by the tokenizer asof's parser uses: a `?` in a string or a comment
//! is text, not a parameter.

use arrow::array::{Array, RecordBatch};
use arrow::datatypes::DataType;
use arrow::util::display::array_value_to_string;
use sqlparser::dialect::DatabricksDialect;
use sqlparser::tokenizer::{Location, Token, Tokenizer};

/// `sql` with its placeholders replaced by the values of row `row` of `params`, one column per
/// parameter. An error says which parameter, or what does not match.
pub(crate) fn bind(sql: &str, params: &RecordBatch, row: usize) -> Result<String, String> {
    let tokens = Tokenizer::new(&DatabricksDialect {}, sql)
        .tokenize_with_location()
        .map_err(|e| format!("the statement does not read as SQL: {e}"))?;
    let lines = line_starts(sql);
    let mut out = String::with_capacity(sql.len());
    let mut copied = 0;
    let mut next = 0;
    for t in &tokens {
        let Token::Placeholder(p) = &t.token else {
            continue;
        };
        let index = match p.strip_prefix('$') {
            _ if p == "?" => {
                next += 1;
                next - 1
            }
            Some(n) => n
                .parse::<usize>()
                .ok()
                .filter(|&n| n >= 1)
                .map(|n| n - 1)
                .ok_or_else(|| format!("parameter `{p}`: parameters are `?` or `$1`, `$2`, ..."))?,
            None => {
                return Err(format!(
                    "parameter `{p}`: named parameters are not supported; use `?` or `$1`"
                ))
            }
        };
        let column = params.columns().get(index).ok_or_else(|| {
            format!(
                "parameter {} has no value: the client bound {} parameter{}",
                index + 1,
                params.num_columns(),
                if params.num_columns() == 1 { "" } else { "s" }
            )
        })?;
        let start = offset(sql, &lines, t.span.start);
        let end = offset(sql, &lines, t.span.end);
        out.push_str(&sql[copied..start]);
        // Spaced, so that a value never fuses with what is next to it: `2-?` with -1 must not
        // become `2--1`, a comment.
        out.push(' ');
        out.push_str(
            &literal(column.as_ref(), row).map_err(|e| format!("parameter {}: {e}", index + 1))?,
        );
        out.push(' ');
        copied = end;
    }
    out.push_str(&sql[copied..]);
    Ok(out)
}

/// How many parameters `sql` takes: the number of `?`, or the highest `$n`.
pub(crate) fn count(sql: &str) -> Result<usize, String> {
    let tokens = Tokenizer::new(&DatabricksDialect {}, sql)
        .tokenize()
        .map_err(|e| format!("the statement does not read as SQL: {e}"))?;
    let (mut questions, mut highest) = (0, 0);
    for t in tokens {
        if let Token::Placeholder(p) = t {
            match p.strip_prefix('$').and_then(|n| n.parse::<usize>().ok()) {
                Some(n) => highest = highest.max(n),
                None => questions += 1,
            }
        }
    }
    Ok(questions.max(highest))
}

/// Where each line of `sql` starts, in bytes.
fn line_starts(sql: &str) -> Vec<usize> {
    std::iter::once(0)
        .chain(sql.match_indices('\n').map(|(i, _)| i + 1))
        .collect()
}

/// The byte offset of a tokenizer location (1-based line and column, in characters).
fn offset(sql: &str, lines: &[usize], at: Location) -> usize {
    let start = lines[(at.line as usize).saturating_sub(1).min(lines.len() - 1)];
    sql[start..]
        .char_indices()
        .nth((at.column as usize).saturating_sub(1))
        .map_or(sql.len(), |(i, _)| start + i)
}

/// Value `row` of `a` as a SQL literal of its type.
fn literal(a: &dyn Array, row: usize) -> Result<String, String> {
    if a.is_null(row) {
        return Ok("NULL".to_string());
    }
    if let DataType::Dictionary(_, values) = a.data_type() {
        // Some clients send strings dictionary-encoded: the value is what counts.
        let plain = arrow::compute::cast(a, values).map_err(|e| e.to_string())?;
        return literal(plain.as_ref(), row);
    }
    let text = || array_value_to_string(a, row).map_err(|e| e.to_string());
    let quoted = |s: &str| format!("'{}'", s.replace('\'', "''"));
    Ok(match a.data_type() {
        DataType::Boolean
        | DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::UInt8
        | DataType::UInt16
        | DataType::UInt32
        | DataType::UInt64 => text()?,
        // As text, so that NaN and the infinities read back too.
        DataType::Float32 | DataType::Float64 => format!("CAST({} AS DOUBLE)", quoted(&text()?)),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => quoted(&text()?),
        DataType::Date32 | DataType::Date64 => format!("DATE {}", quoted(&text()?)),
        DataType::Timestamp(_, _) => format!("TIMESTAMP {}", quoted(&text()?)),
        DataType::Decimal128(p, s) | DataType::Decimal256(p, s) => {
            format!("CAST({} AS DECIMAL({p}, {s}))", quoted(&text()?))
        }
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => {
            let bytes = text()?;
            format!("X{}", quoted(&bytes))
        }
        other => {
            return Err(format!(
                "values of type {other} are not supported as parameters"
            ))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{
        ArrayRef, Float64Array, Int64Array, StringArray, TimestampMicrosecondArray,
    };
    use std::sync::Arc;

    fn params(columns: Vec<ArrayRef>) -> RecordBatch {
        RecordBatch::try_from_iter(
            columns
                .into_iter()
                .enumerate()
                .map(|(i, c)| (format!("p{i}"), c)),
        )
        .unwrap()
    }

    #[test]
    fn placeholders_become_literals_and_text_stays_text() {
        let p = params(vec![
            Arc::new(Int64Array::from(vec![Some(7), None])),
            Arc::new(StringArray::from(vec!["O'Brien", "x"])),
        ]);
        let sql = "SELECT '?', x -- is it ?\nFROM t WHERE id = ? AND name = ?";
        assert_eq!(
            bind(sql, &p, 0).unwrap(),
            "SELECT '?', x -- is it ?\nFROM t WHERE id =  7  AND name =  'O''Brien' "
        );
        assert_eq!(
            bind(sql, &p, 1).unwrap(),
            "SELECT '?', x -- is it ?\nFROM t WHERE id =  NULL  AND name =  'x' "
        );
    }

    #[test]
    fn numbered_placeholders_pick_their_column_and_times_keep_their_type() {
        let p = params(vec![
            Arc::new(TimestampMicrosecondArray::from(vec![1_735_689_600_000_000])),
            Arc::new(Float64Array::from(vec![f64::NAN])),
        ]);
        assert_eq!(
            bind("SELECT * FROM t FOR SYSTEM_TIME AS OF $1 WHERE v <> $2 OR w = $1", &p, 0).unwrap(),
            "SELECT * FROM t FOR SYSTEM_TIME AS OF  TIMESTAMP '2025-01-01T00:00:00'  WHERE v <>  CAST('NaN' AS DOUBLE)  OR w =  TIMESTAMP '2025-01-01T00:00:00' "
        );
    }

    #[test]
    fn parameters_are_counted_as_bind_reads_them() {
        assert_eq!(count("SELECT ? , '?' -- ?\n, ?").unwrap(), 2);
        assert_eq!(count("SELECT $2, $1, $2").unwrap(), 2);
        assert_eq!(count("SELECT 1").unwrap(), 0);
    }

    #[test]
    fn a_negative_value_after_a_minus_stays_a_value_not_a_comment() {
        let p = params(vec![Arc::new(Int64Array::from(vec![-1]))]);
        let bound = bind("SELECT 2-? AS x WHERE owner = 'me'", &p, 0).unwrap();
        assert_eq!(bound, "SELECT 2- -1  AS x WHERE owner = 'me'");
        assert_eq!(bind("SELECT -?", &p, 0).unwrap(), "SELECT - -1 ");
    }

    #[test]
    fn a_missing_or_named_parameter_is_refused_saying_which() {
        let p = params(vec![Arc::new(Int64Array::from(vec![1]))]);
        assert_eq!(
            bind("SELECT ?, ?", &p, 0).unwrap_err(),
            "parameter 2 has no value: the client bound 1 parameter"
        );
        assert!(bind("SELECT $0", &p, 0)
            .unwrap_err()
            .contains("parameters are `?` or `$1`"));
    }
}
