//! The open sled database of a [`super::SledKv`], reopened once enough has gone through it.
//!
//! sled 0.34's page cache does not bound what it holds. It notes each access to a tree node in
//! one of 256 shards, and looks at a shard's accesses (evicting the nodes past its share of the
//! cache) only once 64 of them wait there: until then every node read or written stays in
//! memory, whatever the cache's size. A scan of fewer than 16,384 nodes evicts nothing at all. It
//! also counts a node that sled stores in a blob file (any leaf over 128 KiB) at the size of the
//! pointer to it. A 10M-event `read_files` load held 380 MB of source chunks this way: written
//! when the files were loaded, read back by the refresh, never evicted (docs/PERFORMANCE.md).
//!
//! Dropping the database frees all of it, and opening it again takes milliseconds. So
//! [`SledHandle`] counts the bytes read and written ([`SledHandle::moved`]), and once half the
//! cache's size ([`REOPEN_CACHE_DIVISOR`]) went through since sled was opened, the next
//! call of [`SledHandle::db`] that finds no other user (no scan under way, no other thread in a
//! call) closes and reopens it, at the pace [`REOPEN_PACE`] sets, or past the ceiling
//! [`REOPEN_CEILING_CACHES`] of bytes scanned or written whatever the pace. Durability does not
//! change: every write is flushed already.
//!
//! Since values of 128 bytes or more went to the value log (`kv/separated.rs`), sled's leaves hold
//! keys, small values and pointers, and what counts here is what went through sled itself: the
//! 10M-event load that reopened sled to stay under 512 MiB now peaks at 280 MB. The limits below
//! were measured before that (docs/PERFORMANCE.md, session 23).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockWriteGuard};
use std::time::{Duration, Instant};

use super::rewrite;
use crate::error::{Error, Result};

/// sled is reopened once the cache's size divided by this was read or written: the nodes it
/// keeps are many times the bytes that went through (a write of a 4 KiB page reads and keeps the
/// leaf of up to 16 pages it goes to). Measured on a 10M-event load: reopened after 32 MiB (this,
/// with the default cache), 487 MB peak; after 128 MiB, 557 MB (docs/PERFORMANCE.md).
pub(super) const REOPEN_CACHE_DIVISOR: u64 = 2;

/// A reopen costs sled's recovery, which grows with the store (about 0.3 s on a 8 GB store after
/// a full refresh of 10M events): the next one waits this many times as long as the last took, so
/// that reopening costs at most about 5% of the time. Without it, a `count(*)` over that store
/// reopened sled every 32 MiB and took 16 s instead of 4 (docs/PERFORMANCE.md).
const REOPEN_PACE: u32 = 20;

/// Once this many times the cache's size was scanned or written since sled was opened, it is
/// reopened whatever [`REOPEN_PACE`] says: the pace saves time, this bounds what sled keeps
/// between calls (a scan under way holds sled, and is not cut short). Point reads do not count
/// towards it: each is an access sled notes, so a run of them soon makes sled evict on its own
/// (a `count(*)` of a 10M-event table reads 1.5 GB by gets and peaked at 263–282 MB without a
/// reopen; reopening every 256 MiB of them cost six reopens of 90 ms and held as much). A scan reads
/// a leaf's many pairs in one access, and a write keeps the leaf it goes to. The first reopen of
/// a store waits twenty times as long as opening it took, and an open after a large load can
/// take a second (later reopens take 40–100 ms): a full refresh of 10M events scanned its source
/// and row directories for 25 s before its first reopen, and peaked at 748 MB there
/// (docs/PERFORMANCE.md).
const REOPEN_CEILING_CACHES: u64 = 4;

/// How bytes went through sled, for [`SledHandle::moved`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Through {
    /// A point read: counts towards a reopen when paced.
    Get,
    /// A scan or a write: counts towards a paced reopen and the ceiling
    /// ([`REOPEN_CEILING_CACHES`]).
    ScanOrWrite,
}

/// The database behind a lock, and what went through it since it was opened.
pub(super) struct SledHandle {
    /// `None` while a purge swaps the files, and after a purge or a reopen failed half-way: every
    /// operation is then refused until the store is reopened (which finishes the swap).
    db: RwLock<Option<Arc<sled::Db>>>,
    dir: PathBuf,
    cache_bytes: u64,
    /// Bytes of keys and values read or written since sled was opened.
    moved: AtomicU64,
    /// The part of `moved` scanned or written ([`Through::ScanOrWrite`]).
    scanned_or_written: AtomicU64,
    reopen_after: u64,
    /// [`REOPEN_CEILING_CACHES`] times the cache: a reopen is due then, paced or not.
    reopen_ceiling: u64,
    /// How many times sled was reopened.
    reopened: AtomicU64,
    /// When the next reopen may come, in microseconds since `born` ([`REOPEN_PACE`]).
    not_before_us: AtomicU64,
    born: Instant,
    /// [`REOPEN_PACE`].
    pace: u32,
}

