//! A target table's derived records (docs/FORMAT.md §9) on the key-value layer: key heads (`K`),
//! frozen pages (`P`), row directories (`X`) and the summary (`G`). Every commit that changes the
//! table writes them in its own batch ([`put_changes`]), so that they are always as of the last
//! commit; opening a table reads them ([`load`]) instead of replaying its log. When they are not
//! current (a store written by an earlier format, a crash during a rebuild, a VACUUM), the table
//! is replayed once and they are written again ([`rebuild`]).

use std::any::TypeId;
use std::ops::Bound;
use std::sync::Arc;

use super::page_pins::{FreedPage, PagePins};
use super::records::SET_PROPERTIES;
use super::replay::{gc_secs_in, replay_log, ReplayRange, Replayed};
use super::{in_table, Checkpoints, Table};
use crate::engine::fold::Bytes;
use crate::engine::{Caching, DirPart, PageSource, PageWrite, RowsHead, Scope, TableState};
use crate::error::Result;
use crate::format::cold_page::RowBlock;
use crate::format::derived::{
    decode_freed, decode_head, decode_row_dir, decode_summary, encode_freed, encode_row_dir,
    encode_summary, RowDir, Summary,
};
use crate::format::keys::{self, key, parse_version};
use crate::format::page_list::{ListBoxes, PageEntry};
use crate::kv::{downcast, Keeping, KvPair, KvStore, Scanned, WriteBatch};
use crate::progress::Reporter;

/// The frozen pages of table `id`, read from the key-value layer.
pub(super) struct TablePages {
    pub kv: Arc<dyn KvStore>,
    pub id: u32,
}

impl PageSource for TablePages {
    fn page(&self, key: &[u8], no: u32) -> Result<Option<Vec<u8>>> {
        self.kv.get(&keys::page(self.id, key, no))
    }

    fn pages(&self, key: &[u8], nos: &[u32]) -> Result<Vec<Option<Vec<u8>>>> {
        let keys: Vec<Vec<u8>> = nos.iter().map(|&no| keys::page(self.id, key, no)).collect();
        self.kv.get_many(&keys)
    }

    fn row_parts(
        &self,
        key: &[u8],
        entries: &[&PageEntry],
    ) -> Result<Vec<Option<crate::engine::RowPart>>> {
        let keys: Vec<Vec<u8>> = (entries.iter())
            .map(|e| keys::page(self.id, key, e.no))
            .collect();
        let heads: Vec<u32> = entries.iter().map(|e| e.head).collect();
        self.kv.get_many_leading(&keys, &heads)
    }

    fn page_rows(&self, key: &[u8], e: &PageEntry) -> Result<Option<Arc<RowBlock>>> {
        crate::kv::get_decoded(&*self.kv, &keys::page(self.id, key, e.no), |page| {
            let rows = crate::engine::page_rows(e, page)?;
            let held = rows.heap_bytes() as u64;
            Ok((rows, held))
        })
    }

    fn listed(&self, key: &[u8]) -> Result<Option<Vec<PageEntry>>> {
        let Some(head) = self.kv.get(&keys::key_head(self.id, key))? else {
            return Ok(None);
        };
        let (meta, _) = decode_head(&head)?;
        Ok(Some(meta.frozen.map(|f| f.pages).unwrap_or_default()))
    }

    fn directories(&self, version: u64) -> Result<Vec<RowDir>> {
        (self.kv)
            .scan_prefix(&key(keys::ROW_DIR, self.id, Some(version), None))
            .map(|kv| decode_row_dir(&kv?.1))
            .collect()
    }
}

/// Whether a commit also writes a checkpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Checkpoint {
    /// Only the commit's pages and row directory.
    Later,
    /// Those, and the heads of every key changed since the last checkpoint, the list of the
    /// pages thawed since (deleted after it: [`write_checkpoint`]), and the summary that makes
    /// them current at this commit.
    Now,
}

