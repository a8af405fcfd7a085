//! Nested values (`STRUCT`, `ARRAY`, `MAP` columns): each cell is kept as its JSON text, written
//! and read back by arrow-json with the column's exact Arrow type, so a cell comes back as the
//! same value (docs/FORMAT.md §3.2, "Nested values").
//!
//! Where arrow-json's own text would not come back the same, this module writes its own:
//! timestamps and dates as their integers (in the column's unit: every instant, any year, any
//! zone), and floats that are not finite as the strings `"NaN"`, `"inf"` and `"-inf"` (arrow-json
//! writes them as `null`). Maps are written with their NULL values (`explicit_nulls`).

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::{
    DataType, Date32Type, Field, FieldRef, Float32Type, Float64Type, Int64Type,
};
use arrow::error::ArrowError;
use arrow::json::writer::{make_encoder, Encoder, EncoderFactory, EncoderOptions, NullableEncoder};
use arrow::json::ReaderBuilder;

/// The JSON text of each cell of `array` (of a nested type), `None` for NULL cells.
pub(crate) fn encode(array: &ArrayRef) -> Result<Vec<Option<String>>, String> {
    let field: FieldRef = Arc::new(Field::new("v", array.data_type().clone(), true));
    let options = EncoderOptions::default()
        .with_explicit_nulls(true)
        .with_encoder_factory(Arc::new(ExactText));
    let mut enc = make_encoder(&field, array.as_ref(), &options).map_err(|e| e.to_string())?;
    let mut out = Vec::with_capacity(array.len());
    let mut buf = Vec::new();
    for i in 0..array.len() {
        if array.is_null(i) {
            out.push(None);
            continue;
        }
        buf.clear();
        enc.encode(i, &mut buf);
        let text = std::str::from_utf8(&buf).map_err(|e| e.to_string())?;
        out.push(Some(text.to_string()));
    }
    Ok(out)
}

/// Builds an array of a nested type from cells' JSON texts (see [`encode`]).
pub struct NestedBuilder {
    field: FieldRef,
    /// The cells, one JSON value per line.
    lines: Vec<u8>,
    rows: usize,
}

impl NestedBuilder {
    /// A builder of a column of Arrow type `data_type` (a nested column's).
    pub fn new(data_type: &DataType) -> Self {
        NestedBuilder {
            field: Arc::new(Field::new("v", data_type.clone(), true)),
            lines: Vec::new(),
            rows: 0,
        }
    }

