//! A column of source rows read into a block's column cell by cell, without a [`Value`] per
//! cell: a large commit's events go to its spill straight from the Arrow columns of the rows
//! they are made of (docs/PERFORMANCE.md, session 51). Building a shared row of values for each
//! event, and letting go of it once spilled, was a third of the commit thread's time while it
//! gathered a large load's events.
//!
//! What a block holds is the same as when it is filled from the values the same rows make
//! ([`ColumnData::push`]): a NULL cell is invalid with a zero (or empty) value, and a type
//! without a way of its own here goes through its values.

use arrow::array::{Array, AsArray, BinaryArray, BooleanArray, PrimitiveArray, StringArray};
use arrow::buffer::NullBuffer;
use arrow::datatypes::{
    ArrowPrimitiveType, Date32Type, Decimal128Type, Float32Type, Float64Type, Int16Type, Int32Type,
    Int64Type, Int8Type, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType, TimestampSecondType, UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};

use super::columns::{push_fixed, push_var, ColumnData, BOOL_SIZE, DECIMAL_SIZE, NUMBER_SIZE};
use crate::value::{column_values, ColumnType, TimeUnit, Value};

/// One output column of a slice of source rows, converted to the column's type, as a block's
/// column takes it.
pub(crate) enum SourceCells {
    Bool(BooleanArray),
    /// Integers, dates and timestamps (in their unit), as [`Value::Int`] holds them.
    Int(Numbers<i64>),
    UInt(Numbers<u64>),
    Float(Numbers<f64>),
    Decimal(Numbers<i128>),
    Str(StringArray),
    Bin(BinaryArray),
    /// Any other type (nested values as JSON text, lists of strings): the values the rows make.
    Values(Vec<Value>),
}

/// A column of numbers and which of them are NULL.
pub(crate) struct Numbers<T> {
    values: Vec<T>,
    nulls: Option<NullBuffer>,
}

impl<T: Copy + Default> Numbers<T> {
    fn of<P: ArrowPrimitiveType>(array: &dyn Array, f: impl Fn(P::Native) -> T) -> Self {
        let a: &PrimitiveArray<P> = array.as_primitive::<P>();
        Numbers {
            values: a.values().iter().map(|&v| f(v)).collect(),
            nulls: a.nulls().cloned(),
        }
    }

    /// Appends cell `i` to a column's `valid` and `values`; returns `size`, its raw size.
    fn push_into(&self, valid: &mut Vec<u8>, values: &mut Vec<T>, i: usize, size: usize) -> usize {
        let v = self.get(i);
        push_fixed(valid, values, v.is_some(), v, size)
    }

    /// Cell `i`, `None` if NULL.
    fn get(&self, i: usize) -> Option<T> {
        match &self.nulls {
            Some(n) if n.is_null(i) => None,
            _ => Some(self.values[i]),
        }
    }
}

impl SourceCells {
    /// The cells of `array`, a column converted to `ty` (as `crate::value::cast_column` leaves
    /// it).
    pub(crate) fn new(array: &dyn Array, ty: &ColumnType) -> SourceCells {
        let same = |v: i64| v;
        match ty {
            ColumnType::Boolean => SourceCells::Bool(array.as_boolean().clone()),
            ColumnType::Int8 => SourceCells::Int(Numbers::of::<Int8Type>(array, i64::from)),
            ColumnType::Int16 => SourceCells::Int(Numbers::of::<Int16Type>(array, i64::from)),
            ColumnType::Int32 => SourceCells::Int(Numbers::of::<Int32Type>(array, i64::from)),
            ColumnType::Int64 => SourceCells::Int(Numbers::of::<Int64Type>(array, same)),
            ColumnType::Date32 => SourceCells::Int(Numbers::of::<Date32Type>(array, i64::from)),
            ColumnType::Timestamp { unit, .. } => SourceCells::Int(match unit {
                TimeUnit::Second => Numbers::of::<TimestampSecondType>(array, same),
                TimeUnit::Millisecond => Numbers::of::<TimestampMillisecondType>(array, same),
                TimeUnit::Microsecond => Numbers::of::<TimestampMicrosecondType>(array, same),
                TimeUnit::Nanosecond => Numbers::of::<TimestampNanosecondType>(array, same),
            }),
            ColumnType::UInt8 => SourceCells::UInt(Numbers::of::<UInt8Type>(array, u64::from)),
            ColumnType::UInt16 => SourceCells::UInt(Numbers::of::<UInt16Type>(array, u64::from)),
            ColumnType::UInt32 => SourceCells::UInt(Numbers::of::<UInt32Type>(array, u64::from)),
            ColumnType::UInt64 => SourceCells::UInt(Numbers::of::<UInt64Type>(array, |v| v)),
            ColumnType::Float32 => SourceCells::Float(Numbers::of::<Float32Type>(array, f64::from)),
            ColumnType::Float64 => SourceCells::Float(Numbers::of::<Float64Type>(array, |v| v)),
            ColumnType::Decimal128 { .. } => {
                SourceCells::Decimal(Numbers::of::<Decimal128Type>(array, |v| v))
            }
            ColumnType::Utf8 => SourceCells::Str(array.as_string::<i32>().clone()),
            ColumnType::Binary => SourceCells::Bin(array.as_binary::<i32>().clone()),
            ColumnType::Struct(_)
            | ColumnType::List(_)
            | ColumnType::Map(_)
            | ColumnType::ListUtf8 => SourceCells::Values(column_values(array, ty)),
        }
    }

