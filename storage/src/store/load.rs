//! Loading on first use. Opening a store reads its catalog and its commit records, nothing
//! proportional to its data: a table's state is read from its derived records (`pages`; replayed
//! from its log if they are not current) the first time a query or a commit needs it, and a
//! source table's rows are decoded the first time they are read ([`super::OpenMode`]).

use std::sync::RwLockReadGuard;

use super::pages;
use super::{in_table, table_mut, Inner, Store};
use crate::error::{corrupt, Error, Result};
use crate::format::keys::{self, key};
use crate::source::SourceTable;

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
        let kv = self.kv.as_ref();
        let t = table_mut(&mut self.tables, name)?;
        if t.load == Load::Replayed {
            return Ok(());
        }
        let read = match pages::load(kv, t) {
            Ok(Some(replayed)) => {
                t.unsaved = replayed;
                Ok(())
            }
            Ok(None) => pages::rebuild(kv, t).map(|()| t.unsaved = 0),
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

    /// Decodes the rows of source table `name`, unless that was done.
    pub(super) fn ensure_rows(&mut self, name: &str) -> Result<()> {
        let kv = self.kv.as_ref();
        let src = self.sources.get_mut(name).ok_or_else(|| Error::NotFound {
            kind: "source table",
            name: name.to_string(),
        })?;
        if src.batches.is_some() {
            return Ok(());
        }
        let mut batches = Vec::new();
        let mut rows = 0u64;
        for kv in kv.scan_prefix(&key(keys::APPEND, src.id, None, None)) {
            let (_, v) = kv?;
            for b in SourceTable::decode_chunk(&v)? {
                let b = src.fit(b)?;
                rows += b.num_rows() as u64;
                batches.push(b);
            }
        }
        if rows + src.erased.len() as u64 != src.rows {
            return Err(corrupt(format!(
                "source `{name}`: its commits record {} rows ({} erased), its chunks hold {rows}",
                src.rows,
                src.erased.len()
            )));
        }
        src.batches = Some(batches);
        Ok(())
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

    /// A read guard on the store in which the rows of source table `source` are decoded.
    pub(super) fn read_with_rows(&self, source: &str) -> Result<RwLockReadGuard<'_, Inner>> {
        {
            let g = self.read_inner()?;
            if g.sources.get(source).is_some_and(|s| s.batches.is_some()) {
                return Ok(g);
            }
        }
        self.write_inner()?.ensure_rows(source)?;
        self.read_inner()
    }
}
