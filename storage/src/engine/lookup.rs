//! Point as-of lookups on both timelines: "what did we believe at system time s about business time
//! b" for one key, at close to the same cost whatever the length of the key's history.
//!
//! The key's current rows tile the (business time × system time) plane with disjoint rectangles.
//! [`PointIndex`] splits them in two:
//!
//! - the rows still believed (no system end) are disjoint on business time, so they sit in one flat
//!   array sorted by business start, and one binary search finds the only candidate;
//! - the superseded rows (a closed system interval) go into a segment tree over the distinct
//!   system-time boundaries. Each row is stored in the O(log n) nodes that cover its system
//!   interval, and each node keeps its rows sorted by business start. The rows of one node are all
//!   alive during the node's whole span, so they are disjoint on business time and one binary search
//!   per node finds the answer.
//!
//! Everything is laid out flat (the tree's nodes are ranges of one array, and searches run over
//! arrays of 16-byte prefixes), because at 100,000 versions the cost of a lookup is its cache misses.
//! Superseded rows usually have short system intervals, so they sit near the leaves and the walk up
//! the tree meets few non-empty nodes.

use std::cmp::Ordering;

use super::fold::{Bytes, RowId};
use super::StoredRow;

/// The first 16 bytes of an encoded value, zero-padded, as a big-endian integer: most comparisons
/// end with one integer comparison.
type Prefix = u128;

fn prefix(b: &[u8]) -> Prefix {
    let mut p = [0u8; 16];
    let n = b.len().min(16);
    p[..n].copy_from_slice(&b[..n]);
    u128::from_be_bytes(p)
}

/// Every `SAMPLE`-th prefix of a [`SortedBytes`] is kept in a small array that stays in cache, so a
/// search over all of it touches a few lines of the big arrays instead of one per halving.
const SAMPLE: usize = 8;

/// Sorted encoded values: prefixes to search, and the full values for the rare tie.
#[derive(Default)]
struct SortedBytes {
    prefixes: Vec<Prefix>,
    full: Vec<Bytes>,
    samples: Vec<Prefix>,
}

impl SortedBytes {
    fn push(&mut self, b: Bytes) {
        let p = prefix(&b);
        if self.prefixes.len().is_multiple_of(SAMPLE) {
            self.samples.push(p);
        }
        self.prefixes.push(p);
        self.full.push(b);
    }

    fn len(&self) -> usize {
        self.prefixes.len()
    }

    /// How many of all the values are `<= q`.
    fn count_all_le(&self, qp: &Prefix, q: &[u8]) -> usize {
        // Sample k is value k * SAMPLE; find the last sample <= q, then search its block.
        let (mut l, mut h) = (0usize, self.samples.len());
        while l < h {
            let mid = l + (h - l) / 2;
            let le = match self.samples[mid].cmp(qp) {
                Ordering::Less => true,
                Ordering::Greater => false,
                Ordering::Equal => &self.full[mid * SAMPLE][..] <= q,
            };
            if le {
                l = mid + 1;
            } else {
                h = mid;
            }
        }
        let Some(k) = l.checked_sub(1) else {
            return 0;
        };
        let lo = k * SAMPLE;
        let hi = (lo + SAMPLE).min(self.len());
        lo + self.count_le(lo, hi, qp, q)
    }

    /// How many of the values in `lo..hi` are `<= q` (they are sorted, so this is a partition point).
    fn count_le(&self, lo: usize, hi: usize, qp: &Prefix, q: &[u8]) -> usize {
        let prefixes = &self.prefixes[lo..hi];
        let (mut l, mut h) = (0usize, prefixes.len());
        while l < h {
            let mid = l + (h - l) / 2;
            let le = match prefixes[mid].cmp(qp) {
                Ordering::Less => true,
                Ordering::Greater => false,
                Ordering::Equal => &self.full[lo + mid][..] <= q,
            };
            if le {
                l = mid + 1;
            } else {
                h = mid;
            }
        }
        l
    }
}

