//! Columns of stored blocks: variable-length byte strings and typed value columns, with their
//! NULLs, as event blocks and cold pages hold them.

use crate::error::{corrupt, Result};
use crate::value::{ColumnType, Value, ValueRef};

/// Variable-length byte strings: `data[offsets[i]..offsets[i + 1]]`.
#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize, Debug, Default)]
pub(crate) struct VarBytes {
    pub offsets: Vec<u32>,
    pub data: Vec<u8>,
}

impl VarBytes {
    /// The bytes it holds in memory.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.offsets.capacity() * 4 + self.data.capacity()
    }

    pub(super) fn push(&mut self, b: &[u8]) {
        if self.offsets.is_empty() {
            self.offsets.push(0);
        }
        self.data.extend_from_slice(b);
        self.offsets.push(self.data.len() as u32);
    }
    pub(super) fn get(&self, i: usize) -> Result<&[u8]> {
        let (a, b) = (self.offsets.get(i), self.offsets.get(i + 1));
        match (a, b) {
            (Some(&a), Some(&b)) if a <= b && (b as usize) <= self.data.len() => {
                Ok(&self.data[a as usize..b as usize])
            }
            _ => Err(corrupt("byte column offsets out of range")),
        }
    }
}

/// One output column of a block. `valid` has one byte per event (0 = NULL).
#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize, Debug)]
pub(crate) enum ColumnData {
    Bool {
        valid: Vec<u8>,
        values: Vec<u8>,
    },
    Int {
        valid: Vec<u8>,
        values: Vec<i64>,
    },
    UInt {
        valid: Vec<u8>,
        values: Vec<u64>,
    },
    Float {
        valid: Vec<u8>,
        values: Vec<f64>,
    },
    Decimal {
        valid: Vec<u8>,
        values: Vec<i128>,
    },
    Str {
        valid: Vec<u8>,
        values: VarBytes,
    },
    Bin {
        valid: Vec<u8>,
        values: VarBytes,
    },
    /// Lists of strings: event `i` has items `items[lists[i]..lists[i + 1]]`.
    List {
        valid: Vec<u8>,
        lists: Vec<u32>,
        item_valid: Vec<u8>,
        items: VarBytes,
    },
}

/// The raw size of a cell of a column of booleans, of numbers, of decimals (what a block's
/// size is counted in).
pub(super) const BOOL_SIZE: usize = 2;
pub(super) const NUMBER_SIZE: usize = 9;
pub(super) const DECIMAL_SIZE: usize = 17;

/// Appends a cell of a column of fixed size: valid if `not_null`, its value `v` (zero when
/// there is none); returns `size`.
pub(super) fn push_fixed<T: Default>(
    valid: &mut Vec<u8>,
    values: &mut Vec<T>,
    not_null: bool,
    v: Option<T>,
    size: usize,
) -> usize {
    valid.push(not_null as u8);
    values.push(v.unwrap_or_default());
    size
}

/// Appends a cell of a column of strings or bytes: valid if `not_null`, its bytes `s`; returns
/// its raw size.
pub(super) fn push_var(
    valid: &mut Vec<u8>,
    values: &mut VarBytes,
    not_null: bool,
    s: &[u8],
) -> usize {
    valid.push(not_null as u8);
    values.push(s);
    5 + s.len()
}

pub(super) fn new_column(ty: &ColumnType) -> ColumnData {
    match ty {
        ColumnType::Boolean => ColumnData::Bool {
            valid: vec![],
            values: vec![],
        },
        ColumnType::UInt8 | ColumnType::UInt16 | ColumnType::UInt32 | ColumnType::UInt64 => {
            ColumnData::UInt {
                valid: vec![],
                values: vec![],
            }
        }
        ColumnType::Float32 | ColumnType::Float64 => ColumnData::Float {
            valid: vec![],
            values: vec![],
        },
        ColumnType::Decimal128 { .. } => ColumnData::Decimal {
            valid: vec![],
            values: vec![],
        },
        // Nested values are JSON text.
        ColumnType::Utf8 | ColumnType::Struct(_) | ColumnType::List(_) | ColumnType::Map(_) => {
            ColumnData::Str {
                valid: vec![],
                values: VarBytes::default(),
            }
        }
        ColumnType::Binary => ColumnData::Bin {
            valid: vec![],
            values: VarBytes::default(),
        },
        ColumnType::ListUtf8 => ColumnData::List {
            valid: vec![],
            lists: vec![0],
            item_valid: vec![],
            items: VarBytes::default(),
        },
        _ => ColumnData::Int {
            valid: vec![],
            values: vec![],
        },
    }
}

