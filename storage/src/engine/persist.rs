//! A table's state as durable records (docs/FORMAT.md §6): each commit's batch holds the pages it
//! froze ([`TableState::take_pages`]) and its row directory; a checkpoint's batch holds the heads
//! of the keys changed since the last one ([`TableState::take_changed_keys`], [`TableState::head`]),
//! the pages thawed since ([`TableState::take_freed`]) and the summary. An open rebuilds the state from them ([`TableState::restore`]) and replays
//! only the commits after the checkpoint.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use roaring::RoaringBitmap;

use super::cold::{Frozen, PageWrite, PagesRead};
use super::fold::Version;
use super::fold::{Bytes, RowId};
use super::rows::RetiredBy;
use super::{DirPart, Dirty, Evicted, KeyState, RowStore, StoredRow, TableState, UnreadHot};
use crate::error::{corrupt, Result};
use crate::flow::StoredAs;
use crate::format::cold_page::{decode_cold, encode_cold, Events};
use crate::format::derived::{
    decode_head, decode_head_listed, encode_head, FrozenHead, HeadMeta, ListedHead, RowDir, Summary,
};
use crate::format::page_list::{ListBoxes, PageList};

impl TableState {
    /// The keys changed since the last call (every key after [`TableState::mark_all_changed`]),
    /// in key order: those whose heads a checkpoint writes ([`TableState::head`]).
    pub fn take_changed_keys(&mut self) -> Vec<Bytes> {
        match std::mem::replace(&mut self.dirty, Dirty::Keys(BTreeSet::new())) {
            Dirty::All => self.keys.keys().cloned().collect(),
            Dirty::Keys(keys) => keys.into_iter().collect(),
        }
    }

    /// The head record of `key`, if the table has that key.
    pub fn head(&self, key: &Bytes) -> Result<Option<Vec<u8>>> {
        self.keys
            .get(key)
            .map(|ks| self.encode_head(key, ks))
            .transpose()
    }

    /// Lets go of the page lists of `keys` in memory, their heads just written: each is read
    /// back from its head when it is needed (a thaw, a scan, the next head). Only a table whose
    /// pages are stored.
    pub fn shed_page_lists(&mut self, keys: &[Bytes]) {
        if !self.pages.stored() {
            return;
        }
        for key in keys {
            if let Some(ks) = self.keys.get_mut(key) {
                ks.shed_page_list();
            }
        }
    }

    /// Drops `keys` from memory, their heads written: their states, and their rows, which the
    /// row store then counts as frozen. Their numbers stay taken. A commit applied in parts does
    /// this after each part (its keys are in no other part), so that it never holds the whole
    /// table; from then on the state is not the table ([`TableState::evicted`]).
    /// The keys by number go too (a state that holds only some keys keeps none: a load of
    /// millions of keys in parts kept them all, 145 MB at 2.5M keys).
    pub fn evict(&mut self, keys: &[Bytes]) {
        for key in keys {
            if let Some(ks) = self.keys.remove(key) {
                for r in ks.rows {
                    drop(self.rows.freeze(r));
                }
            }
        }
        self.key_list = Vec::new();
        self.evicted = Evicted::Keys;
    }

    /// [`TableState::evict`] of every key in memory: what is left is the state
    /// [`TableState::restore_skeleton`] would read from the records just written.
    pub fn evict_all(&mut self) {
        let keys: Vec<Bytes> = self.keys.keys().cloned().collect();
        self.evict(&keys);
    }

    /// Whether [`TableState::evict`] dropped keys: the state must not be used once its commit
    /// is written.
    pub fn evicted(&self) -> Evicted {
        self.evicted
    }

    /// How many keys the table numbered: every key it has, in memory or not.
    pub fn numbered(&self) -> u32 {
        self.numbered
    }

    /// The pages thawed since the last call (to delete).
    pub fn take_freed(&mut self) -> Vec<PageWrite> {
        self.pages.take_freed()
    }

    /// The pages written since the last call.
    pub fn take_pages(&mut self) -> Vec<PageWrite> {
        self.pages.take_pending()
    }

    /// How many pages [`TableState::take_pages`] would return.
    pub fn pending_pages(&self) -> usize {
        self.pages.pending()
    }

    /// Makes the next [`TableState::take_changed_keys`] return every key.
    pub fn mark_all_changed(&mut self) {
        self.dirty = Dirty::All;
    }

