//! A picture of one key's bitemporal history (`asof plot`, `plot_history(...)` in SQL), drawn the
//! way the literature draws it: business time across, system time up, one rectangle per row
//! version, spanning its business interval and the system interval in which it was believed. A
//! late correction shows as the rectangle it cut: the version believed before it stops where the
//! correction starts on system time. Open ends run to the edge of the picture and end in an
//! arrow. The as-of point of a query (or one of its times, as a line) can be marked.
//!
//! The picture is SVG text. Each version is a `<rect class="version">` whose `data-*` attributes
//! hold its four bounds as the table prints them, so that a program can read the picture back.
//! Times are placed in order, the distinct bounds evenly spaced (so a correction minutes after a
//! version that lasted a year stays visible): integers, floats, dates and timestamps; the
//! sequence must have one component.

mod svg;

use arrow::array::{Array, ArrayRef, RecordBatch};
use arrow::datatypes::DataType;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use asof_storage::{Store, StoredAs, Value};

use crate::error::{QueryError, Result};
use crate::scan::{scan_all, KeySelection, ScanRequest};

/// What to draw: one key of a BITEMPORAL table, and the as-of point to mark, if any.
#[derive(Clone, Debug, Default)]
pub struct PlotRequest {
    /// The key's values, one per key column.
    pub key: Vec<Value>,
    /// Marks this business time (a vertical line, or with `system_as_of` a point).
    pub business_as_of: Option<Value>,
    /// Marks this system time (a horizontal line, or with `business_as_of` a point).
    pub system_as_of: Option<Value>,
}

/// One row version, placed.
struct Version {
    /// Business start and end, system start and end, as numbers (`None`: open).
    at: [Option<f64>; 4],
    /// The same, as the table prints them ("" when open).
    text: [String; 4],
    /// `column=value` of the columns whose value changes over the key's history.
    label: String,
    /// Every value column, for the tooltip.
    title: String,
}

/// The SVG picture of `req.key`'s history in `table`.
pub fn key_history_svg(store: &Store, table: &str, req: &PlotRequest) -> Result<String> {
    let schema = store.schema(table)?;
    if schema.mode != StoredAs::Bitemporal {
        return Err(QueryError::Invalid(format!(
            "plot draws business time against system time: `{table}` is {:?}, which has no system time",
            schema.mode
        )));
    }
    if req.key.len() != schema.key_columns.len() {
        return Err(QueryError::Invalid(format!(
            "plot draws one key: `{table}` has {} key column(s), {} value(s) were given",
            schema.key_columns.len(),
            req.key.len()
        )));
    }
    if schema.sequence.len() != 1 {
        return Err(QueryError::Invalid(format!(
            "plot places one-component sequences on an axis: `{table}` is sequenced by {} columns",
            schema.sequence.len()
        )));
    }
    let batches = scan_all(
        store,
        table,
        &ScanRequest {
            keys: KeySelection::Eq(req.key.clone()),
            ..Default::default()
        },
    )?;
    let keys = schema.key_names();
    let versions = versions(&batches, &keys)?;
    if versions.is_empty() {
        return Err(QueryError::Invalid(format!(
            "`{table}` has no row for key {:?}",
            req.key
        )));
    }
    let type_of = |name: &str| {
        batches[0]
            .schema()
            .field_with_name(name)
            .map(|f| f.data_type().clone())
    };
    let marks = (
        mark(
            req.business_as_of.as_ref(),
            &type_of("__START_AT")?,
            "business",
        )?,
        mark(
            req.system_as_of.as_ref(),
            &type_of("__SYSTEM_START_AT")?,
            "system",
        )?,
    );
    let options = FormatOptions::default();
    let key_label = keys
        .iter()
        .filter_map(|k| batches[0].column_by_name(k))
        .map(|c| Ok(texts(c, &options)?.swap_remove(0)))
        .collect::<Result<Vec<_>>>()?
        .join(", ");
    Ok(svg::draw(table, &key_label, &versions, marks))
}

