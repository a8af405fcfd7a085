//! A key's frozen pages as its head lists them ([`PageEntry`]), and the list of a key with many
//! of them, in chunks (docs/FORMAT.md §6, format 10): a key of
//! 100,000 versions has about 1,560 pages, and a lookup that decompressed and deserialised
//! every entry of its head, then tested every page's zone map, took four times as long as one on
//! a key of 10 versions (docs/PERFORMANCE.md, session 34). Here the entries are kept in chunks
//! of [`CHUNK`], each compressed alone, behind an index that gives each chunk its merged zone
//! map: a lookup decompresses the index and only the chunks whose zone may hold its answer.
//!
//! ```text
//! list  = index length: u32 LE, bit 31 BOXED | index block | [boxes length: u32 LE | boxes block] | chunk block*
//! index = archive block of [ChunkEntry]            (one per chunk, in page order)
//! boxes = LiveBoxes::encode                        (if BOXED: every page, in page order)
//! chunk = archive block of [PageEntry]             (up to CHUNK entries, in page order)
//! ```
//!
//! A list written since store format 13 is BOXED: the boxes of its pages' live rows
//! ([`super::page_boxes`]) follow its index, and a scan of the latest version chooses its pages
//! by them without decompressing a chunk. One written before has none.

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

/// A page list read from its bytes: its chunks left compressed, and either its index decoded
/// (with the boxes of its pages' live rows if the read asked for them, [`ListBoxes`]) or its
/// stored boxes decoded and its index left for the first read that needs a chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PageList {
    listing: Listing,
    /// The chunk blocks, one after the other.
    blocks: Vec<u8>,
}

/// What of a page list is decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Listing {
    /// Its index, and its boxes if the read took them.
    Indexed {
        chunks: Vec<ChunkEntry>,
        live: Option<LiveBoxes>,
    },
    /// Its stored boxes, which list every page (a scan of the latest version chooses its pages
    /// by them and needs no chunk); its index block, decoded when a read first needs a chunk
    /// (and then checked to list the boxes' pages).
    Boxed {
        live: LiveBoxes,
        index: Vec<u8>,
        /// What the index will weigh in memory once decoded: the length of its archive (which
        /// holds the chunks' zones), and an entry per chunk.
        index_decoded: usize,
        chunks: std::sync::OnceLock<Vec<ChunkEntry>>,
    },
}

/// Bit 31 of a list's first word: the boxes of its pages follow its index (store format 13).
const BOXED: u32 = 1 << 31;

/// Which boxes of its pages' live rows ([`LiveBoxes`]) a list read takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ListBoxes {
    /// Those it stores, or, in a list written before them, those made from its chunks' zones
    /// (which decompresses every chunk once): for a list the read cache keeps, from which later
    /// scans of the latest version choose pages.
    Make,
    /// Those it stores, if any: for a list a scan reads once.
    Stored,
    /// None: for a read that does not choose pages by them.
    Skip,
}

/// `pages` as a list in chunks, with their boxes.
pub(crate) fn encode_list(pages: &[PageEntry]) -> Result<Vec<u8>> {
    let mut boxes = LiveBoxesBuilder::default();
    for p in pages {
        boxes.add(p.no, p.len, p.head, PageZone::new(&p.zone));
    }
    encode_parts(pages, Some(boxes.finish().encode()?))
}

/// `pages` as a list written before store format 13: in chunks, without boxes.
#[cfg(test)]
pub(crate) fn encode_list_unboxed(pages: &[PageEntry]) -> Result<Vec<u8>> {
    encode_parts(pages, None)
}

/// `pages` as a list in chunks, with `boxes` (their encoding) if given.
fn encode_parts(pages: &[PageEntry], boxes: Option<Vec<u8>>) -> Result<Vec<u8>> {
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
    let boxes_len = boxes.as_ref().map_or(0, |b| 4 + b.len());
    let mut out = Vec::with_capacity(4 + index.len() + boxes_len + blocks.len());
    let index_len = u32::try_from(index.len())
        .ok()
        .filter(|&n| n < BOXED)
        .ok_or_else(|| corrupt("a page list's index is too long"))?;
    let flags = if boxes.is_some() { BOXED } else { 0 };
    out.extend_from_slice(&(index_len | flags).to_le_bytes());
    out.extend_from_slice(&index);
    if let Some(boxes) = boxes {
        out.extend_from_slice(&u32::try_from(boxes.len()).map_err(corrupt)?.to_le_bytes());
        out.extend_from_slice(&boxes);
    }
    out.extend_from_slice(&blocks);
    Ok(out)
}

