//! Cold history: the part of a key's events, business timeline and row versions that ordinary
//! commits no longer touch, moved out of memory into a spill file.
//!
//! A commit only reads a key's state from the version open just before the earliest sequence it
//! changes (see [`super::fold::refold`]). Events arrive roughly in order, so after a key has
//! gathered `2 × hot_tail` events, everything before its last `hot_tail` events is *frozen*:
//! encoded as one cold page ([`crate::format::cold_page::encode_cold`]) and appended to the table's [`Spill`].
//! What stays in memory is the *hot tail*: the events and timeline versions from `keep_from` on
//! (two versions before `hot_from`, the version holding the cut), and the row versions that a
//! later commit may still change or retire. Rows that stay frozen are immutable: retired ones,
//! and live ones wholly before `keep_from` on business time.
//!
//! A key is *thawed* (its pages read back into memory and freed) before a commit that would read
//! frozen state: an event at or before `hot_from`; a bitemporal event at or before the greatest
//! system time among its frozen events and frozen live rows' system ends; an SCD1 truncate, a full
//! refresh, a tombstone GC. A later system-time replay runs on the hot part alone. So the engine
//! never reads frozen state, and a table is the same whatever was frozen when (the engine-model
//! property tests run with tails of one and two events, and `tests/cold.rs` compares a frozen
//! store with one that keeps everything).
//!
//! The spill holds derived state only: the event log stays the truth, and the spill file is an
//! unlinked temporary file that disappears with the process. A replay on open freezes as it goes.

use std::collections::HashSet;
use std::fs::File;
use std::ops::Bound;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use super::fold::{Bytes, RowId, Version};
use super::{Incoming, KeyState, RowStore};
use crate::error::{Error, Result};
use crate::value::ColumnType;

pub(crate) use crate::record::ColdRows;

/// Where a page is in the spill file.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PageRef {
    offset: u64,
    len: u32,
    /// The length of the page's head, which can be read alone (a cold page's row versions).
    head: u32,
}

/// What a key has frozen: its pages, oldest first, and the sequence its hot tail starts at.
#[derive(Debug)]
pub(crate) struct Frozen {
    pages: Vec<PageRef>,
    /// Events at or before this sequence need a thaw; everything from it on is in memory.
    pub hot_from: Bytes,
    /// The greatest system time of a frozen event or of a frozen live row's system end: a
    /// system-time replay from there or earlier needs a thaw.
    sys: Option<Bytes>,
    /// Events (sequences) in the pages.
    events: usize,
}

/// An append-only file of pages, created on first use. Freed pages are counted, and the file is
/// rewritten without them when they outweigh the live ones ([`Spill::needs_compaction`]).
pub(crate) struct Spill {
    dir: Option<PathBuf>,
    file: Option<File>,
    len: u64,
    garbage: u64,
}

/// Sizes of a table's cold history, for [`crate::TableReader::cold_stats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ColdStats {
    /// Keys with frozen history.
    pub frozen_keys: u64,
    /// Events (sequences) of those keys that are frozen.
    pub frozen_events: u64,
    /// Events (sequences) held in memory.
    pub hot_events: u64,
    /// Bytes of live pages in the spill file.
    pub spill_bytes: u64,
    /// Bytes of freed pages not yet compacted away.
    pub spill_garbage: u64,
}

fn io(e: std::io::Error) -> Error {
    Error::Io(format!("spill file: {e}"))
}

impl Spill {
    /// A spill that will create its file in `dir` (the system's temporary folder if `None`).
    pub fn new(dir: Option<PathBuf>) -> Self {
        Spill {
            dir,
            file: None,
            len: 0,
            garbage: 0,
        }
    }

    /// Appends a page whose first `head` bytes can be read alone ([`Spill::head`]).
    fn put(&mut self, bytes: &[u8], head: usize) -> Result<PageRef> {
        let len =
            u32::try_from(bytes.len()).map_err(|_| Error::Io("spill page over 4 GiB".into()))?;
        let file = match &mut self.file {
            Some(f) => f,
            slot => {
                let f = match &self.dir {
                    Some(d) => tempfile::tempfile_in(d),
                    None => tempfile::tempfile(),
                }
                .map_err(io)?;
                slot.insert(f)
            }
        };
        file.write_all_at(bytes, self.len).map_err(io)?;
        let r = PageRef {
            offset: self.len,
            len,
            head: head.min(bytes.len()) as u32,
        };
        self.len += u64::from(len);
        Ok(r)
    }

    fn get(&self, r: PageRef) -> Result<Vec<u8>> {
        self.read(r.offset, r.len)
    }