/// What a search needs of one row besides its start, in one place: the prefixes of its business
/// end and system start, and its id.
struct Entry {
    end: Prefix,
    since: Prefix,
    row: RowId,
    /// Whether the row has a business end (`end` is meaningless otherwise).
    bounded: bool,
}

/// Rows sorted by business start, disjoint on business time.
#[derive(Default)]
struct Tiling {
    starts: SortedBytes,
    entries: Vec<Entry>,
    /// The full business ends and system starts, for comparisons the prefixes cannot settle.
    ends: Vec<Option<Bytes>>,
    since: Vec<Bytes>,
}

/// `a < b`, settled by the prefixes unless they are equal (only then is `b` read in full).
fn less<'b>(ap: Prefix, a: &[u8], bp: Prefix, b: impl FnOnce() -> &'b [u8]) -> bool {
    match ap.cmp(&bp) {
        Ordering::Less => true,
        Ordering::Greater => false,
        Ordering::Equal => a < b(),
    }
}

impl Tiling {
    fn push(&mut self, start: Bytes, end: Option<Bytes>, since: Bytes, row: RowId) {
        self.starts.push(start);
        self.entries.push(Entry {
            end: end.as_deref().map_or(0, prefix),
            since: prefix(&since),
            row,
            bounded: end.is_some(),
        });
        self.ends.push(end);
        self.since.push(since);
    }

    /// The position in `lo..hi` of the row whose business interval contains `b`.
    fn find(&self, lo: usize, hi: usize, bp: Prefix, b: &[u8]) -> Option<usize> {
        let i = lo + self.starts.count_le(lo, hi, &bp, b).checked_sub(1)?;
        self.covers(i, bp, b).then_some(i)
    }

    /// The row whose business interval contains `b`, searching all rows.
    fn find_all(&self, bp: Prefix, b: &[u8]) -> Option<usize> {
        let i = self.starts.count_all_le(&bp, b).checked_sub(1)?;
        self.covers(i, bp, b).then_some(i)
    }

    fn covers(&self, i: usize, bp: Prefix, b: &[u8]) -> bool {
        let e = &self.entries[i];
        !e.bounded || less(bp, b, e.end, || self.ends[i].as_deref().unwrap_or_default())
    }

    /// Whether row `i` started on system time at or before `s`.
    fn since_at_or_before(&self, i: usize, sp: Prefix, s: &[u8]) -> bool {
        !less(sp, s, self.entries[i].since, || &self.since[i])
    }
}

/// The lookup index of one key. Built on first use; dropped whenever the key changes.
pub(crate) struct PointIndex {
    /// The distinct system-time boundaries of all rows, sorted.
    points: SortedBytes,
    /// The rows still believed.
    believed: Tiling,
    /// Leaves of the segment tree (a power of two, at least `points` long).
    size: usize,
    /// Node `n` holds the superseded rows `offsets[n]..offsets[n + 1]` of `superseded`.
    offsets: Vec<u32>,
    superseded: Tiling,
    /// The key's frozen rows, read back when the index was built, by id (see `cold`). A hash
    /// map: a binary search over 100,000 rows would cost a cache miss per step.
    pub cold: std::collections::HashMap<RowId, StoredRow>,
}

impl PointIndex {
    /// Row `id`, from `rows` or, if frozen, from the copy the index keeps.
    pub fn row<'a>(&'a self, rows: &'a super::RowStore, id: RowId) -> Option<&'a StoredRow> {
        rows.get(id).or_else(|| self.cold.get(&id))
    }

