//! A long page list's pages as a scan of the latest version chooses among them: the groups of
//! each page's live rows (its zone's, [`super::zone`]) as boxes of numbers, stored with the list
//! (or, in a list written before store format 13, made from its zones when the read cache keeps
//! it: [`super::page_list::ListBoxes`]).
//!
//! A scan of a key of many pages otherwise decompressed the chunks of its list whose merged zone
//! may hold its times, then read every zone of them: two chunks of three for an as-of snapshot of
//! the 10M-event workload, the one of them in vain (a chunk's merged zone spans the square of
//! its pages' diagonal), and half of the snapshot's instructions (docs/PERFORMANCE.md, session
//! 60). With the boxes it decompresses none, and tests each group of a page's live rows with
//! four comparisons of numbers.
//!
//! A bound's number ([`Scale::of`]) keeps the order of the bytes but not every difference: the
//! first eight bytes as a big-endian number, less the least start of the list, shifted right
//! until the greatest start fits in 16 bits, and a greater bound (a far end) taken as the
//! greatest number. So `a <= b` (bytes) gives `of(a) <= of(b)`, and `a < b` gives `of(a) <=
//! of(b)`: a box tested with every comparison made inclusive (`TimeFilter::scaled`) accepts
//! every page its zone accepts, and maybe a few more, whose rows the scan then tests one by one.
//!
//! Since store format 13 a list stores its boxes beside its index ([`LiveBoxes::encode`],
//! docs/FORMAT.md §6), so that a head read once chooses its pages without decompressing a chunk;
//! a list written before has none stored, and its boxes are made from its chunks' zones when it
//! is read to be kept.

mod stored;

use super::ranked::RankedFilter;
use super::zone::PageZone;

/// Above every bound's number: the end of a box open at its end (or of one without a start).
const OPEN: u16 = u16::MAX;

/// The order-keeping map of a list's bounds onto numbers below [`OPEN`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Scale {
    base: u64,
    shift: u32,
}

impl Scale {
    /// The scale whose numbers tell apart as many of the prefixes `least..=greatest` as fit.
    fn fitting(least: u64, greatest: u64) -> Scale {
        let span = greatest.saturating_sub(least);
        let mut shift = 0;
        while (span >> shift) >= u64::from(OPEN) {
            shift += 1;
        }
        Scale { base: least, shift }
    }

    /// `bound`'s number: never greater than a greater bound's, below [`OPEN`].
    pub fn of(&self, bound: &[u8]) -> u32 {
        u32::from(self.of_prefix(prefix(bound)))
    }

    fn of_prefix(&self, prefix: u64) -> u16 {
        let n = prefix.saturating_sub(self.base) >> self.shift;
        n.min(u64::from(OPEN - 1)) as u16
    }
}

/// The first eight bytes of `bound`, zero-padded, as a big-endian number.
fn prefix(bound: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = bound.len().min(8);
    b[..n].copy_from_slice(&bound[..n]);
    u64::from_be_bytes(b)
}

/// A page as [`LiveBoxes`] lists it: what reading it takes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct BoxedPage {
    /// The page number (the last part of its `P` key).
    pub no: u32,
    /// Its length in bytes.
    pub len: u32,
    /// How many leading bytes hold its row versions.
    pub head: u32,
    /// Where its boxes end in `LiveBoxes::boxes` (they start where the page before's end).
    end: u32,
}

/// The box of a live row group: business start and end, system start and end, as numbers. An
/// open end is [`OPEN`]; a timeline on which the group has no start (nothing is known there) is
/// `0..OPEN`, which every selection may hold.
type GroupBox = [u16; 4];

/// What a scan of the latest version tests a box with: its selections on business time and on
/// system time, on the list's scales.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BoxTest {
    business: RankedFilter,
    system: RankedFilter,
}

impl BoxTest {
    /// The test of selections `business` and `system`, made on the list's scales.
    pub fn new(business: RankedFilter, system: RankedFilter) -> BoxTest {
        BoxTest { business, system }
    }

    #[inline]
    fn matches(&self, g: &GroupBox) -> bool {
        let g = g.map(u32::from);
        self.business.holds(g[0], g[1]) && self.system.holds(g[2], g[3])
    }
}

