//! The hash chain of the commit logs (docs/FORMAT.md §3.8): each commit record holds
//! `chain = SHA-256(previous chain || SHA-256(its record without the chain || what it wrote))`,
//! so a changed byte in a commit record, an event block, a source chunk or a loaded name, or a
//! commit removed or reordered, breaks every link from there on.
//!
//! What a commit "wrote" ([`Wrote`]) is the content under its key prefixes: a target's commit `v`,
//! its event blocks `E id v *`; a source's `WRITE` commit, the chunks and loaded name of its append
//! `n` (`A id n *`, `L id n`; the commit's parameter `append` says `n`).

use sha2::{Digest, Sha256};

use super::commit::CommitInfo;
use crate::error::{corrupt, Result};
use crate::format::keys::parse_version;
use crate::format::keys::{self, key};
use crate::kv::{KvStore, WriteBatch};

/// What a commit wrote besides its record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wrote {
    /// A target's commit `v`: its event blocks.
    Events,
    /// A source's `WRITE`: the chunks and loaded name of this append.
    Append(u64),
    /// Nothing (a source's `CREATE TABLE` or `CREATE FLOW`).
    Nothing,
}

/// The commit parameter of a source `WRITE` that names its append.
pub(crate) const APPEND_PARAMETER: &str = "append";

impl Wrote {
    /// What the commit `c` of a target (`tag` `C`) or source (`H`) wrote, as its record says.
    pub(crate) fn of(tag: u8, c: &CommitInfo) -> Wrote {
        if tag == keys::COMMIT {
            return Wrote::Events;
        }
        match c.parameters.get(APPEND_PARAMETER).map(|n| n.parse()) {
            Some(Ok(n)) => Wrote::Append(n),
            _ => Wrote::Nothing,
        }
    }

    /// The key prefixes of what it wrote, for commit `version` of table or source `id`.
    pub(crate) fn prefixes(self, id: u32, version: u64) -> Vec<Vec<u8>> {
        match self {
            Wrote::Events => vec![key(keys::EVENTS, id, Some(version), None)],
            Wrote::Append(n) => vec![
                key(keys::APPEND, id, Some(n), None),
                key(keys::LOADED, id, Some(n), None),
            ],
            Wrote::Nothing => Vec::new(),
        }
    }
}

/// The digest of a commit: its record without the chain, then each content key and value (in
/// key order), each part length-prefixed.
pub(crate) fn digest<'a>(
    commit: &CommitInfo,
    content: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
) -> Result<[u8; 32]> {
    let bare = CommitInfo {
        chain: None,
        ..commit.clone()
    };
    let mut h = Sha256::new();
    let mut part = |b: &[u8]| {
        h.update((b.len() as u64).to_le_bytes());
        h.update(b);
    };
    part(&serde_json::to_vec(&bare).map_err(corrupt)?);
    for (k, v) in content {
        part(k);
        part(v);
    }
    Ok(h.finalize().into())
}

/// The link after `prev` (`None`: the first commit of a chain) for a commit of `digest`, as
/// lower-case hex.
pub(crate) fn link(prev: Option<&str>, digest: &[u8; 32]) -> String {
    let mut h = Sha256::new();
    h.update(prev.unwrap_or("").as_bytes());
    h.update(digest);
    hex(&h.finalize())
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Where a commit record goes and what it follows.
pub(crate) struct Link<'a> {
    /// `C` for targets, `H` for sources.
    pub tag: u8,
    pub id: u32,
    /// The previous commit's chain (`None`: the first commit of a chain).
    pub prev: Option<&'a str>,
    pub wrote: Wrote,
}

/// Sets `commit`'s chain from what `b` puts under the prefixes of what it wrote, then puts the
/// record into `b`.
pub(crate) fn put_commit(b: &mut WriteBatch, at: Link<'_>, commit: &mut CommitInfo) -> Result<()> {
    let Link {
        tag,
        id,
        prev,
        wrote,
    } = at;
    if let Wrote::Append(n) = wrote {
        commit
            .parameters
            .insert(APPEND_PARAMETER.to_string(), n.to_string());
    }
    let prefixes = wrote.prefixes(id, commit.version);
    // What the batch leaves under the prefixes: its operations applied in order.
    let mut content: std::collections::BTreeMap<&[u8], Option<&[u8]>> = Default::default();
    for (k, v) in &b.ops {
        if prefixes.iter().any(|p| k.starts_with(p)) {
            content.insert(k, v.as_deref());
        }
    }
    let d = digest(
        commit,
        content.into_iter().filter_map(|(k, v)| Some((k, v?))),
    )?;
    commit.chain = Some(link(prev, &d));
    b.put(
        key(tag, id, Some(commit.version), None),
        serde_json::to_vec(commit).map_err(corrupt)?,
    );
    Ok(())
}

/// The parameter of a `VACUUM` commit that holds the digest of the base it rewrote.
pub(crate) const BASE_DIGEST: &str = "base_digest";

/// The digest of a vacuum base `base` of table `id`: its record, and every event block up to it
/// (on replay they are all its events), as the store holds them after `pending` is written.
pub(crate) fn base_digest(
    kv: &dyn KvStore,
    id: u32,
    base: &CommitInfo,
    pending: Option<&WriteBatch>,
) -> Result<[u8; 32]> {
    let prefix = key(keys::EVENTS, id, None, None);
    let upto = |k: &[u8]| parse_version(k).is_ok_and(|v| v <= base.version);
    let mut blocks: std::collections::BTreeMap<Vec<u8>, Option<Vec<u8>>> = Default::default();
    for kv in kv.scan_prefix(&prefix) {
        let (k, v) = kv?;
        if !upto(&k) {
            break;
        }
        blocks.insert(k, Some(v));
    }
    for (k, v) in pending.map(|b| b.ops.as_slice()).unwrap_or_default() {
        if k.starts_with(&prefix) && upto(k) {
            blocks.insert(k.clone(), v.clone());
        }
    }
    digest(
        base,
        blocks
            .iter()
            .filter_map(|(k, v)| Some((k.as_slice(), v.as_deref()?))),
    )
}
