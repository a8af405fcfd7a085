//! The row store: every version of every target row, in an append-only arena.

use std::collections::BTreeMap;
use std::ops::Index;

use roaring::RoaringBitmap;

use super::fold::{Bytes, RowId};
use super::key_numbers::KeyNumbers;
use crate::error::{corrupt, Result};
use crate::format::derived::RowDir;
use crate::prefetch::{prefetch, prefetch_bytes};
use crate::value::{Row, Value};

pub use crate::record::StoredRow;

impl StoredRow {
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

    /// [`RowStore::prefetch_ahead`] for a reader of rows already found (`at(p)` is the row at
    /// position `p`).
    pub fn prefetch_ahead<'a>(i: usize, at: impl Fn(usize) -> Option<&'a StoredRow>) {
        const AHEAD: usize = 8;
        if let Some(row) = at(i + 3 * AHEAD) {
            row.prefetch_slot();
        }
        if let Some(row) = at(i + 2 * AHEAD) {
            row.prefetch();
        }
        if let Some(row) = at(i + AHEAD) {
            row.prefetch_payload();
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

/// Rows per chunk of slots.
#[cfg(not(feature = "small-parts"))]
const CHUNK: usize = 1 << 12;
/// A few rows per chunk, so that tests free chunks and scatter their rows (the `small-parts`
/// feature, `.ci/run`).
#[cfg(feature = "small-parts")]
const CHUNK: usize = 32;

/// Rows before the end of the commits whose directories a row store let go of whose key numbers
/// it keeps all the same ([`RowStore::let_go_directories`]): the change feed of a recent commit
/// reads the keys of the rows it retired, most of them written by the commits just before.
#[cfg(not(feature = "small-parts"))]
const KEY_NUMBERS_KEPT: usize = 1 << 17;
/// None: every sealed chunk of key numbers before the last stored commit is let go of, and tests
/// read them back from the row directories (the `small-parts` feature).
#[cfg(feature = "small-parts")]
const KEY_NUMBERS_KEPT: usize = 0;

/// Whether a chunk of `n` rows of which only `hot` are not frozen is not worth keeping: its slots
/// (128 bytes each, frozen or not) are freed and its hot rows lie beside the chunks, in
/// [`RowStore::scattered`]. Freeing only chunks whose rows were all frozen left a 10M-event load
/// applied in parts with nearly every chunk kept (each key's hot tail lies in it): 2.5 GB of
/// husks (docs/PERFORMANCE.md).
fn too_few_hot(hot: usize, n: usize) -> bool {
    hot * 4 < n
}

/// Row versions by id, in fixed-size chunks (growing never moves a row), the set of live ids, and
/// the ids each commit retired.
///
/// Ids are handed out in commit order, so the rows a commit wrote are one range of ids
/// ([`RowStore::first_added`]); together with [`RowStore::retired_by`] that is the change feed.
///
/// A row can be *frozen* ([`super::cold`]): its data moves to its key's cold page and its slot
/// holds an empty husk; a full chunk with few rows left that are not frozen is freed, and those
/// rows move beside the chunks ([`too_few_hot`]). [`RowStore::get`] returns
/// `None` for a frozen row, and [`RowStore::key_of`] says whose page holds it.
pub(crate) struct RowStore {
    chunks: Vec<Vec<StoredRow>>,
    len: usize,
    /// Per chunk, how many of its rows are frozen.
    chunk_cold: Vec<u32>,
    cold: RoaringBitmap,
    /// Per row, the number of its key ([`super::KeyState::no`]).
    key_of: KeyNumbers,
    /// Per commit that wrote rows, its version and first row id.
    commits: Vec<(u64, RowId)>,
    husk: StoredRow,
    pub live: RoaringBitmap,
    /// The rows each commit retired, of the commits whose sets are held here.
    retired: BTreeMap<u64, RoaringBitmap>,
    /// The commits, in version order and before every one of `retired`, whose retired rows were
    /// let go of ([`RowStore::let_go_directories`]): their row directories in the store list them.
    retired_stored: Vec<u64>,
    /// Rows outside the chunks: the rows of a sparse store ([`RowStore::sparse`]), which has no
    /// chunks (a few keys' rows scattered over the whole range of ids), and the rows that are not
    /// frozen in a chunk that holds nothing (thawed, or hot among frozen ones when the store was
    /// restored).
    scattered: foldhash::HashMap<RowId, StoredRow>,
    /// What of the row directory of the commit being applied was taken ahead of its end
    /// ([`RowStore::take_directory`]).
    dir_taken: Option<DirTaken>,
}

/// Whether more of a commit's row directory will be taken ([`RowStore::take_directory`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DirPart {
    /// A part of a commit applied in parts: later ones may follow.
    Ahead,
    /// The rest, at the end of the commit (all of it if nothing was taken ahead).
    Rest,
}

/// What the row store knows of the ids a commit retired ([`RowStore::retired_by`]).
#[derive(Clone, Copy, Debug)]
pub(crate) enum RetiredBy<'a> {
    /// It retired none.
    Nothing,
    /// These.
    Held(&'a RoaringBitmap),
    /// Some, listed by its row directory in the store ([`RowStore::let_go_directories`]).
    Stored,
}

impl<'a> RetiredBy<'a> {
    /// The ids of a commit whose retired rows are held (the commit being applied): `None` if it
    /// retired none.
    pub fn held(self) -> Option<&'a RoaringBitmap> {
        debug_assert!(
            !matches!(self, RetiredBy::Stored),
            "a commit's retired rows let go of"
        );
        match self {
            RetiredBy::Held(r) => Some(r),
            RetiredBy::Nothing | RetiredBy::Stored => None,
        }
    }
}

