//! What a commit costs, measured while it runs: its duration and the process's peak resident
//! memory (`CommitInfo::duration_us`, `CommitInfo::peak_memory_bytes`).
//!
//! Memory is the process's, as Linux reports it in `/proc/self/status`: `VmRSS` now and `VmHWM`,
//! the highest it has been. When the commit raised `VmHWM`, the new high is its peak, exactly.
//! When it did not (an earlier statement of the process went higher), the peak is the highest
//! `VmRSS` sampled at the commit's steps (after reading its source, after each part), a lower
//! bound. Elsewhere than on Linux there is no figure.

use std::time::Instant;

/// A commit's clock and memory probe, started when the commit starts.
pub(crate) struct CommitClock {
    started: Instant,
    /// `VmHWM` when the commit started.
    high_before: Option<u64>,
    /// The highest `VmRSS` sampled since.
    sampled: Option<u64>,
}

impl CommitClock {
    /// Starts measuring a commit.
    pub(crate) fn start() -> CommitClock {
        let (rss, high) = read_status();
        CommitClock {
            started: Instant::now(),
            high_before: high,
            sampled: rss,
        }
    }

    /// Samples the resident memory: a step of the commit is done.
    pub(crate) fn sample(&mut self) {
        let (rss, _) = read_status();
        self.sampled = self.sampled.max(rss);
    }

    /// Microseconds since the commit started.
    pub(crate) fn elapsed_us(&self) -> u64 {
        self.started.elapsed().as_micros() as u64
    }

    /// The process's peak resident memory while the commit ran, in bytes (module docs).
    pub(crate) fn peak_memory_bytes(&mut self) -> Option<u64> {
        self.sample();
        let (_, high) = read_status();
        match (self.high_before, high) {
            (Some(before), Some(now)) if now > before => Some(now),
            _ => self.sampled,
        }
    }
}

/// `VmRSS` and `VmHWM` of this process, in bytes, where the system reports them.
fn read_status() -> (Option<u64>, Option<u64>) {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return (None, None);
    };
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().strip_suffix("kB"))
            .and_then(|kb| kb.trim().parse::<u64>().ok())
            .map(|kb| kb * 1024)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn memory_touched_during_a_commit_is_in_its_peak() {
        let mut clock = CommitClock::start();
        let before = clock.sampled.unwrap();
        // 64 MiB, every page written, held until the peak is read.
        let held = std::hint::black_box(vec![1u8; 64 << 20]);
        clock.sample();
        let peak = clock.peak_memory_bytes().unwrap();
        assert!(
            peak >= before + (60 << 20),
            "peak {peak} against {before} before"
        );
        drop(held);
        assert!(clock.elapsed_us() > 0);
    }
}
