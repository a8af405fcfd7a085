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

    /// Records in `commit`'s parameters which append it wrote, if any ([`Wrote::of`] reads it).
    fn note_in(self, commit: &mut CommitInfo) {
        if let Wrote::Append(n) = self {
            commit
                .parameters
                .insert(APPEND_PARAMETER.to_string(), n.to_string());
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
    let mut h = Hashing::new(commit)?;
    for (k, v) in content {
        h.part(k);
        h.part(v);
    }
    Ok(h.finish())
}

/// A [`digest`] being computed: the record, then each part of the content.
struct Hashing(Sha256);

impl Hashing {
    fn new(commit: &CommitInfo) -> Result<Hashing> {
        let bare = CommitInfo {
            chain: None,
            ..commit.clone()
        };
        let mut h = Hashing(Sha256::new());
        h.part(&serde_json::to_vec(&bare).map_err(corrupt)?);
        Ok(h)
    }

    fn part(&mut self, b: &[u8]) {
        self.0.update((b.len() as u64).to_le_bytes());
        self.0.update(b);
    }

    fn finish(self) -> [u8; 32] {
        self.0.finalize().into()
    }
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

/// A digest written by [`hex`], read back; `None` if it is not one.
pub(crate) fn unhex(text: &str) -> Option<[u8; 32]> {
    let mut out = [0u8; 32];
    if text.len() != 64 || !text.is_ascii() {
        return None;
    }
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

/// The digest a commit was chained with, given `now`, its digest from the bytes stored now, and
/// the rewrites ERASE recorded of it, oldest first: each must start where the one after it
/// ended. An error says which ERASE does not match.
pub(crate) fn chained_digest(
    now: [u8; 32],
    rewrites: &[&Rewrite],
) -> std::result::Result<[u8; 32], String> {
    let mut expected = hex(&now);
    for r in rewrites.iter().rev() {
        if r.new != expected {
            return Err(format!(
                "what it holds is not what ERASE (commit {}) left of it",
                r.by
            ));
        }
        expected = r.old.clone();
    }
    unhex(&expected).ok_or_else(|| "an ERASE recorded a digest that is not one".to_string())
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
    wrote.note_in(commit);
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
    put_linked(b, (tag, id), prev, commit, &d)
}

/// Like [`put_commit`], for a commit whose content was written before `b` and `b` does not
/// touch (a commit applied in parts wrote its event blocks ahead): `content` is all of it, in
/// key order, a pair at a time.
pub(crate) fn put_commit_written(
    b: &mut WriteBatch,
    at: Link<'_>,
    commit: &mut CommitInfo,
    content: impl Iterator<Item = Result<(Vec<u8>, Vec<u8>)>>,
) -> Result<()> {
    at.wrote.note_in(commit);
    let prefixes = at.wrote.prefixes(at.id, commit.version);
    let mut h = Hashing::new(commit)?;
    for pair in content {
        let (k, v) = pair?;
        if !prefixes.iter().any(|p| k.starts_with(p)) {
            return Err(corrupt(format!(
                "commit {} wrote ahead a record it does not own",
                commit.version
            )));
        }
        h.part(&k);
        h.part(&v);
    }
    put_linked(b, (at.tag, at.id), at.prev, commit, &h.finish())
}

/// Sets `commit`'s chain from the previous link and its digest, and puts the record into `b`.
fn put_linked(
    b: &mut WriteBatch,
    (tag, id): (u8, u32),
    prev: Option<&str>,
    commit: &mut CommitInfo,
    digest: &[u8; 32],
) -> Result<()> {
    commit.chain = Some(link(prev, digest));
    b.put(
        key(tag, id, Some(commit.version), None),
        serde_json::to_vec(commit).map_err(corrupt)?,
    );
    Ok(())
}

/// The digest of commit `c` of `id` (under `tag`) over what it wrote, as the store holds it
/// (ERASE computes a rewritten commit's digest before it rewrites anything and after). The
/// records are hashed as they are read: collecting them first held a whole source append in
/// memory (450 MB for one of 10M rows).
pub(crate) fn stored_digest(
    kv: &dyn KvStore,
    tag: u8,
    id: u32,
    c: &CommitInfo,
) -> Result<[u8; 32]> {
    // Disjoint prefixes, in key order: their records, one prefix after the other, are in key
    // order.
    let mut prefixes = Wrote::of(tag, c).prefixes(id, c.version);
    prefixes.sort();
    let mut h = Hashing::new(c)?;
    for p in &prefixes {
        for pair in kv.scan_prefix(p) {
            let (k, v) = pair?;
            h.part(&k);
            h.part(&v);
        }
    }
    Ok(h.finish())
}

/// The parameter of an `ERASE` commit that lists the commits it rewrote, each as
/// `version:old digest:new digest` (hex), comma separated: `asof verify` checks a rewritten
/// commit's stored bytes against the new digest and its link against the old.
pub(crate) const REWROTE: &str = "rewrote";

/// One commit an ERASE rewrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Rewrite {
    /// The ERASE commit that rewrote it (0 while it is being written).
    pub by: u64,
    pub version: u64,
    pub old: String,
    pub new: String,
}

/// The value of [`REWROTE`] for `rewrites`.
pub(crate) fn rewrote_parameter(rewrites: &[Rewrite]) -> String {
    rewrites
        .iter()
        .map(|r| format!("{}:{}:{}", r.version, r.old, r.new))
        .collect::<Vec<_>>()
        .join(",")
}

/// Every rewrite the `ERASE` commits of a log record, in log order, by the version rewritten.
pub(crate) fn rewrites_in(commits: &[CommitInfo]) -> std::collections::BTreeMap<u64, Vec<Rewrite>> {
    let mut out: std::collections::BTreeMap<u64, Vec<Rewrite>> = Default::default();
    for c in commits {
        let Some(list) = c.parameters.get(REWROTE) else {
            continue;
        };
        for item in list.split(',').filter(|i| !i.is_empty()) {
            let mut parts = item.split(':');
            let (Some(v), Some(old), Some(new)) = (parts.next(), parts.next(), parts.next()) else {
                continue;
            };
            if let Ok(version) = v.parse() {
                out.entry(version).or_default().push(Rewrite {
                    by: c.version,
                    version,
                    old: old.to_string(),
                    new: new.to_string(),
                });
            }
        }
    }
    out
}

/// The parameter of a `VACUUM` commit that holds the digest of the base it rewrote.
pub(crate) const BASE_DIGEST: &str = "base_digest";

/// The digest of a vacuum base `base` of table `id`: its record, and every event block up to it
/// (on replay they are all its events), as the store holds them after `pending` is written. The
/// blocks are hashed as they are read, merged in key order with those `pending` writes or
/// deletes: collecting them first held the whole log in memory (340 MB at 10M events).
pub(crate) fn base_digest(
    kv: &dyn KvStore,
    id: u32,
    base: &CommitInfo,
    pending: Option<&WriteBatch>,
) -> Result<[u8; 32]> {
    let prefix = key(keys::EVENTS, id, None, None);
    let upto = |k: &[u8]| parse_version(k).is_ok_and(|v| v <= base.version);
    // The batch's last operation on a key is the one that stands.
    let written: std::collections::BTreeMap<&[u8], Option<&[u8]>> =
        (pending.map(|b| b.ops.as_slice()).unwrap_or_default().iter())
            .filter(|(k, _)| k.starts_with(&prefix) && upto(k))
            .map(|(k, v)| (k.as_slice(), v.as_deref()))
            .collect();
    let mut written = written.into_iter().peekable();
    let mut h = Hashing::new(base)?;
    let mut block = |k: &[u8], v: Option<&[u8]>| {
        if let Some(v) = v {
            h.part(k);
            h.part(v);
        }
    };
    for kv in kv.scan_prefix(&prefix) {
        let (k, v) = kv?;
        if !upto(&k) {
            break;
        }
        while let Some((wk, wv)) = written.next_if(|(wk, _)| *wk < &k[..]) {
            block(wk, wv);
        }
        match written.next_if(|(wk, _)| *wk == &k[..]) {
            Some((wk, wv)) => block(wk, wv),
            None => block(&k, Some(&v)),
        }
    }
    for (wk, wv) in written {
        block(wk, wv);
    }
    Ok(h.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    use crate::kv::MemKv;

    /// The digest of a base with a batch pending is the one of the store once the batch is
    /// written: blocks the batch replaces, deletes, adds before, among and after the stored ones,
    /// and blocks past the base (which it leaves out) either way.
    #[test]
    fn a_base_digest_with_a_batch_pending_is_the_one_after_it_is_written() {
        let block = |v: u64, c: u32| key(keys::EVENTS, 7, Some(v), Some(c));
        let kv = MemKv::default();
        let mut stored = WriteBatch::default();
        for (v, c) in [(2, 0), (2, 1), (4, 0), (6, 0), (9, 0)] {
            stored.put(block(v, c), format!("stored {v}.{c}").into_bytes());
        }
        stored.put(
            key(keys::EVENTS, 8, Some(1), Some(0)),
            b"another table".to_vec(),
        );
        kv.write(stored).unwrap();
        let mut pending = WriteBatch::default();
        pending.put(block(1, 0), b"new, first".to_vec());
        pending.put(block(2, 1), b"replaced".to_vec());
        pending.delete(block(4, 0));
        pending.put(block(5, 0), b"new, among".to_vec());
        pending.put(block(5, 0), b"new, among, written twice".to_vec());
        pending.put(block(7, 0), b"new, last".to_vec());
        pending.put(block(8, 0), b"new, past the base".to_vec());
        pending.put(block(6, 1), b"deleted as it is written".to_vec());
        pending.delete(block(6, 1));
        let base = CommitInfo::bare(7, 0, "WRITE", BTreeMap::new());
        let before = base_digest(&kv, 7, &base, Some(&pending)).unwrap();
        kv.write(pending).unwrap();
        let after = base_digest(&kv, 7, &base, None).unwrap();
        assert_eq!(before, after);
        let want = digest(
            &base,
            [
                (block(1, 0), &b"new, first"[..]),
                (block(2, 0), b"stored 2.0"),
                (block(2, 1), b"replaced"),
                (block(5, 0), b"new, among, written twice"),
                (block(6, 0), b"stored 6.0"),
                (block(7, 0), b"new, last"),
            ]
            .iter()
            .map(|(k, v)| (&k[..], *v)),
        )
        .unwrap();
        assert_eq!(after, want);
    }

    /// A source commit's digest covers its append, read under two prefixes (its chunks and the
    /// name it was loaded under), in key order, and leaves another append's chunks out.
    #[test]
    fn a_stored_digest_covers_what_the_commit_wrote_in_key_order() {
        let chunk = |n: u64, c: u32| key(keys::APPEND, 3, Some(n), Some(c));
        let loaded = key(keys::LOADED, 3, Some(2), None);
        let kv = MemKv::default();
        let mut stored = WriteBatch::default();
        for (n, c) in [(1, 0), (2, 2), (2, 0), (3, 0)] {
            stored.put(chunk(n, c), format!("stored {n}.{c}").into_bytes());
        }
        stored.put(loaded.clone(), b"file.parquet".to_vec());
        kv.write(stored).unwrap();
        let params = [(APPEND_PARAMETER.to_string(), "2".to_string())];
        let c = CommitInfo::bare(5, 0, "WRITE", params.into_iter().collect());
        let after = stored_digest(&kv, keys::SOURCE_COMMIT, 3, &c).unwrap();
        let want = digest(
            &c,
            [
                (chunk(2, 0), &b"stored 2.0"[..]),
                (chunk(2, 2), b"stored 2.2"),
                (loaded, b"file.parquet"),
            ]
            .iter()
            .map(|(k, v)| (&k[..], *v)),
        )
        .unwrap();
        assert_eq!(after, want);
    }
}
