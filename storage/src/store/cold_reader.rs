//! Frozen rows read back by id, for the change feed: a few keys' decoded rows kept, each key's
//! pages read once for the rows of a window of commits.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

use super::in_table;
use crate::engine::fold::RowId;
use crate::engine::{RowKeys, StoredRow, TableState};
use crate::error::{corrupt, Result};
use crate::format::cold_batch::ColdBatch;

/// Reads frozen rows back by id, keeping the last few keys' decoded rows.
pub(crate) struct ColdReader<'a> {
    name: &'a str,
    state: &'a TableState,
    /// Whose rows are which.
    row_keys: RowKeys<'a>,
    /// The last few keys' frozen rows, their values decoded only for the rows asked for.
    keys: RefCell<std::collections::HashMap<u32, Rc<ColdBatch>>>,
    /// The keys kept, in the order they were read.
    order: RefCell<VecDeque<u32>>,
    /// How many keys it keeps (the oldest read goes first).
    capacity: usize,
    /// Only rows written or retired by these commits are asked for: pages whose rows were all
    /// written after them, or all retired before them, are not read.
    commits: Option<(u64, u64)>,
}

impl<'a> ColdReader<'a> {
    pub(super) fn new(name: &'a str, state: &'a TableState) -> Self {
        ColdReader {
            name,
            state,
            row_keys: RowKeys::new(state),
            keys: RefCell::default(),
            order: RefCell::default(),
            capacity: 8,
            commits: None,
        }
    }

    /// A reader of the rows that commits `from..=to` wrote or retired, which keeps every key it
    /// reads (only the pages of each that hold such rows).
    pub(super) fn of_commits(name: &'a str, state: &'a TableState, from: u64, to: u64) -> Self {
        ColdReader {
            commits: Some((from, to)),
            capacity: usize::MAX,
            ..ColdReader::new(name, state)
        }
    }

    /// The number of the key of row `id`.
    pub(super) fn key_of(&self, id: RowId) -> Result<u32> {
        self.row_keys.key_of(id).map_err(|e| in_table(self.name, e))
    }

    /// Frozen row `id`.
    pub(super) fn row(&self, id: RowId) -> Result<Cow<'a, StoredRow>> {
        let no = self.key_of(id)?;
        let mut keys = self.keys.borrow_mut();
        let rows = match keys.get(&no) {
            Some(rows) => rows.clone(),
            None => {
                let (key, ks) = self
                    .state
                    .key_by_no(no)
                    .ok_or_else(|| corrupt(format!("row {id} belongs to no key")))?;
                let rows = match self.commits {
                    None => self.state.frozen_batch(key, ks, |_| true),
                    Some((from, to)) => self
                        .state
                        .frozen_batch(key, ks, |z| z.added() <= to && z.retired() >= from),
                };
                let rows = Rc::new(rows.map_err(|e| in_table(self.name, e))?);
                let mut order = self.order.borrow_mut();
                if keys.len() == self.capacity {
                    if let Some(oldest) = order.pop_front() {
                        keys.remove(&oldest);
                    }
                }
                keys.insert(no, rows.clone());
                order.push_back(no);
                rows
            }
        };
        rows.stored_row(id)
            .map_err(|e| in_table(self.name, e))?
            .map(Cow::Owned)
            .ok_or_else(|| corrupt(format!("row {id} is in no cold page of its key")))
    }
}