/// What [`DirPart::Ahead`] takes have taken of commit `version`'s row directory.
struct DirTaken {
    version: u64,
    /// The rows up to this id.
    rows_end: RowId,
    /// The rows retired.
    retired: RoaringBitmap,
    /// The number of the next part.
    next: u32,
}

/// The part of a commit's directory that [`RowStore::take_untaken`] took: its number among the
/// commit's parts, its rows and the rows it retired.
struct Untaken {
    no: u32,
    rows: std::ops::Range<RowId>,
    retired: RoaringBitmap,
}

impl Default for RowStore {
    fn default() -> Self {
        let empty: Bytes = Bytes::from(&[][..]);
        RowStore {
            chunks: Vec::new(),
            len: 0,
            chunk_cold: Vec::new(),
            cold: RoaringBitmap::new(),
            key_of: KeyNumbers::default(),
            commits: Vec::new(),
            husk: StoredRow {
                key: empty,
                values: Row::from(Vec::new()),
                start: None,
                end: None,
                sys_start: None,
                sys_end: None,
                added: 0,
                retired: None,
            },
            live: RoaringBitmap::new(),
            retired: BTreeMap::new(),
            retired_stored: Vec::new(),
            scattered: Default::default(),
            dir_taken: None,
        }
    }
}

impl RowStore {
    pub fn len(&self) -> usize {
        self.len
    }

    /// Adds a row of the key numbered `key`.
    pub fn push(&mut self, row: StoredRow, key: u32) -> RowId {
        if self.len.is_multiple_of(CHUNK) {
            self.chunks.push(Vec::with_capacity(CHUNK));
            self.chunk_cold.push(0);
        }
        let id = self.len as RowId;
        if self.commits.last().is_none_or(|c| c.0 < row.added) {
            self.commits.push((row.added, id));
        }
        self.chunks.last_mut().expect("a chunk").push(row);
        self.key_of.push(key);
        self.len += 1;
        // Not `RoaringBitmap::push`: it finds a container's largest value by a scan from its
        // top, up to a thousand words while a container fills (10% of a 10M load's commit).
        self.live.insert(id);
        id
    }

    /// The row versions that have a slot in memory: in the chunks (frozen or not), and beside
    /// them.
    pub fn slots(&self) -> usize {
        self.chunks.iter().map(Vec::len).sum::<usize>() + self.scattered.len()
    }

