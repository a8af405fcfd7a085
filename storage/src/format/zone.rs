//! The zone map of a frozen page (docs/FORMAT.md §6): where its row versions lie on business
//! time, on system time and in the commit log, so that a scan skips pages none of whose rows it
//! can return.
//!
//! Rows are grouped by which of their ends are open, each group with its own extents: a
//! bitemporal page holds rows closed on business time and open on system time (what is believed
//! now about the past) beside rows open on business time and closed on system time (what was
//! believed until a later event), and one extent of both would cover every point of both
//! timelines. A zone is kept as bytes (one allocation per page, in memory and in the key head)
//! and read in place:
//!
//! ```text
//! zone    = added: u64 LE | retired: u64 LE | live groups: u8 | all groups: u8 | group*
//! group   = flags: u8 | bound* (bit 0: business start, bit 1: business end, bit 2: system
//!           start, bit 3: system end; a bound present is written, in that order)
//! bound   = length: u32 LE | encoded bound
//! ```
//!
//! `added` is the least commit that wrote a row of the page (`u64::MAX` without rows), `retired`
//! the greatest that retired one (`u64::MAX` if a row is not retired, 0 without rows). The live
//! groups cover the rows not retired (what a scan of the latest version reads), the others all
//! rows. A group without a start on a timeline has a row without a bound there: nothing is ruled
//! out on it; without an end, a row is open-ended.

use crate::keycodec::cmp_encoded;

/// From the least start to the greatest end (`None`: a row is open-ended), encoded bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Extent<'a> {
    pub start: &'a [u8],
    pub end: Option<&'a [u8]>,
}

/// Where a group of rows lies on both timelines (`None`: unknown on that timeline).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Extents<'a> {
    pub business: Option<Extent<'a>>,
    pub system: Option<Extent<'a>>,
}

/// A zone read in place from its bytes ([`ZoneBuilder::finish`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct PageZone<'a> {
    bytes: &'a [u8],
}

impl<'a> PageZone<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        PageZone { bytes }
    }

    fn u64_at(&self, at: usize) -> Option<u64> {
        Some(u64::from_le_bytes(
            self.bytes.get(at..at + 8)?.try_into().ok()?,
        ))
    }

    /// The least commit that wrote a row (0 if the bytes are short: nothing is ruled out).
    pub fn added(&self) -> u64 {
        self.u64_at(0).unwrap_or(0)
    }

    /// The greatest commit that retired a row (`u64::MAX` if one is live or the bytes are short).
    pub fn retired(&self) -> u64 {
        self.u64_at(8).unwrap_or(u64::MAX)
    }

    /// The groups of the rows not retired.
    pub fn live(&self) -> Groups<'a> {
        self.groups(true)
    }

    /// The groups of all rows.
    pub fn all(&self) -> Groups<'a> {
        self.groups(false)
    }

    fn groups(&self, live: bool) -> Groups<'a> {
        let (n_live, n_all) = match self.bytes.get(16..18) {
            Some(&[l, a]) => (usize::from(l), usize::from(a)),
            // Bytes this build did not write (the checksums of the blocks that hold zones
            // make that a bug, not damage): one group that rules nothing out.
            _ => return Groups::unknown(),
        };
        let mut g = Groups {
            rest: &self.bytes[18..],
            left: n_live,
            broken: false,
        };
        if !live {
            for _ in 0..n_live {
                if g.next().is_none() {
                    return Groups::unknown();
                }
            }
            g.left = n_all;
        }
        g
    }
}

/// The groups of a zone, each as its [`Extents`].
pub(crate) struct Groups<'a> {
    rest: &'a [u8],
    left: usize,
    /// Set when the bytes ran short: the last group yielded rules nothing out.
    broken: bool,
}

impl<'a> Groups<'a> {
    fn unknown() -> Self {
        Groups {
            rest: &[],
            left: 1,
            broken: true,
        }
    }

    fn bound(&mut self) -> Option<&'a [u8]> {
        let len = u32::from_le_bytes(self.rest.get(..4)?.try_into().ok()?) as usize;
        let b = self.rest.get(4..4 + len)?;
        self.rest = &self.rest[4 + len..];
        Some(b)
    }

    fn group(&mut self) -> Option<Extents<'a>> {
        let (&flags, rest) = self.rest.split_first()?;
        self.rest = rest;
        let mut axis = |start_bit: u8| -> Option<Option<Extent<'a>>> {
            if flags & start_bit == 0 {
                return Some(None);
            }
            let start = self.bound()?;
            let end = match flags & (start_bit << 1) {
                0 => None,
                _ => Some(self.bound()?),
            };
            Some(Some(Extent { start, end }))
        };
        let business = axis(1)?;
        let system = axis(4)?;
        Some(Extents { business, system })
    }
}

impl<'a> Iterator for Groups<'a> {
    type Item = Extents<'a>;

    fn next(&mut self) -> Option<Extents<'a>> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        if self.broken {
            self.left = 0;
            return Some(Extents::default());
        }
        match self.group() {
            Some(x) => Some(x),
            None => {
                self.left = 0;
                self.broken = true;
                Some(Extents::default())
            }
        }
    }
}

