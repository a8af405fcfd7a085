//! The open sled database of a [`super::SledKv`], behind the lock a purge takes while it swaps the
//! store's files.
//!
//! Until the value log, this handle also closed and reopened sled now and then: sled 0.34's cache
//! keeps every node it touched until 16,384 accesses wait in its queues, and with pages and event
//! blocks in sled's leaves that was hundreds of megabytes. Since values of 128 bytes or more live
//! in the value log (`kv/separated.rs`), sled's leaves hold keys, small values and pointers: on the
//! 10M-event load, its full refresh and the queries over it, the reopens no longer came due, and
//! turning them off changed neither time nor memory (docs/PERFORMANCE.md, session 23). They were
//! removed.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock, RwLockWriteGuard};

use crate::error::{Error, Result};

/// The database behind a lock.
pub(super) struct SledHandle {
    /// `None` while a purge swaps the files, and after a purge failed half-way: every operation
    /// is then refused until the store is reopened (which finishes the swap).
    db: RwLock<Option<Arc<sled::Db>>>,
    dir: PathBuf,
    cache_bytes: u64,
}

/// Opens sled in `dir` with `cache_bytes` of page cache.
pub(super) fn open_sled(dir: &Path, cache_bytes: u64) -> sled::Result<sled::Db> {
    sled::Config::new()
        .path(dir)
        .cache_capacity(cache_bytes)
        .open()
}

impl SledHandle {
    /// The handle of `db`, opened in `dir` with `cache_bytes` of cache.
    pub fn new(db: sled::Db, dir: &Path, cache_bytes: u64) -> Self {
        SledHandle {
            db: RwLock::new(Some(Arc::new(db))),
            dir: dir.to_path_buf(),
            cache_bytes,
        }
    }

    /// The open database, or an error while a purge swaps its files (or after one failed).
    pub fn db(&self) -> Result<Arc<sled::Db>> {
        self.db
            .read()
            .map_err(|_| Error::Poisoned("key-value layer".into()))?
            .clone()
            .ok_or_else(closed)
    }

    /// The lock itself, held by a purge while it swaps sled's files.
    pub fn lock(&self) -> Result<RwLockWriteGuard<'_, Option<Arc<sled::Db>>>> {
        self.db
            .write()
            .map_err(|_| Error::Poisoned("key-value layer".into()))
    }

    /// Opens sled again in the store's folder (after a purge swapped its files).
    pub fn open_again(&self) -> Result<Arc<sled::Db>> {
        Ok(Arc::new(open_sled(&self.dir, self.cache_bytes)?))
    }
}

/// The error of a use while sled is closed.
fn closed() -> Error {
    Error::Poisoned(
        "the store's files were closed by a rewrite that did not finish; reopen the store".into(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handle_whose_files_are_being_swapped_refuses_use_until_they_are_back() {
        let dir = tempfile::tempdir().unwrap();
        let h = SledHandle::new(open_sled(dir.path(), 1 << 20).unwrap(), dir.path(), 1 << 20);
        h.db().unwrap().insert(b"k", b"v").unwrap();
        let taken = h.lock().unwrap().take().unwrap();
        assert!(matches!(h.db(), Err(Error::Poisoned(_))));
        taken.flush().unwrap();
        drop(taken);
        super::super::rewrite::wait_released(&dir.path().join("db")).unwrap();
        *h.lock().unwrap() = Some(h.open_again().unwrap());
        assert_eq!(
            h.db().unwrap().get(b"k").unwrap().as_deref(),
            Some(&b"v"[..])
        );
    }
}
