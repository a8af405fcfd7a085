//! The stored form of events and row versions: rkyv archives, validated (bytecheck) when read.
//!
//! sled hands out values with no alignment guarantee, so a value is copied into an aligned buffer
//! before it is accessed. Blocks are cut so that each stays near [`TARGET_BLOCK_BYTES`], well below
//! sled's 128 KiB large-value threshold.

use rkyv::rancor;
use rkyv::util::AlignedVec;

use crate::engine::fold::{Bytes, Event, EventKind};
use crate::engine::{Incoming, StoredRow};
use crate::error::{corrupt, Result};
use crate::value::Value;

/// About how large one stored block grows before a new one is started.
pub(crate) const TARGET_BLOCK_BYTES: usize = 48 * 1024;

#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize, Debug)]
pub(crate) struct EventRecord {
    pub key: Vec<u8>,
    pub seq: Vec<u8>,
    pub sys: Vec<u8>,
    pub delete: bool,
    pub values: Vec<Value>,
    pub update: Option<Vec<u32>>,
}

/// One chunk of the events a commit logged, plus the SCD1 bookkeeping that must replay with them.
#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize, Debug, Default)]
pub(crate) struct EventBlock {
    pub events: Vec<EventRecord>,
    pub truncates: Vec<Vec<u8>>,
    pub tombstoned: Vec<Vec<u8>>,
    pub collected: Vec<Vec<u8>>,
}

#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize, Debug)]
pub(crate) struct RowRecord {
    pub key: Vec<u8>,
    pub values: Vec<Value>,
    pub start: Option<Vec<u8>>,
    pub end: Option<Vec<u8>>,
    pub sys_start: Option<Vec<u8>>,
    pub sys_end: Option<Vec<u8>>,
}

/// One chunk of the row versions a commit added (ids `first_id..`) and retired (a roaring bitmap).
#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize, Debug, Default)]
pub(crate) struct RowBlock {
    pub first_id: u32,
    pub rows: Vec<RowRecord>,
    pub retired: Vec<u8>,
}

fn value_size(v: &Value) -> usize {
    match v {
        Value::Str(s) => 16 + s.len(),
        Value::Bytes(b) => 16 + b.len(),
        Value::List(l) => 16 + l.iter().map(|s| 16 + s.as_ref().map_or(0, |s| s.len())).sum::<usize>(),
        _ => 24,
    }
}

fn values_size(vs: &[Value]) -> usize {
    vs.iter().map(value_size).sum()
}

pub(crate) fn encode<T>(v: &T) -> Result<Vec<u8>>
where
    T: for<'a> rkyv::Serialize<rkyv::api::high::HighSerializer<AlignedVec, rkyv::ser::allocator::ArenaHandle<'a>, rancor::Error>>,
{
    rkyv::to_bytes::<rancor::Error>(v)
        .map(|b| b.to_vec())
        .map_err(|e| corrupt(format!("cannot encode block: {e}")))
}

pub(crate) fn decode_event_block(bytes: &[u8]) -> Result<EventBlock> {
    let mut al = AlignedVec::<16>::with_capacity(bytes.len());
    al.extend_from_slice(bytes);
    rkyv::from_bytes::<EventBlock, rancor::Error>(&al).map_err(|e| corrupt(format!("event block: {e}")))
}

pub(crate) fn decode_row_block(bytes: &[u8]) -> Result<RowBlock> {
    let mut al = AlignedVec::<16>::with_capacity(bytes.len());
    al.extend_from_slice(bytes);
    rkyv::from_bytes::<RowBlock, rancor::Error>(&al).map_err(|e| corrupt(format!("row block: {e}")))
}

