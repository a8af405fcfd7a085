//! How a process that runs asof as its main job sets up its memory ([`tune_process_memory`]).

/// mimalloc's option `purge_delay` (its index in mimalloc's C enum of options, the same in its
/// versions 2 and 3).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Sets up this process's memory for asof; the `asof` binary, `examples/workload` and the
/// benchmarks call it first thing. Call it before starting threads. Two settings, each measured
/// (docs/PERFORMANCE.md):
///
/// - **Transparent huge pages off** for the process (Linux `prctl(PR_SET_THP_DISABLE)`): with
///   them, every first touch of memory made the kernel zero a whole 2 MiB page; ingest spent a
///   quarter of its time there (80k → 110k events/s on the 1M workload without), and a point
///   query's process peaked at 110 MB instead of 58 MB.
/// - **Freed memory kept** by mimalloc (`purge_delay = -1`), if it is the global allocator (as in
///   the binary): ingest frees and reallocates large per-commit buffers, and returning them made
///   the kernel zero fresh pages for every commit.
///
/// Elsewhere than on Linux only the second applies. Returns the error of the first, if any.
pub fn tune_process_memory() -> std::io::Result<()> {
    // SAFETY: sets a mimalloc option; takes plain integers.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1) };
    #[cfg(target_os = "linux")]
    {
        // SAFETY: prctl with PR_SET_THP_DISABLE takes integer arguments and changes only a flag
        // of this process.
        let rc = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}
