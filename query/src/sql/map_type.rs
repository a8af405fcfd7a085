//! `MAP<K, V>` in a column list. DataFusion's SQL planner has no map type, so a column list is
//! read with each `MAP<K, V>` written as `STRUCT<__asof_map_key: K, __asof_map_value: V>`, and
//! the structs of that shape are made maps again in the schema it gives.

use std::sync::Arc;

use arrow::datatypes::{DataType, Field, FieldRef, Schema, SchemaRef};
use datafusion::sql::sqlparser::dialect::DatabricksDialect;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};

use super::parse::upper;
use crate::error::{QueryError, Result};

const KEY: &str = "__asof_map_key";
const VALUE: &str = "__asof_map_value";

/// `ddl` with every `MAP<K, V>` written as a struct of its key and value.
pub(super) fn maps_as_structs(ddl: &str) -> Result<String> {
    let tokens = Tokenizer::new(&DatabricksDialect {}, ddl)
        .tokenize()
        .map_err(|e| QueryError::Invalid(format!("cannot read the statement: {e}")))?;
    let mut out = String::with_capacity(ddl.len());
    // For each open `MAP<`, the depth of angle brackets its comma is at.
    let mut open: Vec<i32> = Vec::new();
    let mut depth = 0;
    let mut i = 0;
    while i < tokens.len() {
        let t = &tokens[i];
        // `MAP <`, spaces or not between them.
        let lt = (i + 1..tokens.len()).find(|&j| !matches!(tokens[j], Token::Whitespace(_)));
        let map_opens = upper(t) == "MAP"
            && matches!(t, Token::Word(w) if w.quote_style.is_none())
            && lt.is_some_and(|j| tokens[j] == Token::Lt);
        if let (true, Some(lt)) = (map_opens, lt) {
            depth += 1;
            open.push(depth);
            out.push_str(&format!("STRUCT<{KEY}: "));
            i = lt + 1;
            continue;
        }
        match t {
            Token::Lt => depth += 1,
            Token::Gt => depth -= 1,
            Token::ShiftRight => depth -= 2,
            Token::Comma if open.last() == Some(&depth) => {
                open.pop();
                out.push_str(&format!(", {VALUE}:"));
                i += 1;
                continue;
            }
            _ => {}
        }
        out.push_str(&super::parse::sql_text(t));
        i += 1;
    }
    Ok(out)
}

/// `schema` with each struct of a key and a value (see [`maps_as_structs`]) made a map.
pub(super) fn structs_as_maps(schema: &SchemaRef) -> SchemaRef {
    let fields: Vec<FieldRef> = schema.fields().iter().map(field).collect();
    Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()))
}

fn field(f: &FieldRef) -> FieldRef {
    Arc::new(f.as_ref().clone().with_data_type(data_type(f.data_type())))
}

fn data_type(dt: &DataType) -> DataType {
    match dt {
        DataType::Struct(fs) if fs.len() == 2 && fs[0].name() == KEY && fs[1].name() == VALUE => {
            let entries = DataType::Struct(
                vec![
                    Field::new("key", data_type(fs[0].data_type()), false),
                    Field::new("value", data_type(fs[1].data_type()), true),
                ]
                .into(),
            );
            DataType::Map(Arc::new(Field::new("entries", entries, false)), false)
        }
        DataType::Struct(fs) => DataType::Struct(fs.iter().map(field).collect()),
        DataType::List(f) => DataType::List(field(f)),
        DataType::LargeList(f) => DataType::LargeList(field(f)),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_are_written_as_structs_at_any_depth() {
        assert_eq!(
            maps_as_structs("CREATE TABLE x (a MAP<STRING, ARRAY<MAP<STRING, INT>>>, b INT)")
                .unwrap(),
            "CREATE TABLE x (a STRUCT<__asof_map_key: STRING, __asof_map_value: ARRAY<STRUCT<__asof_map_key: STRING, __asof_map_value: INT>>>, b INT)"
        );
        assert_eq!(
            maps_as_structs("m MAP < STRING , INT >").unwrap(),
            "m STRUCT<__asof_map_key:  STRING , __asof_map_value: INT >"
        );
        assert_eq!(
            maps_as_structs("(m MAP<STRING, STRUCT<a: INT, b: INT>>, `map` INT)").unwrap(),
            "(m STRUCT<__asof_map_key: STRING, __asof_map_value: STRUCT<a: INT, b: INT>>, `map` INT)"
        );
    }
}
