//! Work split in two: one half on a second thread, the other on the caller's. A commit's work
//! that reads shared state and changes nothing (encoding pages, heads and the log, reading heads)
//! runs this way on the machine's second core.

use std::sync::{Mutex, PoisonError};

/// Runs `theirs` on a second thread named `name` while this one runs `ours`, and returns both
/// results. If no thread can start, this one runs `theirs` after `ours`. A panic on the second
/// thread is resumed on this one.
pub(crate) fn both<A, B: Send>(
    name: &str,
    ours: impl FnOnce() -> A,
    theirs: impl FnOnce() -> B + Send,
) -> (A, B) {
    // Kept apart from the thread, so that this one can run it if the thread does not start.
    let theirs = Mutex::new(Some(theirs));
    let run = || {
        let f = theirs.lock().unwrap_or_else(PoisonError::into_inner).take();
        f.map(|f| f())
    };
    std::thread::scope(|scope| {
        let other = std::thread::Builder::new()
            .name(name.into())
            .spawn_scoped(scope, run)
            .ok();
        let a = ours();
        let b = match other {
            Some(other) => other
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            None => run(),
        };
        (a, b.expect("`theirs` runs once"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_halves_run_and_return_in_order_whichever_thread_runs_them() {
        let main = std::thread::current().id();
        let (a, b) = both(
            "asof-test",
            || (1, std::thread::current().id()),
            || (2, std::thread::current().id()),
        );
        assert_eq!((a.0, b.0), (1, 2));
        assert_eq!(a.1, main);
        assert_ne!(b.1, main);
    }

    #[test]
    fn a_panic_on_the_second_thread_reaches_the_caller() {
        let caught = std::panic::catch_unwind(|| both("asof-test", || 1, || -> u8 { panic!("x") }));
        assert!(caught.is_err());
    }
}