/// Puts what commit `version` wrote of `state` (the pages it froze, its row directory) into `b`,
/// and with [`Checkpoint::Now`] a checkpoint at `version`.
pub(super) fn put_changes(
    b: &mut WriteBatch,
    id: u32,
    state: &mut TableState,
    version: u64,
    checkpoint: Checkpoint,
) -> Result<()> {
    put_pages(b, id, state.take_pages());
    if let Some((part, dir)) = state.take_row_directory(version, DirPart::Rest)? {
        b.put(keys::row_dir(id, version, part), encode_row_dir(&dir)?);
    }
    if checkpoint == Checkpoint::Now {
        put_checkpoint(b, id, state, version)?;
    }
    Ok(())
}

/// Puts a checkpoint of `state` at commit `version` into `b`: with the heads, the pages they
/// list that are not written yet. A state replayed from an earlier checkpoint holds the pages its
/// replay froze, which need not be those the replayed commits wrote before a crash (their numbers
/// can be the same, their bytes not): the heads must never be written without them.
pub(super) fn put_checkpoint(
    b: &mut WriteBatch,
    id: u32,
    state: &mut TableState,
    version: u64,
) -> Result<()> {
    put_pages(b, id, state.take_pages());
    // The heads of the keys changed since the last checkpoint are written by
    // [`write_checkpoint`], streamed with the batch, and so are the pages it freed, listed and
    // then deleted.
    put_summary(b, id, &state.summary(version))
}

/// The most rows a part of a row directory that a rebuild writes lists.
const REBUILD_DIR_ROWS: usize = 1 << 20;

/// From how many event blocks (a few thousand events each, about 500 before session 41's
/// blocks of 256 KiB) a rebuild reports its progress: from about 80,000 events.
const REBUILD_PROGRESS_BLOCKS: u64 = 16;

/// Where long work reports its progress ([`crate::progress::Progress`]).
pub(super) type Progressing = std::sync::Arc<dyn crate::progress::Progress>;

/// Pages deleted per batch by [`free_pages`] and [`write_checkpoint`].
const FREE_BATCH: usize = 512;

/// Deletes the pages table `id`'s `F` record lists (freed by checkpoints, not deleted yet), a few
/// hundred per batch, the record itself with the last. No head lists them, so a crash between
/// the batches leaves pages nothing reads, and the record, which the next open finishes. An open
/// calls this for every table (no scan holds a pin then); a checkpoint deletes what the pins
/// allow ([`write_checkpoint`]).
pub(super) fn free_pages(kv: &dyn KvStore, id: u32) -> Result<()> {
    let record = key(keys::FREED, id, None, None);
    let Some(bytes) = kv.get(&record)? else {
        return Ok(());
    };
    delete_pages(kv, id, &decode_freed(&bytes)?, &[])
}

/// Writes batch `b`, which holds a checkpoint of table `id` ([`put_checkpoint`]), with the heads
/// of the keys changed since the last one, streamed into the same write ([`KvStore::write_streamed`]),
/// and then deletes the pages it freed
/// and those earlier checkpoints kept, as far as `pins` allows (`page_pins`): its `F` record
/// lists every page freed and not deleted yet, and the deletions after it leave it listing those
/// a span may still read (or delete it with the last). They are best effort, since the
/// checkpoint is written: what is left is deleted by a later checkpoint or the next open. They
/// go a few hundred per batch: one sled batch deleting thousands of pages cost a full refresh of
/// 1M events 620 MB (docs/PERFORMANCE.md).
pub(super) fn write_checkpoint(
    kv: &dyn KvStore,
    id: u32,
    mut b: WriteBatch,
    state: &mut TableState,
    pins: &mut PagePins,
) -> Result<()> {
    let freed = state
        .take_freed()
        .into_iter()
        .map(|((k, no), _)| (k.to_vec(), no))
        .collect();
    let f = pins.checkpoint(freed);
    if !f.listed.is_empty() {
        b.put(key(keys::FREED, id, None, None), encode_freed(&f.listed)?);
    }
    // The heads, encoded [`HEAD_BATCH`] at a time as the write takes them: never all held at once.
    let changed = state.take_changed_keys();
    let shared = &*state;
    let mut heads = changed
        .chunks(HEAD_BATCH)
        .flat_map(|part| heads_of(id, shared, part));
    kv.write_streamed(b, &mut heads)?;
    drop(heads);
    // The heads list every page of their keys: memory need not.
    state.shed_page_lists(&changed);
    if !f.now.is_empty() && delete_pages(kv, id, &f.now, &f.kept).is_err() {
        pins.not_deleted(f);
    }
    Ok(())
}

