//! The reader's choice of pages: by zone maps and, for a long list, by
//! boxes; neither rules out a page that holds a row the scan returns.

use super::*;
use crate::format::page_boxes::{LiveBoxes, LiveBoxesBuilder};
use crate::format::zone::ZoneBuilder;
use proptest::prelude::*;

/// A row: its four bounds (absent or one byte; an end after its start), written by `added`,
/// retired by `retired` (after it) or not.
type Row = ([Option<u8>; 4], u64, Option<u64>);

fn row() -> impl Strategy<Value = Row> {
    // Mostly with a start: a row without one rules nothing out on its timeline.
    let interval = (
        proptest::option::weighted(0.95, 0u8..20),
        proptest::option::weighted(0.7, 1u8..10),
    )
        .prop_map(|(s, len)| [s, s.zip(len).map(|(s, l)| s.saturating_add(l))]);
    (
        interval.clone(),
        interval,
        1u64..10,
        proptest::option::of(1u64..5),
    )
        .prop_map(|([s, e], [ss, se], added, retired)| {
            ([s, e, ss, se], added, retired.map(|r| added + r))
        })
}

fn filter() -> impl Strategy<Value = TimeFilter> {
    prop_oneof![
        Just(TimeFilter::All),
        (0u8..25).prop_map(|t| TimeFilter::AsOf(vec![t])),
        (0u8..25, 0u8..8).prop_map(|(a, l)| TimeFilter::FromTo(vec![a], vec![a + l])),
        (0u8..25, 0u8..8).prop_map(|(a, l)| TimeFilter::Between(vec![a], vec![a + l])),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]
    /// The zone map never rules out a page that holds a row the scan returns, whatever the
    /// rows, the selections on both timelines and the version read.
    #[test]
    fn a_page_the_zone_map_rules_out_holds_no_row_the_scan_returns(
        rows in proptest::collection::vec(row(), 1..8),
        business in filter(),
        system in filter(),
        version in proptest::option::of(0u64..16),
    ) {
        let bytes = |b: &[Option<u8>; 4]| b.map(|x| x.map(|x| vec![x]));
        let mut z = ZoneBuilder::default();
        for (b, added, retired) in &rows {
            let b = bytes(b);
            z.add([0, 1, 2, 3].map(|i| b[i].as_deref()), *added, *retired);
        }
        let zone = z.finish();
        let spec = ScanSpec { business, system, ..Default::default() };
        let at = ReadAt { current: version.is_none(), version: version.unwrap_or(u64::MAX) };
        let any = rows.iter().any(|(b, added, retired)| {
            let b = bytes(b);
            let b = [0, 1, 2, 3].map(|i| b[i].as_deref());
            row_matches(&spec, at, (*added, *retired), |which| which.of(&b))
        });
        prop_assert!(!any || page_may_match(&spec, at, PageZone::new(&zone)));
    }

    /// The boxes of a long page list choose, for a scan of the latest version, every page
    /// whose zone map the scan accepts: whatever the bounds' bytes (of any length, so that
    /// their numbers tie, and wide apart, so that the numbers are shifted) and the
    /// selections on both timelines.
    #[test]
    fn the_boxes_of_a_page_list_choose_every_page_its_zones_accept(
        pages in proptest::collection::vec(proptest::collection::vec(wide_row(), 1..5), 1..6),
        business in wide_filter(),
        system in wide_filter(),
    ) {
        let zones: Vec<Vec<u8>> = (pages.iter())
            .map(|rows| {
                let mut z = ZoneBuilder::default();
                for (b, retired) in rows {
                    z.add([0, 1, 2, 3].map(|i| b[i].as_deref()), 1, *retired);
                }
                z.finish()
            })
            .collect();
        let mut boxes = LiveBoxesBuilder::default();
        for (no, zone) in zones.iter().enumerate() {
            boxes.add(no as u32, 0, 0, PageZone::new(zone));
        }
        // As a page list stores them (store format 13): the same boxes.
        let made = boxes.finish();
        let boxes = LiveBoxes::decode(&made.encode().unwrap()).unwrap();
        prop_assert_eq!(&boxes, &made);
        let spec = ScanSpec { business, system, ..Default::default() };
        let pages = ScanPages { spec: &spec, at: ReadAt { current: true, version: u64::MAX } };
        let test = pages.live_boxes(boxes.scales()).expect("a scan of the latest version");
        let chosen: Vec<u32> = boxes.pages_where(&test).map(|p| p.no).collect();
        for (no, zone) in zones.iter().enumerate() {
            if pages.zone(PageZone::new(zone)) {
                prop_assert!(chosen.contains(&(no as u32)), "page {no}: {chosen:?}");
            }
        }
    }
}

/// Bytes of a bound: of any length up to 10, often alike.
fn wide_bound() -> impl Strategy<Value = Vec<u8>> {
    let byte = prop_oneof![
        Just(0u8),
        Just(1u8),
        Just(0x80u8),
        Just(0xffu8),
        any::<u8>()
    ];
    proptest::collection::vec(byte, 0..10)
}

/// A row's four bounds, each maybe absent, and whether it is retired (by commit 2).
fn wide_row() -> impl Strategy<Value = ([Option<Vec<u8>>; 4], Option<u64>)> {
    let b = || proptest::option::weighted(0.8, wide_bound());
    (
        (b(), b(), b(), b()),
        proptest::option::weighted(0.2, Just(2u64)),
    )
        .prop_map(|((s, e, ss, se), r)| ([s, e, ss, se], r))
}

fn wide_filter() -> impl Strategy<Value = TimeFilter> {
    let bound = || {
        prop_oneof![
            wide_bound().prop_map(Bound::Included),
            wide_bound().prop_map(Bound::Excluded),
            Just(Bound::Unbounded),
        ]
    };
    let one = prop_oneof![
        Just(TimeFilter::All),
        wide_bound().prop_map(TimeFilter::AsOf),
        (wide_bound(), wide_bound()).prop_map(|(a, b)| TimeFilter::FromTo(a, b)),
        (wide_bound(), wide_bound()).prop_map(|(a, b)| TimeFilter::Between(a, b)),
        (bound(), bound()).prop_map(|(start, end)| TimeFilter::Bounds { start, end }),
    ];
    prop_oneof![
        3 => one.clone(),
        1 => proptest::collection::vec(one, 0..3).prop_map(TimeFilter::Every),
    ]
}
