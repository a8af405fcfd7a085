//! Loading on first use. Opening a store reads its catalog and its commit records, nothing
//! proportional to its data: a table's state is read from its derived records (`pages`; replayed
//! from its log if they are not current) the first time a query or a commit needs it.
//! A source table's rows are read by each reader, chunk by chunk (`source_rows`). See
//! [`super::OpenMode`].

use std::sync::RwLockReadGuard;

use super::pages;
use super::{in_table, table_mut, Inner, Store};
use crate::error::{corrupt, Error, Result};
use crate::flow::StoredAs;

/// Whether a table's state was read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Load {
    /// Not yet: the state is empty.
    Pending,
    /// Its state is the table.
    Replayed,
}

impl Inner {
    /// Reads `name`'s state from its last checkpoint and the commits after it (or replays its
    /// whole log and writes a checkpoint, if it has none), unless that was done. On an error the state is left empty and pending,
    /// so the store stays usable and the next use tries again.
    pub(super) fn ensure_replayed(&mut self, name: &str) -> Result<()> {
        let (kv, progress) = (self.kv.as_ref(), self.progress.as_ref());
        let t = table_mut(&mut self.tables, name)?;
        if t.load == Load::Replayed {
            return Ok(());
        }
        let read = match pages::load(kv, t) {
            Ok(Some(replayed)) => {
                t.unsaved = replayed;
                Ok(())
            }
            Ok(None) => pages::rebuild(kv, t, progress).map(|()| t.unsaved = 0),
            Err(e) => Err(e),
        };
        match read {
            Ok(()) => {
                t.load = Load::Replayed;
                t.recent_keys.clear();
                Ok(())
            }
            Err(e) => {
                t.state = t.new_state();
                // Errors of `pages::load` name the table already.
                Err(match e {
                    Error::Corrupt(m) if !m.starts_with("table `") => in_table(name, corrupt(m)),
                    e => e,
                })
            }
        }
    }
}

/// Where a commit finds the keys it changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum KeysFrom {
    /// In memory: the table is loaded whole.
    Memory,
    /// In their heads, read a part's keys at a time (the table holds none of its keys:
    /// [`Inner::load_without_keys`]).
    Heads,
}

impl Inner {
    /// Makes `name`'s state one that holds none of its keys, to be read a part at a time by a
    /// commit applied in parts ([`crate::engine::TableState::restore_skeleton`]), if the table
    /// is not in memory, its records are current, and it holds more than `part_rows` row
    /// versions (so that a full refresh of it is applied in parts). Else, and for SCD TYPE 1
    /// (whose events may hold a truncate, which applies to every key at once), the table is
    /// loaded whole.
    pub(super) fn load_without_keys(&mut self, name: &str, part_rows: u64) -> Result<KeysFrom> {
        let kv = self.kv.as_ref();
        let t = table_mut(&mut self.tables, name)?;
        if t.load == Load::Pending && t.state.schema.mode != StoredAs::Scd1 {
            if let Some(state) = pages::read_skeleton(kv, t, part_rows)? {
                t.state = state;
                return Ok(KeysFrom::Heads);
            }
        }
        self.ensure_replayed(name)?;
        Ok(KeysFrom::Memory)
    }
}

impl Store {
    /// A read guard on the store in which `table` is replayed.
    pub(super) fn read_replayed(&self, table: &str) -> Result<RwLockReadGuard<'_, Inner>> {
        {
            let g = self.read_inner()?;
            if g.table(table)?.load == Load::Replayed {
                return Ok(g);
            }
        }
        self.write_inner()?.ensure_replayed(table)?;
        self.read_inner()
    }
}