/// Grows a zone row by row.
pub(crate) struct ZoneBuilder {
    live: GroupBuilders,
    all: GroupBuilders,
    added: u64,
    retired: u64,
}

/// Per group (bit 0: the business end is open, bit 1: the system end is open), its extents.
type GroupBuilders = [Option<ExtentsBuilder>; 4];

impl Default for ZoneBuilder {
    fn default() -> Self {
        ZoneBuilder {
            live: Default::default(),
            all: Default::default(),
            added: u64::MAX,
            retired: 0,
        }
    }
}

impl ZoneBuilder {
    /// Takes in a row with these bounds (start, end, system start, system end), written by
    /// commit `added` and retired by `retired`.
    pub fn add(&mut self, bounds: [Option<&[u8]>; 4], added: u64, retired: Option<u64>) {
        let group = usize::from(bounds[1].is_none()) | usize::from(bounds[3].is_none()) << 1;
        self.all[group]
            .get_or_insert_with(Default::default)
            .add(bounds);
        if retired.is_none() {
            self.live[group]
                .get_or_insert_with(Default::default)
                .add(bounds);
        }
        self.added = self.added.min(added);
        self.retired = self.retired.max(retired.unwrap_or(u64::MAX));
    }

    /// Widens this zone to cover `zone` too: a chunk of a key's page list keeps its pages'
    /// zones merged ([`super::page_list`]), and any point or range one of them may hold, the
    /// merged zone may hold. A group without a bound on a timeline stays so (nothing ruled out).
    pub fn merge(&mut self, zone: PageZone<'_>) {
        for (live, groups) in [(true, zone.live()), (false, zone.all())] {
            for g in groups {
                let (b, s) = (g.business, g.system);
                let bounds = [
                    b.map(|x| x.start),
                    b.and_then(|x| x.end),
                    s.map(|x| x.start),
                    s.and_then(|x| x.end),
                ];
                let group =
                    usize::from(bounds[1].is_none()) | usize::from(bounds[3].is_none()) << 1;
                let to = if live { &mut self.live } else { &mut self.all };
                to[group].get_or_insert_with(Default::default).add(bounds);
            }
        }
        self.added = self.added.min(zone.added());
        self.retired = self.retired.max(zone.retired());
    }

    /// The zone's bytes, in an allocation of their exact length: a frozen page's zone stays in
    /// memory with its key (a vector grown by doubling held 512 bytes for a zone of about 263:
    /// 177 MB at a 10M-event ingest's peak, 110 MB exact, docs/PERFORMANCE.md).
    pub fn finish(self) -> Vec<u8> {
        let mut out = Vec::with_capacity(512);
        out.extend_from_slice(&self.added.to_le_bytes());
        out.extend_from_slice(&self.retired.to_le_bytes());
        let count = |g: &GroupBuilders| g.iter().flatten().count() as u8;
        out.push(count(&self.live));
        out.push(count(&self.all));
        for g in self.live.iter().chain(&self.all).flatten() {
            g.write(&mut out);
        }
        out.as_slice().to_vec()
    }
}

/// One axis: `None` before the first row, `Some(None)` once a row had no start.
type AxisBuilder = Option<Option<(Vec<u8>, Option<Vec<u8>>)>>;

#[derive(Default)]
struct ExtentsBuilder {
    business: AxisBuilder,
    system: AxisBuilder,
}

impl ExtentsBuilder {
    fn add(&mut self, [start, end, sys_start, sys_end]: [Option<&[u8]>; 4]) {
        widen(&mut self.business, start, end);
        widen(&mut self.system, sys_start, sys_end);
    }

    fn write(&self, out: &mut Vec<u8>) {
        let axes = [&self.business, &self.system].map(|a| a.as_ref().and_then(|x| x.as_ref()));
        let mut flags = 0u8;
        for (i, axis) in axes.iter().enumerate() {
            if let Some((_, end)) = axis {
                flags |= 1 << (2 * i);
                flags |= u8::from(end.is_some()) << (2 * i + 1);
            }
        }
        out.push(flags);
        for (start, end) in axes.into_iter().flatten() {
            for b in std::iter::once(start).chain(end) {
                out.extend_from_slice(&(b.len() as u32).to_le_bytes());
                out.extend_from_slice(b);
            }
        }
    }
}

