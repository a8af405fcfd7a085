//! Progress of long work (a full refresh, a large apply), reported to whoever embeds the store: the
//! CLI draws a bar on a terminal; a library user may log it or ignore it.

/// Receives the progress of long work. Calls come from the thread doing the work, between its
/// steps, so an implementation should be cheap (a bar that redraws at most a few times a second).
pub trait Progress: Send + Sync {
    /// Work named `task` starts, with `total` units (events, rows or bytes; 0 if unknown).
    fn begin(&self, task: &str, total: u64);
    /// `done` units of the current work are finished (a running total, not an increment).
    fn advance(&self, done: u64);
    /// The current work is finished.
    fn end(&self);
}