/// What a reader asks of a key's pages.
pub(crate) trait PageTest {
    /// Whether a page of zone `zone` may hold a row the reader wants.
    fn zone(&self, zone: PageZone<'_>) -> bool;

    /// The test of a page list's boxes, on the scales of its business and system times
    /// ([`LiveBoxes::scales`]), if the reader wants only live rows and the boxes may choose its
    /// pages: every page whose zone [`PageTest::zone`] accepts, a box of the page must pass.
    /// `None`: the zones choose.
    fn live_boxes(&self, _scales: [&Scale; 2]) -> Option<BoxTest> {
        None
    }
}

impl<F: Fn(PageZone<'_>) -> bool> PageTest for F {
    fn zone(&self, zone: PageZone<'_>) -> bool {
        self(zone)
    }
}

/// The boxes of the live row groups of a list's pages, in page order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LiveBoxes {
    /// The scales of business and system time (each timeline its own: they may differ in type
    /// and span).
    scales: [Scale; 2],
    pages: Vec<BoxedPage>,
    boxes: Vec<GroupBox>,
}

impl LiveBoxes {
    /// The scales of its numbers: of business time, then of system time.
    pub fn scales(&self) -> [&Scale; 2] {
        [&self.scales[0], &self.scales[1]]
    }

    /// The pages one of whose boxes passes `test`, in order.
    pub fn pages_where<'a>(&'a self, test: &'a BoxTest) -> impl Iterator<Item = &'a BoxedPage> {
        // Each page's boxes start where the page before's end. (Zipping the pages with a
        // chained iterator of those ends, as before, cost more a step than the tests.)
        let mut from = 0;
        self.pages.iter().filter(move |p| {
            let boxes = &self.boxes[from..p.end as usize];
            from = p.end as usize;
            boxes.iter().any(|g| test.matches(g))
        })
    }

    /// The bytes it holds in memory.
    pub fn heap_bytes(&self) -> usize {
        self.pages.capacity() * std::mem::size_of::<BoxedPage>()
            + self.boxes.capacity() * std::mem::size_of::<GroupBox>()
    }
}

impl LiveBoxes {
    /// How many pages it lists, and the number of the last.
    pub fn extent(&self) -> (usize, Option<u32>) {
        (self.pages.len(), self.pages.last().map(|p| p.no))
    }

    /// Page `i`'s number, length and row part's length.
    pub fn page(&self, i: usize) -> Option<(u32, u32, u32)> {
        self.pages.get(i).map(|p| (p.no, p.len, p.head))
    }

    /// The bytes of the pages it lists.
    pub fn page_bytes(&self) -> u64 {
        self.pages.iter().map(|p| u64::from(p.len)).sum()
    }
}

/// Builds [`LiveBoxes`] a page at a time.
#[derive(Default)]
pub(crate) struct LiveBoxesBuilder {
    pages: Vec<BoxedPage>,
    /// Each group's bounds' prefixes, until the scale is known.
    prefixes: Vec<[Option<u64>; 4]>,
}

impl LiveBoxesBuilder {
    /// Adds the next page: number `no`, `len` bytes of which the first `head` hold its rows,
    /// with zone `zone`.
    pub fn add(&mut self, no: u32, len: u32, head: u32, zone: PageZone<'_>) {
        for g in zone.live() {
            let (b, s) = (g.business, g.system);
            self.prefixes.push(
                [
                    b.map(|x| x.start),
                    b.and_then(|x| x.end),
                    s.map(|x| x.start),
                    s.and_then(|x| x.end),
                ]
                .map(|x| x.map(prefix)),
            );
        }
        self.pages.push(BoxedPage {
            no,
            len,
            head,
            end: self.prefixes.len() as u32,
        });
    }