/// Opens sled in `dir` with `cache_bytes` of page cache.
pub(super) fn open_sled(dir: &Path, cache_bytes: u64) -> sled::Result<sled::Db> {
    sled::Config::new()
        .path(dir)
        .cache_capacity(cache_bytes)
        .open()
}

impl SledHandle {
    /// The handle of `db`, opened in `dir` with `cache_bytes` of cache in `opened_in`: the first
    /// reopen waits as any does ([`REOPEN_PACE`] times that), so that a short read of a large
    /// store (whose opening is slow) never reopens it.
    pub fn new(db: sled::Db, dir: &Path, cache_bytes: u64, opened_in: Duration) -> Self {
        SledHandle {
            db: RwLock::new(Some(Arc::new(db))),
            dir: dir.to_path_buf(),
            cache_bytes,
            moved: AtomicU64::new(0),
            scanned_or_written: AtomicU64::new(0),
            reopen_after: (cache_bytes / REOPEN_CACHE_DIVISOR).max(1),
            reopen_ceiling: cache_bytes.saturating_mul(REOPEN_CEILING_CACHES).max(1),
            reopened: AtomicU64::new(0),
            not_before_us: AtomicU64::new((opened_in * REOPEN_PACE).as_micros() as u64),
            born: Instant::now(),
            pace: REOPEN_PACE,
        }
    }

    /// The same, reopened after `bytes` read or written (tests use a few KB), with no wait
    /// between reopens.
    #[cfg(test)]
    pub fn reopening_after(mut self, bytes: u64) -> Self {
        self.reopen_after = bytes;
        self.pace = 0;
        self.not_before_us = AtomicU64::new(0);
        self
    }

    /// The open database (reopened first when it is due and no one else holds it), or an error
    /// while a purge swaps its files (or after a purge or a reopen failed).
    pub fn db(&self) -> Result<Arc<sled::Db>> {
        let moved = self.moved.load(Ordering::Relaxed);
        let past_ceiling = self.scanned_or_written.load(Ordering::Relaxed) >= self.reopen_ceiling;
        if moved >= self.reopen_after && (past_ceiling || self.paced()) {
            self.reopen_if_alone()?;
        }
        self.db
            .read()
            .map_err(|_| Error::Poisoned("key-value layer".into()))?
            .clone()
            .ok_or_else(closed)
    }

    /// The same, reopened after `bytes` scanned or written, and only after them, however long
    /// the pace asks to wait (tests).
    #[cfg(test)]
    pub fn paced_with_ceiling(mut self, bytes: u64) -> Self {
        self.reopen_after = 1;
        self.reopen_ceiling = bytes;
        self.pace = u32::MAX;
        self.not_before_us = AtomicU64::new(u64::MAX);
        self
    }

    /// Notes `bytes` read or written.
    pub fn moved(&self, bytes: usize, through: Through) {
        self.moved.fetch_add(bytes as u64, Ordering::Relaxed);
        if through == Through::ScanOrWrite {
            self.scanned_or_written
                .fetch_add(bytes as u64, Ordering::Relaxed);
        }
    }

    /// How many times sled was reopened.
    pub fn reopened(&self) -> u64 {
        self.reopened.load(Ordering::Relaxed)
    }

    /// The lock itself, held by a purge while it swaps sled's files.
    pub fn lock(&self) -> Result<RwLockWriteGuard<'_, Option<Arc<sled::Db>>>> {
        self.db
            .write()
            .map_err(|_| Error::Poisoned("key-value layer".into()))
    }

    /// Opens sled again in the store's folder (after a purge swapped its files).
    pub fn open_again(&self) -> Result<Arc<sled::Db>> {
        self.moved.store(0, Ordering::Relaxed);
        self.scanned_or_written.store(0, Ordering::Relaxed);
        Ok(Arc::new(open_sled(&self.dir, self.cache_bytes)?))
    }

    /// Whether the time [`REOPEN_PACE`] asks to wait after the last reopen has passed.
    fn paced(&self) -> bool {
        self.born.elapsed().as_micros() as u64 >= self.not_before_us.load(Ordering::Relaxed)
    }

    /// Closes and reopens sled, unless another thread is in a call or a scan holds it. An error
    /// (sled's files could not be opened again) leaves it closed: the store is then refused
    /// until reopened, as after any I/O failure.
    fn reopen_if_alone(&self) -> Result<()> {
        let Ok(mut g) = self.db.try_write() else {
            return Ok(());
        };
        // Under the write lock nobody can take a new handle: one is only ours when no scan holds
        // a clone of it.
        if g.as_ref().is_none_or(|db| Arc::strong_count(db) != 1) {
            return Ok(());
        }
        let started = Instant::now();
        let db = g.take().expect("checked above");
        let flushed = db.flush();
        drop(db);
        flushed?;
        rewrite::wait_released(&self.dir.join("db"))?;
        *g = Some(self.open_again()?);
        self.reopened.fetch_add(1, Ordering::Relaxed);
        let wait: Duration = started.elapsed() * self.pace;
        let next = (self.born.elapsed() + wait).as_micros() as u64;
        self.not_before_us.store(next, Ordering::Relaxed);
        Ok(())
    }
}

