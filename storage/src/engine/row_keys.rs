//! The key number of any row of a table ([`RowKeys`]): from the row store, or, for a row whose
//! number it let go of ([`super::RowStore::let_go_directories`]), from the row directory in the
//! store of the commit that wrote the row, each part read once per reader.

use std::cell::RefCell;
use std::collections::BTreeMap;

use super::fold::RowId;
use super::TableState;
use crate::error::{corrupt, Result};

/// How many parts of row directories a reader keeps read: a commit applied whole has one, so
/// about the rows of the last 64 commits it reached back to. The change feed of a commit reads
/// the keys of the rows it retired, most of them written by the commits just before.
const PARTS_KEPT: usize = 64;

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
        {
            let mut read = self.read.borrow_mut();
            for part in parts {
                if read.len() == PARTS_KEPT {
                    read.pop_first();
                }
                read.insert(part.first, part.key_of);
            }
        }
        self.already_read(id).ok_or_else(|| {
            corrupt(format!(
                "row {id} is in no part of the row directory of commit {version}"
            ))
        })
    }

    fn already_read(&self, id: RowId) -> Option<u32> {
        let read = self.read.borrow();
        let (first, keys) = read.range(..=id).next_back()?;
        keys.get((id - first) as usize).copied()
    }
}
