//! Which of a query's filters on the temporal columns the storage scan can use: comparisons that
//! bound where an interval starts or ends (`__START_AT < x`, `__END_AT > x`, `__END_AT IS NULL OR
//! __END_AT > x`, and so what `PERIOD(...) OVERLAPS / CONTAINS ...` mean). They are pushed down
//! as inexact: the scan skips pages and rows that cannot pass, DataFusion still applies the
//! filter to what comes back.

use arrow::array::{Array, AsArray};
use arrow::datatypes::{DataType, Int64Type, Schema, UInt64Type};
use asof_storage::{ColumnType, Value};
use datafusion::common::ScalarValue;
use datafusion::logical_expr::{BinaryExpr, Expr, Operator};

use crate::scan::PeriodBound;

/// Which timeline a temporal column is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Timeline {
    Business,
    System,
}

/// Which end of which timeline a column is.
fn temporal(name: &str) -> Option<(Timeline, bool)> {
    match name {
        "__START_AT" => Some((Timeline::Business, true)),
        "__END_AT" => Some((Timeline::Business, false)),
        "__SYSTEM_START_AT" => Some((Timeline::System, true)),
        "__SYSTEM_END_AT" => Some((Timeline::System, false)),
        _ => None,
    }
}

/// The bound `e` puts on a timeline of a table of `schema`, if the scan can use it.
pub(super) fn period_bound(schema: &Schema, e: &Expr) -> Option<(Timeline, PeriodBound)> {
    match e {
        Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::Or,
            right,
        }) => {
            // `end IS NULL OR end > x`: an open end is above everything already.
            let (null, other) = match (left.as_ref(), right.as_ref()) {
                (Expr::IsNull(c), o) | (o, Expr::IsNull(c)) => (c, o),
                _ => return None,
            };
            let (timeline, bound) = period_bound(schema, other)?;
            let Expr::Column(c) = null.as_ref() else {
                return None;
            };
            let same = matches!(temporal(&c.name), Some((t, false)) if t == timeline);
            (same && matches!(bound, PeriodBound::EndsAbove { .. })).then_some((timeline, bound))
        }
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            let (col, lit, op) = match (left.as_ref(), right.as_ref()) {
                (Expr::Column(c), Expr::Literal(v, ..)) => (c, v, *op),
                (Expr::Literal(v, ..), Expr::Column(c)) => (c, v, op.swap()?),
                _ => return None,
            };
            let (timeline, start) = temporal(&col.name)?;
            let ty = ColumnType::from_arrow(schema.field_with_name(&col.name).ok()?.data_type())?;
            let value = value_of(lit, &ty)?;
            let bound = match (start, op) {
                (true, Operator::Lt) => PeriodBound::StartsBelow {
                    value,
                    inclusive: false,
                },
                (true, Operator::LtEq | Operator::Eq) => PeriodBound::StartsBelow {
                    value,
                    inclusive: true,
                },
                (false, Operator::Gt) => PeriodBound::EndsAbove {
                    value,
                    inclusive: false,
                },
                (false, Operator::GtEq | Operator::Eq) => PeriodBound::EndsAbove {
                    value,
                    inclusive: true,
                },
                _ => return None,
            };
            Some((timeline, bound))
        }
        _ => None,
    }
}

/// A literal as a value of a timeline's type `ty` (integers, dates, timestamps and strings; not a
/// timeline of several components).
fn value_of(lit: &ScalarValue, ty: &ColumnType) -> Option<Value> {
    if lit.is_null() {
        return None;
    }
    let array = lit.to_array().ok()?;
    let typed = arrow::compute::cast(&array, &ty.to_arrow()).ok()?;
    if typed.is_null(0) {
        return None;
    }
    Some(match ty {
        ColumnType::Int8
        | ColumnType::Int16
        | ColumnType::Int32
        | ColumnType::Int64
        | ColumnType::Date32
        | ColumnType::Timestamp { .. } => {
            let ints = arrow::compute::cast(&typed, &DataType::Int64).ok()?;
            Value::Int(ints.as_primitive::<Int64Type>().value(0))
        }
        ColumnType::UInt8 | ColumnType::UInt16 | ColumnType::UInt32 | ColumnType::UInt64 => {
            let ints = arrow::compute::cast(&typed, &DataType::UInt64).ok()?;
            Value::UInt(ints.as_primitive::<UInt64Type>().value(0))
        }
        ColumnType::Utf8 => Value::Str(typed.as_string::<i32>().value(0).into()),
        _ => return None,
    })
}
