//! Thawing: a key's frozen pages read back into memory and freed, all of them
//! ([`KeyState::thaw`]) or only the last ones a late event reaches ([`KeyState::thaw_before`]).

use std::sync::Arc;

use foldhash::HashSet;

use super::{in_key, Pages};
use crate::engine::fold::{Bytes, RowId, Version};
use crate::engine::{KeyState, RowStore};
use crate::error::Result;
use crate::format::cold_page::Events;
use crate::format::page_list::PageEntry;

/// A page read back for a thaw.
struct ThawedPage {
    contents: crate::format::cold_page::ColdContents,
}

impl ThawedPage {
    /// The sequences of its events (a sequence is in one page only).
    fn sequences(&self) -> usize {
        let mut seqs: Vec<&Bytes> = self.contents.0.iter().map(|e| &e.seq).collect();
        seqs.dedup();
        seqs.len()
    }
}

/// A key's last pages read back for a thaw ([`KeyState::thaw_before`]), one at a time from
/// the last, with what decides whether they are enough.
#[derive(Default)]
struct Thawing {
    /// The pages, the latest first.
    pages: Vec<ThawedPage>,
    /// The rows they hold.
    rows: HashSet<RowId>,
    /// Rows their versions show that are still frozen (in an earlier page).
    missing: HashSet<RowId>,
    /// Their versions' starts, the latest first.
    starts: Vec<Bytes>,
    /// Their earliest event's sequence.
    first_event: Option<Bytes>,
    /// The least business start of their rows still believed (live, open on system time): each
    /// shows a version of the key's current timeline, which must come back with it (a
    /// bitemporal system-time replay rebuilds the hot timeline from those rows).
    least_current: Option<Bytes>,
}

impl Thawing {
    /// Adds the page before those added so far.
    fn push(&mut self, page: ThawedPage, rows: &RowStore) {
        let (events, versions, stored) = &page.contents;
        for (id, row) in stored {
            self.rows.insert(*id);
            self.missing.remove(id);
            if let (None, None, Some(start)) = (row.retired, &row.sys_end, &row.start) {
                if self.least_current.as_ref().is_none_or(|l| start < l) {
                    self.least_current = Some(start.clone());
                }
            }
        }
        for (start, _, _, row) in versions.iter().rev() {
            if let Some(r) = *row {
                if !self.rows.contains(&r) && rows.get(r).is_none() {
                    self.missing.insert(r);
                }
            }
            self.starts.push(start.clone());
        }
        if let Some(e) = events.first() {
            self.first_event = Some(e.seq.clone());
        }
        self.pages.push(page);
    }

    /// The key's `hot_from` once these pages are back in memory: the start of the third version
    /// from where both its events and its versions are whole in memory; `None` if there are not
    /// three, a version would show a row still frozen, or a row still believed would be back
    /// without its version.
    fn hot_from(&self, ks: &KeyState) -> Option<Bytes> {
        if !self.missing.is_empty() {
            return None;
        }
        let first_event = self
            .first_event
            .as_ref()
            .or_else(|| ks.events.keys().next())?;
        let first_version = self.starts.last().or_else(|| ks.timeline.keys().next());
        if let Some(current) = &self.least_current {
            if first_version.is_none_or(|v| current[..] < v[..]) {
                return None;
            }
        }
        let whole_from = first_version.map_or(first_event, |v| v.max(first_event));
        self.starts
            .iter()
            .rev()
            .chain(ks.timeline.keys())
            .filter(|s| s[..] >= whole_from[..])
            .nth(2)
            .cloned()
    }
}

/// Page `p` of `key`, read and decoded.
fn decode_page(key: &Bytes, p: &PageEntry, pages: &Pages, width: usize) -> Result<ThawedPage> {
    let page = pages.get(key, p).map_err(|e| in_key(key, e))?;
    decode_bytes(key, &page, width)
}

/// A page of `key` read back, decoded.
fn decode_bytes(key: &Bytes, page: &[u8], width: usize) -> Result<ThawedPage> {
    let contents = crate::format::cold_page::decode_cold(page, key, width, Events::Decode)
        .map_err(|e| in_key(key, e))?;
    Ok(ThawedPage { contents })
}

