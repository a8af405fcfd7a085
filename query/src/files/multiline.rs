//! JSON with `multiLine => true`: a file holds whole JSON values over any number of lines, each
//! an object (a row) or an array of objects, as Spark reads it. The file is parsed whole (Spark
//! cannot split such a file either), so its memory is the file's.

use std::io::BufReader;
use std::path::Path;

use arrow::array::RecordBatch;
use arrow::datatypes::{Schema, SchemaRef};

use crate::error::{QueryError, Result};

/// The rows of `file`, as JSON objects.
fn rows(file: &Path) -> Result<Vec<serde_json::Value>> {
    let bad = |what: String| QueryError::Invalid(format!("read_files: {}: {what}", file.display()));
    let f = std::fs::File::open(file).map_err(|e| bad(format!("cannot open it: {e}")))?;
    let mut out = Vec::new();
    for v in serde_json::Deserializer::from_reader(BufReader::new(f)).into_iter() {
        match v.map_err(|e| bad(e.to_string()))? {
            serde_json::Value::Array(items) => {
                for (i, item) in items.into_iter().enumerate() {
                    if !item.is_object() {
                        return Err(bad(format!(
                            "element {} of an array is not an object",
                            i + 1
                        )));
                    }
                    out.push(item);
                }
            }
            o @ serde_json::Value::Object(_) => out.push(o),
            other => return Err(bad(format!("a value that is not an object: {other}"))),
        }
    }
    Ok(out)
}

/// The schema of `file`'s rows, inferred as for JSON Lines.
pub(super) fn infer(file: &Path) -> Result<Schema> {
    let rows = rows(file)?;
    arrow::json::reader::infer_json_schema_from_iterator(rows.iter().map(Ok))
        .map_err(|e| QueryError::Invalid(format!("read_files: {}: {e}", file.display())))
}

/// `file`'s rows under `schema` (its own, from [`infer`]).
pub(super) fn read(file: &Path, schema: &SchemaRef) -> Result<Vec<RecordBatch>> {
    let bad = |e: arrow::error::ArrowError| {
        QueryError::Invalid(format!("read_files: {}: {e}", file.display()))
    };
    let rows = rows(file)?;
    let mut d = arrow::json::ReaderBuilder::new(schema.clone())
        .with_coerce_primitive(true)
        .build_decoder()
        .map_err(bad)?;
    d.serialize(&rows).map_err(bad)?;
    Ok(d.flush().map_err(bad)?.into_iter().collect())
}
