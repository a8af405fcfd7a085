//! The stored form of a commit's events: a columnar block, archived with rkyv and validated
//! (bytecheck) when read, then compressed: zstd for the event log, LZ4 for a large commit's spill
//! files (`super::Codec`).
//!
//! Events are the durable log of a table: the in-memory state (timelines, row versions with the
//! commits that wrote and retired them) is a deterministic function of the commits' events, and is
//! rebuilt by replaying them on open. A block holds the events of one commit in columns: encoded
//! keys, sequences and system sequences, a flag byte, and one typed column per output column, so
//! that an event costs tens of bytes on disk, not hundreds. Blocks are cut near
//! [`TARGET_BLOCK_BYTES`] of raw data.

use rkyv::rancor;

use super::archive::{compress_as, decompress_as, Codec, Layout};
use super::columns::{new_column, ColumnData, VarBytes};
use super::packed_events;
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
    pub(super) fn empty(types: &[ColumnType]) -> EventBlock {
        EventBlock {
            columns: types.iter().map(new_column).collect(),
            ..Default::default()
        }
    }

    /// Appends one event (`extra` is or-ed into its flags); returns its raw size.
    pub(super) fn push(
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

/// Packs, serialises and compresses a block (packed since format 12: `format/packed_events.rs`):
/// [`Codec::Small`] for the event log, [`Codec::Fast`] for what is read back soon.
pub(crate) fn encode_block(b: EventBlock, codec: Codec) -> Result<Vec<u8>> {
    let raw = rkyv::to_bytes::<rancor::Error>(&packed_events::pack(b))
        .map_err(|e| corrupt(format!("cannot encode block: {e}")))?;
    compress_as(&raw, codec, Layout::Packed)
}

/// Decompresses and validates a stored block, packed or (written before format 12) plain.
pub(crate) fn decode_block(bytes: &[u8]) -> Result<EventBlock> {
    match decompress_as(bytes)? {
        (al, Layout::Packed) => packed_events::unpack(&al),
        (al, Layout::Plain) => rkyv::from_bytes::<EventBlock, rancor::Error>(&al)
            .map_err(|e| corrupt(format!("block fails validation: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Events of `n` keys, ids and sequences encoded as the engine encodes integers (nine
    /// bytes), an integer and a string value each, a NULL in every seventh.
    fn numbered_events(n: i64) -> Vec<Incoming> {
        let int = |i: i64| {
            let mut out = Vec::new();
            crate::keycodec::encode_value(&Value::Int(i), &ColumnType::Int64, &mut out).unwrap();
            out
        };
        (0..n)
            .map(|i| Incoming {
                key: int(i % 100).into(),
                seq: int(1_700_000_000_000_000 + 1000 * i).into(),
                sys: int(1_700_000_000_000_000 + 1000 * i).into(),
                event: Event {
                    kind: EventKind::Upsert,
                    values: vec![
                        Value::Int(i % 100),
                        if i % 7 == 0 {
                            Value::Null
                        } else {
                            Value::Int(i * 31 % 1000)
                        },
                        Value::Str(format!("s{}", i % 50).into()),
                    ]
                    .into(),
                    update: None,
                    origin: Origin::Feed,
                },
            })
            .collect()
    }

    #[test]
    fn a_packed_block_reads_back_the_events_of_a_plain_one_in_fewer_bytes() {
        let types = [ColumnType::Int64, ColumnType::Int64, ColumnType::Utf8];
        let events = numbered_events(2000);
        let blocks = event_blocks(&events, &[], &types);
        assert_eq!(blocks.len(), 1);
        let block = blocks.into_iter().next().unwrap();
        let plain = super::super::archive::compress(
            &rkyv::to_bytes::<rancor::Error>(&block).unwrap(),
            Codec::Small,
        )
        .unwrap();
        let packed = encode_block(block, Codec::Small).unwrap();
        let (a, b) = (
            decode_block(&plain).unwrap(),
            decode_block(&packed).unwrap(),
        );
        let (a, b) = (a.events(3).unwrap(), b.events(3).unwrap());
        assert_eq!(b.len(), 2000);
        for ((x, y), want) in a.iter().zip(&b).zip(&events) {
            for e in [x, y] {
                assert_eq!((&e.key, &e.seq, &e.sys), (&want.key, &want.seq, &want.sys));
                assert_eq!(e.event.values[..], want.event.values[..]);
            }
        }
        assert!(
            packed.len() * 10 < plain.len() * 9,
            "packed {} against plain {}",
            packed.len(),
            plain.len()
        );
    }

    #[test]
    fn blocks_round_trip_and_garbage_is_an_error() {
        let types = vec![
            ColumnType::Int64,
            ColumnType::Utf8,
            ColumnType::ListUtf8,
            ColumnType::Decimal128 {
                precision: 10,
                scale: 2,
            },
        ];
        let ev = |k: u8, del: bool, upd: Option<Vec<u32>>| Incoming {
            key: vec![1, k].into(),
            seq: vec![1, 2, 3].into(),
            sys: Vec::new().into(),
            event: Event {
                kind: if del {
                    EventKind::Delete
                } else {
                    EventKind::Upsert
                },
                values: vec![
                    Value::Int(k as i64),
                    Value::Str("é".into()),
                    Value::List(vec![Some("a".into()), None].into()),
                    Value::Decimal(-5),
                ]
                .into(),
                update: upd.map(Into::into),
                origin: if k == 3 {
                    Origin::Statement
                } else {
                    Origin::Feed
                },
            },
        };
        let events = vec![
            ev(1, false, None),
            ev(2, true, Some(vec![0, 2])),
            ev(3, false, Some(vec![])),
        ];
        let block = || {
            let blocks = event_blocks(&events, &[vec![9u8].into()], &types);
            blocks.into_iter().next().unwrap()
        };
        // Packed (format 12), and plain as blocks were written before.
        let plain = |codec| {
            let raw = rkyv::to_bytes::<rancor::Error>(&block()).unwrap();
            super::super::archive::compress(&raw, codec).unwrap()
        };
        for (codec, bytes) in [
            (Codec::Fast, encode_block(block(), Codec::Fast).unwrap()),
            (Codec::Small, encode_block(block(), Codec::Small).unwrap()),
            (Codec::Fast, plain(Codec::Fast)),
            (Codec::Small, plain(Codec::Small)),
        ] {
            let _ = codec;
            let back = decode_block(&bytes).unwrap();
            let got = back.events(types.len()).unwrap();
            assert_eq!(got.len(), 3);
            for (a, b) in got.iter().zip(&events) {
                assert_eq!(
                    (
                        &a.key,
                        &a.seq,
                        a.event.kind,
                        &a.event.update,
                        a.event.origin
                    ),
                    (
                        &b.key,
                        &b.seq,
                        b.event.kind,
                        &b.event.update,
                        b.event.origin
                    )
                );
                assert_eq!(a.event.values[..], b.event.values[..]);
            }
            assert_eq!(back.truncates, vec![vec![9u8]]);
            for bad in [
                vec![],
                vec![7u8, 1, 2],
                vec![1u8, 255, 255, 255, 255, 0],
                bytes[..bytes.len() / 2].to_vec(),
            ] {
                assert!(decode_block(&bad).is_err());
            }
        }
    }
}
