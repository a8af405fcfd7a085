//! A large commit's change feed read in parts: its keys, in key order, cut into groups of about a
//! given number of changed row versions ([`TableReader::change_groups`]), and each group's
//! changes listed alone ([`TableReader::group_changes`]), its deletes in one pass and its other
//! changes in another. The deletes of every group, then the other changes of every group, are
//! the commit's feed row for row (deletes first, then inserts and updates, each in key order:
//! docs/SEMANTICS.md §7.3), without its rows held at once: a load of 10M events in one refresh is
//! one commit of 19.8M rows, whose feed read whole took 10.8 GB.
//!
//! A table that is not in memory is read the same way without loading it: a span of its keys at a
//! time ([`super::Store::key_span`]), each span's changes listed by [`TableReader::span_changes`]
//! from the keys' heads and pages, which carry the commits that wrote and retired each row.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;

use super::cold_reader::ColdReader;
use super::in_table;
use super::reader::{ReadScope, TableReader};
use super::row_view::RowView;
use crate::engine::changes::{commit_changes, ChangeType, Listing};
use crate::engine::fold::RowId;
use crate::engine::{Caching, RowKeys};
use crate::error::{corrupt, Error, Result};
use crate::format::cold_batch::every_row;
use crate::format::zone::PageZone;
use crate::record::StoredRow;

/// Some keys of a commit, a range in key order, and about how many row versions the commit wrote
/// or retired of them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyGroup {
    lo: Bound<Vec<u8>>,
    hi: Bound<Vec<u8>>,
    rows: u64,
}

impl KeyGroup {
    /// The part of the group after `key` (encoded), if keys of it may follow `key`: what is
    /// left of a feed read a span at a time when the table came into memory under it.
    pub fn after(&self, key: &[u8]) -> Option<KeyGroup> {
        if matches!(&self.hi, Bound::Included(h) | Bound::Excluded(h) if &h[..] <= key) {
            return None;
        }
        let lo = match &self.lo {
            Bound::Included(l) if &l[..] > key => self.lo.clone(),
            _ => Bound::Excluded(key.to_vec()),
        };
        Some(KeyGroup {
            lo,
            hi: self.hi.clone(),
            rows: self.rows,
        })
    }

    /// How many row versions the commit wrote or retired of these keys (an update changes two).
    pub fn rows(&self) -> u64 {
        self.rows
    }
}

/// Which of a group's changes [`TableReader::group_changes`] lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangePass {
    /// Its deletes.
    Deletes,
    /// Its inserts and updates.
    Others,
    /// Every change, in the order of the commit's feed (deletes and the others interleaved): for
    /// a reader that puts the deletes first itself ([`TableReader::span_changes`] of one span, in
    /// one pass instead of two).
    All,
}

impl ChangePass {
    /// Whether the pass lists a change of type `t`.
    pub fn lists(self, t: ChangeType) -> bool {
        match self {
            ChangePass::Deletes => t == ChangeType::Delete,
            ChangePass::Others => t != ChangeType::Delete,
            ChangePass::All => true,
        }
    }
}

impl TableReader<'_> {
    /// How many row versions commit `version` wrote or retired: what reading its changes
    /// reads (an update is two, and so is a row rewritten unchanged, which lists nothing).
    pub fn changed_row_versions(&self, version: u64) -> Result<u64> {
        let rows = &self.state.rows;
        let written = rows.first_added(version + 1) - rows.first_added(version);
        let retired = (self.state.retired_by(version))
            .map_err(|e| in_table(&self.table.name, e))?
            .map_or(0, |r| r.len());
        Ok(u64::from(written) + retired)
    }

    /// The keys commit `version` wrote or retired rows of, in key order, in groups of about
    /// `rows` such row versions each (a key with more is a group alone).
    pub fn change_groups(&self, version: u64, rows: u64) -> Result<Vec<KeyGroup>> {
        self.check_changes(version, version)?;
        let store = &self.state.rows;
        let mut per_key: HashMap<u32, u64> = HashMap::new();
        let retired =
            (self.state.retired_by(version)).map_err(|e| in_table(&self.table.name, e))?;
        let written = store.first_added(version)..store.first_added(version + 1);
        let row_keys = RowKeys::new(self.state);
        for id in retired.iter().flat_map(|r| r.iter()).chain(written) {
            let no = row_keys
                .key_of(id)
                .map_err(|e| in_table(&self.table.name, e))?;
            *per_key.entry(no).or_default() += 1;
        }
        let mut keys = per_key
            .into_iter()
            .map(|(no, n)| match self.state.key_by_no(no) {
                Some((key, _)) => Ok((key, n)),
                None => Err(corrupt(format!("key {no} of commit {version} is unknown"))),
            })
            .collect::<Result<Vec<_>>>()?;
        keys.sort_unstable();
        let mut groups: Vec<KeyGroup> = Vec::new();
        for (key, n) in keys {
            match groups.last_mut() {
                Some(g) if g.rows + n <= rows.max(1) => {
                    g.hi = Bound::Included(key.to_vec());
                    g.rows += n;
                }
                _ => groups.push(KeyGroup {
                    lo: Bound::Included(key.to_vec()),
                    hi: Bound::Included(key.to_vec()),
                    rows: n,
                }),
            }
        }
        Ok(groups)
    }

    /// Calls `f` with the changes of commit `version` to the keys of `group` that `pass` lists,
    /// in the order of the commit's whole feed ([`TableReader::changes`]).
    pub fn group_changes(
        &self,
        version: u64,
        group: &KeyGroup,
        pass: ChangePass,
        mut f: impl FnMut(u64, ChangeType, RowView<'_>),
    ) -> Result<()> {
        self.check_changes(version, version)?;
        let bounds = (
            group.lo.as_ref().map(|k| &k[..]),
            group.hi.as_ref().map(|k| &k[..]),
        );
        // Which keys are the group's, by number: a bit each (every row version of the commit is
        // looked up, once per group).
        let nos: Vec<u32> = self
            .state
            .keys
            .range::<[u8], _>(bounds)
            .map(|(_, ks)| ks.no)
            .collect();
        let mut bits = vec![0u64; nos.iter().max().map_or(0, |&m| m as usize / 64) + 1];
        for no in nos {
            bits[no as usize / 64] |= 1 << (no % 64);
        }
        let ours = |no: u32| {
            let no = no as usize;
            bits.get(no / 64).is_some_and(|w| w & (1 << (no % 64)) != 0)
        };
        let listed = |t: ChangeType| pass.lists(t);
        let cold = ColdReader::of_commits(&self.table.name, self.state, version, version);
        self.list_commit(version, &cold, ours, listed, &mut f)
    }
}

