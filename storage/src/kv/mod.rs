//! The key-value layer: a narrow trait, and its sled implementation.
//!
//! The engine needs three things of it: read a key, scan a prefix in key order, and write a batch
//! atomically and durably (when `write` returns Ok, the batch survives a crash; when it fails,
//! none or all of it may be there, and the store stops writing until reopened).

mod decoded;
mod handle;
mod manifest;
mod mem;
mod rewrite;
mod separated;
mod sled_cache;
mod sled_reads;
mod values;

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use std::any::{Any, TypeId};

use decoded::DecodedCache;
pub use decoded::{DecodedValue, Decoder, KeepAt, Keeping, Scanned};
use handle::SledHandle;
pub use manifest::ManifestCheck;
use manifest::{Loaded, Manifest};
pub use mem::MemKv;
use separated::Dead;
use sled_cache::open_sled;
use values::{Part, ValueLog};

use crate::error::{corrupt, Error, Result};
use crate::format::keys::{self, versioned, FOLLOWED};
use crate::format::value_log::{stored, Stored};

/// An atomic group of writes, applied in the order they were added (a put after a delete of the
/// same key leaves the put).
#[derive(Default, Debug)]
pub struct WriteBatch {
    /// `(key, Some(value))` puts, `(key, None)` deletes.
    pub(crate) ops: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

impl WriteBatch {
    /// Adds a put.
    pub fn put(&mut self, k: Vec<u8>, v: Vec<u8>) {
        self.ops.push((k, Some(v)));
    }
    /// Adds a delete.
    pub fn delete(&mut self, k: Vec<u8>) {
        self.ops.push((k, None));
    }
    /// The operations, in order: `(key, Some(value))` puts and `(key, None)` deletes.
    pub fn ops(&self) -> &[(Vec<u8>, Option<Vec<u8>>)] {
        &self.ops
    }
    /// Number of operations.
    pub fn len(&self) -> usize {
        self.ops.len()
    }
    /// Whether there is nothing to write.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Bytes of keys and values.
    pub fn bytes(&self) -> usize {
        self.ops
            .iter()
            .map(|(k, v)| k.len() + v.as_ref().map_or(0, Vec::len))
            .sum()
    }
}

/// A key-value pair read back from the store.
pub type KvPair = (Vec<u8>, Vec<u8>);

/// A value's leading part ([`KvStore::get_many_leading`]), and the length of the whole value.
pub type Leading = (Vec<u8>, u64);

/// What the engine needs of a key-value store.
pub trait KvStore: Send + Sync {
    /// Reads one key.
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>>;
    /// Reads `keys`, which are in ascending order, as [`KvStore::get`] of each would (a store
    /// that can should find them in one pass: a key's pages lie side by side).
    fn get_many(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>> {
        keys.iter().map(|k| self.get(k)).collect()
    }
    /// [`KvStore::get_many`], only the first `leading[i]` bytes of the value of `keys[i]` (all of
    /// it if shorter; `leading` holds a length per key, and a key it has none for is read whole),
    /// each with the length of the whole value: for values whose leading part carries a checksum of its own (a frozen page's row
    /// part), which a layer may then read without the rest, and without checking the checksum
    /// its own records carry over the whole value. The default reads whole values.
    fn get_many_leading(&self, keys: &[Vec<u8>], leading: &[u32]) -> Result<Vec<Option<Leading>>> {
        let values = self.get_many(keys)?;
        Ok((values.into_iter().enumerate())
            .map(|(i, v)| {
                v.map(|mut v| {
                    let len = v.len() as u64;
                    if let Some(&n) = leading.get(i) {
                        v.truncate(n as usize);
                    }
                    (v, len)
                })
            })
            .collect())
    }
    /// `key`'s value as `decode` makes it (a value of type `kind`, returned with the bytes it
    /// holds in memory), or the one an earlier call made of the same bytes, if the layer kept
    /// it. A layer that keeps them hands one out only for exactly the bytes `key` holds now
    /// ([`SledKv::with_read_cache`]). The default decodes at every call.
    fn get_decoded(
        &self,
        key: &[u8],
        kind: TypeId,
        decode: Decoder<'_>,
    ) -> Result<Option<DecodedValue>> {
        let _ = kind;
        self.get(key)?.map(|v| Ok(decode(&v)?.0)).transpose()
    }
    /// [`KvStore::scan_prefix_from`], each value as a layer that keeps decoded values
    /// ([`KvStore::get_decoded`]) kept it, decoded as `kind`, or else its bytes, with where to
    /// keep what the caller decodes of them ([`KvStore::keep_decoded`]): the caller decodes on
    /// its own thread, if `keeping` says the scan keeps what it decodes. The default reads every
    /// value and keeps nothing.
    fn scan_prefix_from_kept<'a>(
        &'a self,
        prefix: &[u8],
        from: &[u8],
        kind: TypeId,
        keeping: Keeping,
    ) -> Box<dyn Iterator<Item = Result<(Vec<u8>, Scanned)>> + 'a> {
        let _ = (kind, keeping);
        Box::new(
            self.scan_prefix_from(prefix, from)
                .map(|r| r.map(|(k, v)| (k, Scanned::Read(v, None)))),
        )
    }
    /// Keeps `value`, decoded as `kind` from a value [`KvStore::scan_prefix_from_kept`] read at
    /// `at`, weighing `bytes`. The default keeps nothing.
    fn keep_decoded(&self, at: KeepAt, kind: TypeId, value: DecodedValue, bytes: u64) {
        let _ = (at, kind, value, bytes);
    }
    /// All pairs whose key starts with `prefix`, in key order.
    fn scan_prefix<'a>(&'a self, prefix: &[u8]) -> Box<dyn Iterator<Item = Result<KvPair>> + 'a>;
    /// The pairs whose key starts with `prefix` and is `from` or greater, in key order. (The
    /// default filters [`KvStore::scan_prefix`]; a store that can seek should.)
    fn scan_prefix_from<'a>(
        &'a self,
        prefix: &[u8],
        from: &[u8],
    ) -> Box<dyn Iterator<Item = Result<KvPair>> + 'a> {
        let from = from.to_vec();
        Box::new(
            self.scan_prefix(prefix)
                .filter(move |r| r.as_ref().map_or(true, |(k, _)| *k >= from)),
        )
    }
    /// The keys that start with `prefix`, in key order, without their values. (The default
    /// drops the values of [`KvStore::scan_prefix`]; a store that can skip reading them should.)
    fn scan_prefix_keys<'a>(
        &'a self,
        prefix: &[u8],
    ) -> Box<dyn Iterator<Item = Result<Vec<u8>>> + 'a> {
        Box::new(self.scan_prefix(prefix).map(|r| r.map(|(k, _)| k)))
    }
    /// Writes `batch` atomically and durably.
    fn write(&self, batch: WriteBatch) -> Result<()>;
    /// Writes `batch` and the puts `more` yields, atomically and durably, as one write; a store
    /// that can should not hold `more`'s values all at once (a checkpoint's key heads: 130 MB at
    /// 10M events, docs/PERFORMANCE.md). Their keys must be in no op of `batch`. The default
    /// adds them to the batch.
    fn write_streamed(
        &self,
        mut batch: WriteBatch,
        more: &mut dyn Iterator<Item = Result<KvPair>>,
    ) -> Result<()> {
        for pair in more {
            let (k, v) = pair?;
            batch.put(k, v);
        }
        self.write(batch)
    }
    /// Reclaims now the room writes left dead, if this handle wrote anything: what the next
    /// write would reclaim before its own, and what no write would (a store a writer closed in
    /// order holds no file a quarter dead). The default, for stores that keep no dead bytes,
    /// does nothing.
    fn reclaim(&self) -> Result<()> {
        Ok(())
    }
    /// Rewrites the store's files so that no byte of a deleted or overwritten value remains in
    /// them, without the purge record ([`keys::PURGE_KEY`]), which ERASE sets. The default, for
    /// stores that keep no deleted bytes, removes the record only.
    fn purge(&self) -> Result<()> {
        let mut b = WriteBatch::default();
        b.delete(keys::PURGE_KEY.to_vec());
        self.write(b)
    }
}