    /// The row, unless it is frozen.
    pub fn get(&self, id: RowId) -> Option<&StoredRow> {
        if self.cold.contains(id) {
            return None;
        }
        let i = id as usize;
        match self.chunks.get(i / CHUNK) {
            Some(c) if !c.is_empty() => c.get(i % CHUNK),
            _ => self.scattered.get(&id),
        }
    }

    /// The slot of row `id`, which is not frozen: in its chunk, or scattered when its chunk
    /// holds nothing (see [`RowStore::thaw`]).
    fn slot_mut(&mut self, id: RowId) -> &mut StoredRow {
        let i = id as usize;
        match self.chunks.get_mut(i / CHUNK) {
            Some(c) if !c.is_empty() => &mut c[i % CHUNK],
            _ => self
                .scattered
                .get_mut(&id)
                .unwrap_or_else(|| panic!("row {id} is frozen or missing")),
        }
    }

    /// Whether any row is frozen (a sparse store's rows but its own are).
    pub fn any_cold(&self) -> bool {
        !self.cold.is_empty() || self.scattered.len() < self.len && self.chunks.is_empty()
    }

    /// The number of the key that row `id` belongs to, unless the row store let go of it
    /// ([`RowStore::let_go_directories`]; the row directory of the commit that wrote the row,
    /// [`RowStore::written_by`], holds it).
    pub fn key_of(&self, id: RowId) -> Option<u32> {
        self.key_of.get(id as usize)
    }

    /// The commit that wrote row `id`, which is below [`RowStore::len`].
    pub fn written_by(&self, id: RowId) -> Option<u64> {
        let after = self.commits.partition_point(|&(_, first)| first <= id);
        after.checked_sub(1).map(|c| self.commits[c].0)
    }

    /// Takes row `id` out (its key's cold page holds it now); frees its chunk once it is full and
    /// holds [`too_few_hot`] rows that are not frozen, which then lie beside the chunks.
    pub fn freeze(&mut self, id: RowId) -> StoredRow {
        let i = id as usize;
        let (c, o) = (i / CHUNK, i % CHUNK);
        let row = if self.chunks[c].is_empty() {
            self.scattered
                .remove(&id)
                .unwrap_or_else(|| panic!("row {id} is frozen already"))
        } else {
            std::mem::replace(&mut self.chunks[c][o], self.husk.clone())
        };
        self.cold.insert(id);
        self.chunk_cold[c] += 1;
        let hot = CHUNK - self.chunk_cold[c] as usize;
        if self.chunks[c].len() == CHUNK && too_few_hot(hot, CHUNK) {
            self.scatter(c);
        }
        row
    }

    /// Frees chunk `c` (which is full, so no push reaches it), moving its rows that are not
    /// frozen beside the chunks.
    fn scatter(&mut self, c: usize) {
        let first = (c * CHUNK) as RowId;
        for (id, row) in (first..).zip(std::mem::take(&mut self.chunks[c])) {
            if !self.cold.contains(id) {
                self.scattered.insert(id, row);
            }
        }
    }

    /// Puts a frozen row back: in its chunk, or, when its chunk was freed, beside the chunks (a
    /// late event thaws a key whose rows lie in chunks all over the table's history; bringing
    /// each chunk back whole cost a 10M-event ingest gigabytes: docs/PERFORMANCE.md).
    pub fn thaw(&mut self, id: RowId, row: StoredRow) {
        let i = id as usize;
        let (c, o) = (i / CHUNK, i % CHUNK);
        if self.chunks[c].is_empty() {
            self.scattered.insert(id, row);
        } else {
            self.chunks[c][o] = row;
        }
        self.cold.remove(id);
        self.chunk_cold[c] -= 1;
    }

    /// Puts back a row its key's head holds, in a store restored with every row frozen
    /// ([`RowStore::restore`] without hot rows); an error if the row is not a frozen one.
    pub fn put_back(&mut self, id: RowId, row: StoredRow) -> Result<()> {
        if id as usize >= self.len || !self.cold.contains(id) {
            return Err(corrupt(format!("row {id} of a key head is out of place")));
        }
        self.thaw(id, row);
        Ok(())
    }

    /// Makes room for `n` rows put back ([`RowStore::put_back`]) beside the chunks, where a row
    /// whose chunk holds nothing goes, without growing the map many times over.
    pub fn reserve_put_back(&mut self, n: usize) {
        self.scattered.reserve(n);
    }

