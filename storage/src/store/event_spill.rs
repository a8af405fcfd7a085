//! A large commit's events, parted by key: each event goes to one of a number of buckets by a
//! hash of its key, and a bucket's events are kept in a temporary file, in event blocks
//! (docs/FORMAT.md §3.5), until the bucket is read back whole. No key's events are in two
//! buckets, so a commit applied bucket by bucket counts its changes exactly
//! (`TableState::apply_part`), and what it holds in memory is two buckets (one applied, the next
//! read ahead) and a buffer per bucket (sized ahead for the events it holds before it is written
//! out), whatever the number of events. All buckets share one
//! temporary file.

use std::fs::File;
use std::hash::BuildHasher;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::thread::JoinHandle;

use crate::error::{Error, Result};
use crate::format::event_block::{EventBlock, TARGET_BLOCK_BYTES};
use crate::format::packed_events::{decode_block, encode_block};
use crate::format::{Codec, Effort};
use crate::ingest::SourceSlice;
use crate::record::Incoming;
use crate::value::ColumnType;

/// Events buffered per bucket before they go to its file, at most.
const BUFFER_EVENTS: usize = 4096;

/// Full buffers waiting for the thread that writes them, at most.
const BUFFERS_QUEUED: usize = 4;

/// The buckets of a commit's events ([`EventSpill::push_slice`], then [`EventSpill::buckets`]).
///
/// Two threads share the work with the commit's: one encodes and writes the buffers that fill
/// while the events are gathered, and one reads the next bucket back while the commit applies
/// the one before it (docs/PERFORMANCE.md, session 24).
pub(crate) struct EventSpill {
    types: Vec<ColumnType>,
    /// Each bucket's events not yet handed to the writer, in the block they go out in. An event
    /// goes into its block as it is pushed, a batch or a few after it was made (the writer,
    /// reading events a whole buffer later, waited on a cache miss at nearly every value: a
    /// third of its time, docs/PERFORMANCE.md session 47).
    buffered: Vec<Buffered>,
    /// Events a bucket buffers before writing them out.
    buffer: usize,
    events: u64,
    /// The thread that writes full buffers to the one temporary file every bucket shares (a
    /// file each would need thousands open at once for a refresh of a few hundred million
    /// rows), started when a first buffer fills.
    writer: Option<Writer>,
    /// What the writer wrote, once it is done ([`EventSpill::finish_writing`]).
    spilled: Option<Spilled>,
}

/// A bucket's block being filled.
struct Buffered {
    block: EventBlock,
    events: usize,
    /// Raw bytes of its events: a block goes out at [`TARGET_BLOCK_BYTES`] too.
    bytes: usize,
}

struct Writer {
    buffers: SyncSender<(usize, EventBlock)>,
    thread: JoinHandle<Result<Spilled>>,
}

/// What the writer wrote: the file, and where each bucket's blocks are in it (offset and
/// length).
struct Spilled {
    file: File,
    blocks: Vec<Vec<(u64, usize)>>,
}

fn io(e: std::io::Error) -> Error {
    Error::Io(format!("temporary file of a large commit: {e}"))
}

