//! The number of each row version's key ([`super::RowStore::key_of`]), in chunks of 16,384 rows,
//! each kept as runs of one key when that is smaller.
//!
//! A commit writes a key's rows together, so a large commit (a first load, a full refresh) writes
//! runs of one key: at 10M events over 10k keys in one refresh, each part of 65,536 events writes
//! about 13 rows per key it touches. A plain `u32` per row held 80 MB there (20M row versions), and
//! 160 MB after a full refresh (both commits' rows); as runs of 6 bytes each it is about a tenth of
//! that (an estimate from the run lengths; the loads' peaks are measured in docs/PERFORMANCE.md,
//! session 21). Many small commits touching each key once write runs of one or two rows, so a
//! chunk whose runs would take more room than a number per row is kept as the numbers: never
//! larger than a vector, and half of it when the chunk's key numbers lie within 65,536 of each
//! other (every chunk of a table of fewer keys than that). The workload's commits touch each key
//! once, runs of about two rows: 48 KB a chunk as runs, 32 KB as numbers of two bytes (a third of
//! the 38 MB heaptrack found at the peak of a 10M-event rebuild, docs/PERFORMANCE.md).

use std::ops::Range;

/// Rows per chunk; a run's start within its chunk fits in a `u16`.
#[cfg(not(feature = "small-parts"))]
const CHUNK: usize = 1 << 14;
/// A few rows per chunk: tests reach sealed and let-go chunks with a few hundred rows
/// (the `small-parts` feature, `.ci/run`).
#[cfg(feature = "small-parts")]
const CHUNK: usize = 8;

/// A full chunk.
enum Sealed {
    /// Runs of one key: run `r` starts at offset `starts[r]` (the first at 0) and its rows
    /// belong to key `keys[r]`.
    Runs {
        starts: Box<[u16]>,
        keys: Box<[u32]>,
    },
    /// One key number per row, as its offset from the chunk's least.
    Narrow { least: u32, offsets: Box<[u16]> },
    /// One key number per row.
    Dense(Box<[u32]>),
    /// Let go of ([`KeyNumbers::let_go_before`]): the row directories in the store hold them.
    Stored,
}

impl Sealed {
    /// Bytes a chunk of `runs` runs takes as runs.
    fn runs_bytes(runs: usize) -> usize {
        runs * (size_of::<u16>() + size_of::<u32>())
    }

    fn get(&self, o: usize) -> Option<u32> {
        match self {
            Sealed::Runs { starts, keys } => Some(keys[run_at(starts, o)]),
            Sealed::Narrow { least, offsets } => Some(least + u32::from(offsets[o])),
            Sealed::Dense(v) => Some(v[o]),
            Sealed::Stored => None,
        }
    }

    /// Appends the numbers of offsets `r`; `None` if the chunk was let go of.
    fn copy_into(&self, r: Range<usize>, out: &mut Vec<u32>) -> Option<()> {
        match self {
            Sealed::Runs { starts, keys } => expand_runs(starts, keys, CHUNK, r, out),
            Sealed::Narrow { least, offsets } => {
                out.extend(offsets[r].iter().map(|&o| least + u32::from(o)))
            }
            Sealed::Dense(v) => out.extend_from_slice(&v[r]),
            Sealed::Stored => return None,
        }
        Some(())
    }
}

/// The run that holds offset `o` (runs start at `starts`, the first at 0).
fn run_at(starts: &[u16], o: usize) -> usize {
    starts.partition_point(|&s| s as usize <= o) - 1
}

/// Appends the key of each offset of `r` in a chunk of `len` rows kept as runs.
fn expand_runs(starts: &[u16], keys: &[u32], len: usize, r: Range<usize>, out: &mut Vec<u32>) {
    if r.is_empty() {
        return;
    }
    let mut run = run_at(starts, r.start);
    let mut o = r.start;
    while o < r.end {
        let run_end = starts.get(run + 1).map_or(len, |&s| s as usize);
        let n = run_end.min(r.end) - o;
        out.extend(std::iter::repeat_n(keys[run], n));
        o += n;
        run += 1;
    }
}

/// A key number per row version, appended in id order.
#[derive(Default)]
pub(crate) struct KeyNumbers {
    sealed: Vec<Sealed>,
    /// The chunk being filled, as runs (offsets within it, and keys).
    open_starts: Vec<u16>,
    open_keys: Vec<u32>,
    len: usize,
    /// How many chunks from the first are let go of ([`KeyNumbers::let_go_before`]).
    let_go: usize,
}

impl KeyNumbers {
    pub fn push(&mut self, key: u32) {
        let o = self.len % CHUNK;
        if o == 0 || self.open_keys.last() != Some(&key) {
            self.open_starts.push(o as u16);
            self.open_keys.push(key);
        }
        self.len += 1;
        if self.len.is_multiple_of(CHUNK) {
            self.seal();
        }
    }