/// `key`'s value decoded by `decode` (which returns it with the bytes it holds in memory),
/// through [`KvStore::get_decoded`]: kept by a layer that keeps decoded values, and shared.
pub(crate) fn get_decoded<T: Any + Send + Sync>(
    kv: &dyn KvStore,
    key: &[u8],
    decode: impl Fn(&[u8]) -> Result<(T, u64)>,
) -> Result<Option<Arc<T>>> {
    let erased = |bytes: &[u8]| -> Result<(DecodedValue, u64)> {
        let (value, held) = decode(bytes)?;
        Ok((Arc::new(value), held))
    };
    kv.get_decoded(key, TypeId::of::<T>(), &erased)?
        .map(downcast)
        .transpose()
}

/// A decoded value as the type it was kept as (`kind`'s type, which names it).
pub(crate) fn downcast<T: Any + Send + Sync>(v: DecodedValue) -> Result<Arc<T>> {
    v.downcast::<T>()
        .map_err(|_| corrupt("a decoded value kept as another type"))
}

/// sled 0.34 behind [`KvStore`], with the values of 128 bytes or more in a value log beside it
/// (`values/`, FORMAT.md §5.3): one tree of keys and small values, a log append and sync, then one
/// `apply_batch` and one `flush` per write.
///
/// Beside sled's files it keeps a small manifest (`asof.manifest`): for each table, the highest
/// commit version written and flushed so far. sled recovers a damaged log to its last consistent
/// state, as after a crash, and would drop acknowledged commits without a word; on open, every
/// version the manifest names must be there, or the store is reported as corrupt. The manifest is
/// rewritten (write to a temporary file, rename) after each flush, so it never claims more than
/// sled has; a crash between the two leaves it behind, which is harmless.
///
/// It also holds a lock of its own on `asof.lock` for as long as it is open, so that no other
/// process opens the store while [`KvStore::purge`] swaps sled's files (sled's lock is released
/// for that moment).
pub struct SledKv {
    /// The open database.
    db: SledHandle,
    /// The value log, replaced when a purge swaps the files.
    values: RwLock<Arc<ValueLog>>,
    /// Segments of the log that the last write made records of dead: the next write compacts
    /// those half dead before its own batch, so that a failed compaction fails a write that
    /// applied nothing.
    dead: std::sync::Mutex<Vec<u32>>,
    manifest: Manifest,
    dir: PathBuf,
    cache_bytes: u64,
    /// Values of the log decoded by the layers above ([`KvStore::get_decoded`]).
    decoded: DecodedCache,
    _lock: std::fs::File,
}

