//! The positions of a source table's rows that DML statements removed, each with the version
//! that removed it, as runs of consecutive positions.
//!
//! A statement removes runs: a `DELETE` of a range, a full refresh every row there was. Kept a
//! position at a time, the 10M rows a full refresh of an append flow's table removed were a map
//! of 10M entries, rebuilt at every open and copied into every read: `SELECT count(*)` of that
//! table took 7.9 s and 916 MB (docs/PERFORMANCE.md, session 43).

use std::collections::BTreeMap;

/// Removed positions, by run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Removed {
    /// Each run's first position, and its end (exclusive) and version. Runs do not overlap.
    runs: BTreeMap<u64, (u64, u64)>,
    /// How many positions, in all.
    count: u64,
}

impl Removed {
    /// The version that removed `pos`, if one did.
    pub fn get(&self, pos: u64) -> Option<u64> {
        self.runs
            .range(..=pos)
            .next_back()
            .filter(|(_, (end, _))| pos < *end)
            .map(|(_, (_, v))| *v)
    }

    /// Whether `pos` was removed.
    pub fn contains(&self, pos: u64) -> bool {
        self.get(pos).is_some()
    }

    /// How many positions were removed.
    pub fn len(&self) -> u64 {
        self.count
    }

    /// Records that `version` removed the positions `from..to`, those not removed already (the
    /// first removal is kept).
    pub fn insert_run(&mut self, from: u64, to: u64, version: u64) {
        let mut at = from;
        while at < to {
            // The run that holds `at`, or the next one after it.
            if let Some(end) = self
                .runs
                .range(..=at)
                .next_back()
                .map(|(_, (end, _))| *end)
                .filter(|&end| at < end)
            {
                at = end;
                continue;
            }
            let next = self.runs.range(at..).next().map_or(to, |(&s, _)| s.min(to));
            self.runs.insert(at, (next, version));
            self.count += next - at;
            at = next;
        }
    }

    /// Records that `version` removed `positions` (sorted or not).
    pub fn insert_all(&mut self, positions: &[u64], version: u64) {
        let mut sorted = positions.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        for run in sorted.chunk_by(|a, b| a + 1 == *b) {
            self.insert_run(run[0], run[run.len() - 1] + 1, version);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Whatever runs are inserted, in whatever order, each position reads the version of
        /// the first run that covered it, as a map of one entry per position does.
        #[test]
        fn runs_read_as_a_map_of_positions(
            runs in proptest::collection::vec((0u64..200, 0u64..40), 0..20)
        ) {
            let mut removed = Removed::default();
            let mut map = BTreeMap::new();
            for (version, (from, len)) in runs.into_iter().enumerate() {
                let version = version as u64;
                removed.insert_run(from, from + len, version);
                for p in from..from + len {
                    map.entry(p).or_insert(version);
                }
            }
            for p in 0..260 {
                prop_assert_eq!(removed.get(p), map.get(&p).copied(), "position {}", p);
            }
            prop_assert_eq!(removed.len(), map.len() as u64);
        }
    }

    #[test]
    fn positions_given_one_by_one_become_runs() {
        let mut removed = Removed::default();
        removed.insert_all(&[7, 3, 4, 5, 9, 4], 2);
        assert_eq!(removed.runs.len(), 3);
        assert_eq!(removed.len(), 5);
        assert_eq!(
            (0..11).filter(|&p| removed.contains(p)).collect::<Vec<_>>(),
            [3, 4, 5, 7, 9]
        );
        removed.insert_run(0, 10_000_000, 3);
        assert_eq!(removed.get(4), Some(2));
        assert_eq!(removed.get(8), Some(3));
        assert_eq!(removed.len(), 10_000_000);
    }
}
