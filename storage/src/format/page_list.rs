//! A key's frozen pages as its head lists them ([`PageEntry`]), and the list of a key with many
//! of them, in chunks (docs/FORMAT.md §6, format 10): a key of
//! 100,000 versions has about 1,560 pages, and a lookup that decompressed and deserialised
//! every entry of its head, then tested every page's zone map, took four times as long as one on
//! a key of 10 versions (docs/PERFORMANCE.md, session 34). Here the entries are kept in chunks
//! of [`CHUNK`], each compressed alone, behind an index that gives each chunk its merged zone
//! map: a lookup decompresses the index and only the chunks whose zone may hold its answer.
//!
//! ```text
//! list  = index length: u32 LE | index block | chunk block*
//! index = archive block of [ChunkEntry]            (one per chunk, in page order)
//! chunk = archive block of [PageEntry]             (up to CHUNK entries, in page order)
//! ```

use rkyv::rancor;

use super::archive::{compress, with_decompressed, Codec};
use super::lz4::Effort;
use super::page_boxes::{LiveBoxes, LiveBoxesBuilder};
use super::zone::{PageZone, ZoneBuilder};
use crate::error::{corrupt, Result};

/// One frozen page of a key, as its head lists it.
#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize, Debug, Clone, PartialEq, Eq)]
pub(crate) struct PageEntry {
    /// The page number (the last part of its `P` key).
    pub no: u32,
    /// Its length in bytes.
    pub len: u32,
    /// How many leading bytes hold its row versions.
    pub head: u32,
    /// Where its row versions lie on both timelines and in the commit log (its zone map,
    /// [`super::zone`]): a scan skips a page no row of which can match. No bytes rule nothing
    /// out (an entry made from a list's boxes, [`LiveBoxes`]).
    pub zone: Vec<u8>,
}

impl PageEntry {
    /// The bytes it holds in memory.
    pub fn heap_bytes(&self) -> usize {
        std::mem::size_of::<PageEntry>() + self.zone.len()
    }
}

/// Page entries per chunk; a key with more pages than this has its list in chunks.
pub(crate) const CHUNK: usize = 16;

/// One chunk of a page list, as the index lists it.
#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize, Debug, Clone, PartialEq, Eq)]
struct ChunkEntry {
    /// How many pages it lists.
    count: u32,
    /// The length of its block.
    len: u32,
    /// The bytes of the pages it lists.
    bytes: u64,
    /// The number of its last page.
    last: u32,
    /// Its pages' zone maps merged ([`ZoneBuilder::merge`]).
    zone: Vec<u8>,
}

/// A page list read from its bytes: the index decoded, the chunks left compressed, and, if it
/// was read to be kept, the boxes of its pages' live rows ([`ListBoxes`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PageList {
    chunks: Vec<ChunkEntry>,
    /// The chunk blocks, one after the other.
    blocks: Vec<u8>,
    live: Option<LiveBoxes>,
}

/// Whether a list read makes the boxes of its pages' live rows ([`LiveBoxes`]), for which it
/// decompresses every chunk once: for a list the read cache keeps, from which later scans of
/// the latest version choose pages, not for one read once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ListBoxes {
    Make,
    Skip,
}

/// `pages` as a list in chunks.
pub(crate) fn encode_list(pages: &[PageEntry]) -> Result<Vec<u8>> {
    let mut index = Vec::with_capacity(pages.len().div_ceil(CHUNK));
    let mut blocks = Vec::new();
    for chunk in pages.chunks(CHUNK) {
        let block = compress(
            &rkyv::to_bytes::<rancor::Error>(&chunk.to_vec())
                .map_err(|e| corrupt(format!("cannot encode a page list: {e}")))?,
            Codec::Fast(Effort::Quick),
        )?;
        let mut zone = ZoneBuilder::default();
        for p in chunk {
            zone.merge(PageZone::new(&p.zone));
        }
        index.push(ChunkEntry {
            count: chunk.len() as u32,
            len: u32::try_from(block.len()).map_err(corrupt)?,
            bytes: chunk.iter().map(|p| u64::from(p.len)).sum(),
            last: chunk.last().map_or(0, |p| p.no),
            zone: zone.finish(),
        });
        blocks.extend_from_slice(&block);
    }
    let index = compress(
        &rkyv::to_bytes::<rancor::Error>(&index)
            .map_err(|e| corrupt(format!("cannot encode a page list: {e}")))?,
        Codec::Fast(Effort::Quick),
    )?;
    let mut out = Vec::with_capacity(4 + index.len() + blocks.len());
    out.extend_from_slice(&u32::try_from(index.len()).map_err(corrupt)?.to_le_bytes());
    out.extend_from_slice(&index);
    out.extend_from_slice(&blocks);
    Ok(out)
}

