//! A cold page: the frozen part of one key's state (see `engine::cold`) as it is stored.

use std::sync::Arc;

use rkyv::rancor;

use super::archive::{compress, decompress, Codec};
use super::columns::{new_column, ColumnData, VarBytes};
use super::event_block::EventBlock;
use super::packed_rows;
pub(crate) use super::packed_rows::RowBlock;
use super::zone::ZoneBuilder;
use crate::error::{corrupt, Result};
use crate::record::{Bytes, ColdRows, Event, EventKind, Incoming, Origin, RowId, StoredRow};
use crate::value::{ColumnType, Row, Value, ValueRef};

/// Flag of a timeline version in a [`ColdPage`] whose business end is open.
const OPEN_END: u8 = 4;

/// A row's bound that is absent, in `RowBlock::bound_of`.
const NO_BOUND: u32 = u32::MAX;

/// The history part (events and timeline versions) is read by thaws, VACUUM, rebuilds and (in a
/// key head's hot part) the reads of a key for a lookup or a commit, never by scans.
const HISTORY_CODEC: Codec = Codec::Small;

/// The frozen part of one key's state (see `engine::cold`), but for its row versions: its
/// events, and its timeline versions as pseudo-events (sequence = start, system sequence = end)
/// with the rows that show them.
///
/// A cold page is the key's [`RowBlock`] and its `ColdHistory`, each archived and compressed on
/// its own, after the length of the first (`u32`, little-endian): a scan reads only the rows.
#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize, Debug, Default)]
pub(crate) struct ColdHistory {
    events: EventBlock,
    versions: EventBlock,
    /// Per version, the row that shows it (`u32::MAX`: none).
    version_rows: Vec<u32>,
}

/// The address of a row's values: rows that share one share their values (the engine clones
/// the `Row` of a version it writes again, with another end), so a page stores them once, found
/// without hashing or comparing values.
fn shared(values: &Row) -> usize {
    values.as_ptr() as usize
}

/// How many leading bytes of a cold page hold its row versions (the length and the row part).
pub(crate) fn cold_page_head(page: &[u8]) -> usize {
    page.get(..4).map_or(0, |b| {
        4 + u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize
    })
}

/// The two parts of a cold page (or of its head, whose history part is empty): row versions,
/// history.
fn split_page(bytes: &[u8]) -> Result<(&[u8], &[u8])> {
    split_prefixed(bytes, "cold page", "its row part")
}

/// Splits `bytes` after the part whose length (u32 LE) leads it: the layout of a cold page and
/// of a key head. `what` and `part` name them in the error.
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

