//! Column types and cell values: the engine's own small type system, and the conversion from Arrow
//! arrays into it (used by ingest). The conversion back to Arrow lives in `asof-query`.

use std::cmp::Ordering;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BinaryArray, BooleanArray, Decimal128Array, Float32Array,
    Float64Array, ListArray, StringArray,
};
use arrow::compute::{cast_with_options, CastOptions};
use arrow::datatypes::{
    DataType, Date32Type, Field, Int16Type, Int32Type, Int64Type, Int8Type,
    TimeUnit as ArrowTimeUnit, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType, TimestampSecondType, UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};
use serde::{Deserialize, Serialize};

/// Unit of a timestamp column.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TimeUnit {
    /// Seconds.
    Second,
    /// Milliseconds.
    Millisecond,
    /// Microseconds.
    Microsecond,
    /// Nanoseconds.
    Nanosecond,
}

impl TimeUnit {
    fn to_arrow(self) -> ArrowTimeUnit {
        match self {
            TimeUnit::Second => ArrowTimeUnit::Second,
            TimeUnit::Millisecond => ArrowTimeUnit::Millisecond,
            TimeUnit::Microsecond => ArrowTimeUnit::Microsecond,
            TimeUnit::Nanosecond => ArrowTimeUnit::Nanosecond,
        }
    }
    fn from_arrow(u: &ArrowTimeUnit) -> Self {
        match u {
            ArrowTimeUnit::Second => TimeUnit::Second,
            ArrowTimeUnit::Millisecond => TimeUnit::Millisecond,
            ArrowTimeUnit::Microsecond => TimeUnit::Microsecond,
            ArrowTimeUnit::Nanosecond => TimeUnit::Nanosecond,
        }
    }
}

/// The type of a stored column. Each maps to one Arrow [`DataType`].
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ColumnType {
    /// `BOOLEAN`
    Boolean,
    /// `TINYINT`
    Int8,
    /// `SMALLINT`
    Int16,
    /// `INT`
    Int32,
    /// `BIGINT`
    Int64,
    /// unsigned 8-bit
    UInt8,
    /// unsigned 16-bit
    UInt16,
    /// unsigned 32-bit
    UInt32,
    /// unsigned 64-bit
    UInt64,
    /// `FLOAT`
    Float32,
    /// `DOUBLE`
    Float64,
    /// `DECIMAL(p, s)`
    Decimal128 {
        /// precision
        precision: u8,
        /// scale
        scale: i8,
    },
    /// `STRING`
    Utf8,
    /// `BINARY`
    Binary,
    /// `DATE` (days since the epoch)
    Date32,
    /// `TIMESTAMP`: an instant since the epoch in UTC, in `unit`; `tz` is kept for display only.
    Timestamp {
        /// unit of the stored integer
        unit: TimeUnit,
        /// the zone the column is shown in, if any
        tz: Option<String>,
    },
    /// `ARRAY<STRING>` (as used by COLUMNS TO UPDATE)
    ListUtf8,
    /// `STRUCT<name: type, ...>`. Nested values are kept as JSON text, one per cell
    /// (`nested.rs`); their fields are nullable.
    Struct(Vec<(String, ColumnType)>),
    /// `ARRAY<type>` of any element type but `STRING` (that is [`ColumnType::ListUtf8`]).
    List(Box<ColumnType>),
    /// `MAP<STRING, type>`.
    Map(Box<ColumnType>),
}

impl ColumnType {
    /// The type of the commit clock: `TIMESTAMP(µs, UTC)`.
    pub fn commit_timestamp() -> Self {
        ColumnType::Timestamp {
            unit: TimeUnit::Microsecond,
            tz: Some("UTC".into()),
        }
    }