    /// The part of commit `version`'s row directory not taken yet, and its part number
    /// (`None`: nothing more); see [`RowStore::take_directory`].
    pub fn take_row_directory(
        &mut self,
        version: u64,
        part: DirPart,
    ) -> Result<Option<(u32, RowDir)>> {
        self.rows.take_directory(version, part)
    }

    /// The rest of commit `version`'s row directory, handed to `f` in parts of at most `rows`
    /// rows, each built as it is handed over; see [`RowStore::take_directory_parts`].
    pub fn take_row_directory_parts(
        &mut self,
        version: u64,
        rows: usize,
        f: impl FnMut(RowDir) -> Result<()>,
    ) -> Result<bool> {
        self.rows.take_directory_parts(version, rows, f)
    }

    /// The commits that wrote or retired rows, in version order.
    pub fn row_versions_by_commit(&self) -> Vec<u64> {
        self.rows.versions()
    }

    /// The ids commit `version` retired (`None`: none): from the row store, or, once it let go
    /// of them ([`TableState::let_go_directories`]), from the commit's row directory in the store.
    pub fn retired_by(&self, version: u64) -> Result<Option<Cow<'_, RoaringBitmap>>> {
        match self.rows.retired_by(version) {
            RetiredBy::Nothing => Ok(None),
            RetiredBy::Held(r) => Ok(Some(Cow::Borrowed(r))),
            RetiredBy::Stored => {
                let parts = self.stored_directories(version)?;
                if parts.is_empty() {
                    return Err(corrupt(format!(
                        "the row directory of commit {version}, which retired rows, is missing"
                    )));
                }
                let mut retired = RoaringBitmap::new();
                for part in parts {
                    retired |= part.retired;
                }
                Ok(Some(Cow::Owned(retired)))
            }
        }
    }

    /// The parts of commit `version`'s row directory, read from the store.
    pub fn stored_directories(&self, version: u64) -> Result<Vec<RowDir>> {
        self.pages.stored_directories(version)
    }

    /// Lets go of what the row directories of the commits up to `version` say (the ids each
    /// retired, its rows' key numbers: [`RowStore::let_go_directories`]), when the store holds
    /// them (each commit writes its own beside its record, docs/FORMAT.md §6); a table whose
    /// pages are not stored keeps them. Call it only once those directories are written: after
    /// the batch of `version`'s commit, or a read of the table from its records.
    pub fn let_go_directories(&mut self, version: u64) {
        if self.pages.stored() {
            self.rows.let_go_directories(version);
        }
    }

    /// The table summary as of commit `version`.
    pub fn summary(&self, version: u64) -> Summary {
        Summary {
            version,
            rows: self.rows.len() as u64,
            // Every key numbered, those evicted or never read too.
            keys: u64::from(self.numbered),
            truncates: self.truncates.iter().map(|t| t.to_vec()).collect(),
            live: Some(self.rows.live.len()),
        }
    }

    fn encode_head(&self, key: &Bytes, ks: &KeyState) -> Result<Vec<u8>> {
        let rows = ks.rows.iter().map(|&r| {
            self.rows
                .get(r)
                .map(|row| (r, row))
                .ok_or_else(|| corrupt(format!("row {r} of a hot key is frozen")))
        });
        let rows: Vec<(RowId, &StoredRow)> = rows.collect::<Result<_>>()?;
        let (hot, hot_zone) = encode_cold(
            &self.types,
            // Written again at each checkpoint that finds the key changed.
            crate::format::Effort::Quick,
            ks.events
                .iter()
                .flat_map(|(seq, cands)| cands.iter().map(move |(sys, e)| (&seq[..], &sys[..], e))),
            ks.timeline
                .iter()
                .map(|(s, v)| (&s[..], &v.values, v.end.as_deref(), v.row)),
            rows.into_iter(),
        )
        .map_err(|e| super::cold::in_key(key, e))?;
        let meta = HeadMeta {
            no: ks.no,
            max_sys: ks.max_sys.as_ref().map(|s| s.to_vec()),
            deleted_since: ks.deleted_since,
            frozen: ks
                .frozen
                .as_ref()
                .map(|f| f.to_head(key, &self.pages))
                .transpose()
                .map_err(|e| super::cold::in_key(key, e))?,
            next_page: ks.next_page,
        };
        encode_head(&meta, &hot_zone, &hot)
    }

    /// Rebuilds an empty state from the heads of every key (`(key, head record)`, in key order),
    /// the row directories of every commit (in version order) and the summary. With the other
    /// scopes the heads are those of some keys only, and no row directory is read: the state can
    /// then be read by key, and nothing else (see [`RowStore::sparse`]).
    pub fn restore(
        &mut self,
        heads: impl Iterator<Item = Result<(Vec<u8>, Vec<u8>)>>,
        scope: Scope,
        summary: &Summary,
    ) -> Result<()> {
        let n_keys = usize::try_from(summary.keys).map_err(corrupt)?;
        // Only a whole table lists its keys by number (a few keys' numbers are checked in range).
        let whole = matches!(scope, Scope::Whole(_));
        let mut key_list: Vec<Option<Bytes>> = vec![None; if whole { n_keys } else { 0 }];
        let mut hot_rows = Vec::new();
        let mut gc: Vec<(i64, Bytes)> = Vec::new();
        for head in heads {
            let (key, bytes) = head?;
            let key: Bytes = key.into();
            let (ks, rows) = self.key_from_head(&key, &bytes, &scope)?;
            let taken =
                || super::cold::in_key(&key, corrupt(format!("its number {} is taken", ks.no)));
            if whole {
                let slot = key_list
                    .get_mut(ks.no as usize)
                    .filter(|s| s.is_none())
                    .ok_or_else(taken)?;
                *slot = Some(key.clone());
            } else if ks.no as usize >= n_keys {
                return Err(taken());
            }
            hot_rows.extend(rows);
            if let (Some(ts), StoredAs::Scd1) = (ks.deleted_since, self.schema.mode) {
                gc.push((ts, key.clone()));
            }
            self.keys.insert(key, ks);
        }
        self.numbered = u32::try_from(n_keys).map_err(corrupt)?;
        self.truncates = truncates_of(summary);
        let Scope::Whole(dirs) = scope else {
            self.rows = RowStore::sparse(summary.rows, hot_rows)?;
            return Ok(());
        };
        self.key_list = key_list
            .into_iter()
            .enumerate()
            .map(|(no, k)| k.ok_or_else(|| corrupt(format!("no key has number {no}"))))
            .collect::<Result<_>>()?;
        self.rows = rows_of(dirs, hot_rows, summary)?;
        gc.sort();
        self.gc_queue = VecDeque::from(gc);
        Ok(())
    }
}

