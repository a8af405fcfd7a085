//! [`LiveBoxes`] as a page list stores them (store format 13, docs/FORMAT.md §6): the scales,
//! the pages' columns of numbers, each in the narrowest width, and the boxes, in an archive
//! block stored bare. What a scan tests them with is the parent module's.

use rkyv::rancor;

use super::{BoxedPage, GroupBox, LiveBoxes, Scale};
use crate::error::{corrupt, Result};
use crate::format::archive::{compress, with_decompressed, Codec};
use crate::format::packed_rows::{ArchivedNumbers, Numbers};

/// [`LiveBoxes`] as a page list stores them: an archive block, checksummed, not compressed
/// ([`Codec::Bare`]: read by every scan of the key, and its numbers are packed instead).
#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
struct StoredBoxes {
    /// Per timeline (business, then system): the scale's least prefix, and its shift.
    bases: [u64; 2],
    shifts: [u32; 2],
    /// Per page, in page order: its number less the page before's (the first page: its number),
    /// wrapping (numbers only grow, but any read back as written).
    steps: Numbers,
    /// Per page: its length, and its row part's.
    lens: Numbers,
    heads: Numbers,
    /// Per page: how many boxes it has (its live row groups), in order in `boxes`.
    counts: Numbers,
    /// Per live row group: its box.
    boxes: Vec<GroupBox>,
}

impl LiveBoxes {
    /// The boxes as a page list stores them ([`LiveBoxes::decode`] reads them back).
    pub fn encode(&self) -> Result<Vec<u8>> {
        let pages = &self.pages;
        let column = |f: fn(&BoxedPage) -> u32| {
            Numbers::pack(pages.iter().map(move |p| Some(u64::from(f(p)))))
        };
        // Page numbers and the boxes' ends, each less the page before's.
        let befores = || std::iter::once(BoxedPage::default()).chain(pages.iter().copied());
        let steps = |f: fn(&BoxedPage) -> u32| {
            let pairs = befores().zip(pages.iter());
            Numbers::pack(pairs.map(move |(b, p)| Some(u64::from(f(p).wrapping_sub(f(&b))))))
        };
        let stored = StoredBoxes {
            bases: self.scales.map(|s| s.base),
            shifts: self.scales.map(|s| s.shift),
            steps: steps(|p| p.no),
            lens: column(|p| p.len),
            heads: column(|p| p.head),
            counts: steps(|p| p.end),
            boxes: self.boxes.clone(),
        };
        let raw = rkyv::to_bytes::<rancor::Error>(&stored)
            .map_err(|e| corrupt(format!("cannot encode a page list's boxes: {e}")))?;
        compress(&raw, Codec::Bare)
    }

    /// The boxes [`LiveBoxes::encode`] wrote, checked to be whole: as many numbers of each kind
    /// as pages, page numbers that fit, the pages' boxes adding up to those stored, and each
    /// shift below a number's bits.
    pub fn decode(bytes: &[u8]) -> Result<LiveBoxes> {
        with_decompressed(bytes, |raw| {
            let s = rkyv::access::<ArchivedStoredBoxes, rancor::Error>(raw)
                .map_err(|e| corrupt(format!("a page list's boxes fail validation: {e}")))?;
            let n = s.steps.len();
            let bad = || {
                corrupt(format!(
                    "a page list's boxes do not add up: {n} pages, {} boxes",
                    s.boxes.len()
                ))
            };
            if [s.lens.len(), s.heads.len(), s.counts.len()] != [n; 3]
                || s.shifts.iter().any(|sh| sh.to_native() >= 64)
            {
                return Err(bad());
            }
            // Each column into the pages in one loop of its width; a number that is absent or
            // past 32 bits makes `fits` false.
            let mut pages = vec![BoxedPage::default(); n];
            let fits = [
                fill(&mut pages, &s.steps, |p, step, b| {
                    p.no = b.no.wrapping_add(step)
                }),
                fill(&mut pages, &s.lens, |p, len, _| p.len = len),
                fill(&mut pages, &s.heads, |p, head, _| p.head = head),
                fill(&mut pages, &s.counts, |p, count, b| {
                    p.end = b.end.saturating_add(count)
                }),
            ]
            .iter()
            .all(|&f| f);
            // The ends are sums of counts, so they never decrease: the last must be the boxes'.
            if !fits {
                return Err(bad());
            }
            if pages.last().map_or(0, |p| p.end as usize) != s.boxes.len() {
                return Err(bad());
            }
            let scale = |t: usize| Scale {
                base: s.bases[t].to_native(),
                shift: s.shifts[t].to_native(),
            };
            Ok(LiveBoxes {
                scales: [scale(0), scale(1)],
                pages,
                boxes: (s.boxes.iter()).map(|b| b.map(|x| x.to_native())).collect(),
            })
        })
    }
}

/// Sets one field of each of `pages` from its number of `numbers` (as many), by `set`, which
/// also sees the page before (a default one before the first). Whether every number was there
/// and fit in 32 bits.
#[inline]
fn fill(
    pages: &mut [BoxedPage],
    numbers: &ArchivedNumbers,
    mut set: impl FnMut(&mut BoxedPage, u32, BoxedPage),
) -> bool {
    let (mut before, mut fits) = (BoxedPage::default(), true);
    let mut at = pages.iter_mut();
    numbers.each(|v| {
        let v = v.and_then(|v| u32::try_from(v).ok());
        fits &= v.is_some();
        if let Some(p) = at.next() {
            set(p, v.unwrap_or(0), before);
            before = *p;
        }
    });
    fits
}