    /// Indexes the given rows (the key's rows of the current table).
    pub fn build<'a>(rows: impl Iterator<Item = (RowId, &'a StoredRow)> + Clone) -> PointIndex {
        let mut all: Vec<Bytes> = Vec::new();
        for (_, r) in rows.clone() {
            all.extend(r.sys_start.clone());
            all.extend(r.sys_end.clone());
        }
        all.sort();
        all.dedup();
        let rank = |p: &Option<Bytes>| match p {
            Some(p) => all.binary_search(p).expect("point is indexed"),
            None => all.len(),
        };
        let size = all.len().next_power_of_two().max(1);

        let mut believed: Vec<(Bytes, Option<Bytes>, Bytes, RowId)> = Vec::new();
        // (node, business start, end, system start, row) for every node a superseded row is in.
        let mut placed: Vec<(u32, Bytes, Option<Bytes>, Bytes, RowId)> = Vec::new();
        for (id, r) in rows {
            let start = r.start.clone().unwrap_or_default();
            let since = r.sys_start.clone().unwrap_or_default();
            if r.sys_end.is_none() {
                believed.push((start, r.end.clone(), since, id));
                continue;
            }
            let (mut l, mut h) = (rank(&r.sys_start) + size, rank(&r.sys_end) + size);
            let mut place = |node: usize| {
                placed.push((node as u32, start.clone(), r.end.clone(), since.clone(), id))
            };
            while l < h {
                if l & 1 == 1 {
                    place(l);
                    l += 1;
                }
                if h & 1 == 1 {
                    h -= 1;
                    place(h);
                }
                l >>= 1;
                h >>= 1;
            }
        }

        believed.sort_by(|a, b| a.0.cmp(&b.0));
        let mut tiling = Tiling::default();
        for (start, end, since, row) in believed {
            tiling.push(start, end, since, row);
        }

        placed.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
        let mut offsets = vec![0u32; 2 * size + 1];
        let mut superseded = Tiling::default();
        for (node, start, end, since, row) in placed {
            offsets[node as usize + 1] += 1;
            superseded.push(start, end, since, row);
        }
        for n in 1..offsets.len() {
            offsets[n] += offsets[n - 1];
        }

        let mut points = SortedBytes::default();
        for p in all {
            points.push(p);
        }
        PointIndex {
            points,
            believed: tiling,
            size,
            offsets,
            superseded,
            cold: Default::default(),
        }
    }

    /// The row alive at system time `s` whose business interval contains `b`.
    pub fn find(&self, b: &[u8], s: &[u8]) -> Option<RowId> {
        let (bp, sp) = (prefix(b), prefix(s));
        // The believed row covering b, if it was already believed at s, is the answer: rows alive
        // at one system time are disjoint on business time.
        if let Some(i) = self.believed.find_all(bp, b) {
            if self.believed.since_at_or_before(i, sp, s) {
                return Some(self.believed.entries[i].row);
            }
        }
        let leaf = self.points.count_all_le(&sp, s).checked_sub(1)?;
        let mut node = leaf + self.size;
        while node >= 1 {
            let (lo, hi) = (self.offsets[node] as usize, self.offsets[node + 1] as usize);
            if lo < hi {
                if let Some(i) = self.superseded.find(lo, hi, bp, b) {
                    return Some(self.superseded.entries[i].row);
                }
            }
            node >>= 1;
        }
        None
    }

    /// The believed row whose business interval contains `b` (a lookup at the current system time).
    pub fn find_now(&self, b: &[u8]) -> Option<RowId> {
        let i = self.believed.find_all(prefix(b), b)?;
        Some(self.believed.entries[i].row)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The sampled search counts what a plain scan counts, also for values longer than the
        /// prefix and values that differ only past it or in trailing zeros.
        #[test]
        fn sampled_search_counts_like_a_scan(
            mut values in proptest::collection::vec(
                proptest::collection::vec(prop_oneof![Just(0u8), Just(1u8), any::<u8>()], 0..20), 0..400),
            queries in proptest::collection::vec(
                proptest::collection::vec(prop_oneof![Just(0u8), Just(1u8), any::<u8>()], 0..20), 1..30),
        ) {
            values.sort();
            let mut sorted = SortedBytes::default();
            for v in &values {
                sorted.push(Bytes::from(&v[..]));
            }
            // Query with the stored values themselves as well as random ones.
            for q in queries.iter().chain(values.iter().step_by(7)) {
                let want = values.iter().filter(|v| v[..] <= q[..]).count();
                prop_assert_eq!(sorted.count_all_le(&prefix(q), q), want);
            }
        }
    }
}
