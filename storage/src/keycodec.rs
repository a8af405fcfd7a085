//! Order-preserving encoding of values into bytes.
//!
//! Keys, sequences and system sequences are stored and compared as byte strings: for two values
//! `a`, `b` of one column type, `encode(a) < encode(b)` exactly when `a < b` (NULL lowest), and
//! `decode(encode(a)) == a`. Composite values (composite keys, STRUCT sequences) are the
//! concatenation of their parts, which preserves the lexicographic order of the tuple.
//!
//! Layout of one value: `0x00` for NULL, else `0x01` and a payload. Integers, dates and timestamps:
//! 8 bytes, big-endian, sign bit flipped. Unsigned: 8 bytes big-endian. Floats: 8 bytes, IEEE bits
//! with the sign flipped (all bits flipped for negatives). Decimals: 16 bytes like integers.
//! Booleans: 1 byte. Strings and bytes: each `0x00` written as `0x00 0xFF`, then the terminator
//! `0x00 0x00`.

use crate::value::{ColumnType, Value};

/// Appends the encoding of `v` (a value of type `ty`) to `out`.
///
/// Lists have no order; they cannot be encoded and yield `Err`.
pub fn encode_value(v: &Value, ty: &ColumnType, out: &mut Vec<u8>) -> Result<(), String> {
    let _ = ty;
    match v {
        Value::Null => out.push(0),
        Value::Bool(b) => out.extend_from_slice(&[1, *b as u8]),
        Value::Int(i) => {
            out.push(1);
            out.extend_from_slice(&((*i as u64) ^ (1 << 63)).to_be_bytes());
        }
        Value::UInt(u) => {
            out.push(1);
            out.extend_from_slice(&u.to_be_bytes());
        }
        Value::Float(f) => {
            let bits = f.to_bits();
            let bits = if bits >> 63 == 1 {
                !bits
            } else {
                bits ^ (1 << 63)
            };
            out.push(1);
            out.extend_from_slice(&bits.to_be_bytes());
        }
        Value::Decimal(d) => {
            out.push(1);
            out.extend_from_slice(&((*d as u128) ^ (1 << 127)).to_be_bytes());
        }
        Value::Str(s) => {
            out.push(1);
            escape(s.as_bytes(), out);
        }
        Value::Bytes(b) => {
            out.push(1);
            escape(b, out);
        }
        Value::List(_) => return Err("lists cannot be encoded as keys".into()),
    }
    Ok(())
}

fn escape(bytes: &[u8], out: &mut Vec<u8>) {
    for &b in bytes {
        out.push(b);
        if b == 0 {
            out.push(0xFF);
        }
    }
    out.extend_from_slice(&[0, 0]);
}

/// Encodes a tuple of values of the given types.
pub fn encode_tuple<'a>(
    values: impl IntoIterator<Item = &'a Value>,
    types: &[ColumnType],
) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(types.len() * 9);
    encode_tuple_into(values, types, &mut out)?;
    Ok(out)
}

/// [`encode_tuple`] into `out`, which is cleared first: a buffer used again allocates nothing
/// per tuple.
pub(crate) fn encode_tuple_into<'a>(
    values: impl IntoIterator<Item = &'a Value>,
    types: &[ColumnType],
    out: &mut Vec<u8>,
) -> Result<(), String> {
    out.clear();
    for (v, ty) in values.into_iter().zip(types) {
        encode_value(v, ty, out)?;
    }
    Ok(())
}

/// A signed integer, date or timestamp from its 8 encoded bytes.
fn int_of(b: [u8; 8]) -> i64 {
    (u64::from_be_bytes(b) ^ (1 << 63)) as i64
}

/// `bytes` as one encoded non-NULL integer, date or timestamp and nothing after it (a sequence
/// bound of one such component), or `None`.
pub fn decode_int(bytes: &[u8]) -> Option<i64> {
    match bytes {
        [1, rest @ ..] => Some(int_of(rest.try_into().ok()?)),
        _ => None,
    }
}