impl TableReader<'_> {
    /// Calls `f` with the changes of commit `version` to the keys of a span
    /// ([`super::Store::read_span`]) that `pass` lists, in the order of the commit's whole feed:
    /// the spans of a table in key order, each span's deletes, then each span's other changes,
    /// list the commit's feed row for row, as [`TableReader::group_changes`] does for groups of
    /// a table in memory. Only the pages whose zone may hold a row the commit wrote or retired
    /// are read; the span's changed rows are held until its changes are listed.
    pub fn span_changes(
        &self,
        version: u64,
        pass: ChangePass,
        f: impl FnMut(u64, ChangeType, RowView<'_>),
    ) -> Result<()> {
        self.span_changes_of(version..=version, pass, f)
    }

    /// [`TableReader::span_changes`] of each commit of `versions` in turn, in one pass over the
    /// span's pages: a window of small commits read by spans holds every span's changes until
    /// its last, then lists them commit by commit.
    pub fn span_changes_of(
        &self,
        versions: std::ops::RangeInclusive<u64>,
        pass: ChangePass,
        mut f: impl FnMut(u64, ChangeType, RowView<'_>),
    ) -> Result<()> {
        if self.scope != ReadScope::Rows {
            return Err(Error::InvalidQuery(
                "span_changes reads a span of keys (Store::read_span)".into(),
            ));
        }
        let (from, to) = (*versions.start(), *versions.end());
        self.check_change_range(from, to)?;
        let state = self.state;
        // A span holds no rows in memory: its keys' hot rows come with their pages.
        let mut rows: HashMap<RowId, StoredRow> = HashMap::new();
        // Each commit's retired and written rows, in key order.
        let mut commits: BTreeMap<u64, (Vec<RowId>, Vec<RowId>)> = BTreeMap::new();
        for (key, ks) in &state.keys {
            // A page whose rows were all written after the last commit, or all retired before
            // the first, holds none of their changes.
            let cold = state
                .cold_batch(
                    key,
                    ks,
                    (
                        &|z: PageZone<'_>| z.added() <= to && z.retired() >= from,
                        every_row,
                    ),
                    Caching::Pass,
                )
                .map_err(|e| in_table(&self.table.name, e))?;
            for pos in 0.. {
                let Some(id) = cold.id_at(pos) else { break };
                let r = cold.at(pos);
                let written = versions.contains(&r.added);
                let retired = r.retired.filter(|v| versions.contains(v));
                if !written && retired.is_none() {
                    continue;
                }
                if written {
                    commits.entry(r.added).or_default().1.push(id);
                }
                if let Some(v) = retired {
                    commits.entry(v).or_default().0.push(id);
                }
                let row = cold
                    .stored_row(id)?
                    .ok_or_else(|| corrupt(format!("row {id} of a key is missing")))?;
                rows.insert(id, row);
            }
        }
        let mode = state.schema.mode;
        for (version, (retired, written)) in commits {
            let row = |id: RowId| {
                rows.get(&id)
                    .map(std::borrow::Cow::Borrowed)
                    .ok_or_else(|| corrupt(format!("row {id} of commit {version} is missing")))
            };
            for (t, id) in commit_changes(mode, version, retired, written, row, Listing::Ordered)? {
                if pass.lists(t) {
                    f(version, t, RowView::of(&*row(id)?));
                }
            }
        }
        Ok(())
    }
}
