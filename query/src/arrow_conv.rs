//! From stored values to Arrow arrays.

use std::ops::ControlFlow;
use std::sync::Arc;

use arrow::array::{
    ArrayBuilder, ArrayRef, BinaryBuilder, BooleanBuilder, Date32Builder, Decimal128Builder,
    Float32Builder, Float64Builder, Int16Builder, Int32Builder, Int64Builder, Int8Builder,
    ListBuilder, PrimitiveBuilder, StringBuilder, StructArray, TimestampMicrosecondBuilder,
    TimestampMillisecondBuilder, TimestampNanosecondBuilder, TimestampSecondBuilder, UInt16Builder,
    UInt32Builder, UInt64Builder, UInt8Builder,
};
use arrow::buffer::NullBuffer;
use arrow::datatypes::{ArrowPrimitiveType, DataType, Field, Fields, Schema, SchemaRef};
use arrow::error::ArrowError;

use asof_storage::keycodec::{decode_int, decode_tuple, decode_value};
use asof_storage::{
    ColumnType, StoredAs, StoredRows, TableSchema, TemporalBound, TimeUnit, Value, ValueRef,
    END_AT, START_AT, SYSTEM_END_AT, SYSTEM_START_AT,
};

/// Appends values of one column type to an Arrow array.
pub(crate) enum ValueBuilder {
    Bool(BooleanBuilder),
    I8(Int8Builder),
    I16(Int16Builder),
    I32(Int32Builder),
    I64(Int64Builder),
    U8(UInt8Builder),
    U16(UInt16Builder),
    U32(UInt32Builder),
    U64(UInt64Builder),
    F32(Float32Builder),
    F64(Float64Builder),
    Dec(Decimal128Builder, u8, i8),
    Str(StringBuilder),
    Bin(BinaryBuilder),
    Date(Date32Builder),
    TsS(TimestampSecondBuilder, Option<Arc<str>>),
    TsMs(TimestampMillisecondBuilder, Option<Arc<str>>),
    TsUs(TimestampMicrosecondBuilder, Option<Arc<str>>),
    TsNs(TimestampNanosecondBuilder, Option<Arc<str>>),
    List(ListBuilder<StringBuilder>),
    Nested(asof_storage::NestedBuilder),
}

macro_rules! int_append {
    ($b:expr, $v:expr, $variant:ident, $t:ty) => {
        match $v {
            ValueRef::$variant(i) => match <$t>::try_from(i) {
                Ok(x) => $b.append_value(x),
                Err(_) => $b.append_null(),
            },
            _ => $b.append_null(),
        }
    };
}

impl ValueBuilder {
    pub fn new(ty: &ColumnType, cap: usize) -> Self {
        let tz = |tz: &Option<String>| tz.as_deref().map(Arc::<str>::from);
        match ty {
            ColumnType::Boolean => ValueBuilder::Bool(BooleanBuilder::with_capacity(cap)),
            ColumnType::Int8 => ValueBuilder::I8(Int8Builder::with_capacity(cap)),
            ColumnType::Int16 => ValueBuilder::I16(Int16Builder::with_capacity(cap)),
            ColumnType::Int32 => ValueBuilder::I32(Int32Builder::with_capacity(cap)),
            ColumnType::Int64 => ValueBuilder::I64(Int64Builder::with_capacity(cap)),
            ColumnType::UInt8 => ValueBuilder::U8(UInt8Builder::with_capacity(cap)),
            ColumnType::UInt16 => ValueBuilder::U16(UInt16Builder::with_capacity(cap)),
            ColumnType::UInt32 => ValueBuilder::U32(UInt32Builder::with_capacity(cap)),
            ColumnType::UInt64 => ValueBuilder::U64(UInt64Builder::with_capacity(cap)),
            ColumnType::Float32 => ValueBuilder::F32(Float32Builder::with_capacity(cap)),
            ColumnType::Float64 => ValueBuilder::F64(Float64Builder::with_capacity(cap)),
            ColumnType::Decimal128 { precision, scale } => {
                ValueBuilder::Dec(Decimal128Builder::with_capacity(cap), *precision, *scale)
            }
            ColumnType::Utf8 => ValueBuilder::Str(StringBuilder::with_capacity(cap, cap * 8)),
            ColumnType::Binary => ValueBuilder::Bin(BinaryBuilder::with_capacity(cap, cap * 8)),
            ColumnType::Date32 => ValueBuilder::Date(Date32Builder::with_capacity(cap)),
            ColumnType::Timestamp { unit, tz: z } => match unit {
                TimeUnit::Second => {
                    ValueBuilder::TsS(TimestampSecondBuilder::with_capacity(cap), tz(z))
                }
                TimeUnit::Millisecond => {
                    ValueBuilder::TsMs(TimestampMillisecondBuilder::with_capacity(cap), tz(z))
                }
                TimeUnit::Microsecond => {
                    ValueBuilder::TsUs(TimestampMicrosecondBuilder::with_capacity(cap), tz(z))
                }
                TimeUnit::Nanosecond => {
                    ValueBuilder::TsNs(TimestampNanosecondBuilder::with_capacity(cap), tz(z))
                }
            },
            ColumnType::ListUtf8 => ValueBuilder::List(ListBuilder::new(StringBuilder::new())),
            ColumnType::Struct(_) | ColumnType::List(_) | ColumnType::Map(_) => {
                ValueBuilder::Nested(asof_storage::NestedBuilder::new(&ty.to_arrow()))
            }
        }
    }