/// Encodes events `(seq, sys, event)`, timeline versions and row versions of one key as a
/// compressed [`ColdPage`], with the zone map of its rows ([`super::zone`]).
pub(crate) fn encode_cold<'a>(
    types: &[ColumnType],
    events: impl Iterator<Item = (&'a [u8], &'a [u8], &'a Event)>,
    versions: impl Iterator<Item = (&'a [u8], &'a Row, Option<&'a [u8]>, Option<RowId>)>,
    rows: impl Iterator<Item = (RowId, &'a StoredRow)>,
) -> Result<(Vec<u8>, Vec<u8>)> {
    let mut page = ColdHistory {
        events: EventBlock::empty(types),
        versions: EventBlock::empty(types),
        version_rows: Vec::new(),
    };
    let mut block = RowBlock {
        columns: types.iter().map(new_column).collect(),
        ..Default::default()
    };
    for (seq, sys, ev) in events {
        page.events.push(&[], seq, sys, ev, 0);
    }
    for (start, values, end, row) in versions {
        let ev = Event {
            kind: EventKind::Upsert,
            values: values.clone(),
            update: None,
            origin: Origin::Feed,
        };
        let open = if end.is_none() { OPEN_END } else { 0 };
        page.versions
            .push(&[], start, end.unwrap_or_default(), &ev, open);
        page.version_rows.push(row.unwrap_or(u32::MAX));
    }
    let b = &mut block;
    let mut zone = ZoneBuilder::default();
    let mut entries: foldhash::HashMap<usize, u32> = Default::default();
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
        let next = entries.len() as u32;
        let entry = *entries.entry(shared(&r.values)).or_insert(next);
        if entry == next {
            for (c, v) in b.columns.iter_mut().zip(r.values.iter()) {
                c.push(v);
            }
        }
        b.value_of.push(entry);
    }
    let encode_err = |e: rancor::Error| corrupt(format!("cannot encode cold page: {e}"));
    let rows = compress(&packed_rows::pack(block)?, Codec::Fast)?;
    let history = compress(
        &rkyv::to_bytes::<rancor::Error>(&page).map_err(encode_err)?,
        HISTORY_CODEC,
    )?;
    let mut out = Vec::with_capacity(4 + rows.len() + history.len());
    out.extend_from_slice(&(rows.len() as u32).to_le_bytes());
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

/// Decodes a page of `key` written by [`encode_cold`].
pub(crate) fn decode_cold(
    bytes: &[u8],
    key: &Bytes,
    width: usize,
    events: Events,
) -> Result<ColdContents> {
    let (row_part, _) = split_page(bytes)?;
    let (events, versions) = decode_cold_history(bytes, width, events)?;
    let rows = decode_row_part(row_part)?.rows(key, width)?;
    Ok((events, versions, rows))
}

/// Only the events (with empty keys; none with [`Events::Skip`]) and timeline versions of a page
/// written by [`encode_cold`].
pub(crate) fn decode_cold_history(
    bytes: &[u8],
    width: usize,
    events: Events,
) -> Result<(Vec<Incoming>, Vec<ColdVersion>)> {
    let (_, history) = split_page(bytes)?;
    let bad = |e: rancor::Error| corrupt(format!("cold page fails validation: {e}"));
    let raw = decompress(history)?;
    let page = rkyv::access::<ArchivedColdHistory, rancor::Error>(&raw).map_err(bad)?;
    let events = match events {
        Events::Decode => rkyv::deserialize::<EventBlock, rancor::Error>(&page.events)
            .map_err(bad)?
            .events(width)?,
        Events::Skip => Vec::new(),
    };
    let block = rkyv::deserialize::<EventBlock, rancor::Error>(&page.versions).map_err(bad)?;
    let versions = block.events(width)?;
    if versions.len() != page.version_rows.len() {
        return Err(corrupt("cold page has versions without rows"));
    }
    let versions = versions
        .into_iter()
        .zip(&block.flags)
        .zip(page.version_rows.iter().map(|r| r.to_native()))
        .map(|((v, &flags), row)| {
            let end = (flags & OPEN_END == 0).then_some(v.sys);
            (v.seq, v.event.values, end, (row != u32::MAX).then_some(row))
        })
        .collect();
    Ok((events, versions))
}

/// Only the row versions of a page written by [`encode_cold`], as a block.
pub(crate) fn decode_cold_rows(bytes: &[u8]) -> Result<RowBlock> {
    decode_row_part(split_page(bytes)?.0)
}

fn decode_row_part(rows: &[u8]) -> Result<RowBlock> {
    let block = packed_rows::unpack(&decompress(rows)?)?;
    block.check_rows(block.ids.len())?;
    Ok(block)
}

/// A key's frozen row versions, decoded for reading: the blocks of its pages as they are (bounds
/// stay bytes), with an index by row id. A row's bounds and commits are read in place; its values
/// are built only when asked for ([`ColdBatch::values`]), so rows a scan filters out cost none.
pub(crate) struct ColdBatch {
    key: Bytes,
    /// Shared with the store's cache of decoded pages.
    blocks: Vec<Arc<RowBlock>>,
    /// (row id, block, row in block), sorted by row id.
    index: Vec<(RowId, u32, u32)>,
}

/// The values of one row of a [`ColdBatch`], read in place from its block's columns.
#[derive(Clone, Copy, Debug)]
pub(crate) struct StoredCells<'a> {
    columns: &'a [ColumnData],
    /// The entry of the columns that holds the row's values.
    entry: usize,
}

impl<'a> StoredCells<'a> {
    /// How many values the row has.
    pub fn len(&self) -> usize {
        self.columns.len()
    }

    /// Value `i`.
    #[inline]
    pub fn get(&self, i: usize) -> Result<ValueRef<'a>> {
        let column = (self.columns.get(i))
            .ok_or_else(|| corrupt(format!("a stored row has no column {i}")))?;
        column.get_ref(self.entry)
    }

    /// Every value, built.
    pub fn to_vec(self) -> Result<Vec<Value>> {
        (self.columns.iter())
            .map(|c| c.get_ref(self.entry).map(ValueRef::to_value))
            .collect()
    }
}