    /// Keeps the full open chunk in the smallest of its forms.
    fn seal(&mut self) {
        let starts = std::mem::take(&mut self.open_starts);
        let keys = std::mem::take(&mut self.open_keys);
        let least = keys.iter().copied().min().unwrap_or(0);
        let narrow = keys.iter().all(|&k| k - least <= u32::from(u16::MAX));
        let numbers = CHUNK
            * if narrow {
                size_of::<u16>()
            } else {
                size_of::<u32>()
            };
        if Sealed::runs_bytes(keys.len()) < numbers {
            self.sealed.push(Sealed::Runs {
                starts: starts.into(),
                keys: keys.into(),
            });
            return;
        }
        let mut dense = Vec::with_capacity(CHUNK);
        expand_runs(&starts, &keys, CHUNK, 0..CHUNK, &mut dense);
        self.sealed.push(match narrow {
            // Each offset fits: checked above.
            true => Sealed::Narrow {
                least,
                offsets: dense.iter().map(|&k| (k - least) as u16).collect(),
            },
            false => Sealed::Dense(dense.into()),
        });
    }

    pub fn extend(&mut self, items: impl IntoIterator<Item = u32>) {
        for v in items {
            self.push(v);
        }
    }

    /// The key number of row `i` (`None` if it was let go of); panics past the end, as indexing
    /// a `Vec` does.
    pub fn get(&self, i: usize) -> Option<u32> {
        assert!(i < self.len, "index {i} past the end ({})", self.len);
        let (c, o) = (i / CHUNK, i % CHUNK);
        match self.sealed.get(c) {
            Some(s) => s.get(o),
            None => Some(self.open_keys[run_at(&self.open_starts, o)]),
        }
    }

    /// Lets go of the numbers of the full chunks of rows before `end`: whole chunks of
    /// [`CHUNK`] rows, so some rows before `end` may stay.
    pub fn let_go_before(&mut self, end: usize) {
        let chunks = (end / CHUNK).min(self.sealed.len());
        for c in self.let_go..chunks {
            self.sealed[c] = Sealed::Stored;
        }
        self.let_go = self.let_go.max(chunks);
    }

    /// The key numbers of `range`, copied; `None` if some were let go of.
    pub fn copy_range(&self, range: Range<usize>) -> Option<Vec<u32>> {
        assert!(range.end <= self.len, "range past the end ({})", self.len);
        let mut out = Vec::with_capacity(range.len());
        let mut i = range.start;
        while i < range.end {
            let (c, o) = (i / CHUNK, i % CHUNK);
            let n = (CHUNK - o).min(range.end - i);
            match self.sealed.get(c) {
                Some(s) => s.copy_into(o..o + n, &mut out)?,
                None => expand_runs(
                    &self.open_starts,
                    &self.open_keys,
                    self.len % CHUNK,
                    o..o + n,
                    &mut out,
                ),
            }
            i += n;
        }
        Some(out)
    }