    pub fn append(&mut self, v: &Value) {
        self.append_ref(ValueRef::from(v))
    }

    /// Appends a value read in place (a page's cell, say: [`asof_storage::RowValues::get`]).
    pub fn append_ref(&mut self, v: ValueRef<'_>) {
        match self {
            ValueBuilder::Bool(b) => match v {
                ValueRef::Bool(x) => b.append_value(x),
                _ => b.append_null(),
            },
            ValueBuilder::I8(b) => int_append!(b, v, Int, i8),
            ValueBuilder::I16(b) => int_append!(b, v, Int, i16),
            ValueBuilder::I32(b) => int_append!(b, v, Int, i32),
            ValueBuilder::I64(b) => int_append!(b, v, Int, i64),
            ValueBuilder::U8(b) => int_append!(b, v, UInt, u8),
            ValueBuilder::U16(b) => int_append!(b, v, UInt, u16),
            ValueBuilder::U32(b) => int_append!(b, v, UInt, u32),
            ValueBuilder::U64(b) => int_append!(b, v, UInt, u64),
            ValueBuilder::F32(b) => match v {
                ValueRef::Float(x) => b.append_value(x as f32),
                _ => b.append_null(),
            },
            ValueBuilder::F64(b) => match v {
                ValueRef::Float(x) => b.append_value(x),
                _ => b.append_null(),
            },
            ValueBuilder::Dec(b, ..) => match v {
                ValueRef::Decimal(x) => b.append_value(x),
                _ => b.append_null(),
            },
            ValueBuilder::Str(b) => match v {
                ValueRef::Str(x) => b.append_value(x),
                _ => b.append_null(),
            },
            ValueBuilder::Bin(b) => match v {
                ValueRef::Bytes(x) => b.append_value(x),
                _ => b.append_null(),
            },
            ValueBuilder::Date(b) => int_append!(b, v, Int, i32),
            ValueBuilder::TsS(b, _) => int_append!(b, v, Int, i64),
            ValueBuilder::TsMs(b, _) => int_append!(b, v, Int, i64),
            ValueBuilder::TsUs(b, _) => int_append!(b, v, Int, i64),
            ValueBuilder::TsNs(b, _) => int_append!(b, v, Int, i64),
            ValueBuilder::List(b) => match v {
                ValueRef::List(items) => {
                    for s in items.iter() {
                        b.values().append_option(s.as_deref());
                    }
                    b.append(true);
                }
                _ => b.append(false),
            },
            ValueBuilder::Nested(b) => b.append(match v {
                ValueRef::Str(text) => Some(text),
                _ => None,
            }),
        }
    }

    /// The Arrow builder underneath, for appending a stored column to it whole (not a nested
    /// column, which is built from JSON text).
    pub fn as_array_builder(&mut self) -> Option<&mut dyn ArrayBuilder> {
        Some(match self {
            ValueBuilder::Bool(b) => b,
            ValueBuilder::I8(b) => b,
            ValueBuilder::I16(b) => b,
            ValueBuilder::I32(b) => b,
            ValueBuilder::I64(b) => b,
            ValueBuilder::U8(b) => b,
            ValueBuilder::U16(b) => b,
            ValueBuilder::U32(b) => b,
            ValueBuilder::U64(b) => b,
            ValueBuilder::F32(b) => b,
            ValueBuilder::F64(b) => b,
            ValueBuilder::Dec(b, ..) => b,
            ValueBuilder::Str(b) => b,
            ValueBuilder::Bin(b) => b,
            ValueBuilder::Date(b) => b,
            ValueBuilder::TsS(b, _) => b,
            ValueBuilder::TsMs(b, _) => b,
            ValueBuilder::TsUs(b, _) => b,
            ValueBuilder::TsNs(b, _) => b,
            ValueBuilder::List(b) => b,
            ValueBuilder::Nested(_) => return None,
        })
    }

    pub fn append_null(&mut self) {
        self.append(&Value::Null)
    }