impl ColumnData {
    /// The bytes it holds in memory.
    pub(crate) fn heap_bytes(&self) -> usize {
        fn of<T>(v: &Vec<T>) -> usize {
            v.capacity() * std::mem::size_of::<T>()
        }
        match self {
            ColumnData::Bool { valid, values } => of(valid) + of(values),
            ColumnData::Int { valid, values } => of(valid) + of(values),
            ColumnData::UInt { valid, values } => of(valid) + of(values),
            ColumnData::Float { valid, values } => of(valid) + of(values),
            ColumnData::Decimal { valid, values } => of(valid) + of(values),
            ColumnData::Str { valid, values } | ColumnData::Bin { valid, values } => {
                of(valid) + values.heap_bytes()
            }
            ColumnData::List {
                valid,
                lists,
                item_valid,
                items,
            } => of(valid) + of(lists) + of(item_valid) + items.heap_bytes(),
        }
    }

    /// Makes room for `n` more cells (their bytes aside, for strings and lists).
    pub(super) fn reserve(&mut self, n: usize) {
        fn both<T>(valid: &mut Vec<u8>, values: &mut Vec<T>, n: usize) {
            valid.reserve(n);
            values.reserve(n);
        }
        match self {
            ColumnData::Bool { valid, values } => both(valid, values, n),
            ColumnData::Int { valid, values } => both(valid, values, n),
            ColumnData::UInt { valid, values } => both(valid, values, n),
            ColumnData::Float { valid, values } => both(valid, values, n),
            ColumnData::Decimal { valid, values } => both(valid, values, n),
            ColumnData::Str { valid, values } | ColumnData::Bin { valid, values } => {
                both(valid, &mut values.offsets, n + 1)
            }
            ColumnData::List { valid, lists, .. } => both(valid, lists, n),
        }
    }

    /// Appends `v`; returns its raw size. A NULL (or a value of another type than the
    /// column's) is stored as a zero or empty value.
    pub(super) fn push(&mut self, v: &Value) -> usize {
        let not_null = !v.is_null();
        match (self, v) {
            (ColumnData::Bool { valid, values }, v) => {
                let b = matches!(v, Value::Bool(true)) as u8;
                push_fixed(valid, values, not_null, Some(b), BOOL_SIZE)
            }
            (ColumnData::Int { valid, values }, v) => {
                let i = if let Value::Int(i) = v {
                    Some(*i)
                } else {
                    None
                };
                push_fixed(valid, values, not_null, i, NUMBER_SIZE)
            }
            (ColumnData::UInt { valid, values }, v) => {
                let i = if let Value::UInt(i) = v {
                    Some(*i)
                } else {
                    None
                };
                push_fixed(valid, values, not_null, i, NUMBER_SIZE)
            }
            (ColumnData::Float { valid, values }, v) => {
                let f = if let Value::Float(f) = v {
                    Some(*f)
                } else {
                    None
                };
                push_fixed(valid, values, not_null, f, NUMBER_SIZE)
            }
            (ColumnData::Decimal { valid, values }, v) => {
                let d = if let Value::Decimal(d) = v {
                    Some(*d)
                } else {
                    None
                };
                push_fixed(valid, values, not_null, d, DECIMAL_SIZE)
            }
            (ColumnData::Str { valid, values }, v) => {
                let s = if let Value::Str(s) = v {
                    s.as_bytes()
                } else {
                    &[]
                };
                push_var(valid, values, not_null, s)
            }
            (ColumnData::Bin { valid, values }, v) => {
                let s = if let Value::Bytes(s) = v { &s[..] } else { &[] };
                push_var(valid, values, not_null, s)
            }
            (
                ColumnData::List {
                    valid,
                    lists,
                    item_valid,
                    items,
                },
                v,
            ) => {
                valid.push(not_null as u8);
                let mut n = 5;
                if let Value::List(l) = v {
                    for it in l.iter() {
                        item_valid.push(it.is_some() as u8);
                        let s = it.as_deref().unwrap_or("");
                        items.push(s.as_bytes());
                        n += 5 + s.len();
                    }
                }
                lists.push(item_valid.len() as u32);
                n
            }
        }
    }

    /// Entry `i`, built.
    pub(super) fn get(&self, i: usize) -> Result<Value> {
        self.get_ref(i).map(ValueRef::to_value)
    }

