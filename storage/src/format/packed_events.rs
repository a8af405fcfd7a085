//! An event block as stored: [`encode_block`] and [`decode_block`]. Since format 12 (an `E`
//! record, a spill file's block, the events and versions of a page's history) it is packed: its
//! keys and sequences without offsets when they have one length, its value columns packed as a
//! page's rows' are ([`super::packed_rows`]), so that zstd finds more to share. Readers unpack it
//! into the same [`EventBlock`]; a block's format byte says whether it is packed
//! ([`super::archive::Layout`]), and blocks written before read as they are.

use rkyv::rancor;

use super::archive::{compress_as, decompress_as, Codec, Layout};
use super::event_block::EventBlock;
#[cfg(test)]
use super::lz4::Effort;
use super::packed_rows::{ByteStrings, PackedColumn};
use crate::error::{corrupt, Result};

/// An [`EventBlock`] as stored since format 12: FORMAT.md §3.5 for the bytes.
#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize, Debug)]
pub(super) struct PackedEvents {
    keys: ByteStrings,
    seqs: ByteStrings,
    syss: ByteStrings,
    flags: Vec<u8>,
    update_offsets: Vec<u32>,
    update: Vec<u32>,
    columns: Vec<PackedColumn>,
    truncates: Vec<Vec<u8>>,
}

/// `block` packed.
pub(super) fn pack(block: EventBlock) -> PackedEvents {
    PackedEvents {
        keys: ByteStrings::pack(block.keys),
        seqs: ByteStrings::pack(block.seqs),
        syss: ByteStrings::pack(block.syss),
        flags: block.flags,
        update_offsets: block.update_offsets,
        update: block.update,
        columns: block.columns.into_iter().map(PackedColumn::pack).collect(),
        truncates: block.truncates,
    }
}

/// The block archived by [`pack`] (decompressed), validated, as an [`EventBlock`]; its events'
/// lengths are checked as an event block's are, when its events are read.
pub(super) fn unpack(bytes: &[u8]) -> Result<EventBlock> {
    let bad = |e: rancor::Error| corrupt(format!("block fails validation: {e}"));
    rkyv::access::<ArchivedPackedEvents, rancor::Error>(bytes)
        .map_err(bad)?
        .unpack()
}

impl ArchivedPackedEvents {
    /// The block as an [`EventBlock`] (validated already, as part of its archive).
    pub(super) fn unpack(&self) -> Result<EventBlock> {
        let numbers = |v: &rkyv::vec::ArchivedVec<rkyv::rend::u32_le>| -> Vec<u32> {
            v.iter().map(|n| n.to_native()).collect()
        };
        Ok(EventBlock {
            keys: self.keys.unpack()?,
            seqs: self.seqs.unpack()?,
            syss: self.syss.unpack()?,
            flags: self.flags.to_vec(),
            update_offsets: numbers(&self.update_offsets),
            update: numbers(&self.update),
            columns: (self.columns.iter())
                .map(|c| c.unpack())
                .collect::<Result<_>>()?,
            truncates: self.truncates.iter().map(|t| t.to_vec()).collect(),
        })
    }
}

/// Packs, serialises and compresses a block (packed since format 12: `format/packed_events.rs`):
/// [`Codec::Small`] for the event log, [`Codec::Fast`] for what is read back soon.
pub(crate) fn encode_block(b: EventBlock, codec: Codec) -> Result<Vec<u8>> {
    let raw = rkyv::to_bytes::<rancor::Error>(&pack(b))
        .map_err(|e| corrupt(format!("cannot encode block: {e}")))?;
    compress_as(&raw, codec, Layout::Packed)
}

/// Decompresses and validates a stored block, packed or (written before format 12) plain.
pub(crate) fn decode_block(bytes: &[u8]) -> Result<EventBlock> {
    match decompress_as(bytes)? {
        (al, Layout::Packed) => unpack(&al),
        (al, Layout::Plain) => rkyv::from_bytes::<EventBlock, rancor::Error>(&al)
            .map_err(|e| corrupt(format!("block fails validation: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::super::event_block::event_blocks;
    use super::*;
    use crate::record::{Event, EventKind, Incoming, Origin};
    use crate::value::{ColumnType, Value};

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
            (
                Codec::Fast(Effort::Quick),
                encode_block(block(), Codec::Fast(Effort::Quick)).unwrap(),
            ),
            (Codec::Small, encode_block(block(), Codec::Small).unwrap()),
            (
                Codec::Fast(Effort::Quick),
                plain(Codec::Fast(Effort::Quick)),
            ),
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