impl TableState {
    /// A key's state and hot rows, as its head `bytes` holds them.
    fn key_from_head(
        &mut self,
        key: &Bytes,
        bytes: &[u8],
        scope: &Scope,
    ) -> Result<(KeyState, Vec<(RowId, StoredRow)>)> {
        let read = read_head(key, bytes, scope, self.types.len())?;
        Ok(self.take_read(read))
    }

    /// What of a key read by [`read_head`] goes to the state beside the key itself: its pages
    /// counted.
    fn take_read(&mut self, read: ReadHead) -> (KeyState, Vec<(RowId, StoredRow)>) {
        let ReadHead { ks, rows } = read;
        if let Some(f) = &ks.frozen {
            self.pages.count(f);
        }
        (ks, rows)
    }

    /// Restores an empty state from the heads of some keys as a scan reads them
    /// ([`RowsHead`], in key order), as of `summary`: the state can then be scanned, and
    /// nothing else.
    pub fn restore_rows(
        &mut self,
        heads: impl Iterator<Item = Result<(Bytes, Arc<RowsHead>)>>,
        summary: &Summary,
    ) -> Result<()> {
        let n_keys = usize::try_from(summary.keys).map_err(corrupt)?;
        // The keys come in order: gathered, then built into the map in one pass if it is empty
        // (a span's state is), instead of a search and an insert each.
        let mut keys = Vec::with_capacity(heads.size_hint().0);
        for head in heads {
            let (key, h) = head?;
            if h.no as usize >= n_keys {
                return Err(super::cold::in_key(
                    &key,
                    corrupt(format!("its number {} is taken", h.no)),
                ));
            }
            let ks = KeyState {
                no: h.no,
                max_sys: h.max_sys.clone(),
                deleted_since: h.deleted_since,
                frozen: h.frozen.clone().map(Box::new),
                next_page: h.next_page,
                ..Default::default()
            };
            if let Some(f) = &ks.frozen {
                self.pages.count(f);
            }
            self.unread_hot.insert(key.clone(), h.unread.clone());
            keys.push((key, ks));
        }
        match self.keys.is_empty() {
            true => self.keys = BTreeMap::from_iter(keys),
            false => self.keys.extend(keys),
        }
        self.numbered = u32::try_from(n_keys).map_err(corrupt)?;
        self.truncates = truncates_of(summary);
        self.rows = RowStore::sparse(summary.rows, Vec::new())?;
        Ok(())
    }

