//! A selection on one timeline as a test of numbers: a row's (or a page's) bounds are numbered in
//! the order of their bytes, and the selection's times placed among those numbers once, so that
//! each row (or page) is tested with no comparison of bytes.

/// A selection on one timeline (the store's `TimeFilter`) placed among the distinct bounds of a
/// block of rows, in ascending order (`TimeFilter::ranked`): a row's bounds are then tested by
/// their entry numbers in that order. Or mapped onto the numbers of a page list's boxes
/// (`TimeFilter::scaled`, [`super::page_boxes`]): a box is then tested by its numbers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum RankedFilter {
    /// Every row.
    All,
    /// Rows whose start's number is below `start_below` and whose end's number is `end_from` or
    /// more (an open end is above everything).
    Range { start_below: u32, end_from: u32 },
    /// Rows every filter matches.
    Every(Vec<RankedFilter>),
}

impl RankedFilter {
    /// `TimeFilter::matches` of a row whose bounds are entries `start` and `end` (`None`: it
    /// has none) of the block the filter was placed in.
    #[inline]
    pub(crate) fn matches(&self, start: Option<u32>, end: Option<u32>) -> bool {
        let Some(s) = start else { return true };
        match self {
            RankedFilter::All => true,
            RankedFilter::Range {
                start_below,
                end_from,
            } => s < *start_below && end.is_none_or(|e| e >= *end_from),
            RankedFilter::Every(all) => all.iter().all(|f| f.matches(start, end)),
        }
    }
}
