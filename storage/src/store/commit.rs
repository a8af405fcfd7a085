//! Commit records, and the helpers every commit uses to put its entries in a write batch.

use serde::Serialize;

use crate::engine::fold::Bytes;
use crate::engine::Incoming;
use crate::error::{corrupt, Result};
use crate::flow::TableSchema;
use crate::format::keys::{self, key};
use crate::format::Codec;
use crate::kv::{KvStore, WriteBatch};
use crate::value::ColumnType;

pub use crate::commit_info::CommitInfo;

/// Adds a put of `value` as JSON (the catalog and commit records).
pub(crate) fn put_json(b: &mut WriteBatch, k: Vec<u8>, value: &impl Serialize) -> Result<()> {
    b.put(k, serde_json::to_vec(value).map_err(corrupt)?);
    Ok(())
}

/// Puts the blocks holding `events` and `truncates` as the event log of commit `version`.
pub(crate) fn put_event_blocks(
    b: &mut WriteBatch,
    table_id: u32,
    version: u64,
    schema: &TableSchema,
    events: &[Incoming],
    truncates: &[Bytes],
) -> Result<()> {
    let types = schema.column_types();
    for (k, v) in event_block_entries((table_id, version), &types, events, truncates)? {
        b.put(k, v);
    }
    Ok(())
}

/// The entries (key, value) of the blocks holding `events` and `truncates` as the event log of
/// commit `version` of table `table_id`, to be put in the commit's batch.
pub(crate) fn event_block_entries(
    (table_id, version): (u32, u64),
    types: &[ColumnType],
    events: &[Incoming],
    truncates: &[Bytes],
) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    crate::format::event_block::event_blocks(events, truncates, types)
        .into_iter()
        .enumerate()
        .map(|(i, blk)| {
            Ok((
                key(keys::EVENTS, table_id, Some(version), Some(i as u32)),
                crate::format::packed_events::encode_block(blk, Codec::Small)?,
            ))
        })
        .collect()
}

/// Puts the event blocks of one part of a commit applied in parts (no truncates), numbered from
/// `first`; returns the number after the last. A later part that logs no event puts nothing:
/// block 0 is the one every `FLOW` commit has.
pub(crate) fn put_event_blocks_from(
    b: &mut WriteBatch,
    (table_id, version): (u32, u64),
    first: u32,
    types: &[ColumnType],
    events: Vec<Incoming>,
) -> Result<u32> {
    if first > 0 && events.is_empty() {
        return Ok(first);
    }
    let mut next = first;
    for blk in crate::format::event_block::event_blocks_taking(events, types) {
        b.put(
            key(keys::EVENTS, table_id, Some(version), Some(next)),
            crate::format::packed_events::encode_block(blk, Codec::Small)?,
        );
        next += 1;
    }
    Ok(next)
}

/// Writes a batch; a failure poisons the store (memory may be ahead of disk until it is reopened).
pub(crate) fn write_or_poison(
    kv: &dyn KvStore,
    poisoned: &mut Option<String>,
    b: WriteBatch,
) -> Result<()> {
    kv.write(b).inspect_err(|e| *poisoned = Some(e.to_string()))
}

/// How many records there are under `prefix` (their keys alone are read).
pub(crate) fn count_keys(kv: &dyn KvStore, prefix: &[u8]) -> Result<u64> {
    kv.scan_prefix_keys(prefix)
        .try_fold(0u64, |n, k| k.map(|_| n + 1))
}

/// Deletes every key under `prefix` from `from` on, a few thousand per batch: one sled batch of
/// many deletes costs it a lot of memory.
pub(crate) fn delete_from(kv: &dyn KvStore, prefix: &[u8], from: &[u8]) -> Result<()> {
    let mut b = WriteBatch::default();
    for pair in kv.scan_prefix_from(prefix, from) {
        b.delete(pair?.0);
        if b.len() >= 4096 {
            kv.write(std::mem::take(&mut b))?;
        }
    }
    if !b.is_empty() {
        kv.write(b)?;
    }
    Ok(())
}

pub(crate) fn now_us() -> i64 {
    chrono::Utc::now().timestamp_micros()
}

pub(crate) fn format_us(us: i64) -> String {
    chrono::DateTime::from_timestamp_micros(us)
        .map(|t| t.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string())
        .unwrap_or_else(|| us.to_string())
}