    /// Entry `i`, read in place (a list is built: its items lie apart).
    #[inline]
    pub(crate) fn get_ref(&self, i: usize) -> Result<ValueRef<'_>> {
        let short = || corrupt("column shorter than the block");
        let (ColumnData::Bool { valid, .. }
        | ColumnData::Int { valid, .. }
        | ColumnData::UInt { valid, .. }
        | ColumnData::Float { valid, .. }
        | ColumnData::Decimal { valid, .. }
        | ColumnData::Str { valid, .. }
        | ColumnData::Bin { valid, .. }
        | ColumnData::List { valid, .. }) = self;
        if *valid.get(i).ok_or_else(short)? == 0 {
            return Ok(ValueRef::Null);
        }
        fn text<'b>(b: &'b [u8], what: &str) -> Result<&'b str> {
            std::str::from_utf8(b).map_err(|_| corrupt(format!("invalid utf-8 in a stored {what}")))
        }
        Ok(match self {
            ColumnData::Bool { values, .. } => {
                ValueRef::Bool(*values.get(i).ok_or_else(short)? != 0)
            }
            ColumnData::Int { values, .. } => ValueRef::Int(*values.get(i).ok_or_else(short)?),
            ColumnData::UInt { values, .. } => ValueRef::UInt(*values.get(i).ok_or_else(short)?),
            ColumnData::Float { values, .. } => ValueRef::Float(*values.get(i).ok_or_else(short)?),
            ColumnData::Decimal { values, .. } => {
                ValueRef::Decimal(*values.get(i).ok_or_else(short)?)
            }
            ColumnData::Str { values, .. } => ValueRef::Str(text(values.get(i)?, "string")?),
            ColumnData::Bin { values, .. } => ValueRef::Bytes(values.get(i)?),
            ColumnData::List {
                lists,
                item_valid,
                items,
                ..
            } => {
                let (a, b) = match (lists.get(i), lists.get(i + 1)) {
                    (Some(&a), Some(&b)) if a <= b => (a as usize, b as usize),
                    _ => return Err(corrupt("list offsets out of range")),
                };
                let mut out = Vec::with_capacity(b - a);
                for j in a..b {
                    out.push(match item_valid.get(j) {
                        None => return Err(corrupt("list items out of range")),
                        Some(0) => None,
                        Some(_) => Some(text(items.get(j)?, "list")?.into()),
                    });
                }
                ValueRef::List(std::borrow::Cow::Owned(out))
            }
        })
    }
}

/// Appends entries of a typed column to an Arrow builder of type `$b`, one match per call.
macro_rules! append_typed {
    ($out:expr, $valid:expr, $entries:expr, $b:ty, |$e:ident| $value:expr) => {
        if let Some(b) = $out.as_any_mut().downcast_mut::<$b>() {
            for &$e in $entries {
                let $e = $e as usize;
                match $valid.get($e) {
                    Some(0) => b.append_null(),
                    Some(_) => b.append_value($value),
                    None => return Err(corrupt("column shorter than the block")),
                }
            }
            return Ok(true);
        }
    };
}

impl ColumnData {
    /// Appends `entries` of the column to `out`, if it is an Arrow builder this column is read
    /// into a column at a time (64-bit integers and timestamps, floats, booleans, strings);
    /// `false` (nothing appended) for any other, which the caller fills a cell at a time.
    pub(crate) fn append_to(
        &self,
        entries: &[u32],
        out: &mut dyn arrow::array::ArrayBuilder,
    ) -> Result<bool> {
        use arrow::array::{
            BooleanBuilder, Float64Builder, Int64Builder, StringBuilder,
            TimestampMicrosecondBuilder, TimestampMillisecondBuilder, TimestampNanosecondBuilder,
            TimestampSecondBuilder,
        };
        let short = || corrupt("column shorter than the block");
        match self {
            ColumnData::Int { valid, values } => {
                let v = |e: usize| values.get(e).copied().ok_or_else(short);
                append_typed!(out, valid, entries, Int64Builder, |e| v(e)?);
                append_typed!(out, valid, entries, TimestampMicrosecondBuilder, |e| v(e)?);
                append_typed!(out, valid, entries, TimestampMillisecondBuilder, |e| v(e)?);
                append_typed!(out, valid, entries, TimestampNanosecondBuilder, |e| v(e)?);
                append_typed!(out, valid, entries, TimestampSecondBuilder, |e| v(e)?);
            }
            ColumnData::Float { valid, values } => {
                let v = |e: usize| values.get(e).copied().ok_or_else(short);
                append_typed!(out, valid, entries, Float64Builder, |e| v(e)?);
            }
            ColumnData::Bool { valid, values } => {
                let v = |e: usize| values.get(e).map(|&b| b != 0).ok_or_else(short);
                append_typed!(out, valid, entries, BooleanBuilder, |e| v(e)?);
            }
            ColumnData::Str { valid, values } => {
                // The block's strings checked once, each then sliced out of them (a slice that
                // does not fall on character boundaries is damage too).
                let damaged = || corrupt("invalid utf-8 in a stored string");
                let text = std::str::from_utf8(&values.data).map_err(|_| damaged())?;
                let v = |e: usize| -> Result<&str> {
                    let (a, b) = match (values.offsets.get(e), values.offsets.get(e + 1)) {
                        (Some(&a), Some(&b)) => (a as usize, b as usize),
                        _ => return Err(corrupt("byte column offsets out of range")),
                    };
                    text.get(a..b).ok_or_else(damaged)
                };
                append_typed!(out, valid, entries, StringBuilder, |e| v(e)?);
            }
            _ => {}
        }
        Ok(false)
    }
}

