//! The rows a reader hands out: a [`RowView`] borrowed from the store, its [`RowValues`] (built in
//! memory, or read in place from the columns of a frozen page, so that a scan copies a page's
//! cells into its output without building a [`Value`] per cell), and the [`RowSink`] a scan hands
//! them to, which may take a frozen key's selected rows together ([`StoredRows`]) and read them a
//! column at a time.

use crate::engine::StoredRow;
use crate::error::{corrupt, Result};
pub use crate::format::cold_batch::TemporalBound;
use crate::format::cold_batch::{Selected, StoredCells};
use crate::value::{Value, ValueRef};

/// One target row, borrowed from the store. Temporal bounds are encoded ([`crate::keycodec`]).
#[derive(Debug, Clone, Copy)]
pub struct RowView<'a> {
    /// The encoded key.
    pub key: &'a [u8],
    /// Output column values.
    pub values: RowValues<'a>,
    /// `__START_AT`.
    pub start: Option<&'a [u8]>,
    /// `__END_AT`.
    pub end: Option<&'a [u8]>,
    /// `__SYSTEM_START_AT`.
    pub sys_start: Option<&'a [u8]>,
    /// `__SYSTEM_END_AT`.
    pub sys_end: Option<&'a [u8]>,
}

impl<'a> RowView<'a> {
    /// Bound `which`, encoded; `None`: open.
    #[inline]
    pub fn bound(&self, which: TemporalBound) -> Option<&'a [u8]> {
        which.of(&[self.start, self.end, self.sys_start, self.sys_end])
    }

    pub(crate) fn of(r: &'a StoredRow) -> Self {
        RowView {
            key: &r.key,
            values: RowValues::built(&r.values),
            start: r.start.as_deref(),
            end: r.end.as_deref(),
            sys_start: r.sys_start.as_deref(),
            sys_end: r.sys_end.as_deref(),
        }
    }
}

/// What a scan ([`super::TableReader::scan_into`]) hands its rows to, in order.
pub trait RowSink {
    /// One row.
    fn row(&mut self, row: RowView<'_>);

    /// Rows of one key read from its pages, in order; by default one at a time.
    fn stored_rows(&mut self, rows: &StoredRows<'_>) {
        for j in 0..rows.len() {
            self.row(rows.row(j));
        }
    }
}

/// A function of each row, as a [`RowSink`].
pub(crate) struct EachRow<F>(pub F);

impl<F: FnMut(RowView<'_>)> RowSink for EachRow<F> {
    fn row(&mut self, row: RowView<'_>) {
        (self.0)(row)
    }
}

/// Rows of one key a scan read from its pages, in order: each as a [`RowView`], or their values a
/// column at a time ([`StoredRows::append_column`]).
pub struct StoredRows<'a> {
    rows: Selected<'a>,
    /// Whether the scan reads the rows' values ([`super::Values::All`]).
    values: bool,
}

impl<'a> StoredRows<'a> {
    /// Rows whose values the scan reads (gathered: [`Selected::with_values`]).
    pub(crate) fn with_values(rows: Selected<'a>) -> Self {
        StoredRows { rows, values: true }
    }

    /// Rows read for their keys and bounds only ([`super::Values::Skip`]).
    pub(crate) fn bounds_only(rows: Selected<'a>) -> Self {
        StoredRows {
            rows,
            values: false,
        }
    }

    /// How many rows.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Row `j` (less than [`StoredRows::len`]).
    pub fn row(&self, j: usize) -> RowView<'a> {
        let row = self.rows.at(j);
        let [start, end, sys_start, sys_end] = row.bounds;
        RowView {
            key: row.key,
            values: match self.values {
                true => RowValues::stored(self.rows.cells(j)),
                false => RowValues::built(&[]),
            },
            start,
            end,
            sys_start,
            sys_end,
        }
    }

    /// Bound `which` of row `j` (less than [`StoredRows::len`]), encoded; `None`: open.
    #[inline]
    pub fn bound(&self, j: usize, which: TemporalBound) -> Option<&'a [u8]> {
        self.rows.bound(j, which)
    }

    /// Bound `which` of every row, in order, encoded (`None`: open): what
    /// [`StoredRows::bound`] gives for each, read a page block at a time.
    pub fn bounds(&self, which: TemporalBound) -> impl Iterator<Item = Option<&'a [u8]>> + '_ {
        self.rows.bounds(which)
    }

    /// Bound `which` of every row as a 64-bit integer, appended to `values`, and whether each row
    /// has it to `valid` (see [`TemporalBound`]): a block at a time. `false`, and nothing
    /// appended, when the bounds are not sequences of one integer, date or timestamp: then read
    /// [`StoredRows::bounds`].
    pub fn int_bounds(
        &self,
        which: TemporalBound,
        values: &mut Vec<i64>,
        valid: &mut Vec<bool>,
    ) -> bool {
        self.rows.int_bounds(which, values, valid)
    }

    /// Appends value `column` of every row to `out`, an Arrow builder of the column's type, a
    /// page block at a time; `false` (nothing appended) when `out` is not one of the builders
    /// read this way (64-bit integers and timestamps, floats, booleans, strings), or the scan
    /// does not read values: then read [`StoredRows::row`]'s values.
    pub fn append_column(
        &self,
        column: usize,
        out: &mut dyn arrow::array::ArrayBuilder,
    ) -> Result<bool> {
        match self.values {
            true => self.rows.append_column(column, out),
            false => Ok(false),
        }
    }
}

/// The output column values of one row ([`RowValues::get`] reads one in place).
#[derive(Clone, Copy)]
pub struct RowValues<'a>(Source<'a>);

#[derive(Clone, Copy, Debug)]
enum Source<'a> {
    Built(&'a [Value]),
    Stored(StoredCells<'a>),
}

impl<'a> RowValues<'a> {
    pub(crate) fn built(values: &'a [Value]) -> Self {
        RowValues(Source::Built(values))
    }

    pub(crate) fn stored(cells: StoredCells<'a>) -> Self {
        RowValues(Source::Stored(cells))
    }

    /// How many values the row has (none if the read asked for none: [`super::Values::None`]).
    #[inline]
    pub fn len(&self) -> usize {
        match &self.0 {
            Source::Built(v) => v.len(),
            Source::Stored(c) => c.len(),
        }
    }

    /// Whether the row has no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Value `i`; an error if a page's cell is damaged or the row has no value `i`.
    #[inline]
    pub fn get(&self, i: usize) -> Result<ValueRef<'a>> {
        match &self.0 {
            Source::Built(v) => (v.get(i).map(ValueRef::from))
                .ok_or_else(|| corrupt(format!("a row has no column {i}"))),
            Source::Stored(c) => c.get(i),
        }
    }

    /// Every value, built.
    pub fn to_vec(&self) -> Result<Vec<Value>> {
        match &self.0 {
            Source::Built(v) => Ok(v.to_vec()),
            Source::Stored(c) => (0..c.len())
                .map(|i| c.get(i).map(ValueRef::to_value))
                .collect(),
        }
    }
}

/// As a list of the cells, the same wherever they are read from.
impl std::fmt::Debug for RowValues<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut list = f.debug_list();
        for i in 0..self.len() {
            match self.get(i) {
                Ok(v) => list.entry(&v),
                Err(e) => list.entry(&e),
            };
        }
        list.finish()
    }
}
