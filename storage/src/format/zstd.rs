//! Size-prefixed zstd: the compression of what scans do not read (the event log, the histories of
//! pages and key heads), where a smaller file is worth a slower read. Same framing and cap as [`super::lz4`]:
//!
//! ```text
//! +----------------------------+-------------------------------+
//! | uncompressed length u32 LE | zstd frame (level 1)          |
//! +----------------------------+-------------------------------+
//! ```

use std::cell::RefCell;

use super::lz4::{claimed_len, LenBuffer, MAX_UNCOMPRESSED};
use crate::error::{corrupt, Error, Result};

thread_local! {
    /// Each thread's contexts, made on its first block: making one per block cost the ingest 3%
    /// of its time (they allocate and clear their tables).
    static COMPRESSOR: RefCell<Option<zstd::bulk::Compressor<'static>>> = const { RefCell::new(None) };
    static DECOMPRESSOR: RefCell<Option<zstd::bulk::Decompressor<'static>>> = const { RefCell::new(None) };
}

/// zstd's fastest level: an event block shrinks about a quarter more than with LZ4 (level 3 gains
/// 1% more, PERFORMANCE.md session 31).
const LEVEL: i32 = 1;

/// `raw` compressed, with its length in front.
pub(crate) fn compress(raw: &[u8]) -> Result<Vec<u8>> {
    if raw.len() > MAX_UNCOMPRESSED {
        return Err(Error::InvalidQuery(format!(
            "a stored block would hold {} bytes, over the limit of {MAX_UNCOMPRESSED} (a single value or row this large cannot be stored)",
            raw.len()
        )));
    }
    let frame = COMPRESSOR
        .with_borrow_mut(|c| {
            let c = match c {
                Some(c) => c,
                None => c.insert(zstd::bulk::Compressor::new(LEVEL)?),
            };
            c.compress(raw)
        })
        .map_err(|e| Error::Io(format!("cannot compress a block: {e}")))?;
    let mut out = Vec::with_capacity(4 + frame.len());
    out.extend_from_slice(&(raw.len() as u32).to_le_bytes());
    out.extend_from_slice(&frame);
    Ok(out)
}

/// Decompresses a block written by [`compress`] into `out`, which is resized to its length; the
/// frame must fill it exactly.
pub(crate) fn decompress_into(bytes: &[u8], out: &mut impl LenBuffer) -> Result<()> {
    let claimed = claimed_len(bytes)?;
    out.set_len(claimed);
    let n = DECOMPRESSOR
        .with_borrow_mut(|d| {
            let d = match d {
                Some(d) => d,
                None => d.insert(zstd::bulk::Decompressor::new()?),
            };
            d.decompress_to_buffer(&bytes[4..], out.as_mut_slice())
        })
        .map_err(|e| corrupt(format!("block does not decompress: {e}")))?;
    if n != claimed {
        return Err(corrupt("block is shorter than its size prefix"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decompress(bytes: &[u8]) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        decompress_into(bytes, &mut out)?;
        Ok(out)
    }

    #[test]
    fn a_block_reads_back_and_a_run_shrinks() {
        let raw: Vec<u8> = (0..1 << 20).map(|i| (i % 7) as u8).collect();
        let packed = compress(&raw).unwrap();
        assert!(packed.len() * 200 < raw.len(), "{} bytes", packed.len());
        assert_eq!(decompress(&packed).unwrap(), raw);
        assert_eq!(decompress(&compress(b"").unwrap()).unwrap(), b"");
    }

    #[test]
    fn a_size_prefix_that_lies_or_passes_the_cap_is_damage() {
        let packed = compress(b"hello, hello, hello").unwrap();
        for claimed in [3u32, 40, u32::MAX] {
            let mut bad = packed.clone();
            bad[..4].copy_from_slice(&claimed.to_le_bytes());
            let e = decompress(&bad).unwrap_err().to_string();
            assert!(e.contains("the store is corrupt"), "{claimed}: {e}");
        }
        let e = decompress(&packed[..packed.len() - 2])
            .unwrap_err()
            .to_string();
        assert!(e.contains("does not decompress"), "{e}");
    }
}
