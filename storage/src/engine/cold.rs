//! Cold history: the part of a key's events, business timeline and row versions that ordinary
//! commits no longer touch, moved out of memory into pages the store keeps in its key-value layer.
//!
//! A commit only reads a key's state from the version open just before the earliest sequence it
//! changes (see [`super::fold::refold`]). Events arrive roughly in order, so after a key has
//! gathered `2 × hot_tail` events, everything before its last `hot_tail` events is *frozen*:
//! encoded as one cold page ([`crate::format::cold_page::encode_cold`]), the key's next page in the
//! table's [`Pages`].
//! What stays in memory is the *hot tail*: the events and timeline versions from `keep_from` on
//! (two versions before `hot_from`, the version holding the cut), and the row versions that a
//! later commit may still change or retire. Rows that stay frozen are immutable: retired ones,
//! and live ones wholly before `keep_from` on business time.
//!
//! A key is *thawed* (its pages read back into memory and freed) before a commit that would read
//! frozen state: for an event at or before `hot_from`, only its last pages, back to a little
//! before the event ([`KeyState::thaw_before`]); all of them for a bitemporal event at or before
//! the greatest system time among its frozen events and frozen live rows' system ends, an SCD1
//! truncate, a full refresh, a tombstone GC. A later system-time replay runs on the hot part alone. So the engine
//! never reads frozen state, and a table is the same whatever was frozen when (the engine-model
//! property tests run with tails of one and two events, and `tests/cold.rs` compares a frozen
//! store with one that keeps everything).
//!
//! Pages are derived state, but durable: a commit writes the pages it froze and deletes those it
//! thawed in its own batch, beside the heads of the keys it changed (`super::persist`), so a page
//! is always as of the last commit, and an open reads nothing but the heads it needs.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use super::fold::Bytes;
use super::{Incoming, KeyState};
use crate::bytes::Encoded;
use crate::error::{corrupt, Result};
use crate::format::cold_page::{Events, RowBlock};
use crate::format::derived::FrozenHead;
use crate::format::page_boxes::PageTest;
use crate::format::page_list::{PageEntry, PageList};
use crate::format::zone::PageZone;

pub(crate) use crate::record::ColdRows;

mod freeze;
mod pages_read;
mod thaw;

pub(super) use freeze::Cuts;
pub(crate) use pages_read::PagesRead;

/// A corruption found in the pages of `key`, naming the key.
pub(crate) fn in_key(key: &[u8], e: crate::error::Error) -> crate::error::Error {
    match e {
        crate::error::Error::Corrupt(m) => {
            corrupt(format!("key {}: {m}", crate::keycodec::display_key(key)))
        }
        e => e,
    }
}

/// A page's row part ([`PageSource::row_parts`]), and the length of the whole page.
pub(crate) type RowPart = (Vec<u8>, u64);

/// Where a key's frozen pages are read from once they are written: the store's key-value layer
/// (which knows the key layout; the engine does not).
pub(crate) trait PageSource: Send + Sync {
    /// Page `no` of `key`, if it is stored.
    fn page(&self, key: &[u8], no: u32) -> Result<Option<Vec<u8>>>;

    /// Pages `nos` of `key` (in ascending order), each if it is stored: [`PageSource::page`] of
    /// each, read in one pass where the store can.
    fn pages(&self, key: &[u8], nos: &[u32]) -> Result<Vec<Option<Vec<u8>>>> {
        nos.iter().map(|&no| self.page(key, no)).collect()
    }

    /// The row parts of pages `entries` of `key` (in ascending order: each page's first
    /// [`PageEntry::head`] bytes, which carry a checksum of their own), each with the length of
    /// the whole page, if it is stored: what
    /// a scan that reads a key's pages in one pass decodes of them. The default reads the pages
    /// whole ([`PageSource::pages`]) and cuts them.
    fn row_parts(&self, key: &[u8], entries: &[&PageEntry]) -> Result<Vec<Option<RowPart>>> {
        let nos: Vec<u32> = entries.iter().map(|e| e.no).collect();
        let pages = self.pages(key, &nos)?;
        Ok((pages.into_iter().zip(entries))
            .map(|(page, e)| {
                page.map(|mut page| {
                    let len = page.len() as u64;
                    page.truncate(e.head as usize);
                    (page, len)
                })
            })
            .collect())
    }