/// Decodes one value of type `ty` from the front of `bytes`; returns it and the rest.
pub fn decode_value<'b>(bytes: &'b [u8], ty: &ColumnType) -> Result<(Value, &'b [u8]), String> {
    let (&tag, rest) = bytes.split_first().ok_or("truncated key")?;
    match tag {
        0 => return Ok((Value::Null, rest)),
        1 => {}
        t => return Err(format!("bad key tag {t}")),
    }
    fn take<const N: usize>(rest: &[u8]) -> Result<([u8; N], &[u8]), String> {
        if rest.len() < N {
            return Err("truncated key".into());
        }
        let (a, b) = rest.split_at(N);
        Ok((a.try_into().expect("length checked"), b))
    }
    Ok(match ty {
        ColumnType::Boolean => {
            let ([b], r) = take::<1>(rest)?;
            (Value::Bool(b != 0), r)
        }
        ColumnType::Int8
        | ColumnType::Int16
        | ColumnType::Int32
        | ColumnType::Int64
        | ColumnType::Date32
        | ColumnType::Timestamp { .. } => {
            let (b, r) = take::<8>(rest)?;
            (Value::Int(int_of(b)), r)
        }
        ColumnType::UInt8 | ColumnType::UInt16 | ColumnType::UInt32 | ColumnType::UInt64 => {
            let (b, r) = take::<8>(rest)?;
            (Value::UInt(u64::from_be_bytes(b)), r)
        }
        ColumnType::Float32 | ColumnType::Float64 => {
            let (b, r) = take::<8>(rest)?;
            let bits = u64::from_be_bytes(b);
            let bits = if bits >> 63 == 1 {
                bits ^ (1 << 63)
            } else {
                !bits
            };
            (Value::Float(f64::from_bits(bits)), r)
        }
        ColumnType::Decimal128 { .. } => {
            let (b, r) = take::<16>(rest)?;
            (
                Value::Decimal((u128::from_be_bytes(b) ^ (1 << 127)) as i128),
                r,
            )
        }
        ColumnType::Utf8 => {
            let (b, r) = unescape(rest)?;
            let s = String::from_utf8(b).map_err(|_| "invalid utf-8 in key")?;
            (Value::Str(s.into()), r)
        }
        ColumnType::Binary => {
            let (b, r) = unescape(rest)?;
            (Value::Bytes(b.into()), r)
        }
        ColumnType::ListUtf8 | ColumnType::Struct(_) | ColumnType::List(_) | ColumnType::Map(_) => {
            return Err("nested values cannot be decoded from keys".into())
        }
    })
}

fn unescape(bytes: &[u8]) -> Result<(Vec<u8>, &[u8]), String> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == 0 {
            match bytes.get(i + 1) {
                Some(0) => return Ok((out, &bytes[i + 2..])),
                Some(0xFF) => {
                    out.push(0);
                    i += 2;
                }
                _ => return Err("bad escape in key".into()),
            }
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Err("unterminated string in key".into())
}

/// Decodes a tuple of values of the given types; the bytes must be consumed exactly.
pub fn decode_tuple(mut bytes: &[u8], types: &[ColumnType]) -> Result<Vec<Value>, String> {
    let mut out = Vec::with_capacity(types.len());
    for ty in types {
        let (v, rest) = decode_value(bytes, ty)?;
        out.push(v);
        bytes = rest;
    }
    if !bytes.is_empty() {
        return Err("trailing bytes after key".into());
    }
    Ok(out)
}

/// An encoded key as an error message shows it: its bytes in hex (the first 32, then `…`).
pub(crate) fn display_key(key: &[u8]) -> String {
    let mut s: String = key.iter().take(32).map(|b| format!("{b:02x}")).collect();
    if key.len() > 32 {
        s.push('…');
    }
    format!("0x{s}")
}

/// Encoded values `a` against `b` as bytes (as `<[u8]>::cmp`), without a call to `memcmp` when
/// they are nine bytes long or their first eight bytes differ: encoded values of the usual types
/// are nine bytes long, a scan by time compares each row's four bounds and each page's zone, a
/// freeze widens a zone by each row's, and those calls were a tenth of a warm as-of snapshot
/// (docs/PERFORMANCE.md, session 40) and 3% of an ingest (session 41); the maps of keys,
/// sequences and business starts a commit folds into ([`crate::record::Bytes`]) compare this
/// way too (session 42).
#[inline]
pub(crate) fn cmp_encoded(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    if let (Some((x, a)), Some((y, b))) = (a.split_first_chunk::<8>(), b.split_first_chunk::<8>()) {
        let (x, y) = (u64::from_be_bytes(*x), u64::from_be_bytes(*y));
        if x != y {
            return x.cmp(&y);
        }
        return match (a, b) {
            ([x], [y]) => x.cmp(y),
            _ => a.cmp(b),
        };
    }
    a.cmp(b)
}

