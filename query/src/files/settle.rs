//! Files still being written are not read half-way: a new file is loaded only when its size and
//! modification time have not changed for [`SETTLE`]. A file last modified longer ago than that
//! is taken at once; for one modified more recently, the refresh waits until it is that old and
//! looks again, and a file that changed meanwhile is left for the next refresh. A writer that
//! pauses longer than that in the middle of a file is not caught by this: write the file under a
//! name starting with `.` or `_` (never read) or in another folder, and rename it in when it is
//! complete.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

/// How long apart the two listings are.
pub(super) const SETTLE: Duration = Duration::from_millis(100);

fn stamp(p: &PathBuf) -> Option<(u64, SystemTime)> {
    let m = std::fs::metadata(p).ok()?;
    Some((m.len(), m.modified().ok()?))
}

/// The files of `new` that did not change over [`SETTLE`] (see the module), in their order; and
/// how many were left for later.
pub(super) fn settled(new: Vec<PathBuf>) -> (Vec<PathBuf>, usize) {
    let now = SystemTime::now();
    let before: Vec<_> = new.iter().map(stamp).collect();
    // How long until the most recently modified file is SETTLE old.
    let wait = before
        .iter()
        .flatten()
        .map(|(_, modified)| {
            let age = now.duration_since(*modified).unwrap_or(Duration::ZERO);
            SETTLE.saturating_sub(age)
        })
        .max()
        .unwrap_or(Duration::ZERO);
    if wait > Duration::ZERO {
        std::thread::sleep(wait);
    }
    let n = new.len();
    let kept: Vec<PathBuf> = new
        .into_iter()
        .zip(before)
        .filter(|(p, b)| b.is_some() && (wait.is_zero() || stamp(p) == *b))
        .map(|(p, _)| p)
        .collect();
    let left = n - kept.len();
    (kept, left)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A file that grows while it is listed is left; a finished one is taken.
    #[test]
    fn a_file_that_grows_between_listings_is_left_for_later() {
        let dir = tempfile::tempdir().unwrap();
        let (done, growing) = (dir.path().join("a.csv"), dir.path().join("b.csv"));
        std::fs::write(&done, "x\n1\n").unwrap();
        let mut f = std::fs::File::create(&growing).unwrap();
        f.write_all(b"x\n").unwrap();
        let writer = std::thread::spawn(move || {
            for i in 0..40 {
                f.write_all(format!("{i}\n").as_bytes()).unwrap();
                f.flush().unwrap();
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        let (kept, left) = settled(vec![done.clone(), growing]);
        writer.join().unwrap();
        assert_eq!((kept, left), (vec![done], 1));
    }
}