    /// Appends a cell: its JSON text, or NULL.
    pub fn append(&mut self, text: Option<&str>) {
        match text {
            Some(text) => self.lines.extend_from_slice(text.as_bytes()),
            None => self.lines.extend_from_slice(b"null"),
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
            DataType::Date32 => Box::new(IntText(array.as_primitive::<Date32Type>())),
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

struct IntText<'a>(&'a arrow::array::PrimitiveArray<Date32Type>);

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

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{
        BinaryArray, Date32Array, Decimal128Array, Float32Array, Float64Array, Int64Array,
        ListArray, MapArray, StringArray, StructArray, TimestampNanosecondArray,
        TimestampSecondArray, UInt64Array,
    };
    use arrow::buffer::{NullBuffer, OffsetBuffer};
    use arrow::datatypes::{Fields, Int64Type};

    /// Encodes `array` cell by cell, builds it back, and checks it is the same array.
    fn round_trip(array: ArrayRef) {
        let cells = encode(&array).unwrap();
        let mut b = NestedBuilder::new(array.data_type());
        for c in &cells {
            b.append(c.as_deref());
        }
        let back = b.finish().unwrap();
        assert_eq!(back.as_ref(), array.as_ref(), "cells: {cells:?}");
    }

    #[test]
    fn every_leaf_type_comes_back_exactly_from_its_json_text() {
        let n = 5;
        let leaves: Vec<(&str, ArrayRef)> = vec![
            (
                "f64",
                Arc::new(Float64Array::from(vec![
                    Some(f64::NAN),
                    Some(f64::INFINITY),
                    Some(f64::NEG_INFINITY),
                    Some(-0.0),
                    Some(0.1 + 0.2),
                ])),
            ),
            (
                "f32",
                Arc::new(Float32Array::from(vec![
                    Some(f32::NAN),
                    Some(f32::MIN_POSITIVE),
                    None,
                    Some(1e-45),
                    Some(3.4e38),
                ])),
            ),
            (
                "u64",
                Arc::new(UInt64Array::from(vec![
                    Some(u64::MAX),
                    None,
                    Some(0),
                    Some(1),
                    Some(7),
                ])),
            ),
            (
                "i64",
                Arc::new(Int64Array::from(vec![
                    Some(i64::MIN),
                    Some(i64::MAX),
                    None,
                    Some(-1),
                    Some(0),
                ])),
            ),
            (
                "dec",
                Arc::new(
                    Decimal128Array::from(vec![
                        Some(i128::from(i64::MAX) * 1_000_000_000_000),
                        Some(-1),
                        None,
                        Some(0),
                        Some(12345),
                    ])
                    .with_precision_and_scale(38, 4)
                    .unwrap(),
                ),
            ),
            (
                "bin",
                Arc::new(BinaryArray::from(vec![
                    Some(&[0u8, 255, 10][..]),
                    Some(&b""[..]),
                    None,
                    Some(&b"\n\"x"[..]),
                    Some(&[0x80][..]),
                ])),
            ),
            (
                "text",
                Arc::new(StringArray::from(vec![
                    Some("line\nbreak \"quoted\" \\ é"),
                    Some(""),
                    None,
                    Some("null"),
                    Some("\u{0}"),
                ])),
            ),
            (
                "date",
                Arc::new(Date32Array::from(vec![
                    Some(-1_000_000),
                    Some(3_000_000),
                    None,
                    Some(0),
                    Some(1),
                ])),
            ),
            (
                "ts_zoned",
                Arc::new(
                    TimestampSecondArray::from(vec![
                        // Year 1 and year 40000, and an offset with seconds (local mean time).
                        Some(-62_135_596_800),
                        Some(1_200_000_000_000),
                        Some(-3_000_000_000),
                        None,
                        Some(0),
                    ])
                    .with_timezone("America/New_York"),
                ),
            ),
            (
                "ts_ns",
                Arc::new(TimestampNanosecondArray::from(vec![
                    Some(i64::MIN + 1),
                    Some(1_700_000_000_123_456_789),
                    None,
                    Some(-1),
                    Some(i64::MAX),
                ])),
            ),
        ];
        let fields: Fields = leaves
            .iter()
            .map(|(name, a)| Field::new(*name, a.data_type().clone(), true))
            .collect();
        let columns: Vec<ArrayRef> = leaves.iter().map(|(_, a)| a.clone()).collect();
        let structs = StructArray::new(
            fields,
            columns,
            Some(NullBuffer::from(vec![true, true, true, false, true])),
        );
        let structs: ArrayRef = Arc::new(structs);
        round_trip(structs.clone());
        // The same structs as the items of lists, with a NULL list and an empty one.
        let list = ListArray::new(
            Arc::new(Field::new("element", structs.data_type().clone(), true)),
            OffsetBuffer::from_lengths([2, 0, 0, 3]),
            structs,
            Some(NullBuffer::from(vec![true, false, true, true])),
        );
        round_trip(Arc::new(list));
        assert_eq!(n, 5);
    }

    #[test]
    fn maps_keep_null_values_and_the_order_of_their_entries() {
        let keys = StringArray::from(vec!["b", "a", "c", "a"]);
        let values = Int64Array::from(vec![Some(1), None, Some(3), Some(4)]);
        let entries = StructArray::new(
            vec![
                Field::new("key", DataType::Utf8, false),
                Field::new("value", DataType::Int64, true),
            ]
            .into(),
            vec![Arc::new(keys), Arc::new(values)],
            None,
        );
        let map = MapArray::new(
            Arc::new(Field::new("entries", entries.data_type().clone(), false)),
            OffsetBuffer::from_lengths([2, 0, 1, 1]),
            entries,
            Some(NullBuffer::from(vec![true, true, false, true])),
            false,
        );
        round_trip(Arc::new(map));
        let ints = arrow::array::ListArray::from_iter_primitive::<Int64Type, _, _>(vec![
            Some(vec![Some(1), None]),
            None,
        ]);
        round_trip(Arc::new(ints));
    }

    #[test]
    fn a_cell_that_is_not_json_of_its_type_is_an_error() {
        let ty = DataType::List(Arc::new(Field::new("item", DataType::Int64, true)));
        let mut b = NestedBuilder::new(&ty);
        b.append(Some("[1, \"x\"]"));
        assert!(b.finish().is_err());
        b.append(Some("{"));
        assert!(b.finish().is_err());
    }
}