    /// The boxes, each timeline's numbers on a scale of its own.
    pub fn finish(mut self) -> LiveBoxes {
        // Each timeline scaled to its starts: an end far past them (a business end of
        // 9999-12-31 where a source writes no open end) would leave them few numbers.
        let scale = |at: usize| {
            let starts = || self.prefixes.iter().filter_map(|g| g[at]);
            Scale::fitting(starts().min().unwrap_or(0), starts().max().unwrap_or(0))
        };
        let scales = [scale(0), scale(2)];
        let axis = |scale: &Scale, start: Option<u64>, end: Option<u64>| match start {
            None => (0, OPEN),
            Some(s) => (scale.of_prefix(s), end.map_or(OPEN, |e| scale.of_prefix(e))),
        };
        let boxes = (self.prefixes.iter())
            .map(|&[b, e, ss, se]| {
                let (b, e) = axis(&scales[0], b, e);
                let (ss, se) = axis(&scales[1], ss, se);
                [b, e, ss, se]
            })
            .collect();
        self.pages.shrink_to_fit();
        LiveBoxes {
            scales,
            pages: self.pages,
            boxes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_keep_the_order_of_bounds_and_fit_below_open() {
        let s = Scale::fitting(10, u64::MAX / 3);
        assert!(s.shift > 0);
        let bounds: [&[u8]; 6] = [
            &[],
            &[0, 0, 0, 0, 0, 0, 0, 10],
            &[1],
            &[1, 2, 3],
            &[0xff; 9],
            &[0xff; 8],
        ];
        let mut sorted = bounds.to_vec();
        sorted.sort();
        for w in sorted.windows(2) {
            assert!(s.of(w[0]) <= s.of(w[1]), "{w:?}");
        }
        assert!(bounds.iter().all(|b| s.of(b) < u32::from(OPEN)));
        // A scale of a narrow span tells every prefix in it apart.
        let s = Scale::fitting(100, 300);
        assert_eq!(s.shift, 0);
        assert_eq!(s.of(&200u64.to_be_bytes()), 100);
        assert_eq!(s.of(&50u64.to_be_bytes()), 0);
        // Past the greatest start: the greatest number.
        assert_eq!(s.of(&[0xff; 9]), u32::from(OPEN - 1));
    }

    /// Boxes of 40 pages, page `i`'s one live group at business and system time `[i, i + 1)`.
    fn boxes() -> LiveBoxes {
        let mut b = LiveBoxesBuilder::default();
        for i in 0u32..40 {
            let mut z = super::super::zone::ZoneBuilder::default();
            let (s, e) = (i.to_be_bytes(), (i + 1).to_be_bytes());
            z.add([Some(&s), Some(&e), Some(&s), Some(&e)], u64::from(i), None);
            b.add(i, 100, 10, PageZone::new(&z.finish()));
        }
        b.finish()
    }

    #[test]
    fn stored_boxes_read_back_as_they_were() {
        let live = boxes();
        assert_eq!(LiveBoxes::decode(&live.encode().unwrap()).unwrap(), live);
        assert_eq!(live.extent(), (40, Some(39)));
        assert_eq!(live.page_bytes(), 4_000);
        // Numbers far apart and out of order, lengths past 16 bits, pages without a live group.
        let mut b = LiveBoxesBuilder::default();
        let mut z = super::super::zone::ZoneBuilder::default();
        z.add([Some(&[1u8][..]), None, Some(&[2u8][..]), None], 1, None);
        let (zone, dead) = (
            z.finish(),
            super::super::zone::ZoneBuilder::default().finish(),
        );
        for (no, len) in [(7, 10), (70_000, 1 << 20), (3, u32::MAX), (u32::MAX, 0)] {
            let z = if no == 3 { &dead } else { &zone };
            b.add(no, len, len / 2, PageZone::new(z));
        }
        let odd = b.finish();
        assert_eq!(LiveBoxes::decode(&odd.encode().unwrap()).unwrap(), odd);
        assert_eq!(odd.extent(), (4, Some(u32::MAX)));
    }

    /// Stored boxes that do not add up (a page's boxes ending before the page before's, or past
    /// the last box; a shift past a number's bits) are an error, not a panic when a scan slices
    /// or shifts by them.
    #[test]
    fn stored_boxes_that_do_not_add_up_are_an_error() {
        let good = boxes();
        let mut bad = Vec::new();
        for (page, end) in [(3, 1), (39, 1_000), (39, 38)] {
            let mut b = good.clone();
            b.pages[page].end = end;
            bad.push(b);
        }
        let mut b = good.clone();
        b.scales[1].shift = 64;
        bad.push(b);
        for b in bad {
            let e = LiveBoxes::decode(&b.encode().unwrap()).unwrap_err();
            assert!(e.to_string().contains("do not add up"), "{e}");
        }
    }
}