/// The most segments of the value log one [`KvStore::reclaim`] compacts (each up to 32 MiB).
const RECLAIM_SEGMENTS: usize = 4;

/// asof's own lock file in a store's folder.
const LOCK_FILE: &str = "asof.lock";

impl SledKv {
    /// Opens (or creates) the sled database in `path` with `cache_bytes` of page cache, waiting up
    /// to [`LOCK_WAIT`] for another holder and verifying the manifest.
    pub fn open(path: &Path, cache_bytes: u64) -> Result<SledKv> {
        Self::open_with(path, cache_bytes, LOCK_WAIT, ManifestCheck::Verify)
    }

    /// Opens (or creates) the sled database in `path` with `cache_bytes` of page cache.
    ///
    /// Only one process may have a store open. A lock held by another is retried for up to
    /// `lock_wait` (sled also releases its lock only a few milliseconds after a drop) before it
    /// is reported as [`Error::InUse`], naming the holder's process when its pid file says.
    pub fn open_with(
        path: &Path,
        cache_bytes: u64,
        lock_wait: std::time::Duration,
        manifest: ManifestCheck,
    ) -> Result<SledKv> {
        let deadline = std::time::Instant::now() + lock_wait;
        let in_use = || Error::InUse {
            path: path.display().to_string(),
            holder: holder(path),
            waited_ms: lock_wait.as_millis() as u64,
        };
        std::fs::create_dir_all(path).map_err(|e| Error::Io(format!("{}: {e}", path.display())))?;
        let lock = loop {
            let f = std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(path.join(LOCK_FILE))
                .map_err(|e| Error::Io(format!("{}: {e}", path.join(LOCK_FILE).display())))?;
            match f.try_lock() {
                Ok(()) => break f,
                Err(std::fs::TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                Err(std::fs::TryLockError::WouldBlock) => return Err(in_use()),
                Err(std::fs::TryLockError::Error(e)) => {
                    return Err(Error::Io(format!(
                        "{}: {e}",
                        path.join(LOCK_FILE).display()
                    )))
                }
            }
        };
        // A purge interrupted by a crash is finished (or its copy discarded) before sled opens;
        // a store written before the value log moves its values there, once.
        rewrite::recover(path)?;
        if rewrite::needs_migration(path) {
            rewrite::migrate(path, cache_bytes)?;
        } else if !path.join(values::DIR).exists() {
            ValueLog::create(path)?;
        }
        loop {
            match open_sled(path, cache_bytes) {
                Ok(db) => {
                    write_pid_file(path);
                    let log = separated::open_log(path, &db)?;
                    // The first write looks at every segment: one left half dead by a write
                    // before a crash is compacted then.
                    let segments = separated::segments(&db)?;
                    let kv = |manifest| SledKv {
                        db: SledHandle::new(db, path, cache_bytes),
                        values: RwLock::new(Arc::new(log)),
                        dead: std::sync::Mutex::new(segments),
                        manifest,
                        dir: path.to_path_buf(),
                        cache_bytes,
                        decoded: DecodedCache::new(0),
                        _lock: lock,
                    };
                    let kv = Self::with_manifest(kv, path, manifest)?;
                    // Only now that the manifest says sled lost nothing: a log cut back to
                    // sled's end could otherwise lose what sled lost track of.
                    kv.values()?.tidy()?;
                    return Ok(kv);
                }
                Err(e) => {
                    let msg = e.to_string();
                    let locked = msg.contains("could not acquire lock");
                    if locked && std::time::Instant::now() < deadline {
                        std::thread::sleep(std::time::Duration::from_millis(10));
                        continue;
                    }
                    return Err(if locked {
                        in_use()
                    } else if matches!(e, sled::Error::Corruption { .. }) {
                        Error::Corrupt(format!(
                            "the key-value files in {} are damaged and cannot be read",
                            path.display()
                        ))
                    } else {
                        Error::Io(msg)
                    });
                }
            }
        }
    }

    /// Keeps up to `bytes` of the values the layers above decode from the value log
    /// ([`KvStore::get_decoded`]; none by default).
    pub fn with_read_cache(mut self, bytes: u64) -> SledKv {
        self.decoded = DecodedCache::new(bytes);
        self
    }

    fn with_manifest(
        kv: impl FnOnce(Manifest) -> SledKv,
        path: &Path,
        check: ManifestCheck,
    ) -> Result<SledKv> {
        let loaded = match (Manifest::load(path), check) {
            (Ok(l), _) => l,
            (Err(_), ManifestCheck::Rebuild) => Loaded::Lost(Manifest::empty(path), "damaged"),
            (Err(e), ManifestCheck::Verify) => return Err(e),
        };
        let kv = match (loaded, check) {
            (Loaded::Read(manifest), ManifestCheck::Verify) => kv(manifest),
            (Loaded::Read(manifest) | Loaded::Lost(manifest, _), ManifestCheck::Rebuild) => {
                let kv = kv(manifest);
                kv.rebuild_manifest()?;
                kv
            }
            (Loaded::Lost(manifest, what), ManifestCheck::Verify) => {
                let kv = kv(manifest);
                if kv.has_commits()? {
                    return Err(Error::ManifestLost {
                        path: kv.manifest.path.display().to_string(),
                        problem: what.to_string(),
                    });
                }
                // A new store (or one that never committed): start its manifest now, before any
                // commit, so that from here on a missing one means a loss.
                kv.manifest.save(&Default::default())?;
                kv
            }
        };
        kv.check_manifest()?;
        Ok(kv)
    }

    /// The open database, or an error while a purge swaps its files (or after one failed).
    fn db(&self) -> Result<Arc<sled::Db>> {
        self.db.db()
    }

    /// The value log. Taken before the database: a purge that swaps both in between makes the
    /// pointer read from the new database miss in the old log, and the read is tried again.
    fn values(&self) -> Result<Arc<ValueLog>> {
        Ok(self
            .values
            .read()
            .map_err(|_| Error::Poisoned("value log".into()))?
            .clone())
    }

    /// A pair read by a scan, its value read from the log when it is there:
    /// `None` for the key-value layer's own records, and for a key deleted since the scan saw it.
    fn pair(
        &self,
        log: &ValueLog,
        r: sled::Result<(sled::IVec, sled::IVec)>,
    ) -> Option<Result<KvPair>> {
        let (k, held) = match r {
            Ok(pair) => pair,
            Err(e) => return Some(Err(e.into())),
        };
        if separated::is_own(&k) {
            return None;
        }
        self.resolve(log, &k, &held)
            .map(|v| v.map(|v| (k.to_vec(), v)))
            .transpose()
    }

    /// A pair read by [`KvStore::scan_prefix_from_kept`]: its value as kept, decoded as `kind`,
    /// or its bytes, read from the log when they are there (and then where to keep what is
    /// decoded of them). `None` as for [`SledKv::pair`].
    fn kept_pair(
        &self,
        log: &ValueLog,
        r: sled::Result<(sled::IVec, sled::IVec)>,
        kind: TypeId,
        keeping: Keeping,
    ) -> Result<Option<(Vec<u8>, Scanned)>> {
        let (k, held) = r?;
        if separated::is_own(&k) {
            return Ok(None);
        }
        let Stored::Logged(at) = stored(&held)? else {
            let v = self.resolve(log, &k, &held)?;
            return Ok(v.map(|v| (k.to_vec(), Scanned::Read(v, None))));
        };
        if let Some(v) = self.decoded.get(&at, kind) {
            return Ok(Some((k.to_vec(), Scanned::Kept(v))));
        }
        let read = match separated::value(log, &k, &held)? {
            // The bytes of the record at `at`, and so kept by it.
            Some(v) => {
                let keep_at = match keeping {
                    Keeping::Admitted => self.decoded.keep_at(&at, kind),
                    Keeping::Nothing => None,
                };
                Some(Scanned::Read(v, keep_at))
            }
            // Moved since sled was read: read where it is now, and not kept.
            None => self
                .resolve(log, &k, &held)?
                .map(|v| Scanned::Read(v, None)),
        };
        Ok(read.map(|v| (k.to_vec(), v)))
    }

    /// sled's pairs whose key starts with `prefix` and is `from` or greater, in key order, each
    /// made an item by `item` with the value log (`None`: left out).
    fn range_from<'a, T: 'a>(
        &'a self,
        prefix: &[u8],
        from: &[u8],
        item: impl Fn(&ValueLog, sled::Result<(sled::IVec, sled::IVec)>) -> Option<Result<T>> + 'a,
    ) -> Box<dyn Iterator<Item = Result<T>> + 'a> {
        let prefix = prefix.to_vec();
        let from = from.max(&prefix[..]).to_vec();
        let (log, db) = match self.values().and_then(|log| Ok((log, self.db()?))) {
            Ok(files) => files,
            Err(e) => return Box::new(std::iter::once(Err(e))),
        };
        let pairs = db.range(from..);
        Box::new(
            pairs
                .take_while(move |r| r.as_ref().map_or(true, |(k, _)| k.starts_with(&prefix)))
                .filter_map(move |r| {
                    // The iterator holds the handle: a purge waits for it to let go of sled's
                    // files.
                    let _held = &db;
                    item(&log, r)
                }),
        )
    }