    /// A row written by the commit being applied, to be changed before anyone can see it.
    pub fn get_mut(&mut self, id: RowId) -> &mut StoredRow {
        self.slot_mut(id)
    }

    /// Marks row `id` as retired by commit `version`.
    pub fn retire(&mut self, id: RowId, version: u64) {
        debug_assert!(!self.cold.contains(id), "row {id} is frozen");
        self.slot_mut(id).retired = Some(version);
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
        StoredRow::prefetch_ahead(i, |p| at(p).and_then(|r| self.get(r)));
    }

    /// The ids commit `version` retired, or that they are in its row directory in the store.
    pub fn retired_by(&self, version: u64) -> RetiredBy<'_> {
        match self.retired.get(&version) {
            Some(r) => RetiredBy::Held(r),
            None if self.retired_stored.binary_search(&version).is_ok() => RetiredBy::Stored,
            None => RetiredBy::Nothing,
        }
    }

    /// Lets go of what the row directories of the commits up to `version` say, which the store
    /// holds: the ids each retired ([`RowStore::retired_by`] says `Stored` from now on) and the
    /// key numbers of their rows but the last [`KEY_NUMBERS_KEPT`] ([`RowStore::key_of`] says
    /// `None`). Held, both grew with the table's history, about 6 bytes per event of the workload
    /// (65 MB at 10M events: docs/PERFORMANCE.md, session 57).
    pub fn let_go_directories(&mut self, version: u64) {
        let next = version.checked_add(1);
        let end = next.map_or(self.len, |n| self.first_added(n) as usize);
        self.key_of
            .let_go_before(end.saturating_sub(KEY_NUMBERS_KEPT));
        let kept = next.map_or_else(BTreeMap::new, |n| self.retired.split_off(&n));
        let gone = std::mem::replace(&mut self.retired, kept);
        self.retired_stored.extend(gone.into_keys());
    }

    /// The part of what commit `version` did to the row store that was not taken yet, with its
    /// part number (`None` if nothing): the rows it wrote, with their keys, and those it retired.
    /// A commit applied in parts takes each part's [`DirPart::Ahead`], to write it ahead of the
    /// commit, and the rest at its end: no directory of all its rows is ever built (at 20M rows,
    /// that and its encoding held 300 MB at once).
    pub fn take_directory(&mut self, version: u64, part: DirPart) -> Result<Option<(u32, RowDir)>> {
        let Some(Untaken { no, rows, retired }) = self.take_untaken(version, part) else {
            return Ok(None);
        };
        let key_of = self.key_numbers(version, rows.start..rows.end)?;
        Ok(Some((
            no,
            RowDir {
                first: rows.start,
                key_of,
                retired,
            },
        )))
    }

    /// The key numbers of rows `ids` of commit `version`, for its directory: never let go of, as
    /// a commit's rows are only once its directory is written.
    fn key_numbers(&self, version: u64, ids: std::ops::Range<RowId>) -> Result<Vec<u32>> {
        self.key_of
            .copy_range(ids.start as usize..ids.end as usize)
            .ok_or_else(|| {
                corrupt(format!(
                    "the key numbers of commit {version}'s rows were let go of before its directory was written"
                ))
            })
    }

    /// [`RowStore::take_directory`] of the rest of commit `version` ([`DirPart::Rest`]), handed
    /// to `f` in parts of at most `rows` rows (its retired ids with the first), each built as it
    /// is handed over: a rebuild's base commit of 13M rows built its directory whole (53 MB),
    /// then copied it into parts (docs/PERFORMANCE.md, session 40). Whether there was any.
    pub fn take_directory_parts(
        &mut self,
        version: u64,
        rows: usize,
        mut f: impl FnMut(RowDir) -> Result<()>,
    ) -> Result<bool> {
        let Some(Untaken {
            rows: range,
            retired,
            ..
        }) = self.take_untaken(version, DirPart::Rest)
        else {
            return Ok(false);
        };
        let step = RowId::try_from(rows.max(1)).unwrap_or(RowId::MAX);
        let mut retired = Some(retired);
        let mut at = range.start;
        loop {
            let to = at.saturating_add(step).min(range.end);
            f(RowDir {
                first: at,
                key_of: self.key_numbers(version, at..to)?,
                retired: retired.take().unwrap_or_default(),
            })?;
            at = to;
            if at >= range.end {
                return Ok(true);
            }
        }
    }

    /// What of commit `version`'s directory is not taken yet, now taken (`part`: as
    /// [`RowStore::take_directory`] says); `None` if nothing.
    fn take_untaken(&mut self, version: u64, part: DirPart) -> Option<Untaken> {
        let taken = self.dir_taken.take().filter(|t| t.version == version);
        let end = self.first_added(version + 1);
        let first = self
            .first_added(version)
            .max(taken.as_ref().map_or(0, |t| t.rows_end))
            .min(end);
        debug_assert!(
            self.retired_stored.binary_search(&version).is_err(),
            "the directory of commit {version} is taken after its retired rows were let go of"
        );
        let all_retired = self.retired.get(&version);
        let retired = match (all_retired, &taken) {
            (Some(r), Some(t)) => r - &t.retired,
            (Some(r), None) => r.clone(),
            (None, _) => RoaringBitmap::new(),
        };
        let no = taken.as_ref().map_or(0, |t| t.next);
        let empty = first == end && retired.is_empty();
        if part == DirPart::Ahead {
            self.dir_taken = Some(DirTaken {
                version,
                rows_end: end,
                retired: all_retired.cloned().unwrap_or_default(),
                next: no + u32::from(!empty),
            });
        }
        (!empty).then_some(Untaken {
            no,
            rows: first..end,
            retired,
        })
    }

    /// Every commit that wrote or retired rows, in version order.
    pub fn versions(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self.commits.iter().map(|c| c.0).collect();
        v.extend(self.retired.keys());
        v.extend(&self.retired_stored);
        v.sort_unstable();
        v.dedup();
        v
    }

    /// The row store that the directories of every commit (in version order) describe, holding
    /// the rows of `hot` (the keys' hot parts); every other row is frozen in its key's pages.
    pub fn restore(
        dirs: impl IntoIterator<Item = (u64, RowDir)>,
        hot: Vec<(RowId, StoredRow)>,
    ) -> Result<RowStore> {
        let mut s = RowStore::default();
        for (version, d) in dirs {
            // A commit applied in parts has a directory per part, in order.
            if !d.key_of.is_empty() {
                let last = s.commits.last().map(|c| c.0);
                if d.first as usize != s.len || last.is_some_and(|v| v > version) {
                    return Err(corrupt(format!(
                        "the row directory of commit {version} starts at row {}, not {}",
                        d.first, s.len
                    )));
                }
                if last != Some(version) {
                    s.commits.push((version, d.first));
                }
                s.len += d.key_of.len();
                s.key_of.extend(d.key_of);
            }
            if !d.retired.is_empty() {
                *s.retired.entry(version).or_default() |= d.retired;
            }
        }
        let len = u32::try_from(s.len).map_err(|_| corrupt("over 2^32 row versions"))?;
        s.live.insert_range(0..len);
        for r in s.retired.values() {
            if r.max().is_some_and(|m| m >= len) {
                return Err(corrupt("a row directory retires a row never written"));
            }
            s.live -= r;
        }
        s.place(hot)?;
        Ok(s)
    }

    /// A row store of `len` row versions that holds only those of `hot` (the hot rows of some
    /// keys), and knows nothing of the others: enough to read those keys, by key, and no more
    /// (no change feed, no scan in id order).
    /// Every row it does not hold reads as frozen ([`RowStore::get`] finds it in no chunk);
    /// the frozen set is not spelled out, which would cost a bitmap of the whole table's ids.
    pub fn sparse(len: u64, hot: Vec<(RowId, StoredRow)>) -> Result<RowStore> {
        let mut s = RowStore {
            len: usize::try_from(len).map_err(corrupt)?,
            ..Default::default()
        };
        let n = u32::try_from(s.len).map_err(|_| corrupt("over 2^32 row versions"))?;
        for (id, row) in hot {
            if id >= n || s.scattered.contains_key(&id) {
                return Err(corrupt(format!("row {id} of a key head is out of place")));
            }
            if row.retired.is_none() {
                s.live.insert(id);
            }
            s.scattered.insert(id, row);
        }
        Ok(s)
    }

    /// Puts the rows of `hot` in place in a store of `len` rows that has none yet; every other
    /// row is frozen.
    fn place(&mut self, hot: Vec<(RowId, StoredRow)>) -> Result<()> {
        let s = self;
        let len = u32::try_from(s.len).map_err(|_| corrupt("over 2^32 row versions"))?;
        let mut hot_ids = RoaringBitmap::new();
        for (id, _) in &hot {
            if *id >= len || !hot_ids.insert(*id) {
                return Err(corrupt(format!("row {id} of a key head is out of place")));
            }
        }
        s.cold.insert_range(0..len);
        s.cold -= &hot_ids;
        for c in 0..s.len.div_ceil(CHUNK) {
            let lo = (c * CHUNK) as u32;
            let n = CHUNK.min(s.len - c * CHUNK);
            let hot_here = hot_ids.range_cardinality(lo..lo + n as u32) as usize;
            // A chunk with few hot rows holds nothing, as after a freeze, and its hot rows lie
            // beside the chunks; the last chunk is kept at its length, since pushes append to it.
            let last = c + 1 == s.len.div_ceil(CHUNK);
            s.chunks.push(if last || !too_few_hot(hot_here, n) {
                vec![s.husk.clone(); n]
            } else {
                Vec::new()
            });
            s.chunk_cold.push((n - hot_here) as u32);
        }
        for (id, row) in hot {
            let i = id as usize;
            match s.chunks[i / CHUNK].is_empty() {
                true => {
                    s.scattered.insert(id, row);
                }
                false => s.chunks[i / CHUNK][i % CHUNK] = row,
            }
        }
        Ok(())
    }

    /// The first id written by commit `version` or later (`len()` if none).
    pub fn first_added(&self, version: u64) -> RowId {
        let i = self.commits.partition_point(|c| c.0 < version);
        self.commits.get(i).map_or(self.len as RowId, |c| c.1)
    }
}

