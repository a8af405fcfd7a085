//! The positions of a source table's rows that DML statements removed, each with the version
//! that removed it, as compressed bitmaps (roaring): one of every removed position, and one of
//! each version's.
//!
//! A statement removes runs (a `DELETE` of a range, a full refresh every row there was) or
//! scattered rows (an `UPDATE` of every tenth). Kept a position at a time, the 10M rows a full
//! refresh of an append flow's table removed were a map of 10M entries, rebuilt at every open and
//! copied into every read: `SELECT count(*)` of that table took 7.9 s and 916 MB; kept as runs
//! in a map, the 2M scattered rows an `UPDATE` and a `DELETE` removed took about 90 MB
//! (docs/PERFORMANCE.md, sessions 43 and 44). A bitmap holds a scattered position in about two
//! bytes, and 65,536 consecutive ones in 8 KiB.

use roaring::RoaringTreemap;

/// Removed positions, and which version removed each.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Removed {
    /// Every removed position.
    all: RoaringTreemap,
    /// The positions each version removed (each position in one), by version.
    by_version: Vec<(u64, RoaringTreemap)>,
}

impl Removed {
    /// The version that removed `pos`, if one did.
    pub fn get(&self, pos: u64) -> Option<u64> {
        if !self.all.contains(pos) {
            return None;
        }
        (self.by_version.iter())
            .find(|(_, b)| b.contains(pos))
            .map(|(v, _)| *v)
    }

    /// Whether `pos` was removed.
    pub fn contains(&self, pos: u64) -> bool {
        self.all.contains(pos)
    }

    /// How many positions were removed.
    pub fn len(&self) -> u64 {
        self.all.len()
    }

    /// Records that `version` removed the positions `from..to`, those not removed already (the
    /// first removal is kept).
    #[cfg(test)]
    pub fn insert_run(&mut self, from: u64, to: u64, version: u64) {
        self.insert_runs([(from, to)], version);
    }

    /// Records that `version` removed the positions of each run `from..to` (one statement's
    /// runs at once: each insertion costs a pass over the bitmaps' containers).
    pub fn insert_runs(&mut self, runs: impl IntoIterator<Item = (u64, u64)>, version: u64) {
        let mut new = RoaringTreemap::new();
        for (from, to) in runs {
            new.insert_range(from..to);
        }
        self.insert(new, version);
    }

    /// Records that `version` removed `positions` (sorted or not).
    pub fn insert_all(&mut self, positions: &[u64], version: u64) {
        self.insert(positions.iter().copied().collect(), version);
    }

    /// Records that `version` removed the positions of `new` not removed already.
    fn insert(&mut self, mut new: RoaringTreemap, version: u64) {
        new -= &self.all;
        if new.is_empty() {
            return;
        }
        self.all |= &new;
        match self.by_version.binary_search_by_key(&version, |(v, _)| *v) {
            Ok(i) => self.by_version[i].1 |= new,
            Err(i) => self.by_version.insert(i, (version, new)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

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
    fn positions_given_one_by_one_read_back_with_their_version() {
        let mut removed = Removed::default();
        removed.insert_all(&[7, 3, 4, 5, 9, 4], 2);
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