    /// Whether the tree holds any commit record the manifest follows.
    fn has_commits(&self) -> Result<bool> {
        for (tag, _) in FOLLOWED {
            if self.db()?.scan_prefix([tag]).next().transpose()?.is_some() {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Rewrites the manifest from the commits the tree holds.
    fn rebuild_manifest(&self) -> Result<()> {
        let mut marks = std::collections::BTreeMap::new();
        for (tag, _) in FOLLOWED {
            for kv in self.db()?.scan_prefix([tag]) {
                let (k, _) = kv?;
                if let Some((tag, id, v)) = versioned(&k) {
                    let m = marks.entry((tag, id)).or_insert(v);
                    *m = (*m).max(v);
                }
            }
        }
        self.manifest.save(&marks)?;
        *self
            .manifest
            .marks
            .lock()
            .map_err(|_| Error::Poisoned("manifest".into()))? = marks;
        Ok(())
    }

    /// Every version the manifest names must be in the tree.
    fn check_manifest(&self) -> Result<()> {
        let marks = self
            .manifest
            .marks
            .lock()
            .map_err(|_| Error::Poisoned("manifest".into()))?;
        for (&(tag, id), &v) in marks.iter() {
            let mut k = vec![tag];
            k.extend_from_slice(&id.to_be_bytes());
            k.extend_from_slice(&v.to_be_bytes());
            if self.db()?.get(&k)?.is_none() {
                let what = if tag == keys::COMMIT {
                    "table"
                } else {
                    "source table"
                };
                return Err(Error::Corrupt(format!(
                    "commit {v} of {what} #{id} was acknowledged but is missing: the store's files were truncated, overwritten or replaced by an older copy"
                )));
            }
        }
        Ok(())
    }
}

/// The file beside sled's in which the process that has the store open writes its pid, so that
/// another one can say who holds the lock.
const PID_FILE: &str = "asof.pid";

fn write_pid_file(dir: &Path) {
    // Best effort: it only serves the message of a process that finds the store in use.
    let _ = std::fs::write(dir.join(PID_FILE), format!("{}\n", std::process::id()));
}

/// The process that holds the store, as the OS tells: `process 1234 (asof sql ...)`.
fn holder(dir: &Path) -> Option<String> {
    let pid: u32 = std::fs::read_to_string(dir.join(PID_FILE))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok();
    Some(match cmdline {
        Some(c) if !c.is_empty() => {
            let words: Vec<String> = c
                .split(|b| *b == 0)
                .filter(|w| !w.is_empty())
                .map(|w| String::from_utf8_lossy(w).into_owned())
                .collect();
            let line: String = words.join(" ").chars().take(120).collect();
            format!("process {pid} ({line})")
        }
        _ => format!("process {pid}"),
    })
}

/// How long [`SledKv::open`] waits for another holder of the store's lock to let go.
pub const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

impl KvStore for SledKv {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if separated::is_own(key) {
            return Ok(None);
        }
        let log = self.values()?;
        let Some(held) = self.db()?.get(key)? else {
            return Ok(None);
        };
        self.resolve(&log, key, &held)
    }

    /// One walk of sled's range from the first key to the last instead of a descent of its tree
    /// for each (a full scan read each of a key's 42 pages at 10M events with a get of its own:
    /// 12% of a `count(*)`); the pairs between them that are not asked for are passed over
    /// unread.
    fn get_many(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>> {
        let values = self.get_many_parts(keys, |_| Part::Whole)?;
        Ok(values.into_iter().map(|v| v.map(|(v, _)| v)).collect())
    }

    fn get_many_leading(&self, keys: &[Vec<u8>], leading: &[u32]) -> Result<Vec<Option<Leading>>> {
        debug_assert_eq!(keys.len(), leading.len(), "a length per key");
        self.get_many_parts(keys, |i| {
            leading.get(i).map_or(Part::Whole, |&n| Part::Leading(n))
        })
    }

    fn get_decoded(
        &self,
        key: &[u8],
        kind: TypeId,
        decode: Decoder<'_>,
    ) -> Result<Option<DecodedValue>> {
        if separated::is_own(key) {
            return Ok(None);
        }
        let log = self.values()?;
        let Some(held) = self.db()?.get(key)? else {
            return Ok(None);
        };
        let decoded = |v: Option<Vec<u8>>| v.map(|v| Ok(decode(&v)?.0)).transpose();
        let Stored::Logged(at) = stored(&held)? else {
            return decoded(self.resolve(&log, key, &held)?);
        };
        if let Some(v) = self.decoded.get(&at, kind) {
            return Ok(Some(v));
        }
        match separated::value(&log, key, &held)? {
            // The bytes of the record at `at`, and so kept by it.
            Some(bytes) => {
                let (value, weight) = decode(&bytes)?;
                self.decoded.put(&at, kind, value.clone(), weight);
                Ok(Some(value))
            }
            // Moved since sled was read: read where it is now, and not kept.
            None => decoded(self.resolve(&log, key, &held)?),
        }
    }

    fn scan_prefix<'a>(&'a self, prefix: &[u8]) -> Box<dyn Iterator<Item = Result<KvPair>> + 'a> {
        let (log, db) = match self.values().and_then(|log| Ok((log, self.db()?))) {
            Ok(files) => files,
            Err(e) => return Box::new(std::iter::once(Err(e))),
        };
        let pairs = db.scan_prefix(prefix);
        // The iterator holds the handle: a purge waits for it to let go of sled's files.
        Box::new(pairs.filter_map(move |r| {
            let _held = &db;
            self.pair(&log, r)
        }))
    }

    fn scan_prefix_keys<'a>(
        &'a self,
        prefix: &[u8],
    ) -> Box<dyn Iterator<Item = Result<Vec<u8>>> + 'a> {
        let db = match self.db() {
            Ok(db) => db,
            Err(e) => return Box::new(std::iter::once(Err(e))),
        };
        let keys = db.scan_prefix(prefix).keys();
        Box::new(keys.filter_map(move |r| {
            let _held = &db;
            let k = match r {
                Ok(k) if separated::is_own(&k) => return None,
                Ok(k) => k.to_vec(),
                Err(e) => return Some(Err(e.into())),
            };
            Some(Ok(k))
        }))
    }

    fn scan_prefix_from<'a>(
        &'a self,
        prefix: &[u8],
        from: &[u8],
    ) -> Box<dyn Iterator<Item = Result<KvPair>> + 'a> {
        self.range_from(prefix, from, move |log, r| self.pair(log, r))
    }

    fn scan_prefix_from_kept<'a>(
        &'a self,
        prefix: &[u8],
        from: &[u8],
        kind: TypeId,
        keeping: Keeping,
    ) -> Box<dyn Iterator<Item = Result<(Vec<u8>, Scanned)>> + 'a> {
        self.range_from(prefix, from, move |log, r| {
            self.kept_pair(log, r, kind, keeping).transpose()
        })
    }

    fn keep_decoded(&self, at: KeepAt, kind: TypeId, value: DecodedValue, bytes: u64) {
        self.decoded.keep(at, kind, value, bytes);
    }

    fn write(&self, batch: WriteBatch) -> Result<()> {
        self.write_streamed(batch, &mut std::iter::empty())
    }

    fn write_streamed(
        &self,
        batch: WriteBatch,
        more: &mut dyn Iterator<Item = Result<KvPair>>,
    ) -> Result<()> {
        // The streamed puts are plain values: none is the layer's own, or a record the manifest
        // follows (those come in `batch`, whose ops are looked at below).
        let mut streamed = 0usize;
        let mut more = more.map(|pair| {
            let (k, v) = pair?;
            let followed = |t: &u8| FOLLOWED.iter().any(|(c, r)| c == t || r == t);
            if separated::is_own(&k) || k.first().is_some_and(followed) {
                return Err(Error::Io(format!(
                    "key {} cannot be written streamed",
                    String::from_utf8_lossy(&k)
                )));
            }
            streamed += 1;
            Ok((k, v))
        });
        if batch.ops.iter().any(|(k, _)| separated::is_own(k)) {
            return Err(Error::Io(
                "a key starting with byte 0 is the key-value layer's own".into(),
            ));
        }
        let mut marks = self
            .manifest
            .marks
            .lock()
            .map_err(|_| Error::Poisoned("manifest".into()))?;
        // A dropped table leaves the manifest before its data leaves the tree.
        let before = marks.len();
        for (k, v) in &batch.ops {
            if let (None, [tag, id @ ..]) = (v, k.as_slice()) {
                if let (Some((followed, _)), Ok(id)) = (
                    FOLLOWED.iter().find(|(_, record)| record == tag),
                    <[u8; 4]>::try_from(id),
                ) {
                    marks.remove(&(*followed, u32::from_be_bytes(id)));
                }
            }
        }
        if marks.len() != before {
            self.manifest.save(&marks)?;
        }
        let mut grown = marks.clone();
        let mut grew = false;
        for (k, v) in &batch.ops {
            if let (Some(_), Some((tag, id, version))) = (v, versioned(k)) {
                if FOLLOWED.iter().any(|(c, _)| *c == tag) {
                    let m = grown.entry((tag, id)).or_insert(0);
                    if version > *m || (version == 0 && *m == 0) {
                        *m = version;
                        grew = true;
                    }
                }
            }
        }
        let log = self.values()?;
        let db = self.db()?;
        let mut dead = self
            .dead
            .lock()
            .map_err(|_| Error::Poisoned("value log".into()))?;
        // Read before the compaction, whose moves may fill the current segment too.
        let current = log.current()?;
        separated::compact_if_dead(&db, &log, &std::mem::take(&mut *dead), Dead::Half)?;
        let listed = batch.ops.len();
        let applied = separated::apply_streamed(&db, &log, &mut more, batch.ops, &[]);
        drop(more);
        self.db.wrote(listed + streamed);
        *dead = applied?;
        if log.current()? != current {
            // The segment this write left behind, which later writes may kill while it was
            // current, is looked at by the next one.
            dead.push(current);
        }
        if grew {
            self.manifest.save(&grown)?;
            *marks = grown;
        }
        Ok(())
    }

    fn reclaim(&self) -> Result<()> {
        // A process that only read leaves the files as it found them.
        if !self.db.has_written() {
            return Ok(());
        }
        // Writes wait, as for a write's own compaction, with the locks taken in a write's order:
        // the manifest's, the log and the tree (let go at once), then the dead list.
        let _marks =
            (self.manifest.marks.lock()).map_err(|_| Error::Poisoned("manifest".into()))?;
        let (log, db) = (self.values()?, self.db()?);
        let _dead = (self.dead.lock()).map_err(|_| Error::Poisoned("value log".into()))?;
        // Every segment, not only those the last write killed: a segment a write left under half
        // dead stays so until a later write kills more of it. The deadest first, a few per
        // close, so that a small write's close never rewrites a whole store. The dead list
        // stays for the next write (a segment compacted here has no counts left, and is passed
        // over): a compaction that fails here is tried again then.
        let current = log.current()?;
        let mut worst = separated::dead_fractions(&db)?;
        // The segment appends go to is never compacted: not a candidate.
        worst.retain(|s| s.0 != current);
        worst.sort_by(|a, b| b.1.total_cmp(&a.1));
        let worst: Vec<u32> = worst.iter().take(RECLAIM_SEGMENTS).map(|s| s.0).collect();
        separated::compact_if_dead(&db, &log, &worst, Dead::Quarter)
    }

    fn purge(&self) -> Result<()> {
        // Held throughout: readers wait for the new files rather than fail.
        let mut g = self.db.lock()?;
        let db = g.take().ok_or_else(|| {
            Error::Poisoned("an earlier rewrite of the store's files did not finish".into())
        })?;
        let log = self.values()?;
        let pairs = db.iter().filter_map(|r| match r {
            Ok((k, _)) if separated::is_own(&k) || &k[..] == keys::PURGE_KEY => None,
            Ok((k, held)) => separated::value(&log, &k, &held)
                .and_then(|v| {
                    v.map(|v| (k.to_vec(), v)).ok_or_else(|| {
                        Error::Corrupt(format!(
                            "the value of key {} is not in the value log where the store's records say",
                            String::from_utf8_lossy(&k)
                        ))
                    })
                })
                .into(),
            Err(e) => Some(Err(e.into())),
        });
        let copied = db
            .flush()
            .map_err(Error::from)
            .and_then(|_| log.current())
            .and_then(|current| rewrite::copy(&self.dir, pairs, self.cache_bytes, current + 1));
        if let Err(e) = copied {
            // The old files are whole and still in use; the next open discards the copy.
            *g = Some(db);
            return Err(e);
        }
        drop(db);
        rewrite::wait_released(&self.dir.join("db"))?;
        rewrite::swap(&self.dir)?;
        let db = self.db.open_again()?;
        if let Ok(mut dead) = self.dead.lock() {
            dead.clear();
        }
        self.decoded.clear();
        *self
            .values
            .write()
            .map_err(|_| Error::Poisoned("value log".into()))? =
            Arc::new(separated::open_log(&self.dir, &db)?);
        *g = Some(db);
        Ok(())
    }
}

#[cfg(test)]
mod tests;
