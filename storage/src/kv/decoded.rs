//! Values that the layers above decoded, kept by where their bytes lie in the value log
//! ([`super::KvStore::get_decoded`]): a scan or a lookup that reads the same frozen page again
//! (the same as-of report run twice, a service answering about the same keys) finds it decoded,
//! without reading the log or decompressing.
//!
//! A record of the value log is never rewritten in place: a value written again, compacted or
//! purged gets a new record, in a segment numbered past every earlier one (FORMAT.md §5.3). So a
//! record's place names its bytes for the life of the store, and an entry can never be read for
//! other bytes; entries whose record is dead are merely never asked for again, and leave as the
//! cache makes room. Values held in sled itself (under
//! [`SEPARATE_AT`](crate::format::value_log::SEPARATE_AT) bytes) are not kept: reading them
//! costs no read of the log.
//!
//! The cache is bounded by the bytes its entries hold, as their decoders count them; its
//! policy (quick_cache's, a CLOCK-PRO variant) keeps what is read again through a scan of more
//! than it holds.
//! The engine remembers the last pages a key read from it weakly (`engine/cold/pages_read.rs`),
//! to find them again without a get from sled: what the cache lets go of leaves memory all the
//! same.
//!
//! A value is kept on its second read, not its first ([`Doorkeeper`]): a process that reads
//! something once (a one-shot `asof sql`, a report in a fresh process, a scan of a history read
//! once) neither pays for keeping it nor grows by it. At 10M events one as-of snapshot of every
//! key in a new process took 0.32–0.63 s and 251–256 MiB keeping all it read, 0.23–0.30 s and
//! about 120 MiB keeping nothing (docs/PERFORMANCE.md, session 39).

use std::any::{Any, TypeId};
use std::collections::HashSet;
use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::format::value_log::Pointer;

/// A value decoded by a layer above the key-value layer, shared by every reader of it.
pub type DecodedValue = Arc<dyn Any + Send + Sync>;

/// What [`super::KvStore::get_decoded`] decodes a value with: the value made of its bytes, and
/// the bytes it holds in memory.
pub type Decoder<'a> = &'a dyn Fn(&[u8]) -> crate::error::Result<(DecodedValue, u64)>;

/// A value read by a scan ([`super::KvStore::scan_prefix_from_kept`]): as an earlier read kept
/// it, decoded, or its bytes, with where to keep what the caller decodes of them.
pub enum Scanned {
    /// Decoded already: what an earlier read kept of exactly these bytes.
    Kept(DecodedValue),
    /// The bytes, and where they lie if the layer keeps what is decoded of them
    /// ([`super::KvStore::keep_decoded`]): only for a value read before ([`Doorkeeper`]), by
    /// a scan that keeps what it reads ([`Keeping::Admitted`]). A caller that knows its value
    /// will be kept may decode more of it (a key head's boxes).
    Read(Vec<u8>, Option<KeepAt>),
}

/// Whether a scan ([`super::KvStore::scan_prefix_from_kept`]) keeps what it decodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keeping {
    /// A value the cache admits (its second read) comes with where to keep it.
    Admitted,
    /// Nothing is kept: no value comes with a place, and the cache does not count the read.
    Nothing,
}

/// Where a value a scan read lies in the value log, as of the cache's epoch: what
/// [`super::KvStore::keep_decoded`] keeps a decoded value by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeepAt {
    segment: u32,
    offset: u64,
    /// The cache's epoch when the value was read: a purge (which clears the cache, so that
    /// erased values leave memory) starts a new one, and a value read before it is not kept.
    epoch: u64,
}

/// Where a decoded value's bytes lie, and what it was decoded as.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct Slot {
    segment: u32,
    offset: u64,
    kind: TypeId,
}

#[derive(Clone)]
struct Entry {
    value: DecodedValue,
    bytes: u64,
}

#[derive(Clone)]
struct ByBytes;

impl quick_cache::Weighter<Slot, Entry> for ByBytes {
    fn weight(&self, _: &Slot, e: &Entry) -> u64 {
        e.bytes
    }
}

/// Which values were read once since it last forgot: what decides that a value is kept on its
/// second read. It remembers a value's slot as a hash, forgets it once the value is kept, and
/// forgets everything once it remembers [`Doorkeeper::remembers`] (so that a value read once
/// long ago is read once again before it is kept, and the set stays bounded).
struct Doorkeeper {
    seen: Mutex<HashSet<u64>>,
    remembers: usize,
    hasher: RandomState,
}

impl Doorkeeper {
    fn new(remembers: usize) -> Doorkeeper {
        Doorkeeper {
            seen: Mutex::new(HashSet::new()),
            remembers,
            hasher: RandomState::new(),
        }
    }

