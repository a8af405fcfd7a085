//! Nested values (`STRUCT`, `ARRAY`, `MAP` columns): each cell is kept as its JSON text, written
//! and read back by arrow-json with the column's exact Arrow type, so a cell comes back as the
//! same value (docs/FORMAT.md §5.3 "Nested values").
//!
//! Where arrow-json's own text would not come back the same, this module writes its own:
//! timestamps and dates as their integers (in the column's unit: every instant, any year, any
//! zone), and floats that are not finite as the strings `"NaN"`, `"inf"` and `"-inf"` (arrow-json
//! writes them as `null`). Maps are written with their NULL values (`explicit_nulls`).

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::{DataType, Field, FieldRef, Float32Type, Float64Type, Int32Type, Int64Type};
use arrow::error::ArrowError;
use arrow::json::writer::{make_encoder, Encoder, EncoderFactory, EncoderOptions, NullableEncoder};
use arrow::json::ReaderBuilder;

use crate::value::{ColumnType, Value};

/// The JSON text of each cell of `array` (of a nested type), NULL cells as [`Value::Null`].
pub(crate) fn encode(array: &ArrayRef) -> Result<Vec<Value>, String> {
    let field: FieldRef = Arc::new(Field::new("v", array.data_type().clone(), true));
    let options = EncoderOptions::default()
        .with_explicit_nulls(true)
        .with_encoder_factory(Arc::new(ExactText));
    let mut enc = make_encoder(&field, array.as_ref(), &options).map_err(|e| e.to_string())?;
    let mut out = Vec::with_capacity(array.len());
    let mut buf = Vec::new();
    for i in 0..array.len() {
        if array.is_null(i) {
            out.push(Value::Null);
            continue;
        }
        buf.clear();
        enc.encode(i, &mut buf);
        let text = std::str::from_utf8(&buf).map_err(|e| e.to_string())?;
        out.push(Value::Str(text.into()));
    }
    Ok(out)
}

/// Builds an array of nested type `ty` from cells' JSON texts (see [`encode`]).
pub struct NestedBuilder {
    field: FieldRef,
    /// The cells, one JSON value per line.
    lines: Vec<u8>,
    rows: usize,
}

impl NestedBuilder {
    /// A builder of a column of `ty`.
    pub fn new(ty: &ColumnType) -> Self {
        NestedBuilder {
            field: Arc::new(Field::new("v", ty.to_arrow(), true)),
            lines: Vec::new(),
            rows: 0,
        }
    }

    /// Appends a cell: its JSON text, or NULL for anything else.
    pub fn append(&mut self, v: &Value) {
        match v {
            Value::Str(text) => self.lines.extend_from_slice(text.as_bytes()),
            _ => self.lines.extend_from_slice(b"null"),
        }
        self.lines.push(b'\n');
        self.rows += 1;
    }

    /// The array of the cells appended since the last call. A cell that is not JSON of the
    /// column's type (a damaged store) is an error.
    pub fn finish(&mut self) -> Result<ArrayRef, String> {
        let rows = std::mem::take(&mut self.rows);
        let lines = std::mem::take(&mut self.lines);
        if rows == 0 {
            return Ok(arrow::array::new_empty_array(self.field.data_type()));
        }
        let mut decoder = ReaderBuilder::new_with_field(self.field.clone())
            .with_batch_size(rows)
            .build_decoder()
            .map_err(|e| e.to_string())?;
        let mut at = 0;
        while at < lines.len() {
            let used = decoder.decode(&lines[at..]).map_err(|e| e.to_string())?;
            if used == 0 {
                break;
            }
            at += used;
        }
        let batch = decoder
            .flush()
            .map_err(|e| e.to_string())?
            .ok_or("no rows decoded")?;
        if batch.num_rows() != rows {
            return Err(format!("{} of {rows} nested cells read", batch.num_rows()));
        }
        Ok(batch.column(0).clone())
    }
}

/// Writes what arrow-json would not read back the same (see the module's documentation).
#[derive(Debug)]
struct ExactText;

impl EncoderFactory for ExactText {
    fn make_default_encoder<'a>(
        &self,
        _field: &'a FieldRef,
        array: &'a dyn Array,
        _options: &'a EncoderOptions,
    ) -> Result<Option<NullableEncoder<'a>>, ArrowError> {
        let nulls = array.nulls().cloned();
        let encoder: Box<dyn Encoder + 'a> = match array.data_type() {
            DataType::Float32 => Box::new(FloatText::F32(array.as_primitive::<Float32Type>())),
            DataType::Float64 => Box::new(FloatText::F64(array.as_primitive::<Float64Type>())),
            DataType::Date32 => Box::new(IntText(array.as_primitive::<Int32Type>())),
            // A timestamp's integer, whatever its unit (the same 64 bits).
            DataType::Timestamp(..) => {
                let data = array.to_data().into_builder().data_type(DataType::Int64);
                let ints = arrow::array::Int64Array::from(data.build()?);
                Box::new(OwnedIntText(ints))
            }
            _ => return Ok(None),
        };
        Ok(Some(NullableEncoder::new(encoder, nulls)))
    }
}

enum FloatText<'a> {
    F32(&'a arrow::array::PrimitiveArray<Float32Type>),
    F64(&'a arrow::array::PrimitiveArray<Float64Type>),
}

impl Encoder for FloatText<'_> {
    fn encode(&mut self, idx: usize, out: &mut Vec<u8>) {
        // Rust writes the shortest text that reads back as the same float.
        let (wide, text) = match self {
            FloatText::F32(a) => (f64::from(a.value(idx)), a.value(idx).to_string()),
            FloatText::F64(a) => (a.value(idx), a.value(idx).to_string()),
        };
        let text = match wide {
            w if w.is_nan() => "\"NaN\"".to_string(),
            w if w == f64::INFINITY => "\"inf\"".to_string(),
            w if w == f64::NEG_INFINITY => "\"-inf\"".to_string(),
            _ => text,
        };
        out.extend_from_slice(text.as_bytes());
    }
}

struct IntText<'a>(&'a arrow::array::PrimitiveArray<Int32Type>);

impl Encoder for IntText<'_> {
    fn encode(&mut self, idx: usize, out: &mut Vec<u8>) {
        out.extend_from_slice(self.0.value(idx).to_string().as_bytes());
    }
}

struct OwnedIntText(arrow::array::PrimitiveArray<Int64Type>);

impl Encoder for OwnedIntText {
    fn encode(&mut self, idx: usize, out: &mut Vec<u8>) {
        out.extend_from_slice(self.0.value(idx).to_string().as_bytes());
    }
}