/// Deletes pages `now` of table `id`, [`FREE_BATCH`] per batch; the last batch leaves its `F`
/// record listing `kept`, or deletes it.
fn delete_pages(kv: &dyn KvStore, id: u32, now: &[FreedPage], kept: &[FreedPage]) -> Result<()> {
    let record = key(keys::FREED, id, None, None);
    let parts: Vec<&[FreedPage]> = match now.is_empty() {
        true => vec![&[]],
        false => now.chunks(FREE_BATCH).collect(),
    };
    let last = parts.len() - 1;
    for (i, part) in parts.into_iter().enumerate() {
        let mut b = WriteBatch::default();
        for (k, no) in part {
            b.delete(keys::page(id, k, *no));
        }
        if i == last {
            match kept.is_empty() {
                true => b.delete(record.clone()),
                false => b.put(record.clone(), encode_freed(kept)?),
            }
        }
        kv.write(b)?;
    }
    Ok(())
}

/// How many key heads one batch of [`write_heads_ahead`] holds.
const HEAD_BATCH: usize = 512;

/// Writes the heads of the keys `state` changed since its last checkpoint, [`HEAD_BATCH`] per
/// batch, ahead of the checkpoint that follows (whose batch then holds no heads), after deleting
/// the table's summary in a batch of its own: until that checkpoint's batch writes the summary
/// again, nothing reads the heads, and a crash between leaves a table without a summary, whose
/// records its next use rebuilds from the log ([`rebuild`]). For a checkpoint of many keys at
/// once (a commit applied in parts, a rebuild): one batch of every key's head held its bytes
/// twice and sled's buffers for them at the peak of a 10M-event load.
pub(super) fn write_heads_ahead(kv: &dyn KvStore, id: u32, state: &mut TableState) -> Result<()> {
    forget_summary(kv, id)?;
    write_heads(kv, id, state)
}

/// Deletes table `id`'s summary, in a batch of its own: until a checkpoint writes it again, the
/// table's derived records are not read, and a crash leaves a table that its next use rebuilds
/// from the log. Heads may then be written ahead of the commit that makes them current.
pub(super) fn forget_summary(kv: &dyn KvStore, id: u32) -> Result<()> {
    let mut b = WriteBatch::default();
    b.delete(key(keys::SUMMARY, id, None, None));
    kv.write(b)
}

/// Hands `to` the batches that write the heads of the keys `state` changed since its last
/// checkpoint, [`HEAD_BATCH`] per batch, one at a time, for a table whose summary is deleted
/// ([`forget_summary`]). A commit applied in parts writes them after each part, and then drops
/// the part's keys from memory ([`TableState::evict`]; the others changed stay: a later part may
/// bring them events).
pub(super) fn for_each_head_batch(
    id: u32,
    state: &mut TableState,
    mut to: impl FnMut(WriteBatch) -> Result<()>,
) -> Result<Vec<Bytes>> {
    let changed = state.take_changed_keys();
    for part in changed.chunks(HEAD_BATCH) {
        let mut b = WriteBatch::default();
        for head in heads_of(id, state, part) {
            let (k, v) = head?;
            b.put(k, v);
        }
        to(b)?;
    }
    Ok(changed)
}

/// From how many keys [`heads_of`] encodes their heads on two threads.
const HEADS_APART_FROM: usize = 64;

