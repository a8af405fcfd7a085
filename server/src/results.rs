//! Results a `GetFlightInfo` ran, held until the client's `DoGet` takes them, and prepared
//! statements with their bound parameters. A query's result is held as a stream, computed as
//! the `DoGet` reads it; other results (the lines of statements that changed something) whole.
//! What no client comes back for is dropped after [`KEEP`]; held results together stay under
//! [`RESULT_BUDGET`] bytes and [`MAX_STREAMS`] streams. Handles are a number and a keyed hash of
//! it, so that one client cannot guess another's.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use asof_query::sql::BatchStream;
use tonic::Status;

/// How long an unclaimed result or an unused prepared statement is kept.
pub(crate) const KEEP: Duration = Duration::from_secs(600);

/// The bytes of all results waiting for their `DoGet`, at most.
pub(crate) const RESULT_BUDGET: usize = 1 << 30;

/// Query results waiting for their `DoGet` as streams, at most: each keeps a query runtime and
/// the versions it reads.
pub(crate) const MAX_STREAMS: usize = 256;

/// A result's rows.
pub(crate) enum Rows {
    /// Read whole.
    Batches(Vec<RecordBatch>),
    /// Computed as they are read.
    Stream(BatchStream),
}

/// Prepared statements held at most; the least recently used goes first.
pub(crate) const MAX_PREPARED: usize = 10_000;

/// A query's result, waiting for its `DoGet`.
pub(crate) struct Pending {
    pub schema: SchemaRef,
    pub rows: Rows,
    bytes: usize,
    at: Instant,
}

/// A prepared statement: its text and the parameters bound to it last.
#[derive(Clone)]
pub(crate) struct Prepared {
    pub sql: String,
    pub params: Option<RecordBatch>,
    used: Instant,
}

/// A handle: a number, and the keyed hash that proves this server gave it out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Handle(u64);

/// What the server holds between calls, by handle.
pub(crate) struct Held {
    next: AtomicU64,
    key: std::collections::hash_map::RandomState,
    results: Mutex<HashMap<Handle, Pending>>,
    prepared: Mutex<HashMap<Handle, Prepared>>,
}

impl Default for Held {
    fn default() -> Self {
        Held {
            next: AtomicU64::new(0),
            key: std::collections::hash_map::RandomState::new(),
            results: Mutex::default(),
            prepared: Mutex::default(),
        }
    }
}

/// A lock whose holder never panics while holding it (nothing in this file does), so a
/// poisoned one still holds consistent maps.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Held {
    fn handle(&self) -> Handle {
        Handle(self.next.fetch_add(1, Ordering::Relaxed))
    }

    /// The bytes a client holds for `h`.
    pub(crate) fn bytes(&self, h: Handle) -> Vec<u8> {
        let mut out = h.0.to_be_bytes().to_vec();
        out.extend(self.key.hash_one(h.0).to_be_bytes());
        out
    }

    /// The handle in `bytes`, if this server gave it out.
    pub(crate) fn handle_of(&self, bytes: &[u8]) -> Option<Handle> {
        let (n, proof) = bytes.split_at_checked(8)?;
        let n = u64::from_be_bytes(n.try_into().ok()?);
        (proof == self.key.hash_one(n).to_be_bytes()).then_some(Handle(n))
    }

    /// Holds a result; returns its handle, or RESOURCE_EXHAUSTED when the results waiting for
    /// their clients would exceed [`RESULT_BUDGET`] or [`MAX_STREAMS`].
    pub(crate) fn put_result(&self, schema: SchemaRef, rows: Rows) -> Result<Handle, Status> {
        let bytes = match &rows {
            Rows::Batches(batches) => batches.iter().map(|b| b.get_array_memory_size()).sum(),
            Rows::Stream(_) => 0,
        };
        let mut results = lock(&self.results);
        results.retain(|_, p| p.at.elapsed() < KEEP);
        let held: usize = results.values().map(|p| p.bytes).sum();
        if held + bytes > RESULT_BUDGET {
            return Err(Status::resource_exhausted(format!(
                "results waiting for their clients hold {held} bytes, and this one {bytes}: more than {RESULT_BUDGET}; fetch results (DoGet) as they come, or ask for fewer rows"
            )));
        }
        let streams = results
            .values()
            .filter(|p| matches!(p.rows, Rows::Stream(_)))
            .count();
        if matches!(rows, Rows::Stream(_)) && streams >= MAX_STREAMS {
            return Err(Status::resource_exhausted(format!(
                "{streams} query results are waiting for their clients, the most this server holds; fetch results (DoGet) as they come"
            )));
        }
        let h = self.handle();
        results.insert(
            h,
            Pending {
                schema,
                rows,
                bytes,
                at: Instant::now(),
            },
        );
        Ok(h)
    }

    /// Takes the result of `h` (a result is read once).
    pub(crate) fn take_result(&self, h: Handle) -> Option<Pending> {
        lock(&self.results).remove(&h)
    }

    pub(crate) fn prepare(&self, sql: String) -> Handle {
        let h = self.handle();
        let mut prepared = lock(&self.prepared);
        prepared.retain(|_, p| p.used.elapsed() < KEEP);
        if prepared.len() >= MAX_PREPARED {
            if let Some(oldest) = prepared.iter().min_by_key(|(_, p)| p.used).map(|(h, _)| *h) {
                prepared.remove(&oldest);
            }
        }
        prepared.insert(
            h,
            Prepared {
                sql,
                params: None,
                used: Instant::now(),
            },
        );
        h
    }

    pub(crate) fn prepared(&self, h: Handle) -> Option<Prepared> {
        let mut prepared = lock(&self.prepared);
        let p = prepared.get_mut(&h)?;
        p.used = Instant::now();
        Some(p.clone())
    }

    /// Binds `params` to prepared statement `h`; false if there is none.
    pub(crate) fn bind(&self, h: Handle, params: RecordBatch) -> bool {
        match lock(&self.prepared).get_mut(&h) {
            Some(p) => {
                p.params = Some(params);
                p.used = Instant::now();
                true
            }
            None => false,
        }
    }

    pub(crate) fn close(&self, h: Handle) {
        lock(&self.prepared).remove(&h);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handle_reads_back_and_a_guessed_one_does_not() {
        let held = Held::default();
        let h = held.prepare("SELECT 1".into());
        let bytes = held.bytes(h);
        assert_eq!(held.handle_of(&bytes), Some(h));
        let mut guessed = bytes.clone();
        guessed[15] ^= 1;
        assert_eq!(held.handle_of(&guessed), None);
        assert_eq!(held.handle_of(&bytes[..8]), None);
        assert_eq!(Held::default().handle_of(&bytes), None, "another server's");
    }
}
