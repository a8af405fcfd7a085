//! Loading on first use. Opening a store reads its catalog and its commit records, nothing
//! proportional to its data: a table's state is read from its derived records (`pages`; replayed
//! from its log if they are not current) the first time a query or a commit needs it.
//! A source table's rows are read by each reader, chunk by chunk (`source_rows`). See
//! [`super::OpenMode`].

use std::sync::RwLockReadGuard;

use super::pages;
use super::{in_table, table_mut, Checkpoints, Inner, Store, Table};
use crate::error::{corrupt, Error, Result};
use crate::flow::StoredAs;
use crate::kv::KvStore;

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
    Skeleton {
        /// How many keys the increments applied whole since it was read have read
        /// ([`Increments`]).
        keys_read: u64,
    },
}

impl Load {
    /// Whether the table's state is the whole table (reads use memory, not the records).
    pub(super) fn in_memory(self) -> bool {
        self == Load::Replayed
    }
}

/// How an increment (a refresh of a streaming table, [`Store::apply`]) of a table that is not in
/// memory finds the keys its events change ([`super::StoreOptions::increments`]).
///
/// Reading only its keys costs an increment about three times what the same keys cost a read of
/// the whole table (it decodes their heads, puts their rows back, and writes their heads again
/// with its commit, since the table it leaves is not in memory), and so it does for every later
/// increment; a table read whole costs later increments only their events. A process that
/// applies one increment and closes (a scheduled refresh) writes the keys' heads on close either
/// way. docs/PERFORMANCE.md (session 27) has the figures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Increments {
    /// The first increment applied whole after the table was read from the store reads only
    /// the keys its events bring, however many; so do the next ones, until the increments since
    /// it was read have read, with their own, as many keys as one in `one_in` of the table's
    /// keys. That increment reads the table whole instead, and it stays in memory, as a table
    /// written by the process does. The default is one in 4: a scheduled refresh of a large
    /// table reads only the keys of its new rows, and a process that goes on ingesting into a
    /// table it opened reads it once, with its second increment.
    ReadKeysUpTo {
        /// The share of the table's keys, one in this many (at least 1).
        one_in: u32,
    },
    /// Every increment reads only the keys its events bring, however many increments follow:
    /// each costs in proportion to its keys, never to the table, and so does its memory.
    ReadKeys,
}

impl Default for Increments {
    fn default() -> Self {
        Increments::ReadKeysUpTo { one_in: 4 }
    }
}

impl Increments {
    /// Whether an increment that brings `keys` keys reads the table (of `numbered` keys) whole,
    /// after increments that read `read` keys since it was read.
    pub(super) fn reads_whole(self, read: u64, keys: u64, numbered: u64) -> bool {
        match self {
            Increments::ReadKeysUpTo { one_in } => {
                read > 0
                    && read
                        .saturating_add(keys)
                        .saturating_mul(u64::from(one_in.max(1)))
                        >= numbered
            }
            Increments::ReadKeys => false,
        }
    }
}

/// Reads `t`'s state from its last checkpoint and the commits after it (or replays its whole
/// log and writes a checkpoint, if it has none). On an error the state is left empty and
/// pending, so the store stays usable and the next use tries again.
pub(super) fn read_whole(
    kv: &dyn KvStore,
    progress: Option<&pages::Progressing>,
    checkpoints: &Checkpoints,
    t: &mut Table,
) -> Result<()> {
    let read = match pages::load(kv, t) {
        Ok(Some(replayed)) => {
            t.unsaved = replayed;
            Ok(())
        }
        Ok(None) => pages::rebuild(kv, t, progress, checkpoints).map(|()| t.unsaved = 0),
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
                Error::Corrupt(m) if !m.starts_with("table `") => in_table(&t.name, corrupt(m)),
                e => e,
            })
        }
    }
}

impl Inner {
    /// Reads `name`'s state whole ([`read_whole`]), unless that was done.
    /// How many row versions `name` has written (its row ids): from the table in memory, else
    /// from its summary when its records are current, else from the table read whole.
    pub(super) fn row_versions(&mut self, name: &str) -> Result<u64> {
        let kv = self.kv.as_ref();
        let t = table_mut(&mut self.tables, name)?;
        if !t.load.in_memory() {
            if let Some(rows) = pages::row_count(kv, t)? {
                return Ok(rows);
            }
            self.ensure_replayed(name)?;
        }
        Ok(table_mut(&mut self.tables, name)?.state.rows.len() as u64)
    }

    pub(super) fn ensure_replayed(&mut self, name: &str) -> Result<()> {
        let (kv, progress) = (self.kv.as_ref(), self.progress.as_ref());
        let t = table_mut(&mut self.tables, name)?;
        match t.load {
            Load::Replayed => Ok(()),
            _ => read_whole(kv, progress, &self.checkpoints, t),
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
    /// heads of the keys its events bring, and drops them once its checkpoint is written (until
    /// [`Increments`] says to read the table whole: the commit decides, once it knows its keys).
    /// The table is loaded whole if it is in memory already, if its records are not current
    /// (commits since its last checkpoint), and for SCD TYPE 1 (a truncate, or the collection of
    /// tombstones due, reaches every key).
    pub(super) fn load_for_increment(&mut self, name: &str) -> Result<KeysFrom> {
        let kv = self.kv.as_ref();
        let t = table_mut(&mut self.tables, name)?;
        match t.load {
            Load::Replayed => return Ok(KeysFrom::Memory),
            Load::Skeleton { .. } => return Ok(KeysFrom::Heads),
            Load::Pending if t.state.schema.mode != StoredAs::Scd1 => {
                if let Some(state) = pages::read_skeleton(kv, t, 0)? {
                    t.state = state;
                    t.load = Load::Skeleton { keys_read: 0 };
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

#[cfg(test)]
mod tests {
    use super::Increments;

    #[test]
    fn the_first_increment_reads_its_keys_however_many() {
        let rule = Increments::default();
        assert!(!rule.reads_whole(0, 1_000, 1_000));
        assert!(!rule.reads_whole(0, 0, 0));
    }

    #[test]
    fn later_increments_read_the_table_once_a_quarter_of_its_keys_was_read() {
        let rule = Increments::default();
        assert!(!rule.reads_whole(100, 149, 1_000));
        assert!(rule.reads_whole(100, 150, 1_000));
        assert!(rule.reads_whole(1, 1, 8));
        // One in 0 is one in 1: every key read.
        let every = Increments::ReadKeysUpTo { one_in: 0 };
        assert!(!every.reads_whole(500, 499, 1_000));
        assert!(every.reads_whole(500, 500, 1_000));
        assert!(!Increments::ReadKeys.reads_whole(u64::MAX, u64::MAX, 1));
    }
}