/// The heads of `part` of table `id`'s keys, as `(record key, head)` (a key with no head has
/// none), encoded on two threads, the commit's and one more, each taking the next keys until none
/// is left: encoding is most of writing a head (perf: 73% of a checkpoint of 10,000 keys), and it
/// changes nothing.
fn heads_of(id: u32, state: &TableState, part: &[Bytes]) -> Vec<Result<KvPair>> {
    let encode = |k: &Bytes| {
        (state.head(k).transpose()).map(|head| head.map(|h| (keys::key_head(id, k), h)))
    };
    match part.len() < HEADS_APART_FROM {
        true => part.iter().filter_map(encode).collect(),
        false => crate::two_threads::map("asof-heads", part.iter().collect(), encode)
            .into_iter()
            .flatten()
            .collect(),
    }
}

/// Writes the heads of the keys `state` changed since its last checkpoint, [`HEAD_BATCH`] per
/// batch, for a table that has no summary ([`write_heads_ahead`]).
fn write_heads(kv: &dyn KvStore, id: u32, state: &mut TableState) -> Result<()> {
    for_each_head_batch(id, state, |b| kv.write(b)).map(drop)
}

/// The batch of its own that writes the part of commit `version`'s row directory that its part
/// just applied wrote (a commit applied in parts: `store/flow_commit.rs`). Nothing reads it
/// before the commit's record and summary are written; an open deletes it if they never are
/// (`replay::remove_unfinished`).
pub(super) fn row_directory_ahead(
    id: u32,
    state: &mut TableState,
    version: u64,
) -> Result<Option<WriteBatch>> {
    state
        .take_row_directory(version, DirPart::Ahead)?
        .map(|(part, dir)| {
            let mut b = WriteBatch::default();
            b.put(keys::row_dir(id, version, part), encode_row_dir(&dir)?);
            Ok(b)
        })
        .transpose()
}

/// Writes the pages `state` froze and has not written yet (a replay's), in batches of a few
/// thousand, ahead of the checkpoint that lists them: a replay of a million events leaves tens of
/// thousands, and one sled batch of them costs gigabytes. A page no head lists yet is never read,
/// so a crash between these batches and the checkpoint leaves nothing wrong.
pub(super) fn write_pending_pages(kv: &dyn KvStore, id: u32, state: &mut TableState) -> Result<()> {
    write_pages(kv, id, state.take_pages())
}

/// Writes frozen pages taken from a table's state, a few thousand per batch
/// ([`write_pending_pages`]).
pub(super) fn write_pages(kv: &dyn KvStore, id: u32, pages: Vec<PageWrite>) -> Result<()> {
    for part in pages.chunks(PAGE_BATCH) {
        let mut b = WriteBatch::default();
        put_pages(&mut b, id, part.to_vec());
        kv.write(b)?;
    }
    Ok(())
}

fn put_pages(b: &mut WriteBatch, id: u32, pages: Vec<PageWrite>) {
    for ((k, no), page) in pages {
        match page {
            Some(p) => b.put(keys::page(id, &k, no), p.to_vec()),
            None => b.delete(keys::page(id, &k, no)),
        }
    }
}

fn put_summary(b: &mut WriteBatch, id: u32, s: &Summary) -> Result<()> {
    b.put(key(keys::SUMMARY, id, None, None), encode_summary(s)?);
    Ok(())
}

fn summary(kv: &dyn KvStore, id: u32) -> Result<Option<Summary>> {
    kv.get(&key(keys::SUMMARY, id, None, None))?
        .map(|v| decode_summary(&v))
        .transpose()
}

/// Rebuilds `t`'s state from its last checkpoint and the commits after it, if it has a
/// checkpoint that its log can be replayed from (`Ok(None)` if not: the state is untouched).
/// Returns the number of events replayed.
pub(super) fn load(kv: &dyn KvStore, t: &mut Table) -> Result<Option<u64>> {
    Ok(read_checkpoint(kv, t)?.map(|(state, replayed)| {
        t.state = state;
        replayed
    }))
}

