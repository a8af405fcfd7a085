//! The query runtime a session and the streams of its results share ([`super::BatchStream`]).

use std::future::Future;
use std::sync::Arc;

use crate::error::{QueryError, Result};

/// A tokio runtime for DataFusion, shared by a session and its result streams: it runs as long as
/// one of them is alive. The last one shuts it down in the background, so that it may be dropped
/// anywhere, inside an async context too (a server drops an unclaimed result's stream there;
/// dropping a tokio runtime the usual way blocks, which tokio refuses there).
#[derive(Clone)]
pub(crate) struct QueryRuntime(Option<Arc<tokio::runtime::Runtime>>);

impl QueryRuntime {
    /// A runtime of two worker threads.
    pub(crate) fn new() -> Result<QueryRuntime> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| QueryError::Invalid(format!("cannot start the query runtime: {e}")))?;
        Ok(QueryRuntime(Some(Arc::new(runtime))))
    }

    /// Runs `f` to its end on the runtime, blocking the calling thread.
    pub(crate) fn block_on<F: Future>(&self, f: F) -> F::Output {
        self.0.as_ref().expect("a live runtime").block_on(f)
    }
}

impl Drop for QueryRuntime {
    fn drop(&mut self) {
        // `into_inner` gives the runtime to exactly one of copies dropped at once.
        if let Some(rt) = self.0.take().and_then(Arc::into_inner) {
            rt.shutdown_background();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_handle_dropped_inside_an_async_context_does_not_panic() {
        let outer = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let rt = QueryRuntime::new().unwrap();
        assert_eq!(rt.block_on(async { 1 + 1 }), 2);
        let copy = rt.clone();
        drop(rt);
        assert_eq!(copy.block_on(async { 3 }), 3, "a copy keeps it running");
        outer.block_on(async move { drop(copy) });
    }
}