    /// Whether the value at `slot` is to be kept: whether it was read before since the last
    /// forgetting. Remembers it if not.
    fn admits(&self, slot: &Slot) -> bool {
        let hash = self.hasher.hash_one(slot);
        // Nothing is left half-done under the lock: a panic elsewhere leaves a usable set.
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        if seen.remove(&hash) {
            return true;
        }
        if seen.len() >= self.remembers {
            *seen = HashSet::new();
        }
        seen.insert(hash);
        false
    }

    /// Forgets every value read once.
    fn forget(&self) {
        *self.seen.lock().unwrap_or_else(PoisonError::into_inner) = HashSet::new();
    }
}

/// Decoded values by their record in the value log, at most `capacity` bytes of them.
pub(super) struct DecodedCache {
    /// `None` when the capacity is 0: nothing is kept.
    cache: Option<(quick_cache::sync::Cache<Slot, Entry, ByBytes>, Doorkeeper)>,
    /// Counts the clears ([`KeepAt::epoch`]).
    epoch: AtomicU64,
}

/// What an entry is guessed to weigh, to size the cache's table.
const TYPICAL_ENTRY: u64 = 4 << 10;

/// How many values read once the [`Doorkeeper`] remembers, per entry the cache is sized for: an
/// as-of snapshot of a 10M-event store reads about 30,000 values (a head and two pages per key),
/// about as many entries as 128 MiB is sized for (the default is 192), and its second run must
/// find them remembered.
const REMEMBERED_PER_ENTRY: usize = 4;

impl DecodedCache {
    pub fn new(capacity: u64) -> DecodedCache {
        let cache = (capacity > 0).then(|| {
            let items = (capacity / TYPICAL_ENTRY).max(16) as usize;
            (
                quick_cache::sync::Cache::with_weighter(items, capacity, ByBytes),
                Doorkeeper::new(items * REMEMBERED_PER_ENTRY),
            )
        });
        DecodedCache {
            cache,
            epoch: AtomicU64::new(0),
        }
    }

    /// The value decoded as `kind` from the record at `at`, if kept.
    pub fn get(&self, at: &Pointer, kind: TypeId) -> Option<DecodedValue> {
        let slot = slot(at, kind);
        self.cache.as_ref()?.0.get(&slot).map(|e| e.value)
    }

    /// Keeps `value`, decoded as `kind` from the record at `at`, weighing `bytes`, if it was
    /// read before ([`Doorkeeper`]).
    pub fn put(&self, at: &Pointer, kind: TypeId, value: DecodedValue, bytes: u64) {
        self.insert(slot(at, kind), Entry { value, bytes });
    }

    fn insert(&self, slot: Slot, entry: Entry) {
        if let Some((c, door)) = &self.cache {
            if door.admits(&slot) {
                c.insert(slot, entry);
            }
        }
    }

    /// Where to keep what is decoded as `kind` of the record at `at` ([`DecodedCache::keep`]),
    /// if the cache admits it: if it was read before ([`Doorkeeper`]); else it is remembered as
    /// read once.
    pub fn keep_at(&self, at: &Pointer, kind: TypeId) -> Option<KeepAt> {
        let (_, door) = self.cache.as_ref()?;
        door.admits(&slot(at, kind)).then(|| KeepAt {
            segment: at.segment,
            offset: at.offset,
            epoch: self.epoch.load(Ordering::Acquire),
        })
    }

    /// Keeps `value`, decoded as `kind` from the record [`DecodedCache::keep_at`] admitted,
    /// unless the cache was cleared since.
    pub fn keep(&self, at: KeepAt, kind: TypeId, value: DecodedValue, bytes: u64) {
        if let Some((c, _)) = &self.cache {
            if at.epoch == self.epoch.load(Ordering::Acquire) {
                let slot = Slot {
                    segment: at.segment,
                    offset: at.offset,
                    kind,
                };
                c.insert(slot, Entry { value, bytes });
            }
        }
    }

    /// Forgets every entry (a purge rewrote the files: what was erased leaves memory too), and
    /// what a read before now would keep.
    pub fn clear(&self) {
        self.epoch.fetch_add(1, Ordering::AcqRel);
        if let Some((c, door)) = &self.cache {
            c.clear();
            door.forget();
        }
    }

    /// The bytes its entries weigh.
    #[cfg(test)]
    pub fn weight(&self) -> u64 {
        self.cache.as_ref().map_or(0, |(c, _)| c.weight())
    }
}

fn slot(at: &Pointer, kind: TypeId) -> Slot {
    Slot {
        segment: at.segment,
        offset: at.offset,
        kind,
    }
}
