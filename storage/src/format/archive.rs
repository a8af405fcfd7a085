//! An rkyv archive as it is stored: a format byte, then the archive compressed with [`lz4`] (or,
//! format 3, [`zstd`]), then (formats 2 and 3) a CRC-32 of both; read back into an aligned buffer, since sled hands out unaligned
//! values. The checksum makes any changed byte of a block an error when it is read, including the
//! bytes a reader would otherwise never look at (padding, unused flag bits).

use rkyv::util::AlignedVec;

use crate::error::{corrupt, Result};
use crate::format::{lz4, zstd};

/// First byte of a stored block: the block format. Format 1 (written before store format 3) has
/// no checksum; format 2 ends with the CRC-32 (IEEE, little-endian) of everything before it;
/// format 3 (since store format 9) is format 2 with zstd in place of LZ4; formats 4 and 5
/// (since store format 12) are formats 2 and 3 holding the packed form of their type
/// ([`Layout::Packed`]); formats 6 and 7 (since store format 13) are formats 2 and 4 not
/// compressed ([`Codec::Bare`]).
const BLOCK_LZ4_RKYV: u8 = 1;
const BLOCK_LZ4_RKYV_CRC: u8 = 2;
const BLOCK_ZSTD_RKYV_CRC: u8 = 3;
const BLOCK_LZ4_PACKED_CRC: u8 = 4;
const BLOCK_ZSTD_PACKED_CRC: u8 = 5;
const BLOCK_BARE_RKYV_CRC: u8 = 6;
const BLOCK_BARE_PACKED_CRC: u8 = 7;

/// Which archive of its type a block holds: the type's own, or its packed form, which the type's
/// reader unpacks (an event block since store format 12: `format/packed_events.rs`). The format
/// byte says which, so that blocks of both kinds read in one store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Layout {
    Plain,
    Packed,
}

/// How a block is compressed: for reading fast, or for taking little room.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Codec {
    /// LZ4: what scans read (pages' row parts, heads' meta and hot parts, page lists), and what
    /// is read back soon (a large commit's spill files); written with the effort given, read
    /// alike.
    Fast(lz4::Effort),
    /// zstd: what scans do not read (the event log, the histories of pages and key heads).
    Small,
    /// Not compressed, behind the same size prefix: small blocks that every scan of their key
    /// reads (a page list's boxes, whose numbers are packed instead), where decompressing cost
    /// more than the bytes it saved.
    Bare,
}

/// Which decompressor a block's format byte calls for.
enum Frame {
    Lz4,
    Zstd,
    Bare,
}

pub(super) fn compress(raw: &[u8], codec: Codec) -> Result<Vec<u8>> {
    compress_as(raw, codec, Layout::Plain)
}

/// `raw`, an archive of the given layout, compressed as a block.
pub(super) fn compress_as(raw: &[u8], codec: Codec, layout: Layout) -> Result<Vec<u8>> {
    let mut out = vec![match (codec, layout) {
        (Codec::Fast(_), Layout::Plain) => BLOCK_LZ4_RKYV_CRC,
        (Codec::Small, Layout::Plain) => BLOCK_ZSTD_RKYV_CRC,
        (Codec::Bare, Layout::Plain) => BLOCK_BARE_RKYV_CRC,
        (Codec::Fast(_), Layout::Packed) => BLOCK_LZ4_PACKED_CRC,
        (Codec::Small, Layout::Packed) => BLOCK_ZSTD_PACKED_CRC,
        (Codec::Bare, Layout::Packed) => BLOCK_BARE_PACKED_CRC,
    }];
    match codec {
        Codec::Fast(effort) => out.extend_from_slice(&lz4::compress(raw, effort)?),
        Codec::Small => out.extend_from_slice(&zstd::compress(raw)?),
        Codec::Bare => {
            // The size prefix of the compressed frames, and its cap.
            if raw.len() > lz4::MAX_UNCOMPRESSED {
                return Err(crate::error::Error::InvalidQuery(format!(
                    "a stored block would hold {} bytes, over the limit of {}",
                    raw.len(),
                    lz4::MAX_UNCOMPRESSED
                )));
            }
            out.extend_from_slice(&(raw.len() as u32).to_le_bytes());
            out.extend_from_slice(raw);
        }
    }
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    Ok(out)
}

/// Whether `block` carries a CRC of its own (every format but the first, written before store
/// format 3): what lets a reader take it without the checksum of the record around it.
pub(crate) fn has_checksum(block: &[u8]) -> bool {
    block.first().is_some_and(|&f| f != BLOCK_LZ4_RKYV)
}

/// The archived bytes of a block written by [`compress`], aligned for rkyv. Its length is the
/// one the block records (see [`lz4`]); no ratio is assumed. A packed block is damage here: its
/// type has no packed form.
pub(super) fn decompress(bytes: &[u8]) -> Result<AlignedVec<16>> {
    match decompress_as(bytes)? {
        (al, Layout::Plain) => Ok(al),
        (_, Layout::Packed) => Err(corrupt("a packed block where a plain one belongs")),
    }
}

/// The archived bytes of a block written by [`compress_as`], and which layout they are.
pub(super) fn decompress_as(bytes: &[u8]) -> Result<(AlignedVec<16>, Layout)> {
    let (frame, body, layout) = open(bytes)?;
    // Straight into the aligned buffer: no second copy.
    let mut al = AlignedVec::<16>::new();
    frame.decompress_into(body, &mut al)?;
    Ok((al, layout))
}