    /// The row versions of page `e` of `key` ([`page_rows`] of its bytes), if it is stored: what
    /// a scan or a lookup reads of a page, which the store may keep decoded for the next read.
    fn page_rows(&self, key: &[u8], e: &PageEntry) -> Result<Option<Arc<RowBlock>>>;

    /// The pages the stored head of `key` lists, if it has a stored head (`Some(vec![])` if it
    /// lists none).
    fn listed(&self, key: &[u8]) -> Result<Option<Vec<PageEntry>>>;

    /// The parts of commit `version`'s row directory in the store, in part order: what the row
    /// store let go of ([`super::RowStore::let_go_directories`]).
    fn directories(&self, version: u64) -> Result<Vec<crate::format::derived::RowDir>>;
}

/// The row versions of page `e`, read from its bytes `page` (checked against the length its
/// entry records).
pub(crate) fn page_rows(e: &PageEntry, page: &[u8]) -> Result<RowBlock> {
    length_matches(e, page)?;
    crate::format::cold_page::decode_cold_rows(row_part(e, page)?)
}

/// The row part of page `e`, whose bytes are `page`: its first [`PageEntry::head`] bytes.
fn row_part<'a>(e: &PageEntry, page: &'a [u8]) -> Result<&'a [u8]> {
    page.get(..e.head as usize)
        .ok_or_else(|| corrupt(format!("page {}'s row versions end past it", e.no)))
}

/// Whether a read keeps the pages and key heads it decodes in the store's read cache
/// ([`StoreOptions::read_cache_bytes`](crate::StoreOptions::read_cache_bytes)) or reads them
/// past it (still finding there what other reads kept).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Caching {
    /// Kept, and found there: reads that pick rows by a point or a span of time, which reports
    /// and services repeat (a key's rows as of a time, a version read again).
    Keep,
    /// Read from the file and decoded, not kept: reads of whole histories, which would push out
    /// what the selective reads keep (a full scan, the change feed, a key's point index).
    Pass,
}

/// Which part of a page a read takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PagePart {
    /// The whole page: its row versions, and its events and versions (a thaw).
    Whole,
    /// Its row versions only (a scan): the first [`PageEntry::head`] bytes.
    Rows,
}

/// Checks that `page` has the length its entry `e` records.
fn length_matches(e: &PageEntry, page: &[u8]) -> Result<()> {
    page_length_matches(e, page.len() as u64)
}

/// Checks that page `e` is `len` bytes long, as its entry records.
fn page_length_matches(e: &PageEntry, len: u64) -> Result<()> {
    if len != u64::from(e.len) {
        return Err(corrupt(format!(
            "page {} has {len} bytes, its head says {}",
            e.no, e.len
        )));
    }
    Ok(())
}

/// A key freezes when it holds more than this many times its hot tail in memory, and keeps the
/// tail: pages of about `(FREEZE_AT - 1) × tail` sequences. Measured on the 1M bitemporal
/// workload (docs/PERFORMANCE.md): freezing at 4 × 8 rather than 2 × 16 (the same trigger, three
/// times as many sequences per page) ingests 25% faster and writes 20% fewer bytes, in no more
/// memory.
pub(crate) const FREEZE_AT: usize = 4;