    /// Cell `i` as a value.
    fn value(&self, i: usize) -> Value {
        let or_null = |v: Option<Value>| v.unwrap_or(Value::Null);
        match self {
            SourceCells::Bool(a) => or_null(a.is_valid(i).then(|| Value::Bool(a.value(i)))),
            SourceCells::Int(n) => or_null(n.get(i).map(Value::Int)),
            SourceCells::UInt(n) => or_null(n.get(i).map(Value::UInt)),
            SourceCells::Float(n) => or_null(n.get(i).map(Value::Float)),
            SourceCells::Decimal(n) => or_null(n.get(i).map(Value::Decimal)),
            SourceCells::Str(a) => or_null(a.is_valid(i).then(|| Value::Str(a.value(i).into()))),
            SourceCells::Bin(a) => or_null(a.is_valid(i).then(|| Value::Bytes(a.value(i).into()))),
            SourceCells::Values(v) => v[i].clone(),
        }
    }
}

impl ColumnData {
    /// Appends cell `i` of `cells`, as [`ColumnData::push`] appends its value; returns its raw
    /// size.
    pub(super) fn push_cell(&mut self, cells: &SourceCells, i: usize) -> usize {
        match (self, cells) {
            (ColumnData::Int { valid, values }, SourceCells::Int(n)) => {
                n.push_into(valid, values, i, NUMBER_SIZE)
            }
            (ColumnData::UInt { valid, values }, SourceCells::UInt(n)) => {
                n.push_into(valid, values, i, NUMBER_SIZE)
            }
            (ColumnData::Float { valid, values }, SourceCells::Float(n)) => {
                n.push_into(valid, values, i, NUMBER_SIZE)
            }
            (ColumnData::Decimal { valid, values }, SourceCells::Decimal(n)) => {
                n.push_into(valid, values, i, DECIMAL_SIZE)
            }
            (ColumnData::Bool { valid, values }, SourceCells::Bool(a)) => {
                let ok = a.is_valid(i);
                push_fixed(valid, values, ok, Some((ok && a.value(i)) as u8), BOOL_SIZE)
            }
            (ColumnData::Str { valid, values }, SourceCells::Str(a)) => {
                let ok = a.is_valid(i);
                push_var(
                    valid,
                    values,
                    ok,
                    if ok { a.value(i).as_bytes() } else { &[] },
                )
            }
            (ColumnData::Bin { valid, values }, SourceCells::Bin(a)) => {
                let ok = a.is_valid(i);
                push_var(valid, values, ok, if ok { a.value(i) } else { &[] })
            }
            (column, SourceCells::Values(v)) => column.push(&v[i]),
            // A safety net: a table's stored types are its flow's output types, so a column
            // never gets cells of another type; if it did, they would go in as their values.
            (column, cells) => column.push(&cells.value(i)),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::*;
    use arrow::buffer::NullBuffer;

    use super::*;
    use crate::format::columns::new_column;

    /// The column `cells` fill, and their raw size.
    fn from_cells(ty: &ColumnType, cells: &SourceCells, n: usize) -> (String, usize) {
        let mut c = new_column(ty);
        let size = (0..n).map(|i| c.push_cell(cells, i)).sum();
        (format!("{c:?}"), size)
    }

    /// The column the values of `array` fill, and their raw size.
    fn from_values(ty: &ColumnType, array: &dyn Array) -> (String, usize) {
        let mut c = new_column(ty);
        let size = column_values(array, ty).iter().map(|v| c.push(v)).sum();
        (format!("{c:?}"), size)
    }

    fn ts(unit: TimeUnit) -> ColumnType {
        ColumnType::Timestamp { unit, tz: None }
    }

    fn every_type() -> Vec<(ColumnType, ArrayRef)> {
        let mut list = ListBuilder::new(StringBuilder::new());
        list.values().append_value("a");
        list.values().append_null();
        list.append(true);
        list.append(false);
        list.values().append_value("");
        list.append(true);
        // A NULL slot whose value is not zero: the block holds a zero, as for a NULL value.
        let hidden: Int64Array = PrimitiveArray::new(
            vec![1, 2, 3].into(),
            Some(NullBuffer::from(vec![true, false, true])),
        );
        vec![
            (
                ColumnType::Boolean,
                Arc::new(BooleanArray::from(vec![Some(true), None, Some(false)])) as ArrayRef,
            ),
            (
                ColumnType::Int8,
                Arc::new(Int8Array::from(vec![Some(-3), None, Some(i8::MAX)])),
            ),
            (
                ColumnType::Int16,
                Arc::new(Int16Array::from(vec![Some(-300), None, Some(7)])),
            ),
            (
                ColumnType::Int32,
                Arc::new(Int32Array::from(vec![None, Some(i32::MIN), Some(7)])),
            ),
            (ColumnType::Int64, Arc::new(hidden)),
            (
                ColumnType::UInt8,
                Arc::new(UInt8Array::from(vec![Some(255), None, Some(0)])),
            ),
            (
                ColumnType::UInt16,
                Arc::new(UInt16Array::from(vec![Some(1), None, Some(9)])),
            ),
            (
                ColumnType::UInt32,
                Arc::new(UInt32Array::from(vec![Some(u32::MAX), None, Some(2)])),
            ),
            (
                ColumnType::UInt64,
                Arc::new(UInt64Array::from(vec![Some(u64::MAX), None, Some(3)])),
            ),
            (
                ColumnType::Float32,
                Arc::new(Float32Array::from(vec![Some(1.5), None, Some(-0.25)])),
            ),
            (
                ColumnType::Float64,
                Arc::new(Float64Array::from(vec![Some(f64::MIN), None, Some(2.5)])),
            ),
            (
                ColumnType::Decimal128 {
                    precision: 38,
                    scale: 2,
                },
                Arc::new(
                    Decimal128Array::from(vec![Some(-12345), None, Some(1)])
                        .with_precision_and_scale(38, 2)
                        .unwrap(),
                ),
            ),
            (
                ColumnType::Utf8,
                Arc::new(StringArray::from(vec![Some("héllo"), None, Some("")])),
            ),
            (
                ColumnType::Binary,
                Arc::new(BinaryArray::from_opt_vec(vec![
                    Some(&[0u8, 255][..]),
                    None,
                    Some(&[]),
                ])),
            ),
            (
                ColumnType::Date32,
                Arc::new(Date32Array::from(vec![Some(19000), None, Some(-1)])),
            ),
            (
                ts(TimeUnit::Second),
                Arc::new(TimestampSecondArray::from(vec![Some(1), None, Some(-5)])),
            ),
            (
                ts(TimeUnit::Millisecond),
                Arc::new(TimestampMillisecondArray::from(vec![
                    Some(2),
                    None,
                    Some(3),
                ])),
            ),
            (
                ts(TimeUnit::Microsecond),
                Arc::new(TimestampMicrosecondArray::from(vec![
                    Some(4),
                    None,
                    Some(5),
                ])),
            ),
            (
                ts(TimeUnit::Nanosecond),
                Arc::new(TimestampNanosecondArray::from(vec![
                    Some(6),
                    None,
                    Some(i64::MAX),
                ])),
            ),
            (ColumnType::ListUtf8, Arc::new(list.finish())),
        ]
    }

    #[test]
    fn a_column_filled_from_source_cells_is_the_one_their_values_fill() {
        for (ty, array) in every_type() {
            // Whole, and a slice that starts past the first row (offsets into the buffers).
            for array in [array.clone(), array.slice(1, 2)] {
                let cells = SourceCells::new(&array, &ty);
                assert_eq!(
                    from_cells(&ty, &cells, array.len()),
                    from_values(&ty, &array),
                    "{ty}, {} rows",
                    array.len()
                );
            }
        }
    }

    #[test]
    fn cells_into_a_column_of_another_type_go_in_as_their_values_would() {
        let types = every_type();
        for (ty, array) in &types {
            let cells = SourceCells::new(array, ty);
            for (other, _) in &types {
                let mut by_cells = new_column(other);
                let mut by_values = new_column(other);
                for (i, v) in column_values(array, ty).iter().enumerate() {
                    assert_eq!(
                        by_cells.push_cell(&cells, i),
                        by_values.push(v),
                        "{ty} into {other}"
                    );
                }
                assert_eq!(
                    format!("{by_cells:?}"),
                    format!("{by_values:?}"),
                    "{ty} into {other}"
                );
            }
        }
    }
}
