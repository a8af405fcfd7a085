//! An erasure's intent: everything an ERASE rewrites, found before it rewrites anything and
//! written in a batch of its own (`Z` id, docs/FORMAT.md). The rewrites then go in batches of
//! at most [`BATCH_RECORDS`] records and [`BATCH_BYTES`] (a key's rows lie in nearly every chunk
//! of a large source append: one batch of them all held the source), and the `ERASE` commit's
//! batch deletes the intent. Each
//! rewrite can be done twice: an open that finds an intent carries it out again from the start
//! (`Inner::finish_erasures`).

use serde::{Deserialize, Serialize};

use super::chain;
use crate::commit_info::CommitInfo;
use crate::error::{corrupt, Result};
use crate::format::keys::{self, key};
use crate::kv::{KvStore, WriteBatch};
use crate::progress::Reporter;

/// The most bytes of rewritten blocks and chunks a batch of an erasure holds.
pub(super) const BATCH_BYTES: usize = 16 << 20;
/// The most blocks and chunks a batch of an erasure rewrites (64 full log blocks are 16 MiB).
pub(super) const BATCH_RECORDS: usize = 64;

/// A commit whose record an erasure marks (`erased_by`), with its digest before, if its record
/// is chained.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct Marked {
    pub version: u64,
    pub old: Option<String>,
}

impl Marked {
    /// Commit `c` of table or source `id` (records under `tag`), with its digest as the store
    /// holds it now.
    pub(super) fn before(kv: &dyn KvStore, tag: u8, id: u32, c: &CommitInfo) -> Result<Marked> {
        let old = match c.chain {
            Some(_) => Some(chain::hex(&chain::stored_digest(kv, tag, id, c)?)),
            None => None,
        };
        Ok(Marked {
            version: c.version,
            old,
        })
    }
}

/// A chunk of a source append that loses rows: its key, its rows before, and the indices of
/// those it loses. A chunk that no longer has `rows` rows (or is gone) was rewritten already.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct ChunkCut {
    pub key: Vec<u8>,
    pub rows: usize,
    #[serde(with = "as_ranges")]
    pub drop: Vec<u64>,
}

/// What an erasure removes from one source table of the table.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct SourceCut {
    pub name: String,
    /// The source's `ERASE` commit.
    pub version: u64,
    pub timestamp_us: i64,
    /// The positions of the rows removed, in order.
    #[serde(with = "as_ranges")]
    pub positions: Vec<u64>,
    pub chunks: Vec<ChunkCut>,
    /// The `WRITE` commits of the appends that lose rows.
    pub appends: Vec<Marked>,
}

/// An erasure of some keys of a table, planned.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct Intent {
    pub table: String,
    /// The table's `ERASE` commit.
    pub version: u64,
    pub timestamp_us: i64,
    pub reason: String,
    /// The erased keys that have events (encoded).
    pub keys: Vec<Vec<u8>>,
    /// Events removed from the log.
    pub events: u64,
    /// The event blocks that hold an event of `keys`.
    pub blocks: Vec<Vec<u8>>,
    /// The commits whose events were rewritten (those under a vacuum base included).
    pub commits_rewritten: u64,
    /// The commits marked, outside a vacuum base.
    pub commits: Vec<Marked>,
    /// The vacuum base, when an event under it goes (its digest is over every block up to it).
    pub base: Option<Marked>,
    pub sources: Vec<SourceCut>,
}

impl Intent {
    /// Rows removed from the table's sources.
    pub(super) fn source_rows(&self) -> u64 {
        self.sources.iter().map(|s| s.positions.len() as u64).sum()
    }

    /// The record of the intent, for table `id`.
    pub(super) fn put(&self, id: u32, b: &mut WriteBatch) -> Result<()> {
        let value =
            serde_json::to_vec(self).map_err(|e| corrupt(format!("an erasure's intent: {e}")))?;
        b.put(record_key(id), value);
        Ok(())
    }
}

/// The key of the intent of an erasure of table `id`.
pub(super) fn record_key(id: u32) -> Vec<u8> {
    key(keys::ERASING, id, None, None)
}

/// The intents of the erasures a stop interrupted, each with its table's id.
pub(super) fn unfinished(kv: &dyn KvStore) -> Result<Vec<(u32, Intent)>> {
    kv.scan_prefix(&[keys::ERASING])
        .map(|pair| {
            let (k, v) = pair?;
            let id = k
                .get(1..5)
                .and_then(|b| <[u8; 4]>::try_from(b).ok())
                .map(u32::from_be_bytes)
                .ok_or_else(|| corrupt("the key of an erasure's intent"))?;
            let intent = serde_json::from_slice(&v)
                .map_err(|e| corrupt(format!("an erasure's intent: {e}")))?;
            Ok((id, intent))
        })
        .collect()
}

/// Sorted numbers (positions, row indices) as ranges (`3-7,12`): an erasure of many rows writes
/// a short intent.
mod as_ranges {
    use serde::{Deserialize, Deserializer, Serializer};

    use crate::positions::{format_positions, parse_positions};

    pub(super) fn serialize<S: Serializer>(v: &[u64], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format_positions(v))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u64>, D::Error> {
        let list = String::deserialize(d)?;
        parse_positions(&list, "an erasure's intent").map_err(serde::de::Error::custom)
    }
}

/// Writes rewrites in batches of at most [`BATCH_RECORDS`] records and [`BATCH_BYTES`], and
/// reports the records visited to a progress bar.
pub(super) struct Batches<'a> {
    kv: &'a dyn KvStore,
    b: WriteBatch,
    bar: Reporter,
    visited: u64,
}

impl<'a> Batches<'a> {
    pub(super) fn new(kv: &'a dyn KvStore, bar: Reporter) -> Self {
        Batches {
            kv,
            b: WriteBatch::default(),
            bar,
            visited: 0,
        }
    }

    /// One more block or chunk was visited (rewritten, or found rewritten already).
    pub(super) fn visited(&mut self) {
        self.visited += 1;
        self.bar.advance(self.visited);
    }

    pub(super) fn put(&mut self, k: Vec<u8>, v: Vec<u8>) -> Result<()> {
        self.b.put(k, v);
        self.flush_if_full()
    }

    pub(super) fn delete(&mut self, k: Vec<u8>) -> Result<()> {
        self.b.delete(k);
        self.flush_if_full()
    }

    fn flush_if_full(&mut self) -> Result<()> {
        if self.b.len() >= BATCH_RECORDS || self.b.bytes() >= BATCH_BYTES {
            self.kv.write(std::mem::take(&mut self.b))?;
        }
        Ok(())
    }

    /// Writes what is left.
    pub(super) fn finish(self) -> Result<()> {
        if self.b.is_empty() {
            return Ok(());
        }
        self.kv.write(self.b)
    }
}
