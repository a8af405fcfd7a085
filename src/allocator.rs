//! The binary's allocator, mimalloc, and how soon it hands freed memory back to the system.
//!
//! mimalloc (version 3) keeps freed memory for `purge_delay` milliseconds, 1,000 by default,
//! before it returns it, so that memory freed and wanted again soon is not returned and faulted
//! back in; and the first return it schedules holds back the later ones until it is due. Queries
//! that stream a large table through a sort, a grouping or a merge of spilled runs free and
//! allocate batches all the time, and what waits out the delay was a third of their peak (the 10M
//! table's `ORDER BY` to Parquet: 353 MB with the default, 237 MB at 10 ms). Statements that
//! write keep the default: at 1–10 ms the 10M load ran 8–13% slower (docs/PERFORMANCE.md,
//! session 45).

#[cfg(not(feature = "system-allocator"))]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The purge delay [`purge_quickly`] sets, in milliseconds (mimalloc version 2's default). On
/// the 10M table: `GROUP BY` 212 MB and `ORDER BY` 237 MB, about a tenth slower than at
/// 1,000 ms; `count(*)` as fast. 1 ms held a few MB less and made `count(*)` 8% slower.
#[cfg(not(feature = "system-allocator"))]
const QUICK_PURGE_MS: std::os::raw::c_long = 10;

/// mimalloc's `mi_option_purge_delay`: its place in the `mi_option_t` enum of mimalloc's
/// header, which keeps retired options as placeholders so that places do not move;
/// `libmimalloc-sys` does not name this one.
#[cfg(not(feature = "system-allocator"))]
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// From now on, freed memory goes back to the system after [`QUICK_PURGE_MS`]; the binary
/// calls it before it opens a store to run a script of queries (called later, it waits for a
/// return scheduled already, up to a second). A delay the user set in the environment
/// (`MIMALLOC_PURGE_DELAY`, or its older name `MIMALLOC_RESET_DELAY`) wins; on the system
/// allocator (`--features system-allocator`) this does nothing.
pub(crate) fn purge_quickly() {
    #[cfg(not(feature = "system-allocator"))]
    if !user_set_delay() {
        // SAFETY: `mi_option_set` stores a value in mimalloc's table of options; it may be
        // called at any time from any thread.
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, QUICK_PURGE_MS) };
    }
}

/// Whether the environment sets mimalloc's purge delay.
#[cfg(not(feature = "system-allocator"))]
fn user_set_delay() -> bool {
    ["MIMALLOC_PURGE_DELAY", "MIMALLOC_RESET_DELAY"]
        .iter()
        .any(|v| std::env::var_os(v).is_some())
}

#[cfg(all(test, not(feature = "system-allocator")))]
mod tests {
    use super::*;

    #[test]
    fn the_option_set_is_mimallocs_purge_delay() {
        if user_set_delay() {
            return;
        }
        // SAFETY: reads and writes of mimalloc's table of options.
        unsafe {
            assert_eq!(
                libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY),
                1_000,
                "option 15 is not at the purge delay's default (version 3's 1,000 ms)"
            );
        }
        purge_quickly();
        // SAFETY: as above.
        let quick = unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) };
        assert_eq!(quick, QUICK_PURGE_MS);
    }
}
