//! An event block as stored since format 12 (an `E` record, a spill file's block, the events
//! and versions of a page's history): its keys and sequences without offsets when they have
//! one length, its value columns packed as a page's rows' are ([`super::packed_rows`]), so that
//! zstd finds more to share. Readers unpack it into the same [`EventBlock`]; a block's format
//! byte says whether it is packed ([`super::archive::Layout`]).

use rkyv::rancor;

use super::event_block::EventBlock;
use super::packed_rows::{ByteStrings, PackedColumn};
use crate::error::{corrupt, Result};

/// An [`EventBlock`] as stored since format 12: FORMAT.md §3.5 for the bytes.
#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize, Debug)]
pub(super) struct PackedEvents {
    keys: ByteStrings,
    seqs: ByteStrings,
    syss: ByteStrings,
    flags: Vec<u8>,
    update_offsets: Vec<u32>,
    update: Vec<u32>,
    columns: Vec<PackedColumn>,
    truncates: Vec<Vec<u8>>,
}

/// `block` packed.
pub(super) fn pack(block: EventBlock) -> PackedEvents {
    PackedEvents {
        keys: ByteStrings::pack(block.keys),
        seqs: ByteStrings::pack(block.seqs),
        syss: ByteStrings::pack(block.syss),
        flags: block.flags,
        update_offsets: block.update_offsets,
        update: block.update,
        columns: block.columns.into_iter().map(PackedColumn::pack).collect(),
        truncates: block.truncates,
    }
}

/// The block archived by [`pack`] (decompressed), validated, as an [`EventBlock`]; its events'
/// lengths are checked as an event block's are, when its events are read.
pub(super) fn unpack(bytes: &[u8]) -> Result<EventBlock> {
    let bad = |e: rancor::Error| corrupt(format!("block fails validation: {e}"));
    rkyv::access::<ArchivedPackedEvents, rancor::Error>(bytes)
        .map_err(bad)?
        .unpack()
}

impl ArchivedPackedEvents {
    /// The block as an [`EventBlock`] (validated already, as part of its archive).
    pub(super) fn unpack(&self) -> Result<EventBlock> {
        let numbers = |v: &rkyv::vec::ArchivedVec<rkyv::rend::u32_le>| -> Vec<u32> {
            v.iter().map(|n| n.to_native()).collect()
        };
        Ok(EventBlock {
            keys: self.keys.unpack()?,
            seqs: self.seqs.unpack()?,
            syss: self.syss.unpack()?,
            flags: self.flags.to_vec(),
            update_offsets: numbers(&self.update_offsets),
            update: numbers(&self.update),
            columns: (self.columns.iter())
                .map(|c| c.unpack())
                .collect::<Result<_>>()?,
            truncates: self.truncates.iter().map(|t| t.to_vec()).collect(),
        })
    }
}
