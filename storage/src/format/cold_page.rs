//! A cold page: the frozen part of one key's state (see `engine::cold`) as it is stored.

use rkyv::rancor;

use super::archive::{compress, decompress, with_decompressed, Codec};
use super::columns::{new_column, ColumnData, VarBytes};
use super::event_block::{ArchivedEventBlock, EventBlock};
use super::lz4::Effort;
use super::packed_events::{self, PackedEvents};
pub(crate) use super::packed_rows::RowBlock;
use super::packed_rows::{self, Numbers};
use super::zone::ZoneBuilder;
use crate::error::{corrupt, Result};
use crate::record::{Bytes, ColdRows, Event, EventKind, Incoming, Origin, RowId, StoredRow};
use crate::value::{ColumnType, Row, Value};

/// Flag of a timeline version in a [`ColdPage`] whose business end is open.
const OPEN_END: u8 = 4;

/// A row's bound that is absent, in `RowBlock::bound_of`.
pub(super) const NO_BOUND: u32 = u32::MAX;

/// Bit 31 of a cold page's first word (format 12): its history is a [`SharedHistory`], whose
/// events and versions take their values from the row part. Clear: a [`ColdHistory`].
const SHARED_VALUES: u32 = 1 << 31;

/// The history part (events and timeline versions) is read by thaws, VACUUM, rebuilds and (in a
/// key head's hot part) the reads of a key for a lookup or a commit, never by scans.
const HISTORY_CODEC: Codec = Codec::Small;

/// The history of a page written before format 12: the frozen part of one key's state (see
/// `engine::cold`), but for its row versions: its events, and its timeline versions as
/// pseudo-events (sequence = start, system sequence = end) with the rows that show them, each
/// with its values.
///
/// A cold page is the key's [`RowBlock`] and its history, each archived and compressed on
/// its own, after the length of the first (`u32`, little-endian): a scan reads only the rows.
#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize, Debug, Default)]
pub(crate) struct ColdHistory {
    events: EventBlock,
    versions: EventBlock,
    /// Per version, the row that shows it (`u32::MAX`: none).
    version_rows: Vec<u32>,
}

/// The history of a page since format 12: as [`ColdHistory`], but its blocks hold no values.
/// An event or version names the entry that holds its values: one of the row part's, which
/// the rows that show it use too (an event's values are its version's, and the version's row's),
/// or one of its own for values no row of the page shows.
#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize, Debug)]
pub(crate) struct SharedHistory {
    /// The key's events, with empty keys and no value columns.
    events: PackedEvents,
    /// Timeline versions as pseudo-events, with no value columns.
    versions: PackedEvents,
    /// Per version, the row that shows it (`u32::MAX`: none).
    version_rows: Vec<u32>,
    /// How many entries the row part's value columns have.
    row_entries: u32,
    /// Per event, then per version, the entry that holds its values: below `row_entries`, that
    /// entry of the row part's columns; from it on, entry `n - row_entries` of `own`.
    value_of: Numbers,
    /// The values of events and versions no row of the page shows, one column per output
    /// column, each set of values once.
    own: Vec<ColumnData>,
}

/// Where the values of a page's history are: how a reader tells the two layouts apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum HistoryValues {
    /// In the history's own blocks (a [`ColdHistory`], format 11 and before).
    Own,
    /// In the row part, but for those no row shows (a [`SharedHistory`], format 12).
    Shared,
}

/// A cold page cut into its parts.
struct PageParts<'a> {
    rows: &'a [u8],
    history: &'a [u8],
    values: HistoryValues,
}

/// The address of a row's values: rows that share one share their values (the engine clones
/// the `Row` of a version it writes again, with another end, and a version's values are the
/// event's that made it), so a page stores them once, found without hashing or comparing
/// values.
fn shared(values: &Row) -> usize {
    values.as_ptr() as usize
}

/// How many leading bytes of a cold page hold its row versions (the length and the row part).
pub(crate) fn cold_page_head(page: &[u8]) -> usize {
    page.get(..4).map_or(0, |b| {
        4 + (u32::from_le_bytes(b.try_into().expect("4 bytes")) & !SHARED_VALUES) as usize
    })
}