/// What a key has frozen: its pages, oldest first, and the sequence its hot tail starts at.
///
/// A table that stores its pages lists only some of them in memory once a checkpoint wrote the
/// key's head ([`Frozen::shed`]): the first ones are those the head lists, read back when they
/// are needed ([`Frozen::entries`]). A key's page directory grows with its history (about 300
/// bytes a page, 416,087 pages after 10M events), and an ingest held every key's whole
/// directory in memory (docs/PERFORMANCE.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Frozen {
    /// The pages listed in memory: all of them, or those frozen after the `stored` ones. Shared
    /// with the key's head as the read cache keeps it: a scan's copy of a key costs no copy of
    /// its list (a freeze that adds to a shared one copies it then).
    pages: Arc<Vec<PageEntry>>,
    /// The key's first pages, listed by its head in the store rather than in memory.
    stored: Option<StoredPages>,
    /// The list of the `stored` pages in chunks, as the head held it, for a key read to be
    /// read ([`Frozen::from_head_listed`]); `None`: read from the store when needed.
    list: Option<Arc<PageList>>,
    /// Events at or before this sequence need a thaw; everything from it on is in memory.
    pub hot_from: Bytes,
    /// The greatest system time of a frozen event or of a frozen live row's system end: a
    /// system-time replay from there or earlier needs a thaw.
    sys: Option<Bytes>,
    /// Events (sequences) in the pages.
    events: usize,
    /// The pages reads that keep what they decode got from the read cache, found again here
    /// without asking the store where they lie.
    read: PagesRead,
}

/// The first pages of a key that its stored head lists, and memory does not ([`Frozen::shed`]):
/// how many, their bytes, and the number of the last, which the head is checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct StoredPages {
    count: usize,
    bytes: u64,
    last: u32,
}

impl Frozen {
    /// As the head of `key` lists it (reading the pages listed only by its stored head).
    pub fn to_head(&self, key: &[u8], pages: &Pages) -> Result<FrozenHead> {
        Ok(FrozenHead {
            pages: self.entries(key, pages)?.into_owned(),
            hot_from: self.hot_from.to_vec(),
            sys: self.sys.as_ref().map(|s| s.to_vec()),
            events: self.events as u64,
        })
    }

    /// As a key's head listed it.
    pub fn from_head(h: FrozenHead) -> Frozen {
        Frozen {
            pages: Arc::new(h.pages),
            stored: None,
            list: None,
            hot_from: h.hot_from.into(),
            sys: h.sys.map(Bytes::from),
            events: h.events as usize,
            read: PagesRead::default(),
        }
    }

    /// As a key's head listed it, with its page list apart, in chunks (`h` lists no page): the
    /// chunks are decompressed when read, and [`KeyState::frozen_rows`] reads only those whose
    /// zones it may need.
    pub fn from_head_listed(h: FrozenHead, list: PageList) -> Frozen {
        let mut f = Frozen::from_head(h);
        if let Some(last) = list.last() {
            f.stored = Some(StoredPages {
                count: list.count(),
                bytes: list.bytes(),
                last,
            });
            f.list = Some(Arc::new(list));
        }
        f
    }

