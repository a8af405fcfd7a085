//! A file's rows under the table's schema: columns matched by name and cast, missing ones NULL.
//! A value that does not fit its column's type (a `schemaHints` type, a type inferred from other
//! files) and a column the schema lacks are never dropped in silence: they are an error that
//! names the column, the file and how many values, or, with `rescuedDataColumn`, they go to that
//! column as a JSON object of the values, by column name, with the file's path under
//! `_file_path` (as Databricks' rescued data column holds them), and the column reads NULL.

use std::path::Path;

use arrow::array::{Array, ArrayRef, RecordBatch, RecordBatchOptions, StringArray};
use arrow::datatypes::SchemaRef;
use arrow::util::display::{ArrayFormatter, FormatOptions};

use crate::error::{QueryError, Result};

/// `batch` (read from `file` with its own types) under `schema`; `rescued` names the column that
/// takes what does not fit (one of `schema`'s), if any.
pub(super) fn conform(
    batch: &RecordBatch,
    schema: &SchemaRef,
    file: &Path,
    rescued: Option<&str>,
) -> Result<RecordBatch> {
    let bad = |what: String| QueryError::Invalid(format!("read_files: {}: {what}", file.display()));
    let n = batch.num_rows();
    let mut kept: Vec<serde_json::Map<String, serde_json::Value>> = Vec::new();
    let keep = |kept: &mut Vec<serde_json::Map<_, _>>, row: usize, col: &str, text: String| {
        if kept.is_empty() {
            kept.resize_with(n, Default::default);
        }
        kept[row].insert(col.to_string(), serde_json::Value::String(text));
    };
    // Columns of the file that the schema lacks.
    for (f, c) in batch.schema().fields().iter().zip(batch.columns()) {
        if schema.field_with_name(f.name()).is_ok() {
            continue;
        }
        let Some(_) = rescued else {
            return Err(bad(format!(
                "it has column `{}`, which the table's schema (inferred from the first files) lacks; give `rescuedDataColumn => '_rescued_data'` to keep its values there",
                f.name()
            )));
        };
        let rows: Vec<usize> = (0..n).filter(|&r| c.is_valid(r)).collect();
        for (row, text) in rows.iter().zip(texts(c, &rows).map_err(bad)?) {
            keep(&mut kept, *row, f.name(), text);
        }
    }
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
    for f in schema.fields() {
        if Some(f.name().as_str()) == rescued {
            columns.push(arrow::array::new_null_array(f.data_type(), n)); // filled below
            continue;
        }
        let Some(c) = batch.column_by_name(f.name()) else {
            columns.push(arrow::array::new_null_array(f.data_type(), n));
            continue;
        };
        if c.data_type() == f.data_type() {
            columns.push(c.clone());
            continue;
        }
        let cast = arrow::compute::cast(c, f.data_type()).map_err(|e| bad(e.to_string()))?;
        let lost = lost_in_cast(c, &cast);
        if let Some(&first) = lost.first() {
            let text = texts(c, &lost).map_err(bad)?;
            if rescued.is_none() {
                return Err(bad(format!(
                    "column `{}`: {} value(s) do not fit {} (the first, row {}: `{}`); give `rescuedDataColumn => '_rescued_data'` to keep them there, or another type in `schemaHints`",
                    f.name(),
                    lost.len(),
                    f.data_type(),
                    first + 1,
                    text[0]
                )));
            }
            for (&row, text) in lost.iter().zip(text) {
                keep(&mut kept, row, f.name(), text);
            }
            // The column reads NULL where its value went to the rescued data.
            let mut mask = vec![false; n];
            for &row in &lost {
                mask[row] = true;
            }
            let cast = arrow::compute::nullif(&cast, &arrow::array::BooleanArray::from(mask))
                .map_err(|e| bad(e.to_string()))?;
            columns.push(cast);
            continue;
        }
        columns.push(cast);
    }
    if let Some(name) = rescued {
        let at = schema.index_of(name).map_err(|e| bad(e.to_string()))?;
        let path = file.display().to_string();
        let blobs: StringArray = (0..n)
            .map(|row| {
                let mut m = kept.get(row).cloned().filter(|m| !m.is_empty())?;
                m.insert("_file_path".into(), serde_json::Value::String(path.clone()));
                Some(serde_json::Value::Object(m).to_string())
            })
            .collect();
        columns[at] = arrow::compute::cast(&blobs, schema.field(at).data_type())
            .map_err(|e| bad(e.to_string()))?;
    }
    RecordBatch::try_new_with_options(
        schema.clone(),
        columns,
        &RecordBatchOptions::new().with_row_count(Some(n)),
    )
    .map_err(|e| bad(e.to_string()))
}

