//! Rewriting the key-value files (sled's and the value log's) into fresh ones that hold only the
//! live pairs, so that what was deleted is gone from every byte of the store's folder (ERASE).
//! sled is log-structured: a deleted or overwritten value stays in its files until the segment
//! holding it is reused, and nothing forces that; the value log keeps dead records until its
//! segment is compacted. The same copy migrates a store whose values are all in sled (written
//! before the value log) to the value log.
//!
//! The swap, each step durable before the next:
//!
//! 1. the live pairs are copied into a new sled database and value log in `compact.tmp/`;
//! 2. `compact.ready` is written: the copy is complete;
//! 3. sled's files in the folder move to `compact.old/`, then `compact.moved` is written;
//! 4. the copy's files move into the folder;
//! 5. `compact.ready`, then `compact.moved`, `compact.old/` and `compact.tmp/` are removed.
//!
//! [`recover`], run by every open before sled's, finishes a swap that a crash interrupted after
//! step 2 and discards one interrupted before it. The key-value files are sled's (`conf`, `db`,
//! `blobs/`, `snap.*`) and the value log's (`values/`); nothing else in the folder is touched.

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use super::separated;
use super::sled_cache::open_sled;
use super::values::{self, ValueLog};
use crate::error::{Error, Result};

const TMP: &str = "compact.tmp";
const OLD: &str = "compact.old";
const READY: &str = "compact.ready";
const MOVED: &str = "compact.moved";

/// How much a copy writes between flushes.
const FLUSH_BYTES: usize = 32 << 20;

/// How long a dropped sled database may take to let go of its files.
const RELEASE_WAIT: Duration = Duration::from_secs(10);

fn io(what: &str, e: std::io::Error) -> Error {
    Error::Io(format!("rewriting the store's files: {what}: {e}"))
}

fn is_kv_file(name: &str) -> bool {
    matches!(name, "conf" | "db" | "blobs" | values::DIR) || name.starts_with("snap.")
}

fn sync_dir(dir: &Path) -> Result<()> {
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io("syncing the folder", e))
}

fn touch(path: &Path) -> Result<()> {
    let f = fs::File::create(path).map_err(|e| io("writing a marker", e))?;
    f.sync_all().map_err(|e| io("writing a marker", e))?;
    sync_dir(path.parent().expect("in the folder"))
}

fn remove(path: &Path) -> Result<()> {
    let r = if path.is_dir() {
        fs::remove_dir_all(path)
    } else {
        fs::remove_file(path)
    };
    match r {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io("removing", e)),
        _ => Ok(()),
    }
}

/// Step 1 and 2: writes `pairs` (every live pair, resolved) into a new sled database and value
/// log in `dir/compact.tmp` (with a cache of `cache_bytes`: sled's default is a GiB), flushes
/// and closes them, and marks the copy complete.
/// The copy's log starts at segment `first`: a purge starts it past the old log's segments, so
/// that a pointer of the new files can never name a record of the old ones (a reader that took the
/// old log just before the swap then misses, and reads again).
pub(super) fn copy(
    dir: &Path,
    pairs: impl Iterator<Item = Result<(Vec<u8>, Vec<u8>)>>,
    cache_bytes: u64,
    first: u32,
) -> Result<()> {
    let tmp = dir.join(TMP);
    remove(&tmp)?;
    fs::create_dir_all(&tmp).map_err(|e| io("making compact.tmp", e))?;
    ValueLog::create(&tmp)?;
    {
        let new = open_sled(&tmp, cache_bytes)?;
        let log = separated::open_log(&tmp, &new)?;
        separated::start_at(&new, &log, first)?;
        // sled keeps what it has not flushed in memory: each batch is flushed.
        separated::fill(&new, &log, pairs, FLUSH_BYTES)?;
    }
    wait_released(&tmp.join("db"))?;
    touch(&dir.join(READY))
}

/// Whether the store in `dir` was written before the value log: sled's files and no `values/`.
pub(super) fn needs_migration(dir: &Path) -> bool {
    dir.join("db").exists() && !dir.join(values::DIR).exists()
}

/// Moves every value of a store written before the value log into a new sled database and value
/// log, and swaps them in: the same steps as a purge, so that a crash at any point leaves the old
/// files or the new ones.
pub(super) fn migrate(dir: &Path, cache_bytes: u64) -> Result<()> {
    let scan = ReopeningScan::new(dir, cache_bytes, MIGRATE_REOPEN_BYTES);
    copy(dir, scan, cache_bytes, 0)?;
    wait_released(&dir.join("db"))?;
    swap(dir)
}

/// A migration's scan reopens the old database after this many bytes: sled keeps every node a
/// scan reads (`kv/handle.rs`), and the old database holds every value. Migrating a 9.6 GB store
/// in one scan peaked at 2 GB (docs/PERFORMANCE.md).
const MIGRATE_REOPEN_BYTES: u64 = 256 << 20;