/// The two parts of a cold page (or of a key head's hot part), and where its history's values
/// are.
fn split_page(bytes: &[u8]) -> Result<PageParts<'_>> {
    let word = bytes
        .get(..4)
        .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
        .ok_or_else(|| corrupt("cold page too short"))?;
    let n = (word & !SHARED_VALUES) as usize;
    let rest = &bytes[4..];
    if n > rest.len() {
        return Err(corrupt("cold page shorter than its row part"));
    }
    let (rows, history) = rest.split_at(n);
    let values = match word & SHARED_VALUES {
        0 => HistoryValues::Own,
        _ => HistoryValues::Shared,
    };
    Ok(PageParts {
        rows,
        history,
        values,
    })
}

/// Splits `bytes` after the part whose length (u32 LE) leads it: the layout of a key head.
/// `what` and `part` name them in the error.
pub(super) fn split_prefixed<'a>(
    bytes: &'a [u8],
    what: &str,
    part: &str,
) -> Result<(&'a [u8], &'a [u8])> {
    let n = bytes
        .get(..4)
        .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize)
        .ok_or_else(|| corrupt(format!("{what} too short")))?;
    let rest = &bytes[4..];
    if n > rest.len() {
        return Err(corrupt(format!("{what} shorter than {part}")));
    }
    Ok(rest.split_at(n))
}

/// A version of a key's business timeline: start, values, end, row.
pub(crate) type ColdVersion = (Bytes, Row, Option<Bytes>, Option<RowId>);

/// What a cold page holds, decoded: events (with empty keys), versions and rows.
pub(crate) type ColdContents = (Vec<Incoming>, Vec<ColdVersion>, ColdRows);

/// The entries of a set of value columns, each built into a `Row` once: the rows, events and
/// versions that name one entry share its `Row`, as they shared their values when they were
/// written (so that a page frozen again after a thaw finds them shared).
struct Entries<'a> {
    columns: &'a [ColumnData],
    built: Vec<Option<Row>>,
    /// How many entries the columns may hold at most (the rows or the events and versions that
    /// name them): a number past it is damage, found before anything is allocated for it.
    limit: usize,
}

impl<'a> Entries<'a> {
    fn new(columns: &'a [ColumnData], limit: usize) -> Self {
        Entries {
            columns,
            built: Vec::new(),
            limit,
        }
    }

    /// Entry `e`, built on its first use; an entry past the columns' end is damage.
    fn get(&mut self, e: usize) -> Result<Row> {
        if let Some(Some(row)) = self.built.get(e) {
            return Ok(row.clone());
        }
        if e >= self.limit {
            return Err(corrupt("a cold page names values past its entries"));
        }
        let row: Row = (self.columns.iter())
            .map(|c| c.get(e))
            .collect::<Result<Vec<Value>>>()?
            .into();
        if self.built.len() <= e {
            self.built.resize(e + 1, None);
        }
        self.built[e] = Some(row.clone());
        Ok(row)
    }
}

/// Gives each distinct set of values (by its allocation) an entry of `columns`, in order.
struct EntryWriter {
    columns: Vec<ColumnData>,
    of: foldhash::HashMap<usize, u32>,
}

impl EntryWriter {
    fn new(types: &[ColumnType]) -> Self {
        EntryWriter {
            columns: types.iter().map(new_column).collect(),
            of: Default::default(),
        }
    }

    /// The entry of `values`, added if they have none.
    fn entry(&mut self, values: &Row) -> u32 {
        let next = self.of.len() as u32;
        let entry = *self.of.entry(shared(values)).or_insert(next);
        if entry == next {
            for (c, v) in self.columns.iter_mut().zip(values.iter()) {
                c.push(v);
            }
        }
        entry
    }
}

