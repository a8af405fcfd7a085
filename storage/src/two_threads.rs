//! Work split in two: one part on a second thread, the other on the caller's. A commit's work
//! that reads shared state and changes nothing (encoding pages, heads and the log, reading heads)
//! runs this way on the machine's second core: two different tasks side by side ([`both`]),
//! a list of like items that both threads take from until none is left ([`map`]), or a stream
//! of items made on one thread and used in order on the other ([`ahead`]).

use std::sync::atomic::{AtomicUsize, Ordering};
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

/// Items both threads take at a time: few enough that neither waits long for the other at
/// the end, enough that taking them costs nothing beside the work.
const TAKEN_AT_ONCE: usize = 4;

/// `f` of each of `items`, in their order, computed on this thread and a second one named
/// `name`, each taking the next few items not yet taken until none is left. Neither waits while
/// work is left, however unequal the items or however busy the second core is with other
/// threads (a fixed half each left the caller waiting for the other half). If no thread can
/// start, this one computes them all. A panic on the second thread is resumed on this one.
pub(crate) fn map<T: Send, R: Send>(
    name: &str,
    items: Vec<T>,
    f: impl Fn(T) -> R + Sync,
) -> Vec<R> {
    let n = items.len();
    let slots: Vec<Mutex<Option<T>>> = items.into_iter().map(|t| Mutex::new(Some(t))).collect();
    let next = AtomicUsize::new(0);
    let work = || {
        let mut done = Vec::new();
        loop {
            let from = next.fetch_add(TAKEN_AT_ONCE, Ordering::Relaxed);
            if from >= n {
                return done;
            }
            for (i, slot) in slots
                .iter()
                .enumerate()
                .take(n.min(from + TAKEN_AT_ONCE))
                .skip(from)
            {
                let item = slot.lock().unwrap_or_else(PoisonError::into_inner).take();
                done.push((i, f(item.expect("each item is taken once"))));
            }
        }
    };
    let (mut ours, theirs) = both(name, work, work);
    let mut out: Vec<Option<R>> = (0..n).map(|_| None).collect();
    for (i, r) in ours.drain(..).chain(theirs) {
        out[i] = Some(r);
    }
    out.into_iter()
        .map(|r| r.expect("every item is computed"))
        .collect()
}

/// How many items [`ahead`]'s second thread may have made that this one has not taken yet:
/// enough that neither thread waits for the other when one item takes longer than the next.
const MADE_AHEAD: usize = 4;

/// Hands each of `items` to `each` on this thread, in order, while a second thread named `name`
/// makes the next ones (`items` is an iterator that reads or computes them): making an item
/// overlaps using the one before. The second thread is at most [`MADE_AHEAD`] items ahead of
/// this one, so the items in memory stay few. The first error of `each` is returned, and the
/// second thread stops at the item it is making. If no thread can start, this one makes the
/// items. A panic on the second thread is resumed on this one.
pub(crate) fn ahead<T: Send, E>(
    name: &str,
    items: impl Iterator<Item = T> + Send,
    mut each: impl FnMut(T) -> Result<(), E>,
) -> Result<(), E> {
    // Kept apart from the thread, so that this one can make them if the thread does not start.
    let items = Mutex::new(Some(items));
    let take = || items.lock().unwrap_or_else(PoisonError::into_inner).take();
    std::thread::scope(|scope| {
        let (tx, rx) = std::sync::mpsc::sync_channel(MADE_AHEAD);
        let maker = std::thread::Builder::new()
            .name(name.into())
            .spawn_scoped(scope, move || {
                // Ends when the items do, or when this thread stopped taking them.
                for item in take().into_iter().flatten() {
                    if tx.send(item).is_err() {
                        return;
                    }
                }
            });
        let Ok(maker) = maker else {
            return take().into_iter().flatten().try_for_each(each);
        };
        let done = rx.iter().try_for_each(&mut each);
        // The maker, blocked on a full channel, sees it closed and stops.
        drop(rx);
        // A panic ends the channel like the last item: it must not read as a clean end.
        maker
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        done
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_map_on_two_threads_returns_each_result_in_the_order_of_its_item() {
        let items: Vec<u64> = (0..1001).collect();
        let out = map("asof-test", items, |i| {
            // Unequal items: the later ones take longer.
            (0..i * 10).fold(i, |a, b| a.wrapping_add(b % 7))
        });
        let expected: Vec<u64> = (0..1001)
            .map(|i: u64| (0..i * 10).fold(i, |a, b| a.wrapping_add(b % 7)))
            .collect();
        assert_eq!(out, expected);
        assert!(map("asof-test", Vec::<u8>::new(), |i| i).is_empty());
        assert_eq!(map("asof-test", vec![7u8], |i| i + 1), vec![8]);
    }

    #[test]
    fn both_threads_take_items_of_a_map() {
        let threads = map("asof-test", (0..64).collect::<Vec<u32>>(), |_| {
            std::thread::sleep(std::time::Duration::from_millis(2));
            std::thread::current().id()
        });
        let main = std::thread::current().id();
        assert!(threads.contains(&main));
        assert!(threads.iter().any(|t| *t != main));
    }

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
    fn items_made_ahead_reach_the_caller_in_order_from_the_second_thread() {
        let main = std::thread::current().id();
        let mut seen = Vec::new();
        let made = (0..100u32).map(|i| (i, std::thread::current().id()));
        let done: Result<(), ()> = ahead("asof-test", made, |(i, by)| {
            assert_ne!(by, main);
            seen.push(i);
            Ok(())
        });
        assert_eq!(done, Ok(()));
        assert_eq!(seen, (0..100).collect::<Vec<_>>());
    }

    #[test]
    fn an_error_taking_items_made_ahead_stops_the_maker() {
        let made = std::sync::atomic::AtomicUsize::new(0);
        let items = (0..1000u32).inspect(|_| {
            made.fetch_add(1, Ordering::Relaxed);
        });
        let mut taken = Vec::new();
        let done = ahead("asof-test", items, |i| {
            taken.push(i);
            if i == 3 {
                Err(format!("stop at {i}"))
            } else {
                Ok(())
            }
        });
        assert_eq!(done, Err("stop at 3".to_string()));
        assert_eq!(taken, vec![0, 1, 2, 3]);
        // The item taken, the one in the channel and the one being sent when it closed.
        assert!(made.load(Ordering::Relaxed) <= 4 + MADE_AHEAD + 1);
    }

    #[test]
    fn a_panic_making_items_ahead_reaches_the_caller() {
        let items = (0..10u32).map(|i| if i == 5 { panic!("x") } else { i });
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            ahead("asof-test", items, |_| Ok::<(), ()>(()))
        }));
        assert!(caught.is_err());
    }

    #[test]
    fn a_panic_on_the_second_thread_reaches_the_caller() {
        let caught = std::panic::catch_unwind(|| both("asof-test", || 1, || -> u8 { panic!("x") }));
        assert!(caught.is_err());
    }
}
