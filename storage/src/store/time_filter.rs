//! What a selection on one timeline matches: a row by its interval, a page by its zone's
//! extent ([`TimeFilter`]), on bounds encoded with [`crate::keycodec`].

use std::cmp::Ordering;
use std::ops::Bound;

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
