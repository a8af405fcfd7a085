//! Results a `GetFlightInfo` ran, held until the client's `DoGet` takes them, and prepared
//! statements with their bound parameters. A result no client comes for is dropped after
//! [`KEEP`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;

/// How long an unclaimed result is kept.
pub(crate) const KEEP: Duration = Duration::from_secs(600);

/// A query's result, waiting for its `DoGet`.
pub(crate) struct Pending {
    pub schema: SchemaRef,
    pub batches: Vec<RecordBatch>,
    at: Instant,
}

/// A prepared statement: its text and the parameters bound to it last.
#[derive(Clone)]
pub(crate) struct Prepared {
    pub sql: String,
    pub params: Option<RecordBatch>,
}

/// What the server holds between calls, by handle.
#[derive(Default)]
pub(crate) struct Held {
    next: AtomicU64,
    results: Mutex<HashMap<u64, Pending>>,
    prepared: Mutex<HashMap<u64, Prepared>>,
}

impl Held {
    fn handle(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// Holds a result; returns its handle.
    pub(crate) fn put_result(&self, schema: SchemaRef, batches: Vec<RecordBatch>) -> u64 {
        let h = self.handle();
        let mut results = self.results.lock().expect("not poisoned");
        results.retain(|_, p| p.at.elapsed() < KEEP);
        results.insert(
            h,
            Pending {
                schema,
                batches,
                at: Instant::now(),
            },
        );
        h
    }

    /// Takes the result of `handle` (a result is read once).
    pub(crate) fn take_result(&self, handle: u64) -> Option<Pending> {
        self.results.lock().expect("not poisoned").remove(&handle)
    }

    pub(crate) fn prepare(&self, sql: String) -> u64 {
        let h = self.handle();
        self.prepared
            .lock()
            .expect("not poisoned")
            .insert(h, Prepared { sql, params: None });
        h
    }

    pub(crate) fn prepared(&self, handle: u64) -> Option<Prepared> {
        self.prepared
            .lock()
            .expect("not poisoned")
            .get(&handle)
            .cloned()
    }

    /// Binds `params` to prepared statement `handle`; false if there is none.
    pub(crate) fn bind(&self, handle: u64, params: RecordBatch) -> bool {
        match self.prepared.lock().expect("not poisoned").get_mut(&handle) {
            Some(p) => {
                p.params = Some(params);
                true
            }
            None => false,
        }
    }

    pub(crate) fn close(&self, handle: u64) {
        self.prepared.lock().expect("not poisoned").remove(&handle);
    }
}

/// A handle as the bytes a client holds.
pub(crate) fn handle_bytes(h: u64) -> Vec<u8> {
    h.to_be_bytes().to_vec()
}

/// The handle in `bytes`, if they are one.
pub(crate) fn handle_of(bytes: &[u8]) -> Option<u64> {
    bytes.try_into().ok().map(u64::from_be_bytes)
}
