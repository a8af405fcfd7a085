//! What a selection on one timeline matches: a row by its interval, a page by its zone's
//! extent ([`TimeFilter`]), on bounds encoded with [`crate::keycodec`].

use std::cmp::Ordering;
use std::ops::Bound;

use crate::format::ranked::RankedFilter;
use crate::format::zone::Extent;
use crate::keycodec::cmp_encoded as cmp_bytes;

/// Which rows to read, on business and system time. Bounds are encoded with
/// [`crate::keycodec`] in the type of the sequence (resp. system sequence).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum TimeFilter {
    /// Every row.
    #[default]
    All,
    /// Rows whose interval contains `t`: `start <= t < end`.
    AsOf(Vec<u8>),
    /// Rows whose interval overlaps `[a, b)`.
    FromTo(Vec<u8>, Vec<u8>),
    /// Rows whose interval overlaps `[a, b]`.
    Between(Vec<u8>, Vec<u8>),
    /// Rows whose interval starts below `start` and ends above `end` (an open end is above
    /// everything): what comparisons on the temporal columns a query filters on say.
    Bounds {
        /// What the start is below (`Included`: or equal to).
        start: Bound<Vec<u8>>,
        /// What the end is above (`Included`: or equal to).
        end: Bound<Vec<u8>>,
    },
    /// Rows every filter matches.
    Every(Vec<TimeFilter>),
}

impl TimeFilter {
    /// The filter placed among a block's distinct bounds in ascending order, where
    /// `below(t, or_equal)` is how many of them are below `t` (or equal to it): a row whose
    /// bounds are entries of that block matches the result exactly when its bounds match this.
    pub(super) fn ranked(&self, below: &impl Fn(&[u8], bool) -> u32) -> RankedFilter {
        let range = |start_below, end_from| RankedFilter {
            start_below,
            end_from,
        };
        match self {
            TimeFilter::All => RankedFilter::ALL,
            // start <= t: below the bounds at or under t; t < end: not among them.
            TimeFilter::AsOf(t) => {
                let at_or_under = below(t, true);
                range(at_or_under, at_or_under)
            }
            TimeFilter::FromTo(a, b) => range(below(b, false), below(a, true)),
            TimeFilter::Between(a, b) => range(below(b, true), below(a, true)),
            TimeFilter::Bounds { start, end } => {
                let start_below = match start {
                    Bound::Included(b) => below(b, true),
                    Bound::Excluded(b) => below(b, false),
                    Bound::Unbounded => u32::MAX,
                };
                let end_from = match end {
                    Bound::Included(a) => below(a, false),
                    Bound::Excluded(a) => below(a, true),
                    Bound::Unbounded => 0,
                };
                range(start_below, end_from)
            }
            TimeFilter::Every(all) => {
                (all.iter()).fold(RankedFilter::ALL, |r, f| r.and(f.ranked(below)))
            }
        }
    }

    /// The filter on the numbers of a page list's boxes, where `of` maps a bound to its number
    /// keeping their order (`format::page_boxes::Scale::of`, below `u32::MAX`): every
    /// comparison made inclusive, so that an extent [`TimeFilter::may_match`] accepts, the
    /// result accepts by its bounds' numbers (it may accept more).
    pub(super) fn scaled(&self, of: &impl Fn(&[u8]) -> u32) -> RankedFilter {
        // `start <= t` (or `< t`) gives `of(start) < of(t) + 1`; `t <= end` (or `< end`) gives
        // `of(end) >= of(t)`. `of` is below `u32::MAX`, so `+ 1` cannot overflow.
        let range = |start_at_most: u32, end_from| RankedFilter {
            start_below: start_at_most + 1,
            end_from,
        };
        let at_most = |b: &Bound<Vec<u8>>| match b {
            Bound::Included(b) | Bound::Excluded(b) => of(b),
            Bound::Unbounded => u32::MAX - 1,
        };
        match self {
            TimeFilter::All => RankedFilter::ALL,
            TimeFilter::AsOf(t) => range(of(t), of(t)),
            TimeFilter::FromTo(a, b) | TimeFilter::Between(a, b) => range(of(b), of(a)),
            TimeFilter::Bounds { start, end } => range(
                at_most(start),
                match end {
                    Bound::Included(a) | Bound::Excluded(a) => of(a),
                    Bound::Unbounded => 0,
                },
            ),
            TimeFilter::Every(all) => {
                (all.iter()).fold(RankedFilter::ALL, |r, f| r.and(f.scaled(of)))
            }
        }
    }

