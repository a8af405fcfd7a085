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
    /// Its state holds none of its keys: only its row store and how many keys it numbered, as
    /// of its last commit, which is a checkpoint ([`Inner::load_for_increment`]). Reads go to
    /// its records, as for [`Load::Pending`]; the next increment reads its own keys into it.
    Skeleton,
}

impl Load {
    /// Whether the table's state is the whole table (reads use memory, not the records).
    pub(super) fn in_memory(self) -> bool {
        self == Load::Replayed
    }
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
                t.load = Load::Pending;
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
        if !t.load.in_memory() && t.state.schema.mode != StoredAs::Scd1 {
            if let Some(state) = pages::read_skeleton(kv, t, part_rows)? {
                t.state = state;
                return Ok(KeysFrom::Heads);
            }
        }
        self.ensure_replayed(name)?;
        Ok(KeysFrom::Memory)
    }

    /// Where an increment of `name` finds its keys: a table not in memory whose records are
    /// current is not loaded; its state becomes one that holds none of its keys
    /// ([`Load::Skeleton`], kept from one increment to the next), and each increment reads the
    /// heads of the keys its events bring, and drops them once its checkpoint is written. The
    /// table is loaded whole if it is in memory already, if its records are not current (commits
    /// since its last checkpoint), and for SCD TYPE 1 (a truncate, or the collection of
    /// tombstones due, reaches every key).
    pub(super) fn load_for_increment(&mut self, name: &str) -> Result<KeysFrom> {
        let kv = self.kv.as_ref();
        let t = table_mut(&mut self.tables, name)?;
        match t.load {
            Load::Replayed => return Ok(KeysFrom::Memory),
            Load::Skeleton => return Ok(KeysFrom::Heads),
            Load::Pending if t.state.schema.mode != StoredAs::Scd1 => {
                if let Some(state) = pages::read_skeleton(kv, t, 0)? {
                    t.state = state;
                    t.load = Load::Skeleton;
                    return Ok(KeysFrom::Heads);
                }
            }
            Load::Pending => {}
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
            if g.table(table)?.load.in_memory() {
                return Ok(g);
            }
        }
        self.write_inner()?.ensure_replayed(table)?;
        self.read_inner()
    }
}
