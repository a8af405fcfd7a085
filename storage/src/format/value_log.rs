//! The bytes of the value log (FORMAT.md §5.3): what sled holds for each value (inline, or a pointer
//! into a segment file), the records of the segment files, and the key-value layer's own records
//! in sled. Bytes only: the files themselves are `kv/values.rs`'s.
//!
//! ```text
//! sled value, inline:   0x00 | value
//! sled value, pointer:  0x01 | segment u32 | offset u64 | value length u32      (17 bytes)
//! segment record:       crc32 u32 | key length u32 | value length u32 | key | value
//!                       (the crc covers everything after it)
//! ```

use crate::error::{corrupt, Result};

/// Values of at least this many bytes go to the value log; smaller ones stay in sled. sled's
/// leaves hold 16 pairs whatever their size, and it reads, caches and rewrites a leaf whole: with
/// the pages (kilobytes each) in sled, a point read of one page pulled 16 (docs/PERFORMANCE.md).
pub(crate) const SEPARATE_AT: usize = 128;

const INLINE: u8 = 0;
const POINTER: u8 = 1;

/// Bytes of a record's header: crc, key length, value length.
pub(crate) const RECORD_HEADER: usize = 12;

/// The prefix of the key-value layer's own records in sled. No tag of the key layout is 0
/// (`format/keys.rs`), and the key-value layer hides these records from every scan.
pub(crate) const OWN_PREFIX: u8 = 0;

/// Present in every store whose values are kept this way (its value: [`LAYOUT`]), so that a store
/// whose `values/` folder was lost is not mistaken for one written before the value log.
pub(crate) const LAYOUT_KEY: &[u8] = b"\0layout";

/// The value of [`LAYOUT_KEY`]: this layout's version.
pub(crate) const LAYOUT: &[u8] = &[1];

/// The key of the log's durable end: segment u32, offset u64.
pub(crate) const END_KEY: &[u8] = b"\0end";

/// The prefix of the keys of the segments' counts ([`segment_key`]).
pub(crate) const SEGMENT_PREFIX: &[u8] = b"\0seg";

/// The key of a segment's counts: bytes written to it u64, bytes of it no longer referenced u64.
pub(crate) fn segment_key(segment: u32) -> Vec<u8> {
    let mut k = SEGMENT_PREFIX.to_vec();
    k.extend_from_slice(&segment.to_be_bytes());
    k
}

/// The segment a [`segment_key`] names.
pub(crate) fn parse_segment_key(k: &[u8]) -> Option<u32> {
    let rest = k.strip_prefix(SEGMENT_PREFIX)?;
    Some(u32::from_be_bytes(rest.try_into().ok()?))
}

/// Where a value lives in the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Pointer {
    pub segment: u32,
    /// Where its record starts in the segment.
    pub offset: u64,
    /// The value's length (the record is [`RECORD_HEADER`] + key + value).
    pub len: u32,
}

/// What sled holds for a value.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Stored<'a> {
    Inline(&'a [u8]),
    Logged(Pointer),
}

/// The sled value of a value kept in sled.
pub(crate) fn inline(value: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(1 + value.len());
    v.push(INLINE);
    v.extend_from_slice(value);
    v
}

/// The sled value of a value in the log.
pub(crate) fn pointer(p: Pointer) -> Vec<u8> {
    let mut v = Vec::with_capacity(17);
    v.push(POINTER);
    v.extend_from_slice(&p.segment.to_be_bytes());
    v.extend_from_slice(&p.offset.to_be_bytes());
    v.extend_from_slice(&p.len.to_be_bytes());
    v
}

/// Reads what sled holds.
pub(crate) fn stored(v: &[u8]) -> Result<Stored<'_>> {
    match v.split_first() {
        Some((&INLINE, rest)) => Ok(Stored::Inline(rest)),
        Some((&POINTER, rest)) if rest.len() == 16 => Ok(Stored::Logged(Pointer {
            segment: be_u32(rest, 0).expect("16 bytes"),
            offset: be_u64(rest, 4).expect("16 bytes"),
            len: be_u32(rest, 12).expect("16 bytes"),
        })),
        _ => Err(corrupt(
            "a value in the key-value files is neither inline nor a pointer into the value log",
        )),
    }
}

/// The bytes of a record, appended to `out`.
pub(crate) fn put_record(out: &mut Vec<u8>, key: &[u8], value: &[u8]) {
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&(key.len() as u32).to_be_bytes());
    out.extend_from_slice(&(value.len() as u32).to_be_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(value);
    let crc = crc32fast::hash(&out[start + 4..]);
    out[start..start + 4].copy_from_slice(&crc.to_be_bytes());
}

