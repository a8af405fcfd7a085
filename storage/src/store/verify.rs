//! `asof verify`: the hash chain of every table's and source table's commit log recomputed from
//! the stored bytes, and each table's derived records (key heads, pages, row directories) compared
//! with a replay of its log, so that a changed byte anywhere in a commit record, an event block, a
//! source chunk or a derived record is found and named (docs/FORMAT.md §3.8).

use super::chain::{self, Wrote, BASE_DIGEST};
use super::commit::CommitInfo;
use super::replay::{replay_log, ReplayRange, VACUUM_BASE};
use super::{pages, Store, Table};
use crate::engine::TableState;
use crate::error::Result;
use crate::format::keys::{self, key, parse_version};
use crate::kv::KvStore;

/// What `verify` found in one table or source table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableCheck {
    /// The table's name.
    pub name: String,
    /// Whether it is a source table.
    pub source: bool,
    /// Commits whose link in the chain was recomputed and matched.
    pub linked: u64,
    /// Commits written before the chain existed (format 2 and older): not covered.
    pub before_chain: u64,
    /// The first thing that does not match, if any.
    pub problem: Option<Problem>,
}

/// Where the stored bytes and the chain disagree.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Problem {
    /// Commit `version`'s record or what it wrote is not what was chained.
    Commit {
        /// The first commit whose link does not match.
        version: u64,
        /// What is wrong.
        what: String,
    },
    /// The derived records (key heads, pages, row directories) differ from a replay of the log.
    Derived(String),
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Problem::Commit { version, what } => write!(f, "commit {version}: {what}"),
            Problem::Derived(what) => write!(f, "derived records: {what}"),
        }
    }
}

/// What `verify` found in the whole store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyReport {
    /// Every table and source table, targets first, each in name order.
    pub tables: Vec<TableCheck>,
}

impl VerifyReport {
    /// Whether everything matched.
    pub fn ok(&self) -> bool {
        self.tables.iter().all(|t| t.problem.is_none())
    }
}

impl Store {
    /// Recomputes the hash chain of every commit log from the stored bytes, and compares each
    /// table's derived records with a replay of its log. Reads everything; changes nothing.
    pub fn verify(&self) -> Result<VerifyReport> {
        let g = self.read_inner()?;
        let kv = g.kv.as_ref();
        let mut tables = Vec::new();
        for t in g.tables.values() {
            let mut check = chain_check(kv, keys::COMMIT, t.id, &t.name, false)?;
            if check.problem.is_none() {
                check.problem = derived_check(kv, t)?.map(Problem::Derived);
            }
            tables.push(check);
        }
        for s in g.sources.values() {
            tables.push(chain_check(kv, keys::SOURCE_COMMIT, s.id, &s.name, true)?);
        }
        Ok(VerifyReport { tables })
    }
}

/// Recomputes the chain of the commit records under `tag` (`C` or `H`) of `id`.
fn chain_check(kv: &dyn KvStore, tag: u8, id: u32, name: &str, source: bool) -> Result<TableCheck> {
    let mut check = TableCheck {
        name: name.to_string(),
        source,
        linked: 0,
        before_chain: 0,
        problem: None,
    };
    let fail = |version: u64, what: String| Some(Problem::Commit { version, what });
    let mut commits: Vec<CommitInfo> = Vec::new();
    for pair in kv.scan_prefix(&key(tag, id, None, None)) {
        let (k, v) = pair?;
        let version = parse_version(&k)?;
        match serde_json::from_slice::<CommitInfo>(&v) {
            // A linked record is stored exactly as it serialises: a changed byte that still
            // parses (a digit, a letter of a value) shows here or in its link.
            Ok(c)
                if c.chain.is_some() && serde_json::to_vec(&c).ok().as_deref() != Some(&v[..]) =>
            {
                check.problem = fail(version, "its record was altered".into());
                return Ok(check);
            }
            Ok(c) if c.version == version => commits.push(c),
            Ok(c) => {
                check.problem = fail(version, format!("its record says version {}", c.version));
                return Ok(check);
            }
            Err(e) => {
                check.problem = fail(version, format!("its record does not parse: {e}"));
                return Ok(check);
            }
        }
    }
    let rewrites = chain::rewrites_in(&commits);
    let mut prev: Option<String> = None;
    for (i, c) in commits.iter().enumerate() {
        if let Some(p) = i.checked_sub(1).map(|p| &commits[p]) {
            if c.version != p.version + 1 {
                check.problem = fail(c.version, format!("it follows commit {}", p.version));
                return Ok(check);
            }
        }
        let Some(link) = &c.chain else {
            if prev.is_some() {
                check.problem = fail(c.version, "it has no link, after linked commits".into());
                return Ok(check);
            }
            check.before_chain += 1;
            continue;
        };
        if i == 0 && c.parameters.contains_key(VACUUM_BASE) {
            // A vacuum base keeps its link; what it holds now is in the digest the VACUUM that
            // rewrote it recorded (and chained).
            let recorded = commits.iter().rev().find(|v| {
                v.parameters.get("oldest_version") == Some(&c.version.to_string())
                    && v.parameters.contains_key(BASE_DIGEST)
            });
            if let Some(v) = recorded {
                // ERASEs after that VACUUM may have rewritten the base since.
                let after: Vec<&chain::Rewrite> = rewrites
                    .get(&c.version)
                    .into_iter()
                    .flatten()
                    .filter(|r| r.by > v.version)
                    .collect();
                let now = chain::base_digest(kv, id, c, None)?;
                let d = match chain::chained_digest(now, &after) {
                    Ok(d) => chain::hex(&d),
                    Err(what) => {
                        check.problem = fail(c.version, format!("the vacuum base: {what}"));
                        return Ok(check);
                    }
                };
                if v.parameters[BASE_DIGEST] != d {
                    check.problem = fail(
                        c.version,
                        format!("the vacuum base's record or events differ from what VACUUM (commit {}) recorded", v.version),
                    );
                    return Ok(check);
                }
            }
            prev = Some(link.clone());
            check.linked += 1;
            continue;
        }
        let prefixes = Wrote::of(tag, c).prefixes(id, c.version);
        let mut content = Vec::new();
        for p in &prefixes {
            for pair in kv.scan_prefix(p) {
                content.push(pair?);
            }
        }
        content.sort();
        let now = chain::digest(c, content.iter().map(|(k, v)| (k.as_slice(), v.as_slice())))?;
        let erased: Vec<&chain::Rewrite> = rewrites.get(&c.version).into_iter().flatten().collect();
        let d = match chain::chained_digest(now, &erased) {
            Ok(d) => d,
            Err(what) => {
                check.problem = fail(c.version, what);
                return Ok(check);
            }
        };
        let expected = chain::link(prev.as_deref(), &d);
        if &expected != link {
            check.problem = fail(
                c.version,
                "its record or what it wrote (events, rows) is not what was committed".into(),
            );
            return Ok(check);
        }
        prev = Some(expected);
        check.linked += 1;
    }
    Ok(check)
}

