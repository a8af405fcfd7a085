//! Freezing: what a commit moves out of a key's memory into pages once the key holds more than
//! `FREEZE_AT × tail` sequences ([`Cuts`], [`KeyState::cut`], [`encode_cut`],
//! [`KeyState::install`]), and the rows of a key a full refresh left without events
//! ([`KeyState::freeze_retired`]).

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use foldhash::HashSet;

use super::{Frozen, Pages, FREEZE_AT};
use crate::bytes::Encoded;
use crate::engine::fold::{self, Bytes, RowId};
use crate::engine::{KeyState, RowStore, StoredRow};
use crate::error::{corrupt, Result};
use crate::value::ColumnType;

/// At most this many sequences (and as many timeline versions) go to one page.
const PAGE_SEQUENCES: usize = 64;
/// At most this many row versions go to one page. Pages of up to 128 sequences and 256 rows
/// (about 8 KiB) made sled leaves of 16 pages over 128 KiB, which sled keeps in blob files its
/// cache counts at a few bytes and so never evicts: a `count(*)` over a table loaded by one
/// refresh of 10M events held 640 MB; with these limits, 286 MB (docs/PERFORMANCE.md).
const PAGE_ROWS: usize = 128;

/// What one freeze moves out of a key's memory into a page (or several, of at most
/// [`PAGE_SEQUENCES`] and [`PAGE_ROWS`]: [`KeyState::push_page`]).
struct Cut {
    events: fold::EventMap,
    versions: fold::Timeline,
    rows: Vec<RowId>,
    hot_from: Bytes,
    sys: Option<Bytes>,
}

/// A [`Cut`] as pages ([`encode_cut`]), to be installed in its key ([`KeyState::install`]).
struct EncodedCut {
    pieces: Vec<Piece>,
    hot_from: Bytes,
    sys: Option<Bytes>,
    /// How many events the pages hold.
    events: usize,
}

/// One page of a cut: its bytes and zone, the length of its head, and the rows it holds.
struct Piece {
    page: (Vec<u8>, Vec<u8>),
    head: usize,
    rows: Vec<RowId>,
}

/// Encodes what `cut` moves out of a key's memory as pages: pieces of at most
/// [`PAGE_SEQUENCES`] sequences and versions and [`PAGE_ROWS`] rows each (a key that gathers
/// thousands of events in one commit freezes them all at once, and one page of them was a value
/// of hundreds of KB, which sled kept in blob files read whole: a count over a table loaded by
/// one refresh of 10M events took 2.1 GB). Reads `rows`, changes nothing.
fn encode_cut(cut: Cut, rows: &RowStore, types: &[ColumnType]) -> Result<EncodedCut> {
    let Cut {
        events,
        versions,
        rows: cut_rows,
        hot_from,
        sys,
    } = cut;
    let n_events = events.len();
    // A version's row goes to the version's piece, so that the last pages of a key hold whole
    // versions with their rows, and a late event thaws only those (`cold/thaw.rs`: split by row
    // id, a row lagged its version by a piece, and a thaw walked back to the cut's first page).
    // The other rows (retired, or closed on system time) fill the pieces in id order.
    let in_cut: HashSet<RowId> = cut_rows.iter().copied().collect();
    let mut shown = HashSet::default();
    let version_rows: Vec<Option<RowId>> = versions
        .values()
        .map(|v| v.row.filter(|r| in_cut.contains(r) && shown.insert(*r)))
        .collect();
    let others: Vec<RowId> = cut_rows
        .into_iter()
        .filter(|r| !shown.contains(r))
        .collect();
    // Room for the others beside up to PAGE_SEQUENCES versions' rows (all of it without them:
    // a cut of retired rows only, `freeze_retired`).
    let others_per_page = if shown.is_empty() {
        PAGE_ROWS
    } else {
        PAGE_ROWS - PAGE_SEQUENCES
    };
    let n_pieces = [
        n_events.div_ceil(PAGE_SEQUENCES),
        versions.len().div_ceil(PAGE_SEQUENCES),
        others.len().div_ceil(others_per_page),
    ]
    .into_iter()
    .max()
    .unwrap_or(1)
    .max(1);
    let (mut events, mut versions) = (events.into_iter(), versions.into_iter());
    let mut version_rows = version_rows.into_iter();
    let mut row_pieces = others.chunks(others.len().div_ceil(n_pieces).max(1));
    let per = |n: usize| n.div_ceil(n_pieces);
    let (events_per, versions_per) = (per(n_events), per(versions.len()));
    let mut pieces = Vec::with_capacity(n_pieces);
    for _ in 0..n_pieces {
        let evs: Vec<_> = events.by_ref().take(events_per).collect();
        let vers: Vec<_> = versions.by_ref().take(versions_per).collect();
        let mut piece_rows: Vec<RowId> = version_rows.by_ref().take(vers.len()).flatten().collect();
        piece_rows.extend_from_slice(row_pieces.next().unwrap_or(&[]));
        piece_rows.sort_unstable();
        let slots: Vec<(RowId, &StoredRow)> = piece_rows.iter().map(|&r| (r, &rows[r])).collect();
        let page = crate::format::cold_page::encode_cold(
            types,
            // Written once, scanned often: compressed harder (docs/PERFORMANCE.md, session 56).
            crate::format::Effort::Thorough,
            evs.iter()
                .flat_map(|(seq, cands)| cands.iter().map(move |(sys, e)| (&seq[..], &sys[..], e))),
            vers.iter()
                .map(|(s, v)| (&s[..], &v.values, v.end.as_deref(), v.row)),
            // The rows were written long before they freeze: their loads are started a few
            // rows ahead, not waited on one at a time (docs/PERFORMANCE.md, session 51).
            slots.iter().enumerate().map(|(i, &slot)| {
                StoredRow::prefetch_ahead(i, |p| slots.get(p).map(|s| s.1));
                slot
            }),
        )?;
        let head = crate::format::cold_page::cold_page_head(&page.0);
        pieces.push(Piece {
            page,
            head,
            rows: piece_rows,
        });
    }
    Ok(EncodedCut {
        pieces,
        hot_from,
        sys,
        events: n_events,
    })
}