impl Frame {
    /// Decompresses `body`, a frame of this kind, into `out`.
    fn decompress_into(&self, body: &[u8], out: &mut impl lz4::LenBuffer) -> Result<()> {
        match self {
            Frame::Lz4 => lz4::decompress_into(body, out),
            Frame::Zstd => zstd::decompress_into(body, out),
            Frame::Bare => {
                let claimed = lz4::claimed_len(body)?;
                if claimed != body.len() - 4 {
                    return Err(corrupt("block is not as long as its size prefix"));
                }
                out.set_len(claimed);
                out.as_mut_slice().copy_from_slice(&body[4..]);
                Ok(())
            }
        }
    }
}

/// The largest buffer [`with_decompressed`] keeps for its thread's next block: a page list's
/// chunk or a page's row part is a few KiB; a rare larger block is read into a buffer of its
/// own, let go of after it.
const SCRATCH_KEPT: usize = 256 << 10;

thread_local! {
    /// The buffer [`with_decompressed`] decompresses into, kept from one block to the next.
    static SCRATCH: std::cell::RefCell<AlignedVec<16>> =
        std::cell::RefCell::new(AlignedVec::new());
}

/// Calls `read` with the archived bytes of a plain block written by [`compress`], decompressed
/// into a buffer this thread keeps: for readers that take what they need from the archive in
/// place, block after block (a page list's chunks, read for every scan of its key), so that a
/// block costs neither an allocation nor the zeroing of one. A `read` that decompresses a block
/// itself gets a buffer of its own.
pub(super) fn with_decompressed<R>(
    bytes: &[u8],
    read: impl FnOnce(&[u8]) -> Result<R>,
) -> Result<R> {
    let (frame, body, layout) = open(bytes)?;
    if layout == Layout::Packed {
        return Err(corrupt("a packed block where a plain one belongs"));
    }
    let into = |buf: &mut AlignedVec<16>| -> Result<R> {
        let mut out = lz4::Reused::new(buf);
        frame.decompress_into(body, &mut out)?;
        let len = out.len();
        read(&buf[..len])
    };
    let mut into = Some(into);
    if lz4::claimed_len(body)? <= SCRATCH_KEPT {
        let kept = SCRATCH.try_with(|cell| match cell.try_borrow_mut() {
            Ok(mut buf) => into.take().map(|f| f(&mut buf)),
            Err(_) => None,
        });
        if let Ok(Some(r)) = kept {
            return r;
        }
    }
    // A block past what is kept, or this thread's buffer in use (a `read` that reads a block)
    // or gone (the thread is ending): a buffer of its own.
    match into {
        Some(into) => into(&mut AlignedVec::new()),
        None => Err(corrupt("a block read into a buffer gave no answer")),
    }
}

/// The length of the archive a block holds, as its size prefix records it (the block checked
/// against its checksum, the length against the format's cap).
pub(super) fn archived_len(bytes: &[u8]) -> Result<usize> {
    lz4::claimed_len(open(bytes)?.1)
}

/// A block's frame, its body (checked against its checksum, if it has one) and its layout.
fn open(bytes: &[u8]) -> Result<(Frame, &[u8], Layout)> {
    let (&format, body) = bytes.split_first().ok_or_else(|| corrupt("empty block"))?;
    let (frame, has_crc, layout) = match format {
        BLOCK_LZ4_RKYV => (Frame::Lz4, false, Layout::Plain),
        BLOCK_LZ4_RKYV_CRC => (Frame::Lz4, true, Layout::Plain),
        BLOCK_ZSTD_RKYV_CRC => (Frame::Zstd, true, Layout::Plain),
        BLOCK_LZ4_PACKED_CRC => (Frame::Lz4, true, Layout::Packed),
        BLOCK_ZSTD_PACKED_CRC => (Frame::Zstd, true, Layout::Packed),
        BLOCK_BARE_RKYV_CRC => (Frame::Bare, true, Layout::Plain),
        BLOCK_BARE_PACKED_CRC => (Frame::Bare, true, Layout::Packed),
        _ => return Err(corrupt(format!("unknown block format {format}"))),
    };
    let body = if has_crc {
        let at = bytes
            .len()
            .checked_sub(4)
            .filter(|&at| at >= 1)
            .ok_or_else(|| corrupt("block too short for its checksum"))?;
        let (checked, crc) = bytes.split_at(at);
        if crc32fast::hash(checked).to_le_bytes() != crc {
            return Err(corrupt("block fails its checksum"));
        }
        &checked[1..]
    } else {
        body
    };
    Ok((frame, body, layout))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_block_reads_back_as_a_compressed_one_does_and_a_changed_byte_is_an_error() {
        let raw: Vec<u8> = (0u32..300).flat_map(|i| i.to_le_bytes()).collect();
        let (bare, lz4) = (
            compress(&raw, Codec::Bare).unwrap(),
            compress(&raw, Codec::Fast(lz4::Effort::Quick)).unwrap(),
        );
        assert_eq!(
            bare.len(),
            1 + 4 + raw.len() + 4,
            "format, size, bytes, CRC"
        );
        for block in [&bare, &lz4] {
            assert_eq!(&decompress(block).unwrap()[..], &raw[..]);
            let read = with_decompressed(block, |b| Ok(b.to_vec())).unwrap();
            assert_eq!(read, raw);
        }
        for at in [1, 3, 10, bare.len() - 1] {
            let mut bad = bare.clone();
            bad[at] ^= 0x10;
            assert!(decompress(&bad).is_err(), "byte {at}");
        }
        // A size prefix that disagrees with the bytes, its checksum made again: damage.
        let mut short = bare[..bare.len() - 5].to_vec();
        short.extend_from_slice(&crc32fast::hash(&short).to_le_bytes());
        let e = decompress(&short).unwrap_err().to_string();
        assert!(e.contains("not as long as its size prefix"), "{e}");
    }
}