/// The key's row versions, read from its history batches.
fn versions(batches: &[RecordBatch], keys: &[&str]) -> Result<Vec<Version>> {
    const BOUNDS: [&str; 4] = [
        "__START_AT",
        "__END_AT",
        "__SYSTEM_START_AT",
        "__SYSTEM_END_AT",
    ];
    let options = FormatOptions::default();
    let mut out = Vec::new();
    let mut values: Vec<(String, Vec<String>)> = Vec::new();
    for b in batches {
        let schema = b.schema();
        let bounds: Vec<(Vec<Option<f64>>, Vec<String>)> = BOUNDS
            .iter()
            .map(|name| {
                let col = b.column_by_name(name).ok_or_else(|| {
                    QueryError::Invalid(format!("plot: the history lacks column {name}"))
                })?;
                Ok((positions(col)?, texts(col, &options)?))
            })
            .collect::<Result<_>>()?;
        let value_cols: Vec<(String, Vec<String>)> = schema
            .fields()
            .iter()
            .zip(b.columns())
            .filter(|(f, _)| {
                !BOUNDS.contains(&f.name().as_str()) && !keys.contains(&f.name().as_str())
            })
            .map(|(f, c)| Ok((f.name().clone(), texts(c, &options)?)))
            .collect::<Result<_>>()?;
        for row in 0..b.num_rows() {
            out.push(Version {
                at: [0, 1, 2, 3].map(|i| bounds[i].0[row]),
                text: [0, 1, 2, 3].map(|i| bounds[i].1[row].clone()),
                label: String::new(),
                title: String::new(),
            });
            for (i, (name, col)) in value_cols.iter().enumerate() {
                if values.len() <= i {
                    values.push((name.clone(), Vec::new()));
                }
                values[i].1.push(col[row].clone());
            }
        }
    }
    // Label each version with the columns that change over the history (all of them if none
    // does), and give every value in its tooltip.
    let changing: Vec<&(String, Vec<String>)> = {
        let varying: Vec<_> = values
            .iter()
            .filter(|(_, vs)| vs.iter().any(|v| v != &vs[0]))
            .collect();
        if varying.is_empty() {
            values.iter().collect()
        } else {
            varying
        }
    };
    for (row, v) in out.iter_mut().enumerate() {
        let cell = |(name, vs): &(String, Vec<String>)| format!("{name}={}", vs[row]);
        v.label = changing
            .iter()
            .map(|c| cell(c))
            .collect::<Vec<_>>()
            .join(", ");
        v.title = values.iter().map(cell).collect::<Vec<_>>().join(", ");
    }
    Ok(out)
}

/// Each cell of `col` as a number on its axis (`None`: NULL, an open end).
fn positions(col: &ArrayRef) -> Result<Vec<Option<f64>>> {
    let numeric = match col.data_type() {
        DataType::Timestamp(..) | DataType::Date32 | DataType::Date64 => arrow::compute::cast(
            &arrow::compute::cast(col, &DataType::Int64)?,
            &DataType::Float64,
        )?,
        t if t.is_numeric() => arrow::compute::cast(col, &DataType::Float64)?,
        t => {
            return Err(QueryError::Invalid(format!(
                "plot places numbers, dates and timestamps on an axis, not {t}"
            )))
        }
    };
    let f = numeric
        .as_any()
        .downcast_ref::<arrow::array::Float64Array>()
        .expect("cast to Float64");
    Ok((0..f.len())
        .map(|i| f.is_valid(i).then(|| f.value(i)))
        .collect())
}

/// A time given to mark, placed as the `ty` column's values are (text is read as the column
/// reads it).
fn mark(v: Option<&Value>, ty: &DataType, axis: &str) -> Result<Option<f64>> {
    let Some(v) = v else { return Ok(None) };
    let given: ArrayRef = match v {
        Value::Int(i) => std::sync::Arc::new(arrow::array::Int64Array::from(vec![*i])),
        Value::Float(f) => std::sync::Arc::new(arrow::array::Float64Array::from(vec![*f])),
        Value::Str(s) => std::sync::Arc::new(arrow::array::StringArray::from(vec![s.as_ref()])),
        other => {
            return Err(QueryError::Invalid(format!(
                "plot: cannot place {other:?} on the {axis} axis"
            )))
        }
    };
    let cast = arrow::compute::cast(&given, ty)?;
    positions(&cast)?[0].map(Some).ok_or_else(|| {
        QueryError::Invalid(format!("plot: {v:?} is not a {ty} for the {axis} axis"))
    })
}

fn texts(col: &ArrayRef, options: &FormatOptions) -> Result<Vec<String>> {
    let f = ArrayFormatter::try_new(col.as_ref(), options)?;
    Ok((0..col.len())
        .map(|i| {
            if col.is_null(i) {
                String::new()
            } else {
                f.value(i).to_string()
            }
        })
        .collect())
}