    /// The Arrow type of this column.
    pub fn to_arrow(&self) -> DataType {
        match self {
            ColumnType::Boolean => DataType::Boolean,
            ColumnType::Int8 => DataType::Int8,
            ColumnType::Int16 => DataType::Int16,
            ColumnType::Int32 => DataType::Int32,
            ColumnType::Int64 => DataType::Int64,
            ColumnType::UInt8 => DataType::UInt8,
            ColumnType::UInt16 => DataType::UInt16,
            ColumnType::UInt32 => DataType::UInt32,
            ColumnType::UInt64 => DataType::UInt64,
            ColumnType::Float32 => DataType::Float32,
            ColumnType::Float64 => DataType::Float64,
            ColumnType::Decimal128 { precision, scale } => DataType::Decimal128(*precision, *scale),
            ColumnType::Utf8 => DataType::Utf8,
            ColumnType::Binary => DataType::Binary,
            ColumnType::Date32 => DataType::Date32,
            ColumnType::Timestamp { unit, tz } => {
                DataType::Timestamp(unit.to_arrow(), tz.as_deref().map(Into::into))
            }
            ColumnType::ListUtf8 => {
                DataType::List(Arc::new(Field::new("item", DataType::Utf8, true)))
            }
            ColumnType::Struct(fields) => DataType::Struct(
                fields
                    .iter()
                    .map(|(n, t)| Field::new(n, t.to_arrow(), true))
                    .collect(),
            ),
            ColumnType::List(item) => {
                DataType::List(Arc::new(Field::new("item", item.to_arrow(), true)))
            }
            ColumnType::Map(value) => DataType::Map(
                Arc::new(Field::new(
                    "entries",
                    DataType::Struct(
                        vec![
                            Field::new("key", DataType::Utf8, false),
                            Field::new("value", value.to_arrow(), true),
                        ]
                        .into(),
                    ),
                    false,
                )),
                false,
            ),
        }
    }

    /// Whether this is a nested type, kept as JSON text.
    pub fn is_nested(&self) -> bool {
        matches!(
            self,
            ColumnType::Struct(_) | ColumnType::List(_) | ColumnType::Map(_)
        )
    }

    /// The type of a field inside a nested type: what [`ColumnType::from_arrow`] gives, without
    /// what JSON text would not give back (a decimal of negative scale).
    fn nested_child(dt: &DataType) -> Option<Self> {
        match Self::from_arrow(dt)? {
            ColumnType::Decimal128 { scale, .. } if scale < 0 => None,
            t => Some(t),
        }
    }

    /// The column type for an Arrow type, if asof stores it. `LargeUtf8` and `Utf8View` are read as
    /// `Utf8`, `LargeBinary` and `BinaryView` as `Binary`.
    pub fn from_arrow(dt: &DataType) -> Option<Self> {
        Some(match dt {
            DataType::Boolean => ColumnType::Boolean,
            DataType::Int8 => ColumnType::Int8,
            DataType::Int16 => ColumnType::Int16,
            DataType::Int32 => ColumnType::Int32,
            DataType::Int64 => ColumnType::Int64,
            DataType::UInt8 => ColumnType::UInt8,
            DataType::UInt16 => ColumnType::UInt16,
            DataType::UInt32 => ColumnType::UInt32,
            DataType::UInt64 => ColumnType::UInt64,
            DataType::Float32 => ColumnType::Float32,
            DataType::Float64 => ColumnType::Float64,
            DataType::Decimal128(p, s) => ColumnType::Decimal128 {
                precision: *p,
                scale: *s,
            },
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => ColumnType::Utf8,
            DataType::Binary | DataType::LargeBinary | DataType::BinaryView => ColumnType::Binary,
            DataType::Date32 => ColumnType::Date32,
            DataType::Timestamp(u, tz) => ColumnType::Timestamp {
                unit: TimeUnit::from_arrow(u),
                tz: tz.as_deref().map(str::to_string),
            },
            DataType::List(f) | DataType::LargeList(f)
                if matches!(
                    f.data_type(),
                    DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
                ) =>
            {
                ColumnType::ListUtf8
            }
            DataType::List(f) | DataType::LargeList(f) => {
                ColumnType::List(Box::new(Self::nested_child(f.data_type())?))
            }
            DataType::Struct(fields) if !fields.is_empty() => ColumnType::Struct(
                fields
                    .iter()
                    .map(|f| Some((f.name().clone(), Self::nested_child(f.data_type())?)))
                    .collect::<Option<Vec<_>>>()?,
            ),
            DataType::Map(entries, _) => match entries.data_type() {
                DataType::Struct(kv)
                    if kv.len() == 2
                        && matches!(
                            kv[0].data_type(),
                            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
                        ) =>
                {
                    ColumnType::Map(Box::new(Self::nested_child(kv[1].data_type())?))
                }
                _ => return None,
            },
            _ => return None,
        })
    }

