//! Where a fold writes rows ([`FoldRows`]): into the row store, or, for one share of a commit's
//! keys folded while the other thread folds other shares ([`super::fold_keys`]), aside from it. The
//! store is only read meanwhile; each share's changes are applied to it afterwards, share by
//! share in key order ([`AsideChanges::apply`]), so the rows are numbered as one thread folding
//! every key in order numbers them, and a replay of the log numbers them alike.

use std::ops::Index;

use foldhash::HashMap;

use super::fold::RowId;
use super::{RowStore, StoredRow};

/// Where a share's new rows are numbered while it is folded: above every id of a store folded
/// in shares ([`fits_aside`]), so that an id tells whose it is, and a new row's id in the store
/// is its place among the share's new rows plus the store's length.
const ASIDE_FROM: RowId = 1 << 31;

/// Whether a store of `len` rows may be folded in shares: below half of [`ASIDE_FROM`], so that
/// the rows a commit adds never bring an id of the store up to it (2³⁰ rows would take over
/// 100 GB of memory).
pub(super) fn fits_aside(len: usize) -> bool {
    len < (ASIDE_FROM / 2) as usize
}

/// The rows a fold reads, writes and retires.
pub(super) enum FoldRows<'a, 'r> {
    Store(&'a mut RowStore),
    Aside(&'a mut RowsAside<'r>),
}

impl FoldRows<'_, '_> {
    /// Adds a row of the key numbered `key`.
    pub fn push(&mut self, row: StoredRow, key: u32) -> RowId {
        match self {
            FoldRows::Store(s) => s.push(row, key),
            FoldRows::Aside(a) => a.push(row, key),
        }
    }

    /// Retires row `id` by commit `version`.
    pub fn retire(&mut self, id: RowId, version: u64) {
        match self {
            FoldRows::Store(s) => s.retire(id, version),
            FoldRows::Aside(a) => a.retire(id, version),
        }
    }

    /// Row `id`, to change in place.
    pub fn get_mut(&mut self, id: RowId) -> &mut StoredRow {
        match self {
            FoldRows::Store(s) => s.get_mut(id),
            FoldRows::Aside(a) => a.get_mut(id),
        }
    }

    /// Whether row `id` is retired. A fold asks this, not the row's `retired`: a share does not
    /// copy a row of the store to retire it, so the row it reads says what the store said.
    pub fn is_retired(&self, id: RowId) -> bool {
        match self {
            FoldRows::Store(s) => s[id].retired.is_some(),
            FoldRows::Aside(a) => a.retired_here.contains_key(&id) || a.get(id).retired.is_some(),
        }
    }
}

impl Index<RowId> for FoldRows<'_, '_> {
    type Output = StoredRow;

    fn index(&self, id: RowId) -> &StoredRow {
        match self {
            FoldRows::Store(s) => &s[id],
            FoldRows::Aside(a) => a.get(id),
        }
    }
}

/// The rows one share of a commit's keys wrote and changed, over a store it only reads.
pub(super) struct RowsAside<'r> {
    store: &'r RowStore,
    changes: AsideChanges,
    /// The store's rows the share retired, and by which commit ([`FoldRows::is_retired`]).
    retired_here: HashMap<RowId, u64>,
}

/// What a share did to the rows, to apply to the store once every share is folded.
#[derive(Default)]
pub(super) struct AsideChanges {
    /// The rows written, numbered from [`ASIDE_FROM`], with their keys' numbers.
    new: Vec<(StoredRow, u32)>,
    /// Copies of the store's rows the share changed in place (closed on system time), as it
    /// left them.
    changed: HashMap<RowId, StoredRow>,
    /// The rows retired, in order: the store's, and new ones (numbered from [`ASIDE_FROM`]).
    retired: Vec<(RowId, u64)>,
}

impl<'r> RowsAside<'r> {
    pub fn new(store: &'r RowStore) -> Self {
        RowsAside {
            store,
            changes: AsideChanges::default(),
            retired_here: HashMap::default(),
        }
    }

    fn get(&self, id: RowId) -> &StoredRow {
        match id.checked_sub(ASIDE_FROM) {
            Some(i) => &self.changes.new[i as usize].0,
            None => match self.changes.changed.get(&id) {
                Some(row) => row,
                None => &self.store[id],
            },
        }
    }

    fn get_mut(&mut self, id: RowId) -> &mut StoredRow {
        match id.checked_sub(ASIDE_FROM) {
            Some(i) => &mut self.changes.new[i as usize].0,
            None => {
                let (store, retired) = (self.store, self.retired_here.get(&id).copied());
                (self.changes.changed)
                    .entry(id)
                    .or_insert_with(|| StoredRow {
                        retired: retired.or(store[id].retired),
                        ..store[id].clone()
                    })
            }
        }
    }

    fn push(&mut self, row: StoredRow, key: u32) -> RowId {
        let id = ASIDE_FROM + self.changes.new.len() as RowId;
        self.changes.new.push((row, key));
        id
    }

    fn retire(&mut self, id: RowId, version: u64) {
        match id.checked_sub(ASIDE_FROM) {
            Some(i) => self.changes.new[i as usize].0.retired = Some(version),
            None => {
                self.retired_here.insert(id, version);
                if let Some(copy) = self.changes.changed.get_mut(&id) {
                    copy.retired = Some(version);
                }
            }
        }
        self.changes.retired.push((id, version));
    }

    /// What the share did, to apply once no share reads the store.
    pub fn into_changes(self) -> AsideChanges {
        self.changes
    }
}

/// The ids a share's new rows got in the store ([`AsideChanges::apply`]).
#[derive(Clone, Copy)]
pub(super) struct Renumbering {
    first: RowId,
    count: RowId,
}

impl Renumbering {
    /// The id in the store of `id`, as the share numbered it.
    pub fn id(&self, id: RowId) -> RowId {
        match id.checked_sub(ASIDE_FROM) {
            Some(i) => {
                debug_assert!(i < self.count, "row {id} is not one the share wrote");
                self.first + i
            }
            None => id,
        }
    }
}

impl AsideChanges {
    /// Makes the share's changes in `store`: its new rows get the next ids, in the order it
    /// wrote them; the rows it changed in place take its copies; then the rows it retired are
    /// retired (after the copies, which may be of rows it retired). The
    /// share's keys must then take their rows' new ids ([`Renumbering`]).
    pub fn apply(self, store: &mut RowStore) -> Renumbering {
        let AsideChanges {
            new,
            changed,
            retired,
        } = self;
        let renumbering = Renumbering {
            first: store.len() as RowId,
            count: new.len() as RowId,
        };
        for (row, key) in new {
            store.push(row, key);
        }
        for (id, row) in changed {
            *store.get_mut(id) = row;
        }
        for (id, version) in retired {
            store.retire(renumbering.id(id), version);
        }
        renumbering
    }
}