    /// Every page of `key`, oldest first: those its stored head lists, read back, then those
    /// listed in memory.
    fn entries<'a>(&'a self, key: &[u8], pages: &Pages) -> Result<Cow<'a, [PageEntry]>> {
        self.entries_where(key, pages, &|_: PageZone<'_>| true)
    }

    /// [`Frozen::entries`], but of the stored pages, if the list is in memory, only those `keep`
    /// accepts: chosen by their boxes, if it has them, where `keep` gives a test of them
    /// ([`PageTest::live_boxes`]; the entries then have a zone of no bytes, which rules nothing
    /// out), else read from the chunks whose zone it accepts ([`PageList::entries_where`]). The
    /// rest as they are (callers test them again).
    fn entries_where<'a>(
        &'a self,
        key: &[u8],
        pages: &Pages,
        keep: &impl PageTest,
    ) -> Result<Cow<'a, [PageEntry]>> {
        let Some(stored) = self.stored else {
            return Ok(Cow::Borrowed(&self.pages[..]));
        };
        if let Some(list) = &self.list {
            let boxed = (list.live()).and_then(|b| Some((b, keep.live_boxes(b.scales())?)));
            let mut listed = match boxed {
                Some((boxes, test)) => (boxes.pages_where(&test))
                    .map(|p| PageEntry {
                        no: p.no,
                        len: p.len,
                        head: p.head,
                        zone: Vec::new(),
                    })
                    .collect(),
                None => list.entries_where(|z| keep.zone(z))?,
            };
            listed.extend(self.pages.iter().cloned());
            return Ok(Cow::Owned(listed));
        }
        let mut listed = pages
            .source
            .as_ref()
            .ok_or_else(|| corrupt("pages listed by a head, in a table that stores none"))?
            .listed(key)?
            .ok_or_else(|| corrupt("the head that lists its pages is missing"))?;
        // The stored head lists these pages first; a later head may list more after them.
        let lists = listed.len() >= stored.count
            && stored.count > 0
            && listed[stored.count - 1].no == stored.last
            && self.pages.first().is_none_or(|p| p.no > stored.last);
        if !lists {
            return Err(corrupt(format!(
                "its head lists {} pages, not the {} up to page {} it listed when written",
                listed.len(),
                stored.count,
                stored.last
            )));
        }
        listed.truncate(stored.count);
        listed.extend(self.pages.iter().cloned());
        Ok(Cow::Owned(listed))
    }

    /// The bytes it holds in memory, beyond itself.
    pub fn heap_bytes(&self) -> usize {
        self.pages.iter().map(PageEntry::heap_bytes).sum::<usize>()
            + self.list.as_ref().map_or(0, |l| l.heap_bytes())
            + self.hot_from.len()
            + self.sys.as_ref().map_or(0, |s| s.len())
    }

    /// How many pages the key has.
    fn count(&self) -> usize {
        self.stored.map_or(0, |s| s.count) + self.pages.len()
    }

    /// The bytes of the key's pages.
    fn bytes(&self) -> u64 {
        self.stored.map_or(0, |s| s.bytes)
            + self.pages.iter().map(|p| u64::from(p.len)).sum::<u64>()
    }

    /// Lets go of the page list in memory, once the key's head that lists every page is stored:
    /// [`Frozen::entries`] reads it back from there.
    fn shed(&mut self) {
        let Some(last) = self.pages.last().map(|p| p.no) else {
            return;
        };
        self.stored = Some(StoredPages {
            count: self.count(),
            bytes: self.bytes(),
            last,
        });
        self.pages = Arc::default();
        // The head just stored lists them all.
        self.list = None;
    }
}

/// A table's frozen pages: those written since the store last took them ([`Pages::take_pending`]),
/// and the rest read from the [`PageSource`]; and the pages thawed since the store last took
/// those ([`Pages::take_freed`]: it deletes them at a checkpoint, as the key heads stored until then
/// still list them). A table without a source (a state built only to be read once, as VACUUM does)
/// keeps every page pending.
pub(crate) struct Pages {
    source: Option<Arc<dyn PageSource>>,
    /// `(key, page)` to its bytes.
    pending: BTreeMap<(Bytes, u32), Arc<[u8]>>,
    /// Pages thawed.
    freed: Vec<(Bytes, u32)>,
    /// Bytes of the pages the table's keys list.
    bytes: u64,
    /// Pages thawed since the table was loaded.
    thawed: u64,
    /// Which split of the table's rows between memory and pages this is ([`Pages::split`]).
    split: u64,
}

/// The number the next [`Pages::split`] takes.
static NEXT_SPLIT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn next_split() -> u64 {
    NEXT_SPLIT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// A page written or deleted by the engine, for the store to persist: `(key, page)`, and its
/// bytes or `None` to delete it.
pub(crate) type PageWrite = ((Bytes, u32), Option<Arc<[u8]>>);

/// Sizes of a table's cold history, for [`crate::TableReader::cold_stats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ColdStats {
    /// Keys with frozen history.
    pub frozen_keys: u64,
    /// Events (sequences) of those keys that are frozen.
    pub frozen_events: u64,
    /// Events (sequences) held in memory.
    pub hot_events: u64,
    /// Frozen pages (of keys in memory).
    pub pages: u64,
    /// Of those, the pages listed in memory (with their zone maps): the others are listed only
    /// by their keys' stored heads, read back when needed. A table whose pages are stored lists
    /// in memory only those frozen since its last checkpoint.
    pub listed_pages: u64,
    /// Bytes of the frozen pages.
    pub page_bytes: u64,
    /// Row versions that have a slot in memory (about 128 bytes each, frozen or not): the hot
    /// rows, and the husks of frozen rows in chunks of the row store that are not freed.
    pub row_slots: u64,
    /// Pages thawed (read back into memory and freed) since the table was loaded: a late event
    /// thaws its key's pages from a little before it on, a system-time replay into frozen
    /// history all of them.
    pub pages_thawed: u64,
}

