//! The key-value layer: a narrow trait, and its sled implementation.
//!
//! The engine needs three things of it: read a key, scan a prefix in key order, and write a batch
//! atomically and durably (when `write` returns Ok, the batch survives a crash; when it fails,
//! none or all of it may be there, and the store stops writing until reopened).

use std::path::Path;

use crate::error::{Error, Result};

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

/// What the engine needs of a key-value store.
pub trait KvStore: Send + Sync {
    /// Reads one key.
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>>;
    /// All pairs whose key starts with `prefix`, in key order.
    fn scan_prefix<'a>(&'a self, prefix: &[u8]) -> Box<dyn Iterator<Item = Result<KvPair>> + 'a>;
    /// Writes `batch` atomically and durably.
    fn write(&self, batch: WriteBatch) -> Result<()>;
}

/// sled 0.34 behind [`KvStore`]: one tree, one `apply_batch` and one `flush` per write.
pub struct SledKv {
    db: sled::Db,
}

impl SledKv {
    /// Opens (or creates) the sled database in `path` with `cache_bytes` of page cache.
    ///
    /// sled releases its file lock only when its background threads have let go of a dropped
    /// database, a few milliseconds after the drop; so a lock conflict is retried for up to
    /// [`LOCK_WAIT`] before it is reported as [`Error::InUse`].
    pub fn open(path: &Path, cache_bytes: u64) -> Result<SledKv> {
        let deadline = std::time::Instant::now() + LOCK_WAIT;
        loop {
            match sled::Config::new()
                .path(path)
                .cache_capacity(cache_bytes)
                .open()
            {
                Ok(db) => return Ok(SledKv { db }),
                Err(e) => {
                    let msg = e.to_string();
                    let locked = msg.contains("could not acquire lock");
                    if locked && std::time::Instant::now() < deadline {
                        std::thread::sleep(std::time::Duration::from_millis(10));
                        continue;
                    }
                    return Err(if locked {
                        Error::InUse(path.display().to_string())
                    } else if matches!(e, sled::Error::Corruption { .. }) {
                        Error::Corrupt(msg)
                    } else {
                        Error::Io(msg)
                    });
                }
            }
        }
    }
}

/// How long [`SledKv::open`] waits for another holder of the store's lock to let go.
pub const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

impl KvStore for SledKv {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.db.get(key)?.map(|v| v.to_vec()))
    }

    fn scan_prefix<'a>(&'a self, prefix: &[u8]) -> Box<dyn Iterator<Item = Result<KvPair>> + 'a> {
        Box::new(self.db.scan_prefix(prefix).map(|r| {
            r.map(|(k, v)| (k.to_vec(), v.to_vec()))
                .map_err(Error::from)
        }))
    }

    fn write(&self, batch: WriteBatch) -> Result<()> {
        let mut b = sled::Batch::default();
        for (k, v) in batch.ops {
            match v {
                Some(v) => b.insert(k, v),
                None => b.remove(k),
            }
        }
        self.db.apply_batch(b)?;
        self.db.flush()?;
        Ok(())
    }
}