    /// Whether values of this type have a total order usable for SEQUENCE BY.
    pub fn is_orderable(&self) -> bool {
        !matches!(
            self,
            ColumnType::Boolean
                | ColumnType::Float32
                | ColumnType::Float64
                | ColumnType::Binary
                | ColumnType::ListUtf8
        ) && !self.is_nested()
    }

    /// Whether values of this type can be part of a key.
    pub fn is_keyable(&self) -> bool {
        !matches!(self, ColumnType::ListUtf8) && !self.is_nested()
    }
}

impl std::fmt::Display for ColumnType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.to_arrow())
    }
}

/// One cell. Integers of every width, dates and timestamps are held as `Int` (in the column's unit);
/// the column's [`ColumnType`] says how to read them.
#[derive(Clone, Debug, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub enum Value {
    /// SQL NULL.
    Null,
    /// A boolean.
    Bool(bool),
    /// A signed integer, a date (days) or a timestamp (in the column's unit).
    Int(i64),
    /// An unsigned integer.
    UInt(u64),
    /// A float; equality and order are by `total_cmp`, so NaN equals itself.
    Float(f64),
    /// A decimal's unscaled value.
    Decimal(i128),
    /// A string.
    Str(Box<str>),
    /// Bytes.
    Bytes(Box<[u8]>),
    /// A list of nullable strings.
    List(Box<[Option<Box<str>>]>),
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::Str(s.into())
    }
}
impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::Str(s.into())
    }
}
impl From<i64> for Value {
    fn from(i: i64) -> Self {
        Value::Int(i)
    }
}
impl From<i32> for Value {
    fn from(i: i32) -> Self {
        Value::Int(i.into())
    }
}
impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}
impl From<f64> for Value {
    fn from(f: f64) -> Self {
        Value::Float(f)
    }
}

/// A row of values, shared between the engine's structures.
pub type Row = Arc<[Value]>;

/// One cell read in place: a [`Value`] without its allocations (each variant is the `Value`
/// variant of its name, borrowed). A scan reads the cells of a row stored in a page this way,
/// straight from the page's columns ([`crate::RowValues::get`]); a list is built, since a page
/// stores its items apart.
#[derive(Clone, Debug, PartialEq)]
#[allow(missing_docs)]
pub enum ValueRef<'a> {
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    Decimal(i128),
    Str(&'a str),
    Bytes(&'a [u8]),
    List(std::borrow::Cow<'a, [Option<Box<str>>]>),
}

impl<'a> From<&'a Value> for ValueRef<'a> {
    #[inline]
    fn from(v: &'a Value) -> Self {
        match v {
            Value::Null => ValueRef::Null,
            Value::Bool(b) => ValueRef::Bool(*b),
            Value::Int(i) => ValueRef::Int(*i),
            Value::UInt(u) => ValueRef::UInt(*u),
            Value::Float(f) => ValueRef::Float(*f),
            Value::Decimal(d) => ValueRef::Decimal(*d),
            Value::Str(s) => ValueRef::Str(s),
            Value::Bytes(b) => ValueRef::Bytes(b),
            Value::List(l) => ValueRef::List(std::borrow::Cow::Borrowed(l)),
        }
    }
}

impl ValueRef<'_> {
    /// The value, built.
    pub fn to_value(self) -> Value {
        match self {
            ValueRef::Null => Value::Null,
            ValueRef::Bool(b) => Value::Bool(b),
            ValueRef::Int(i) => Value::Int(i),
            ValueRef::UInt(u) => Value::UInt(u),
            ValueRef::Float(f) => Value::Float(f),
            ValueRef::Decimal(d) => Value::Decimal(d),
            ValueRef::Str(s) => Value::Str(s.into()),
            ValueRef::Bytes(b) => Value::Bytes(b.into()),
            ValueRef::List(l) => Value::List(l.into_owned().into()),
        }
    }
}

