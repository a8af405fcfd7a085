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

use super::columns::{new_column, ColumnData, VarBytes, NUMBER_SIZE};
use super::source_cells::SourceCells;
use crate::error::{corrupt, Result};
use crate::prefetch::prefetch_row;
use crate::record::{Bytes, Event, EventKind, Incoming, Origin};
use crate::value::{ColumnType, Row, Value};

/// The flag bit of an event a DML statement wrote.
const STATEMENT: u8 = 8;

/// About how many raw bytes one block holds before a new one is started: a block compresses
/// with zstd about an eighth smaller than eight blocks of 32 KiB (what blocks were before
/// session 41: the log of the 1M-event workload went from 34.0 to 29.8 MB), and a reader holds
/// one decoded block at a time.
pub(crate) const TARGET_BLOCK_BYTES: usize = 256 * 1024;

/// What an event is besides its values, borrowed.
#[derive(Clone, Copy)]
pub(crate) struct EventHead<'a> {
    pub key: &'a [u8],
    pub seq: &'a [u8],
    pub sys: &'a [u8],
    pub kind: EventKind,
    /// Its COLUMNS TO UPDATE list, if it has one.
    pub update: Option<&'a [u32]>,
}

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

/// How many events ahead of the one pushed into a block the next ones' values are asked for:
/// a commit's events were made long before they are logged, and each push waited on its cache
/// misses alone (docs/PERFORMANCE.md, session 51).
const AHEAD: usize = 8;

/// Cuts a commit's logged events into blocks; the truncates go into the first.
pub(crate) fn event_blocks(
    events: &[Incoming],
    truncates: &[Bytes],
    types: &[ColumnType],
) -> Vec<EventBlock> {
    let mut blocks = Blocks::new(truncates, types);
    for (i, e) in events.iter().enumerate() {
        if let Some(ahead) = events.get(i + AHEAD) {
            prefetch_row(&ahead.event.values);
        }
        blocks.push(e);
    }
    blocks.blocks
}

/// [`event_blocks`] of events without truncates, each let go of once it is in its block, while
/// its values are in the cache (let go of all at the end, each was a cache miss again).
pub(crate) fn event_blocks_taking(events: Vec<Incoming>, types: &[ColumnType]) -> Vec<EventBlock> {
    let mut blocks = Blocks::new(&[], types);
    let mut events = events.into_iter();
    loop {
        if let Some(ahead) = events.as_slice().get(AHEAD) {
            prefetch_row(&ahead.event.values);
        }
        let Some(e) = events.next() else { break };
        blocks.push(&e);
    }
    blocks.blocks
}

/// Blocks being cut from a run of events.
struct Blocks<'t> {
    types: &'t [ColumnType],
    /// The blocks cut, the last one being filled.
    blocks: Vec<EventBlock>,
    /// The raw size of the last block.
    size: usize,
}

impl<'t> Blocks<'t> {
    fn new(truncates: &[Bytes], types: &'t [ColumnType]) -> Self {
        Blocks {
            types,
            blocks: vec![EventBlock {
                truncates: truncates.iter().map(|b| b.to_vec()).collect(),
                ..EventBlock::empty(types)
            }],
            size: 0,
        }
    }

    fn push(&mut self, e: &Incoming) {
        if self.size > TARGET_BLOCK_BYTES {
            self.blocks.push(EventBlock::empty(self.types));
            self.size = 0;
        }
        let b = self.blocks.last_mut().expect("one block");
        self.size += b.push(&e.key, &e.seq, &e.sys, &e.event, 0);
    }
}

impl EventBlock {
    pub(crate) fn empty(types: &[ColumnType]) -> EventBlock {
        EventBlock {
            columns: types.iter().map(new_column).collect(),
            ..Default::default()
        }
    }

    /// An empty block with room for `events` events, or for as many as its size limit
    /// ([`TARGET_BLOCK_BYTES`]) lets in if fewer: one filled a cell at a time grew each column a
    /// dozen times, copying it every time.
    pub(crate) fn with_capacity(types: &[ColumnType], events: usize) -> EventBlock {
        // An event's raw size at least: its flags and the lengths of its key and sequences,
        // keys and sequences of one number (9 bytes each), and a number per column.
        let least = 13 + 2 * 9 + types.len() * NUMBER_SIZE;
        let events = events.min(TARGET_BLOCK_BYTES / least + 1);
        let mut block = EventBlock::empty(types);
        for strings in [&mut block.keys, &mut block.seqs, &mut block.syss] {
            strings.offsets.reserve(events + 1);
        }
        // The system sequences are left to grow: a table not BITEMPORAL has none.
        block.keys.data.reserve(events * 9);
        block.seqs.data.reserve(events * 9);
        block.flags.reserve(events);
        for c in &mut block.columns {
            c.reserve(events);
        }
        block
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
        let mut flags = extra;
        if event.origin == Origin::Statement {
            flags |= STATEMENT;
        }
        let head = EventHead {
            key,
            seq,
            sys,
            kind: event.kind,
            update: event.update.as_deref(),
        };
        let mut size = self.push_head(head, flags);
        for (c, v) in self.columns.iter_mut().zip(event.values.iter()) {
            size += c.push(v);
        }
        size
    }

    /// Appends the event of a feed `head` whose values are row `row` of `cells` (one per
    /// column), as [`EventBlock::push`] appends the same event made with its values; returns
    /// its raw size.
    pub(crate) fn push_cells(
        &mut self,
        head: EventHead,
        cells: &[SourceCells],
        row: usize,
    ) -> usize {
        let mut size = self.push_head(head, 0);
        for (c, cells) in self.columns.iter_mut().zip(cells) {
            size += c.push_cell(cells, row);
        }
        size
    }

    /// Appends an event's key, sequences and flags; returns their raw size.
    fn push_head(&mut self, head: EventHead, flags: u8) -> usize {
        let EventHead {
            key,
            seq,
            sys,
            kind,
            update,
        } = head;
        self.keys.push(key);
        self.seqs.push(seq);
        self.syss.push(sys);
        let mut flags = (kind == EventKind::Delete) as u8 | flags;
        if let Some(u) = update {
            flags |= 2;
            if self.update_offsets.is_empty() {
                self.update_offsets.push(0);
            }
            self.update.extend_from_slice(u);
            self.update_offsets.push(self.update.len() as u32);
        }
        self.flags.push(flags);
        key.len() + seq.len() + sys.len() + 13
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
            let mut values: smallvec::SmallVec<[Value; 16]> = self
                .columns
                .iter()
                .map(|c| c.get(i))
                .collect::<Result<_>>()?;
            values.extend(std::iter::repeat_n(Value::Null, missing));
            // Moved out of a slice, an iterator of known length: the shared row is the one
            // allocation (collected into a vector first, it was two, and a copy).
            Ok(values
                .iter_mut()
                .map(|v| std::mem::replace(v, Value::Null))
                .collect())
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
