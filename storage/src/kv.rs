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
///
/// Beside sled's files it keeps a small manifest (`asof.manifest`): for each table, the highest
/// commit version written and flushed so far. sled recovers a damaged log to its last consistent
/// state, as after a crash, and would drop acknowledged commits without a word; on open, every
/// version the manifest names must be there, or the store is reported as corrupt. The manifest is
/// rewritten (write to a temporary file, rename) after each flush, so it never claims more than
/// sled has; a crash between the two leaves it behind, which is harmless.
pub struct SledKv {
    db: sled::Db,
    manifest: Manifest,
}

/// Tags of the keys whose versions the manifest follows: target commits (`C`) and source commits
/// (`H`), each under the tag of the record whose deletion drops the table (`T`, `S`).
const FOLLOWED: [(u8, u8); 2] = [(b'C', b'T'), (b'H', b'S')];

struct Manifest {
    path: std::path::PathBuf,
    /// (tag, table id) -> highest version written.
    marks: std::sync::Mutex<std::collections::BTreeMap<(u8, u32), u64>>,
}

impl Manifest {
    fn load(dir: &Path) -> Result<Manifest> {
        let path = dir.join("asof.manifest");
        let mut marks = std::collections::BTreeMap::new();
        match std::fs::read(&path) {
            Ok(bytes) => {
                let text = String::from_utf8(bytes).map_err(|_| {
                    Error::Corrupt(format!("{} is damaged: not text", path.display()))
                })?;
                for line in text.lines().filter(|l| !l.is_empty()) {
                    let bad = || Error::Corrupt(format!("{} is damaged: `{line}`", path.display()));
                    let mut f = line.split(' ');
                    let (Some(tag), Some(id), Some(v), None) =
                        (f.next(), f.next(), f.next(), f.next())
                    else {
                        return Err(bad());
                    };
                    let tag = match tag.as_bytes() {
                        [t] if FOLLOWED.iter().any(|(c, _)| c == t) => *t,
                        _ => return Err(bad()),
                    };
                    marks.insert(
                        (tag, id.parse().map_err(|_| bad())?),
                        v.parse().map_err(|_| bad())?,
                    );
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::Io(format!("{}: {e}", path.display()))),
        }
        Ok(Manifest {
            path,
            marks: std::sync::Mutex::new(marks),
        })
    }

    fn save(&self, marks: &std::collections::BTreeMap<(u8, u32), u64>) -> Result<()> {
        let mut text = String::new();
        for ((tag, id), v) in marks {
            text.push_str(&format!("{} {id} {v}\n", *tag as char));
        }
        let tmp = self.path.with_extension("manifest.tmp");
        std::fs::write(&tmp, text)
            .and_then(|_| std::fs::rename(&tmp, &self.path))
            .map_err(|e| Error::Io(format!("{}: {e}", self.path.display())))
    }
}

/// `(tag, table id, version)` of a versioned key (`tag`, id u32, version u64, ...).
fn versioned(k: &[u8]) -> Option<(u8, u32, u64)> {
    let tag = *k.first()?;
    let id = u32::from_be_bytes(k.get(1..5)?.try_into().ok()?);
    let v = u64::from_be_bytes(k.get(5..13)?.try_into().ok()?);
    Some((tag, id, v))
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
                Ok(db) => {
                    let manifest = Manifest::load(path)?;
                    let kv = SledKv { db, manifest };
                    kv.check_manifest()?;
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
                        Error::InUse(path.display().to_string())
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
}

impl SledKv {
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
            if self.db.get(&k)?.is_none() {
                let what = if tag == b'C' { "table" } else { "source table" };
                return Err(Error::Corrupt(format!(
                    "commit {v} of {what} #{id} was acknowledged but is missing: the store's files were truncated, overwritten or replaced by an older copy"
                )));
            }
        }
        Ok(())
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
        let mut b = sled::Batch::default();
        for (k, v) in batch.ops {
            match v {
                Some(v) => b.insert(k, v),
                None => b.remove(k),
            }
        }
        self.db.apply_batch(b)?;
        self.db.flush()?;
        if grew {
            self.manifest.save(&grown)?;
            *marks = grown;
        }
        Ok(())
    }
}

/// An in-memory [`KvStore`]: nothing survives the process. For tests, fuzzing, and embedders that
/// want a scratch store.
#[derive(Default)]
pub struct MemKv {
    map: std::sync::RwLock<std::collections::BTreeMap<Vec<u8>, Vec<u8>>>,
}

impl KvStore for MemKv {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let m = self
            .map
            .read()
            .map_err(|_| Error::Poisoned("memory store".into()))?;
        Ok(m.get(key).cloned())
    }

    fn scan_prefix<'a>(&'a self, prefix: &[u8]) -> Box<dyn Iterator<Item = Result<KvPair>> + 'a> {
        let items: Vec<Result<KvPair>> = match self.map.read() {
            Ok(m) => m
                .range(prefix.to_vec()..)
                .take_while(|(k, _)| k.starts_with(prefix))
                .map(|(k, v)| Ok((k.clone(), v.clone())))
                .collect(),
            Err(_) => vec![Err(Error::Poisoned("memory store".into()))],
        };
        Box::new(items.into_iter())
    }

    fn write(&self, batch: WriteBatch) -> Result<()> {
        let mut m = self
            .map
            .write()
            .map_err(|_| Error::Poisoned("memory store".into()))?;
        for (k, v) in batch.ops {
            match v {
                Some(v) => m.insert(k, v),
                None => m.remove(&k),
            };
        }
        Ok(())
    }
}
