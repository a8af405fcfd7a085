//! The Arrow types a Delta table takes, and batches conformed to them.
//!
//! Delta has signed integers, decimals, microsecond timestamps (`timestamp`, an instant in UTC, and
//! `timestamp_ntz`, a wall-clock time) and no unsigned types. A table's columns map as follows:
//! unsigned integers widen to the next signed type (`UInt64` to `decimal(20,0)`); a timestamp
//! with a zone is an instant (`timestamp`), one without a zone `timestamp_ntz`; nanosecond and
//! millisecond timestamps become microseconds. Every column is nullable in the export, so no
//! writer feature beyond `timestampNtz` is needed.

use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch};
use arrow::compute::{cast_with_options, CastOptions};
use arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef, TimeUnit};

use super::ExportError;

/// The Arrow schema of the Delta table a table with `schema` exports to.
pub(super) fn delta_schema(table: &str, schema: &Schema) -> Result<SchemaRef, ExportError> {
    let fields = schema
        .fields()
        .iter()
        .map(|f| {
            let data_type =
                delta_type(f.data_type()).ok_or_else(|| ExportError::UnsupportedType {
                    table: table.to_string(),
                    column: f.name().clone(),
                    data_type: f.data_type().to_string(),
                })?;
            Ok(Field::new(f.name(), data_type, true))
        })
        .collect::<Result<Vec<_>, ExportError>>()?;
    Ok(Arc::new(Schema::new(fields)))
}

/// The Delta-compatible Arrow type of `t`, or `None` if Delta has none.
fn delta_type(t: &DataType) -> Option<DataType> {
    use DataType::*;
    Some(match t {
        Boolean | Int8 | Int16 | Int32 | Int64 | Float32 | Float64 | Utf8 | Binary | Date32 => {
            t.clone()
        }
        LargeUtf8 | Utf8View => Utf8,
        LargeBinary | BinaryView | FixedSizeBinary(_) => Binary,
        UInt8 => Int16,
        UInt16 => Int32,
        UInt32 => Int64,
        UInt64 => Decimal128(20, 0),
        Date64 => Date32,
        Decimal128(p, s) if *s >= 0 && *p <= 38 => t.clone(),
        Timestamp(_, None) => Timestamp(TimeUnit::Microsecond, None),
        Timestamp(_, Some(_)) => Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
        List(f) | LargeList(f) => List(Arc::new(nullable(f)?)),
        Struct(fields) => Struct(
            fields
                .iter()
                .map(|f| nullable(f))
                .collect::<Option<Fields>>()?,
        ),
        Map(entries, sorted) => {
            let DataType::Struct(kv) = entries.data_type() else {
                return None;
            };
            let [k, v] = kv.iter().collect::<Vec<_>>()[..] else {
                return None;
            };
            let key = Field::new(k.name(), delta_type(k.data_type())?, false);
            let entries = Field::new(
                entries.name(),
                Struct(Fields::from(vec![key, nullable(v)?])),
                false,
            );
            Map(Arc::new(entries), *sorted)
        }
        _ => return None,
    })
}

fn nullable(f: &Field) -> Option<Field> {
    Some(Field::new(f.name(), delta_type(f.data_type())?, true))
}

/// `batch` with the columns of `target` (found by name), cast to its types.
pub(super) fn conform(batch: &RecordBatch, target: &SchemaRef) -> Result<RecordBatch, ExportError> {
    let options = CastOptions {
        safe: false,
        ..Default::default()
    };
    let columns = target
        .fields()
        .iter()
        .map(|f| {
            let column = batch.column_by_name(f.name()).ok_or_else(|| {
                ExportError::Arrow(arrow::error::ArrowError::SchemaError(format!(
                    "no column `{}` to export",
                    f.name()
                )))
            })?;
            Ok(cast_with_options(column, f.data_type(), &options)?)
        })
        .collect::<Result<Vec<ArrayRef>, ExportError>>()?;
    Ok(RecordBatch::try_new(target.clone(), columns)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsigned_and_zoned_columns_map_to_the_delta_types_that_hold_them() {
        let schema = Schema::new(vec![
            Field::new("u64", DataType::UInt64, false),
            Field::new("u8", DataType::UInt8, false),
            Field::new(
                "at",
                DataType::Timestamp(TimeUnit::Nanosecond, Some("Europe/Paris".into())),
                true,
            ),
            Field::new(
                "ntz",
                DataType::Timestamp(TimeUnit::Millisecond, None),
                true,
            ),
        ]);
        let d = delta_schema("t", &schema).unwrap();
        let types: Vec<_> = d.fields().iter().map(|f| f.data_type().clone()).collect();
        assert_eq!(
            types,
            vec![
                DataType::Decimal128(20, 0),
                DataType::Int16,
                DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
                DataType::Timestamp(TimeUnit::Microsecond, None),
            ]
        );
        assert!(d.fields().iter().all(|f| f.is_nullable()));
    }

    #[test]
    fn a_type_delta_has_not_is_refused_with_its_column() {
        let schema = Schema::new(vec![Field::new(
            "span",
            DataType::Duration(TimeUnit::Second),
            true,
        )]);
        let e = delta_schema("t", &schema).unwrap_err().to_string();
        assert!(e.contains("`span`") && e.contains("`t`"), "{e}");
    }
}