/// Cuts a commit's logged events into blocks.
pub(crate) fn event_blocks(
    events: &[Incoming],
    truncates: &[Bytes],
    tombstoned: &[Bytes],
    collected: &[Bytes],
) -> Vec<EventBlock> {
    let mut blocks = vec![EventBlock {
        truncates: truncates.iter().map(|b| b.to_vec()).collect(),
        tombstoned: tombstoned.iter().map(|b| b.to_vec()).collect(),
        collected: collected.iter().map(|b| b.to_vec()).collect(),
        ..Default::default()
    }];
    let mut size = 0;
    for e in events {
        let sz = e.key.len() + e.seq.len() + e.sys.len() + values_size(&e.event.values) + 32;
        if size + sz > TARGET_BLOCK_BYTES && size > 0 {
            blocks.push(EventBlock::default());
            size = 0;
        }
        size += sz;
        blocks.last_mut().expect("one block").events.push(EventRecord {
            key: e.key.to_vec(),
            seq: e.seq.to_vec(),
            sys: e.sys.to_vec(),
            delete: e.event.kind == EventKind::Delete,
            values: e.event.values.to_vec(),
            update: e.event.update.as_ref().map(|u| u.to_vec()),
        });
    }
    blocks
}

impl EventRecord {
    pub fn into_incoming(self, width: usize) -> Result<Incoming> {
        if self.values.len() != width {
            return Err(corrupt(format!("event has {} values, the table {width} columns", self.values.len())));
        }
        if let Some(u) = &self.update {
            if u.iter().any(|&c| c as usize >= width) {
                return Err(corrupt("event updates a column the table does not have"));
            }
        }
        Ok(Incoming {
            key: self.key.into(),
            seq: self.seq.into(),
            sys: self.sys.into(),
            event: Event {
                kind: if self.delete { EventKind::Delete } else { EventKind::Upsert },
                values: self.values.into(),
                update: self.update.map(Into::into),
            },
        })
    }
}

/// Cuts a commit's new rows and retired ids into blocks.
pub(crate) fn row_blocks(first_id: u32, rows: &[StoredRow], retired: &roaring::RoaringBitmap) -> Result<Vec<RowBlock>> {
    let mut blocks = vec![RowBlock { first_id, ..Default::default() }];
    let mut size = 0;
    let mut next_id = first_id;
    for r in rows {
        let sz = r.key.len() + values_size(&r.values) + 4 * 16;
        if size + sz > TARGET_BLOCK_BYTES && size > 0 {
            blocks.push(RowBlock { first_id: next_id, ..Default::default() });
            size = 0;
        }
        size += sz;
        next_id += 1;
        blocks.last_mut().expect("one block").rows.push(RowRecord {
            key: r.key.to_vec(),
            values: r.values.to_vec(),
            start: r.start.as_ref().map(|b| b.to_vec()),
            end: r.end.as_ref().map(|b| b.to_vec()),
            sys_start: r.sys_start.as_ref().map(|b| b.to_vec()),
            sys_end: r.sys_end.as_ref().map(|b| b.to_vec()),
        });
    }
    // Retired ids: up to 8192 per block, so a block stays small however many a commit retires.
    let ids: Vec<u32> = retired.iter().collect();
    for (i, chunk) in ids.chunks(8192).enumerate() {
        let bm: roaring::RoaringBitmap = chunk.iter().copied().collect();
        let mut bytes = Vec::with_capacity(bm.serialized_size());
        bm.serialize_into(&mut bytes).map_err(|e| corrupt(format!("bitmap: {e}")))?;
        if i == 0 {
            blocks[0].retired = bytes;
        } else {
            blocks.push(RowBlock { first_id: next_id, rows: Vec::new(), retired: bytes });
        }
    }
    Ok(blocks)
}

pub(crate) fn decode_retired(bytes: &[u8]) -> Result<roaring::RoaringBitmap> {
    if bytes.is_empty() {
        return Ok(roaring::RoaringBitmap::new());
    }
    roaring::RoaringBitmap::deserialize_from(bytes).map_err(|e| corrupt(format!("retired bitmap: {e}")))
}
