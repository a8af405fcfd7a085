//! A commit's events folded into its keys: one key ([`fold_key`]), by its mode's rules; and the
//! keys of a large commit in shares ([`fold_shares`]), folded on two threads (the commit's and
//! one more, each taking the next shares until none is left) over a row store they only read,
//! each share's rows then put in the store in key order ([`super::rows_aside`]). Folding was the
//! largest part of a commit's work that ran on one thread while the second core waited
//! (docs/PERFORMANCE.md, session 53).

use std::collections::{BTreeMap, BTreeSet};

use super::fold::{Bytes, FoldRules};
use super::key_commit::KeyCommit;
use super::rows_aside::{AsideChanges, FoldRows, RowsAside};
use super::{bitemporal, scd, CommitEffects, Incoming, KeyState, RowStore};
use crate::flow::StoredAs;

/// How a commit folds its events into its keys.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Folding {
    /// On two threads for a commit (or a part of one) of 2,048 events or more over 64 keys or
    /// more, on the commit's thread below (the default).
    #[default]
    Auto,
    /// On the commit's thread alone.
    OneThread,
    /// On two threads for any commit of two keys or more, in shares of a few events (tests
    /// use this to fold small commits in shares of one key and of several).
    TwoThreads,
}

/// From how many events [`Folding::Auto`] folds a commit in shares: below, a second thread
/// would cost more than it saves.
const SHARES_FROM_EVENTS: usize = 2048;
/// From how many keys [`Folding::Auto`] folds a commit in shares.
const SHARES_FROM_KEYS: usize = 64;
/// About how many events make one share: enough that taking one costs nothing beside folding
/// it, few enough that neither thread waits long for the other at the end.
const SHARE_EVENTS: usize = 256;

impl Folding {
    /// Whether a commit of `events` events over `keys` keys is folded in shares.
    pub(super) fn in_shares(self, events: usize, keys: usize) -> bool {
        match self {
            Folding::Auto => events >= SHARES_FROM_EVENTS && keys >= SHARES_FROM_KEYS,
            Folding::OneThread => false,
            Folding::TwoThreads => keys >= 2,
        }
    }

    /// About how many events make one share.
    fn share_events(self) -> usize {
        match self {
            Folding::TwoThreads => 3,
            _ => SHARE_EVENTS,
        }
    }
}

/// What folding a commit's events reads, the same for every key.
pub(super) struct FoldCommit<'a, 'r> {
    pub mode: StoredAs,
    pub rules: &'a FoldRules<'r>,
    /// The table's SCD1 truncates.
    pub truncates: &'a BTreeSet<Bytes>,
    pub version: u64,
    /// The commit's timestamp (µs).
    pub ts: i64,
    /// Sequences a key keeps in memory ([`KeyState::over_tail`]).
    pub hot_tail: usize,
}

/// What a key's fold leaves to do after it.
pub(super) struct KeyFolded {
    /// It holds more than its hot tail: the commit freezes it.
    pub grown: bool,
    /// It became deleted, and its mode collects its tombstone later (SCD1).
    pub deleted: bool,
}

/// One key of a commit, with its state and its events.
pub(super) struct KeyEvents<'k> {
    pub key: Bytes,
    pub ks: &'k mut KeyState,
    pub evs: Vec<Incoming>,
}

/// Each key of `groups` (a commit's events by key, in key order: `fold_part` sorts them) with
/// its state, which every one of them must have. The groups follow the key map's order, so one
/// walk of the map from the first key finds them all.
pub(super) fn key_events(
    keys: &mut BTreeMap<Bytes, KeyState>,
    groups: Vec<(Bytes, Vec<Incoming>)>,
) -> Vec<KeyEvents<'_>> {
    debug_assert!(groups.windows(2).all(|w| w[0].0 < w[1].0));
    let Some(first) = groups.first().map(|(k, _)| k.clone()) else {
        return Vec::new();
    };
    let mut states = keys.range_mut(first..);
    let mut out = Vec::with_capacity(groups.len());
    for (key, evs) in groups {
        let ks = loop {
            let (k, ks) = states.next().expect("every key has a state");
            if *k == key {
                break ks;
            }
        };
        out.push(KeyEvents { key, ks, evs });
    }
    out
}