    /// The column built so far. Only a nested column can fail: a cell that is not JSON of its
    /// type (a damaged store).
    pub fn finish(&mut self) -> Result<ArrayRef, ArrowError> {
        Ok(match self {
            ValueBuilder::Bool(b) => Arc::new(b.finish()),
            ValueBuilder::I8(b) => Arc::new(b.finish()),
            ValueBuilder::I16(b) => Arc::new(b.finish()),
            ValueBuilder::I32(b) => Arc::new(b.finish()),
            ValueBuilder::I64(b) => Arc::new(b.finish()),
            ValueBuilder::U8(b) => Arc::new(b.finish()),
            ValueBuilder::U16(b) => Arc::new(b.finish()),
            ValueBuilder::U32(b) => Arc::new(b.finish()),
            ValueBuilder::U64(b) => Arc::new(b.finish()),
            ValueBuilder::F32(b) => Arc::new(b.finish()),
            ValueBuilder::F64(b) => Arc::new(b.finish()),
            ValueBuilder::Dec(b, p, s) => Arc::new(
                b.finish()
                    .with_precision_and_scale(*p, *s)
                    .expect("precision and scale were validated"),
            ),
            ValueBuilder::Str(b) => Arc::new(b.finish()),
            ValueBuilder::Bin(b) => Arc::new(b.finish()),
            ValueBuilder::Date(b) => Arc::new(b.finish()),
            ValueBuilder::TsS(b, tz) => Arc::new(b.finish().with_timezone_opt(tz.clone())),
            ValueBuilder::TsMs(b, tz) => Arc::new(b.finish().with_timezone_opt(tz.clone())),
            ValueBuilder::TsUs(b, tz) => Arc::new(b.finish().with_timezone_opt(tz.clone())),
            ValueBuilder::TsNs(b, tz) => Arc::new(b.finish().with_timezone_opt(tz.clone())),
            ValueBuilder::List(b) => Arc::new(b.finish()),
            ValueBuilder::Nested(b) => b.finish().map_err(|e| {
                ArrowError::InvalidArgumentError(format!("a stored nested value: {e}"))
            })?,
        })
    }
}

/// Builds a temporal column (`__START_AT` and friends) from encoded bounds: the sequence's type, or
/// a struct of its components for `SEQUENCE BY STRUCT(...)`.
pub(crate) struct TemporalBuilder {
    types: Vec<ColumnType>,
    parts: Vec<ValueBuilder>,
    fields: Option<Fields>,
    valid: Vec<bool>,
    /// Room for the bounds [`TemporalBuilder::append_stored`] reads a column at a time.
    ints: (Vec<i64>, Vec<bool>),
}

impl TemporalBuilder {
    pub fn new(components: &[(String, ColumnType)], cap: usize) -> Self {
        TemporalBuilder {
            types: components.iter().map(|(_, t)| t.clone()).collect(),
            parts: components
                .iter()
                .map(|(_, t)| ValueBuilder::new(t, cap))
                .collect(),
            fields: (components.len() > 1).then(|| struct_fields(components)),
            valid: Vec::with_capacity(cap),
            ints: (Vec::new(), Vec::new()),
        }
    }

    /// Bound `which` of each of `rows` (a key's rows read from its pages), as
    /// [`TemporalBuilder::append_all`] of [`StoredRows::bounds`] appends them: a sequence of one
    /// 64-bit integer or timestamp, the usual one, read a block at a time and appended in one
    /// piece, any other a cell at a time.
    pub fn append_stored(&mut self, rows: &StoredRows<'_>, which: TemporalBound) {
        let (values, valid) = &mut self.ints;
        values.clear();
        valid.clear();
        let read = matches!(
            &self.parts[..],
            [ValueBuilder::I64(_) | ValueBuilder::TsUs(..)]
        ) && rows.int_bounds(which, values, valid);
        if !read {
            return self.append_all(rows.bounds(which));
        }
        let all_valid = !valid.contains(&false);
        match &mut self.parts[..] {
            [ValueBuilder::I64(b)] => append_int_column(b, values, valid, all_valid),
            [ValueBuilder::TsUs(b, _)] => append_int_column(b, values, valid, all_valid),
            _ => unreachable!("read only for a sequence of one integer or timestamp"),
        }
        // One component: `finish` makes its array alone, without the struct's validity;
        // kept whole for every path all the same.
        self.valid.extend_from_slice(valid);
    }