/// The rows whose value the cast of `from` to `to` did not keep: it came out NULL (text that does
/// not parse, a number out of range) or, from a value that is not text, changed (a float cut to
/// an integer, a time of day dropped: cast back, it differs). Text parsed as a number or a time
/// is taken as parsed.
fn lost_in_cast(from: &ArrayRef, to: &ArrayRef) -> Vec<usize> {
    let textual = matches!(
        from.data_type(),
        arrow::datatypes::DataType::Utf8 | arrow::datatypes::DataType::LargeUtf8
    );
    let changed = (!textual)
        .then(|| arrow::compute::cast(to, from.data_type()).ok())
        .flatten()
        .and_then(|back| arrow::compute::kernels::cmp::distinct(from, &back).ok());
    (0..from.len())
        .filter(|&r| {
            from.is_valid(r) && (to.is_null(r) || changed.as_ref().is_some_and(|d| d.value(r)))
        })
        .collect()
}

/// The values of `c` at `rows`, as text.
fn texts(c: &ArrayRef, rows: &[usize]) -> std::result::Result<Vec<String>, String> {
    let options = FormatOptions::default();
    let f = ArrayFormatter::try_new(c.as_ref(), &options).map_err(|e| e.to_string())?;
    Ok(rows.iter().map(|&r| f.value(r).to_string()).collect())
}

/// `rescued` as a column of `schema`'s kind: nullable text.
pub(super) fn rescued_field(name: &str) -> arrow::datatypes::Field {
    arrow::datatypes::Field::new(name, arrow::datatypes::DataType::Utf8, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::Int64Array;
    use arrow::datatypes::{DataType, Field, Schema};
    use std::sync::Arc;

    fn batch() -> RecordBatch {
        RecordBatch::try_new(
            Arc::new(Schema::new(vec![
                Field::new("id", DataType::Int64, true),
                Field::new("amount", DataType::Utf8, true),
                Field::new("extra", DataType::Utf8, true),
            ])),
            vec![
                Arc::new(Int64Array::from(vec![1, 2, 3])),
                Arc::new(StringArray::from(vec![Some("10"), Some("ten"), None])),
                Arc::new(StringArray::from(vec![None, Some("x"), None])),
            ],
        )
        .unwrap()
    }

    #[test]
    fn values_that_do_not_fit_are_rescued_or_an_error_that_counts_them() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("amount", DataType::Int32, true),
            rescued_field("_rescued_data"),
        ]));
        let file = Path::new("/landing/a.csv");
        let got = conform(&batch(), &schema, file, Some("_rescued_data")).unwrap();
        let amount = got
            .column(1)
            .as_any()
            .downcast_ref::<arrow::array::Int32Array>()
            .unwrap();
        assert_eq!(amount.iter().collect::<Vec<_>>(), [Some(10), None, None]);
        let rescued = got
            .column(2)
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        assert_eq!(
            rescued.iter().collect::<Vec<_>>(),
            [
                None,
                Some(r#"{"_file_path":"/landing/a.csv","amount":"ten","extra":"x"}"#),
                None
            ]
        );
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("amount", DataType::Int32, true),
            Field::new("extra", DataType::Utf8, true),
        ]));
        let e = conform(&batch(), &schema, file, None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("column `amount`: 1 value(s) do not fit Int32 (the first, row 2: `ten`)"),
            "{e}"
        );
    }
}