/// `t`'s state read from its last checkpoint and the commits after it, with the number of events
/// replayed, if it has a checkpoint that its log can be replayed from.
pub(super) fn read_checkpoint(kv: &dyn KvStore, t: &Table) -> Result<Option<(TableState, u64)>> {
    let last = t.commits.last().expect("a commit").version;
    let Some(s) = summary(kv, t.id)? else {
        return Ok(None);
    };
    // The checkpoint's commit must be one the log still has, so that the log goes on from it.
    let Ok(at) = t.commits.binary_search_by_key(&s.version, |c| c.version) else {
        return Ok(None);
    };
    let dirs = row_dirs(kv, t, s.version)?;
    let mut state = t.new_state();
    state.set_tombstone_gc_secs(gc_secs_in(
        &t.commits[..=at],
        t.flows[0].spec.tombstone_gc_threshold_secs,
    )?);
    let heads = kv
        .scan_prefix(&key(keys::KEY_HEAD, t.id, None, None))
        .map(|kv| {
            let (k, v) = kv?;
            Ok((keys::head_key(&k)?.to_vec(), v))
        });
    state
        .restore(heads, Scope::Whole(dirs), &s)
        .map_err(|e| in_table(&t.name, e))?;
    // Read from them, the directories up to the checkpoint are stored.
    state.let_go_directories(s.version);
    let mut replayed = 0;
    if s.version < last {
        let range = ReplayRange {
            after: Some(s.version),
            up_to: None,
        };
        replay_log(kv, t.id, &mut state, &t.commits, range, &mut |_, _| Ok(()))
            .map_err(|e| in_table(&t.name, e))?;
        // At least one per commit: DML commits read no events, and a replay of them alone must
        // still count as unsaved, so that closing writes the checkpoint (else every later open
        // finds its records behind and reads the table whole).
        let after = &t.commits[at + 1..];
        replayed = after
            .iter()
            .map(|c| c.metrics.num_events_read)
            .sum::<u64>()
            .max(after.len() as u64);
    }
    Ok(Some((state, replayed)))
}

/// The row directories of `t`'s commits up to `version`, in version order.
fn row_dirs(kv: &dyn KvStore, t: &Table, version: u64) -> Result<Vec<(u64, RowDir)>> {
    let mut dirs = Vec::new();
    for kv in kv.scan_prefix(&key(keys::ROW_DIR, t.id, None, None)) {
        let (k, v) = kv?;
        let v_of = parse_version(&k)?;
        if v_of > version {
            break;
        }
        let dir = decode_row_dir(&v).map_err(|e| in_table(&t.name, e))?;
        dirs.push((v_of, dir));
    }
    Ok(dirs)
}

/// `t`'s state with none of its keys read ([`TableState::restore_skeleton`]), if its last
/// checkpoint is at its last commit and it holds more than `min_rows` row versions (`Ok(None)`
/// if not; its row directories are then not read).
pub(super) fn read_skeleton(
    kv: &dyn KvStore,
    t: &Table,
    min_rows: u64,
) -> Result<Option<TableState>> {
    let Some(s) = current_summary(kv, t)?.filter(|s| s.rows > min_rows) else {
        return Ok(None);
    };
    let dirs = row_dirs(kv, t, s.version)?;
    let mut state = t.new_state();
    state
        .restore_skeleton(dirs, &s)
        .map_err(|e| in_table(&t.name, e))?;
    Ok(Some(state))
}

/// The keys of table `id` (encoded, in key order), read from the names of its heads.
pub(super) fn head_keys(kv: &dyn KvStore, id: u32) -> Result<Vec<Bytes>> {
    kv.scan_prefix_keys(&keys::key_head(id, &[]))
        .map(|k| Ok(Bytes::from(keys::head_key(&k?)?)))
        .collect()
}

/// The heads of those of `keys` that table `id` has.
pub(super) fn read_heads(
    kv: &dyn KvStore,
    id: u32,
    keys: &[Bytes],
) -> Result<Vec<(Bytes, Vec<u8>)>> {
    let mut heads = Vec::with_capacity(keys.len());
    for k in keys {
        if let Some(h) = kv.get(&keys::key_head(id, k))? {
            heads.push((k.clone(), h));
        }
    }
    Ok(heads)
}

