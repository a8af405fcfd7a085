//! Hints to the CPU to start loading memory that is about to be read: a commit touches each
//! event's and row's heap blocks once, far apart in memory, and each first touch was a cache
//! miss waited on alone (docs/PERFORMANCE.md, session 47).

use crate::value::{Row, Value};

/// [`prefetch`] for every cache line of the `len` bytes at `base`.
#[inline(always)]
pub(crate) fn prefetch_bytes(base: *const u8, len: usize) {
    for off in (0..len).step_by(64) {
        prefetch(base.wrapping_add(off));
    }
}

/// A hint to load the cache line at `p`; never faults, whatever `p` is.
#[inline(always)]
pub(crate) fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `prefetcht0` is a hint: it reads nothing architecturally and cannot fault, and SSE
    // is part of every x86_64 target.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// A hint to load the counts of a shared row (`Arc<[Value]>`): the first thing a clone or a
/// drop of it touches. They lie just before its values, in the line of the first value or the
/// one before.
#[inline(always)]
pub(crate) fn prefetch_counts(row: &std::sync::Arc<[Value]>) {
    let values = std::sync::Arc::as_ptr(row).cast::<u8>();
    prefetch(values.wrapping_sub(2 * std::mem::size_of::<usize>()));
}

/// A hint to load a shared row whole: its counts and its values (what pushing it into a block's
/// columns reads, and letting go of it writes).
#[inline(always)]
pub(crate) fn prefetch_row(row: &Row) {
    prefetch_counts(row);
    prefetch_bytes(row.as_ptr().cast(), std::mem::size_of_val::<[Value]>(row));
}
