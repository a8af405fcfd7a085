//! An rkyv archive as it is stored: a format byte, then the archive compressed with [`lz4`]; read
//! back into an aligned buffer, since sled hands out unaligned values.

use rkyv::util::AlignedVec;

use crate::error::{corrupt, Result};
use crate::format::lz4;

/// First byte of a stored block: the block format.
const BLOCK_LZ4_RKYV: u8 = 1;

pub(super) fn compress(raw: &[u8]) -> Result<Vec<u8>> {
    let mut out = vec![BLOCK_LZ4_RKYV];
    out.extend_from_slice(&lz4::compress(raw)?);
    Ok(out)
}

/// The archived bytes of a block written by [`compress`], aligned for rkyv. Its length is the
/// one the block records (see [`lz4`]); no ratio is assumed.
pub(super) fn decompress(bytes: &[u8]) -> Result<AlignedVec<16>> {
    let (&format, body) = bytes.split_first().ok_or_else(|| corrupt("empty block"))?;
    if format != BLOCK_LZ4_RKYV {
        return Err(corrupt(format!("unknown block format {format}")));
    }
    // Straight into the aligned buffer: no second copy.
    let mut al = AlignedVec::<16>::new();
    lz4::decompress_into(body, &mut al)?;
    Ok(al)
}