/// Below this many events, versions and rows to freeze in all, a commit's cuts are encoded on
/// its own thread: a second one would cost more than it saves.
const ENCODE_APART_FROM: usize = 4096;

/// What a commit freezes, taken from its keys ([`Cuts::take`]), then encoded as pages
/// ([`Cuts::encode`]) and installed in its keys ([`EncodedCuts::install`]): each key of
/// `touched` (the keys a commit touched that are [`KeyState::over_tail`]: others are passed
/// over) that holds more than `FREEZE_AT × tail` sequences in memory ([`KeyState::cut`]).
/// Taking and encoding read the row store and change no row, so the commit can read it beside
/// the encoding; installing freezes the rows.
pub(in crate::engine) struct Cuts<'k> {
    cuts: Vec<(&'k Bytes, Cut)>,
}

/// [`Cuts`] encoded as pages, to be installed.
pub(in crate::engine) struct EncodedCuts<'k> {
    encoded: Vec<(&'k Bytes, EncodedCut)>,
}

impl<'k> Cuts<'k> {
    /// Takes from each key of `touched` that holds more than `FREEZE_AT × tail` sequences what
    /// moves out of its memory.
    pub fn take(
        keys: &mut BTreeMap<Bytes, KeyState>,
        touched: &'k [Bytes],
        rows: &RowStore,
        tail: usize,
    ) -> Self {
        let mut cuts = Vec::new();
        for key in touched {
            if let Some(cut) = keys.get_mut(key).and_then(|ks| ks.cut(rows, tail)) {
                cuts.push((key, cut));
            }
        }
        Cuts { cuts }
    }

    /// The cuts as pages, on two threads (the caller's and one more, each taking the next cuts
    /// until none is left) when there is enough to encode: encoding is most of a freeze.
    pub fn encode(self, rows: &RowStore, types: &[ColumnType]) -> Result<EncodedCuts<'k>> {
        let total: usize = (self.cuts.iter())
            .map(|(_, c)| c.events.len() + c.versions.len() + c.rows.len())
            .sum();
        let encode = |(key, cut)| encode_cut(cut, rows, types).map(|e| (key, e));
        let encoded = match total < ENCODE_APART_FROM {
            true => self.cuts.into_iter().map(encode).collect::<Result<_>>()?,
            false => (crate::two_threads::map("asof-encode", self.cuts, encode).into_iter())
                .collect::<Result<_>>()?,
        };
        Ok(EncodedCuts { encoded })
    }
}

impl EncodedCuts<'_> {
    /// Makes each cut's pages its key's next pages, and freezes their rows. Nothing was
    /// installed unless every cut encoded.
    pub fn install(
        self,
        keys: &mut BTreeMap<Bytes, KeyState>,
        rows: &mut RowStore,
        pages: &mut Pages,
    ) -> Result<()> {
        for (key, cut) in self.encoded {
            let ks = keys
                .get_mut(key)
                .ok_or_else(|| corrupt("a key frozen is gone"))?;
            ks.install(key, cut, rows, pages)?;
        }
        Ok(())
    }
}

impl KeyState {
    /// Whether the key holds more than `FREEZE_AT × tail` sequences in memory: what makes
    /// [`Cuts::take`] cut it.
    pub(in crate::engine) fn over_tail(&self, tail: usize) -> bool {
        self.events.len() > tail.saturating_mul(FREEZE_AT)
    }