/// Encodes events `(seq, sys, event)`, timeline versions and row versions of one key as a
/// compressed cold page, with the zone map of its rows ([`super::zone`]); the row part
/// compressed with `effort` (a frozen page is written once and scanned often; a key head's hot
/// part is written again at each checkpoint that finds its key changed).
pub(crate) fn encode_cold<'a>(
    types: &[ColumnType],
    effort: Effort,
    events: impl Iterator<Item = (&'a [u8], &'a [u8], &'a Event)>,
    versions: impl Iterator<Item = (&'a [u8], &'a Row, Option<&'a [u8]>, Option<RowId>)>,
    rows: impl Iterator<Item = (RowId, &'a StoredRow)>,
) -> Result<(Vec<u8>, Vec<u8>)> {
    let mut block = RowBlock::default();
    let b = &mut block;
    let mut zone = ZoneBuilder::default();
    let mut row_values = EntryWriter::new(types);
    let mut bounds: foldhash::HashMap<&[u8], u32> = Default::default();
    for (id, r) in rows {
        zone.add(
            [&r.start, &r.end, &r.sys_start, &r.sys_end].map(|b| b.as_deref()),
            r.added,
            r.retired,
        );
        b.ids.push(id);
        for bound in [&r.start, &r.end, &r.sys_start, &r.sys_end] {
            let entry = match bound.as_deref() {
                None => NO_BOUND,
                Some(bytes) => {
                    let next = bounds.len() as u32;
                    let entry = *bounds.entry(bytes).or_insert(next);
                    if entry == next {
                        b.bounds.push(bytes);
                    }
                    entry
                }
            };
            b.bound_of.push(entry);
        }
        b.added.push(r.added);
        b.retired.push(r.retired.unwrap_or(u64::MAX));
        b.value_of.push(row_values.entry(&r.values));
    }
    // Stored in ascending order: a scan places its times among them once a block.
    block.sort_bounds();
    debug_assert!({
        let mut b = RowBlock {
            bounds: VarBytes {
                offsets: block.bounds.offsets.clone(),
                data: block.bounds.data.clone(),
            },
            ..Default::default()
        };
        b.note_bounds_in_order();
        b.bounds_sorted
    });
    // An event's or version's values are the row part's entry when a row shows them, its own
    // entry (after the row part's) when none does.
    let row_entries = row_values.of.len() as u32;
    let mut own = EntryWriter::new(types);
    let mut value_of = Vec::new();
    let mut entry_of = |values: &Row| match row_values.of.get(&shared(values)) {
        Some(&e) => e as u64,
        None => (row_entries + own.entry(values)) as u64,
    };
    let (mut history_events, mut history_versions) = (EventBlock::default(), EventBlock::default());
    let mut version_rows = Vec::new();
    for (seq, sys, ev) in events {
        history_events.push(&[], seq, sys, ev, 0);
        value_of.push(Some(entry_of(&ev.values)));
    }
    for (start, values, end, row) in versions {
        let ev = Event {
            kind: EventKind::Upsert,
            values: values.clone(),
            update: None,
            origin: Origin::Feed,
        };
        let open = if end.is_none() { OPEN_END } else { 0 };
        history_versions.push(&[], start, end.unwrap_or_default(), &ev, open);
        version_rows.push(row.unwrap_or(u32::MAX));
        value_of.push(Some(entry_of(values)));
    }
    let page = SharedHistory {
        events: packed_events::pack(history_events),
        versions: packed_events::pack(history_versions),
        version_rows,
        row_entries,
        value_of: Numbers::pack(value_of.into_iter()),
        own: own.columns,
    };
    block.columns = row_values.columns;
    let encode_err = |e: rancor::Error| corrupt(format!("cannot encode cold page: {e}"));
    let rows = compress(&packed_rows::pack(block)?, Codec::Fast(effort))?;
    let history = compress(
        &rkyv::to_bytes::<rancor::Error>(&page).map_err(encode_err)?,
        HISTORY_CODEC,
    )?;
    // A row part holds at most a few hundred rows: its length never reaches the flag's bit.
    let head = u32::try_from(rows.len())
        .ok()
        .filter(|&n| n & SHARED_VALUES == 0)
        .ok_or_else(|| corrupt("a cold page's row part is too large to store"))?;
    let mut out = Vec::with_capacity(4 + rows.len() + history.len());
    out.extend_from_slice(&(head | SHARED_VALUES).to_le_bytes());
    out.extend_from_slice(&rows);
    out.extend_from_slice(&history);
    Ok((out, zone.finish()))
}

/// Whether a page's events are decoded: a commit refolds them, a read never uses them (a lookup
/// of a key read alone spent a third of its decoding on them, docs/PERFORMANCE.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Events {
    Decode,
    /// Left out: the page decodes with no events.
    Skip,
}

/// Decodes a page of `key` written by [`encode_cold`] (or by a build before format 12).
pub(crate) fn decode_cold(
    bytes: &[u8],
    key: &Bytes,
    width: usize,
    events: Events,
) -> Result<ColdContents> {
    let parts = split_page(bytes)?;
    let block = decode_row_part(parts.rows)?;
    let mut entries = Entries::new(&block.columns, block.ids.len());
    let rows = block.rows_sharing(key, width, &mut entries)?;
    let (events, versions) = decode_history(&parts, &mut entries, width, events)?;
    Ok((events, versions, rows))
}

/// Only the events (with empty keys; none with [`Events::Skip`]) and timeline versions of a page
/// written by [`encode_cold`] (or by a build before format 12).
pub(crate) fn decode_cold_history(
    bytes: &[u8],
    width: usize,
    events: Events,
) -> Result<(Vec<Incoming>, Vec<ColdVersion>)> {
    let parts = split_page(bytes)?;
    match parts.values {
        HistoryValues::Own => decode_history(&parts, &mut Entries::new(&[], 0), width, events),
        HistoryValues::Shared => {
            let block = decode_row_part(parts.rows)?;
            block.check_width(width)?;
            let mut rows = Entries::new(&block.columns, block.ids.len());
            decode_history(&parts, &mut rows, width, events)
        }
    }
}

/// The events and versions of a page's history; `rows` are its row part's value entries (read
/// only for a [`SharedHistory`]).
fn decode_history(
    parts: &PageParts<'_>,
    rows: &mut Entries<'_>,
    width: usize,
    events: Events,
) -> Result<(Vec<Incoming>, Vec<ColdVersion>)> {
    let bad = |e: rancor::Error| corrupt(format!("cold page fails validation: {e}"));
    let raw = decompress(parts.history)?;
    let block = |b: &ArchivedEventBlock| rkyv::deserialize::<EventBlock, rancor::Error>(b);
    let (events, versions, version_rows) = match parts.values {
        HistoryValues::Own => {
            let page = rkyv::access::<ArchivedColdHistory, rancor::Error>(&raw).map_err(bad)?;
            let events = match events {
                Events::Decode => block(&page.events).map_err(bad)?.events(width)?,
                Events::Skip => Vec::new(),
            };
            let versions = block(&page.versions).map_err(bad)?;
            let flags = versions.flags.clone();
            let rows: Vec<u32> = page.version_rows.iter().map(|r| r.to_native()).collect();
            (events, (versions.events(width)?, flags), rows)
        }
        HistoryValues::Shared => {
            let page = rkyv::access::<ArchivedSharedHistory, rancor::Error>(&raw).map_err(bad)?;
            let own =
                rkyv::deserialize::<Vec<ColumnData>, rancor::Error>(&page.own).map_err(bad)?;
            if own.len() != width {
                return Err(corrupt("cold page history has another number of columns"));
            }
            let row_entries = page.row_entries.to_native() as u64;
            let value_of = page.value_of.collect(|e| e);
            // Entries are at most the rows, and the events and versions, that name them.
            if row_entries > rows.limit as u64 {
                return Err(corrupt(
                    "a cold page's history counts more entries than its rows",
                ));
            }
            let mut own = Entries::new(&own, value_of.len());
            let mut values = |i: usize| -> Result<Row> {
                match value_of.get(i).copied().flatten() {
                    Some(e) if e < row_entries => rows.get(e as usize),
                    Some(e) => own.get((e - row_entries) as usize),
                    None => Err(corrupt("cold page history has values out of range")),
                }
            };
            let (evs, vers) = (page.events.unpack()?, page.versions.unpack()?);
            let n_events = evs.flags.len();
            if value_of.len() != n_events + vers.flags.len() {
                return Err(corrupt("cold page history has events without values"));
            }
            let events = match events {
                Events::Decode => evs.events_valued(width, &mut values)?,
                Events::Skip => Vec::new(),
            };
            let flags = vers.flags.clone();
            let versions = vers.events_valued(width, |i| values(n_events + i))?;
            let rows: Vec<u32> = page.version_rows.iter().map(|r| r.to_native()).collect();
            (events, (versions, flags), rows)
        }
    };
    let (versions, flags) = versions;
    if versions.len() != version_rows.len() {
        return Err(corrupt("cold page has versions without rows"));
    }
    let versions = versions
        .into_iter()
        .zip(flags)
        .zip(version_rows)
        .map(|((v, flags), row)| {
            let end = (flags & OPEN_END == 0).then_some(v.sys);
            (v.seq, v.event.values, end, (row != u32::MAX).then_some(row))
        })
        .collect();
    Ok((events, versions))
}

/// Whether the row part of a page (its first bytes, as [`decode_cold_rows`] reads them)
/// carries a CRC of its own ([`super::archive::has_checksum`]); a part that does not split is
/// left to [`decode_cold_rows`] to report.
pub(crate) fn row_part_has_checksum(bytes: &[u8]) -> bool {
    split_page(bytes).map_or(true, |p| super::archive::has_checksum(p.rows))
}

/// Only the row versions of a page written by [`encode_cold`], as a block.
pub(crate) fn decode_cold_rows(bytes: &[u8]) -> Result<RowBlock> {
    let mut block = decode_row_part(split_page(bytes)?.rows)?;
    block.note_bounds_in_order();
    Ok(block)
}

fn decode_row_part(rows: &[u8]) -> Result<RowBlock> {
    let block = with_decompressed(rows, packed_rows::unpack)?;
    block.check_rows(block.ids.len())?;
    Ok(block)
}

impl RowBlock {
    /// Checks that every column of the block has `n` entries and well-formed offsets.
    fn check(&self, n: usize, width: usize) -> Result<()> {
        self.check_width(width)?;
        self.check_rows(n)
    }

    /// Checks that the block has a column per column of a table `width` columns wide.
    pub(super) fn check_width(&self, width: usize) -> Result<()> {
        match self.columns.len() == width {
            true => Ok(()),
            false => Err(corrupt("cold row block columns differ in length")),
        }
    }

    /// Whether the block's distinct bounds are in ascending order (the order of their times,
    /// [`crate::keycodec::cmp_encoded`]), noted in the block: a scan then places a time among
    /// them once (`BlockRows::bounds_below`) and compares each row's bounds with it by their
    /// numbers. Pages written since session 59 store them so ([`RowBlock::sort_bounds`]); a
    /// block of an older page is read as before, each bound compared as bytes.
    fn note_bounds_in_order(&mut self) {
        let (offsets, data) = (&self.bounds.offsets, &self.bounds.data);
        let n = offsets.len().saturating_sub(1);
        let get = |e: usize| &data[offsets[e] as usize..offsets[e + 1] as usize];
        self.bounds_sorted =
            (1..n).all(|e| crate::keycodec::cmp_encoded(get(e - 1), get(e)).is_lt());
    }

    /// Puts the block's distinct bounds in ascending order and numbers the rows' bounds by it,
    /// as a page stores them ([`encode_cold`]; [`RowBlock::note_bounds_in_order`]).
    fn sort_bounds(&mut self) {
        let (offsets, data) = (&self.bounds.offsets, &self.bounds.data);
        let n = offsets.len().saturating_sub(1);
        let get = |e: u32| &data[offsets[e as usize] as usize..offsets[e as usize + 1] as usize];
        // Sorted by their first eight bytes as a number (an encoded integer or time is decided
        // there), then by all their bytes where those are equal: the order `cmp_encoded` gives.
        let prefix = |e: u32| {
            let (b, mut k) = (get(e), [0u8; 8]);
            let n = b.len().min(8);
            k[..n].copy_from_slice(&b[..n]);
            u64::from_be_bytes(k)
        };
        let mut order: Vec<(u64, u32)> = (0..n as u32).map(|e| (prefix(e), e)).collect();
        let in_order = |a: &(u64, u32), b: &(u64, u32)| {
            a.0 < b.0 || (a.0 == b.0 && crate::keycodec::cmp_encoded(get(a.1), get(b.1)).is_lt())
        };
        if order.windows(2).all(|w| in_order(&w[0], &w[1])) {
            return;
        }
        order.sort_unstable();
        for run in order
            .chunk_by_mut(|a, b| a.0 == b.0)
            .filter(|r| r.len() > 1)
        {
            run.sort_unstable_by(|a, b| crate::keycodec::cmp_encoded(get(a.1), get(b.1)));
        }
        let mut number = vec![0u32; n];
        let mut sorted = VarBytes::default();
        sorted.data.reserve(data.len());
        sorted.offsets.reserve(offsets.len());
        for (to, &(_, from)) in order.iter().enumerate() {
            number[from as usize] = to as u32;
            sorted.push(get(from));
        }
        for e in self.bound_of.iter_mut().filter(|e| **e != NO_BOUND) {
            *e = number[*e as usize];
        }
        self.bounds = sorted;
    }

    /// Checks that every column of the block has `n` entries and that its bounds and values are
    /// in range: once, as it is decoded ([`decode_cold_rows`]), for it is read many times.
    fn check_rows(&self, n: usize) -> Result<()> {
        let lens = [self.added.len(), self.retired.len(), self.value_of.len()];
        let distinct = self.bounds.offsets.len().saturating_sub(1);
        if lens.iter().any(|&l| l != n)
            || self.bound_of.len() != 4 * n
            || !self.bounds.holds(distinct)
        {
            return Err(corrupt("cold row block columns differ in length"));
        }
        // Each a maximum over the column, with no early exit, so the compiler makes one loop of
        // vector instructions of it. An entry of `NO_BOUND` (`u32::MAX`) wraps to 0; one in
        // range to at most `distinct`.
        let past_bounds = (self.bound_of.iter()).fold(0u32, |m, &e| m.max(e.wrapping_add(1)));
        if past_bounds as usize > distinct {
            return Err(corrupt("a cold row's bounds are out of range"));
        }
        // There are at most as many entries as rows (an entry past a column's end is an error
        // when it is read).
        if (self.value_of.iter()).fold(0u32, |m, &e| m.max(e)) as usize >= n && n > 0 {
            return Err(corrupt("a cold row's values are out of range"));
        }
        Ok(())
    }

    /// The block's rows as stored rows of `key`.
    pub fn rows(&self, key: &Bytes, width: usize) -> Result<ColdRows> {
        self.rows_sharing(key, width, &mut Entries::new(&self.columns, self.ids.len()))
    }

    /// The block's rows as stored rows of `key`, their values built by `entries` (this block's
    /// columns): rows that share an entry share its `Row`, as they did when they were written,
    /// and so do the events and versions of the page that name it. Bounds are shared likewise.
    fn rows_sharing(
        &self,
        key: &Bytes,
        width: usize,
        entries: &mut Entries<'_>,
    ) -> Result<ColdRows> {
        let n = self.ids.len();
        self.check(n, width)?;
        let mut out = Vec::with_capacity(n);
        let distinct = self.bounds.offsets.len().saturating_sub(1);
        let bounds: Vec<Bytes> = (0..distinct)
            .map(|e| self.bounds.get(e).map(Bytes::from))
            .collect::<Result<_>>()?;
        for i in 0..n {
            // Checked: every entry is in range or absent.
            let bound = |k: usize| {
                let e = self.bound_of[4 * i + k];
                (e != NO_BOUND).then(|| bounds[e as usize].clone())
            };
            let values = entries.get(self.value_of[i] as usize)?;
            let retired = self.retired[i];
            out.push((
                self.ids[i],
                StoredRow {
                    key: key.clone(),
                    values,
                    start: bound(0),
                    end: bound(1),
                    sys_start: bound(2),
                    sys_end: bound(3),
                    added: self.added[i],
                    retired: (retired != u64::MAX).then_some(retired),
                },
            ));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests;