/// Rows of a [`ColdBatch`] a scan selected, in order, and (once [`Selected::with_values`]) the
/// entries that hold their values grouped by block, so that each column is read a block at a
/// time ([`Selected::append_column`]).
pub(crate) struct Selected<'a> {
    batch: &'a ColdBatch,
    positions: &'a [usize],
    /// `(block, end)`: entries `entries[previous end..end]` are of block `block`.
    segments: Vec<(u32, usize)>,
    entries: Vec<u32>,
}

impl<'a> Selected<'a> {
    /// The rows, with the entries that hold their values gathered, grouped by block.
    pub fn with_values(mut self) -> Self {
        let (mut segments, mut entries) = (Vec::new(), Vec::with_capacity(self.positions.len()));
        for &pos in self.positions {
            let (_, b, i) = self.batch.index[pos];
            entries.push(self.batch.blocks[b as usize].value_of[i as usize]);
            match segments.last_mut() {
                Some((last, end)) if *last == b => *end = entries.len(),
                _ => segments.push((b, entries.len())),
            }
        }
        (self.segments, self.entries) = (segments, entries);
        self
    }

    /// How many rows.
    pub fn len(&self) -> usize {
        self.positions.len()
    }

    /// Row `j`, but for its values.
    pub fn at(&self, j: usize) -> ColdRow<'a> {
        self.batch.at(self.positions[j])
    }

    /// The values of row `j`.
    pub fn cells(&self, j: usize) -> StoredCells<'a> {
        self.batch.cells(self.positions[j])
    }

    /// Appends value `column` of every row to `out`, a block at a time; `false` (nothing
    /// appended) if `out` is not a builder the column is read into this way
    /// ([`ColumnData::append_to`]).
    pub fn append_column(
        &self,
        column: usize,
        out: &mut dyn arrow::array::ArrayBuilder,
    ) -> Result<bool> {
        let mut from = 0;
        for &(b, end) in &self.segments {
            let col = (self.batch.blocks[b as usize].columns.get(column))
                .ok_or_else(|| corrupt(format!("a stored row has no column {column}")))?;
            if !col.append_to(&self.entries[from..end], out)? {
                return Ok(false);
            }
            from = end;
        }
        Ok(true)
    }
}

/// One row of a [`ColdBatch`], but for its values: `(key, bounds, added, retired)`.
pub(crate) struct ColdRow<'a> {
    pub key: &'a [u8],
    /// Start, end, system start, system end.
    pub bounds: [Option<&'a [u8]>; 4],
    pub added: u64,
    pub retired: Option<u64>,
}

impl ColdBatch {
    /// Indexes `blocks` of `key`'s pages (decoded, and so checked, by [`decode_cold_rows`]) for
    /// a table `width` columns wide.
    pub fn new(key: Bytes, width: usize, blocks: Vec<Arc<RowBlock>>) -> Result<ColdBatch> {
        let mut index = Vec::new();
        for (bi, b) in blocks.iter().enumerate() {
            let n = b.ids.len();
            b.check_width(width)?;
            index.extend((0..n).map(|i| (b.ids[i], bi as u32, i as u32)));
        }
        index.sort_unstable_by_key(|e| e.0);
        Ok(ColdBatch { key, blocks, index })
    }

