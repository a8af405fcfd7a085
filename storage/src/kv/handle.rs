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
//!
//! It does one thing as it closes: after a process wrote much, it opens sled once more, so that
//! the next open does not pay for it ([`RECOVERY_AHEAD_ENTRIES`]).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockWriteGuard};

use super::sled_cache::open_sled;
use crate::error::{Error, Result};

/// The database behind a lock.
pub(super) struct SledHandle {
    /// `None` while a purge swaps the files, and after a purge failed half-way: every operation
    /// is then refused until the store is reopened (which finishes the swap).
    db: RwLock<Option<Arc<sled::Db>>>,
    dir: PathBuf,
    cache_bytes: u64,
    /// Entries written to sled since it was opened ([`SledHandle::wrote`]).
    written: AtomicU64,
    /// [`RECOVERY_AHEAD_ENTRIES`] (tests use less).
    recover_after: u64,
}

/// A handle that wrote at least this many entries opens sled once more as it closes.
///
/// sled 0.34 writes its snapshot (the table of where each of its nodes lies in its log) only
/// while it opens: an open reads the last snapshot, then every record of the log written after
/// it. A store closed after an ingest of 10M events left that whole ingest's log to the next
/// open: 114 ms, against 17 ms once the close had written the snapshot (docs/PERFORMANCE.md,
/// session 28). So a process that wrote this much pays that read as it closes, while nobody
/// waits for the store, and the next open, a query's, reads a current snapshot. The threshold
/// spares a small writer (one `INSERT`) an open more as it closes: its log is short to read.
pub(super) const RECOVERY_AHEAD_ENTRIES: u64 = 1 << 16;

impl SledHandle {
    /// The handle of `db`, opened in `dir` with `cache_bytes` of cache.
    pub fn new(db: sled::Db, dir: &Path, cache_bytes: u64) -> Self {
        SledHandle {
            db: RwLock::new(Some(Arc::new(db))),
            dir: dir.to_path_buf(),
            cache_bytes,
            written: AtomicU64::new(0),
            recover_after: RECOVERY_AHEAD_ENTRIES,
        }
    }

    /// Counts `entries` written to sled, for what closing does ([`RECOVERY_AHEAD_ENTRIES`]).
    pub fn wrote(&self, entries: usize) {
        self.written.fetch_add(entries as u64, Ordering::Relaxed);
    }

    /// Whether anything was written to sled since it was opened.
    pub fn has_written(&self) -> bool {
        self.written.load(Ordering::Relaxed) > 0
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

impl Drop for SledHandle {
    /// Closes sled and, after [`RECOVERY_AHEAD_ENTRIES`] written, opens it once more so that it
    /// writes its snapshot. Best effort: if anything fails, the next open reads the log as it
    /// would have anyway; nothing is written but sled's snapshot, which sled replaces atomically.
    fn drop(&mut self) {
        if *self.written.get_mut() < self.recover_after {
            return;
        }
        let Ok(slot) = self.db.get_mut() else {
            return;
        };
        let Some(db) = slot.take().and_then(|db| Arc::try_unwrap(db).ok()) else {
            return;
        };
        if db.flush().is_err() {
            return;
        }
        drop(db);
        if super::rewrite::wait_released(&self.dir.join("db")).is_ok() {
            drop(open_sled(&self.dir, self.cache_bytes));
        }
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

    /// sled's snapshot files in `dir`.
    fn snapshots(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("snap."))
            .collect();
        names.sort();
        names
    }

    /// Writes `n` entries through a handle that opens sled again after `recover_after`, closes
    /// it, and returns sled's snapshot files before and after one more plain open.
    fn close_after(n: usize, recover_after: u64) -> (Vec<String>, Vec<String>) {
        let dir = tempfile::tempdir().unwrap();
        let mut h = SledHandle::new(open_sled(dir.path(), 1 << 20).unwrap(), dir.path(), 1 << 20);
        h.recover_after = recover_after;
        let db = h.db().unwrap();
        for i in 0..n as u32 {
            db.insert(i.to_be_bytes(), &[7u8; 40][..]).unwrap();
        }
        drop(db);
        h.wrote(n);
        drop(h);
        let closed = snapshots(dir.path());
        super::super::rewrite::wait_released(&dir.path().join("db")).unwrap();
        let db = open_sled(dir.path(), 1 << 20).unwrap();
        assert_eq!(db.len(), n);
        drop(db);
        (closed, snapshots(dir.path()))
    }

    #[test]
    fn a_handle_that_wrote_much_leaves_sled_a_snapshot_that_the_next_open_need_not_advance() {
        let (closed, reopened) = close_after(5000, 1000);
        assert!(!closed.is_empty());
        assert_eq!(closed, reopened);
    }

    #[test]
    fn a_handle_that_wrote_little_leaves_the_log_to_the_next_open() {
        let (closed, reopened) = close_after(5000, 10_000);
        assert_ne!(closed, reopened);
    }
}
