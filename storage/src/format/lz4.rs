//! Size-prefixed LZ4: the compression of what is read often (source chunks, pages' row parts, key
//! heads' meta and hot rows, page lists, a large commit's spill files; the event log, pages'
//! histories and row directories use [`super::zstd`], which shares the size prefix and its cap).
//!
//! ```text
//! +----------------------------+-------------------------------+
//! | uncompressed length u32 LE | LZ4 block (raw)               |
//! +----------------------------+-------------------------------+
//! ```
//!
//! Blocks are written by lz4_flex ([`Effort::Quick`]) or by liblz4's HC compressor
//! ([`Effort::Thorough`]), and read by lz4_flex either way: both write the same block format, and
//! a block compressed harder decompresses as fast.
//!
//! Decompression is bounded by what the format records, the uncompressed length written in front
//! of the block, checked against one absolute cap ([`MAX_UNCOMPRESSED`]); never by a ratio of
//! compressed to uncompressed size: LZ4 shrinks long runs about 250 times, and a guard on the ratio
//! made valid, acknowledged data unreadable. The same cap is checked when writing, so nothing is
//! ever written that could not be read back.

use crate::error::{corrupt, Error, Result};

/// The largest uncompressed block the format holds: 1 GiB. A size prefix above it is damage (and
/// must not make a reader allocate gigabytes); a block above it is refused when written.
pub(crate) const MAX_UNCOMPRESSED: usize = 1 << 30;

/// How hard [`compress`] looks for repeats. The blocks are alike to a reader, and read as fast.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Effort {
    /// lz4_flex: for what is written often or read back soon.
    Quick,
    /// liblz4's HC compressor at [`HC_LEVEL`]: about a twentieth smaller, written about four
    /// times slower (docs/PERFORMANCE.md, session 56). For what is written once and kept: pages'
    /// row parts, which are half of a store.
    Thorough,
}

/// The level of [`Effort::Thorough`]: past it, HC levels cost more time for a tenth of a percent.
const HC_LEVEL: i32 = 6;

/// `raw` compressed with `effort`, with its length in front.
pub(crate) fn compress(raw: &[u8], effort: Effort) -> Result<Vec<u8>> {
    if raw.len() > MAX_UNCOMPRESSED {
        return Err(Error::InvalidQuery(format!(
            "a stored block would hold {} bytes, over the limit of {MAX_UNCOMPRESSED} (a single value or row this large cannot be stored)",
            raw.len()
        )));
    }
    match effort {
        Effort::Quick => Ok(lz4_flex::compress_prepend_size(raw)),
        // An empty input is one token in LZ4, which liblz4's binding does not write.
        Effort::Thorough if raw.is_empty() => Ok(lz4_flex::compress_prepend_size(raw)),
        Effort::Thorough => {
            // liblz4 keeps its 256 KiB state per thread (lzzzz), reset in place: a state made
            // for each call (`LZ4_compress_HC`) is cleared whole, and that took longer than the
            // compression of a page. No block refers to an earlier one: each decodes alone.
            // liblz4 fails only on input over `LZ4_MAX_INPUT_SIZE` (about 1.97 GiB, past the cap
            // above) or a misaligned state; should it fail all the same, lz4_flex writes the same
            // block format.
            let mut out = (raw.len() as u32).to_le_bytes().to_vec();
            match lzzzz::lz4_hc::compress_to_vec(raw, &mut out, HC_LEVEL) {
                Ok(_) => Ok(out),
                Err(e) => {
                    debug_assert!(false, "LZ4 HC failed: {e}");
                    Ok(lz4_flex::compress_prepend_size(raw))
                }
            }
        }
    }
}

/// The uncompressed length a block written by [`compress`] claims, checked against the cap.
pub(crate) fn claimed_len(bytes: &[u8]) -> Result<usize> {
    let prefix: [u8; 4] = bytes
        .get(..4)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| corrupt("block is shorter than its size prefix"))?;
    let claimed = u32::from_le_bytes(prefix) as usize;
    if claimed > MAX_UNCOMPRESSED {
        return Err(corrupt(format!(
            "block claims {claimed} uncompressed bytes, over the format's limit of {MAX_UNCOMPRESSED}"
        )));
    }
    Ok(claimed)
}

/// Decompresses a block written by [`compress`] into `out`, which is resized to its length; the
/// block must fill it exactly.
pub(crate) fn decompress_into(bytes: &[u8], out: &mut impl LenBuffer) -> Result<()> {
    let claimed = claimed_len(bytes)?;
    out.set_len(claimed);
    let n = lz4_flex::block::decompress_into(&bytes[4..], out.as_mut_slice())
        .map_err(|e| corrupt(format!("block does not decompress: {e}")))?;
    if n != claimed {
        return Err(corrupt("block is shorter than its size prefix"));
    }
    Ok(())
}