    /// The values of the row at position `pos`, read in place.
    #[inline]
    pub fn cells(&self, pos: usize) -> StoredCells<'_> {
        let (_, b, i) = self.index[pos];
        let b = &self.blocks[b as usize];
        StoredCells {
            columns: &b.columns,
            entry: b.value_of[i as usize] as usize,
        }
    }

    /// The rows at `positions` (in id order), for a scan to read ([`Selected::with_values`] to
    /// read their values column by column).
    pub fn select<'a>(&'a self, positions: &'a [usize]) -> Selected<'a> {
        Selected {
            batch: self,
            positions,
            segments: Vec::new(),
            entries: Vec::new(),
        }
    }

    /// The values of the row at position `pos`, into `out` (replaced).
    pub fn values(&self, pos: usize, out: &mut Vec<Value>) -> Result<()> {
        *out = self.cells(pos).to_vec()?;
        Ok(())
    }

    /// Row `id` as a stored row (its values built), if the batch has it.
    pub fn stored_row(&self, id: RowId) -> Result<Option<StoredRow>> {
        let pos = self.first_at_or_after(id);
        if self.id_at(pos) != Some(id) {
            return Ok(None);
        }
        let mut values = Vec::new();
        self.values(pos, &mut values)?;
        let r = self.at(pos);
        let [start, end, sys_start, sys_end] = r.bounds.map(|b| b.map(Bytes::from));
        Ok(Some(StoredRow {
            key: self.key.clone(),
            values: values.into(),
            start,
            end,
            sys_start,
            sys_end,
            added: r.added,
            retired: r.retired,
        }))
    }

    /// The position, in id order, of the first row whose id is `id` or more.
    pub fn first_at_or_after(&self, id: RowId) -> usize {
        self.index.partition_point(|e| e.0 < id)
    }

    /// The id of the row at position `pos` (in id order), if there is one.
    pub fn id_at(&self, pos: usize) -> Option<RowId> {
        self.index.get(pos).map(|e| e.0)
    }

    /// The row at position `pos` (in id order); `pos` must be less than the number of rows.
    pub fn at(&self, pos: usize) -> ColdRow<'_> {
        let (_, b, i) = self.index[pos];
        let (b, i) = (&self.blocks[b as usize], i as usize);
        // The block was checked when the batch was made: every slice below is in range.
        fn slice(col: &VarBytes, i: usize) -> &[u8] {
            &col.data[col.offsets[i] as usize..col.offsets[i + 1] as usize]
        }
        let of = &b.bound_of[4 * i..4 * i + 4];
        let bound = |k: usize| (of[k] != NO_BOUND).then(|| slice(&b.bounds, of[k] as usize));
        let retired = b.retired[i];
        ColdRow {
            key: &self.key,
            bounds: [bound(0), bound(1), bound(2), bound(3)],
            added: b.added[i],
            retired: (retired != u64::MAX).then_some(retired),
        }
    }
}

impl RowBlock {
    /// Checks that every column of the block has `n` entries and well-formed offsets.
    fn check(&self, n: usize, width: usize) -> Result<()> {
        self.check_width(width)?;
        self.check_rows(n)
    }

    /// Checks that the block has a column per column of a table `width` columns wide.
    fn check_width(&self, width: usize) -> Result<()> {
        match self.columns.len() == width {
            true => Ok(()),
            false => Err(corrupt("cold row block columns differ in length")),
        }
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
        if self
            .bound_of
            .iter()
            .any(|&e| e != NO_BOUND && e as usize >= distinct)
        {
            return Err(corrupt("a cold row's bounds are out of range"));
        }
        // There are at most as many entries as rows (an entry past a column's end is an error
        // when it is read).
        if self.value_of.iter().any(|&e| e as usize >= n) {
            return Err(corrupt("a cold row's values are out of range"));
        }
        Ok(())
    }

