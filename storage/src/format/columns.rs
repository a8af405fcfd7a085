//! Columns of stored blocks: variable-length byte strings and typed value columns, with their
//! NULLs, as event blocks and cold pages hold them.

use crate::error::{corrupt, Result};
use crate::value::{ColumnType, Value};

/// Variable-length byte strings: `data[offsets[i]..offsets[i + 1]]`.
#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize, Debug, Default)]
pub(crate) struct VarBytes {
    pub offsets: Vec<u32>,
    pub data: Vec<u8>,
}

impl VarBytes {
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
    /// Appends `v`; returns its raw size.
    pub(super) fn push(&mut self, v: &Value) -> usize {
        match (self, v) {
            (ColumnData::Bool { valid, values }, v) => {
                valid.push(!v.is_null() as u8);
                values.push(matches!(v, Value::Bool(true)) as u8);
                2
            }
            (ColumnData::Int { valid, values }, v) => {
                valid.push(!v.is_null() as u8);
                values.push(if let Value::Int(i) = v { *i } else { 0 });
                9
            }
            (ColumnData::UInt { valid, values }, v) => {
                valid.push(!v.is_null() as u8);
                values.push(if let Value::UInt(i) = v { *i } else { 0 });
                9
            }
            (ColumnData::Float { valid, values }, v) => {
                valid.push(!v.is_null() as u8);
                values.push(if let Value::Float(f) = v { *f } else { 0.0 });
                9
            }
            (ColumnData::Decimal { valid, values }, v) => {
                valid.push(!v.is_null() as u8);
                values.push(if let Value::Decimal(d) = v { *d } else { 0 });
                17
            }
            (ColumnData::Str { valid, values }, v) => {
                valid.push(!v.is_null() as u8);
                let s = if let Value::Str(s) = v {
                    s.as_bytes()
                } else {
                    &[]
                };
                values.push(s);
                5 + s.len()
            }
            (ColumnData::Bin { valid, values }, v) => {
                valid.push(!v.is_null() as u8);
                let s = if let Value::Bytes(s) = v { &s[..] } else { &[] };
                values.push(s);
                5 + s.len()
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
                valid.push(!v.is_null() as u8);
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

    pub(super) fn get(&self, i: usize) -> Result<Value> {
        let valid = |v: &Vec<u8>| {
            v.get(i)
                .copied()
                .ok_or_else(|| corrupt("column shorter than the block"))
        };
        let at = |n: usize| {
            if i < n {
                Ok(())
            } else {
                Err(corrupt("column shorter than the block"))
            }
        };
        Ok(match self {
            ColumnData::Bool { valid: va, values } => {
                at(values.len())?;
                if valid(va)? == 0 {
                    Value::Null
                } else {
                    Value::Bool(values[i] != 0)
                }
            }
            ColumnData::Int { valid: va, values } => {
                at(values.len())?;
                if valid(va)? == 0 {
                    Value::Null
                } else {
                    Value::Int(values[i])
                }
            }
            ColumnData::UInt { valid: va, values } => {
                at(values.len())?;
                if valid(va)? == 0 {
                    Value::Null
                } else {
                    Value::UInt(values[i])
                }
            }
            ColumnData::Float { valid: va, values } => {
                at(values.len())?;
                if valid(va)? == 0 {
                    Value::Null
                } else {
                    Value::Float(values[i])
                }
            }
            ColumnData::Decimal { valid: va, values } => {
                at(values.len())?;
                if valid(va)? == 0 {
                    Value::Null
                } else {
                    Value::Decimal(values[i])
                }
            }
            ColumnData::Str { valid: va, values } => {
                if valid(va)? == 0 {
                    Value::Null
                } else {
                    let s = std::str::from_utf8(values.get(i)?)
                        .map_err(|_| corrupt("invalid utf-8 in a stored string"))?;
                    Value::Str(s.into())
                }
            }
            ColumnData::Bin { valid: va, values } => {
                if valid(va)? == 0 {
                    Value::Null
                } else {
                    Value::Bytes(values.get(i)?.into())
                }
            }
            ColumnData::List {
                valid: va,
                lists,
                item_valid,
                items,
            } => {
                if valid(va)? == 0 {
                    Value::Null
                } else {
                    let (a, b) = match (lists.get(i), lists.get(i + 1)) {
                        (Some(&a), Some(&b)) if a <= b => (a as usize, b as usize),
                        _ => return Err(corrupt("list offsets out of range")),
                    };
                    let mut out = Vec::with_capacity(b - a);
                    for j in a..b {
                        if *item_valid
                            .get(j)
                            .ok_or_else(|| corrupt("list items out of range"))?
                            == 0
                        {
                            out.push(None);
                        } else {
                            let s = std::str::from_utf8(items.get(j)?)
                                .map_err(|_| corrupt("invalid utf-8 in a stored list"))?;
                            out.push(Some(s.into()));
                        }
                    }
                    Value::List(out.into())
                }
            }
        })
    }
}

impl VarBytes {
    /// Whether the column holds `n` well-formed entries (no entries at all when `n` is 0).
    pub(super) fn holds(&self, n: usize) -> bool {
        let o = &self.offsets;
        (n == 0 && o.len() <= 1 && self.data.is_empty())
            || (o.len() == n + 1
                && o[0] == 0
                && o.windows(2).all(|w| w[0] <= w[1])
                && o[n] as usize <= self.data.len())
    }
}