/// Compares `t`'s derived records (its last checkpoint and the log after it) with a replay of its
/// whole log: the events and every row version must be the same. `None` if they are.
fn derived_check(kv: &dyn KvStore, t: &Table) -> Result<Option<String>> {
    let derived = match pages::read_checkpoint(kv, t) {
        Ok(Some((state, _))) => state,
        // No checkpoint: the next use rebuilds them from the log; nothing to compare.
        Ok(None) if kv.get(&key(keys::SUMMARY, t.id, None, None))?.is_none() => return Ok(None),
        Ok(None) => {
            return Ok(Some(
                "the summary names a checkpoint the log does not have".to_string(),
            ))
        }
        Err(e) => return Ok(Some(format!("cannot be read: {e}"))),
    };
    let mut replayed = t.detached_state();
    if let Err(e) = replay_log(
        kv,
        t.id,
        &mut replayed,
        &t.commits,
        ReplayRange::default(),
        &mut |_, _| Ok(()),
    ) {
        return Ok(Some(format!("the log cannot be replayed: {e}")));
    }
    if let Some(d) = differ(&derived, &replayed) {
        return Ok(Some(d));
    }
    boxes_check(kv, t)
}

/// Checks each key head's stored page boxes against its pages' zones (derived from the zones,
/// they are not compared by [`differ`], yet scans choose pages by them). `None` if all agree.
fn boxes_check(kv: &dyn KvStore, t: &Table) -> Result<Option<String>> {
    for r in kv.scan_prefix(&key(keys::KEY_HEAD, t.id, None, None)) {
        let (k, v) = r?;
        if let Err(e) = crate::format::derived::check_list_boxes(&v) {
            let shown = keys::head_key(&k).map(crate::keycodec::display_key);
            return Ok(Some(format!(
                "key {}: {e}",
                shown.unwrap_or_else(|_| "?".into())
            )));
        }
    }
    Ok(None)
}

/// What differs between two states of one table, if anything: compared key by key (each key's
/// row versions, events and deletion time), so that only one key's contents are read back at a time.
fn differ(a: &TableState, b: &TableState) -> Option<String> {
    let shown = |k: &[u8]| crate::keycodec::display_key(k);
    if a.key_list().ne(b.key_list()) {
        return Some("the keys differ from a replay of the log".to_string());
    }
    if a.truncates != b.truncates {
        return Some("the truncates differ from a replay of the log".to_string());
    }
    for key in a.key_list() {
        match (a.key_contents(key), b.key_contents(key)) {
            (Ok(x), Ok(y)) if x != y => {
                return Some(format!(
                    "key {}: its row versions or events differ from a replay of the log",
                    shown(key)
                ))
            }
            (Err(e), _) | (_, Err(e)) => {
                return Some(format!("key {}: cannot be read: {e}", shown(key)))
            }
            _ => {}
        }
        // Retention erases by it (docs/SEMANTICS.md §12.3).
        if a.deleted_since(key) != b.deleted_since(key) {
            return Some(format!(
                "key {}: the time since which it is deleted differs from a replay of the log",
                shown(key)
            ));
        }
    }
    None
}