impl Value {
    /// Whether this is NULL.
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    fn rank(&self) -> u8 {
        match self {
            Value::Null => 0,
            Value::Bool(_) => 1,
            Value::Int(_) => 2,
            Value::UInt(_) => 3,
            Value::Float(_) => 4,
            Value::Decimal(_) => 5,
            Value::Str(_) => 6,
            Value::Bytes(_) => 7,
            Value::List(_) => 8,
        }
    }

    /// Reads `text` as a value of type `ty` (`2025-07-18T10:01:00` for timestamps and dates, the
    /// usual literals otherwise). A timestamp without a zone is read as UTC.
    pub fn parse(text: &str, ty: &ColumnType) -> Result<Value, String> {
        if *ty == ColumnType::Utf8 {
            return Ok(Value::Str(text.into()));
        }
        let arr: ArrayRef = Arc::new(StringArray::from(vec![text]));
        let (cast, failed) = cast_column(&arr, ty)?;
        if failed > 0 || cast.is_null(0) {
            return Err(format!("`{text}` is not a valid {ty}"));
        }
        Ok(column_values(cast.as_ref(), ty).swap_remove(0))
    }

    /// Converts a value given by a caller to the column type `ty`: strings are parsed, integers are
    /// taken as they are (days for dates, the column's unit for timestamps).
    pub fn coerce(&self, ty: &ColumnType) -> Result<Value, String> {
        match (self, ty) {
            (Value::Str(s), t) if *t != ColumnType::Utf8 => Value::parse(s, t),
            (
                Value::UInt(u),
                ColumnType::Int8
                | ColumnType::Int16
                | ColumnType::Int32
                | ColumnType::Int64
                | ColumnType::Date32
                | ColumnType::Timestamp { .. },
            ) => i64::try_from(*u)
                .map(Value::Int)
                .map_err(|_| format!("{u} does not fit {ty}")),
            (
                Value::Int(i),
                ColumnType::UInt8 | ColumnType::UInt16 | ColumnType::UInt32 | ColumnType::UInt64,
            ) => u64::try_from(*i)
                .map(Value::UInt)
                .map_err(|_| format!("{i} does not fit {ty}")),
            (v, _) => Ok(v.clone()),
        }
    }