/// `t`'s summary if its last checkpoint is at its last commit (if not, the commits after it are
/// only in the log).
fn current_summary(kv: &dyn KvStore, t: &Table) -> Result<Option<Summary>> {
    let last = t.commits.last().expect("a commit").version;
    Ok(summary(kv, t.id)?.filter(|s| s.version == last))
}

/// The number of row versions `t` has written (its row ids), if its last checkpoint is at its
/// last commit or only property commits (`ALTER ... SET TBLPROPERTIES`, which write no rows)
/// followed it.
pub(super) fn row_count(kv: &dyn KvStore, t: &Table) -> Result<Option<u64>> {
    Ok(rows_summary(kv, t)?.map(|s| s.rows))
}

/// The number of rows of `t`'s latest version (its row versions not retired), on the same
/// terms as [`row_count`], if its summary records it.
pub(super) fn live_count(kv: &dyn KvStore, t: &Table) -> Result<Option<u64>> {
    Ok(rows_summary(kv, t)?.and_then(|s| s.live))
}

/// `t`'s summary, if its rows are those of its last commit: the summary is at a commit, and
/// only property commits (`ALTER ... SET TBLPROPERTIES`, which write no rows) followed it.
fn rows_summary(kv: &dyn KvStore, t: &Table) -> Result<Option<Summary>> {
    let Some(s) = summary(kv, t.id)? else {
        return Ok(None);
    };
    let rows_unchanged = (t.commits.iter())
        .filter(|c| c.version > s.version)
        .all(|c| c.operation == SET_PROPERTIES);
    let at_a_commit = t.commits.iter().any(|c| c.version == s.version);
    Ok((rows_unchanged && at_a_commit).then_some(s))
}

/// The number of keys of `t` (its heads), if its last checkpoint is at its last commit.
pub(super) fn key_count(kv: &dyn KvStore, t: &Table) -> Result<Option<u64>> {
    Ok(current_summary(kv, t)?.map(|s| s.keys))
}

/// The keys of `t` (encoded, in key order), read from the names of its heads without loading the
/// table, if its last checkpoint is at its last commit (`Ok(None)` if not).
pub(super) fn key_list(kv: &dyn KvStore, t: &Table) -> Result<Option<Vec<Vec<u8>>>> {
    if current_summary(kv, t)?.is_none() {
        return Ok(None);
    }
    kv.scan_prefix_keys(&keys::key_head(t.id, &[]))
        .map(|k| Ok(keys::head_key(&k?)?.to_vec()))
        .collect::<Result<_>>()
        .map(Some)
}

/// The state of `t` restricted to the one key `key` (encoded), read from its head and pages
/// without loading the table, if its last checkpoint is at its last commit (`Ok(None)` if not:
/// the commits after it are only in the log). The key need not exist.
pub(super) fn read_key(kv: &dyn KvStore, t: &Table, key: &[u8]) -> Result<Option<TableState>> {
    let Some(s) = current_summary(kv, t)? else {
        return Ok(None);
    };
    let head = kv.get(&keys::key_head(t.id, key))?;
    let heads = head.map(|h| (key.to_vec(), h)).into_iter().collect();
    restore_keys(t, heads, Scope::Read, &s).map(Some)
}

/// What [`read_keys`] reads: the keys of a table in a range (encoded), at most so many of them.
pub(super) struct KeySpan<'a> {
    pub lo: Bound<&'a [u8]>,
    pub hi: Bound<&'a [u8]>,
    pub max_keys: usize,
}

/// The heads of the keys of a span ([`read_keys`]), as read (or as the read cache kept them,
/// decoded), with the summary they are current at: [`restore_span`] decodes them.
pub(crate) struct SpanHeads {
    heads: Vec<(Vec<u8>, Scanned)>,
    summary: Summary,
}

impl SpanHeads {
    /// How many keys.
    pub(super) fn keys(&self) -> usize {
        self.heads.len()
    }
}

