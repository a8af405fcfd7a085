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

/// Reports one piece of work to a [`Progress`], if there is one and the work is long enough to
/// be noticed; ends it when dropped, also on an error (or when the work is left unfinished).
pub struct Reporter(Option<std::sync::Arc<dyn Progress>>);

impl Reporter {
    /// Begins `task` of `total` units on `progress` if `total` is at least `min`.
    pub fn begin(
        progress: Option<&std::sync::Arc<dyn Progress>>,
        task: &str,
        total: u64,
        min: u64,
    ) -> Reporter {
        let p = progress.filter(|_| total >= min).cloned();
        if let Some(p) = &p {
            p.begin(task, total);
        }
        Reporter(p)
    }

    /// `done` units are finished.
    pub fn advance(&self, done: u64) {
        if let Some(p) = &self.0 {
            p.advance(done);
        }
    }
}

impl Drop for Reporter {
    fn drop(&mut self) {
        if let Some(p) = &self.0 {
            p.end();
        }
    }
}
