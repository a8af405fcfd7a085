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

use std::fmt::Write as _;

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

const WIDTH: f64 = 860.0;
const HEIGHT: f64 = 520.0;
const LEFT: f64 = 150.0;
const RIGHT: f64 = 40.0;
const TOP: f64 = 30.0;
const BOTTOM: f64 = 95.0;

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
    Ok(draw(table, &key_label, &versions, marks))
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

/// Text for SVG: `&`, `<`, `>` and quotes escaped.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&apos;")
}

/// An axis: the bounds the versions have, evenly spaced in their order (what changed when
/// matters more than how long it lasted: a correction minutes after a version that lasted a
/// year stays visible), then one more step for open ends.
struct Axis {
    /// The distinct finite bounds, in order.
    stops: Vec<f64>,
    /// Pixels: where the first bound and the open end are.
    from: f64,
    to: f64,
}

impl Axis {
    fn new(values: impl Iterator<Item = f64>, from: f64, to: f64) -> Axis {
        let mut stops: Vec<f64> = values.filter(|v| v.is_finite()).collect();
        stops.sort_by(f64::total_cmp);
        stops.dedup();
        Axis { stops, from, to }
    }

    /// Where `v` goes (`None`: an open end), interpolated between the bounds around it.
    fn px(&self, v: Option<f64>) -> f64 {
        let n = self.stops.len().max(1) as f64;
        let rank = match v {
            None => n,
            Some(v) => {
                let i = self.stops.partition_point(|&s| s <= v);
                match (i.checked_sub(1).map(|j| self.stops[j]), self.stops.get(i)) {
                    (None, _) => 0.0,
                    (Some(lo), Some(&hi)) => (i - 1) as f64 + (v - lo) / (hi - lo),
                    // Past the last bound: halfway to the open end.
                    (Some(lo), None) if v > lo => n - 0.5,
                    (Some(_), None) => n - 1.0,
                }
            }
        };
        self.from + (self.to - self.from) * rank / n
    }
}

