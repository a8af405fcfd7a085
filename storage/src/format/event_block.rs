//! A commit's events as a columnar block, which `super::packed_events` archives (rkyv, validated
//! with bytecheck when read) and compresses: zstd for the event log, LZ4 for a large commit's
//! spill files (`super::Codec`).
//!
//! Events are the durable log of a table: the in-memory state (timelines, row versions with the
//! commits that wrote and retired them) is a deterministic function of the commits' events, and is
//! rebuilt by replaying them on open. A block holds the events of one commit in columns: encoded
//! keys, sequences and system sequences, a flag byte, and one typed column per output column, so
//! that an event costs tens of bytes on disk, not hundreds. Blocks are cut near
//! [`TARGET_BLOCK_BYTES`] of raw data.

use super::columns::{new_column, ColumnData, VarBytes};
use crate::error::{corrupt, Result};
use crate::record::{Bytes, Event, EventKind, Incoming, Origin};
use crate::value::{ColumnType, Row, Value};

/// The flag bit of an event a DML statement wrote.
const STATEMENT: u8 = 8;

/// About how many raw bytes one block holds before a new one is started: a block compresses
/// with zstd about an eighth smaller than eight blocks of 32 KiB (what blocks were before
/// session 41: the log of the 1M-event workload went from 34.0 to 29.8 MB), and a reader holds
/// one decoded block at a time.
pub(crate) const TARGET_BLOCK_BYTES: usize = 256 * 1024;

/// The events of (part of) one commit, in columns.
#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize, Debug, Default)]
pub(crate) struct EventBlock {
    pub keys: VarBytes,
    pub seqs: VarBytes,
    pub syss: VarBytes,
    /// Bit 0: delete. Bit 1: has a COLUMNS TO UPDATE list. Bit 3: written by a DML statement
    /// ([`Origin::Statement`]; format 3).
    pub flags: Vec<u8>,
    /// COLUMNS TO UPDATE lists of the events that have one, in order: `update[update_offsets[j]..]`.
    pub update_offsets: Vec<u32>,
    pub update: Vec<u32>,
    pub columns: Vec<ColumnData>,
    /// Truncate sequences (SCD1).
    pub truncates: Vec<Vec<u8>>,
}

/// One block of `events` and `truncates`, however large: a block rewritten with fewer events
/// (an erasure) keeps its number.
pub(crate) fn one_event_block(
    events: &[Incoming],
    truncates: &[Bytes],
    types: &[ColumnType],
) -> EventBlock {
    let mut block = EventBlock {
        truncates: truncates.iter().map(|b| b.to_vec()).collect(),
        ..EventBlock::empty(types)
    };
    for e in events {
        block.push(&e.key, &e.seq, &e.sys, &e.event, 0);
    }
    block
}

/// Cuts a commit's logged events into blocks; the truncates go into the first.
pub(crate) fn event_blocks(
    events: &[Incoming],
    truncates: &[Bytes],
    types: &[ColumnType],
) -> Vec<EventBlock> {
    let empty = || EventBlock::empty(types);
    let mut blocks = vec![EventBlock {
        truncates: truncates.iter().map(|b| b.to_vec()).collect(),
        ..empty()
    }];
    let mut size = 0;
    for e in events {
        if size > TARGET_BLOCK_BYTES {
            blocks.push(empty());
            size = 0;
        }
        let b = blocks.last_mut().expect("one block");
        size += b.push(&e.key, &e.seq, &e.sys, &e.event, 0);
    }
    blocks
}

impl EventBlock {
    pub(crate) fn empty(types: &[ColumnType]) -> EventBlock {
        EventBlock {
            columns: types.iter().map(new_column).collect(),
            ..Default::default()
        }
    }

    /// Appends one event (`extra` is or-ed into its flags); returns its raw size.
    pub(crate) fn push(
        &mut self,
        key: &[u8],
        seq: &[u8],
        sys: &[u8],
        event: &Event,
        extra: u8,
    ) -> usize {
        self.keys.push(key);
        self.seqs.push(seq);
        self.syss.push(sys);
        let mut flags = (event.kind == EventKind::Delete) as u8 | extra;
        if event.origin == Origin::Statement {
            flags |= STATEMENT;
        }
        if let Some(u) = &event.update {
            flags |= 2;
            if self.update_offsets.is_empty() {
                self.update_offsets.push(0);
            }
            self.update.extend_from_slice(u);
            self.update_offsets.push(self.update.len() as u32);
        }
        self.flags.push(flags);
        let mut size = key.len() + seq.len() + sys.len() + 13;
        for (c, v) in self.columns.iter_mut().zip(event.values.iter()) {
            size += c.push(v);
        }
        size
    }

    /// The events of the block; `width` is the table's number of output columns.
    pub fn events(&self, width: usize) -> Result<Vec<Incoming>> {
        self.events_from(width, width)
    }

    /// The events of a block of a table that has `width` output columns now and had
    /// `narrowest` when it was created: a block written before the table gained columns has
    /// fewer, and its events read NULL in the columns it lacks.
    pub fn events_from(&self, narrowest: usize, width: usize) -> Result<Vec<Incoming>> {
        if self.columns.len() < narrowest.min(width) || self.columns.len() > width {
            return Err(corrupt(format!(
                "block has {} columns, the table {width}",
                self.columns.len()
            )));
        }
        let missing = width - self.columns.len();
        self.events_valued(width, |i| {
            let mut values: Vec<Value> = self
                .columns
                .iter()
                .map(|c| c.get(i))
                .collect::<Result<_>>()?;
            values.extend(std::iter::repeat_n(Value::Null, missing));
            Ok(values.into())
        })
    }

    /// The events of the block, event `i` showing `values(i)`: a block stored without value
    /// columns (a cold page's history since format 12) takes them from elsewhere.
    pub(super) fn events_valued(
        &self,
        width: usize,
        mut values: impl FnMut(usize) -> Result<Row>,
    ) -> Result<Vec<Incoming>> {
        let n = self.flags.len();
        let mut out = Vec::with_capacity(n);
        let mut upd = 0usize;
        for i in 0..n {
            let values = values(i)?;
            let update = if self.flags[i] & 2 != 0 {
                let (a, b) = match (
                    self.update_offsets.get(upd),
                    self.update_offsets.get(upd + 1),
                ) {
                    (Some(&a), Some(&b)) if a <= b && (b as usize) <= self.update.len() => {
                        (a as usize, b as usize)
                    }
                    _ => return Err(corrupt("update lists out of range")),
                };
                upd += 1;
                let cols = &self.update[a..b];
                if cols.iter().any(|&c| c as usize >= width) {
                    return Err(corrupt("event updates a column the table does not have"));
                }
                Some(cols.into())
            } else {
                None
            };
            out.push(Incoming {
                key: self.keys.get(i)?.into(),
                seq: self.seqs.get(i)?.into(),
                sys: self.syss.get(i)?.into(),
                event: Event {
                    kind: if self.flags[i] & 1 != 0 {
                        EventKind::Delete
                    } else {
                        EventKind::Upsert
                    },
                    values,
                    update,
                    origin: if self.flags[i] & STATEMENT != 0 {
                        Origin::Statement
                    } else {
                        Origin::Feed
                    },
                },
            });
        }
        Ok(out)
    }
}