/// A row the caller knows is not frozen (the engine touches only rows of its keys' hot parts).
impl Index<RowId> for RowStore {
    type Output = StoredRow;
    fn index(&self, id: RowId) -> &StoredRow {
        debug_assert!(!self.cold.contains(id), "row {id} is frozen");
        let i = id as usize;
        match self.chunks.get(i / CHUNK) {
            Some(c) if !c.is_empty() => &c[i % CHUNK],
            _ => &self.scattered[&id],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(n: i64) -> StoredRow {
        StoredRow {
            key: Bytes::from(&n.to_be_bytes()[..]),
            values: Row::from(vec![Value::Int(n)]),
            start: None,
            end: None,
            sys_start: None,
            sys_end: None,
            added: 1,
            retired: None,
        }
    }

    fn value(s: &RowStore, id: RowId) -> Option<Value> {
        s.get(id).map(|r| r.values[0].clone())
    }

    #[test]
    fn a_full_chunk_mostly_frozen_is_freed_and_its_other_rows_stay_readable() {
        let mut s = RowStore::default();
        let n = 2 * CHUNK + 10;
        for i in 0..n {
            s.push(row(i as i64), (i % 7) as u32);
        }
        // Freeze all of the first chunk but every fifth row: a fifth is hot, fewer than a quarter.
        let hot = |i: usize| i.is_multiple_of(5);
        for i in (0..CHUNK).filter(|i| !hot(*i)) {
            assert_eq!(s.freeze(i as RowId).values[0], Value::Int(i as i64));
        }
        assert!(s.chunks[0].is_empty(), "the first chunk is freed");
        assert_eq!(s.scattered.len(), CHUNK.div_ceil(5));
        for i in 0..CHUNK {
            let want = hot(i).then_some(Value::Int(i as i64));
            assert_eq!(value(&s, i as RowId), want, "row {i}");
        }
        // The freed chunk's rows are still written, retired, frozen and thawed by id.
        s.get_mut(5).values = Row::from(vec![Value::Int(-5)]);
        s.retire(5, 2);
        assert_eq!(
            s.retired_by(2).held().unwrap().iter().collect::<Vec<_>>(),
            [5]
        );
        assert_eq!(s[5].retired, Some(2));
        let frozen = s.freeze(10);
        assert_eq!(value(&s, 10), None);
        s.thaw(10, frozen);
        assert_eq!(value(&s, 10), Some(Value::Int(10)));
        s.thaw(1, row(1));
        assert_eq!(value(&s, 1), Some(Value::Int(1)));
        // The key of every row is kept, frozen or not.
        assert!((0..n).all(|i| s.key_of(i as RowId) == Some((i % 7) as u32)));
    }

    #[test]
    fn retired_rows_let_go_of_are_said_to_be_stored_and_their_commits_still_listed() {
        let mut s = RowStore::default();
        for (i, added) in [1, 1, 2, 3].into_iter().enumerate() {
            let mut r = row(i as i64);
            r.added = added;
            s.push(r, 0);
        }
        s.retire(0, 2);
        s.retire(1, 3);
        s.retire(2, 4);
        s.let_go_directories(3);
        assert!(matches!(s.retired_by(2), RetiredBy::Stored));
        assert!(matches!(s.retired_by(3), RetiredBy::Stored));
        assert!(matches!(s.retired_by(1), RetiredBy::Nothing));
        let held = s.retired_by(4).held().unwrap();
        assert_eq!(held.iter().collect::<Vec<_>>(), [2]);
        assert_eq!(s.versions(), [1, 2, 3, 4]);
        // Letting go again, of more, keeps the stored commits in order.
        s.let_go_directories(u64::MAX);
        assert!(matches!(s.retired_by(4), RetiredBy::Stored));
        assert_eq!(s.versions(), [1, 2, 3, 4]);
        assert!(s.retired_stored.is_sorted());
    }

    #[test]
    fn a_chunk_with_a_quarter_hot_or_still_filling_is_kept() {
        let mut s = RowStore::default();
        for i in 0..CHUNK + CHUNK / 2 {
            s.push(row(i as i64), 0);
        }
        for i in (0..CHUNK).filter(|i| !i.is_multiple_of(4)) {
            s.freeze(i as RowId);
        }
        assert_eq!(s.chunks[0].len(), CHUNK, "a quarter hot is kept");
        // The last chunk is half full: pushes still append to it, so it stays however frozen.
        for i in CHUNK..CHUNK + CHUNK / 2 {
            s.freeze(i as RowId);
        }
        assert_eq!(s.chunks[1].len(), CHUNK / 2);
        let id = s.push(row(-1), 0);
        assert_eq!(value(&s, id), Some(Value::Int(-1)));
        assert!(s.scattered.is_empty());
    }

    /// Pushes rows of commit `version` (keys `key(i)`) and retires `retire`.
    fn commit_rows(s: &mut RowStore, version: u64, n: usize, retire: &[RowId]) {
        for i in 0..n {
            let mut r = row(i as i64);
            r.added = version;
            s.push(r, (s.len % 5) as u32);
        }
        for &id in retire {
            s.retire(id, version);
        }
    }

    #[test]
    fn a_row_directory_taken_a_part_at_a_time_restores_the_store_the_whole_one_does() {
        // Commit 1 whole; commit 2 in three parts, the second of which only retires rows; commit
        // 3 retires only.
        // `rebuilt` as `whole`, its directories taken at the end, in parts of two rows, as a
        // rebuild writes them.
        let (mut whole, mut parted) = (RowStore::default(), RowStore::default());
        let mut rebuilt = RowStore::default();
        let mut dirs_whole = Vec::new();
        let mut dirs_parted = Vec::new();
        for s in [&mut whole, &mut parted, &mut rebuilt] {
            commit_rows(s, 1, 6, &[]);
        }
        for (s, dirs) in [
            (&mut whole, &mut dirs_whole),
            (&mut parted, &mut dirs_parted),
        ] {
            let (no, d) = s.take_directory(1, DirPart::Rest).unwrap().unwrap();
            assert_eq!((no, d.first, d.key_of.len()), (0, 0, 6));
            dirs.push((1, d));
        }
        let parts: [(usize, &[RowId]); 3] = [(4, &[0, 2]), (0, &[1]), (3, &[6, 3])];
        for (n, retire) in parts {
            commit_rows(&mut whole, 2, n, retire);
            commit_rows(&mut parted, 2, n, retire);
            commit_rows(&mut rebuilt, 2, n, retire);
            if let Some((no, d)) = parted.take_directory(2, DirPart::Ahead).unwrap() {
                assert_eq!(
                    no as usize,
                    dirs_parted.len() - 1,
                    "parts are numbered from 0"
                );
                dirs_parted.push((2, d));
            }
        }
        // Nothing is left for the end of commit 2 in parts; all of it whole.
        assert_eq!(parted.take_directory(2, DirPart::Rest).unwrap(), None);
        dirs_whole.push((
            2,
            whole.take_directory(2, DirPart::Rest).unwrap().unwrap().1,
        ));
        assert_eq!(dirs_parted.len(), 4);
        let retired_in_parts: Vec<Vec<u32>> = dirs_parted[1..]
            .iter()
            .map(|(_, d)| d.retired.iter().collect())
            .collect();
        assert_eq!(retired_in_parts, [vec![0, 2], vec![1], vec![3, 6]]);
        for (s, dirs) in [
            (&mut whole, &mut dirs_whole),
            (&mut parted, &mut dirs_parted),
        ] {
            s.retire(4, 3);
            dirs.push((3, s.take_directory(3, DirPart::Rest).unwrap().unwrap().1));
        }
        let restored = |dirs: Vec<(u64, RowDir)>| {
            let s = RowStore::restore(dirs, Vec::new()).unwrap();
            let keys: Vec<u32> = (0..s.len() as RowId)
                .map(|id| s.key_of(id).unwrap())
                .collect();
            let retired: Vec<(u64, Vec<u32>)> = s
                .retired
                .iter()
                .map(|(v, r)| (*v, r.iter().collect()))
                .collect();
            (
                s.commits.clone(),
                keys,
                retired,
                s.live.iter().collect::<Vec<_>>(),
            )
        };
        rebuilt.retire(4, 3);
        let mut split: Vec<(u64, RowDir)> = Vec::new();
        for v in rebuilt.versions() {
            let push = |d| {
                split.push((v, d));
                Ok(())
            };
            assert!(rebuilt.take_directory_parts(v, 2, push).unwrap());
        }
        let shape: Vec<(u64, u32, usize, usize)> = (split.iter())
            .map(|(v, d)| (*v, d.first, d.key_of.len(), d.retired.len() as usize))
            .collect();
        assert_eq!(
            shape,
            [
                (1, 0, 2, 0),
                (1, 2, 2, 0),
                (1, 4, 2, 0),
                (2, 6, 2, 5),
                (2, 8, 2, 0),
                (2, 10, 2, 0),
                (2, 12, 1, 0),
                (3, 13, 0, 1)
            ]
        );
        let want = restored(dirs_whole);
        assert_eq!(restored(split), want);
        assert_eq!(want.0, [(1, 0), (2, 6)]);
        assert_eq!(want.2, [(2, vec![0, 1, 2, 3, 6]), (3, vec![4])]);
        assert_eq!(restored(dirs_parted), want);
    }

    #[test]
    fn row_directory_parts_out_of_order_are_refused_as_damage() {
        let mut s = RowStore::default();
        commit_rows(&mut s, 1, 3, &[]);
        let (_, a) = s.take_directory(1, DirPart::Ahead).unwrap().unwrap();
        commit_rows(&mut s, 1, 2, &[]);
        let (no, b) = s.take_directory(1, DirPart::Rest).unwrap().unwrap();
        assert_eq!((no, b.first), (1, 3));
        let e = RowStore::restore([(1, b), (1, a)], Vec::new())
            .err()
            .unwrap();
        assert!(e.to_string().contains("starts at row 3, not 0"), "{e}");
    }
}