    /// The state of a table that holds none of its keys yet: its row store (every row frozen,
    /// from the row directories of every commit, in version order), its truncates and how many
    /// keys it numbered, as of `summary`. Keys are read in later ([`TableState::load_keys`]);
    /// a commit applied in parts reads each part's keys before it and drops them after
    /// ([`TableState::evict`]), so it is never the table ([`TableState::evicted`]).
    pub fn restore_skeleton(&mut self, dirs: Vec<(u64, RowDir)>, summary: &Summary) -> Result<()> {
        self.rows = rows_of(dirs, Vec::new(), summary)?;
        self.numbered = u32::try_from(summary.keys).map_err(corrupt)?;
        self.truncates = truncates_of(summary);
        self.evicted = Evicted::Keys;
        Ok(())
    }

    /// Reads keys into a state from [`TableState::restore_skeleton`]: `(key, head record)`, each
    /// key once; their hot rows go back in place in the row store. A key it holds already is left
    /// as it is. From [`READ_APART_FROM`] heads, they are read on two threads.
    pub fn load_keys(&mut self, heads: Vec<(Bytes, Vec<u8>)>) -> Result<()> {
        let heads: Vec<_> = heads
            .into_iter()
            .filter(|(key, _)| !self.keys.contains_key(key))
            .collect();
        let width = self.types.len();
        // Each head's bytes are let go of as soon as it is read.
        let read = |(key, bytes): (Bytes, Vec<u8>)| -> Result<(Bytes, ReadHead)> {
            let read = read_head(&key, &bytes, &Scope::Keys, width)?;
            Ok((key, read))
        };
        // Reading heads is most of the work, and changes nothing: both threads read them.
        let read: Vec<_> = match heads.len() < READ_APART_FROM {
            true => heads.into_iter().map(read).collect::<Result<_>>()?,
            false => (crate::two_threads::map("asof-read", heads, read).into_iter())
                .collect::<Result<_>>()?,
        };
        self.rows
            .reserve_put_back(read.iter().map(|(_, r)| r.rows.len()).sum());
        for (key, read) in read {
            let (ks, rows) = self.take_read(read);
            if ks.no >= self.numbered {
                return Err(super::cold::in_key(
                    &key,
                    corrupt(format!("its number {} was never given", ks.no)),
                ));
            }
            for (id, row) in rows {
                self.rows
                    .put_back(id, row)
                    .map_err(|e| super::cold::in_key(&key, e))?;
            }
            self.keys.insert(key, ks);
        }
        Ok(())
    }
}

/// A key's head, read: its state and its hot rows. Reading a head changes nothing, so many are
/// read at once ([`TableState::load_keys`]).
struct ReadHead {
    ks: KeyState,
    rows: Vec<(RowId, StoredRow)>,
}

/// Reads the head `bytes` of `key`, in a table of `width` columns, as `scope` asks.
fn read_head(key: &Bytes, bytes: &[u8], scope: &Scope, width: usize) -> Result<ReadHead> {
    let bad = |e: crate::error::Error| super::cold::in_key(key, e);
    // A key read to be read keeps a long page list in chunks, decompressed as needed, with
    // the boxes it stores (a scan of the key's latest version chooses its pages by them).
    let (meta, list, hot) = match scope {
        Scope::Read => {
            let h = decode_head_listed(bytes, ListBoxes::Stored).map_err(bad)?;
            (h.meta, h.list, h.hot)
        }
        Scope::Whole(_) | Scope::Keys => {
            let (meta, hot) = decode_head(bytes).map_err(bad)?;
            (meta, None, hot)
        }
    };
    let events = match scope {
        Scope::Read => Events::Skip,
        Scope::Whole(_) | Scope::Keys => Events::Decode,
    };
    let (events, versions, rows) = decode_cold(hot, key, width, events).map_err(bad)?;
    let mut ks = KeyState {
        no: meta.no,
        max_sys: meta.max_sys.map(Bytes::from),
        deleted_since: meta.deleted_since,
        frozen: meta.frozen.map(|f| Box::new(frozen_of(f, list))),
        next_page: meta.next_page,
        ..Default::default()
    };
    for e in events {
        ks.events.entry(e.seq).or_default().push((e.sys, e.event));
    }
    for (start, values, end, row) in versions {
        ks.timeline.insert(start, Version { values, end, row });
    }
    ks.rows = rows.iter().map(|(id, _)| *id).collect();
    Ok(ReadHead { ks, rows })
}