/// The heads of the keys of `t` in `span`, in key order, read without loading the table, to be
/// restored as a state to scan ([`restore_span`]), if its last checkpoint is at its last commit
/// (`Ok(None)` if not). With them, the last key read if keys in the span follow it. Heads the
/// read cache kept come decoded; with `Caching::Keep`, those decoded later are kept.
pub(super) fn read_keys(
    kv: &dyn KvStore,
    t: &Table,
    span: &KeySpan<'_>,
    caching: Caching,
) -> Result<Option<(SpanHeads, Option<Vec<u8>>)>> {
    let Some(summary) = current_summary(kv, t)? else {
        return Ok(None);
    };
    let prefix = keys::key_head(t.id, &[]);
    let from = match span.lo {
        Bound::Included(k) | Bound::Excluded(k) => keys::key_head(t.id, k),
        Bound::Unbounded => prefix.clone(),
    };
    let mut heads: Vec<(Vec<u8>, Scanned)> = Vec::new();
    let mut more = false;
    let keeping = match caching {
        Caching::Keep => Keeping::Admitted,
        Caching::Pass => Keeping::Nothing,
    };
    for pair in kv.scan_prefix_from_kept(&prefix, &from, TypeId::of::<RowsHead>(), keeping) {
        let (k, v) = pair?;
        let key = keys::head_key(&k)?;
        if matches!(span.lo, Bound::Excluded(l) if key == l) {
            continue;
        }
        let beyond = match span.hi {
            Bound::Included(h) => key > h,
            Bound::Excluded(h) => key >= h,
            Bound::Unbounded => false,
        };
        if beyond {
            break;
        }
        if heads.len() == span.max_keys.max(1) {
            more = true;
            break;
        }
        heads.push((key.to_vec(), v));
    }
    let last = heads.last().filter(|_| more).map(|(k, _)| k.clone());
    let heads = SpanHeads { heads, summary };
    Ok(Some((heads, last)))
}

/// The state of `t` restricted to the keys of `span`, to be scanned (their events and timelines
/// are not read: [`RowsHead`]). The heads read from the log are decoded here, on the thread that
/// reads the span, and kept in the read cache if the span's reads keep what they decode.
pub(super) fn restore_span(kv: &dyn KvStore, t: &Table, span: SpanHeads) -> Result<TableState> {
    let SpanHeads { heads, summary } = span;
    let heads = heads.into_iter().map(|(key, scanned)| {
        let key = Bytes::from(key);
        let head = match scanned {
            Scanned::Kept(v) => downcast::<RowsHead>(v)?,
            // A list's stored boxes are read whenever it is (a list of format 13 stores them).
            // A list written before has none, and they are made from its chunks only when it
            // is read again by a scan that keeps it: making them costs that read a quarter more
            // time, for a third of the time of each read after it (docs/PERFORMANCE.md,
            // session 60).
            Scanned::Read(bytes, at) => {
                let boxes = match at {
                    Some(_) => ListBoxes::Make,
                    None => ListBoxes::Stored,
                };
                let (head, held) = RowsHead::decode(&key, &bytes, boxes)?;
                let head = Arc::new(head);
                if let Some(at) = at {
                    kv.keep_decoded(at, TypeId::of::<RowsHead>(), head.clone(), held);
                }
                head
            }
        };
        Ok((key, head))
    });
    let mut state = t.new_state();
    state
        .restore_rows(heads, &summary)
        .map_err(|e| in_table(&t.name, e))?;
    Ok(state)
}

fn restore_keys(
    t: &Table,
    heads: Vec<(Vec<u8>, Vec<u8>)>,
    scope: Scope,
    s: &Summary,
) -> Result<TableState> {
    let mut state = t.new_state();
    state
        .restore(heads.into_iter().map(Ok), scope, s)
        .map_err(|e| in_table(&t.name, e))?;
    Ok(state)
}

