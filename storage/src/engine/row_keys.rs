//! The key number of any row of a table ([`RowKeys`]): from the row store, or, for a row whose
//! number it let go of ([`super::RowStore::let_go_directories`]), from the row directory in the
//! store of the commit that wrote the row, kept read for the next rows a reader asks about.

use std::cell::RefCell;
use std::collections::BTreeMap;

use super::fold::RowId;
use super::TableState;
use crate::error::{corrupt, Result};

/// How many rows' key numbers a reader keeps read from row directories (16 MiB): the rows of
/// the commits it reached back to, a few hundred of the workload's. The change feed of a commit
/// looks up the keys of the rows it retired, most of them written by the commits just before.
#[cfg(not(feature = "small-parts"))]
const ROWS_KEPT: usize = 1 << 22;
/// A few, so that tests evict what they read (the `small-parts` feature).
#[cfg(feature = "small-parts")]
const ROWS_KEPT: usize = 16;

/// Reads the key numbers of a table's rows ([`RowKeys::key_of`]).
pub(crate) struct RowKeys<'a> {
    state: &'a TableState,
    /// Parts of row directories read from the store, by their first row: their rows' key
    /// numbers.
    read: RefCell<BTreeMap<RowId, Vec<u32>>>,
}

impl<'a> RowKeys<'a> {
    pub fn new(state: &'a TableState) -> Self {
        RowKeys {
            state,
            read: RefCell::default(),
        }
    }

    /// The number of the key of row `id` ([`super::KeyState::no`]), which is below the row
    /// store's length.
    pub fn key_of(&self, id: RowId) -> Result<u32> {
        if let Some(no) = self.state.rows.key_of(id).or_else(|| self.already_read(id)) {
            return Ok(no);
        }
        let version = (self.state.rows.written_by(id))
            .ok_or_else(|| corrupt(format!("row {id} was written by no commit")))?;
        let parts = self.state.stored_directories(version)?;
        let Some(first) = (parts.iter())
            .find(|p| p.first <= id && (id - p.first) < p.key_of.len() as RowId)
            .map(|p| p.first)
        else {
            return Err(corrupt(format!(
                "row {id} is in no part of the row directory of commit {version}"
            )));
        };
        let mut read = self.read.borrow_mut();
        read.extend(parts.into_iter().map(|p| (p.first, p.key_of)));
        // Past the bound, the parts furthest below the one asked about go first (a reader goes
        // on in id order, or in key order among the rows of a few commits), then those above.
        let mut rows: usize = read.values().map(Vec::len).sum();
        while rows > ROWS_KEPT {
            let far = match read.first_key_value() {
                Some((&low, _)) if low != first => low,
                _ => match read.last_key_value() {
                    Some((&high, _)) if high != first => high,
                    _ => break,
                },
            };
            rows -= read.remove(&far).map_or(0, |k| k.len());
        }
        drop(read);
        self.already_read(id)
            .ok_or_else(|| corrupt(format!("row {id} was let go of as it was read")))
    }

    fn already_read(&self, id: RowId) -> Option<u32> {
        let read = self.read.borrow();
        let (first, keys) = read.range(..=id).next_back()?;
        keys.get((id - first) as usize).copied()
    }
}
