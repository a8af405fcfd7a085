//! A key's frozen rows as a scan reads them: the row blocks of its pages, decoded once and
//! shared with the read cache, indexed by row id; a row's bounds, commits and values read in place
//! from the blocks' columns.

use std::sync::Arc;

use super::cold_page::{RowBlock, NO_BOUND};
use super::columns::ColumnData;
use crate::error::{corrupt, Result};
use crate::record::{Bytes, RowId, StoredRow};
use crate::value::{Value, ValueRef};

/// A key's frozen row versions, decoded for reading: the blocks of its pages as they are (bounds
/// stay bytes), with an index by row id of their rows ([`ColdBatch::new`]) or of those a filter
/// kept ([`ColdBatch::new_where`]: the others are not found by id). A row's bounds and commits
/// are read in place; its values are built only when asked for ([`ColdBatch::values`]), so rows
/// a scan filters out cost none.
pub(crate) struct ColdBatch {
    key: Bytes,
    /// Shared with the store's cache of decoded pages.
    blocks: Vec<Arc<RowBlock>>,
    /// (row id, block, row in block) of the rows indexed, sorted by row id.
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

/// Rows of a [`ColdBatch`] a scan selected, in order, grouped by the block that holds them, so
/// that a bound ([`Selected::bounds`]) or (once [`Selected::with_values`]) a value column
/// ([`Selected::append_column`]) is read a block at a time.
pub(crate) struct Selected<'a> {
    batch: &'a ColdBatch,
    positions: &'a [usize],
    /// `(block, end)`: rows `previous end..end` are in block `block`.
    segments: Vec<(u32, usize)>,
    /// Each row's place in its block.
    at: Vec<u32>,
    /// Each row's entry of its block's values (empty until [`Selected::with_values`]).
    entries: Vec<u32>,
}

impl<'a> Selected<'a> {
    /// The rows, with the entries that hold their values gathered.
    pub fn with_values(mut self) -> Self {
        let mut from = 0;
        self.entries = Vec::with_capacity(self.at.len());
        for &(b, end) in &self.segments {
            let value_of = &self.batch.blocks[b as usize].value_of;
            (self.entries).extend(self.at[from..end].iter().map(|&i| value_of[i as usize]));
            from = end;
        }
        self
    }

    /// Bound `which` of each row, in order: a block at a time.
    pub fn bounds(&self, which: TemporalBound) -> impl Iterator<Item = Option<&'a [u8]>> + '_ {
        let mut from = 0;
        self.segments.iter().flat_map(move |&(b, end)| {
            let block: &'a RowBlock = &self.batch.blocks[b as usize];
            let rows = &self.at[from..end];
            from = end;
            rows.iter().map(move |&i| block.bound(i as usize, which))
        })
    }

    /// Bound `which` of each row, in order, as the 64-bit integer a sequence of one integer,
    /// date or timestamp holds (`keycodec::decode_int`), appended to `values` with whether the
    /// row has that bound to `valid` (an open bound: `false`, and 0 in `values`); a block at a
    /// time, with no slice of bytes per row. `false`, and nothing appended, if a bound is not
    /// one such integer (a sequence of several columns, or of another type).
    pub fn int_bounds(
        &self,
        which: TemporalBound,
        values: &mut Vec<i64>,
        valid: &mut Vec<bool>,
    ) -> bool {
        let (had, had_valid) = (values.len(), valid.len());
        values.reserve(self.at.len());
        valid.reserve(self.at.len());
        let mut from = 0;
        for &(b, end) in &self.segments {
            let block: &RowBlock = &self.batch.blocks[b as usize];
            if !block.int_bounds(&self.at[from..end], which, values, valid) {
                values.truncate(had);
                valid.truncate(had_valid);
                return false;
            }
            from = end;
        }
        true
    }

    /// How many rows.
    pub fn len(&self) -> usize {
        self.positions.len()
    }

    /// Row `j`, but for its values.
    pub fn at(&self, j: usize) -> ColdRow<'a> {
        self.batch.at(self.positions[j])
    }

    /// Bound `which` of row `j`.
    #[inline]
    pub fn bound(&self, j: usize, which: TemporalBound) -> Option<&'a [u8]> {
        self.batch.bound(self.positions[j], which)
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

/// One of a row's four temporal bounds: its place in the arrays of bounds the format and the
/// readers use (`[start, end, system start, system end]`, as [`RowBlock`] lists them per row).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TemporalBound {
    /// `__START_AT`.
    Start = 0,
    /// `__END_AT`.
    End = 1,
    /// `__SYSTEM_START_AT`.
    SystemStart = 2,
    /// `__SYSTEM_END_AT`.
    SystemEnd = 3,
}