/// Every pair of the sled database in a folder, in key order, read by a database closed and
/// opened again every [`MIGRATE_REOPEN_BYTES`], each time from the key after the last one read.
struct ReopeningScan {
    dir: std::path::PathBuf,
    cache_bytes: u64,
    open: Option<(sled::Db, sled::Iter)>,
    after: Option<Vec<u8>>,
    read: u64,
    /// [`MIGRATE_REOPEN_BYTES`] (tests use less).
    reopen_bytes: u64,
    /// How many times the database was opened.
    opened: usize,
}

impl ReopeningScan {
    fn new(dir: &Path, cache_bytes: u64, reopen_bytes: u64) -> Self {
        ReopeningScan {
            dir: dir.to_path_buf(),
            cache_bytes,
            open: None,
            after: None,
            read: 0,
            reopen_bytes,
            opened: 0,
        }
    }

    /// The open database's scan, opened (again) if needed.
    fn scan(&mut self) -> Result<&mut sled::Iter> {
        if self.read >= self.reopen_bytes {
            self.open = None;
            wait_released(&self.dir.join("db"))?;
            self.read = 0;
        }
        if self.open.is_none() {
            let db = open_sled(&self.dir, self.cache_bytes)?;
            let iter = match &self.after {
                Some(k) => db.range::<&[u8], _>((
                    std::ops::Bound::Excluded(&k[..]),
                    std::ops::Bound::Unbounded,
                )),
                None => db.iter(),
            };
            self.open = Some((db, iter));
            self.opened += 1;
        }
        Ok(&mut self.open.as_mut().expect("opened above").1)
    }
}

impl Iterator for ReopeningScan {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        let next = match self.scan() {
            Ok(scan) => scan.next()?,
            Err(e) => return Some(Err(e)),
        };
        if let Ok((k, _)) = &next {
            if separated::is_own(k) {
                return Some(Err(Error::Corrupt(format!(
                    "the store in {} keeps its values in a value log, and its `{}/` folder is missing",
                    self.dir.display(),
                    values::DIR
                ))));
            }
        }
        Some(next.map_err(Error::from).map(|(k, v)| {
            self.read += (k.len() + v.len()) as u64;
            self.after = Some(k.to_vec());
            (k.to_vec(), v.to_vec())
        }))
    }
}

/// Waits until no sled database holds the lock on the file `db` (sled lets go of it a little
/// after its last handle is dropped, from a thread of its own).
pub(super) fn wait_released(db: &Path) -> Result<()> {
    let deadline = Instant::now() + RELEASE_WAIT;
    let f = fs::File::open(db).map_err(|e| io("opening sled's file", e))?;
    loop {
        match f.try_lock() {
            Ok(()) => {
                f.unlock().map_err(|e| io("unlocking sled's file", e))?;
                return Ok(());
            }
            Err(fs::TryLockError::WouldBlock) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(fs::TryLockError::WouldBlock) => {
                return Err(Error::Io(
                    "rewriting the store's files: the old files are still in use after 10 s (a scan still running?)".into(),
                ))
            }
            Err(fs::TryLockError::Error(e)) => return Err(io("locking sled's file", e)),
        }
    }
}

/// Steps 3 to 5, with sled closed: the copy takes the place of sled's files.
pub(super) fn swap(dir: &Path) -> Result<()> {
    let old = dir.join(OLD);
    let tmp = dir.join(TMP);
    if !dir.join(MOVED).exists() {
        fs::create_dir_all(&old).map_err(|e| io("making compact.old", e))?;
        for entry in fs::read_dir(dir).map_err(|e| io("listing the folder", e))? {
            let entry = entry.map_err(|e| io("listing the folder", e))?;
            let name = entry.file_name();
            if is_kv_file(&name.to_string_lossy()) {
                remove(&old.join(&name))?;
                fs::rename(entry.path(), old.join(&name)).map_err(|e| io("moving", e))?;
            }
        }
        sync_dir(&old)?;
        touch(&dir.join(MOVED))?;
    }
    for entry in fs::read_dir(&tmp).map_err(|e| io("listing compact.tmp", e))? {
        let entry = entry.map_err(|e| io("listing compact.tmp", e))?;
        fs::rename(entry.path(), dir.join(entry.file_name())).map_err(|e| io("moving", e))?;
    }
    sync_dir(dir)?;
    remove(&dir.join(READY))?;
    sync_dir(dir)?;
    remove(&dir.join(MOVED))?;
    remove(&old)?;
    remove(&tmp)?;
    sync_dir(dir)
}

