//! The writes of a commit applied in parts (`store/flow_commit.rs`), on a thread of their own:
//! while it writes one part's event blocks, pages, row directory and key heads, the commit
//! applies the next part. Every part's writes are ahead of the commit's record, which nothing
//! reads them before, and a part's keys are in no other part, so the commit never reads what is
//! still on its way (pages frozen before the commit, by a replay, are written before its first
//! part). The writes keep their order, and the commit's record is written only once
//! every write before it is done ([`PartWriter::finish`]).

use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::thread::{Scope, ScopedJoinHandle};

use super::commit::put_event_blocks_from;
use super::pages::write_pages;
use super::written_ahead::WrittenAhead;
use crate::engine::PageWrite;
use crate::error::{Error, Result};
use crate::kv::{KvStore, WriteBatch};
use crate::record::Incoming;
use crate::value::ColumnType;

/// Writes waiting for the thread, at most. A part sends its events, its pages, its row directory
/// and its keys' heads, 512 keys a batch: the commit goes on to the next part once all but the
/// last few of them are written.
const QUEUED: usize = 4;

/// One write of a part, in the order the part makes them.
pub(super) enum PartWrite {
    /// The events the part logs, as event blocks numbered on from the part before's.
    Events(Vec<Incoming>),
    /// Pages the part froze.
    Pages(Vec<PageWrite>),
    /// A batch as it is (key heads, a part of the row directory).
    Batch(WriteBatch),
}

/// The commit whose parts are written, and what its event blocks are made of.
pub(super) struct Target<'a> {
    pub kv: &'a dyn KvStore,
    pub table_id: u32,
    pub version: u64,
    pub types: Vec<ColumnType>,
}

/// What the writer wrote: the first event block of each part that logged events, and every
/// block, for the commit's digest.
pub(super) struct Written {
    pub starts: Vec<u32>,
    pub ahead: WrittenAhead,
}

/// The thread that writes a commit's parts ([`PartWriter::start`], [`PartWriter::send`],
/// [`PartWriter::finish`]).
pub(super) struct PartWriter<'scope> {
    writes: SyncSender<PartWrite>,
    thread: ScopedJoinHandle<'scope, Result<Written>>,
}

/// What [`PartWriter::send`] returns once the thread has stopped on an error: the error itself
/// comes from [`PartWriter::finish`].
fn stopped() -> Error {
    Error::Io("the writer of a large commit's parts stopped".into())
}

impl<'scope> PartWriter<'scope> {
    /// Starts the thread in `scope`.
    pub(super) fn start<'env>(
        scope: &'scope Scope<'scope, 'env>,
        target: Target<'env>,
    ) -> Result<PartWriter<'scope>> {
        let (writes, queued) = sync_channel(QUEUED);
        let thread = std::thread::Builder::new()
            .name("asof-part-write".into())
            .spawn_scoped(scope, move || write_parts(queued, target))
            .map_err(|e| Error::Io(format!("starting the writer of a large commit: {e}")))?;
        Ok(PartWriter { writes, thread })
    }

    /// Queues a write; waits while the thread is [`QUEUED`] writes behind.
    pub(super) fn send(&self, write: PartWrite) -> Result<()> {
        self.writes.send(write).map_err(|_| stopped())
    }

    /// Waits for every write queued, and returns what they wrote, or the first error: the
    /// thread's, or else `applied`'s (the commit's own work, which may have stopped first).
    pub(super) fn finish<T>(self, applied: Result<T>) -> Result<(T, Written)> {
        drop(self.writes);
        let written = self
            .thread
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        match (applied, written) {
            (Ok(t), Ok(w)) => Ok((t, w)),
            (_, Err(e)) | (Err(e), Ok(_)) => Err(e),
        }
    }
}

/// The thread's loop, until the commit has sent its last write or a write fails.
fn write_parts(writes: Receiver<PartWrite>, target: Target) -> Result<Written> {
    let mut written = Written {
        starts: Vec::new(),
        ahead: WrittenAhead::default(),
    };
    let mut chunk = 0u32;
    for write in writes {
        match write {
            PartWrite::Events(events) => {
                let mut b = WriteBatch::default();
                let at = (target.table_id, target.version);
                let from = chunk;
                chunk = put_event_blocks_from(&mut b, at, from, &target.types, events)?;
                if chunk > from {
                    written.starts.push(from);
                }
                written.ahead.add(&b)?;
                target.kv.write(b)?;
            }
            PartWrite::Pages(pages) => write_pages(target.kv, target.table_id, pages)?,
            PartWrite::Batch(b) => target.kv.write(b)?,
        }
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kv::MemKv;

    fn batch(key: &[u8]) -> WriteBatch {
        let mut b = WriteBatch::default();
        b.put(key.to_vec(), b"v".to_vec());
        b
    }

    fn target(kv: &dyn KvStore) -> Target<'_> {
        Target {
            kv,
            table_id: 1,
            version: 2,
            types: Vec::new(),
        }
    }

    #[test]
    fn every_write_sent_is_done_when_finish_returns() {
        let kv = MemKv::default();
        let ((), written) = std::thread::scope(|scope| {
            let writer = PartWriter::start(scope, target(&kv)).unwrap();
            for i in 0..100u8 {
                writer.send(PartWrite::Batch(batch(&[b'k', i]))).unwrap();
            }
            writer.finish(Ok(()))
        })
        .unwrap();
        assert!(written.starts.is_empty(), "no events were sent");
        assert_eq!(kv.scan_prefix(b"k").count(), 100);
    }

    /// Fails every write.
    struct Full;
    impl KvStore for Full {
        fn get(&self, _: &[u8]) -> Result<Option<Vec<u8>>> {
            Ok(None)
        }
        fn scan_prefix<'a>(
            &'a self,
            _: &[u8],
        ) -> Box<dyn Iterator<Item = Result<crate::kv::KvPair>> + 'a> {
            Box::new(std::iter::empty())
        }
        fn write(&self, _: WriteBatch) -> Result<()> {
            Err(Error::Io("disk full".into()))
        }
    }

    #[test]
    fn a_failed_write_is_the_error_finish_returns_and_later_sends_fail() {
        let e = std::thread::scope(|scope| {
            let writer = PartWriter::start(scope, target(&Full)).unwrap();
            // The first write fails; the thread stops, so that some later send fails too.
            let mut sent = Ok(());
            for i in 0..100u8 {
                sent = writer.send(PartWrite::Batch(batch(&[b'k', i])));
                if sent.is_err() {
                    break;
                }
            }
            writer.finish(sent).map(|_| ())
        })
        .unwrap_err();
        assert_eq!(e.to_string(), Error::Io("disk full".into()).to_string());
    }

    #[test]
    fn the_commits_own_error_is_returned_once_the_writes_are_done() {
        let kv = MemKv::default();
        let e = std::thread::scope(|scope| {
            let writer = PartWriter::start(scope, target(&kv)).unwrap();
            writer.send(PartWrite::Batch(batch(b"k1"))).unwrap();
            writer.finish::<()>(Err(Error::Io("a page is damaged".into())))
        })
        .map(|_| ())
        .unwrap_err();
        assert!(e.to_string().contains("a page is damaged"), "{e}");
        assert_eq!(kv.scan_prefix(b"k").count(), 1, "the write sent was done");
    }
}
