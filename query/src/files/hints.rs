//! `schemaHints => 'a INT, b STRING'`: column types given by name, which replace the inferred
//! ones (a column no file has is added). Types are the SQL names Databricks uses.

use arrow::datatypes::{DataType, Field, TimeUnit};
use sqlparser::dialect::DatabricksDialect;
use sqlparser::parser::Parser;
use sqlparser::tokenizer::Token;

use crate::error::{QueryError, Result};

/// The columns `text` gives types to, in order.
pub(super) fn parse(text: &str) -> Result<Vec<Field>> {
    let bad =
        |what: String| QueryError::Invalid(format!("read_files option `schemaHints`: {what}"));
    let dialect = DatabricksDialect {};
    let mut p = Parser::new(&dialect)
        .try_with_sql(text)
        .map_err(|e| bad(e.to_string()))?;
    let mut out: Vec<Field> = Vec::new();
    loop {
        let name = p
            .parse_identifier()
            .map_err(|e| bad(format!("expected a column name: {e}")))?
            .value;
        let ty = p
            .parse_data_type()
            .map_err(|e| bad(format!("expected the type of `{name}`: {e}")))?;
        let ty = arrow_type(&ty.to_string())
            .ok_or_else(|| bad(format!("`{name}`: asof does not store type {ty}")))?;
        if out.iter().any(|f| f.name().eq_ignore_ascii_case(&name)) {
            return Err(bad(format!("column `{name}` is given twice")));
        }
        out.push(Field::new(name, ty, true));
        if !p.consume_token(&Token::Comma) {
            break;
        }
    }
    match p.peek_token().token {
        Token::EOF => Ok(out),
        t => Err(bad(format!("expected `,` between columns, found `{t}`"))),
    }
}

/// The Arrow type of SQL type `sql` (as sqlparser prints it).
fn arrow_type(sql: &str) -> Option<DataType> {
    let upper = sql.to_ascii_uppercase();
    if let Some(args) = upper
        .strip_prefix("DECIMAL")
        .or_else(|| upper.strip_prefix("NUMERIC"))
        .or_else(|| upper.strip_prefix("DEC"))
    {
        let args = args.trim().trim_start_matches('(').trim_end_matches(')');
        let mut parts = args.split(',').map(|s| s.trim().parse::<u8>());
        let precision = parts.next().and_then(|p| p.ok()).unwrap_or(10);
        let scale = parts.next().and_then(|s| s.ok()).unwrap_or(0);
        return (1..=38)
            .contains(&precision)
            .then_some(DataType::Decimal128(precision, scale as i8))
            .filter(|_| scale <= precision);
    }
    let base = upper.split('(').next().unwrap_or_default().trim();
    Some(match base {
        "TINYINT" | "BYTE" => DataType::Int8,
        "SMALLINT" | "SHORT" => DataType::Int16,
        "INT" | "INTEGER" => DataType::Int32,
        "BIGINT" | "LONG" => DataType::Int64,
        "FLOAT" | "REAL" => DataType::Float32,
        "DOUBLE" | "DOUBLE PRECISION" => DataType::Float64,
        "STRING" | "VARCHAR" | "CHAR" | "TEXT" => DataType::Utf8,
        "BOOLEAN" | "BOOL" => DataType::Boolean,
        "DATE" => DataType::Date32,
        "TIMESTAMP" | "TIMESTAMP_NTZ" => DataType::Timestamp(TimeUnit::Microsecond, None),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints_give_types_by_name_and_bad_ones_are_named() {
        let f = parse("id BIGINT, `Amount` DECIMAL(12, 2), seen TIMESTAMP, ok BOOLEAN").unwrap();
        let got: Vec<_> = f
            .iter()
            .map(|f| (f.name().as_str(), f.data_type().clone()))
            .collect();
        assert_eq!(
            got,
            [
                ("id", DataType::Int64),
                ("Amount", DataType::Decimal128(12, 2)),
                ("seen", DataType::Timestamp(TimeUnit::Microsecond, None)),
                ("ok", DataType::Boolean),
            ]
        );
        for (text, says) in [
            ("id", "expected the type of `id`"),
            ("id INT id2 INT", "expected `,` between columns"),
            ("id INT, ID STRING", "column `ID` is given twice"),
            ("m MAP<STRING, INT>", "does not store type"),
            ("", "expected a column name"),
        ] {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.contains(says), "{text}: {e}");
        }
    }
}