/// Whether encoded values `a` and `b` are the same bytes, as [`cmp_encoded`] compares them.
#[inline]
pub(crate) fn eq_encoded(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    if let (Some((x, a)), Some((y, b))) = (a.split_first_chunk::<8>(), b.split_first_chunk::<8>()) {
        return x == y
            && match (a, b) {
                ([x], [y]) => x == y,
                _ => a == b,
            };
    }
    a == b
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::cmp::Ordering;

    /// A byte, often one at an edge of the signed and unsigned orders (a compare of the wrong
    /// sign, or of little-endian words, orders these wrongly).
    fn byte() -> impl Strategy<Value = u8> {
        prop_oneof![3 => 0u8..3, 1 => proptest::sample::select(vec![0x7f, 0x80, 0xfe, 0xff])]
    }

    proptest! {
        /// Bytes compare as `<[u8]>::cmp` does, whatever their lengths and however far they
        /// agree.
        #[test]
        fn bytes_compare_as_slices_do(
            a in proptest::collection::vec(byte(), 0..12),
            b in proptest::collection::vec(byte(), 0..12),
        ) {
            prop_assert_eq!(cmp_encoded(&a, &b), a.cmp(&b));
            prop_assert_eq!(cmp_encoded(&a, &a), Ordering::Equal);
            prop_assert_eq!(eq_encoded(&a, &b), a == b);
            prop_assert!(eq_encoded(&a, &a));
        }

        /// The same with the first eight bytes shared, as two encoded values of one type whose
        /// leading bytes agree are: only their tails (none, one byte or more) tell them apart.
        #[test]
        fn bytes_sharing_eight_leading_ones_compare_as_slices_do(
            head in proptest::collection::vec(byte(), 8),
            a in proptest::collection::vec(byte(), 0..3),
            b in proptest::collection::vec(byte(), 0..3),
        ) {
            let (a, b) = ([&head[..], &a[..]].concat(), [&head[..], &b[..]].concat());
            prop_assert_eq!(cmp_encoded(&a, &b), a.cmp(&b));
            prop_assert_eq!(eq_encoded(&a, &b), a == b);
        }
    }

    #[test]
    fn one_integer_bound_decodes_as_decode_value_reads_it() {
        let ts = ColumnType::Timestamp {
            unit: crate::TimeUnit::Microsecond,
            tz: None,
        };
        for x in [i64::MIN, -1, 0, 1, 1_700_000_000_000_000, i64::MAX] {
            let bytes = encode_tuple([&Value::Int(x)], std::slice::from_ref(&ts)).unwrap();
            assert_eq!(decode_int(&bytes), Some(x));
            assert_eq!(decode_value(&bytes, &ts).unwrap().0, Value::Int(x));
            // Anything after it, or a NULL, is not one integer bound.
            assert_eq!(decode_int(&[&bytes[..], &[0]].concat()), None);
        }
        let null = encode_tuple([&Value::Null], std::slice::from_ref(&ts)).unwrap();
        assert_eq!(decode_int(&null), None);
        assert_eq!(decode_int(&[1, 2, 3]), None);
    }

    fn typed_value() -> impl Strategy<Value = (ColumnType, Value, Value)> {
        fn opt<T: std::fmt::Debug + Clone + 'static>(
            s: impl Strategy<Value = T> + 'static,
            f: fn(T) -> Value,
        ) -> BoxedStrategy<Value> {
            prop_oneof![1 => Just(Value::Null), 6 => s.prop_map(f)].boxed()
        }
        prop_oneof![
            (opt(any::<i64>(), Value::Int), opt(any::<i64>(), Value::Int)).prop_map(|(a, b)| (
                ColumnType::Int64,
                a,
                b
            )),
            (
                opt(any::<u64>(), Value::UInt),
                opt(any::<u64>(), Value::UInt)
            )
                .prop_map(|(a, b)| (ColumnType::UInt64, a, b)),
            (
                opt(any::<f64>(), Value::Float),
                opt(any::<f64>(), Value::Float)
            )
                .prop_map(|(a, b)| (ColumnType::Float64, a, b)),
            (
                opt(any::<i128>(), Value::Decimal),
                opt(any::<i128>(), Value::Decimal)
            )
                .prop_map(|(a, b)| (
                    ColumnType::Decimal128 {
                        precision: 38,
                        scale: 2
                    },
                    a,
                    b
                )),
            (
                opt(any::<bool>(), Value::Bool),
                opt(any::<bool>(), Value::Bool)
            )
                .prop_map(|(a, b)| (ColumnType::Boolean, a, b)),
            (
                opt("[a\\x00\\xFF-]{0,6}", |s: String| Value::Str(s.into())),
                opt("[a\\x00\\xFF-]{0,6}", |s: String| Value::Str(s.into()))
            )
                .prop_map(|(a, b)| (ColumnType::Utf8, a, b)),
            (
                opt(proptest::collection::vec(any::<u8>(), 0..6), |v| {
                    Value::Bytes(v.into())
                }),
                opt(proptest::collection::vec(any::<u8>(), 0..6), |v| {
                    Value::Bytes(v.into())
                })
            )
                .prop_map(|(a, b)| (ColumnType::Binary, a, b)),
        ]
    }

    proptest! {
        #[test]
        fn order_is_preserved_and_values_round_trip(
            cols in proptest::collection::vec(typed_value(), 1..4)
        ) {
            let types: Vec<ColumnType> = cols.iter().map(|c| c.0.clone()).collect();
            let a: Vec<Value> = cols.iter().map(|c| c.1.clone()).collect();
            let b: Vec<Value> = cols.iter().map(|c| c.2.clone()).collect();
            let ea = encode_tuple(&a, &types).unwrap();
            let eb = encode_tuple(&b, &types).unwrap();
            prop_assert_eq!(ea.cmp(&eb), crate::value::cmp_rows(&a, &b));
            prop_assert_eq!(decode_tuple(&ea, &types).unwrap(), a);
            prop_assert_eq!(decode_tuple(&eb, &types).unwrap(), b);
        }
    }

    #[test]
    fn garbage_does_not_panic() {
        let types = [ColumnType::Utf8, ColumnType::Int64];
        for bytes in [&[][..], &[7], &[1, 0, 3], &[1, 1, 2, 3]] {
            assert!(decode_tuple(bytes, &types).is_err());
        }
    }
}
