//! What one commit did to a table's rows, as the change data feed says it (docs/SEMANTICS.md
//! §7.3): a retired row and a written row with the same row identity are an update, other retired
//! rows deletes, other written rows inserts. The change feed lists these; the commit metrics count
//! them.

use std::borrow::Cow;

use super::fold::RowId;
use super::StoredRow;
use crate::error::Result;
use crate::flow::StoredAs;

/// How a commit changed one row (docs/SEMANTICS.md §7 change data feed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeType {
    /// A row that was not there before.
    Insert,
    /// A row that is gone.
    Delete,
    /// A row as it was before an update (same row identity).
    UpdatePreimage,
    /// A row as it is after an update.
    UpdatePostimage,
}

impl ChangeType {
    /// The `_change_type` value: `insert`, `delete`, `update_preimage`, `update_postimage`.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeType::Insert => "insert",
            ChangeType::Delete => "delete",
            ChangeType::UpdatePreimage => "update_preimage",
            ChangeType::UpdatePostimage => "update_postimage",
        }
    }
}

/// A row's identity in the change feed: the key; plus `coalesce(__START_AT, __END_AT)` for SCD
/// TYPE 2; plus `__SYSTEM_START_AT` for BITEMPORAL. Borrowed from the row: a commit compares
/// one per row it wrote or retired, and copying them was a tenth of an ingest (perf, session 34).
#[derive(Hash, PartialEq, Eq)]
struct Identity<'a> {
    key: &'a [u8],
    start: Option<&'a [u8]>,
    sys_start: Option<&'a [u8]>,
}

fn identity(mode: StoredAs, r: &StoredRow) -> Identity<'_> {
    Identity {
        key: &r.key,
        start: (mode != StoredAs::Scd1)
            .then(|| r.start.as_deref().or(r.end.as_deref()).unwrap_or_default()),
        sys_start: (mode == StoredAs::Bitemporal)
            .then(|| r.sys_start.as_deref().unwrap_or_default()),
    }
}

/// The order the rows of one commit are listed in: by key, then business start, system start,
/// business end and system end (an open bound last). Not by row id: ids follow the order a
/// commit's events were applied in, which a replay of the log need not repeat.
fn listing_order(r: &StoredRow) -> [(bool, Vec<u8>); 5] {
    // An open bound (None) sorts after every value.
    let part = |b: Option<&[u8]>| (b.is_none(), b.unwrap_or_default().to_vec());
    [
        part(Some(&r.key)),
        part(r.start.as_deref()),
        part(r.sys_start.as_deref()),
        part(r.end.as_deref()),
        part(r.sys_end.as_deref()),
    ]
}

/// Whether [`commit_changes`] lists a commit's rows in [`listing_order`] (the change feed) or in
/// any order (counting them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Listing {
    /// By key and bounds.
    Ordered,
    /// As they come.
    Any,
}

/// The changes commit `version` made: deletes first, then inserts and updates (pre-image, then
/// post-image), each by [`listing_order`]. `retired` are the rows the commit retired,
/// `written` those it wrote, `row` reads a row. A row written and retired by the commit itself
/// never was visible, and a pre-image equal to its post-image is no change: neither is listed.
pub(crate) fn commit_changes<'r>(
    mode: StoredAs,
    version: u64,
    retired: impl IntoIterator<Item = RowId>,
    written: impl IntoIterator<Item = RowId>,
    row: impl Fn(RowId) -> Result<Cow<'r, StoredRow>>,
    order: Listing,
) -> Result<Vec<(ChangeType, RowId)>> {
    // The rows it retired that an earlier commit wrote, each a delete unless a written row
    // has its identity (the last of them with that identity, if several do).
    let mut before: Vec<(RowId, Cow<'r, StoredRow>)> = Vec::new();
    for id in retired {
        let r = row(id)?;
        if r.added < version {
            before.push((id, r));
        }
    }
    let pre: foldhash::HashMap<Identity<'_>, usize> = (before.iter().enumerate())
        .map(|(i, (_, r))| (identity(mode, r), i))
        .collect();
    let mut deletes: Vec<RowId> = before.iter().map(|(id, _)| *id).collect();
    let mut written: Vec<RowId> = written.into_iter().collect();
    if order == Listing::Ordered {
        let order_of = |ids: &mut Vec<RowId>| -> Result<()> {
            let mut keyed = ids
                .iter()
                .map(|&id| Ok((listing_order(&*row(id)?), id)))
                .collect::<Result<Vec<_>>>()?;
            keyed.sort();
            *ids = keyed.into_iter().map(|(_, id)| id).collect();
            Ok(())
        };
        order_of(&mut deletes)?;
        order_of(&mut written)?;
    }
    let mut matched: foldhash::HashSet<RowId> = Default::default();
    let mut out: Vec<(ChangeType, RowId)> = Vec::new();
    for id in written {
        let r = row(id)?;
        if r.retired == Some(version) {
            continue; // written and replaced within the commit
        }
        match pre.get(&identity(mode, &r)) {
            Some(&i) => {
                let (p, q) = (before[i].0, &before[i].1);
                matched.insert(p);
                let same = q.values == r.values
                    && q.start == r.start
                    && q.end == r.end
                    && q.sys_start == r.sys_start
                    && q.sys_end == r.sys_end;
                if !same {
                    out.push((ChangeType::UpdatePreimage, p));
                    out.push((ChangeType::UpdatePostimage, id));
                }
            }
            None => out.push((ChangeType::Insert, id)),
        }
    }
    let mut all: Vec<(ChangeType, RowId)> = deletes
        .into_iter()
        .filter(|id| !matched.contains(id))
        .map(|id| (ChangeType::Delete, id))
        .collect();
    all.extend(out);
    Ok(all)
}
