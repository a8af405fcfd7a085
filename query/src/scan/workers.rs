//! A scan of a table that is not in memory, read on worker threads a span of keys each.
//!
//! The scan's own thread reads the heads of the spans of keys in key order ([`Store::key_span`])
//! and hands each to the next free worker, which decodes them, reads the keys' pages and builds
//! batches; the scan returns each span's batches in turn, so the rows come in the order a scan
//! on one thread returns them, and only a few batches per span wait in memory. A span of keys is
//! made larger or smaller after each, so that it gives about one batch: a span's worker waits
//! once it is [`QUEUED`] batches ahead of the scan.

use std::collections::VecDeque;
use std::ops::Bound;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvError, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use arrow::record_batch::RecordBatch;
use asof_storage::{Caching, KeySpan, ScanCursor, ScanSpec, Store};

use super::{BatchShape, Filling};
use crate::error::{QueryError, Result};

/// Batches a span's worker may read ahead of the scan.
const QUEUED: usize = 2;

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

/// What every span of a scan is read with.
pub(super) struct SpanRead {
    pub(super) spec: ScanSpec,
    /// Whether its spans keep their keys' heads in the read cache.
    pub(super) caching: Caching,
    /// Each span's cursor is a clone: it checks the generation the scan started on.
    pub(super) cursor: ScanCursor,
    pub(super) shape: BatchShape,
}

/// What the workers of a scan share.
struct Shared {
    store: Store,
    table: String,
    read: SpanRead,
    /// Set when the scan is dropped: the spans still queued are not read.
    stopped: AtomicBool,
}

/// The scan no longer takes a span's batches (it was dropped).
struct Stopped;

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
    shared: Arc<Shared>,
    /// Where the next span starts; `None` once the last one was handed out.
    next: Option<Bound<Vec<u8>>>,
    /// Where the scan itself goes on, once the spans handed out are read (see [`Next::Rest`]).
    rest: Option<Bound<Vec<u8>>>,
    span_keys: usize,
    jobs: Option<mpsc::Sender<Job>>,
    handles: Vec<JoinHandle<()>>,
    in_flight: VecDeque<InFlight>,
}

impl SpanWorkers {
    /// Up to `workers` threads that read spans of `table` with `read`; `None` if not one could
    /// start (the scan then reads on its own thread). Hand them the first span with
    /// [`SpanWorkers::hand`].
    pub(super) fn spawn(
        store: &Store,
        table: &str,
        read: SpanRead,
        workers: usize,
    ) -> Option<SpanWorkers> {
        let shared = Arc::new(Shared {
            store: store.clone(),
            table: table.to_string(),
            read,
            stopped: AtomicBool::new(false),
        });
        let (jobs, queue) = mpsc::channel::<Job>();
        let queue = Arc::new(Mutex::new(queue));
        let handles: Vec<JoinHandle<()>> = (0..workers.max(1))
            .map_while(|_| {
                let (shared, queue) = (shared.clone(), queue.clone());
                std::thread::Builder::new()
                    .name("asof-scan".into())
                    .spawn(move || work(&shared, &queue))
                    .ok()
            })
            .collect();
        (!handles.is_empty()).then(|| SpanWorkers {
            shared,
            next: None,
            rest: None,
            span_keys: FIRST_SPAN_KEYS,
            jobs: Some(jobs),
            handles,
            in_flight: VecDeque::new(),
        })
    }

    /// Hands `span` to the workers; the next span starts after its last key.
    pub(super) fn hand(&mut self, span: KeySpan) {
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
            let hi = &self.shared.read.spec.key_hi;
            let range = (lo.as_ref().map(|k| &k[..]), hi.as_ref().map(|k| &k[..]));
            let (store, table) = (&self.shared.store, &self.shared.table);
            match store.key_span(table, range, self.span_keys, self.shared.read.caching)? {
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
                // A worker ends a span with its end or its error, a panic included: this is
                // a worker gone without either.
                Err(RecvError) => {
                    return Err(QueryError::ScanThread {
                        table: self.shared.table.clone(),
                        what: "it ended before the end of its keys".into(),
                    })
                }
            }
        }
    }

    /// Sizes the next spans after one that gave `rows` rows: about a batch each.
    fn resize(&mut self, rows: usize) {
        let batch = self.shared.read.shape.batch_size;
        if rows < batch {
            self.span_keys = (self.span_keys * 2).min(MAX_SPAN_KEYS);
        } else if rows > 3 * batch {
            self.span_keys = (self.span_keys / 2).max(MIN_SPAN_KEYS);
        }
    }
}

impl Drop for SpanWorkers {
    fn drop(&mut self) {
        // Spans still queued are skipped; the queue closes, and each span's channel: a worker's
        // next send fails, it stops.
        self.shared.stopped.store(true, Ordering::Relaxed);
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
        if shared.stopped.load(Ordering::Relaxed) {
            continue;
        }
        // A panic ends the span with its message (and the worker goes on).
        let read = catch_unwind(AssertUnwindSafe(|| {
            read_span(shared, &mut job.span, &job.pieces)
        }));
        if let Err(panic) = read {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "it panicked".into());
            let table = shared.table.clone();
            let _ = job
                .pieces
                .send(Piece::Failed(QueryError::ScanThread { table, what }));
        }
        // A span whose scan is gone (its channel closed) ends early; the worker goes on to
        // find the queue closed.
    }
}

/// Reads `span` into batches and sends them, then its end (or an error, which ends it).
/// [`Stopped`] when the scan stopped listening.
fn read_span(
    shared: &Shared,
    span: &mut KeySpan,
    pieces: &SyncSender<Piece>,
) -> std::result::Result<(), Stopped> {
    let SpanRead {
        spec,
        cursor,
        shape,
        ..
    } = &shared.read;
    let mut cursor = cursor.clone();
    while !cursor.is_done() {
        if shared.stopped.load(Ordering::Relaxed) {
            return Err(Stopped);
        }
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
                    r.scan_into(spec, &mut cursor, max_rows, &mut filling)
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
            Err(e) => return pieces.send(Piece::Failed(e)).map_err(|_| Stopped),
        }
    }
    pieces.send(Piece::End).map_err(|_| Stopped)
}