impl TemporalBound {
    /// The four, in their order.
    pub const ALL: [TemporalBound; 4] = [
        TemporalBound::Start,
        TemporalBound::End,
        TemporalBound::SystemStart,
        TemporalBound::SystemEnd,
    ];

    /// This bound of `bounds` (start, end, system start, system end).
    #[inline]
    pub fn of<T: Copy>(self, bounds: &[T; 4]) -> T {
        bounds[self as usize]
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

/// A filter for [`ColdBatch::new_where`] that keeps every row.
pub(crate) fn every_row(rows: BlockRows<'_>, kept: &mut Vec<u32>) {
    kept.extend(0..rows.len() as u32);
}

/// The rows of one block, as [`ColdBatch::new_where`] shows them to its filter: each where it
/// lies ([`BlockRows::row`]), and where a time falls among the block's bounds
/// ([`BlockRows::bounds_below`]), so that a filter by time places its times once a block and
/// then tests each row's bounds by their entry numbers ([`BlockRow::entry`]).
#[derive(Clone, Copy)]
pub(crate) struct BlockRows<'a> {
    block: &'a RowBlock,
}

impl<'a> BlockRows<'a> {
    /// How many rows.
    #[inline]
    pub fn len(self) -> usize {
        self.block.ids.len()
    }

    /// Row `i`.
    #[inline]
    pub fn row(self, i: usize) -> BlockRow<'a> {
        BlockRow {
            block: self.block,
            i,
        }
    }

    /// Whether the block's bounds are strictly ascending, as its page stores them since the
    /// writer sorts them ([`super::cold_page::decode_cold_rows`] notes whether they are):
    /// [`BlockRows::bounds_below`] places a time by numbers only then.
    #[inline]
    pub fn bounds_in_order(self) -> bool {
        self.block.bounds_sorted
    }

    /// How many of the block's distinct bounds are below `t` (`or_equal`: or equal to it): if
    /// they are in ascending order ([`BlockRows::bounds_in_order`]), a row's bound is below `t`
    /// exactly when its entry number is below this.
    pub fn bounds_below(self, t: &[u8], or_equal: bool) -> u32 {
        let (offsets, data) = (&self.block.bounds.offsets[..], &self.block.bounds.data[..]);
        let n = offsets.len().saturating_sub(1);
        let below = |e: usize| {
            let b = &data[offsets[e] as usize..offsets[e + 1] as usize];
            match crate::keycodec::cmp_encoded(b, t) {
                std::cmp::Ordering::Less => true,
                std::cmp::Ordering::Equal => or_equal,
                std::cmp::Ordering::Greater => false,
            }
        };
        let (mut lo, mut hi) = (0, n);
        while lo < hi {
            let mid = (lo + hi) / 2;
            match below(mid) {
                true => lo = mid + 1,
                false => hi = mid,
            }
        }
        lo as u32
    }
}

/// A row of a block where it lies, as [`ColdBatch::new_where`] shows it to its filter.
#[derive(Clone, Copy)]
pub(crate) struct BlockRow<'a> {
    block: &'a RowBlock,
    i: usize,
}

impl<'a> BlockRow<'a> {
    /// The entry number of bound `which` of the row among the block's bounds, in their order
    /// ([`BlockRows::bounds_below`]); `None` if it has none.
    #[inline]
    pub fn entry(self, which: TemporalBound) -> Option<u32> {
        let entry = self.block.bound_of[4 * self.i + which as usize];
        (entry != NO_BOUND).then_some(entry)
    }

    /// The commits that wrote and retired (if one did) the row.
    #[inline]
    pub fn commits(self) -> (u64, Option<u64>) {
        let (b, i) = (self.block, self.i);
        let retired = b.retired[i];
        (b.added[i], (retired != u64::MAX).then_some(retired))
    }

    /// Bound `which` of the row.
    #[inline]
    pub fn bound(self, which: TemporalBound) -> Option<&'a [u8]> {
        self.block.bound(self.i, which)
    }
}

impl RowBlock {
    /// Bound `which` of the block's row `i`. The block was checked as it was decoded
    /// (`check_rows`): every entry is in range or absent.
    #[inline]
    fn bound(&self, i: usize, which: TemporalBound) -> Option<&[u8]> {
        let entry = self.bound_of[4 * i + which as usize];
        (entry != NO_BOUND).then(|| {
            let (col, e) = (&self.bounds, entry as usize);
            &col.data[col.offsets[e] as usize..col.offsets[e + 1] as usize]
        })
    }