fn widen(axis: &mut AxisBuilder, start: Option<&[u8]>, end: Option<&[u8]>) {
    let Some(start) = start else {
        *axis = Some(None);
        return;
    };
    match axis {
        Some(None) => {}
        None => *axis = Some(Some((start.to_vec(), end.map(<[u8]>::to_vec)))),
        Some(Some((lo, hi))) => {
            if cmp_encoded(start, lo).is_lt() {
                *lo = start.to_vec();
            }
            match (&hi, end) {
                (None, _) => {}
                (Some(_), None) => *hi = None,
                (Some(e), Some(n)) if cmp_encoded(n, e).is_gt() => *hi = Some(n.to_vec()),
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ext(start: &[u8], end: Option<&'static [u8]>) -> Option<Extent<'static>> {
        let start: &'static [u8] = Box::leak(start.to_vec().into_boxed_slice());
        Some(Extent { start, end })
    }

    fn extents(
        business: Option<Extent<'static>>,
        system: Option<Extent<'static>>,
    ) -> Extents<'static> {
        Extents { business, system }
    }

    #[test]
    fn a_zone_spans_its_rows_per_group_and_gives_up_on_a_row_without_a_bound() {
        let mut z = ZoneBuilder::default();
        z.add([Some(&[5]), Some(&[7]), Some(&[2]), Some(&[4])], 4, Some(6));
        z.add([Some(&[3]), Some(&[6]), Some(&[1]), Some(&[3])], 2, Some(9));
        let bytes = z.finish();
        let zone = PageZone::new(&bytes);
        assert_eq!(
            zone.all().collect::<Vec<_>>(),
            [extents(ext(&[3], Some(&[7])), ext(&[1], Some(&[4])))]
        );
        assert_eq!(zone.live().count(), 0, "every row is retired");
        assert_eq!((zone.added(), zone.retired()), (2, 9));
        // Rows closed on business time and open on system time, and the other way round, are
        // two groups: neither widens the other's extents to everything.
        let mut z = ZoneBuilder::default();
        z.add([Some(&[1]), Some(&[2]), Some(&[1]), None], 1, None);
        z.add([Some(&[0]), Some(&[1]), Some(&[0]), None], 1, None);
        z.add([Some(&[2]), None, Some(&[2]), Some(&[3])], 1, None);
        z.add([None, None, Some(&[2]), Some(&[3])], 1, Some(3));
        let bytes = z.finish();
        let zone = PageZone::new(&bytes);
        assert_eq!(
            zone.live().collect::<Vec<_>>(),
            [
                extents(ext(&[2], None), ext(&[2], Some(&[3]))),
                extents(ext(&[0], Some(&[2])), ext(&[0], None)),
            ]
        );
        assert_eq!(
            zone.all().next(),
            Some(extents(None, ext(&[2], Some(&[3])))),
            "a row without a start rules nothing out on business time"
        );
        assert_eq!(zone.all().count(), 2);
        assert_eq!(zone.retired(), u64::MAX);
        let bytes = ZoneBuilder::default().finish();
        let empty = PageZone::new(&bytes);
        assert_eq!((empty.live().count(), empty.all().count()), (0, 0));
        assert_eq!((empty.added(), empty.retired()), (u64::MAX, 0));
    }

    /// A merged zone holds what each of the zones merged holds, group by group.
    #[test]
    fn a_merged_zone_covers_the_zones_merged() {
        let mut a = ZoneBuilder::default();
        a.add([Some(&[1]), Some(&[2]), Some(&[1]), None], 3, None);
        a.add([Some(&[0]), None, Some(&[0]), Some(&[1])], 2, Some(4));
        let mut b = ZoneBuilder::default();
        b.add([Some(&[5]), Some(&[7]), Some(&[5]), None], 6, None);
        b.add([None, None, Some(&[6]), Some(&[8])], 6, Some(9));
        let (a, b) = (a.finish(), b.finish());
        let mut m = ZoneBuilder::default();
        m.merge(PageZone::new(&a));
        m.merge(PageZone::new(&b));
        let m = m.finish();
        let zone = PageZone::new(&m);
        assert_eq!(
            zone.live().collect::<Vec<_>>(),
            [extents(ext(&[1], Some(&[7])), ext(&[1], None))]
        );
        assert_eq!(
            zone.all().collect::<Vec<_>>(),
            [
                extents(None, ext(&[0], Some(&[8]))),
                extents(ext(&[1], Some(&[7])), ext(&[1], None)),
            ]
        );
        assert_eq!((zone.added(), zone.retired()), (2, u64::MAX));
        let mut empty = ZoneBuilder::default();
        empty.merge(PageZone::new(&ZoneBuilder::default().finish()));
        assert_eq!(empty.finish(), ZoneBuilder::default().finish());
    }

    /// Bytes cut short read as a group that rules nothing out, never a panic.
    #[test]
    fn a_zone_cut_short_rules_nothing_out() {
        let mut z = ZoneBuilder::default();
        z.add([Some(&[1; 9]), Some(&[2; 9]), Some(&[1; 9]), None], 1, None);
        let bytes = z.finish();
        let whole: Vec<_> = PageZone::new(&bytes).live().collect();
        for cut in 0..bytes.len() {
            let zone = PageZone::new(&bytes[..cut]);
            let live: Vec<_> = zone.live().collect();
            assert!(
                live == [Extents::default()] || live == whole,
                "cut at {cut}: {live:?}"
            );
            let all: Vec<_> = zone.all().collect();
            assert!(
                all == [Extents::default()] || all == whole,
                "cut at {cut}: {all:?}"
            );
            let _ = (zone.added(), zone.retired());
        }
    }
}
