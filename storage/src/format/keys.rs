//! The key layout of the one sled tree, spelled in this one place: every record's key is a tag
//! byte, then big-endian integers (so that key order is numeric order).
//!
//! | key | value |
//! |---|---|
//! | `M format` | format version (u32) |
//! | `T` table id | table record |
//! | `C` table id, version | commit record |
//! | `E` table id, version, chunk | event block |
//! | `S` source id | source table record |
//! | `A` source id, append, chunk | rows of one append |
//! | `L` source id, append | the name an append was loaded under |
//! | `H` source id, version | source table commit record |
//! | `V` view name | the view's SQL |
//! | `N` schema name | the schema's comment |
//! | `K` table id, key | a key's head: its hot state and page directory |
//! | `P` table id, key, page | one frozen page of a key |
//! | `X` table id, version, part | the rows a commit wrote (their keys) and retired, a part at a time |
//! | `G` table id | the table summary: the version the `K`/`P`/`X` records are current at |
//! | `D` table id | a table or source table being dropped: its records go after its catalog record |
//! | `Z` table id | an erasure under way: what it rewrites, written before it rewrites anything |
//!
//! See docs/FORMAT.md for the byte diagrams.

use crate::error::{corrupt, Result};

/// The key of the format record.
pub(crate) const FORMAT_KEY: &[u8] = b"M format";
/// Present while an ERASE has deleted records whose bytes may still be in the key-value files:
/// the next open rewrites them ([`crate::kv::KvStore::purge`]) before anything else.
pub(crate) const PURGE_KEY: &[u8] = b"M purge";
/// A target table's catalog record: `T` id.
pub(crate) const TABLE: u8 = b'T';
/// A target table's commit record: `C` id version.
pub(crate) const COMMIT: u8 = b'C';
/// A block of a commit's events: `E` id version chunk.
pub(crate) const EVENTS: u8 = b'E';
/// A source table's catalog record: `S` id.
pub(crate) const SOURCE: u8 = b'S';
/// A chunk of the rows of one source append: `A` id append chunk.
pub(crate) const APPEND: u8 = b'A';
/// The name an append was loaded under: `L` id append.
pub(crate) const LOADED: u8 = b'L';
/// A source table's commit record: `H` id version.
pub(crate) const SOURCE_COMMIT: u8 = b'H';
/// A view: `V` name (UTF-8, not length-prefixed: it runs to the end of the key).
pub(crate) const VIEW: u8 = b'V';
/// A schema made by `CREATE SCHEMA`: `N` name (UTF-8, to the end of the key).
pub(crate) const SCHEMA: u8 = b'N';

/// A key's head: `K` id key (the encoded key runs to the end).
pub(crate) const KEY_HEAD: u8 = b'K';
/// A frozen page of a key: `P` id key page (u32).
pub(crate) const PAGE: u8 = b'P';
/// The row directory of one commit: `X` id version part (format 7 and before: `X` id version,
/// one part).
pub(crate) const ROW_DIR: u8 = b'X';
/// A table's summary: `G` id.
pub(crate) const SUMMARY: u8 = b'G';
/// The pages a table's last checkpoint freed that are not deleted yet: `F` id.
pub(crate) const FREED: u8 = b'F';
/// A table or source table being dropped: `D` id (no value). Its catalog record went first, in
/// the batch that wrote this; its other records go in batches after, and then this record; an
/// open finishes a drop a stop interrupted.
pub(crate) const DROPPING: u8 = b'D';
/// An erasure of some keys of a table under way: `Z` id, its intent (JSON). Written in a batch of
/// its own before the erasure rewrites anything, deleted in the batch of its `ERASE` commit; an
/// open finishes an erasure a stop interrupted.
pub(crate) const ERASING: u8 = b'Z';
/// Every tag of a source table's records, the catalog record first.
pub(crate) const SOURCE_TAGS: [u8; 4] = [SOURCE, APPEND, LOADED, SOURCE_COMMIT];
/// Every tag of a target table's records, the catalog record first.
pub(crate) const TABLE_TAGS: [u8; 8] = [
    TABLE, COMMIT, EVENTS, KEY_HEAD, PAGE, ROW_DIR, SUMMARY, FREED,
];
/// The tags of a table's derived records (rewritten together: docs/FORMAT.md §9).
pub(crate) const DERIVED_TAGS: [u8; 5] = [KEY_HEAD, PAGE, ROW_DIR, SUMMARY, FREED];