    /// If the key holds more than `FREEZE_AT × tail` sequences in memory, freezes all but about the last
    /// `tail` of them, and the rows no commit will touch again (see the module documentation).
    /// What moves out is taken from the key and returned, for [`encode_cut`] and
    /// [`KeyState::install`] ([`Cuts::take`], [`Cuts::encode`] and [`EncodedCuts::install`] do
    /// the three).
    fn cut(&mut self, rows: &RowStore, tail: usize) -> Option<Cut> {
        if !self.over_tail(tail) {
            return None;
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
            .range::<Encoded, _>((Bound::Unbounded, Bound::Included(Encoded::new(&cut))))
            .next_back()
            .filter(|(_, v)| v.end.as_ref().is_none_or(|e| *e > cut))
            .map_or(cut, |(s, _)| s.clone());
        // Two more versions stay, with their events: the version before `hot_from` is the merge
        // base of a refold starting there, but a system-time replay may find it still open past
        // `hot_from` (the event that ended it being the late one) and refold from its start, on
        // the version before it.
        let keep_from = self
            .timeline
            .range::<Encoded, _>((Bound::Unbounded, Bound::Excluded(Encoded::new(&hot_from))))
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
            if !s.is_empty() && sys.as_ref().is_none_or(|m| m < s) {
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
            let before = row.start.as_ref().is_some_and(|s| *s < keep_from);
            let ended = row.end.as_ref().is_some_and(|e| *e <= keep_from);
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
            return None;
        }
        Some(Cut {
            events: cold_events,
            versions: cold_versions,
            rows: cold_rows,
            hot_from,
            sys,
        })
    }

    /// Freezes the rows of a key that has no events left (a full refresh reset it, retiring
    /// them all): so that a full refresh holds one part's keys in memory at a time. Its pages
    /// hold no event, so no event thaws them, but a scan reads their rows.
    pub fn freeze_retired(
        &mut self,
        key: &Bytes,
        rows: &mut RowStore,
        pages: &mut Pages,
        types: &[ColumnType],
    ) -> Result<()> {
        if !self.events.is_empty() || self.rows.iter().any(|&r| rows[r].retired.is_none()) {
            return Ok(());
        }
        if self.rows.is_empty() {
            return Ok(());
        }
        let cut = Cut {
            events: Default::default(),
            versions: Default::default(),
            rows: std::mem::take(&mut self.rows),
            // As it was; for a key never frozen, empty: below every sequence, so no event
            // thaws it.
            hot_from: self
                .frozen
                .as_ref()
                .map_or_else(|| Bytes::from(&[][..]), |f| f.hot_from.clone()),
            sys: self.frozen.as_ref().and_then(|f| f.sys.clone()),
        };
        self.push_page(key, rows, pages, types, cut)
    }

    /// Writes what `cut` moves out of memory as the key's next page.
    fn push_page(
        &mut self,
        key: &Bytes,
        rows: &mut RowStore,
        pages: &mut Pages,
        types: &[ColumnType],
        cut: Cut,
    ) -> Result<()> {
        let encoded = encode_cut(cut, rows, types)?;
        self.install(key, encoded, rows, pages)
    }

    /// Makes `cut`'s pages the key's next pages, and freezes their rows.
    fn install(
        &mut self,
        key: &Bytes,
        cut: EncodedCut,
        rows: &mut RowStore,
        pages: &mut Pages,
    ) -> Result<()> {
        let EncodedCut {
            pieces,
            hot_from,
            sys,
            events,
        } = cut;
        // The rows leave the row store and are let go of here: their values' counts are loaded
        // together first (the encoder read them, perhaps on the other core).
        for r in pieces.iter().flat_map(|p| &p.rows) {
            if let Some(row) = rows.get(*r) {
                crate::prefetch::prefetch_counts(&row.values);
            }
        }
        for piece in pieces {
            let no = self.next_page;
            let page = pages.put(key, no, piece.page, piece.head)?;
            for r in piece.rows {
                rows.freeze(r);
            }
            self.next_page = no + 1;
            let frozen = self.frozen.get_or_insert_with(|| {
                Box::new(Frozen {
                    pages: Arc::default(),
                    stored: None,
                    list: None,
                    hot_from: hot_from.clone(),
                    sys: None,
                    events: 0,
                    read: super::PagesRead::default(),
                })
            });
            Arc::make_mut(&mut frozen.pages).push(page);
        }
        // The lookup index keeps copies of the rows that were frozen when it was built.
        self.lookup = std::sync::OnceLock::new();
        let frozen = self
            .frozen
            .as_mut()
            .ok_or_else(|| corrupt("a freeze made no page"))?;
        frozen.hot_from = hot_from;
        frozen.sys = sys;
        frozen.events += events;
        Ok(())
    }
}
