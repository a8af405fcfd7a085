//! How asof opens sled, and what its cache of `cache_bytes` means: memory.
//!
//! sled 0.34 counts each node in its cache at the node's size in its log (the bytes of its keys
//! and values), but holds it in memory as vectors of `IVec`s, with copies of changed nodes
//! waiting for its garbage collector. What sled's cache takes in memory is about four times what
//! it counts: a load of 5M events over 2.5M keys (SCD TYPE 1, whose key heads are one sled entry
//! each) peaked at 382 MB with 1 MiB given to sled, 435 MB with 16 MiB, 526 MB with 32 MiB and
//! 654–675 MB with 64 MiB (docs/PERFORMANCE.md, session 43). So sled is given
//! [`SLED_MEMORY_PER_COUNTED_BYTE`]ths of the cache asked for, and `cache_bytes` bounds what its
//! cache takes in memory, as a store's memory must be bounded by its configuration and not by the
//! number of its keys.

use std::path::Path;

/// Bytes of memory sled's cache takes per byte it counts (measured; see the module's text).
const SLED_MEMORY_PER_COUNTED_BYTE: u64 = 4;

/// The least cache sled is given: its LRU has 256 shards and gives each a share of the cache,
/// which must not be zero.
const SLED_LEAST_COUNTED: u64 = 256 * 64;

/// The capacity to give sled for a cache of `cache_bytes` of memory.
fn sled_capacity(cache_bytes: u64) -> u64 {
    (cache_bytes / SLED_MEMORY_PER_COUNTED_BYTE).max(SLED_LEAST_COUNTED)
}

/// Opens sled in `dir` with a cache of `cache_bytes` of memory.
pub(super) fn open_sled(dir: &Path, cache_bytes: u64) -> sled::Result<sled::Db> {
    sled::Config::new()
        .path(dir)
        .cache_capacity(sled_capacity(cache_bytes))
        .open()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sled_is_given_a_quarter_of_the_cache_and_never_less_than_its_shards_need() {
        assert_eq!(sled_capacity(64 << 20), 16 << 20);
        assert_eq!(sled_capacity(1 << 20), 256 << 10);
        assert_eq!(sled_capacity(0), 256 * 64);
        assert_eq!(sled_capacity(1), 256 * 64);
    }

    #[test]
    fn a_store_with_no_cache_at_all_opens_and_reads_back_what_it_wrote() {
        let dir = tempfile::tempdir().unwrap();
        let db = open_sled(dir.path(), 0).unwrap();
        db.insert(b"k", b"v".to_vec()).unwrap();
        assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
    }
}