    /// The block's rows as stored rows of `key`.
    pub fn rows(&self, key: &Bytes, width: usize) -> Result<ColdRows> {
        let n = self.ids.len();
        self.check(n, width)?;
        let mut out = Vec::with_capacity(n);
        // Rows that share an entry share its `Row`, as they did when they were written, and
        // bounds likewise.
        let mut entries: Vec<Option<Row>> = Vec::new();
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
            let entry = self.value_of[i] as usize;
            if entries.len() <= entry {
                entries.resize(entry + 1, None);
            }
            let values = match &entries[entry] {
                Some(row) => row.clone(),
                None => {
                    let row: Row = self
                        .columns
                        .iter()
                        .map(|c| c.get(entry))
                        .collect::<Result<Vec<Value>>>()?
                        .into();
                    entries[entry] = Some(row.clone());
                    row
                }
            };
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
mod tests {
    use super::*;
    use std::sync::Arc;

    fn row(values: &Row, start: u8) -> StoredRow {
        StoredRow {
            key: Bytes::from(&b"k"[..]),
            values: values.clone(),
            start: Some(Bytes::from(&[start][..])),
            end: None,
            sys_start: None,
            sys_end: None,
            added: 1,
            retired: None,
        }
    }

    /// A page of `rows` (ids 0, 1, …), without events or versions.
    fn page_of_rows(types: &[ColumnType], rows: &[StoredRow]) -> Vec<u8> {
        let rows = rows.iter().enumerate().map(|(i, r)| (i as RowId, r));
        encode_cold(types, std::iter::empty(), std::iter::empty(), rows)
            .unwrap()
            .0
    }

    #[test]
    fn rows_that_share_values_store_them_once_and_read_back_sharing_them() {
        let types = [ColumnType::Int64, ColumnType::Utf8];
        let a: Row = vec![Value::Int(7), Value::from("seven")].into();
        let b: Row = vec![Value::Int(8), Value::Null].into();
        // A row written again with other bounds shares the first one's values; a row with
        // equal values of its own allocation keeps its own entry.
        let a_again: Row = vec![Value::Int(7), Value::from("seven")].into();
        let rows = [row(&a, 1), row(&b, 2), row(&a, 3), row(&a_again, 4)];
        let page = page_of_rows(&types, &rows);
        let block = decode_cold_rows(&page).unwrap();
        assert_eq!(block.value_of, [0, 1, 0, 2]);
        let key = Bytes::from(&b"k"[..]);
        let back = block.rows(&key, types.len()).unwrap();
        let values: Vec<&[Value]> = back.iter().map(|(_, r)| &r.values[..]).collect();
        assert_eq!(values, [&a[..], &b[..], &a[..], &a[..]]);
        assert!(Arc::ptr_eq(&back[0].1.values, &back[2].1.values));
        assert!(!Arc::ptr_eq(&back[0].1.values, &back[3].1.values));
        let starts: Vec<u8> = back
            .iter()
            .map(|(_, r)| r.start.as_ref().unwrap()[0])
            .collect();
        assert_eq!(starts, [1, 2, 3, 4]);
        // Read one row at a time, as a scan does.
        let batch = ColdBatch::new(key, types.len(), vec![Arc::new(block)]).unwrap();
        let mut out = Vec::new();
        batch.values(2, &mut out).unwrap();
        assert_eq!(out, a.to_vec());
    }

    #[test]
    fn a_row_whose_values_entry_is_out_of_range_is_damage() {
        let types = [ColumnType::Int64];
        let a: Row = vec![Value::Int(1)].into();
        let rows = [row(&a, 1), row(&a, 2)];
        let page = page_of_rows(&types, &rows);
        let mut block = decode_cold_rows(&page).unwrap();
        let key = Bytes::from(&b"k"[..]);
        for bad in [1, 2, u32::MAX] {
            block.value_of[1] = bad;
            let e = block.rows(&key, 1).unwrap_err();
            assert!(e.to_string().contains("the store is corrupt"), "{bad}: {e}");
        }
    }

    #[test]
    fn bounds_rows_share_are_stored_once_and_read_back_in_place() {
        let types = [ColumnType::Int64];
        let a: Row = vec![Value::Int(1)].into();
        let b = |x: u8| Some(Bytes::from(&[x][..]));
        // Version [1, 2) retired at system time 9 and written again; then [2, ...).
        let mut rows = [row(&a, 1), row(&a, 1), row(&a, 2)];
        rows[0].end = b(2);
        rows[0].sys_end = b(9);
        rows[1].end = b(2);
        rows[1].sys_start = b(9);
        rows[2].sys_start = b(9);
        let page = page_of_rows(&types, &rows);
        let block = decode_cold_rows(&page).unwrap();
        assert_eq!(block.bounds.data, [1, 2, 9]);
        let none = NO_BOUND;
        assert_eq!(
            block.bound_of,
            [0, 1, none, 2, 0, 1, 2, none, 1, none, 2, none]
        );
        let key = Bytes::from(&b"k"[..]);
        let back: Vec<StoredRow> = block
            .rows(&key, 1)
            .unwrap()
            .into_iter()
            .map(|(_, r)| r)
            .collect();
        for (got, want) in back.iter().zip(&rows) {
            let bounds =
                |r: &StoredRow| [&r.start, &r.end, &r.sys_start, &r.sys_end].map(Clone::clone);
            assert_eq!(bounds(got), bounds(want));
        }
        let batch = ColdBatch::new(key, 1, vec![Arc::new(block)]).unwrap();
        assert_eq!(
            batch.at(1).bounds,
            [Some(&[1][..]), Some(&[2][..]), Some(&[9][..]), None]
        );
    }

    #[test]
    fn a_row_whose_bound_is_out_of_range_is_damage() {
        let types = [ColumnType::Int64];
        let a: Row = vec![Value::Int(1)].into();
        let rows = [row(&a, 1), row(&a, 2)];
        let page = page_of_rows(&types, &rows);
        let mut block = decode_cold_rows(&page).unwrap();
        block.bound_of[4] = 2;
        let key = Bytes::from(&b"k"[..]);
        let e = block.rows(&key, 1).unwrap_err();
        assert!(e.to_string().contains("bounds are out of range"), "{e}");
        // Stored so, it is refused as it is decoded, before any batch reads it.
        let stored = compress(&packed_rows::pack(block).unwrap(), Codec::Fast).unwrap();
        let e = decode_row_part(&stored).unwrap_err();
        assert!(e.to_string().contains("bounds are out of range"), "{e}");
    }
}
