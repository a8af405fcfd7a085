//! A large commit's change feed read in parts: its keys, in key order, cut into groups of about a
//! given number of changed row versions ([`TableReader::change_groups`]), and each group's
//! changes listed alone ([`TableReader::group_changes`]), its deletes in one pass and its other
//! changes in another. The deletes of every group, then the other changes of every group, are
//! the commit's feed row for row (deletes first, then inserts and updates, each in key order:
//! docs/SEMANTICS.md §7.3), without its rows held at once: a load of 10M events in one refresh is
//! one commit of 19.8M rows, whose feed read whole took 10.8 GB.

use std::collections::HashMap;
use std::ops::Bound;

use super::reader::{ColdReader, RowView, TableReader};
use crate::engine::changes::ChangeType;
use crate::engine::fold::RowId;
use crate::error::{corrupt, Result};

/// Some keys of a commit, from the first to the last (both included, in key order), and about
/// how many row versions the commit wrote or retired of them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyGroup {
    first: Vec<u8>,
    last: Vec<u8>,
    rows: u64,
}

impl KeyGroup {
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
}

impl TableReader<'_> {
    /// How many row versions commit `version` wrote or retired: what reading its changes
    /// reads (an update is two, and so is a row rewritten unchanged, which lists nothing).
    pub fn changed_row_versions(&self, version: u64) -> u64 {
        let rows = &self.state.rows;
        let written = rows.first_added(version + 1) - rows.first_added(version);
        let retired = rows.retired_by(version).map_or(0, |r| r.len());
        u64::from(written) + retired
    }

    /// The keys commit `version` wrote or retired rows of, in key order, in groups of about
    /// `rows` such row versions each (a key with more is a group alone).
    pub fn change_groups(&self, version: u64, rows: u64) -> Result<Vec<KeyGroup>> {
        self.check_changes(version, version)?;
        let store = &self.state.rows;
        let mut per_key: HashMap<u32, u64> = HashMap::new();
        let retired = store.retired_by(version).into_iter().flatten();
        let written = store.first_added(version)..store.first_added(version + 1);
        for id in retired.chain(written) {
            *per_key.entry(store.key_of(id)).or_default() += 1;
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
                    g.last = key.to_vec();
                    g.rows += n;
                }
                _ => groups.push(KeyGroup {
                    first: key.to_vec(),
                    last: key.to_vec(),
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
            Bound::Included(&group.first[..]),
            Bound::Included(&group.last[..]),
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
        let rows = &self.state.rows;
        let ours = |id: RowId| {
            let no = rows.key_of(id) as usize;
            bits.get(no / 64).is_some_and(|w| w & (1 << (no % 64)) != 0)
        };
        let listed = |t: ChangeType| match pass {
            ChangePass::Deletes => t == ChangeType::Delete,
            ChangePass::Others => t != ChangeType::Delete,
        };
        let cold = ColdReader::of_commits(&self.table.name, self.state, version, version);
        self.list_commit(version, &cold, ours, listed, &mut f)
    }
}