/// The commit records the manifest follows, each with the tag of the catalog record whose deletion
/// drops its table (the manifest lets go of a table before its data leaves the tree).
pub(crate) const FOLLOWED: [(u8, u8); 2] = [(COMMIT, TABLE), (SOURCE_COMMIT, SOURCE)];

/// A key: `tag`, the table id, and the version (or append) and chunk when given, big-endian. With
/// fewer parts it is the prefix of every key that has them.
pub(crate) fn key(tag: u8, id: u32, version: Option<u64>, chunk: Option<u32>) -> Vec<u8> {
    let mut k = Vec::with_capacity(17);
    k.push(tag);
    k.extend_from_slice(&id.to_be_bytes());
    if let Some(v) = version {
        k.extend_from_slice(&v.to_be_bytes());
    }
    if let Some(c) = chunk {
        k.extend_from_slice(&c.to_be_bytes());
    }
    k
}

/// The head of `key` (encoded, [`crate::keycodec`]) of table `id`.
pub(crate) fn key_head(id: u32, key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(5 + key.len());
    k.push(KEY_HEAD);
    k.extend_from_slice(&id.to_be_bytes());
    k.extend_from_slice(key);
    k
}

/// The encoded key of a head's key ([`key_head`]).
pub(crate) fn head_key(k: &[u8]) -> Result<&[u8]> {
    k.get(5..).ok_or_else(|| corrupt("short key head"))
}

/// The key of part `part` of commit `version`'s row directory in table `id`.
pub(crate) fn row_dir(id: u32, version: u64, part: u32) -> Vec<u8> {
    key(ROW_DIR, id, Some(version), Some(part))
}

/// Page `page` of `key` (encoded) of table `id`. Encoded keys of one table are prefix-free
/// (docs/FORMAT.md §4), so the pages of a key are one prefix of the tree.
pub(crate) fn page(id: u32, key: &[u8], page: u32) -> Vec<u8> {
    let mut k = Vec::with_capacity(9 + key.len());
    k.push(PAGE);
    k.extend_from_slice(&id.to_be_bytes());
    k.extend_from_slice(key);
    k.extend_from_slice(&page.to_be_bytes());
    k
}

/// The prefix of every page of `key` (encoded) of table `id`.
pub(crate) fn pages_of(id: u32, key: &[u8]) -> Vec<u8> {
    let mut k = page(id, key, 0);
    k.truncate(k.len() - 4);
    k
}

/// A view's key, or with an empty name the prefix of every view.
pub(crate) fn view(name: &str) -> Vec<u8> {
    [&[VIEW][..], name.as_bytes()].concat()
}

/// A schema's key, or with an empty name the prefix of every schema.
pub(crate) fn schema(name: &str) -> Vec<u8> {
    [&[SCHEMA][..], name.as_bytes()].concat()
}

/// `(tag, table id, version)` of a versioned key (tag, id u32, version u64, ...).
pub(crate) fn versioned(k: &[u8]) -> Option<(u8, u32, u64)> {
    let tag = *k.first()?;
    let id = u32::from_be_bytes(k.get(1..5)?.try_into().ok()?);
    let v = u64::from_be_bytes(k.get(5..13)?.try_into().ok()?);
    Some((tag, id, v))
}

/// The version (or append number) of a versioned key.
pub(crate) fn parse_version(k: &[u8]) -> Result<u64> {
    k.get(5..13)
        .and_then(|b| b.try_into().ok())
        .map(u64::from_be_bytes)
        .ok_or_else(|| corrupt("short key"))
}

/// The chunk number of a chunked key (`E`, `A`).
pub(crate) fn parse_chunk(k: &[u8]) -> Result<u32> {
    k.get(13..17)
        .and_then(|b| b.try_into().ok())
        .map(u32::from_be_bytes)
        .ok_or_else(|| corrupt("short key"))
}
