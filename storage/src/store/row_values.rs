//! The values of a row a reader hands out ([`super::RowView::values`]): built in memory, or read
//! in place from the columns of a frozen page, so that a scan copies a page's cells straight into
//! its output without building a [`Value`] per cell.

use crate::error::{corrupt, Result};
use crate::format::cold_page::StoredCells;
use crate::value::{Value, ValueRef};

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