/// The result of a thread of the spill; its panic goes on in the caller.
fn joined<T>(thread: JoinHandle<T>) -> T {
    thread
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

impl EventSpill {
    /// Buckets for about `events` events of a table whose output columns have `types`, each to
    /// hold about `part` of them.
    pub(crate) fn new(events: u64, part: u64, types: Vec<ColumnType>) -> EventSpill {
        let n = events.div_ceil(part.max(1)).max(1) as usize;
        let buffer = (part as usize / n).clamp(1, BUFFER_EVENTS);
        EventSpill {
            buffered: (0..n).map(|_| Buffered::empty(&types, buffer)).collect(),
            buffer,
            types,
            events: 0,
            writer: None,
            spilled: None,
        }
    }

    /// Waits for the writer to write every full buffer: an error of the temporary file comes
    /// here, with the events gathered, before anything is applied. No event may be pushed after.
    pub(crate) fn finish_writing(&mut self) -> Result<()> {
        if let Some(w) = self.writer.take() {
            drop(w.buffers);
            self.spilled = Some(joined(w.thread)?);
        }
        Ok(())
    }

    /// How many events were pushed.
    pub(crate) fn len(&self) -> u64 {
        self.events
    }

    /// Which bucket a key's events go to.
    pub(crate) fn parting(&self) -> Parting {
        Parting(self.buffered.len() as u64)
    }

    /// Adds the events of a slice of source rows (in any order), their values taken from its
    /// columns.
    pub(crate) fn push_slice(&mut self, slice: &SourceSlice) -> Result<()> {
        let parting = self.parting();
        // Pushed a bucket at a time (each bucket's in their order): a bucket's block takes a
        // run of events while its columns' ends are in the cache, where events in the slice's
        // order went each to another of a hundred blocks, a cache miss per column.
        let bucket: Vec<u32> = (slice.heads.iter())
            .map(|h| parting.bucket_of(&h.key) as u32)
            .collect();
        let mut order: Vec<u32> = (0..slice.heads.len() as u32).collect();
        order.sort_by_key(|&j| bucket[j as usize]);
        for j in order {
            let (h, b) = (&slice.heads[j as usize], bucket[j as usize] as usize);
            self.events += 1;
            let to = &mut self.buffered[b];
            to.bytes += (to.block).push_cells(h.head(), &slice.cells, h.row);
            to.events += 1;
            if to.events >= self.buffer || to.bytes > TARGET_BLOCK_BYTES {
                self.write_out(b)?;
            }
        }
        Ok(())
    }

    /// Hands bucket `b`'s buffered events to the writer.
    fn write_out(&mut self, b: usize) -> Result<()> {
        if self.spilled.is_some() {
            return Err(Error::Io(
                "events pushed to a large commit's spill after it was written".into(),
            ));
        }
        let empty = Buffered::empty(&self.types, self.buffer);
        let block = std::mem::replace(&mut self.buffered[b], empty).block;
        let writer = match &mut self.writer {
            Some(w) => w,
            None => {
                let (buffers, queued) = sync_channel(BUFFERS_QUEUED);
                let n = self.buffered.len();
                let thread = std::thread::Builder::new()
                    .name("asof-spill-write".into())
                    .spawn(move || write_buffers(queued, n))
                    .map_err(io)?;
                self.writer.insert(Writer { buffers, thread })
            }
        };
        if writer.buffers.send((b, block)).is_err() {
            // The writer stopped on an error: that error is the one to report.
            let w = self.writer.take().expect("the writer");
            return Err(match joined(w.thread) {
                Err(e) => e,
                Ok(_) => io(std::io::ErrorKind::BrokenPipe.into()),
            });
        }
        Ok(())
    }

    /// The buckets' events, one bucket at a time, in the order of their numbers
    /// ([`Parting::bucket_of`]); within one, in key order, and a key's in the order they were
    /// pushed. The next bucket is read while the caller works on one.
    pub(crate) fn buckets(mut self) -> Buckets {
        let n = self.buffered.len();
        let spilled = self.finish_writing().map(|()| self.spilled.take());
        let (tx, rx) = sync_channel(0);
        let (width, buffered) = (self.types.len(), self.buffered);
        let thread = std::thread::Builder::new()
            .name("asof-spill-read".into())
            .spawn(move || read_buckets(spilled, buffered, width, &tx));
        match thread {
            Ok(thread) => Buckets {
                rx: Some(rx),
                thread: Some(thread),
                left: n,
            },
            Err(e) => {
                let (tx, rx) = sync_channel(1);
                let _ = tx.send(Err(io(e)));
                Buckets {
                    rx: Some(rx),
                    thread: None,
                    left: 1,
                }
            }
        }
    }
}

/// The writer's loop: each full block encoded at the end of the file.
fn write_buffers(buffers: Receiver<(usize, EventBlock)>, n: usize) -> Result<Spilled> {
    let mut file = BufWriter::new(tempfile::tempfile().map_err(io)?);
    let mut blocks = vec![Vec::new(); n];
    let mut written = 0u64;
    for (b, block) in buffers {
        let bytes = encode_block(block, Codec::Fast(Effort::Quick))?;
        file.write_all(&bytes).map_err(io)?;
        blocks[b].push((written, bytes.len()));
        written += bytes.len() as u64;
    }
    let file = file.into_inner().map_err(|e| io(e.into_error()))?;
    Ok(Spilled { file, blocks })
}

/// The reader's loop: each bucket's blocks read back, with the events it still buffered, sent
/// in order until the first error or until the receiver is gone.
fn read_buckets(
    spilled: Result<Option<Spilled>>,
    buffered: Vec<Buffered>,
    width: usize,
    to: &SyncSender<Result<Vec<Incoming>>>,
) {
    let (mut file, blocks) = match spilled {
        Ok(Some(s)) => (Some(BufReader::new(s.file)), s.blocks),
        Ok(None) => (None, Vec::new()),
        Err(e) => {
            let _ = to.send(Err(e));
            return;
        }
    };
    let mut blocks = blocks.into_iter();
    for buffered in buffered {
        let at = blocks.next().unwrap_or_default();
        let bucket = read_bucket(file.as_mut(), at, width).and_then(|mut events| {
            events.extend(buffered.block.events(width)?);
            // In key order (and in the order they came within a key), as a commit applies them.
            // Their keys sorted with their places, then the events put in order once: a
            // stable sort of the events themselves moved each of them a dozen times.
            events.sort_by_cached_key(|e| e.key.clone());
            Ok(events)
        });
        let failed = bucket.is_err();
        if to.send(bucket).is_err() || failed {
            return;
        }
    }
}

fn read_bucket(
    file: Option<&mut BufReader<File>>,
    blocks: Vec<(u64, usize)>,
    width: usize,
) -> Result<Vec<Incoming>> {
    let mut events = Vec::new();
    if blocks.is_empty() {
        return Ok(events);
    }
    let f = file.ok_or_else(|| io(std::io::ErrorKind::NotFound.into()))?;
    for (at, len) in blocks {
        let mut bytes = vec![0; len];
        f.seek(SeekFrom::Start(at)).map_err(io)?;
        f.read_exact(&mut bytes).map_err(io)?;
        events.extend(decode_block(&bytes)?.events(width)?);
    }
    Ok(events)
}

impl Buffered {
    /// A buffer with room for `events` events.
    fn empty(types: &[ColumnType], events: usize) -> Buffered {
        Buffered {
            block: EventBlock::with_capacity(types, events),
            events: 0,
            bytes: 0,
        }
    }
}

/// The buckets of an [`EventSpill`], each read while the one before it is used.
pub(crate) struct Buckets {
    /// Taken when dropped, so that the reader's next send fails and it ends.
    rx: Option<Receiver<Result<Vec<Incoming>>>>,
    thread: Option<JoinHandle<()>>,
    /// Buckets not received yet.
    left: usize,
}

impl Drop for Buckets {
    /// Waits for the reader to end (it ends at its next send), so that it reads nothing more
    /// once its buckets are no longer wanted.
    fn drop(&mut self) {
        drop(self.rx.take());
        if let Some(thread) = self.thread.take() {
            // A panic of the reader was reported to the caller already, or is of no use now.
            let _ = thread.join();
        }
    }
}

impl Iterator for Buckets {
    type Item = Result<Vec<Incoming>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        match self.rx.as_ref()?.recv() {
            Ok(bucket) => {
                self.left = if bucket.is_ok() { self.left - 1 } else { 0 };
                Some(bucket)
            }
            // The reader ended before its last bucket: it panicked, and so does the caller.
            Err(_) => {
                self.left = 0;
                self.thread.take().map(joined);
                Some(Err(io(std::io::ErrorKind::UnexpectedEof.into())))
            }
        }
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
        // A fast hash with a fixed seed: the buckets are this process's own (nothing stored
        // names one), and SipHash took 7% of the commit thread while a large load gathered its
        // events (docs/PERFORMANCE.md, session 46).
        let hasher = foldhash::fast::FixedState::with_seed(0);
        (hasher.hash_one(key) % self.0) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::fold::Bytes;
    use crate::format::source_cells::SourceCells;
    use crate::ingest::MadeHead;
    use crate::record::EventKind;
    use crate::value::Value;
    use std::collections::BTreeMap;

    /// A slice of source rows, an event each: `(key, seq)`, its one value the sequence.
    fn slice(events: &[(u8, u8)]) -> SourceSlice {
        let heads = (events.iter().enumerate())
            .map(|(row, &(key, seq))| MadeHead {
                key: Bytes::from(vec![key]),
                seq: Bytes::from(vec![seq]),
                sys: Bytes::from(&[][..]),
                kind: EventKind::Upsert,
                update: None,
                row,
            })
            .collect();
        let values = arrow::array::Int64Array::from_iter_values(
            events.iter().map(|&(_, seq)| i64::from(seq)),
        );
        SourceSlice {
            heads,
            cells: vec![SourceCells::new(&values, &ColumnType::Int64)],
        }
    }

    /// Every event of every bucket, in order: `(bucket, key, seq)`, checking that its value is
    /// its sequence.
    fn read_back(spill: EventSpill) -> Vec<(usize, u8, u8)> {
        let mut back = Vec::new();
        for (b, bucket) in spill.buckets().enumerate() {
            for e in bucket.unwrap() {
                assert_eq!(e.event.values[..], [Value::Int(i64::from(e.seq[0]))]);
                back.push((b, e.key[0], e.seq[0]));
            }
        }
        back
    }

    #[test]
    fn every_event_comes_back_once_and_no_key_is_in_two_buckets() {
        let mut spill = EventSpill::new(1000, 100, vec![ColumnType::Int64]);
        let events: Vec<(u8, u8)> = (0..1000u32)
            .map(|i| ((i % 37) as u8, (i / 37) as u8))
            .collect();
        spill.push_slice(&slice(&events)).unwrap();
        assert_eq!(spill.len(), 1000);
        let mut seen: BTreeMap<u8, usize> = BTreeMap::new();
        let mut back = Vec::new();
        for (b, key, seq) in read_back(spill) {
            assert_eq!(*seen.entry(key).or_insert(b), b, "key in two buckets");
            back.push((key, seq));
        }
        let mut want = events;
        back.sort();
        want.sort();
        assert_eq!(back, want);
        assert!(
            seen.values().max().unwrap() > &1,
            "the events went to several buckets"
        );
    }

    #[test]
    fn a_bucket_comes_back_in_key_order_and_a_key_in_the_order_pushed() {
        // Buffers of 10 events: most of each bucket goes through the writer's file, the rest
        // stays buffered, and both come back as one bucket.
        let mut spill = EventSpill::new(1000, 100, vec![ColumnType::Int64]);
        assert_eq!(spill.buffer, 10);
        // Keys pushed out of order, each key's sequences in the order 0, 1, 2...; pushed in
        // three slices.
        let events: Vec<(u8, u8)> = (0..999u32)
            .map(|i| ((36 - i % 37) as u8, (i / 37) as u8))
            .collect();
        for chunk in events.chunks(333) {
            spill.push_slice(&slice(chunk)).unwrap();
        }
        let back = read_back(spill);
        assert_eq!(back.len(), 999);
        for b in 0..=back.last().unwrap().0 {
            let got: Vec<(u8, u8)> = (back.iter())
                .filter(|e| e.0 == b)
                .map(|&(_, key, seq)| (key, seq))
                .collect();
            let mut want = got.clone();
            want.sort();
            assert_eq!(got, want, "key order, then the order pushed");
        }
    }

    #[test]
    fn buckets_left_unread_stop_the_reader_without_a_hang() {
        let mut spill = EventSpill::new(1000, 100, vec![ColumnType::Int64]);
        let events: Vec<(u8, u8)> = (0..1000u32).map(|i| ((i % 37) as u8, 0)).collect();
        spill.push_slice(&slice(&events)).unwrap();
        let mut buckets = spill.buckets();
        assert!(buckets.next().unwrap().is_ok());
        // Dropped after one bucket: the drop waits for the reader, whose next send fails.
        drop(buckets);
    }
}