/// Every row directory `state` holds, written ahead of the summary, a part per batch, in parts
/// of a bounded number of rows, each built from the row store as it is written (one record of a
/// 20M-row commit took 300 MB to encode; a VACUUM base's directory built whole, then split, added
/// 150 MB to the VACUUM's peak): nothing reads them without the summary. (They are built from the
/// row store when taken, so writing them earlier would free nothing.)
fn write_row_directories(kv: &dyn KvStore, id: u32, state: &mut TableState) -> Result<()> {
    for v in state.row_versions_by_commit() {
        let mut part = 0;
        state.take_row_directory_parts(v, REBUILD_DIR_ROWS, |dir| {
            let mut b = WriteBatch::default();
            b.put(keys::row_dir(id, v, part), encode_row_dir(&dir)?);
            part += 1;
            kv.write(b)
        })?;
    }
    Ok(())
}

/// How many keys one batch of a rebuild's deletes holds.
const DELETE_BATCH: usize = 4096;
/// How many pages one batch of pages written ahead of the heads that list them holds
/// ([`write_pending_pages`]).
pub(super) const PAGE_BATCH: usize = 4096;

/// Replays `t`'s log into a fresh state and writes its derived records again: the old ones are
/// deleted first, the pages written as the replay freezes them, and the heads, row directories
/// and the summary last, so that a crash at any point leaves no summary (and a later open
/// rebuilds again), never a mixture that claims to be current. After every
/// `checkpoints.every_events` events replayed, the heads of the keys changed since are written
/// ahead, and the keys' page lists (their zone maps: 120 MB at 10M events) leave memory, as a
/// checkpoint does but for the summary.
pub(super) fn rebuild(
    kv: &dyn KvStore,
    t: &mut Table,
    progress: Option<&Progressing>,
    checkpoints: &Checkpoints,
) -> Result<()> {
    let mut b = WriteBatch::default();
    // The summary first: from then on the table is rebuilt on its next use, whatever is left.
    // The rest in batches of a few thousand keys (one batch of a whole table's cost sled GBs).
    b.delete(key(keys::SUMMARY, t.id, None, None));
    kv.write(b)?;
    for tag in keys::DERIVED_TAGS {
        let mut b = WriteBatch::default();
        for k in kv.scan_prefix_keys(&key(tag, t.id, None, None)) {
            b.delete(k?);
            if b.len() >= DELETE_BATCH {
                kv.write(std::mem::take(&mut b))?;
            }
        }
        if !b.is_empty() {
            kv.write(b)?;
        }
    }
    let mut state = t.new_state();
    // In event blocks: counted from their keys alone.
    let total = super::commit::count_keys(kv, &key(keys::EVENTS, t.id, None, None))?;
    let task = format!("rebuilding the records of {} from its log", t.name);
    let bar = Reporter::begin(progress, &task, total, REBUILD_PROGRESS_BLOCKS);
    let (mut done, mut since) = (0, 0);
    replay_log(
        kv,
        t.id,
        &mut state,
        &t.commits,
        ReplayRange::default(),
        &mut |state, Replayed { blocks, events }| {
            (done, since) = (done + blocks, since + events);
            bar.advance(done);
            let pages = state.take_pages();
            if !pages.is_empty() {
                let mut b = WriteBatch::default();
                put_pages(&mut b, t.id, pages);
                kv.write(b)?;
            }
            // Not after the log's last block: the heads are written once more at the end.
            if since >= checkpoints.every_events && done < total {
                since = 0;
                // What a checkpoint would let go of, without its summary (nothing reads the
                // heads before the last batch): the page lists of the keys whose heads are
                // written.
                let written = for_each_head_batch(t.id, state, |b| kv.write(b))?;
                state.shed_page_lists(&written);
            }
            Ok(())
        },
    )?;
    let last = t.commits.last().expect("a commit").version;
    write_row_directories(kv, t.id, &mut state)?;
    // Pages a thaw freed during the replay were written by it: delete them with the rest.
    state.mark_all_changed();
    let written = for_each_head_batch(t.id, &mut state, |b| kv.write(b))?;
    state.shed_page_lists(&written);
    let mut b = WriteBatch::default();
    put_checkpoint(&mut b, t.id, &mut state, last)?;
    t.pins.forget_freed();
    write_checkpoint(kv, t.id, b, &mut state, &mut t.pins)?;
    t.state = state;
    Ok(())
}