    /// Whether a row of a page whose rows lie in `extent` (`None`: unknown) can match.
    pub(super) fn may_match(&self, extent: Option<Extent<'_>>) -> bool {
        extent.is_none_or(|x| self.matches(Some(x.start), x.end))
    }

    pub(super) fn matches(&self, start: Option<&[u8]>, end: Option<&[u8]>) -> bool {
        let Some(s) = start else { return true };
        let lt = |a: &[u8], b: &[u8]| cmp_bytes(a, b) == Ordering::Less;
        let le = |a: &[u8], b: &[u8]| cmp_bytes(a, b) != Ordering::Greater;
        match self {
            TimeFilter::All => true,
            TimeFilter::AsOf(t) => le(s, t) && end.is_none_or(|e| lt(t, e)),
            TimeFilter::FromTo(a, b) => lt(s, b) && end.is_none_or(|e| lt(a, e)),
            TimeFilter::Between(a, b) => le(s, b) && end.is_none_or(|e| lt(a, e)),
            TimeFilter::Bounds { start, end: above } => {
                let starts = match start {
                    Bound::Included(b) => le(s, b),
                    Bound::Excluded(b) => lt(s, b),
                    Bound::Unbounded => true,
                };
                let ends = match above {
                    Bound::Included(a) => end.is_none_or(|e| le(a, e)),
                    Bound::Excluded(a) => end.is_none_or(|e| lt(a, e)),
                    Bound::Unbounded => true,
                };
                starts && ends
            }
            TimeFilter::Every(all) => all.iter().all(|f| f.matches(start, end)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::{ColumnType, Value};
    use proptest::prelude::*;

    fn enc(x: i64) -> Vec<u8> {
        let mut out = Vec::new();
        crate::keycodec::encode_value(&Value::Int(x), &ColumnType::Int64, &mut out).unwrap();
        out
    }

    fn bound() -> impl Strategy<Value = Bound<i64>> {
        prop_oneof![
            (-20..40i64).prop_map(Bound::Included),
            (-20..40i64).prop_map(Bound::Excluded),
            Just(Bound::Unbounded),
        ]
    }

    fn filter() -> impl Strategy<Value = TimeFilter> {
        let one = prop_oneof![
            Just(TimeFilter::All),
            (-20..40i64).prop_map(|t| TimeFilter::AsOf(enc(t))),
            (-20..40i64, -20..40i64).prop_map(|(a, b)| TimeFilter::FromTo(enc(a), enc(b))),
            (-20..40i64, -20..40i64).prop_map(|(a, b)| TimeFilter::Between(enc(a), enc(b))),
            (bound(), bound()).prop_map(|(s, e)| TimeFilter::Bounds {
                start: s.map(enc),
                end: e.map(enc),
            }),
        ];
        prop_oneof![
            3 => one.clone(),
            1 => prop::collection::vec(one, 0..3).prop_map(TimeFilter::Every),
        ]
    }

    proptest! {
        /// A filter placed among a block's bounds in order matches a row, by the entry numbers
        /// of its bounds, exactly when it matches the row's bounds as bytes; times between,
        /// on, below and above the block's bounds alike.
        #[test]
        fn a_filter_placed_among_sorted_bounds_matches_as_the_bytes_do(
            values in prop::collection::btree_set(-20..40i64, 0..12),
            rows in prop::collection::vec((any::<prop::sample::Index>(), any::<prop::sample::Index>(), any::<bool>(), any::<bool>()), 1..20),
            f in filter(),
        ) {
            let bounds: Vec<Vec<u8>> = values.iter().map(|&v| enc(v)).collect();
            let below = |t: &[u8], or_equal: bool| {
                bounds.partition_point(|b| match crate::keycodec::cmp_encoded(b, t) {
                    Ordering::Less => true,
                    Ordering::Equal => or_equal,
                    Ordering::Greater => false,
                }) as u32
            };
            let ranked = f.ranked(&below);
            for (s, e, has_s, has_e) in rows {
                let pick = |i: &prop::sample::Index, has: bool| {
                    (has && !bounds.is_empty()).then(|| i.index(bounds.len()) as u32)
                };
                let (s, e) = (pick(&s, has_s), pick(&e, has_e));
                let bytes = |n: Option<u32>| n.map(|n| &bounds[n as usize][..]);
                let by_bytes = matches!(f, TimeFilter::All) || f.matches(bytes(s), bytes(e));
                prop_assert_eq!(ranked.matches(s, e), by_bytes, "{:?} {:?} {:?}", f, s, e);
            }
        }
    }
}
