//! A vector kept in fixed-size chunks: growing never copies what it holds and never reserves
//! more than one chunk ahead. The row store's key number per row was a `Vec<u32>`: at 20M row
//! versions its doubling reserved 134 MB, and it held both the old and the new buffer while it
//! grew (docs/PERFORMANCE.md).

use std::ops::Range;

/// Items per chunk.
const CHUNK: usize = 1 << 14;

pub(crate) struct Chunked<T> {
    chunks: Vec<Vec<T>>,
    len: usize,
}

impl<T> Default for Chunked<T> {
    fn default() -> Self {
        Chunked {
            chunks: Vec::new(),
            len: 0,
        }
    }
}

impl<T: Copy> Chunked<T> {
    pub fn push(&mut self, v: T) {
        if self.len.is_multiple_of(CHUNK) {
            self.chunks.push(Vec::with_capacity(CHUNK));
        }
        self.chunks.last_mut().expect("a chunk").push(v);
        self.len += 1;
    }

    pub fn extend(&mut self, items: impl IntoIterator<Item = T>) {
        for v in items {
            self.push(v);
        }
    }

    /// Item `i`; panics past the end, as indexing a `Vec` does.
    pub fn get(&self, i: usize) -> T {
        assert!(i < self.len, "index {i} past the end ({})", self.len);
        self.chunks[i / CHUNK][i % CHUNK]
    }

    /// The items of `range`, copied.
    pub fn copy_range(&self, range: Range<usize>) -> Vec<T> {
        assert!(range.end <= self.len, "range past the end ({})", self.len);
        let mut out = Vec::with_capacity(range.len());
        let mut i = range.start;
        while i < range.end {
            let (c, o) = (i / CHUNK, i % CHUNK);
            let n = (CHUNK - o).min(range.end - i);
            out.extend_from_slice(&self.chunks[c][o..o + n]);
            i += n;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_read_back_one_at_a_time_and_by_ranges_across_chunks() {
        let mut c = Chunked::default();
        let n = 3 * CHUNK + 5;
        c.extend((0..n).map(|i| i as u32 * 3));
        assert_eq!(c.get(CHUNK), CHUNK as u32 * 3);
        assert_eq!(c.get(n - 1), (n - 1) as u32 * 3);
        let r = CHUNK - 2..2 * CHUNK + 3;
        let want: Vec<u32> = r.clone().map(|i| i as u32 * 3).collect();
        assert_eq!(c.copy_range(r), want);
        assert_eq!(c.copy_range(n..n), Vec::<u32>::new());
        assert_eq!(c.copy_range(0..n).len(), n);
    }

    #[test]
    #[should_panic(expected = "past the end")]
    fn reading_past_the_end_panics() {
        let mut c = Chunked::default();
        c.push(1u32);
        c.get(1);
    }
}
