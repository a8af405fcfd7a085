//! A selection on one timeline as a test of numbers: a row's (or a page's) bounds are numbered in
//! the order of their bytes, and the selection's times placed among those numbers once, so that
//! each row (or page) is tested with no comparison of bytes.

/// A selection on one timeline (the store's `TimeFilter`) placed among the distinct bounds of a
/// block of rows, in ascending order (`TimeFilter::ranked`): a row's bounds are then tested by
/// their entry numbers in that order. Or mapped onto the numbers of a page list's boxes
/// (`TimeFilter::scaled`, [`super::page_boxes`]): a box is then tested by its numbers.
///
/// Every selection is one range: what it matches has a start below `start_below` and an end at
/// or above `end_from` (an open end is above everything). Selections that must all hold are the
/// range of the least `start_below` and the greatest `end_from` ([`RankedFilter::and`]); every
/// row is `RankedFilter::ALL`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RankedFilter {
    pub start_below: u32,
    pub end_from: u32,
}

impl RankedFilter {
    /// Every row: each number is below `u32::MAX`.
    pub(crate) const ALL: RankedFilter = RankedFilter {
        start_below: u32::MAX,
        end_from: 0,
    };

    /// What this and `other` both match.
    pub(crate) fn and(self, other: RankedFilter) -> RankedFilter {
        RankedFilter {
            start_below: self.start_below.min(other.start_below),
            end_from: self.end_from.max(other.end_from),
        }
    }

    /// `TimeFilter::matches` of a row whose bounds are entries `start` and `end` (`None`: it
    /// has none) of the block the filter was placed in. Without a start, nothing is known on the
    /// timeline: every filter matches.
    #[inline]
    pub(crate) fn matches(&self, start: Option<u32>, end: Option<u32>) -> bool {
        start.is_none_or(|s| self.holds(s, end.unwrap_or(u32::MAX)))
    }

    /// Whether an interval from number `start` to number `end` (an open end: above every
    /// number) is in the range.
    #[inline]
    pub(crate) fn holds(&self, start: u32, end: u32) -> bool {
        start < self.start_below && end >= self.end_from
    }
}