/// Bytes of the record of `key` and a value of `len` bytes.
pub(crate) fn record_len(key_len: usize, len: usize) -> u64 {
    (RECORD_HEADER + key_len + len) as u64
}

/// A record's header: its key's and value's lengths.
pub(crate) fn record_header(h: &[u8; RECORD_HEADER]) -> (usize, usize) {
    let n = |i: usize| u32::from_be_bytes(h[i..i + 4].try_into().expect("4 bytes")) as usize;
    (n(4), n(8))
}

/// The key of a record whose value is `value_len` bytes, read back with only the first bytes of
/// its value (`bytes` = header, key, part of the value), if its header says so. Its checksum,
/// which covers the whole record, is not checked: a read of a value's first bytes is for values
/// whose leading part carries a checksum of its own (a page's row part).
pub(crate) fn record_key(bytes: &[u8], value_len: usize) -> Option<&[u8]> {
    let h: &[u8; RECORD_HEADER] = bytes.get(..RECORD_HEADER)?.try_into().ok()?;
    let (k, v) = record_header(h);
    (v == value_len && bytes.len() >= RECORD_HEADER + k && bytes.len() <= RECORD_HEADER + k + v)
        .then(|| &bytes[RECORD_HEADER..RECORD_HEADER + k])
}

/// Checks a whole record read back (`bytes` = header, key, value) and returns its key and value.
pub(crate) fn check_record(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    let h: &[u8; RECORD_HEADER] = bytes.get(..RECORD_HEADER)?.try_into().ok()?;
    let (k, v) = record_header(h);
    if bytes.len() != RECORD_HEADER + k + v {
        return None;
    }
    let crc = u32::from_be_bytes(h[0..4].try_into().expect("4 bytes"));
    (crc32fast::hash(&bytes[4..]) == crc).then(|| {
        (
            &bytes[RECORD_HEADER..RECORD_HEADER + k],
            &bytes[RECORD_HEADER + k..],
        )
    })
}

/// The log's durable end.
pub(crate) fn end(segment: u32, offset: u64) -> Vec<u8> {
    let mut v = segment.to_be_bytes().to_vec();
    v.extend_from_slice(&offset.to_be_bytes());
    v
}

/// Reads [`end`].
pub(crate) fn parse_end(v: &[u8]) -> Result<(u32, u64)> {
    match (be_u32(v, 0), be_u64(v, 4), v.len()) {
        (Some(segment), Some(offset), 12) => Ok((segment, offset)),
        _ => Err(corrupt("the value log's end record is damaged")),
    }
}

/// A segment's counts: bytes written, bytes dead.
pub(crate) fn counts(written: u64, dead: u64) -> Vec<u8> {
    let mut v = written.to_be_bytes().to_vec();
    v.extend_from_slice(&dead.to_be_bytes());
    v
}

/// Reads [`counts`].
pub(crate) fn parse_counts(v: &[u8]) -> Result<(u64, u64)> {
    match (be_u64(v, 0), be_u64(v, 8), v.len()) {
        (Some(written), Some(dead), 16) => Ok((written, dead)),
        _ => Err(corrupt("a value log segment's counts are damaged")),
    }
}

/// The big-endian u32 at `at` of `v`, if `v` holds it.
fn be_u32(v: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(v.get(at..at + 4)?.try_into().ok()?))
}

/// The big-endian u64 at `at` of `v`, if `v` holds it.
fn be_u64(v: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_be_bytes(v.get(at..at + 8)?.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointers_and_inline_values_read_back_as_written() {
        let p = Pointer {
            segment: 7,
            offset: 1 << 40,
            len: 12345,
        };
        assert_eq!(stored(&pointer(p)).unwrap(), Stored::Logged(p));
        assert_eq!(stored(&inline(b"abc")).unwrap(), Stored::Inline(b"abc"));
        assert_eq!(stored(&inline(b"")).unwrap(), Stored::Inline(b""));
        assert!(stored(b"").is_err());
        assert!(stored(&[1, 2, 3]).is_err());
        assert!(stored(&[9]).is_err());
    }

    #[test]
    fn a_record_reads_back_and_any_changed_byte_is_caught() {
        let mut bytes = Vec::new();
        put_record(&mut bytes, b"key", b"the value");
        assert_eq!(bytes.len() as u64, record_len(3, 9));
        assert_eq!(check_record(&bytes), Some((&b"key"[..], &b"the value"[..])));
        for i in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[i] ^= 0x10;
            assert_eq!(check_record(&damaged), None, "byte {i}");
        }
        assert_eq!(check_record(&bytes[..bytes.len() - 1]), None);
    }
}