    /// Bytes the key numbers take, spare capacity aside: for tests of the encoding's size.
    #[cfg(test)]
    fn heap_bytes(&self) -> usize {
        let sealed: usize = self
            .sealed
            .iter()
            .map(|s| match s {
                Sealed::Runs { keys, .. } => Sealed::runs_bytes(keys.len()),
                Sealed::Narrow { offsets, .. } => offsets.len() * size_of::<u16>(),
                Sealed::Dense(v) => v.len() * size_of::<u32>(),
                Sealed::Stored => 0,
            })
            .sum();
        sealed + Sealed::runs_bytes(self.open_keys.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn long_runs_of_one_key_take_a_few_bytes_per_run_and_read_back() {
        let mut k = KeyNumbers::default();
        // 20 keys of 5,000 rows each: 100,000 rows, runs crossing chunk ends.
        k.extend((0..20u32).flat_map(|key| std::iter::repeat_n(key, 5_000)));
        assert_eq!(k.get(0), Some(0));
        assert_eq!(k.get(CHUNK), Some((CHUNK / 5_000) as u32));
        assert_eq!(k.get(99_999), Some(19));
        let want: Vec<u32> = (0..100_000).map(|i| (i / 5_000) as u32).collect();
        assert_eq!(k.copy_range(0..100_000).unwrap(), want);
        // A run per key, and one more where a chunk starts inside a key's rows.
        let runs = 20 + 100_000usize.div_ceil(CHUNK);
        assert!(
            k.heap_bytes() <= Sealed::runs_bytes(runs),
            "{}",
            k.heap_bytes()
        );
    }

    #[test]
    fn a_new_key_every_row_is_kept_as_numbers_no_larger_than_a_vector() {
        let mut k = KeyNumbers::default();
        let n = 3 * CHUNK + 5;
        // Keys 10,000 apart: a chunk of eight rows or more spans more than a `u16`.
        let key = |i: usize| i as u32 * 10_000;
        k.extend((0..n).map(key));
        assert_eq!(k.get(CHUNK), Some(key(CHUNK)));
        assert_eq!(k.get(n - 1), Some(key(n - 1)));
        let r = CHUNK - 2..2 * CHUNK + 3;
        let want: Vec<u32> = r.clone().map(key).collect();
        assert_eq!(k.copy_range(r).unwrap(), want);
        assert_eq!(k.copy_range(n..n).unwrap(), Vec::<u32>::new());
        assert_eq!(k.heap_bytes(), 3 * CHUNK * 4 + 5 * 6);
    }

    #[test]
    fn keys_of_a_chunk_within_65536_of_each_other_take_two_bytes_a_row() {
        let mut k = KeyNumbers::default();
        // Rows alternating between keys far apart from one chunk to the next, close within one.
        let key = |i: usize| (i / CHUNK) as u32 * 1_000_000 + (i % 2) as u32 * 65_535;
        let n = 2 * CHUNK + 7;
        k.extend((0..n).map(key));
        let want: Vec<u32> = (0..n).map(key).collect();
        assert_eq!(k.copy_range(0..n).unwrap(), want);
        assert_eq!(
            (k.get(CHUNK + 1), k.get(n - 1)),
            (Some(key(CHUNK + 1)), Some(key(n - 1)))
        );
        assert_eq!(k.heap_bytes(), 2 * CHUNK * 2 + 7 * 6);
        // One key 65,536 past the chunk's least: kept as numbers of four bytes.
        let mut k = KeyNumbers::default();
        k.extend((0..CHUNK).map(|i| (i % 2) as u32 * 65_536));
        assert_eq!(k.heap_bytes(), CHUNK * 4);
        assert_eq!(k.get(CHUNK - 1), Some(65_536));
    }

    #[test]
    fn chunks_let_go_of_read_as_none_and_the_rest_as_before() {
        let mut k = KeyNumbers::default();
        // Three full chunks, and an open one of `open` rows (each a run).
        let open = CHUNK / 2 + 3;
        let n = 3 * CHUNK + open;
        k.extend((0..n).map(|i| (i % 3) as u32));
        // Up to a row inside the third chunk: only the first two, whole, are let go of.
        k.let_go_before(2 * CHUNK + 5);
        assert_eq!((k.get(0), k.get(2 * CHUNK - 1)), (None, None));
        assert_eq!(k.get(2 * CHUNK), Some(((2 * CHUNK) % 3) as u32));
        assert_eq!(k.get(n - 1), Some(((n - 1) % 3) as u32));
        assert_eq!(k.copy_range(CHUNK - 1..CHUNK + 1), None);
        let want: Vec<u32> = (2 * CHUNK..n).map(|i| (i % 3) as u32).collect();
        assert_eq!(k.copy_range(2 * CHUNK..n), Some(want));
        // Past the end, and again: only the sealed chunks; the open one stays.
        k.let_go_before(10 * CHUNK);
        assert_eq!(k.get(2 * CHUNK), None);
        assert_eq!(k.get(3 * CHUNK), Some(((3 * CHUNK) % 3) as u32));
        assert_eq!(k.heap_bytes(), Sealed::runs_bytes(open));
    }

    #[test]
    #[should_panic(expected = "past the end")]
    fn reading_past_the_end_panics() {
        let mut k = KeyNumbers::default();
        k.push(1);
        k.get(1);
    }

    proptest! {
        /// Whatever the keys, each row and each range reads back what a vector holds.
        #[test]
        /// Segments are runs of one key or rows alternating between two (which make chunks
        /// kept as numbers).
        fn key_numbers_read_back_as_a_vector_of_them(
            segments in proptest::collection::vec((any::<bool>(), 0u32..4, 1usize..20_000), 0..8),
            a in 0usize..160_000,
            b in 0usize..160_000,
        ) {
            let want: Vec<u32> = segments
                .iter()
                .flat_map(|&(alternate, k, n)| {
                    // Keys 40,000 apart: chunks of numbers of two bytes and of four.
                    let k = k * 40_000;
                    (0..n).map(move |i| if alternate { k + (i % 2) as u32 } else { k })
                })
                .collect();
            let mut k = KeyNumbers::default();
            k.extend(want.iter().copied());
            for i in (0..want.len()).step_by(97) {
                prop_assert_eq!(k.get(i), Some(want[i]));
            }
            let (lo, hi) = (a.min(b).min(want.len()), a.max(b).min(want.len()));
            prop_assert_eq!(k.copy_range(lo..hi).unwrap(), &want[lo..hi]);
            prop_assert_eq!(k.copy_range(0..want.len()).unwrap(), want);
        }
    }
}
