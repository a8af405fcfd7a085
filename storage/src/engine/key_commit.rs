//! One key's part of a commit, and the steps the apply rules share: inserting an event into the
//! key's events (counting duplicates, conflicts and late arrivals), writing a row that shows a
//! timeline version, retiring a row. The rules themselves are in [`super::scd`] and
//! [`super::bitemporal`].

use std::sync::OnceLock;

use super::fold::{version_mut, Bytes, Event, EventMap, FoldRules, Origin, RowId};
use super::rows_aside::FoldRows;
use super::{CommitEffects, Incoming, KeyState, Logging, StoredRow};

/// What applying a commit to one key reads and changes.
pub(super) struct KeyCommit<'a, 'r> {
    pub rows: FoldRows<'a, 'r>,
    pub key: &'a Bytes,
    pub ks: &'a mut KeyState,
    pub rules: &'a FoldRules<'r>,
    /// The commit's version: rows written carry it as `added`, rows retired as `retired`.
    pub version: u64,
    pub fx: &'a mut CommitEffects,
}

enum Outcome {
    New,
    Duplicate,
    ConflictWon,
    ConflictLost,
}

fn insert_event(events: &mut EventMap, seq: &Bytes, sys: &Bytes, ev: Event) -> Outcome {
    let cands = events.entry(seq.clone()).or_default();
    match cands.binary_search_by(|(s, _)| s[..].cmp(&sys[..])) {
        Ok(i) => {
            let cur = &mut cands[i].1;
            if cur.same_as(&ev) {
                Outcome::Duplicate
            } else if ev.beats(cur) {
                *cur = ev;
                Outcome::ConflictWon
            } else {
                Outcome::ConflictLost
            }
        }
        Err(i) => {
            cands.insert(i, (sys.clone(), ev));
            Outcome::New
        }
    }
}

impl KeyCommit<'_, '_> {
    /// Inserts one event into the key's events, counting what happened. Returns whether the
    /// event set changed, and whether the event was appended after all others of the key.
    pub fn insert(&mut self, inc: Incoming) -> Option<bool> {
        let (ks, fx) = (&mut *self.ks, &mut *self.fx);
        // Appending after every known sequence is the common case: one lookup of the last entry.
        let last_seq_cmp = ks.events.last_key_value().map(|(m, _)| m.cmp(&inc.seq));
        // A statement's events describe the table, not a feed: they are never late or in conflict.
        let feed = inc.event.origin == Origin::Feed;
        let late_biz = feed && last_seq_cmp == Some(std::cmp::Ordering::Greater);
        let late_sys =
            feed && !inc.sys.is_empty() && ks.max_sys.as_ref().is_some_and(|m| *m > inc.sys);
        let appended = last_seq_cmp.is_none_or(|o| o == std::cmp::Ordering::Less);
        let outcome = if appended {
            ks.events.insert(
                inc.seq.clone(),
                smallvec::smallvec![(inc.sys.clone(), inc.event.clone())],
            );
            Outcome::New
        } else {
            insert_event(&mut ks.events, &inc.seq, &inc.sys, inc.event.clone())
        };
        match outcome {
            Outcome::Duplicate => {
                fx.metrics.num_duplicates_ignored += 1;
                None
            }
            Outcome::ConflictLost => {
                fx.metrics.num_conflicts_resolved += 1;
                None
            }
            o => {
                if feed && matches!(o, Outcome::ConflictWon) {
                    fx.metrics.num_conflicts_resolved += 1;
                }
                if late_biz || late_sys {
                    fx.metrics.num_late_events += 1;
                }
                if ks.max_sys.as_ref().is_none_or(|m| *m < inc.sys) {
                    ks.max_sys = Some(inc.sys.clone());
                }
                if fx.logging == Logging::Log {
                    fx.events.push(inc);
                }
                Some(appended)
            }
        }
    }

    /// Retires row `r` by this commit, and counts it.
    pub fn retire(&mut self, r: RowId) {
        self.rows.retire(r, self.version);
        self.fx.metrics.num_deleted_rows += 1;
    }

    /// Writes a row showing the timeline version at `start` (with its business interval when
    /// `business`, open on system time from `sys_start` when given) and links the version to it.
    pub fn show_version(&mut self, start: &Bytes, business: bool, sys_start: Option<Bytes>) {
        let ks = &mut *self.ks;
        let v = version_mut(&mut ks.timeline, start).expect("the version is in the timeline");
        let id = self.rows.push(
            StoredRow {
                key: self.key.clone(),
                values: v.values.clone(),
                start: business.then(|| start.clone()),
                end: if business { v.end.clone() } else { None },
                sys_start,
                sys_end: None,
                added: self.version,
                retired: None,
            },
            ks.no,
        );
        v.row = Some(id);
        ks.rows.push(id);
    }

    /// Writes a new row of the key (a commit adds rows this way only).
    pub fn push_row(&mut self, row: StoredRow) -> RowId {
        let id = self.rows.push(row, self.ks.no);
        self.ks.rows.push(id);
        id
    }

    /// Drops the key's point-lookup index: its rows change.
    pub fn forget_lookup(&mut self) {
        self.ks.lookup = OnceLock::new();
    }
}