impl Pages {
    /// Pages read back from `source` once the store has taken them.
    pub fn new(source: Option<Arc<dyn PageSource>>) -> Self {
        Pages {
            source,
            pending: BTreeMap::new(),
            freed: Vec::new(),
            bytes: 0,
            thawed: 0,
            split: next_split(),
        }
    }

    /// A number that no other table state's pages have, nor these before a page was frozen or
    /// thawed since: the same number means the same rows in the same pages. What a reader that
    /// keeps a key's frozen rows between calls checks (`ScanCursor`).
    pub fn split(&self) -> u64 {
        self.split
    }

    /// Adds page `no` of `key`, whose first `head` bytes hold its row versions, which lie in
    /// `zone`.
    fn put(
        &mut self,
        key: &Bytes,
        no: u32,
        (bytes, zone): (Vec<u8>, Vec<u8>),
        head: usize,
    ) -> Result<PageEntry> {
        let len = u32::try_from(bytes.len()).map_err(|_| corrupt("cold page over 4 GiB"))?;
        let e = PageEntry {
            no,
            len,
            head: head.min(bytes.len()) as u32,
            zone,
        };
        self.pending.insert((key.clone(), no), bytes.into());
        self.bytes += u64::from(len);
        self.split = next_split();
        Ok(e)
    }

    /// The row versions of page `e` of `key`.
    fn rows(&self, key: &Bytes, e: &PageEntry, caching: Caching) -> Result<Arc<RowBlock>> {
        let pending = self.pending.contains_key(&(key.clone(), e.no));
        match (&self.source, caching) {
            (Some(src), Caching::Keep) if !pending => src
                .page_rows(key, e)?
                .ok_or_else(|| corrupt(format!("page {} is missing", e.no))),
            _ => Ok(Arc::new(page_rows(e, &self.get(key, e)?)?)),
        }
    }

    /// The row versions of pages `listed` of `key` (in page order): with [`Caching::Keep`], each
    /// as the key remembers it (`read`), else through the store's read cache (and remembered);
    /// with [`Caching::Pass`], the stored ones read in one pass.
    fn rows_of(
        &self,
        key: &Bytes,
        listed: &[&PageEntry],
        caching: Caching,
        read: &PagesRead,
    ) -> Result<Vec<Arc<RowBlock>>> {
        if caching == Caching::Keep && self.source.is_some() {
            let rows = |e: &PageEntry| match read.get(e.no) {
                Some(rows) => Ok(rows),
                None => {
                    let rows = self.rows(key, e, caching)?;
                    read.remember(e.no, &rows);
                    Ok(rows)
                }
            };
            return listed.iter().map(|e| rows(e)).collect();
        }
        let parts = self.read_all(key, listed, PagePart::Rows)?;
        (parts.iter())
            .map(|part| Ok(Arc::new(crate::format::cold_page::decode_cold_rows(part)?)))
            .collect()
    }