/// A block written by [`compress`], decompressed.
pub(crate) fn decompress(bytes: &[u8]) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    decompress_into(bytes, &mut out)?;
    Ok(out)
}

/// A byte buffer [`decompress_into`] can fill: a `Vec<u8>`, or rkyv's aligned buffer.
pub(crate) trait LenBuffer {
    /// Makes the buffer `len` bytes long, for the decompressor to write over: a fresh one zeroed,
    /// a [`Reused`] one grown if it is shorter.
    fn set_len(&mut self, len: usize);
    /// The bytes.
    fn as_mut_slice(&mut self) -> &mut [u8];
}

impl LenBuffer for Vec<u8> {
    fn set_len(&mut self, len: usize) {
        self.clear();
        self.resize(len, 0);
    }
    fn as_mut_slice(&mut self) -> &mut [u8] {
        self
    }
}

impl<const A: usize> LenBuffer for rkyv::util::AlignedVec<A> {
    fn set_len(&mut self, len: usize) {
        self.clear();
        self.resize(len, 0);
    }
    fn as_mut_slice(&mut self) -> &mut [u8] {
        rkyv::util::AlignedVec::as_mut_slice(self)
    }
}

/// A buffer kept from one block to the next (`super::archive::with_decompressed`): grown when a
/// block needs more, never zeroed, since the decompressor writes every byte of the length it
/// reports, and only those bytes are read.
pub(crate) struct Reused<'a> {
    buf: &'a mut rkyv::util::AlignedVec<16>,
    len: usize,
}

impl<'a> Reused<'a> {
    pub fn new(buf: &'a mut rkyv::util::AlignedVec<16>) -> Self {
        Reused { buf, len: 0 }
    }

    /// The length the last block set.
    pub fn len(&self) -> usize {
        self.len
    }
}

impl LenBuffer for Reused<'_> {
    fn set_len(&mut self, len: usize) {
        if self.buf.len() < len {
            self.buf.resize(len, 0);
        }
        self.len = len;
    }
    fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.buf.as_mut_slice()[..self.len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_that_shrinks_250_times_reads_back() {
        let raw = vec![b'a'; 1 << 20];
        let packed = compress(&raw, Effort::Quick).unwrap();
        assert!(
            packed.len() * 200 < raw.len(),
            "LZ4 shrinks a run about 250x: {} bytes",
            packed.len()
        );
        assert_eq!(decompress(&packed).unwrap(), raw);
    }

    #[test]
    fn a_size_prefix_over_the_cap_is_damage_and_allocates_nothing() {
        let mut packed = compress(b"hello", Effort::Quick).unwrap();
        packed[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        let e = decompress(&packed).unwrap_err().to_string();
        assert!(e.contains("over the format's limit"), "{e}");
    }

    #[test]
    fn a_size_prefix_that_lies_is_damage() {
        let mut packed = compress(&vec![7u8; 1000], Effort::Quick).unwrap();
        packed[..4].copy_from_slice(&2000u32.to_le_bytes());
        assert!(decompress(&packed).is_err());
        packed[..4].copy_from_slice(&10u32.to_le_bytes());
        assert!(decompress(&packed).is_err());
        assert!(decompress(&[1, 0]).is_err());
    }

    /// Bytes like a page's row part: runs of big-endian timestamps that share their leading
    /// bytes, small numbers, and a few repeated strings.
    fn page_like() -> Vec<u8> {
        let mut raw = Vec::new();
        for i in 0u64..400 {
            raw.extend_from_slice(&(1_700_000_000_000 + i * 977).to_be_bytes());
            raw.push((i % 7) as u8);
            raw.extend_from_slice(["alpha", "beta", "gamma"][(i % 3) as usize].as_bytes());
        }
        raw
    }

    #[test]
    fn a_block_compressed_thoroughly_reads_back_as_any_block_and_is_no_larger() {
        let raw = page_like();
        let (quick, thorough) = (
            compress(&raw, Effort::Quick).unwrap(),
            compress(&raw, Effort::Thorough).unwrap(),
        );
        assert_eq!(decompress(&thorough).unwrap(), raw);
        assert_eq!(claimed_len(&thorough).unwrap(), raw.len());
        assert!(
            thorough.len() < quick.len(),
            "HC {} bytes, quick {}",
            thorough.len(),
            quick.len()
        );
        for raw in [&b""[..], b"x"] {
            let packed = compress(raw, Effort::Thorough).unwrap();
            assert_eq!(decompress(&packed).unwrap(), raw);
        }
    }
}
