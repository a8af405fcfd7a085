//! Point as-of lookups on both timelines: "what did we believe at system time s about business time
//! b" for one key, in O(log² n) whatever the length of the key's history.
//!
//! The key's current rows tile the (business time × system time) plane with disjoint rectangles.
//! [`PointIndex`] is a segment tree over the key's distinct system-time boundaries; each row is
//! stored in the O(log n) nodes that cover its system interval, and each node keeps its rows sorted
//! by business start. The rows of one node are all alive during the node's whole span, so they are
//! disjoint on business time and one binary search per node finds the answer.

use super::fold::{Bytes, RowId};
use super::StoredRow;

struct Entry {
    /// The first 16 bytes of `start`, zero-padded: most comparisons end here, in the node's array.
    prefix: [u8; 16],
    start: Bytes,
    end: Option<Bytes>,
    row: RowId,
}

fn prefix(b: &[u8]) -> [u8; 16] {
    let mut p = [0u8; 16];
    let n = b.len().min(16);
    p[..n].copy_from_slice(&b[..n]);
    p
}

impl Entry {
    /// `start <= b`.
    fn starts_at_or_before(&self, bp: &[u8; 16], b: &[u8]) -> bool {
        match self.prefix.cmp(bp) {
            std::cmp::Ordering::Less => true,
            std::cmp::Ordering::Greater => false,
            std::cmp::Ordering::Equal => &self.start[..] <= b,
        }
    }
}

/// The lookup index of one key. Built on first use; dropped whenever the key changes.
pub(crate) struct PointIndex {
    points: Vec<Bytes>,
    size: usize,
    nodes: Vec<Vec<Entry>>,
}

impl PointIndex {
    /// Indexes the given rows (the key's rows of the current table).
    pub fn build<'a>(rows: impl Iterator<Item = (RowId, &'a StoredRow)> + Clone) -> PointIndex {
        let mut points: Vec<Bytes> = Vec::new();
        for (_, r) in rows.clone() {
            points.extend(r.sys_start.clone());
            points.extend(r.sys_end.clone());
        }
        points.sort();
        points.dedup();
        let size = points.len().next_power_of_two().max(1);
        let mut nodes: Vec<Vec<Entry>> = (0..2 * size).map(|_| Vec::new()).collect();
        let idx = |p: &Option<Bytes>| match p {
            Some(p) => points.binary_search(p).expect("point is indexed"),
            None => points.len(),
        };
        for (id, r) in rows {
            let (mut l, mut h) = (idx(&r.sys_start) + size, idx(&r.sys_end) + size);
            let start = r.start.clone().unwrap_or_default();
            let entry = || Entry {
                prefix: prefix(&start),
                start: start.clone(),
                end: r.end.clone(),
                row: id,
            };
            while l < h {
                if l & 1 == 1 {
                    nodes[l].push(entry());
                    l += 1;
                }
                if h & 1 == 1 {
                    h -= 1;
                    nodes[h].push(entry());
                }
                l >>= 1;
                h >>= 1;
            }
        }
        for n in &mut nodes {
            n.sort_by(|a, b| a.start.cmp(&b.start));
            n.shrink_to_fit();
        }
        PointIndex {
            points,
            size,
            nodes,
        }
    }

    /// The row alive at system time `s` whose business interval contains `b`.
    pub fn find(&self, b: &[u8], s: &[u8]) -> Option<RowId> {
        let leaf = self
            .points
            .partition_point(|p| &p[..] <= s)
            .checked_sub(1)?;
        let bp = prefix(b);
        let mut node = leaf + self.size;
        while node >= 1 {
            let list = &self.nodes[node];
            if list.is_empty() {
                node >>= 1;
                continue;
            }
            let i = list.partition_point(|e| e.starts_at_or_before(&bp, b));
            if i > 0 {
                let e = &list[i - 1];
                if e.end.as_deref().is_none_or(|end| b < end) {
                    return Some(e.row);
                }
            }
            node >>= 1;
        }
        None
    }
}