    /// The head of a page (see [`Spill::put`]).
    fn head(&self, r: PageRef) -> Result<Vec<u8>> {
        self.read(r.offset, r.head)
    }

    fn read(&self, offset: u64, len: u32) -> Result<Vec<u8>> {
        let file = self
            .file
            .as_ref()
            .ok_or_else(|| Error::Io("spill page read before any was written".into()))?;
        let mut buf = vec![0; len as usize];
        file.read_exact_at(&mut buf, offset).map_err(io)?;
        Ok(buf)
    }

    fn free(&mut self, r: PageRef) {
        self.garbage += u64::from(r.len);
    }

    /// Whether freed pages take more than half the file (and at least 64 MiB).
    pub fn needs_compaction(&self) -> bool {
        self.garbage >= 64 << 20 && self.garbage * 2 > self.len
    }

    /// Copies every key's live pages into a fresh file, which replaces this one.
    pub fn compact<'a>(&mut self, keys: impl Iterator<Item = &'a mut KeyState>) -> Result<()> {
        let mut fresh = Spill::new(self.dir.clone());
        for ks in keys {
            if let Some(f) = ks.frozen.as_deref_mut() {
                for p in &mut f.pages {
                    *p = fresh.put(&self.get(*p)?, p.head as usize)?;
                }
            }
        }
        *self = fresh;
        Ok(())
    }

    /// Adds this spill's sizes to `stats`.
    pub fn add_stats(&self, stats: &mut ColdStats) {
        stats.spill_bytes += self.len - self.garbage;
        stats.spill_garbage += self.garbage;
    }
}