    /// The bytes of pages `listed` of `key` (in page order): those pending from memory, the
    /// stored ones read in one pass ([`PageSource::pages`]).
    pub(super) fn get_all<'a>(
        &'a self,
        key: &Bytes,
        listed: &[&PageEntry],
    ) -> Result<Vec<Cow<'a, [u8]>>> {
        self.read_all(key, listed, PagePart::Whole)
    }

    /// `part` of each of pages `listed` of `key` (in page order), each checked to have the
    /// length its entry records: those pending from memory, the stored ones read in one pass
    /// ([`PageSource::pages`], [`PageSource::row_parts`]).
    fn read_all<'a>(
        &'a self,
        key: &Bytes,
        listed: &[&PageEntry],
        part: PagePart,
    ) -> Result<Vec<Cow<'a, [u8]>>> {
        let pending = |e: &PageEntry| self.pending.contains_key(&(key.clone(), e.no));
        let stored: Vec<&PageEntry> = (listed.iter().copied()).filter(|e| !pending(e)).collect();
        // Each stored page read, or its row part, with the length of the whole page.
        let mut read = match (&self.source, &stored[..], part) {
            (_, [], _) => Vec::new(),
            (Some(src), entries, PagePart::Whole) => {
                let nos: Vec<u32> = entries.iter().map(|e| e.no).collect();
                let pages = src.pages(key, &nos)?.into_iter();
                pages
                    .map(|p| {
                        p.map(|p| {
                            let n = p.len() as u64;
                            (p, n)
                        })
                    })
                    .collect()
            }
            (Some(src), entries, PagePart::Rows) => src.row_parts(key, entries)?,
            (None, [e, ..], _) => return Err(corrupt(format!("page {} is missing", e.no))),
        }
        .into_iter();
        listed
            .iter()
            .map(|e| {
                if pending(e) {
                    // Whole, and checked by `get`.
                    let page = self.get(key, e)?;
                    return match (page, part) {
                        (Cow::Borrowed(page), PagePart::Rows) => {
                            Ok(Cow::Borrowed(row_part(e, page)?))
                        }
                        (page, _) => Ok(page),
                    };
                }
                let missing = || corrupt(format!("page {} is missing", e.no));
                let (bytes, len) = read.next().flatten().ok_or_else(missing)?;
                page_length_matches(e, len)?;
                match part {
                    PagePart::Whole => Ok(Cow::Owned(bytes)),
                    // A row part whose block says it has no CRC of its own (the format of blocks
                    // written before store format 3, which no page of a current store holds: a
                    // changed format byte) is read again whole, for the record's checksum.
                    PagePart::Rows if !crate::format::cold_page::row_part_has_checksum(&bytes) => {
                        let page = self.get(key, e)?;
                        Ok(Cow::Owned(row_part(e, &page)?.to_vec()))
                    }
                    PagePart::Rows if bytes.len() == e.head as usize => Ok(Cow::Owned(bytes)),
                    PagePart::Rows => Err(corrupt(format!(
                        "page {}'s row versions have {} bytes, its head says {}",
                        e.no,
                        bytes.len(),
                        e.head
                    ))),
                }
            })
            .collect()
    }

    /// The bytes of page `e` of `key`.
    fn get(&self, key: &Bytes, e: &PageEntry) -> Result<Cow<'_, [u8]>> {
        let missing = || corrupt(format!("page {} is missing", e.no));
        let bytes: Cow<'_, [u8]> = match self.pending.get(&(key.clone(), e.no)) {
            Some(b) => Cow::Borrowed(&b[..]),
            None => match &self.source {
                Some(src) => Cow::Owned(src.page(key, e.no)?.ok_or_else(missing)?),
                None => return Err(missing()),
            },
        };
        length_matches(e, &bytes)?;
        Ok(bytes)
    }

    fn free(&mut self, key: &Bytes, e: &PageEntry) {
        if !self.stored() {
            self.pending.remove(&(key.clone(), e.no));
        } else {
            self.freed.push((key.clone(), e.no));
        }
        self.bytes = self.bytes.saturating_sub(u64::from(e.len));
        self.thawed += 1;
        self.split = next_split();
    }

    /// Counts pages listed by a head read back from the store.
    pub fn count(&mut self, f: &Frozen) {
        self.bytes += f.bytes();
    }

    /// Whether the pages are stored, and so a key's page list can be read back from its stored
    /// head ([`Frozen::shed`]).
    pub fn stored(&self) -> bool {
        self.source.is_some()
    }

    /// The parts of commit `version`'s row directory, read from the store
    /// ([`PageSource::directories`]).
    pub fn stored_directories(&self, version: u64) -> Result<Vec<crate::format::derived::RowDir>> {
        match &self.source {
            Some(src) => src.directories(version),
            None => Err(corrupt(format!(
                "the row directory of commit {version} is not held, and nothing is stored"
            ))),
        }
    }

    /// How many pages are waiting for the store to persist them.
    pub fn pending(&self) -> usize {
        if !self.stored() {
            return 0;
        }
        self.pending.len()
    }

    /// The pages written since the last call, for the store to persist (a table without a
    /// source keeps them).
    pub fn take_pending(&mut self) -> Vec<PageWrite> {
        if !self.stored() {
            return Vec::new();
        }
        let pending = std::mem::take(&mut self.pending);
        pending.into_iter().map(|(k, v)| (k, Some(v))).collect()
    }

    /// The pages thawed since the last call, for the store to delete.
    pub fn take_freed(&mut self) -> Vec<PageWrite> {
        std::mem::take(&mut self.freed)
            .into_iter()
            .map(|k| (k, None))
            .collect()
    }

    /// Adds these pages' sizes to `stats`.
    pub fn add_stats(&self, stats: &mut ColdStats) {
        stats.page_bytes += self.bytes;
        stats.pages_thawed += self.thawed;
    }
}