/// The list [`encode_list`] wrote: its index decoded, its chunks checked to fill the rest (and,
/// to make the boxes of their pages' live rows, read).
pub(crate) fn decode_list(bytes: &[u8], boxes: ListBoxes) -> Result<PageList> {
    let (index, blocks) = super::cold_page::split_prefixed(bytes, "page list", "its index")?;
    let chunks = with_decompressed(index, |raw| {
        rkyv::from_bytes::<Vec<ChunkEntry>, rancor::Error>(raw)
            .map_err(|e| corrupt(format!("page list index fails validation: {e}")))
    })?;
    let total: u64 = chunks.iter().map(|c| u64::from(c.len)).sum();
    if total != blocks.len() as u64 {
        return Err(corrupt(format!(
            "page list: its chunks take {total} bytes, not the {} that follow its index",
            blocks.len()
        )));
    }
    let mut list = PageList {
        chunks,
        blocks: blocks.to_vec(),
        live: None,
    };
    if boxes == ListBoxes::Skip {
        return Ok(list);
    }
    let mut live = LiveBoxesBuilder::default();
    list.each_chunk(
        |_| true,
        |entries| {
            for p in entries.iter() {
                live.add(
                    p.no.to_native(),
                    p.len.to_native(),
                    p.head.to_native(),
                    PageZone::new(&p.zone),
                );
            }
            Ok(())
        },
    )?;
    list.live = Some(live.finish());
    Ok(list)
}

impl PageList {
    /// How many pages it lists.
    pub fn count(&self) -> usize {
        self.chunks.iter().map(|c| c.count as usize).sum()
    }

    /// The bytes of the pages it lists.
    pub fn bytes(&self) -> u64 {
        self.chunks.iter().map(|c| c.bytes).sum()
    }

    /// The boxes of its pages' live rows, if it was read to make them.
    pub fn live(&self) -> Option<&LiveBoxes> {
        self.live.as_ref()
    }

    /// The bytes it holds in memory.
    pub fn heap_bytes(&self) -> usize {
        self.live.as_ref().map_or(0, LiveBoxes::heap_bytes)
            + self.blocks.len()
            + self
                .chunks
                .iter()
                .map(|c| std::mem::size_of::<ChunkEntry>() + c.zone.len())
                .sum::<usize>()
    }

    /// The number of its last page.
    pub fn last(&self) -> Option<u32> {
        self.chunks.last().map(|c| c.last)
    }

    /// Every page it lists, in order.
    pub fn entries(&self) -> Result<Vec<PageEntry>> {
        self.entries_where(|_| true)
    }

