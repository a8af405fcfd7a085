//! How a process that runs asof as its main job sets up its memory ([`tune_process_memory`]).

/// Sets up this process's memory for asof; the `asof` binary, `examples/workload` and the
/// benchmarks call it first thing. Call it before starting threads.
///
/// On Linux it turns **transparent huge pages off** for the process
/// (`prctl(PR_SET_THP_DISABLE)`): with them, every first touch of memory made the kernel zero a
/// whole 2 MiB page; ingest spent a quarter of its time there (80k → 110k events/s on the 1M
/// workload without), and a point query's process peaked at 110 MB instead of 58 MB
/// (docs/PERFORMANCE.md). Elsewhere it does nothing.
///
/// It also tells the binary's mimalloc (version 3) **not to reclaim an abandoned page on a free**
/// ([`reuse_pages_where_allocated`]). The allocator's other settings are left at their defaults:
/// mimalloc returns freed memory to the system a second after it is freed (a script of queries
/// shortens that to 10 ms: `src/allocator.rs`). Keeping it instead (its `purge_delay = -1`, which
/// earlier versions set) saved the kernel's zeroing of fresh pages while huge pages were on; with
/// them off it saved nothing measurable and held up to 300 MB more at the peak of a 10M-event load.
pub fn tune_process_memory() -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: prctl with PR_SET_THP_DISABLE takes integer arguments and changes only a flag
        // of this process.
        let rc = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    reuse_pages_where_allocated();
    Ok(())
}

/// mimalloc's `mi_option_page_reclaim_on_free`: its place in the `mi_option_t` enum of version
/// 3's header (`libmimalloc-sys` does not name it; the test below checks its neighbours).
#[cfg(not(feature = "system-allocator"))]
const MI_OPTION_PAGE_RECLAIM_ON_FREE: libmimalloc_sys::mi_option_t = 35;

/// Sets mimalloc's `page_reclaim_on_free` to -1, unless the environment sets it
/// (`MIMALLOC_PAGE_RECLAIM_ON_FREE`, or its older name `MIMALLOC_ABANDONED_RECLAIM_ON_FREE`); on
/// the system allocator (`--features system-allocator`),
/// or in a process whose allocator is not mimalloc, it changes nothing that process uses.
///
/// Why. A commit folds its keys and encodes its pages on helper threads that end with it (4,100
/// of them over a 10M-event load), and what they allocate and the commit keeps (rows, bounds,
/// the nodes of the keys' maps) lies in pages that their end abandons. By default (0) a thread
/// that frees a block of an abandoned page it once owned takes the page back to allocate from,
/// however little of it is free; at -1 no free takes a page, and a thread that needs one takes an
/// abandoned page then (mimalloc's `free.c`). Measured on the workload (docs/PERFORMANCE.md,
/// session 57), at the same speed: the peak of a 3M-event load 381–385 MiB against 399–409; of a
/// 10M-event load 496–506 MiB against 503–512 (499 against 514 set from the environment),
/// within the hour's spread there.
fn reuse_pages_where_allocated() {
    #[cfg(not(feature = "system-allocator"))]
    if !user_set_reclaim() {
        // SAFETY: `mi_option_set` stores a value in mimalloc's table of options; it may be
        // called at any time from any thread.
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PAGE_RECLAIM_ON_FREE, -1) };
    }
}

/// Whether the environment sets mimalloc's `page_reclaim_on_free`.
#[cfg(not(feature = "system-allocator"))]
fn user_set_reclaim() -> bool {
    [
        "MIMALLOC_PAGE_RECLAIM_ON_FREE",
        "MIMALLOC_ABANDONED_RECLAIM_ON_FREE",
    ]
    .iter()
    .any(|v| std::env::var_os(v).is_some())
}

#[cfg(all(test, not(feature = "system-allocator")))]
mod tests {
    use super::*;

    #[test]
    fn the_option_set_is_mimallocs_page_reclaim_on_free_between_its_neighbours() {
        // SAFETY: reads of mimalloc's table of options.
        let get = |o| unsafe { libmimalloc_sys::mi_option_get(o) };
        // `generic_collect` (10,000) comes before it, `page_full_retain` (2) and
        // `page_max_candidates` (4) after: their defaults pin the place.
        for (option, default, env) in [
            (34, 10_000, "MIMALLOC_GENERIC_COLLECT"),
            (36, 2, "MIMALLOC_PAGE_FULL_RETAIN"),
            (37, 4, "MIMALLOC_PAGE_MAX_CANDIDATES"),
        ] {
            if std::env::var_os(env).is_none() {
                assert_eq!(
                    get(option),
                    default,
                    "option {option} is not {env}'s default"
                );
            }
        }
        if !user_set_reclaim() {
            reuse_pages_where_allocated();
            assert_eq!(get(MI_OPTION_PAGE_RECLAIM_ON_FREE), -1);
        }
    }
}