/// Finishes a swap a crash interrupted once the copy was complete, or discards the copy of one
/// interrupted before. Run before sled opens the folder.
pub(super) fn recover(dir: &Path) -> Result<()> {
    if dir.join(READY).exists() {
        return swap(dir);
    }
    for leftover in [MOVED, OLD, TMP] {
        remove(&dir.join(leftover))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

    fn write(dir: &Path, pairs: &Pairs, deleted: &[u8]) {
        let db = sled::Config::new().path(dir).open().unwrap();
        for (k, v) in pairs {
            db.insert(k, v.clone()).unwrap();
        }
        db.insert(deleted, b"gone".to_vec()).unwrap();
        db.remove(deleted).unwrap();
        db.flush().unwrap();
        drop(db);
        wait_released(&dir.join("db")).unwrap();
    }

    /// The pairs of the store in `dir`, values resolved (a migrated or purged store).
    fn read(dir: &Path) -> Pairs {
        let db = sled::Config::new().path(dir).open().unwrap();
        let log = separated::open_log(dir, &db).unwrap();
        let out = db
            .iter()
            .map(|p| p.unwrap())
            .filter(|(k, _)| !separated::is_own(k))
            .map(|(k, held)| {
                let v = separated::value(&log, &k, &held).unwrap().unwrap();
                (k.to_vec(), v)
            })
            .collect();
        drop(db);
        wait_released(&dir.join("db")).unwrap();
        out
    }

    fn leftovers(dir: &Path) -> Vec<String> {
        fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("compact."))
            .collect()
    }

    fn pairs() -> Pairs {
        // Values on both sides of the size past which they go to the log.
        (0..100u32)
            .map(|i| {
                let key = [&b"k"[..], &i.to_be_bytes()].concat();
                (key, vec![i as u8; 50 + 3 * i as usize])
            })
            .collect()
    }

    #[test]
    fn a_copy_cut_short_before_it_was_complete_is_discarded() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), &pairs(), b"x");
        fs::create_dir_all(dir.path().join(TMP)).unwrap();
        fs::write(dir.path().join(TMP).join("db"), b"half a copy").unwrap();
        recover(dir.path()).unwrap();
        assert_eq!(leftovers(dir.path()), Vec::<String>::new());
        // Still the old files, with every value in sled.
        assert!(needs_migration(dir.path()));
        migrate(dir.path(), 1 << 20).unwrap();
        assert!(!needs_migration(dir.path()));
        assert_eq!(read(dir.path()), pairs());
    }

    #[test]
    fn a_scan_that_reopens_the_database_reads_every_pair_once_in_order() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), &pairs(), b"x");
        let mut scan = ReopeningScan::new(dir.path(), 1 << 20, 1024);
        let read: Pairs = scan.by_ref().map(|p| p.unwrap()).collect();
        assert_eq!(read, pairs());
        // 100 pairs of 54 to 351 bytes: a reopen every few of them.
        assert!(scan.opened > 10, "opened {} times", scan.opened);
    }

    /// Where a crash stops a swap whose copy is complete.
    #[derive(Clone, Copy, Debug)]
    enum Cut {
        CopyDone,
        OldMoved,
        NewHalfMoved,
    }

    #[test]
    fn a_swap_cut_short_after_the_copy_was_complete_is_finished_by_recover() {
        for cut in [Cut::CopyDone, Cut::OldMoved, Cut::NewHalfMoved] {
            let dir = tempfile::tempdir().unwrap();
            let d = dir.path();
            let mut with_skipped = pairs();
            with_skipped.push((b"skip".to_vec(), b"purge".to_vec()));
            write(d, &with_skipped, b"x");
            {
                let db = sled::Config::new().path(d).open().unwrap();
                let pairs = db
                    .iter()
                    .map(|p| p.unwrap())
                    .filter(|(k, _)| &k[..] != b"skip")
                    .map(|(k, v)| Ok((k.to_vec(), v.to_vec())));
                copy(d, pairs, 1 << 20, 0).unwrap();
            }
            wait_released(&d.join("db")).unwrap();
            if matches!(cut, Cut::OldMoved | Cut::NewHalfMoved) {
                fs::create_dir_all(d.join(OLD)).unwrap();
                for e in fs::read_dir(d).unwrap().flatten() {
                    let name = e.file_name();
                    if is_kv_file(&name.to_string_lossy()) {
                        fs::rename(e.path(), d.join(OLD).join(&name)).unwrap();
                    }
                }
                touch(&d.join(MOVED)).unwrap();
            }
            if matches!(cut, Cut::NewHalfMoved) {
                fs::rename(d.join(TMP).join("conf"), d.join("conf")).unwrap();
            }
            recover(d).unwrap();
            assert_eq!(leftovers(d), Vec::<String>::new(), "{cut:?}");
            assert_eq!(read(d), pairs(), "{cut:?}");
        }
    }
}
