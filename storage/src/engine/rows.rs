//! The row store: every version of every target row, in an append-only arena.

use std::collections::BTreeMap;
use std::ops::Index;

use roaring::RoaringBitmap;

use super::fold::{Bytes, RowId};
use crate::value::{Row, Value};

/// One stored version of a target row. It knows the commit that wrote it and the commit that
/// retired it, which is all time travel and the change feed need.
#[derive(Clone, Debug)]
pub struct StoredRow {
    pub(crate) key: Bytes,
    pub(crate) values: Row,
    pub(crate) start: Option<Bytes>,
    pub(crate) end: Option<Bytes>,
    pub(crate) sys_start: Option<Bytes>,
    pub(crate) sys_end: Option<Bytes>,
    pub(crate) added: u64,
    pub(crate) retired: Option<u64>,
}

impl StoredRow {
    /// Whether the row is part of the table as of `version`.
    pub(crate) fn visible_at(&self, version: u64) -> bool {
        self.added <= version && self.retired.is_none_or(|r| r > version)
    }

    /// Asks the CPU to start loading what reading this row will touch: its values and its
    /// bounds, which live in separate heap blocks.
    fn prefetch(&self) {
        prefetch_bytes(
            self.values.as_ptr().cast(),
            std::mem::size_of_val::<[Value]>(&self.values),
        );
        for b in [&self.start, &self.end, &self.sys_start, &self.sys_end]
            .into_iter()
            .flatten()
        {
            prefetch(b.as_ptr());
        }
    }

    /// Asks the CPU to start loading the row itself (its slot in the arena).
    fn prefetch_slot(&self) {
        prefetch_bytes(
            (self as *const StoredRow).cast(),
            std::mem::size_of::<StoredRow>(),
        );
    }

    /// Like [`StoredRow::prefetch`], for the heap blocks the values point to (strings, bytes);
    /// call it once the values themselves have arrived.
    fn prefetch_payload(&self) {
        for v in self.values.iter() {
            match v {
                Value::Str(s) => prefetch(s.as_ptr()),
                Value::Bytes(b) => prefetch(b.as_ptr()),
                _ => {}
            }
        }
    }
}

/// [`prefetch`] for every cache line of the `len` bytes at `base`.
#[inline(always)]
fn prefetch_bytes(base: *const u8, len: usize) {
    for off in (0..len).step_by(64) {
        prefetch(base.wrapping_add(off));
    }
}

/// A hint to load the cache line at `p`; never faults, whatever `p` is.
#[inline(always)]
fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `prefetcht0` is a hint: it reads nothing architecturally and cannot fault, and SSE
    // is part of every x86_64 target.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

const CHUNK: usize = 1 << 16;

/// Row versions by id, in fixed-size chunks (growing never moves a row), the set of live ids, and
/// the ids each commit retired.
///
/// Ids are handed out in commit order, so the rows a commit wrote are one range of ids
/// ([`RowStore::first_added`]); together with [`RowStore::retired_by`] that is the change feed.
#[derive(Default)]
pub(crate) struct RowStore {
    chunks: Vec<Vec<StoredRow>>,
    len: usize,
    pub live: RoaringBitmap,
    retired: BTreeMap<u64, RoaringBitmap>,
}

impl RowStore {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn push(&mut self, row: StoredRow) -> RowId {
        if self.len % CHUNK == 0 {
            self.chunks.push(Vec::with_capacity(CHUNK));
        }
        let id = self.len as RowId;
        self.chunks.last_mut().expect("a chunk").push(row);
        self.len += 1;
        self.live.insert(id);
        id
    }

    /// A row written by the commit being applied, to be changed before anyone can see it.
    pub fn get_mut(&mut self, id: RowId) -> &mut StoredRow {
        let i = id as usize;
        &mut self.chunks[i / CHUNK][i % CHUNK]
    }

    /// Marks row `id` as retired by commit `version`.
    pub fn retire(&mut self, id: RowId, version: u64) {
        let i = id as usize;
        self.chunks[i / CHUNK][i % CHUNK].retired = Some(version);
        self.live.remove(id);
        self.retired.entry(version).or_default().insert(id);
    }

    /// For a reader at position `i` of a sequence of row ids (`at(p)` is the id at position `p`,
    /// `None` past the end): starts loading what the rows a few positions ahead will need. Each
    /// row's slot, values, bounds and strings are separate cache misses that depend on each other,
    /// so they are requested in stages: the slot 24 positions ahead, its values and bounds 16
    /// ahead (the slot has arrived by then), the strings 8 ahead. The loads of many rows then
    /// overlap instead of each row waiting for its own.
    pub fn prefetch_ahead(&self, i: usize, at: impl Fn(usize) -> Option<RowId>) {
        const AHEAD: usize = 8;
        if let Some(r) = at(i + 3 * AHEAD) {
            self[r].prefetch_slot();
        }
        if let Some(r) = at(i + 2 * AHEAD) {
            self[r].prefetch();
        }
        if let Some(r) = at(i + AHEAD) {
            self[r].prefetch_payload();
        }
    }

    /// The ids commit `version` retired.
    pub fn retired_by(&self, version: u64) -> Option<&RoaringBitmap> {
        self.retired.get(&version)
    }

    /// The first id written by commit `version` or later (`len()` if none).
    pub fn first_added(&self, version: u64) -> RowId {
        let (mut lo, mut hi) = (0usize, self.len);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self[mid as RowId].added < version {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo as RowId
    }
}

impl Index<RowId> for RowStore {
    type Output = StoredRow;
    fn index(&self, id: RowId) -> &StoredRow {
        let i = id as usize;
        &self.chunks[i / CHUNK][i % CHUNK]
    }
}
