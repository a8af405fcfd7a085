//! A target table's derived records (docs/FORMAT.md §9) on the key-value layer: key heads (`K`),
//! frozen pages (`P`), row directories (`X`) and the summary (`G`). Every commit that changes the
//! table writes them in its own batch ([`put_changes`]), so that they are always as of the last
//! commit; opening a table reads them ([`load`]) instead of replaying its log. When they are not
//! current (a store written by an earlier format, a crash during a rebuild, a VACUUM), the table
//! is replayed once and they are written again ([`rebuild`]).

use std::sync::Arc;

use super::replay::{gc_secs_in, replay_log};
use super::{in_table, Table};
use crate::engine::{PageSource, TableState};
use crate::error::Result;
use crate::format::derived::{
    decode_row_dir, decode_summary, encode_row_dir, encode_summary, Summary,
};
use crate::format::keys::{self, key, parse_version};
use crate::kv::{KvStore, WriteBatch};

/// The frozen pages of table `id`, read from the key-value layer.
pub(super) struct TablePages {
    pub kv: Arc<dyn KvStore>,
    pub id: u32,
}

impl PageSource for TablePages {
    fn page(&self, key: &[u8], no: u32) -> Result<Option<Vec<u8>>> {
        self.kv.get(&keys::page(self.id, key, no))
    }
}

/// Puts what commit `version` changed in `state` (keys, pages, its row directory) and the
/// summary as of `version` into `b`.
pub(super) fn put_changes(
    b: &mut WriteBatch,
    id: u32,
    state: &mut TableState,
    version: u64,
) -> Result<()> {
    let changes = state.take_changes()?;
    for (k, head) in changes.heads {
        b.put(keys::key_head(id, &k), head);
    }
    for ((k, no), page) in changes.pages {
        match page {
            Some(p) => b.put(keys::page(id, &k, no), p.to_vec()),
            None => b.delete(keys::page(id, &k, no)),
        }
    }
    if let Some(dir) = state.row_directory(version) {
        b.put(
            key(keys::ROW_DIR, id, Some(version), None),
            encode_row_dir(&dir)?,
        );
    }
    put_summary(b, id, &state.summary(version))
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

/// For a commit `to` that changes no row of table `id`: if the derived records are current at
/// `from` (the commit before), puts the summary that says they are current at `to`.
pub(super) fn carry_summary(
    kv: &dyn KvStore,
    b: &mut WriteBatch,
    id: u32,
    from: u64,
    to: u64,
) -> Result<()> {
    if let Some(mut s) = summary(kv, id)?.filter(|s| s.version == from) {
        s.version = to;
        put_summary(b, id, &s)?;
    }
    Ok(())
}

/// Rebuilds `t`'s state from its derived records, if they are current (`Ok(false)` if not: the
/// state is untouched).
pub(super) fn load(kv: &dyn KvStore, t: &mut Table) -> Result<bool> {
    let last = t.commits.last().expect("a commit").version;
    let Some(s) = summary(kv, t.id)?.filter(|s| s.version == last) else {
        return Ok(false);
    };
    let mut dirs = Vec::new();
    for kv in kv.scan_prefix(&key(keys::ROW_DIR, t.id, None, None)) {
        let (k, v) = kv?;
        let version = parse_version(&k)?;
        let dir = decode_row_dir(&v).map_err(|e| in_table(&t.name, e))?;
        dirs.push((version, dir));
    }
    let mut state = t.new_state();
    state.set_tombstone_gc_secs(gc_secs_in(
        &t.commits,
        t.flows[0].spec.tombstone_gc_threshold_secs,
    )?);
    let heads = kv
        .scan_prefix(&key(keys::KEY_HEAD, t.id, None, None))
        .map(|kv| {
            let (k, v) = kv?;
            Ok((keys::head_key(&k)?.to_vec(), v))
        });
    state
        .restore(heads, dirs, &s)
        .map_err(|e| in_table(&t.name, e))?;
    t.state = state;
    Ok(true)
}

/// Replays `t`'s log into a fresh state and writes its derived records again: the old ones are
/// deleted first, the pages written as the replay freezes them, and the heads, row directories
/// and the summary last, so that a crash at any point leaves records that are not current (and a
/// later open rebuilds again), never a mixture that claims to be.
pub(super) fn rebuild(kv: &dyn KvStore, t: &mut Table) -> Result<()> {
    let mut b = WriteBatch::default();
    for tag in keys::DERIVED_TAGS {
        for kv in kv.scan_prefix(&key(tag, t.id, None, None)) {
            b.delete(kv?.0);
        }
    }
    kv.write(b)?;
    let mut state = t.new_state();
    replay_log(kv, t.id, &mut state, &t.commits, None, &mut |state| {
        let pages = state.take_pages();
        if pages.is_empty() {
            return Ok(());
        }
        let mut b = WriteBatch::default();
        for ((k, no), page) in pages {
            match page {
                Some(p) => b.put(keys::page(t.id, &k, no), p.to_vec()),
                None => b.delete(keys::page(t.id, &k, no)),
            }
        }
        kv.write(b)
    })?;
    let last = t.commits.last().expect("a commit").version;
    let mut b = WriteBatch::default();
    for v in state.row_versions_by_commit() {
        if let Some(dir) = state.row_directory(v) {
            b.put(
                key(keys::ROW_DIR, t.id, Some(v), None),
                encode_row_dir(&dir)?,
            );
        }
    }
    state.mark_all_changed();
    put_changes(&mut b, t.id, &mut state, last)?;
    kv.write(b)?;
    t.state = state;
    Ok(())
}