/// The list [`encode_list`] wrote, with the boxes `boxes` asks for: its stored boxes and its
/// index left undecoded until a read needs a chunk, or its index decoded and its chunks checked
/// to fill the rest (and, for [`ListBoxes::Make`] of a list without stored boxes, read to make
/// them).
pub(crate) fn decode_list(bytes: &[u8], boxes: ListBoxes) -> Result<PageList> {
    let word = bytes
        .get(..4)
        .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
        .ok_or_else(|| corrupt("page list too short"))?;
    let (index, rest) = (bytes[4..].split_at_checked((word & !BOXED) as usize))
        .ok_or_else(|| corrupt("page list shorter than its index"))?;
    let (stored, blocks) = match word & BOXED {
        0 => (None, rest),
        _ => {
            let (b, after) = super::cold_page::split_prefixed(rest, "page list", "its boxes")?;
            (Some(b), after)
        }
    };
    let blocks = blocks.to_vec();
    let listing = match (boxes, stored) {
        (ListBoxes::Skip, _) | (ListBoxes::Stored, None) => Listing::Indexed {
            chunks: decode_index(index, &blocks)?,
            live: None,
        },
        (_, Some(stored)) => {
            let live = LiveBoxes::decode(stored)?;
            // A list apart holds more than a chunk of pages (`derived::encode_head`).
            if live.extent().0 == 0 {
                return Err(corrupt("page list: its boxes list no page"));
            }
            let index_decoded = super::archive::archived_len(index)?
                + live.extent().0.div_ceil(CHUNK) * std::mem::size_of::<ChunkEntry>();
            Listing::Boxed {
                live,
                index: index.to_vec(),
                index_decoded,
                chunks: std::sync::OnceLock::new(),
            }
        }
        (ListBoxes::Make, None) => {
            let mut list = PageList {
                listing: Listing::Indexed {
                    chunks: decode_index(index, &blocks)?,
                    live: None,
                },
                blocks,
            };
            let made = list.boxes_from_chunks()?;
            if let Listing::Indexed { live, .. } = &mut list.listing {
                *live = Some(made);
            }
            return Ok(list);
        }
    };
    Ok(PageList { listing, blocks })
}

/// The chunks a list's `index` block lists, checked to take the bytes of its chunk `blocks`.
fn decode_index(index: &[u8], blocks: &[u8]) -> Result<Vec<ChunkEntry>> {
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
    Ok(chunks)
}

/// Checks that the boxes list `bytes` stores, if any, are those its pages' zones make (`asof
/// verify`): boxes that left a page out would make a scan answer without its rows.
pub(crate) fn check_boxes(bytes: &[u8]) -> Result<()> {
    let list = decode_list(bytes, ListBoxes::Stored)?;
    match list.live() {
        Some(stored) if *stored != list.boxes_from_chunks()? => Err(corrupt(
            "page list: its boxes are not those of its pages' zones",
        )),
        _ => Ok(()),
    }
}