/// Folds `evs`, the commit's events of `key`, into its state `ks`, writing its rows to `rows`
/// and counting in `fx`.
pub(super) fn fold_key<'r>(
    commit: &FoldCommit<'_, 'r>,
    rows: FoldRows<'_, 'r>,
    key: &Bytes,
    ks: &mut KeyState,
    evs: Vec<Incoming>,
    fx: &mut CommitEffects,
) -> KeyFolded {
    // Each event's values are cloned into the key's events, out of the cache since the part
    // was read: their loads started together, not one miss at a time.
    for e in &evs {
        crate::prefetch::prefetch_counts(&e.event.values);
    }
    // A key with no events left (the tombstone GC collected it, or a full refresh reset it)
    // that gets some starts afresh: deleted since this commit, if it is.
    if ks.deleted_since.is_some() && ks.eventless() {
        ks.deleted_since = None;
    }
    let c = KeyCommit {
        rows,
        key,
        ks: &mut *ks,
        rules: commit.rules,
        version: commit.version,
        fx,
    };
    match commit.mode {
        StoredAs::Bitemporal => bitemporal::apply_key(c, evs),
        mode => scd::apply_key(c, mode, commit.truncates, evs),
    }
    KeyFolded {
        grown: ks.over_tail(commit.hot_tail),
        deleted: note_deleted(ks, commit.ts) && commit.mode == StoredAs::Scd1,
    }
}

/// Notes, after commit `ts` changed `ks`, whether the key is deleted: its business timeline (as
/// now believed) ends, so no row of it is open. Returns whether it became deleted at `ts`.
pub(super) fn note_deleted(ks: &mut KeyState, ts: i64) -> bool {
    let live = ks
        .timeline
        .values()
        .next_back()
        .is_some_and(|v| v.end.is_none());
    if live {
        ks.deleted_since = None;
        false
    } else if ks.deleted_since.is_none() && !ks.events.is_empty() {
        ks.deleted_since = Some(ts);
        true
    } else {
        false
    }
}

/// What [`fold_shares`] leaves to do, in key order.
#[derive(Default)]
pub(super) struct SharesFolded {
    /// The keys that grew past their hot tail.
    pub grown: Vec<Bytes>,
    /// The keys that became deleted, whose tombstones are collected later.
    pub deleted: Vec<Bytes>,
}

/// One share, folded: what it did to the rows, its effects, and its keys.
struct ShareFolded<'k> {
    changes: AsideChanges,
    fx: CommitEffects,
    states: Vec<&'k mut KeyState>,
    done: SharesFolded,
}

/// Folds `keys` (in key order) in shares of about `folding`'s events on two threads,
/// then puts each share's rows in `rows` and adds its effects to `fx`, share by share: the
/// rows get the ids, and `fx` the events and counts, that folding the keys one by one in order
/// gives. `rows` must have fewer rows than [`super::rows_aside::fits_aside`] allows.
pub(super) fn fold_shares<'k>(
    (commit, folding): (&FoldCommit<'_, '_>, Folding),
    rows: &mut RowStore,
    keys: Vec<KeyEvents<'k>>,
    fx: &mut CommitEffects,
) -> SharesFolded {
    let mut shares: Vec<Vec<KeyEvents<'k>>> = Vec::new();
    let mut events = usize::MAX;
    for k in keys {
        if events >= folding.share_events() {
            shares.push(Vec::new());
            events = 0;
        }
        events += k.evs.len();
        shares.last_mut().expect("a share").push(k);
    }
    let logging = fx.logging;
    let store: &RowStore = rows;
    let fold = |share: Vec<KeyEvents<'k>>| -> ShareFolded<'k> {
        let mut aside = RowsAside::new(store);
        let mut fx = CommitEffects {
            logging,
            ..Default::default()
        };
        let mut done = SharesFolded::default();
        let mut states = Vec::with_capacity(share.len());
        for KeyEvents { key, ks, evs } in share {
            let rows = FoldRows::Aside(&mut aside);
            let folded = fold_key(commit, rows, &key, ks, evs, &mut fx);
            if folded.grown {
                done.grown.push(key.clone());
            }
            if folded.deleted {
                done.deleted.push(key);
            }
            states.push(ks);
        }
        ShareFolded {
            changes: aside.into_changes(),
            fx,
            states,
            done,
        }
    };
    let folded = crate::two_threads::map("asof-fold", shares, fold);
    let mut done = SharesFolded::default();
    for share in folded {
        let renumbering = share.changes.apply(rows);
        for ks in share.states {
            // The rows the share wrote are the key's last.
            for id in ks.rows.iter_mut().rev() {
                match renumbering.id(*id) {
                    same if same == *id => break,
                    new => *id = new,
                }
            }
            for v in ks.timeline.values_mut() {
                if let Some(id) = &mut v.row {
                    *id = renumbering.id(*id);
                }
            }
        }
        fx.events.extend(share.fx.events);
        fx.metrics.add(&share.fx.metrics);
        done.grown.extend(share.done.grown);
        done.deleted.extend(share.done.deleted);
    }
    done
}
