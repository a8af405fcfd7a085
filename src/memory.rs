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
/// The allocator's own settings are left at their defaults: the binary's mimalloc (version 3)
/// returns freed memory to the system a second after it is freed (a script of queries shortens
/// that to 10 ms: `src/allocator.rs`). Keeping it instead (its `purge_delay = -1`, which earlier
/// versions set) saved the kernel's zeroing of fresh pages while huge pages were on; with them off
/// it saved nothing measurable and held up to 300 MB more at the peak of a 10M-event load.
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
    Ok(())
}