impl KeyState {
    /// Brings the key's frozen pages back into memory and frees them.
    pub fn thaw(
        &mut self,
        key: &Bytes,
        rows: &mut RowStore,
        pages: &mut Pages,
        width: usize,
    ) -> Result<()> {
        let Some(frozen) = self.frozen.take() else {
            return Ok(());
        };
        let listed = frozen.entries(key, pages).map_err(|e| in_key(key, e))?;
        let all: Vec<&PageEntry> = listed.iter().collect();
        let decoded = (pages.get_all(key, &all).map_err(|e| in_key(key, e))?)
            .iter()
            .map(|page| decode_bytes(key, page, width))
            .collect::<Result<Vec<_>>>()?;
        self.take_back(key, &listed, decoded, rows, pages);
        Ok(())
    }

    /// Brings back only the key's last pages, as few as let a change at `seq` (at or before
    /// `hot_from`) run on memory, and leaves the others frozen: a late event costs what it is
    /// late by, not the key's whole history (docs/PERFORMANCE.md, `benches/late.rs`). Thaws
    /// every page when no fewer will do. Only events late on business time come here: a
    /// system-time replay into frozen history thaws the whole key ([`KeyState::thaw`]).
    ///
    /// Pages hold a key's history in order (a cut freezes what precedes everything left in
    /// memory, and a late event into frozen history thaws first), so the last pages and the hot
    /// part are the key's history from some sequence on. After the thaw, the new `hot_from` is
    /// set as a freeze sets it: two whole versions, with their events, are in memory before it.
    /// A page's versions and events are split apart (`encode_cut`), and a version's row went
    /// to its version's page only from session 34 on (pages written before split rows by id),
    /// so pages are taken back until every version in memory has its row there too.
    pub fn thaw_before(
        &mut self,
        key: &Bytes,
        seq: &[u8],
        rows: &mut RowStore,
        pages: &mut Pages,
        width: usize,
    ) -> Result<()> {
        let Some(mut frozen) = self.frozen.take() else {
            return Ok(());
        };
        let listed = frozen
            .entries(key, pages)
            .map_err(|e| in_key(key, e))?
            .into_owned();
        let mut thawing = Thawing::default();
        let mut k = listed.len();
        let hot_from = loop {
            if k == 0 {
                break None;
            }
            k -= 1;
            thawing.push(decode_page(key, &listed[k], pages, width)?, rows);
            if let Some(h) = thawing.hot_from(self).filter(|h| seq > &h[..]) {
                break Some(h);
            }
        };
        let mut decoded = thawing.pages;
        decoded.reverse();
        let sequences: usize = decoded.iter().map(ThawedPage::sequences).sum();
        let mut kept = listed;
        let thawed = kept.split_off(k);
        self.take_back(key, &thawed, decoded, rows, pages);
        if let Some(hot_from) = hot_from.filter(|_| !kept.is_empty()) {
            frozen.pages = Arc::new(kept);
            frozen.stored = None;
            frozen.list = None;
            frozen.hot_from = hot_from;
            frozen.events = frozen.events.saturating_sub(sequences);
            // `sys` stays: what is still frozen has no greater system time, and a greater
            // bound only sends more system-time replays to a thaw.
            self.frozen = Some(frozen);
        }
        Ok(())
    }

    /// Puts the contents of pages `listed` (decoded in `decoded`, in the same order) back into
    /// the key's memory, and frees the pages.
    fn take_back(
        &mut self,
        key: &Bytes,
        listed: &[PageEntry],
        decoded: Vec<ThawedPage>,
        rows: &mut RowStore,
        pages: &mut Pages,
    ) {
        for ThawedPage {
            contents: (events, versions, stored),
        } in decoded
        {
            for e in events {
                self.events.entry(e.seq).or_default().push((e.sys, e.event));
            }
            for (start, values, end, row) in versions {
                self.timeline.insert(start, Version { values, end, row });
            }
            for (id, row) in stored {
                rows.thaw(id, row);
                self.rows.push(id);
            }
        }
        for p in listed {
            pages.free(key, p);
        }
        self.rows.sort_unstable();
        self.lookup = std::sync::OnceLock::new();
    }
}
