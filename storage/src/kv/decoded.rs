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

use std::any::{Any, TypeId};
use std::sync::Arc;

use crate::format::value_log::Pointer;

/// A value decoded by a layer above the key-value layer, shared by every reader of it.
pub type DecodedValue = Arc<dyn Any + Send + Sync>;

/// What [`super::KvStore::get_decoded`] decodes a value with: the value made of its bytes, and
/// the bytes it holds in memory.
pub type Decoder<'a> = &'a dyn Fn(&[u8]) -> crate::error::Result<(DecodedValue, u64)>;

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

/// Decoded values by their record in the value log, at most `capacity` bytes of them.
pub(super) struct DecodedCache {
    /// `None` when the capacity is 0: nothing is kept.
    cache: Option<quick_cache::sync::Cache<Slot, Entry, ByBytes>>,
}

/// What an entry is guessed to weigh, to size the cache's table.
const TYPICAL_ENTRY: u64 = 4 << 10;

impl DecodedCache {
    pub fn new(capacity: u64) -> DecodedCache {
        let cache = (capacity > 0).then(|| {
            let items = (capacity / TYPICAL_ENTRY).max(16) as usize;
            quick_cache::sync::Cache::with_weighter(items, capacity, ByBytes)
        });
        DecodedCache { cache }
    }

    /// The value decoded as `kind` from the record at `at`, if kept.
    pub fn get(&self, at: &Pointer, kind: TypeId) -> Option<DecodedValue> {
        let slot = slot(at, kind);
        self.cache.as_ref()?.get(&slot).map(|e| e.value)
    }

    /// Keeps `value`, decoded as `kind` from the record at `at`, weighing `bytes`.
    pub fn put(&self, at: &Pointer, kind: TypeId, value: DecodedValue, bytes: u64) {
        if let Some(c) = &self.cache {
            c.insert(slot(at, kind), Entry { value, bytes });
        }
    }

    /// Forgets every entry (a purge rewrote the files: what was erased leaves memory too).
    pub fn clear(&self) {
        if let Some(c) = &self.cache {
            c.clear();
        }
    }

    /// The bytes its entries weigh.
    #[cfg(test)]
    pub fn weight(&self) -> u64 {
        self.cache.as_ref().map_or(0, |c| c.weight())
    }
}

fn slot(at: &Pointer, kind: TypeId) -> Slot {
    Slot {
        segment: at.segment,
        offset: at.offset,
        kind,
    }
}