impl Frozen {
    /// Adds this key's frozen sizes to `stats`.
    pub fn add_stats(&self, stats: &mut ColdStats) {
        stats.frozen_keys += 1;
        stats.frozen_events += self.events as u64;
        stats.pages += self.count() as u64;
        stats.listed_pages += self.pages.len() as u64;
    }
}

impl KeyState {
    /// Whether a change at `seq` would read frozen state.
    pub fn needs_thaw_at(&self, seq: &[u8]) -> bool {
        self.frozen.as_ref().is_some_and(|f| seq <= &f.hot_from[..])
    }

    /// Whether a system-time replay from `t` could read frozen state: some frozen event or live
    /// row has a system time at or after `t`.
    pub fn needs_thaw_since(&self, t: &[u8]) -> bool {
        self.frozen
            .as_ref()
            .is_some_and(|f| f.sys.as_deref().is_some_and(|s| t <= s))
    }

    /// Whether one of the hot events before `hot_from` (those of the two versions kept before
    /// it, whose merge base is frozen) has a system time at or after `t`: a system-time replay
    /// from `t` refolds there.
    pub fn hot_events_before_cut_since(&self, t: &[u8]) -> bool {
        self.frozen.as_ref().is_some_and(|f| {
            self.events
                .range::<Encoded, _>((Bound::Unbounded, Bound::Excluded(Encoded::new(&f.hot_from))))
                .any(|(_, cands)| cands.iter().any(|(s, _)| t <= &s[..]))
        })
    }

    /// Whether the key has no events, in memory or frozen (the tombstone GC collected them, or
    /// a full refresh reset it).
    pub fn eventless(&self) -> bool {
        self.events.is_empty() && self.frozen.as_ref().is_none_or(|f| f.events == 0)
    }

    /// The key's frozen events, read back (for VACUUM), with empty keys.
    pub fn frozen_events(&self, key: &Bytes, pages: &Pages, width: usize) -> Result<Vec<Incoming>> {
        let mut events = Vec::new();
        let Some(frozen) = &self.frozen else {
            return Ok(events);
        };
        let listed = frozen.entries(key, pages).map_err(|e| in_key(key, e))?;
        let listed: Vec<&PageEntry> = listed.iter().collect();
        for page in pages.get_all(key, &listed).map_err(|e| in_key(key, e))? {
            events.extend(
                crate::format::cold_page::decode_cold_history(&page, width, Events::Decode)
                    .map_err(|e| in_key(key, e))?
                    .0,
            );
        }
        Ok(events)
    }

    /// The key's frozen row versions, read back as the blocks of its pages; only of the pages
    /// `keep` accepts ([`Frozen::entries_where`]).
    pub fn frozen_rows(
        &self,
        key: &Bytes,
        pages: &Pages,
        keep: &impl PageTest,
        caching: Caching,
    ) -> Result<Vec<Arc<RowBlock>>> {
        let Some(frozen) = &self.frozen else {
            return Ok(Vec::new());
        };
        frozen
            .entries_where(key, pages, keep)
            .and_then(|listed| {
                let kept: Vec<&PageEntry> = (listed.iter())
                    .filter(|p| keep.zone(PageZone::new(&p.zone)))
                    .collect();
                pages.rows_of(key, &kept, caching, &frozen.read)
            })
            .map_err(|e| in_key(key, e))
    }

    /// Lets go of the key's page list in memory ([`Frozen::shed`]), its head just stored.
    pub fn shed_page_list(&mut self) {
        if let Some(f) = &mut self.frozen {
            f.shed();
        }
    }
}

#[cfg(test)]
mod tests;