impl VarBytes {
    /// Whether the column holds `n` well-formed entries (no entries at all when `n` is 0).
    pub(super) fn holds(&self, n: usize) -> bool {
        let o = &self.offsets;
        (n == 0 && o.len() <= 1 && self.data.is_empty())
            || (o.len() == n + 1
                && o[0] == 0
                // No early exit: one loop of vector instructions.
                && o.windows(2).fold(true, |ok, w| ok & (w[0] <= w[1]))
                && o[n] as usize <= self.data.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn column(ty: ColumnType, values: &[Value]) -> ColumnData {
        let mut c = new_column(&ty);
        for v in values {
            c.push(v);
        }
        c
    }

    #[test]
    fn every_type_of_cell_reads_back_in_place_as_it_was_written() {
        let list = Value::List(vec![Some("a".into()), None, Some("".into())].into());
        let cases = [
            (
                ColumnType::Boolean,
                vec![Value::Bool(true), Value::Null, Value::Bool(false)],
            ),
            (
                ColumnType::Int64,
                vec![Value::Int(-7), Value::Null, Value::Int(i64::MAX)],
            ),
            (ColumnType::UInt64, vec![Value::UInt(u64::MAX), Value::Null]),
            (ColumnType::Float64, vec![Value::Float(1.5), Value::Null]),
            (
                ColumnType::Decimal128 {
                    precision: 38,
                    scale: 2,
                },
                vec![Value::Decimal(-12345), Value::Null],
            ),
            (
                ColumnType::Utf8,
                vec![Value::from("héllo"), Value::Null, Value::from("")],
            ),
            (
                ColumnType::Binary,
                vec![Value::Bytes(vec![0, 255].into()), Value::Null],
            ),
            (ColumnType::ListUtf8, vec![list, Value::Null]),
        ];
        for (ty, values) in cases {
            let c = column(ty.clone(), &values);
            for (i, v) in values.iter().enumerate() {
                let cell = c.get_ref(i).unwrap();
                assert_eq!(cell, ValueRef::from(v), "{ty} entry {i}");
                assert_eq!(&cell.to_value(), v, "{ty} entry {i}");
            }
            let e = c.get_ref(values.len()).unwrap_err().to_string();
            assert!(e.contains("column shorter than the block"), "{ty}: {e}");
        }
    }

    #[test]
    fn a_damaged_string_cell_is_an_error_not_a_wrong_answer() {
        let mut c = column(ColumnType::Utf8, &[Value::from("ok"), Value::from("ab")]);
        if let ColumnData::Str { values, .. } = &mut c {
            values.data[2] = 0xff;
        }
        assert_eq!(c.get_ref(0).unwrap(), ValueRef::Str("ok"));
        let e = c.get_ref(1).unwrap_err().to_string();
        assert!(e.contains("invalid utf-8 in a stored string"), "{e}");
    }

    #[test]
    fn a_damaged_string_read_into_arrow_is_an_error_taken_alone_or_with_the_others() {
        use arrow::array::{Array, StringBuilder};
        let strings: Vec<Value> = (0..8).map(|i| Value::from(format!("s{i}"))).collect();
        let mut c = column(ColumnType::Utf8, &strings);
        // Entries read alone and together; then entry 5's one byte damaged, which makes any
        // read of the block's strings an error (the block is checked whole).
        let mut b = StringBuilder::new();
        assert!(c.append_to(&[3], &mut b).unwrap());
        assert!(c.append_to(&[0, 1, 2, 3, 4, 6, 7], &mut b).unwrap());
        let a = b.finish();
        let got: Vec<&str> = (0..a.len()).map(|i| a.value(i)).collect();
        assert_eq!(got, ["s3", "s0", "s1", "s2", "s3", "s4", "s6", "s7"]);
        if let ColumnData::Str { values, .. } = &mut c {
            values.data[11] = 0xff;
        }
        for entries in [&[5u32][..], &[4], &[0, 1, 2, 3, 4, 5, 6, 7]] {
            let mut b = StringBuilder::new();
            let e = c.append_to(entries, &mut b).unwrap_err().to_string();
            assert!(e.contains("invalid utf-8 in a stored string"), "{e}");
        }
    }
}