    pub fn append(&mut self, encoded: Option<&[u8]>) {
        if let [ty] = &self.types[..] {
            // One component: decode straight into the builder, no intermediate vector.
            // The usual sequence, a 64-bit integer or timestamp: no `Value` either.
            match (encoded.and_then(decode_int), &mut self.parts[0]) {
                (Some(x), ValueBuilder::I64(b)) => {
                    b.append_value(x);
                    self.valid.push(true);
                    return;
                }
                (Some(x), ValueBuilder::TsUs(b, _)) => {
                    b.append_value(x);
                    self.valid.push(true);
                    return;
                }
                _ => {}
            }
            match encoded.map(|b| decode_value(b, ty)) {
                Some(Ok((v, []))) => {
                    self.parts[0].append(&v);
                    self.valid.push(true);
                }
                _ => {
                    self.parts[0].append_null();
                    self.valid.push(false);
                }
            }
            return;
        }
        match encoded.map(|b| decode_tuple(b, &self.types)) {
            Some(Ok(values)) => {
                for (p, v) in self.parts.iter_mut().zip(&values) {
                    p.append(v);
                }
                self.valid.push(true);
            }
            // Undecodable bounds cannot occur for rows the engine wrote; show them as NULL.
            _ => {
                for p in &mut self.parts {
                    p.append_null();
                }
                self.valid.push(false);
            }
        }
    }

    /// [`TemporalBuilder::append`] of each of `cells`: a bound of one 64-bit integer or
    /// timestamp, the usual sequence, in one loop, others a cell at a time.
    pub fn append_all<'a>(&mut self, mut cells: impl Iterator<Item = Option<&'a [u8]>>) {
        loop {
            let other = match &mut self.parts[..] {
                [ValueBuilder::I64(b)] => append_ints(b, &mut self.valid, &mut cells),
                [ValueBuilder::TsUs(b, _)] => append_ints(b, &mut self.valid, &mut cells),
                _ => cells.next(),
            };
            match other {
                Some(cell) => self.append(cell),
                None => return,
            }
        }
    }

    pub fn finish(&mut self) -> Result<ArrayRef, ArrowError> {
        let arrays = self
            .parts
            .iter_mut()
            .map(ValueBuilder::finish)
            .collect::<Result<Vec<ArrayRef>, _>>()?;
        let valid = std::mem::take(&mut self.valid);
        Ok(match &self.fields {
            None => arrays.into_iter().next().expect("one component"),
            Some(fields) => Arc::new(StructArray::new(
                fields.clone(),
                arrays,
                Some(NullBuffer::from(valid)),
            )),
        })
    }
}

/// Appends `values` to `b`, each valid where `valid` says (`all_valid`: every one).
fn append_int_column<T: ArrowPrimitiveType<Native = i64>>(
    b: &mut PrimitiveBuilder<T>,
    values: &[i64],
    valid: &[bool],
    all_valid: bool,
) {
    match all_valid {
        true => b.append_slice(values),
        false => b.append_values(values, valid),
    }
}

/// Appends `cells`, encoded 64-bit integers or open bounds (`None`, a NULL), to `b` as
/// [`TemporalBuilder::append`] does, until one is neither: that one is returned (`None`: all
/// were appended).
fn append_ints<'a, T: ArrowPrimitiveType<Native = i64>>(
    b: &mut PrimitiveBuilder<T>,
    valid: &mut Vec<bool>,
    cells: &mut impl Iterator<Item = Option<&'a [u8]>>,
) -> Option<Option<&'a [u8]>> {
    // Internal iteration: an iterator over a page block at a time (`StoredRows::bounds`) runs
    // as nested loops.
    let stopped = cells.try_for_each(|cell| {
        match cell.map(decode_int) {
            Some(Some(x)) => b.append_value(x),
            None => b.append_null(),
            Some(None) => return ControlFlow::Break(cell),
        }
        valid.push(cell.is_some());
        ControlFlow::Continue(())
    });
    match stopped {
        ControlFlow::Break(cell) => Some(cell),
        ControlFlow::Continue(()) => None,
    }
}

fn struct_fields(components: &[(String, ColumnType)]) -> Fields {
    components
        .iter()
        .map(|(n, t)| Field::new(n, t.to_arrow(), true))
        .collect()
}

/// The Arrow type of `__START_AT`/`__END_AT` for a sequence.
pub fn sequence_type(components: &[(String, ColumnType)]) -> DataType {
    match components {
        [(_, t)] => t.to_arrow(),
        many => DataType::Struct(struct_fields(many)),
    }
}

/// The Arrow schema of a target table: its output columns, then the temporal columns of its mode.
pub fn table_arrow_schema(schema: &TableSchema) -> SchemaRef {
    let mut fields: Vec<Field> = schema
        .columns
        .iter()
        .enumerate()
        .map(|(i, (n, t))| Field::new(n, t.to_arrow(), !schema.key_columns.contains(&i)))
        .collect();
    if schema.mode != StoredAs::Scd1 {
        let t = sequence_type(&schema.sequence);
        fields.push(Field::new(START_AT, t.clone(), true));
        fields.push(Field::new(END_AT, t, true));
    }
    if let Some(sys) = &schema.system_sequence {
        fields.push(Field::new(SYSTEM_START_AT, sys.to_arrow(), true));
        fields.push(Field::new(SYSTEM_END_AT, sys.to_arrow(), true));
    }
    Arc::new(Schema::new(fields))
}