    /// [`Selected::int_bounds`] of the block's rows `rows`: `false` at the first bound that is
    /// not one integer (what was appended before it stays; the caller cuts it).
    fn int_bounds(
        &self,
        rows: &[u32],
        which: TemporalBound,
        values: &mut Vec<i64>,
        valid: &mut Vec<bool>,
    ) -> bool {
        let (offsets, data) = (&self.bounds.offsets[..], &self.bounds.data[..]);
        for &i in rows {
            let entry = self.bound_of[4 * i as usize + which as usize];
            if entry == NO_BOUND {
                values.push(0);
                valid.push(false);
                continue;
            }
            let e = entry as usize;
            let cell = &data[offsets[e] as usize..offsets[e + 1] as usize];
            match crate::keycodec::decode_int(cell) {
                Some(x) => {
                    values.push(x);
                    valid.push(true);
                }
                None => return false,
            }
        }
        true
    }
}

impl ColdBatch {
    /// Indexes `blocks` of `key`'s pages (decoded, and so checked, by [`decode_cold_rows`]) for
    /// a table `width` columns wide.
    pub fn new(key: Bytes, width: usize, blocks: Vec<Arc<RowBlock>>) -> Result<ColdBatch> {
        let rows = blocks.iter().map(|b| b.ids.len()).sum();
        ColdBatch::indexed(key, width, blocks, every_row, rows)
    }

    /// [`ColdBatch::new`] of the rows `keep` keeps only: a scan that selects by time or by
    /// version checks each row of a block where it lies, and indexes (and sorts by id) only
    /// those it reads. `keep` is shown each block's rows at once ([`BlockRows`]), and appends
    /// the positions of those it keeps, in order.
    pub fn new_where(
        key: Bytes,
        width: usize,
        blocks: Vec<Arc<RowBlock>>,
        keep: impl Fn(BlockRows<'_>, &mut Vec<u32>),
    ) -> Result<ColdBatch> {
        ColdBatch::indexed(key, width, blocks, keep, 0)
    }

    /// [`ColdBatch::new_where`], the index made with room for `capacity` rows.
    fn indexed(
        key: Bytes,
        width: usize,
        blocks: Vec<Arc<RowBlock>>,
        keep: impl Fn(BlockRows<'_>, &mut Vec<u32>),
        capacity: usize,
    ) -> Result<ColdBatch> {
        let mut index = Vec::with_capacity(capacity);
        // The blocks by their first row: pages whose rows are apart in ids are then in order
        // one after the other.
        let mut order: Vec<usize> = (0..blocks.len()).collect();
        order.sort_by_key(|&b| blocks[b].ids.first().copied());
        let mut kept = Vec::new();
        for &bi in &order {
            let b = &blocks[bi];
            b.check_width(width)?;
            kept.clear();
            keep(BlockRows { block: b }, &mut kept);
            for &i in &kept {
                let id = *b.ids.get(i as usize).ok_or_else(|| {
                    corrupt(format!(
                        "a filter kept row {i} of a block of {}",
                        b.ids.len()
                    ))
                })?;
                index.push((id, bi as u32, i));
            }
        }
        // A page lists its rows in id order: if the pages overlap, a stable sort merges those
        // runs.
        if !index.is_sorted_by_key(|e| e.0) {
            index.sort_by_key(|e| e.0);
        }
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
        let (mut segments, mut at) = (Vec::new(), Vec::with_capacity(positions.len()));
        for &pos in positions {
            let (_, b, i) = self.index[pos];
            at.push(i);
            match segments.last_mut() {
                Some((last, end)) if *last == b => *end = at.len(),
                _ => segments.push((b, at.len())),
            }
        }
        Selected {
            batch: self,
            positions,
            segments,
            at,
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
        let (added, retired) = self.commits(pos);
        ColdRow {
            key: &self.key,
            bounds: self.bounds(pos),
            added,
            retired,
        }
    }

    /// The commits that wrote and retired (if one did) the row at position `pos`.
    #[inline]
    pub fn commits(&self, pos: usize) -> (u64, Option<u64>) {
        let (_, b, i) = self.index[pos];
        BlockRow {
            block: &self.blocks[b as usize],
            i: i as usize,
        }
        .commits()
    }

    /// The bounds (start, end, system start, system end) of the row at position `pos`.
    #[inline]
    pub fn bounds(&self, pos: usize) -> [Option<&[u8]>; 4] {
        TemporalBound::ALL.map(|which| self.bound(pos, which))
    }

    /// Bound `which` of the row at position `pos`.
    #[inline]
    pub fn bound(&self, pos: usize, which: TemporalBound) -> Option<&[u8]> {
        let (_, b, i) = self.index[pos];
        self.blocks[b as usize].bound(i as usize, which)
    }
}