    /// The pages whose own zone `keep` accepts, in order, read from the chunks whose merged zone
    /// it accepts: every such page is among them, if `keep` accepts every zone wider than one it
    /// accepts (as tests of a point or a range against the extents do). Only the pages kept are
    /// copied out of the chunks ([`PageList::each_chunk`]).
    pub fn entries_where(&self, keep: impl Fn(PageZone<'_>) -> bool) -> Result<Vec<PageEntry>> {
        let mut out = Vec::new();
        self.each_chunk(
            |c| keep(PageZone::new(&c.zone)),
            |entries| {
                for p in entries.iter().filter(|p| keep(PageZone::new(&p.zone))) {
                    out.push(
                        rkyv::deserialize::<PageEntry, rancor::Error>(p)
                            .map_err(|e| corrupt(format!("page list chunk: {e}")))?,
                    );
                }
                Ok(())
            },
        )?;
        Ok(out)
    }

    /// Calls `read` with the entries of each chunk `wanted` accepts, in order, read in place
    /// (archived, not deserialised) from a buffer the thread keeps ([`with_decompressed`]), each
    /// chunk checked to hold what the index says.
    fn each_chunk(
        &self,
        wanted: impl Fn(&ChunkEntry) -> bool,
        mut read: impl FnMut(&rkyv::Archived<Vec<PageEntry>>) -> Result<()>,
    ) -> Result<()> {
        let mut at = 0usize;
        for c in &self.chunks {
            let block = &self.blocks[at..at + c.len as usize];
            at += c.len as usize;
            if !wanted(c) {
                continue;
            }
            with_decompressed(block, |raw| {
                let entries = rkyv::access::<rkyv::Archived<Vec<PageEntry>>, rancor::Error>(raw)
                    .map_err(|e| corrupt(format!("page list chunk fails validation: {e}")))?;
                if entries.len() != c.count as usize
                    || entries.last().map(|p| p.no.to_native()) != Some(c.last)
                {
                    return Err(corrupt(format!(
                        "page list chunk holds {} pages, not the {} up to page {} its index lists",
                        entries.len(),
                        c.count,
                        c.last
                    )));
                }
                read(entries)
            })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::page_boxes::BoxTest;
    use super::super::ranked::RankedFilter;
    use super::*;

    /// Page `no`, its one row at business time `[no, no + 1)` and system time `[no, ∞)`.
    fn page(no: u32) -> PageEntry {
        let mut z = ZoneBuilder::default();
        let (b, e) = (no.to_be_bytes(), (no + 1).to_be_bytes());
        z.add([Some(&b), Some(&e), Some(&b), None], u64::from(no), None);
        PageEntry {
            no,
            len: 100 + no,
            head: 10,
            zone: z.finish(),
        }
    }

    /// Whether a zone may hold business time `t`.
    fn holds(t: u32) -> impl Fn(PageZone<'_>) -> bool {
        move |z| {
            let t = t.to_be_bytes();
            z.live().any(|g| {
                g.business
                    .is_none_or(|x| x.start <= &t[..] && x.end.is_none_or(|e| &t[..] < e))
            })
        }
    }

    #[test]
    fn a_list_in_chunks_reads_back_whole_and_by_zone() {
        let pages: Vec<PageEntry> = (0..200).map(page).collect();
        let list = decode_list(&encode_list(&pages).unwrap(), ListBoxes::Make).unwrap();
        assert_eq!(list.entries().unwrap(), pages);
        assert_eq!(list.count(), 200);
        assert_eq!(
            list.bytes(),
            pages.iter().map(|p| u64::from(p.len)).sum::<u64>()
        );
        assert_eq!(list.last(), Some(199));
        // Made to be kept, it has the boxes of every page, in order.
        let kept = decode_list(&encode_list(&pages).unwrap(), ListBoxes::Make).unwrap();
        let boxed: Vec<(u32, u32, u32)> = (kept.live().unwrap())
            .pages_where(&BoxTest::new(RankedFilter::ALL, RankedFilter::ALL))
            .map(|p| (p.no, p.len, p.head))
            .collect();
        let listed: Vec<(u32, u32, u32)> = pages.iter().map(|p| (p.no, p.len, p.head)).collect();
        assert_eq!(boxed, listed);
        assert!(decode_list(&encode_list(&pages).unwrap(), ListBoxes::Skip)
            .unwrap()
            .live()
            .is_none());
        // Business time 130 is in one page only.
        assert_eq!(list.entries_where(holds(130)).unwrap(), pages[130..131]);
        assert_eq!(list.entries_where(holds(15)).unwrap(), pages[15..16]);
        assert!(list.entries_where(holds(500)).unwrap().is_empty());
    }

    /// A list cut short or with a changed byte is an error, never a panic or a wrong list.
    #[test]
    fn a_damaged_list_is_an_error() {
        let bytes = encode_list(&(0..100).map(page).collect::<Vec<_>>()).unwrap();
        for cut in [0, 3, 10, bytes.len() - 1] {
            assert!(
                decode_list(&bytes[..cut], ListBoxes::Skip).is_err(),
                "cut at {cut}"
            );
        }
        for at in (0..bytes.len()).step_by(7) {
            let mut bad = bytes.clone();
            bad[at] ^= 0x20;
            if let Ok(list) = decode_list(&bad, ListBoxes::Skip) {
                assert!(list.entries().is_err(), "byte {at} changed");
            }
        }
    }
}