impl Frozen {
    /// Adds this key's frozen sizes to `stats`.
    pub fn add_stats(&self, stats: &mut ColdStats) {
        stats.frozen_keys += 1;
        stats.frozen_events += self.events as u64;
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

    /// Brings the key's frozen pages back into memory and frees them.
    pub fn thaw(
        &mut self,
        key: &Bytes,
        rows: &mut RowStore,
        spill: &mut Spill,
        width: usize,
    ) -> Result<()> {
        let Some(frozen) = self.frozen.take() else {
            return Ok(());
        };
        for &p in &frozen.pages {
            let (events, versions, stored) =
                crate::format::cold_page::decode_cold(&spill.get(p)?, key, width)?;
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
        for &p in &frozen.pages {
            spill.free(p);
        }
        self.rows.sort_unstable();
        self.lookup = std::sync::OnceLock::new();
        Ok(())
    }

    /// If the key holds more than `2 × tail` sequences in memory, freezes all but about the last
    /// `tail` of them, and the rows no commit will touch again (see the module documentation).
    pub fn freeze(
        &mut self,
        rows: &mut RowStore,
        spill: &mut Spill,
        types: &[ColumnType],
        tail: usize,
    ) -> Result<()> {
        let n = self.events.len();
        if n <= tail.saturating_mul(2) {
            return Ok(());
        }
        // From the back: a key whose history cannot freeze (one long open version) comes here
        // on every commit, and must not pay for its length.
        let cut = self
            .events
            .keys()
            .nth_back(tail - 1)
            .expect("more than tail events")
            .clone();
        // The hot part starts at the version containing the cut, so a refold that starts after
        // `hot_from` finds its open version and events in memory.
        let hot_from = self
            .timeline
            .range::<[u8], _>((Bound::Unbounded, Bound::Included(&cut[..])))
            .next_back()
            .filter(|(_, v)| v.end.as_deref().is_none_or(|e| e > &cut[..]))
            .map_or(cut, |(s, _)| s.clone());
        // Two more versions stay, with their events: the version before `hot_from` is the merge
        // base of a refold starting there, but a system-time replay may find it still open past
        // `hot_from` (the event that ended it being the late one) and refold from its start, on
        // the version before it.
        let keep_from = self
            .timeline
            .range::<[u8], _>((Bound::Unbounded, Bound::Excluded(&hot_from[..])))
            .rev()
            .take(2)
            .last()
            .map_or(hot_from.clone(), |(s, _)| s.clone());
        let hot_events = self.events.split_off(&keep_from);
        let cold_events = std::mem::replace(&mut self.events, hot_events);
        let hot_versions = self.timeline.split_off(&keep_from);
        let cold_versions = std::mem::replace(&mut self.timeline, hot_versions);

        // Rows no hot version shows: retired ones, which nothing changes again, and live ones
        // wholly before `keep_from` on business time (ended there, or closed on system time).
        let shown: HashSet<RowId> = self.timeline.values().filter_map(|v| v.row).collect();
        let mut cold_rows = Vec::new();
        let mut kept = Vec::new();
        let mut sys = self.frozen.as_ref().and_then(|f| f.sys.clone());
        let mut raise = |s: &Bytes| {
            if !s.is_empty() && sys.as_ref().is_none_or(|m| m[..] < s[..]) {
                sys = Some(s.clone());
            }
        };
        for cands in cold_events.values() {
            for (s, _) in cands {
                raise(s);
            }
        }
        for &r in &self.rows {
            let row = &rows[r];
            let before = row.start.as_deref().is_some_and(|s| s < &keep_from[..]);
            let ended = row.end.as_deref().is_some_and(|e| e <= &keep_from[..]);
            let freeze = !shown.contains(&r)
                && (row.retired.is_some() || (before && (ended || row.sys_end.is_some())));
            if !freeze {
                kept.push(r);
                continue;
            }
            if row.retired.is_none() {
                if let Some(e) = &row.sys_end {
                    raise(e);
                }
            }
            cold_rows.push(r);
        }
        self.rows = kept;
        if cold_events.is_empty() && cold_versions.is_empty() && cold_rows.is_empty() {
            return Ok(());
        }
        let page = crate::format::cold_page::encode_cold(
            types,
            cold_events
                .iter()
                .flat_map(|(seq, cands)| cands.iter().map(move |(sys, e)| (&seq[..], &sys[..], e))),
            cold_versions
                .iter()
                .map(|(s, v)| (&s[..], &v.values, v.end.as_deref(), v.row)),
            cold_rows.iter().map(|&r| (r, &rows[r])),
        )?;
        let page = spill.put(&page, crate::format::cold_page::cold_page_head(&page))?;
        for &r in &cold_rows {
            rows.freeze(r);
        }
        // The lookup index keeps copies of the rows that were frozen when it was built.
        self.lookup = std::sync::OnceLock::new();
        let frozen = self.frozen.get_or_insert_with(|| {
            Box::new(Frozen {
                pages: Vec::new(),
                hot_from: hot_from.clone(),
                sys: None,
                events: 0,
            })
        });
        frozen.pages.push(page);
        frozen.hot_from = hot_from;
        frozen.sys = sys;
        frozen.events += cold_events.len();
        Ok(())
    }

    /// The key's frozen events, read back (for VACUUM), with empty keys.
    pub fn frozen_events(&self, spill: &Spill, width: usize) -> Result<Vec<Incoming>> {
        let mut events = Vec::new();
        for &p in self.frozen.iter().flat_map(|f| &f.pages) {
            events.extend(crate::format::cold_page::decode_cold_history(&spill.get(p)?, width)?.0);
        }
        Ok(events)
    }

    /// The key's frozen row versions, read back as the blocks of its pages.
    pub fn frozen_rows(&self, spill: &Spill) -> Result<Vec<crate::format::cold_page::RowBlock>> {
        self.frozen
            .iter()
            .flat_map(|f| &f.pages)
            .map(|&p| crate::format::cold_page::decode_cold_rows(&spill.head(p)?))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Compaction copies every key's live pages into a fresh file, byte for byte, and leaves no
    /// garbage; freed pages are not copied.
    #[test]
    fn compaction_keeps_live_pages_and_drops_freed_ones() {
        let dir = tempfile::tempdir().unwrap();
        let mut spill = Spill::new(Some(dir.path().to_path_buf()));
        let page = |i: u8| vec![i; 1000 + usize::from(i)];
        let mut keys: Vec<KeyState> = Vec::new();
        for k in 0..3u8 {
            let mut pages = Vec::new();
            for p in 0..4u8 {
                let r = spill.put(&page(k * 4 + p), 10).unwrap();
                if p % 2 == 0 {
                    spill.free(r); // as a thaw would
                } else {
                    pages.push(r);
                }
            }
            keys.push(KeyState {
                frozen: Some(Box::new(Frozen {
                    pages,
                    hot_from: Bytes::from(&[k][..]),
                    sys: None,
                    events: 0,
                })),
                ..Default::default()
            });
        }
        let mut before = ColdStats::default();
        spill.add_stats(&mut before);
        assert!(before.spill_garbage > 0);
        spill.compact(keys.iter_mut()).unwrap();
        let mut after = ColdStats::default();
        spill.add_stats(&mut after);
        assert_eq!(after.spill_garbage, 0);
        assert_eq!(after.spill_bytes, before.spill_bytes);
        for (k, ks) in keys.iter().enumerate() {
            let pages = &ks.frozen.as_ref().unwrap().pages;
            for (j, &r) in pages.iter().enumerate() {
                assert_eq!(spill.get(r).unwrap(), page(k as u8 * 4 + 2 * j as u8 + 1));
            }
        }
    }
}
