//! A scan of a table that is not in memory, read on worker threads a span of keys each.
//!
//! The scan's own thread takes the spans of keys in key order ([`Store::key_span`]: their heads)
//! and hands each to the next free worker, which reads its rows from the key's pages into
//! batches; the scan returns each span's batches in turn, so the rows come in the order a scan
//! on one thread returns them, and nothing but a few batches per span waits in memory. A span
//! of keys is made larger or smaller after each, so that it gives about one batch: a span's
//! worker waits once it is [`QUEUED`] batches ahead of the one the scan returns from.

use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::mpsc::{self, Receiver, RecvError, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use arrow::record_batch::RecordBatch;
use asof_storage::{KeySpan, ScanCursor, ScanSpec, Store};

use super::{BatchShape, Filling};
use crate::error::{QueryError, Result};

/// Batches a span's worker may read ahead of the scan.
const QUEUED: usize = 4;

/// The keys of the first span; each next one has between [`MIN_SPAN_KEYS`] and
/// [`MAX_SPAN_KEYS`].
pub(super) const FIRST_SPAN_KEYS: usize = 64;
const MIN_SPAN_KEYS: usize = 8;
const MAX_SPAN_KEYS: usize = 256;

/// What a worker sends for a span: its batches, then the end, or an error.
enum Piece {
    Batch(RecordBatch),
    End,
    Failed(QueryError),
}

/// A span handed to a worker.
struct Job {
    span: KeySpan,
    pieces: SyncSender<Piece>,
}

/// The scan no longer takes a span's batches (it was dropped, or ended).
struct Stopped;

/// What every span is read with.
struct Shared {
    store: Store,
    spec: ScanSpec,
    /// Each span's cursor is a clone: it checks the generation the scan started on.
    cursor: ScanCursor,
    shape: BatchShape,
}

/// A span handed out, whose batches the scan has not all returned yet.
struct InFlight {
    keys: usize,
    rows: usize,
    pieces: Receiver<Piece>,
}

/// What [`SpanWorkers::next_batch`] gives.
pub(super) enum Next {
    Batch(RecordBatch),
    /// Every span handed out has been read, and no span follows.
    Done,
    /// Every span handed out has been read; the keys from this bound on are to be read by the
    /// scan itself: the table came into memory meanwhile (a commit in this process loaded it),
    /// so it is no longer read span by span.
    Rest(Bound<Vec<u8>>),
}

/// The workers of one scan and the spans handed to them.
pub(super) struct SpanWorkers {
    store: Store,
    table: String,
    /// Where the next span starts; `None` once the last one was handed out.
    next: Option<Bound<Vec<u8>>>,
    hi: Bound<Vec<u8>>,
    /// Where the scan itself goes on, once the spans handed out are read (see [`Next::Rest`]).
    rest: Option<Bound<Vec<u8>>>,
    span_keys: usize,
    /// The batch size, which a span's size is set by.
    batch_size: usize,
    jobs: Option<mpsc::Sender<Job>>,
    handles: Vec<JoinHandle<()>>,
    in_flight: VecDeque<InFlight>,
}

impl SpanWorkers {
    /// `workers` threads (at least one) that read the keys of `table` in `spec`'s range, from
    /// `first` (its first span, already read) on, each with a clone of `cursor`.
    pub(super) fn start(
        store: &Store,
        table: &str,
        (spec, cursor): (ScanSpec, ScanCursor),
        shape: BatchShape,
        first: KeySpan,
        workers: usize,
    ) -> Result<SpanWorkers> {
        let hi = spec.key_hi.clone();
        let batch_size = shape.batch_size;
        let shared = Arc::new(Shared {
            store: store.clone(),
            spec,
            cursor,
            shape,
        });
        let (jobs, queue) = mpsc::channel::<Job>();
        let queue = Arc::new(Mutex::new(queue));
        let mut handles = Vec::new();
        for _ in 0..workers.max(1) {
            let (shared, queue) = (shared.clone(), queue.clone());
            let spawned = std::thread::Builder::new()
                .name("asof-scan".into())
                .spawn(move || work(&shared, &queue));
            match spawned {
                Ok(h) => handles.push(h),
                // Fewer workers than asked for do the same work; none cannot.
                Err(e) if handles.is_empty() => {
                    return Err(QueryError::Invalid(format!(
                        "could not start a thread to scan `{table}`: {e}"
                    )))
                }
                Err(_) => break,
            }
        }
        let mut w = SpanWorkers {
            store: store.clone(),
            table: table.to_string(),
            next: None,
            hi,
            rest: None,
            span_keys: FIRST_SPAN_KEYS,
            batch_size,
            jobs: Some(jobs),
            handles,
            in_flight: VecDeque::new(),
        };
        w.hand(first);
        Ok(w)
    }

    /// Hands `span` to the workers; the next span starts after its last key.
    fn hand(&mut self, span: KeySpan) {
        self.next = span.last_key().map(|k| Bound::Excluded(k.to_vec()));
        let (pieces, arrive) = mpsc::sync_channel(QUEUED);
        let keys = span.keys();
        if let Some(jobs) = &self.jobs {
            // The workers end only when `jobs` is dropped, so the send does not fail; if it
            // did, the span's channel would close without its end, which reads as an error.
            let _ = jobs.send(Job { span, pieces });
        }
        self.in_flight.push_back(InFlight {
            keys,
            rows: 0,
            pieces: arrive,
        });
    }

    /// Hands out spans until each worker has one and one more waits.
    fn hand_out(&mut self) -> Result<()> {
        while self.in_flight.len() <= self.handles.len() {
            let Some(lo) = self.next.take() else {
                return Ok(());
            };
            let range = (
                lo.as_ref().map(|k| &k[..]),
                self.hi.as_ref().map(|k| &k[..]),
            );
            match self.store.key_span(&self.table, range, self.span_keys)? {
                Some(span) => self.hand(span),
                None => self.rest = Some(lo),
            }
        }
        Ok(())
    }

    /// The next batch in key order; `on_span` is told the keys of each span read to its end.
    pub(super) fn next_batch(&mut self, mut on_span: impl FnMut(usize)) -> Result<Next> {
        loop {
            self.hand_out()?;
            let Some(front) = self.in_flight.front_mut() else {
                return Ok(match self.rest.take() {
                    Some(rest) => Next::Rest(rest),
                    None => Next::Done,
                });
            };
            match front.pieces.recv() {
                Ok(Piece::Batch(b)) => {
                    front.rows += b.num_rows();
                    return Ok(Next::Batch(b));
                }
                Ok(Piece::End) => {
                    let (keys, rows) = (front.keys, front.rows);
                    self.in_flight.pop_front();
                    self.resize(rows);
                    on_span(keys);
                }
                Ok(Piece::Failed(e)) => return Err(e),
                Err(RecvError) => {
                    return Err(QueryError::Invalid(format!(
                        "a thread scanning `{}` stopped before the end of its keys",
                        self.table
                    )))
                }
            }
        }
    }

    /// Sizes the next spans after one that gave `rows` rows: about a batch each.
    fn resize(&mut self, rows: usize) {
        if rows < self.batch_size {
            self.span_keys = (self.span_keys * 2).min(MAX_SPAN_KEYS);
        } else if rows > 3 * self.batch_size {
            self.span_keys = (self.span_keys / 2).max(MIN_SPAN_KEYS);
        }
    }
}

impl Drop for SpanWorkers {
    fn drop(&mut self) {
        // The queue closes, and each span's channel: a worker's next send fails, it stops.
        self.jobs = None;
        self.in_flight.clear();
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}

/// A worker: reads the spans it takes from the queue until the queue closes.
fn work(shared: &Shared, queue: &Mutex<Receiver<Job>>) {
    loop {
        let job = match queue.lock() {
            Ok(q) => q.recv(),
            Err(_) => return,
        };
        let Ok(mut job) = job else {
            return;
        };
        // A span whose scan is gone (its channel closed) ends early; the worker goes on.
        let _ = read_span(shared, &mut job.span, &job.pieces);
    }
}

/// Reads `span` into batches and sends them, then its end (or an error, which ends it).
/// [`Stopped`] when the scan stopped listening.
fn read_span(
    shared: &Shared,
    span: &mut KeySpan,
    pieces: &SyncSender<Piece>,
) -> std::result::Result<(), Stopped> {
    let shape = &shared.shape;
    let mut cursor = shared.cursor.clone();
    while !cursor.is_done() {
        let mut cols = shape.cols();
        let mut n = 0usize;
        let mut fill = || -> Result<RecordBatch> {
            while n < shape.batch_size && !cursor.is_done() {
                let max_rows = shape.batch_size - n;
                let mut filling = Filling {
                    cols: &mut cols,
                    n: &mut n,
                    failed: None,
                };
                shared.store.read_span(span, |r| {
                    r.scan_into(&shared.spec, &mut cursor, max_rows, &mut filling)
                })??;
                if let Some(e) = filling.failed {
                    return Err(e);
                }
            }
            shape.finish(&mut cols, n)
        };
        match fill() {
            Ok(b) if b.num_rows() == 0 => {}
            Ok(b) => pieces.send(Piece::Batch(b)).map_err(|_| Stopped)?,
            Err(e) => {
                return pieces.send(Piece::Failed(e)).map_err(|_| Stopped);
            }
        }
    }
    pieces.send(Piece::End).map_err(|_| Stopped)
}