impl PageList {
    /// The boxes of its pages' live rows, made from its chunks' zones.
    fn boxes_from_chunks(&self) -> Result<LiveBoxes> {
        let mut live = LiveBoxesBuilder::default();
        self.each_chunk(
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
        Ok(live.finish())
    }

    /// Its chunks as its index lists them: decoded when the list was read, or now (a list read
    /// with its stored boxes), then checked to list as many pages as the boxes, up to the same
    /// last page.
    fn chunks(&self) -> Result<&[ChunkEntry]> {
        let (live, index, chunks) = match &self.listing {
            Listing::Indexed { chunks, .. } => return Ok(chunks),
            Listing::Boxed {
                live,
                index,
                chunks,
                ..
            } => (live, index, chunks),
        };
        if let Some(c) = chunks.get() {
            return Ok(c);
        }
        let decoded = decode_index(index, &self.blocks)?;
        let listed = (
            decoded.iter().map(|c| c.count as usize).sum(),
            decoded.last().map(|c| c.last),
        );
        let bytes: u64 = decoded.iter().map(|c| c.bytes).sum();
        if live.extent() != listed || live.page_bytes() != bytes {
            return Err(corrupt(format!(
                "page list: its boxes list {} pages of {} bytes, its index {} of {bytes} up to page {:?}",
                live.extent().0,
                live.page_bytes(),
                listed.0,
                listed.1
            )));
        }
        Ok(chunks.get_or_init(|| decoded))
    }

    /// How many pages it lists.
    pub fn count(&self) -> usize {
        match &self.listing {
            Listing::Indexed { chunks, .. } => chunks.iter().map(|c| c.count as usize).sum(),
            Listing::Boxed { live, .. } => live.extent().0,
        }
    }

    /// The bytes of the pages it lists.
    pub fn bytes(&self) -> u64 {
        match &self.listing {
            Listing::Indexed { chunks, .. } => chunks.iter().map(|c| c.bytes).sum(),
            Listing::Boxed { live, .. } => live.page_bytes(),
        }
    }

    /// The number of its last page.
    pub fn last(&self) -> Option<u32> {
        match &self.listing {
            Listing::Indexed { chunks, .. } => chunks.last().map(|c| c.last),
            Listing::Boxed { live, .. } => live.extent().1,
        }
    }

    /// The boxes of its pages' live rows, if it stores them or was read to make them.
    pub fn live(&self) -> Option<&LiveBoxes> {
        match &self.listing {
            Listing::Indexed { live, .. } => live.as_ref(),
            Listing::Boxed { live, .. } => Some(live),
        }
    }

    /// The bytes it holds in memory.
    pub fn heap_bytes(&self) -> usize {
        let chunks = |c: &[ChunkEntry]| -> usize {
            (c.iter())
                .map(|c| std::mem::size_of::<ChunkEntry>() + c.zone.len())
                .sum()
        };
        self.blocks.len()
            + match &self.listing {
                Listing::Indexed { chunks: c, live } => {
                    chunks(c) + live.as_ref().map_or(0, LiveBoxes::heap_bytes)
                }
                // The index as its block, and as it will be once decoded (by a read of a past
                // version: a head's weight in the read cache is taken once).
                Listing::Boxed {
                    live,
                    index,
                    index_decoded,
                    ..
                } => live.heap_bytes() + index.len() + index_decoded,
            }
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
    /// chunk checked to hold what the index says (and, in a list read with its boxes, each page
    /// what the boxes say: a scan of the latest version reads the pages they list).
    fn each_chunk(
        &self,
        wanted: impl Fn(&ChunkEntry) -> bool,
        mut read: impl FnMut(&rkyv::Archived<Vec<PageEntry>>) -> Result<()>,
    ) -> Result<()> {
        let boxed = match &self.listing {
            Listing::Boxed { live, .. } => Some(live),
            Listing::Indexed { .. } => None,
        };
        let (mut at, mut first) = (0usize, 0usize);
        for c in self.chunks()? {
            let block = &self.blocks[at..at + c.len as usize];
            at += c.len as usize;
            first += c.count as usize;
            if !wanted(c) {
                continue;
            }
            let first = first - c.count as usize;
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
                let agree = |(i, p): (usize, &rkyv::Archived<PageEntry>)| {
                    let entry = (p.no.to_native(), p.len.to_native(), p.head.to_native());
                    boxed.is_none_or(|b| b.page(first + i) == Some(entry))
                };
                if !entries.iter().enumerate().all(agree) {
                    return Err(corrupt(format!(
                        "page list chunk up to page {} lists other pages than its boxes",
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
        let (boxed, unboxed) = (
            encode_list(&pages).unwrap(),
            encode_list_unboxed(&pages).unwrap(),
        );
        let list = decode_list(&boxed, ListBoxes::Make).unwrap();
        assert_eq!(list.entries().unwrap(), pages);
        assert_eq!(list.count(), 200);
        assert_eq!(
            list.bytes(),
            pages.iter().map(|p| u64::from(p.len)).sum::<u64>()
        );
        assert_eq!(list.last(), Some(199));
        // Its boxes list every page, in order.
        let live = list.live().unwrap();
        let chosen: Vec<(u32, u32, u32)> = live
            .pages_where(&BoxTest::new(RankedFilter::ALL, RankedFilter::ALL))
            .map(|p| (p.no, p.len, p.head))
            .collect();
        let listed: Vec<(u32, u32, u32)> = pages.iter().map(|p| (p.no, p.len, p.head)).collect();
        assert_eq!(chosen, listed);
        // A list read once takes the boxes it stores; they are those a list written before
        // them (store format 12) has made from its chunks when it is read to be kept.
        let stored = decode_list(&boxed, ListBoxes::Stored).unwrap();
        let made = decode_list(&unboxed, ListBoxes::Make).unwrap();
        assert_eq!(stored.live().unwrap(), live);
        // Its index left undecoded, it counts its pages and their bytes by its boxes.
        let by_index = decode_list(&boxed, ListBoxes::Skip).unwrap();
        assert_eq!(
            (stored.count(), stored.bytes(), stored.last()),
            (by_index.count(), by_index.bytes(), by_index.last())
        );
        assert_eq!(stored.entries().unwrap(), pages);
        assert_eq!(stored.entries_where(holds(130)).unwrap(), pages[130..131]);
        assert_eq!(made.live().unwrap(), live);
        assert_eq!(made.entries().unwrap(), pages);
        assert!(decode_list(&unboxed, ListBoxes::Stored)
            .unwrap()
            .live()
            .is_none());
        assert!(decode_list(&boxed, ListBoxes::Skip)
            .unwrap()
            .live()
            .is_none());
        // Business time 130 is in one page only.
        assert_eq!(list.entries_where(holds(130)).unwrap(), pages[130..131]);
        assert_eq!(list.entries_where(holds(15)).unwrap(), pages[15..16]);
        assert!(list.entries_where(holds(500)).unwrap().is_empty());
    }

    /// A list cut short or with a changed byte is an error, never a panic or a wrong list,
    /// with its boxes or without.
    #[test]
    fn a_damaged_list_is_an_error() {
        let pages: Vec<PageEntry> = (0..100).map(page).collect();
        for bytes in [encode_list(&pages), encode_list_unboxed(&pages)] {
            let bytes = bytes.unwrap();
            for cut in [0, 3, 10, bytes.len() - 1] {
                assert!(
                    decode_list(&bytes[..cut], ListBoxes::Skip).is_err(),
                    "cut at {cut}"
                );
            }
            let flips = (0..bytes.len()).step_by(7).map(|at| (at, 0x20));
            // The top bit of the first word: the boxes flag.
            for (at, bit) in flips.chain([(3, 0x80)]) {
                let mut bad = bytes.clone();
                bad[at] ^= bit;
                if let Ok(list) = decode_list(&bad, ListBoxes::Make) {
                    assert!(list.entries().is_err(), "byte {at} changed");
                }
            }
        }
    }

    /// Stored boxes that list other pages than the index are an error; boxes of other zones,
    /// an error to `asof verify`'s check.
    #[test]
    fn stored_boxes_of_other_pages_or_zones_are_an_error() {
        let pages: Vec<PageEntry> = (0..40).map(page).collect();
        let mut b = LiveBoxesBuilder::default();
        for p in &pages {
            b.add(p.no, p.len, p.head, PageZone::new(&p.zone));
        }
        let good = b.finish();
        let shorter: Vec<PageEntry> = pages[..39].to_vec();
        let mut other = LiveBoxesBuilder::default();
        for p in &shorter {
            other.add(p.no, p.len, p.head, PageZone::new(&p.zone));
        }
        let list = |boxes: &LiveBoxes| encode_parts(&pages, Some(boxes.encode().unwrap())).unwrap();
        assert!(decode_list(&list(&good), ListBoxes::Stored).is_ok());
        // Read with its boxes, the index is left until a read needs a chunk.
        let other = list(&other.finish());
        let shorter = decode_list(&other, ListBoxes::Stored).unwrap();
        assert_eq!((shorter.count(), shorter.last()), (39, Some(38)));
        let e = shorter.entries().unwrap_err();
        assert!(e.to_string().contains("its boxes list 39 pages"), "{e}");
        let e = decode_list(&other, ListBoxes::Skip)
            .unwrap()
            .entries()
            .map(|_| ())
            .and_then(|_| check_boxes(&other))
            .unwrap_err();
        assert!(e.to_string().contains("its boxes list 39 pages"), "{e}");
        // Boxes of as many pages, but of other zones: read as they are, found by the check.
        let mut shifted = LiveBoxesBuilder::default();
        for p in &pages {
            shifted.add(p.no, p.len, p.head, PageZone::new(&page(p.no + 1).zone));
        }
        let bad = list(&shifted.finish());
        assert!(decode_list(&bad, ListBoxes::Stored).is_ok());
        // As many pages up to the same last, but one in the middle another: a read that needs
        // the chunk holding it finds that, and so does the check.
        let mut other = LiveBoxesBuilder::default();
        for p in &pages {
            let len = if p.no == 20 { p.len + 1 } else { p.len };
            other.add(p.no, len, p.head, PageZone::new(&p.zone));
        }
        let longer = list(&other.finish());
        let read = decode_list(&longer, ListBoxes::Stored).unwrap();
        let e = read.entries().unwrap_err();
        assert!(e.to_string().contains("pages of"), "{e}");
        assert!(check_boxes(&longer).is_err());
        let e = check_boxes(&bad).unwrap_err();
        assert!(
            e.to_string().contains("not those of its pages' zones"),
            "{e}"
        );
        assert!(check_boxes(&list(&good)).is_ok());
        assert!(check_boxes(&encode_list_unboxed(&pages).unwrap()).is_ok());
    }
}
