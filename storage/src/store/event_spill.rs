//! A large commit's events, parted by key: each event goes to one of a number of buckets by a
//! hash of its key, and a bucket's events are kept in a temporary file, in event blocks
//! (docs/FORMAT.md §3.5), until the bucket is read back whole. No key's events are in two
//! buckets, so a commit applied bucket by bucket counts its changes exactly
//! (`TableState::apply_part`), and what it holds in memory is one bucket and a small buffer per
//! bucket, whatever the number of events. All buckets share one temporary file.

use std::fs::File;
use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};

use crate::error::{Error, Result};
use crate::format::event_block::{decode_block, encode_block, event_blocks};
use crate::record::Incoming;
use crate::value::ColumnType;

/// Events buffered per bucket before they go to its file, at most.
const BUFFER_EVENTS: usize = 4096;

/// The buckets of a commit's events ([`EventSpill::push`], then [`EventSpill::buckets`]).
pub(crate) struct EventSpill {
    types: Vec<ColumnType>,
    buckets: Vec<Bucket>,
    /// Events a bucket buffers before writing them out.
    buffer: usize,
    events: u64,
    /// One temporary file for every bucket (a file each would need thousands open at once for a
    /// refresh of a few hundred million rows), made when a first buffer fills.
    file: Option<BufWriter<File>>,
    /// Bytes written to it.
    written: u64,
}

struct Bucket {
    buffered: Vec<Incoming>,
    /// Where its blocks are in the file: offset and length.
    blocks: Vec<(u64, usize)>,
}

fn io(e: std::io::Error) -> Error {
    Error::Io(format!("temporary file of a large commit: {e}"))
}

impl EventSpill {
    /// Buckets for about `events` events of a table whose output columns have `types`, each to
    /// hold about `part` of them.
    pub(crate) fn new(events: u64, part: u64, types: Vec<ColumnType>) -> EventSpill {
        let n = events.div_ceil(part.max(1)).max(1) as usize;
        EventSpill {
            types,
            buckets: (0..n)
                .map(|_| Bucket {
                    buffered: Vec::new(),
                    blocks: Vec::new(),
                })
                .collect(),
            buffer: (part as usize / n).clamp(1, BUFFER_EVENTS),
            events: 0,
            file: None,
            written: 0,
        }
    }

    /// How many events were pushed.
    pub(crate) fn len(&self) -> u64 {
        self.events
    }

    /// Which bucket a key's events go to.
    pub(crate) fn parting(&self) -> Parting {
        Parting(self.buckets.len() as u64)
    }

    /// Adds events (in any order).
    pub(crate) fn push(&mut self, events: Vec<Incoming>) -> Result<()> {
        let parting = self.parting();
        for e in events {
            self.events += 1;
            let b = parting.bucket_of(&e.key);
            self.buckets[b].buffered.push(e);
            if self.buckets[b].buffered.len() >= self.buffer {
                self.write_out(b)?;
            }
        }
        Ok(())
    }

    /// Writes bucket `b`'s buffered events to the file, as event blocks.
    fn write_out(&mut self, b: usize) -> Result<()> {
        if self.file.is_none() {
            self.file = Some(BufWriter::new(tempfile::tempfile().map_err(io)?));
        }
        let f = self.file.as_mut().expect("just made");
        let bucket = &mut self.buckets[b];
        for blk in event_blocks(&std::mem::take(&mut bucket.buffered), &[], &self.types) {
            let bytes = encode_block(&blk)?;
            f.write_all(&bytes).map_err(io)?;
            bucket.blocks.push((self.written, bytes.len()));
            self.written += bytes.len() as u64;
        }
        Ok(())
    }

    /// The buckets' events, one bucket at a time, in the order of their numbers
    /// ([`Parting::bucket_of`]); in no particular order within one.
    pub(crate) fn buckets(self) -> impl Iterator<Item = Result<Vec<Incoming>>> {
        let width = self.types.len();
        let file = self
            .file
            .map(|f| f.into_inner().map_err(|e| io(e.into_error())))
            .transpose();
        let mut file = match file {
            Ok(f) => Ok(f.map(BufReader::new)),
            Err(e) => Err(e),
        };
        self.buckets.into_iter().map(move |b| {
            let mut events = Vec::new();
            if !b.blocks.is_empty() {
                let f = match &mut file {
                    Ok(Some(f)) => f,
                    Ok(None) => return Err(io(std::io::ErrorKind::NotFound.into())),
                    Err(e) => return Err(Error::Io(e.to_string())),
                };
                for (at, len) in b.blocks {
                    let mut bytes = vec![0; len];
                    f.seek(SeekFrom::Start(at)).map_err(io)?;
                    f.read_exact(&mut bytes).map_err(io)?;
                    events.extend(decode_block(&bytes)?.events(width)?);
                }
            }
            events.extend(b.buffered);
            Ok(events)
        })
    }
}

/// Which bucket of an [`EventSpill`] a key's events go to: one of `n`, by a hash of the key.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Parting(u64);

impl Parting {
    /// How many buckets there are.
    pub(crate) fn parts(self) -> usize {
        self.0 as usize
    }

    pub(crate) fn bucket_of(self, key: &[u8]) -> usize {
        let hasher = BuildHasherDefault::<DefaultHasher>::default();
        (hasher.hash_one(key) % self.0) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::fold::Bytes;
    use crate::record::{Event, EventKind, Origin};
    use std::collections::BTreeMap;

    fn event(key: u8, seq: u8) -> Incoming {
        Incoming {
            key: Bytes::from(vec![key]),
            seq: Bytes::from(vec![seq]),
            sys: Bytes::from(&[][..]),
            event: Event {
                kind: EventKind::Upsert,
                values: vec![crate::value::Value::Int(i64::from(seq))].into(),
                update: None,
                origin: Origin::Feed,
            },
        }
    }

    #[test]
    fn every_event_comes_back_once_and_no_key_is_in_two_buckets() {
        let types = vec![ColumnType::Int64];
        let mut spill = EventSpill::new(1000, 100, types);
        let events: Vec<Incoming> = (0..1000u32)
            .map(|i| event((i % 37) as u8, (i / 37) as u8))
            .collect();
        spill.push(events.clone()).unwrap();
        assert_eq!(spill.len(), 1000);
        let mut seen: BTreeMap<Vec<u8>, usize> = BTreeMap::new();
        let mut back = Vec::new();
        for (b, bucket) in spill.buckets().enumerate() {
            for e in bucket.unwrap() {
                assert_eq!(
                    *seen.entry(e.key.to_vec()).or_insert(b),
                    b,
                    "key in two buckets"
                );
                back.push((e.key.to_vec(), e.seq.to_vec()));
            }
        }
        let mut want: Vec<_> = events
            .iter()
            .map(|e| (e.key.to_vec(), e.seq.to_vec()))
            .collect();
        back.sort();
        want.sort();
        assert_eq!(back, want);
        assert!(
            seen.values().max().unwrap() > &1,
            "the events went to several buckets"
        );
    }
}