    /// The canonical total order of docs/SEMANTICS.md §3: NULL lowest, then by value.
    pub fn canonical_cmp(&self, other: &Value) -> Ordering {
        match (self, other) {
            (Value::Bool(a), Value::Bool(b)) => a.cmp(b),
            (Value::Int(a), Value::Int(b)) => a.cmp(b),
            (Value::UInt(a), Value::UInt(b)) => a.cmp(b),
            (Value::Float(a), Value::Float(b)) => a.total_cmp(b),
            (Value::Decimal(a), Value::Decimal(b)) => a.cmp(b),
            (Value::Str(a), Value::Str(b)) => a.cmp(b),
            (Value::Bytes(a), Value::Bytes(b)) => a.cmp(b),
            (Value::List(a), Value::List(b)) => a.cmp(b),
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

impl PartialEq for Value {
    fn eq(&self, other: &Self) -> bool {
        self.canonical_cmp(other) == Ordering::Equal
    }
}
impl Eq for Value {}

/// Compares two rows column by column in the canonical order.
pub fn cmp_rows(a: &[Value], b: &[Value]) -> Ordering {
    for (x, y) in a.iter().zip(b) {
        match x.canonical_cmp(y) {
            Ordering::Equal => {}
            o => return o,
        }
    }
    a.len().cmp(&b.len())
}

/// Gives a timestamp array another zone without touching its values (they are UTC instants).
fn with_zone(array: &ArrayRef, tz: Option<Arc<str>>) -> ArrayRef {
    match array.data_type() {
        DataType::Timestamp(ArrowTimeUnit::Second, _) => Arc::new(
            array
                .as_primitive::<TimestampSecondType>()
                .clone()
                .with_timezone_opt(tz),
        ),
        DataType::Timestamp(ArrowTimeUnit::Millisecond, _) => Arc::new(
            array
                .as_primitive::<TimestampMillisecondType>()
                .clone()
                .with_timezone_opt(tz),
        ),
        DataType::Timestamp(ArrowTimeUnit::Microsecond, _) => Arc::new(
            array
                .as_primitive::<TimestampMicrosecondType>()
                .clone()
                .with_timezone_opt(tz),
        ),
        DataType::Timestamp(ArrowTimeUnit::Nanosecond, _) => Arc::new(
            array
                .as_primitive::<TimestampNanosecondType>()
                .clone()
                .with_timezone_opt(tz),
        ),
        _ => array.clone(),
    }
}

fn is_decimal(t: &DataType) -> bool {
    matches!(t, DataType::Decimal128(..) | DataType::Decimal256(..))
}

/// Casts `array` to `ty`. Returns the cast array and the number of rows whose non-NULL value could
/// not be represented in `ty` (they became NULL, or a fraction would have been cut off).
///
/// Timestamps are instants: a zone on the source or the target never shifts the stored value (a
/// timestamp without a zone is read as UTC); only the unit is converted.
pub(crate) fn cast_column(array: &ArrayRef, ty: &ColumnType) -> Result<(ArrayRef, usize), String> {
    let target = ty.to_arrow();
    if array.data_type() == &target {
        return Ok((array.clone(), 0));
    }
    let options = CastOptions {
        safe: true,
        ..Default::default()
    };
    let (source, naive_target, zone) = match &target {
        DataType::Timestamp(u, tz) => (
            with_zone(array, None),
            DataType::Timestamp(*u, None),
            Some(tz.clone()),
        ),
        t => (array.clone(), t.clone(), None),
    };
    let cast = cast_with_options(&source, &naive_target, &options).map_err(|e| e.to_string())?;
    // Logical nulls: a NullArray has no validity buffer but every value is NULL.
    let mut failed = if cast.logical_null_count() > array.logical_null_count() {
        let src = array.logical_nulls();
        (0..array.len())
            .filter(|&i| src.as_ref().is_none_or(|n| n.is_valid(i)) && cast.is_null(i))
            .count()
    } else {
        0
    };
    // ANSI mode, as Databricks SQL: a fraction cast to an integer is an error, never truncated
    // (1.7 into BIGINT is not 1). A value that does not come back the same was not whole.
    if naive_target.is_integer()
        && (source.data_type().is_floating() || is_decimal(source.data_type()))
    {
        let back =
            cast_with_options(&cast, source.data_type(), &options).map_err(|e| e.to_string())?;
        let differs =
            arrow::compute::kernels::cmp::neq(&back, &source).map_err(|e| e.to_string())?;
        failed += (0..array.len())
            .filter(|&i| cast.is_valid(i) && differs.is_valid(i) && differs.value(i))
            .count();
    }
    // Inside nested values, a value the cast changed (cut, or made NULL) shows as a cell whose
    // JSON text differs once cast back.
    // (A source type a value cannot be cast back to, such as a field of NULLs, is not checked.)
    if ty.is_nested() {
        if let Ok(back) = cast_with_options(&cast, array.data_type(), &options) {
            let before = crate::nested::encode(array)?;
            let after = crate::nested::encode(&back)?;
            failed = before.iter().zip(&after).filter(|(a, b)| a != b).count();
        }
    }
    let cast = match zone {
        Some(tz) => with_zone(&cast, tz),
        None => cast,
    };
    Ok((cast, failed))
}

/// Reads an array already of type `ty` into values.
pub(crate) fn column_values(array: &dyn Array, ty: &ColumnType) -> Vec<Value> {
    fn prim<T: arrow::datatypes::ArrowPrimitiveType>(
        a: &dyn Array,
        f: impl Fn(T::Native) -> Value,
    ) -> Vec<Value> {
        let a = a.as_primitive::<T>();
        (0..a.len())
            .map(|i| {
                if a.is_null(i) {
                    Value::Null
                } else {
                    f(a.value(i))
                }
            })
            .collect()
    }
    match ty {
        ColumnType::Boolean => {
            let a = array
                .as_any()
                .downcast_ref::<BooleanArray>()
                .expect("cast to boolean");
            (0..a.len())
                .map(|i| {
                    if a.is_null(i) {
                        Value::Null
                    } else {
                        Value::Bool(a.value(i))
                    }
                })
                .collect()
        }
        ColumnType::Int8 => prim::<Int8Type>(array, |v| Value::Int(v.into())),
        ColumnType::Int16 => prim::<Int16Type>(array, |v| Value::Int(v.into())),
        ColumnType::Int32 => prim::<Int32Type>(array, |v| Value::Int(v.into())),
        ColumnType::Int64 => prim::<Int64Type>(array, Value::Int),
        ColumnType::UInt8 => prim::<UInt8Type>(array, |v| Value::UInt(v.into())),
        ColumnType::UInt16 => prim::<UInt16Type>(array, |v| Value::UInt(v.into())),
        ColumnType::UInt32 => prim::<UInt32Type>(array, |v| Value::UInt(v.into())),
        ColumnType::UInt64 => prim::<UInt64Type>(array, Value::UInt),
        ColumnType::Float32 => {
            let a = array
                .as_any()
                .downcast_ref::<Float32Array>()
                .expect("cast to f32");
            (0..a.len())
                .map(|i| {
                    if a.is_null(i) {
                        Value::Null
                    } else {
                        Value::Float(a.value(i).into())
                    }
                })
                .collect()
        }
        ColumnType::Float64 => {
            let a = array
                .as_any()
                .downcast_ref::<Float64Array>()
                .expect("cast to f64");
            (0..a.len())
                .map(|i| {
                    if a.is_null(i) {
                        Value::Null
                    } else {
                        Value::Float(a.value(i))
                    }
                })
                .collect()
        }
        ColumnType::Decimal128 { .. } => {
            let a = array
                .as_any()
                .downcast_ref::<Decimal128Array>()
                .expect("cast to decimal");
            (0..a.len())
                .map(|i| {
                    if a.is_null(i) {
                        Value::Null
                    } else {
                        Value::Decimal(a.value(i))
                    }
                })
                .collect()
        }
        ColumnType::Utf8 => {
            let a = array
                .as_any()
                .downcast_ref::<StringArray>()
                .expect("cast to utf8");
            (0..a.len())
                .map(|i| {
                    if a.is_null(i) {
                        Value::Null
                    } else {
                        Value::Str(a.value(i).into())
                    }
                })
                .collect()
        }
        ColumnType::Binary => {
            let a = array
                .as_any()
                .downcast_ref::<BinaryArray>()
                .expect("cast to binary");
            (0..a.len())
                .map(|i| {
                    if a.is_null(i) {
                        Value::Null
                    } else {
                        Value::Bytes(a.value(i).into())
                    }
                })
                .collect()
        }
        ColumnType::Date32 => prim::<Date32Type>(array, |v| Value::Int(v.into())),
        ColumnType::Timestamp { unit, .. } => match unit {
            TimeUnit::Second => prim::<TimestampSecondType>(array, Value::Int),
            TimeUnit::Millisecond => prim::<TimestampMillisecondType>(array, Value::Int),
            TimeUnit::Microsecond => prim::<TimestampMicrosecondType>(array, Value::Int),
            TimeUnit::Nanosecond => prim::<TimestampNanosecondType>(array, Value::Int),
        },
        ColumnType::Struct(_) | ColumnType::List(_) | ColumnType::Map(_) => {
            // Every value of the column's type has a JSON text (`nested.rs`).
            let array: ArrayRef = arrow::array::make_array(array.to_data());
            crate::nested::encode(&array)
                .expect("a nested value of the column's type")
                .into_iter()
                .map(|c| c.map_or(Value::Null, |t| Value::Str(t.into())))
                .collect()
        }
        ColumnType::ListUtf8 => {
            let a = array
                .as_any()
                .downcast_ref::<ListArray>()
                .expect("cast to list");
            (0..a.len())
                .map(|i| {
                    if a.is_null(i) {
                        return Value::Null;
                    }
                    let inner = a.value(i);
                    let s = inner.as_string::<i32>();
                    Value::List(
                        (0..s.len())
                            .map(|j| {
                                if s.is_null(j) {
                                    None
                                } else {
                                    Some(s.value(j).into())
                                }
                            })
                            .collect(),
                    )
                })
                .collect()
        }
    }
}