/// A key's frozen pages as its head lists them, in its meta or apart, in chunks.
fn frozen_of(f: FrozenHead, list: Option<PageList>) -> Frozen {
    match list {
        Some(list) => Frozen::from_head_listed(f, list),
        None => Frozen::from_head(f),
    }
}

/// A key's head as a scan reads it: what of its state a scan needs, its page list in chunks
/// (decompressed as the scan's zones need them, with the boxes a scan of the latest version
/// chooses pages by: stored, or made in a head the read cache keeps) and its hot part still encoded, to be decoded
/// with its frozen rows when the scan reaches it ([`TableState::cold_batch`]). Its events and
/// timeline, which only lookups and commits need, are not read. Shared by every scan that reads
/// the same head record, through the store's read cache ([`TableState::restore_rows`]).
pub(crate) struct RowsHead {
    no: u32,
    max_sys: Option<Bytes>,
    deleted_since: Option<i64>,
    frozen: Option<Frozen>,
    next_page: u32,
    unread: Arc<UnreadHot>,
}

impl RowsHead {
    /// The head `bytes` of `key`, as a scan reads it, with the bytes it holds in memory; with
    /// its page list's boxes as `boxes` asks ([`ListBoxes`]).
    pub fn decode(key: &Bytes, bytes: &[u8], boxes: ListBoxes) -> Result<(RowsHead, u64)> {
        let bad = |e: crate::error::Error| super::cold::in_key(key, e);
        let ListedHead {
            meta,
            list,
            hot_zone,
            hot,
        } = decode_head_listed(bytes, boxes).map_err(bad)?;
        let head = RowsHead {
            no: meta.no,
            max_sys: meta.max_sys.map(Bytes::from),
            deleted_since: meta.deleted_since,
            frozen: meta.frozen.map(|f| frozen_of(f, list)),
            next_page: meta.next_page,
            unread: Arc::new(UnreadHot {
                zone: hot_zone.map(Vec::into_boxed_slice),
                part: hot.into(),
            }),
        };
        let held = std::mem::size_of::<RowsHead>()
            + head.max_sys.as_ref().map_or(0, |s| s.len())
            + (head.frozen.as_ref()).map_or(0, |f| f.heap_bytes() + PagesRead::heap_bytes())
            + head.unread.zone.as_ref().map_or(0, |z| z.len())
            + head.unread.part.len();
        Ok((head, held as u64))
    }
}

/// From how many heads [`TableState::load_keys`] reads them on two threads.
const READ_APART_FROM: usize = 256;

/// The row store the row directories `dirs` describe, with the rows of `hot` in place; an error
/// if it does not hold the rows `summary` counts, or not as many live ones (the count that
/// answers `count(*)` without a scan: `Store::live_rows`).
fn rows_of(
    dirs: Vec<(u64, RowDir)>,
    hot: Vec<(RowId, StoredRow)>,
    summary: &Summary,
) -> Result<RowStore> {
    let rows = RowStore::restore(dirs, hot)?;
    if rows.len() as u64 != summary.rows {
        return Err(corrupt(format!(
            "the row directories hold {} rows, the summary says {}",
            rows.len(),
            summary.rows
        )));
    }
    if let Some(live) = summary.live.filter(|&l| l != rows.live.len()) {
        return Err(corrupt(format!(
            "the row directories hold {} rows not retired, the summary says {live}",
            rows.live.len()
        )));
    }
    Ok(rows)
}

/// The SCD1 truncate sequences `summary` lists.
fn truncates_of(summary: &Summary) -> BTreeSet<Bytes> {
    summary
        .truncates
        .iter()
        .map(|t| Bytes::from(&t[..]))
        .collect()
}

/// What [`TableState::restore`] rebuilds.
pub(crate) enum Scope {
    /// The whole table, from the row directories of every commit (in version order).
    Whole(Vec<(u64, RowDir)>),
    /// Only the keys whose heads it is given, to be read by key and changed by a commit.
    Keys,
    /// Only the keys whose heads it is given, to be read by key (lookups, point scans) and never
    /// changed: their events, which only a commit refolds, are not decoded. (A state to be
    /// scanned is restored from [`RowsHead`]s: [`TableState::restore_rows`].)
    Read,
}