/// The error of a use while sled is closed.
fn closed() -> Error {
    Error::Poisoned(
        "the store's files were closed by a rewrite or a reopen that did not finish; reopen the store"
            .into(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A handle on a new sled database in `dir`, with a cache of 1 MiB.
    fn handle(dir: &Path) -> SledHandle {
        let db = open_sled(dir, 1 << 20).unwrap();
        SledHandle::new(db, dir, 1 << 20, Duration::ZERO)
    }

    fn put(h: &SledHandle, k: &[u8], v: &[u8]) {
        let db = h.db().unwrap();
        db.insert(k, v).unwrap();
        db.flush().unwrap();
        h.moved(k.len() + v.len(), Through::ScanOrWrite);
    }

    /// Puts each of `keys` (big-endian) with a value of 256 bytes of `fill`.
    fn put_all(h: &SledHandle, keys: std::ops::Range<u32>, fill: u8) {
        for i in keys {
            put(h, &i.to_be_bytes(), &[fill; 256]);
        }
    }

    #[test]
    fn sled_reopens_once_enough_went_through_it_and_keeps_every_write() {
        let dir = tempfile::tempdir().unwrap();
        let h = handle(dir.path()).reopening_after(4096);
        put_all(&h, 0..64, 7);
        // 64 writes of 260 bytes: a reopen every 16 of them or so.
        assert!(h.reopened() >= 3, "reopened {} times", h.reopened());
        let db = h.db().unwrap();
        assert_eq!(db.len(), 64);
        assert!((0u32..64)
            .all(|i| db.get(i.to_be_bytes()).unwrap().as_deref() == Some(&[7u8; 256][..])));
    }

    #[test]
    fn sled_reopens_past_the_ceiling_however_long_the_pace_asks_to_wait() {
        let dir = tempfile::tempdir().unwrap();
        let h = handle(dir.path()).paced_with_ceiling(4096);
        put_all(&h, 0..15, 3);
        // 15 writes of 260 bytes: 3,900 bytes, under the ceiling; the pace holds the reopen back.
        assert_eq!(h.reopened(), 0);
        put_all(&h, 15..64, 3);
        // 64 writes: past the ceiling about every 16 of them.
        assert_eq!(h.reopened(), 3);
        let db = h.db().unwrap();
        assert_eq!(db.len(), 64);
    }

    #[test]
    fn point_reads_wait_for_the_pace_however_many_bytes_they_read() {
        let dir = tempfile::tempdir().unwrap();
        let h = handle(dir.path()).paced_with_ceiling(4096);
        put(&h, b"k", &[5u8; 256]);
        for _ in 0..64 {
            let v = h.db().unwrap().get(b"k").unwrap().unwrap();
            h.moved(1 + v.len(), Through::Get);
        }
        assert_eq!(h.reopened(), 0);
        // Sixteen scans of the pair (a quarter of those reads' bytes) go past the ceiling.
        for _ in 0..16 {
            let n: usize = h.db().unwrap().iter().map(|r| r.unwrap().1.len() + 1).sum();
            h.moved(n, Through::ScanOrWrite);
        }
        assert_eq!(h.db().unwrap().len(), 1);
        assert_eq!(h.reopened(), 1);
    }

    #[test]
    fn sled_is_not_reopened_under_a_scan_that_holds_it() {
        let dir = tempfile::tempdir().unwrap();
        let h = handle(dir.path()).reopening_after(1024);
        for i in 0u32..8 {
            put(&h, &i.to_be_bytes(), &[1u8; 512]);
        }
        let held = h.db().unwrap();
        let before = h.reopened();
        let mut scan = held.iter();
        let first = scan.next().unwrap().unwrap();
        h.moved(1 << 20, Through::ScanOrWrite);
        // Due, but held: every call gets the same database, and the scan goes on.
        let again = h.db().unwrap();
        assert!(Arc::ptr_eq(&held, &again));
        assert_eq!(h.reopened(), before);
        assert_eq!(1 + scan.count(), 8);
        assert_eq!(first.0.as_ref(), &0u32.to_be_bytes());
        drop((again, held));
        // Once let go, the next call reopens it.
        let db = h.db().unwrap();
        assert_eq!(h.reopened(), before + 1);
        assert_eq!(db.len(), 8);
    }
}