fn draw(
    table: &str,
    key: &str,
    versions: &[Version],
    (mark_b, mark_s): (Option<f64>, Option<f64>),
) -> String {
    let finite = |i: usize| versions.iter().filter_map(move |v| v.at[i]);
    let x = Axis::new(
        finite(0).chain(finite(1)).chain(mark_b),
        LEFT,
        WIDTH - RIGHT,
    );
    // System time runs up: its pixels run from the bottom edge to the top.
    let y = Axis::new(
        finite(2).chain(finite(3)).chain(mark_s),
        HEIGHT - BOTTOM,
        TOP,
    );
    let mut s = String::new();
    let _ = write!(
        s,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="11">
<title>{} key {}: bitemporal history</title>
<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#555"/></marker></defs>
<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="white"/>
"##,
        esc(table),
        esc(key)
    );
    // Axes, with a tick at every bound the versions have (thinned to about a dozen).
    let _ = writeln!(
        s,
        r##"<g class="axes" stroke="#333"><line x1="{LEFT}" y1="{0}" x2="{1}" y2="{0}" marker-end="url(#arrow)"/><line x1="{LEFT}" y1="{0}" x2="{LEFT}" y2="{2}" marker-end="url(#arrow)"/></g>"##,
        HEIGHT - BOTTOM,
        WIDTH - RIGHT + 15.0,
        TOP - 15.0
    );
    let _ = writeln!(
        s,
        r##"<text class="axis-label" x="{}" y="{}" text-anchor="middle">business time (__START_AT … __END_AT)</text>"##,
        (LEFT + WIDTH - RIGHT) / 2.0,
        HEIGHT - 12.0
    );
    let _ = writeln!(
        s,
        r##"<text class="axis-label" x="14" y="{}" transform="rotate(-90 14 {0})" text-anchor="middle">system time (__SYSTEM_START_AT … __SYSTEM_END_AT)</text>"##,
        (TOP + HEIGHT - BOTTOM) / 2.0
    );
    for (axis, starts) in [(&x, [0usize, 1]), (&y, [2, 3])] {
        let mut ticks: Vec<(f64, &str)> = versions
            .iter()
            .flat_map(|v| starts.map(|i| (v.at[i], v.text[i].as_str())))
            .filter_map(|(at, t)| at.map(|a| (a, t)))
            .collect();
        ticks.sort_by(|a, b| a.0.total_cmp(&b.0));
        ticks.dedup_by(|a, b| a.0 == b.0);
        let every = ticks.len().div_ceil(12).max(1);
        for (at, text) in ticks.iter().step_by(every) {
            let p = axis.px(Some(*at));
            if std::ptr::eq(axis, &x) {
                let _ = writeln!(
                    s,
                    r##"<g class="tick business"><line x1="{p:.1}" y1="{0}" x2="{p:.1}" y2="{1}" stroke="#333"/><text x="{p:.1}" y="{2}" text-anchor="end" transform="rotate(-30 {p:.1} {2})">{3}</text></g>"##,
                    HEIGHT - BOTTOM,
                    HEIGHT - BOTTOM + 4.0,
                    HEIGHT - BOTTOM + 14.0,
                    esc(text)
                );
            } else {
                let _ = writeln!(
                    s,
                    r##"<g class="tick system"><line x1="{0}" y1="{p:.1}" x2="{LEFT}" y2="{p:.1}" stroke="#333"/><text x="{1}" y="{2:.1}" text-anchor="end">{3}</text></g>"##,
                    LEFT - 4.0,
                    LEFT - 6.0,
                    p + 4.0,
                    esc(text)
                );
            }
        }
    }
    // The versions, those believed longest first so that later ones are drawn over them.
    const FILLS: [&str; 6] = [
        "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#b07aa1",
    ];
    for (i, v) in versions.iter().enumerate() {
        let (x0, x1) = (x.px(v.at[0]), x.px(v.at[1]));
        let (y0, y1) = (y.px(v.at[2]), y.px(v.at[3]));
        let (w, h) = ((x1 - x0).max(1.0), (y0 - y1).max(1.0));
        let _ = writeln!(
            s,
            r##"<g class="version-group"><rect class="version" x="{x0:.1}" y="{y1:.1}" width="{w:.1}" height="{h:.1}" fill="{}" fill-opacity="0.35" stroke="{0}" data-start="{}" data-end="{}" data-system-start="{}" data-system-end="{}"><title>{}</title></rect>"##,
            FILLS[i % FILLS.len()],
            esc(&v.text[0]),
            esc(&v.text[1]),
            esc(&v.text[2]),
            esc(&v.text[3]),
            esc(&format!(
                "{}; business [{}, {}); system [{}, {})",
                v.title,
                v.text[0],
                if v.text[1].is_empty() {
                    "∞"
                } else {
                    &v.text[1]
                },
                v.text[2],
                if v.text[3].is_empty() {
                    "∞"
                } else {
                    &v.text[3]
                }
            ))
        );
        if v.at[1].is_none() {
            let ym = (y0 + y1) / 2.0;
            let _ = writeln!(
                s,
                r##"<line class="open business" x1="{x1:.1}" y1="{ym:.1}" x2="{:.1}" y2="{ym:.1}" stroke="#555" marker-end="url(#arrow)"/>"##,
                x1 + 14.0
            );
        }
        if v.at[3].is_none() {
            let xm = (x0 + x1) / 2.0;
            let _ = writeln!(
                s,
                r##"<line class="open system" x1="{xm:.1}" y1="{y1:.1}" x2="{xm:.1}" y2="{:.1}" stroke="#555" marker-end="url(#arrow)"/>"##,
                y1 - 14.0
            );
        }
        let _ = writeln!(
            s,
            r##"<text class="label" x="{:.1}" y="{:.1}" text-anchor="middle">{}</text></g>"##,
            (x0 + x1) / 2.0,
            (y0 + y1) / 2.0 + 4.0,
            esc(&v.label)
        );
    }
    match (mark_b, mark_s) {
        (Some(b), Some(sys)) => {
            let _ = writeln!(
                s,
                r##"<circle class="as-of" cx="{:.1}" cy="{:.1}" r="5" fill="black"><title>as of business {b}, system {sys}</title></circle>"##,
                x.px(Some(b)),
                y.px(Some(sys))
            );
        }
        (Some(b), None) => {
            let p = x.px(Some(b));
            let _ = writeln!(
                s,
                r##"<line class="as-of business" x1="{p:.1}" y1="{TOP}" x2="{p:.1}" y2="{}" stroke="black" stroke-dasharray="4 3"/>"##,
                HEIGHT - BOTTOM
            );
        }
        (None, Some(sys)) => {
            let p = y.px(Some(sys));
            let _ = writeln!(
                s,
                r##"<line class="as-of system" x1="{LEFT}" y1="{p:.1}" x2="{}" y2="{p:.1}" stroke="black" stroke-dasharray="4 3"/>"##,
                WIDTH - RIGHT
            );
        }
        (None, None) => {}
    }
    s.push_str("</svg>\n");
    s
}
