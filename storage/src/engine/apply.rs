//! A commit's path through a table's state: the keys its events reach into frozen history are
//! thawed, each key's events are folded in by its mode's rules (`fold_part`), then the commit's
//! changes are counted and the keys that grew past their hot tail are frozen (`settle`); last,
//! SCD1 tombstones due are collected.

use std::collections::BTreeMap;

use roaring::RoaringBitmap;

use super::fold::{refold, Bytes, Change, FoldInput, FoldRules, Limit, RowId, TimelineDiff};
use super::fold_keys::{fold_key, fold_shares, key_events, note_deleted, FoldCommit};
use super::key_commit::KeyCommit;
use super::rows_aside::{fits_aside, FoldRows};
use super::{changes, cold, scd};
use super::{CommitEffects, CommitPart, Dirty, Incoming, KeyState, Logging, RowStore, TableState};
use crate::error::Result;
use crate::flow::StoredAs;

/// From how many logged events [`TableState::apply_beside`] runs its work on a second thread.
const BESIDE_APART_FROM: usize = 1024;
/// From how many logged events a part's changes are counted on a second thread, beside the
/// encoding of its pages.
const COUNT_APART_FROM: usize = 1024;

/// What [`TableState::settle`] needs of the part [`TableState::fold_part`] folded in.
struct Settling {
    version: u64,
    /// The rows earlier parts of the commit retired.
    retired_before: RoaringBitmap,
    /// The keys the part's events touched, in order.
    touched: Vec<Bytes>,
    /// Those of them that grew past their hot tail ([`super::KeyState::over_tail`]), in order:
    /// the keys to freeze.
    grown: Vec<Bytes>,
}

impl TableState {
    /// Applies one commit's events (with [`Logging::Log`], the effects list the events that
    /// changed the event set, for the log).
    ///
    /// Keys whose change reaches into their frozen history are thawed first, and keys that grew
    /// past their hot tail are frozen after ([`cold`]). An error comes from reading a page; the
    /// state may then be half-applied, and the caller must stop using it.
    ///
    /// Last, SCD1 tombstones due at `ts` are collected (a commit applied in parts calls
    /// [`TableState::apply_part`] for each part, then [`TableState::collect_tombstones_of`] for
    /// the part's keys; its replay, [`TableState::collect_tombstones_at`] after the last part).
    pub fn apply(
        &mut self,
        commit: CommitPart,
        tick: &mut dyn FnMut(u64),
    ) -> Result<CommitEffects> {
        let ts = commit.ts;
        let mut fx = self.apply_part(commit, tick)?;
        fx.metrics.num_tombstones_collected += self.collect_tombstones_at(ts)?;
        Ok(fx)
    }

    /// [`TableState::apply`], with `beside` run on a second thread over the events and
    /// truncates the commit logs while this one counts its changes and freezes its keys (the
    /// commit's store encodes its log there); returns what `beside` returned too.
    pub fn apply_beside<R: Send>(
        &mut self,
        commit: CommitPart,
        tick: &mut dyn FnMut(u64),
        beside: impl FnOnce(&[Incoming], &[Bytes]) -> R + Send,
    ) -> Result<(CommitEffects, R)> {
        let ts = commit.ts;
        let (mut fx, settling) = self.fold_part(commit, tick)?;
        let (events, truncates) = (&fx.events[..], &fx.truncates[..]);
        let (settled, theirs) = match events.len() < BESIDE_APART_FROM {
            true => (self.settle(&fx, settling), beside(events, truncates)),
            false => crate::two_threads::both(
                "asof-log",
                || self.settle(&fx, settling),
                || beside(events, truncates),
            ),
        };
        fx.metrics.apply_counts(settled?);
        fx.metrics.num_tombstones_collected += self.collect_tombstones_at(ts)?;
        Ok((fx, theirs))
    }

    /// [`TableState::apply`] without the tombstone collection: one part of a commit applied in
    /// parts, each a call with the same `version` and `ts`, the collection after each part (of
    /// its keys) or after the last. The
    /// table is the same as after one apply of all the events. With [`Logging::Log`], each part's
    /// metrics count the rows it wrote and retired, so they add up to the commit's when no key's
    /// events are in two parts (and no part but the first has truncates): a row one part wrote
    /// and a later part retired would count in both.
    pub fn apply_part(
        &mut self,
        part: CommitPart,
        tick: &mut dyn FnMut(u64),
    ) -> Result<CommitEffects> {
        let (mut fx, settling) = self.fold_part(part, tick)?;
        let counts = self.settle(&fx, settling)?;
        fx.metrics.apply_counts(counts);
        Ok(fx)
    }

    /// The first half of [`TableState::apply_part`]: thaws what the part's events reach and
    /// folds them in.
    fn fold_part(
        &mut self,
        mut part: CommitPart,
        tick: &mut dyn FnMut(u64),
    ) -> Result<(CommitEffects, Settling)> {
        part.incoming.sort_by(|a, b| a.key.cmp(&b.key));
        let (version, logging) = (part.version, part.logging);
        // The rows earlier parts of this commit retired: this part's count leaves them out
        // (not those a reset retired just before it: they are this part's).
        let retired_before = match logging {
            Logging::Log => {
                let by = self
                    .rows
                    .retired_by(version)
                    .held()
                    .cloned()
                    .unwrap_or_default();
                by - &self.reset_pending.retired
            }
            Logging::Replay => RoaringBitmap::new(),
        };
        self.thaw_for(&part.incoming, !part.truncates.is_empty())?;
        let touched: Vec<Bytes> = {
            let mut keys: Vec<Bytes> = part.incoming.iter().map(|e| e.key.clone()).collect();
            keys.dedup();
            keys
        };
        let (fx, grown) = self.apply_thawed(part, tick);
        let settling = Settling {
            version,
            retired_before,
            touched,
            grown,
        };
        Ok((fx, settling))
    }

    /// The second half of [`TableState::apply_part`]: counts the part's changes (with
    /// [`Logging::Log`]), then freezes the keys it touched that grew past their hot tail. The
    /// changes are counted as the change feed lists them, before any row of the commit is
    /// frozen: beside the encoding of the keys' pages, on a second thread, for a part of
    /// [`COUNT_APART_FROM`] events or more (both only read the rows).
    fn settle(&mut self, fx: &CommitEffects, settling: Settling) -> Result<Option<(u64, u64)>> {
        let Settling {
            version,
            retired_before,
            touched,
            grown,
        } = settling;
        for key in &touched {
            self.dirty.add(key);
        }
        let (rows, types, mode) = (&self.rows, &self.types[..], self.mode());
        let count = || change_counts(rows, mode, version, fx.first_row, &retired_before);
        let (encoded, counts) = match fx.logging {
            Logging::Replay => {
                let cuts = cold::Cuts::take(&mut self.keys, &grown, rows, self.hot_tail);
                (cuts.encode(rows, types)?, None)
            }
            Logging::Log if fx.events.len() < COUNT_APART_FROM => {
                let counts = count()?;
                let cuts = cold::Cuts::take(&mut self.keys, &grown, rows, self.hot_tail);
                (cuts.encode(rows, types)?, Some(counts))
            }
            Logging::Log => {
                let cuts = cold::Cuts::take(&mut self.keys, &grown, rows, self.hot_tail);
                let (encoded, counts) =
                    crate::two_threads::both("asof-count", || cuts.encode(rows, types), count);
                (encoded?, Some(counts?))
            }
        };
        encoded.install(&mut self.keys, &mut self.rows, &mut self.pages)?;
        // Keys a reset retired and this part brought no event to: their rows go back to pages.
        let reset = std::mem::take(&mut self.reset_pending);
        for key in reset.keys {
            if let Some(ks) = self.keys.get_mut(&key) {
                ks.freeze_retired(&key, &mut self.rows, &mut self.pages, &self.types)?;
            }
        }
        Ok(counts)
    }

    /// Thaws every key whose frozen history this commit's events (sorted by key) would read:
    /// events at or before a key's `hot_from`, bitemporal events late on system time, and, for a
    /// truncate, every key.
    fn thaw_for(&mut self, incoming: &[Incoming], truncates: bool) -> Result<()> {
        if truncates {
            return self.thaw_all();
        }
        let width = self.types.len();
        let bitemporal = self.mode() == StoredAs::Bitemporal;
        for evs in incoming.chunk_by(|a, b| a.key == b.key) {
            let key = &evs[0].key;
            let Some(ks) = self.keys.get_mut(key) else {
                continue;
            };
            // A BITEMPORAL event not after the key's latest system time replays the key's system
            // history from its system time, refolding at every event since: one in the hot
            // versions before `hot_from` refolds on the frozen version before them (an ignored
            // NULL, an untracked column take their values from it). Found by the engine model.
            let replays_into_frozen = bitemporal
                && evs.iter().any(|e| {
                    ks.max_sys.as_ref().is_some_and(|m| e.sys[..] <= m[..])
                        && ks.hot_events_before_cut_since(&e.sys)
                });
            if replays_into_frozen || evs.iter().any(|e| ks.needs_thaw_since(&e.sys)) {
                ks.thaw(key, &mut self.rows, &mut self.pages, width)?;
                continue;
            }
            // Late on business time only: the last pages, back to before the earliest event.
            let Some(first) = evs
                .iter()
                .map(|e| &e.seq)
                .filter(|s| ks.needs_thaw_at(s))
                .min()
            else {
                continue;
            };
            ks.thaw_before(key, first, &mut self.rows, &mut self.pages, width)?;
            // With `hot_from` moved back, a system-time replay may now start in what is left
            // frozen.
            if bitemporal
                && evs.iter().any(|e| {
                    ks.max_sys.as_ref().is_some_and(|m| e.sys[..] <= m[..])
                        && ks.hot_events_before_cut_since(&e.sys)
                })
            {
                ks.thaw(key, &mut self.rows, &mut self.pages, width)?;
            }
        }
        Ok(())
    }

    /// [`TableState::apply`] once no key it touches is frozen; returns its effects and the keys
    /// it grew past their hot tail, in order.
    fn apply_thawed(
        &mut self,
        part: CommitPart,
        tick: &mut dyn FnMut(u64),
    ) -> (CommitEffects, Vec<Bytes>) {
        let CommitPart {
            incoming,
            truncates,
            version,
            ts,
            logging,
        } = part;
        let mut fx = CommitEffects {
            first_row: self.rows.len() as RowId,
            logging,
            ..Default::default()
        };
        fx.metrics.num_events_read = (incoming.len() + truncates.len()) as u64;
        let tracked = std::mem::take(&mut self.tracked);
        let ignore_null = std::mem::take(&mut self.ignore_null);
        let rules = FoldRules {
            tracked: &tracked,
            ignore_null: &ignore_null,
            any_ignore_null: ignore_null.iter().any(|&b| b),
        };

        // Truncates first: each is a delete at its sequence for every key, known or not yet.
        for t in truncates {
            if self.truncates.contains(&t) {
                fx.metrics.num_duplicates_ignored += 1;
                continue;
            }
            if self
                .truncates
                .iter()
                .next_back()
                .is_some_and(|m| m[..] > t[..])
            {
                fx.metrics.num_late_events += 1;
            }
            self.truncates.insert(t.clone());
            self.dirty = Dirty::All;
            let mode = self.schema.mode;
            let input = FoldInput {
                truncates: &self.truncates,
                limit: Limit::None,
                rules: &rules,
            };
            for (key, ks) in self.keys.iter_mut() {
                let mut diff = TimelineDiff::default();
                let change = Change {
                    at: &t,
                    appended: false,
                };
                refold(&mut ks.timeline, &ks.events, &input, change, &mut diff);
                let mut c = KeyCommit {
                    rows: FoldRows::Store(&mut self.rows),
                    key,
                    ks,
                    rules: &rules,
                    version,
                    fx: &mut fx,
                };
                scd::emit_rows(&mut c, mode, diff);
                if note_deleted(ks, ts) {
                    self.gc_queue.push_back((ts, key.clone()));
                }
            }
            fx.truncates.push(t);
        }

        let mut groups: Vec<(Bytes, Vec<Incoming>)> = Vec::new();
        for e in incoming {
            match groups.last_mut() {
                Some((key, evs)) if *key == e.key => evs.push(e),
                _ => groups.push((e.key.clone(), vec![e])),
            }
        }
        let commit = FoldCommit {
            mode: self.schema.mode,
            rules: &rules,
            truncates: &self.truncates,
            version,
            ts,
            hot_tail: self.hot_tail,
        };
        let events = groups.iter().map(|(_, evs)| evs.len()).sum::<usize>();
        let mut grown = Vec::new();
        if self.folding.in_shares(events, groups.len()) && fits_aside(self.rows.len()) {
            // Every key's state, the new ones made first, in key order, numbered as one
            // thread folding the keys in turn numbers them.
            for (key, _) in &groups {
                if !self.keys.contains_key(key) {
                    key_state(
                        &mut self.keys,
                        (&mut self.key_list, &mut self.numbered),
                        key,
                    );
                }
            }
            let keys = key_events(&mut self.keys, groups);
            let done = fold_shares((&commit, self.folding), &mut self.rows, keys, &mut fx);
            // The threads do not report progress: the part's events count once folded.
            tick(events as u64);
            grown = done.grown;
            (self.gc_queue).extend(done.deleted.into_iter().map(|key| (ts, key)));
        } else {
            let (mut done, mut reported) = (0u64, 0u64);
            for (key, evs) in groups {
                done += evs.len() as u64;
                if done - reported >= 16 * 1024 {
                    tick(done);
                    reported = done;
                }
                let ks = key_state(
                    &mut self.keys,
                    (&mut self.key_list, &mut self.numbered),
                    &key,
                );
                let rows = FoldRows::Store(&mut self.rows);
                let folded = fold_key(&commit, rows, &key, ks, evs, &mut fx);
                if folded.grown {
                    grown.push(key.clone());
                }
                if folded.deleted {
                    self.gc_queue.push_back((ts, key));
                }
            }
        }
        self.tracked = tracked;
        self.ignore_null = ignore_null;
        fx.metrics.num_upserted_rows = self.rows.len() as u64 - u64::from(fx.first_row);
        (fx, grown)
    }
}

/// The rows commit `version` upserted (inserts and updates) and deleted, as its change feed
/// lists them (docs/SEMANTICS.md §7.1); its rows are `first_row..`, and those it retired but
/// `before`, none of them frozen yet.
fn change_counts(
    rows: &RowStore,
    mode: StoredAs,
    version: u64,
    first_row: RowId,
    before: &RoaringBitmap,
) -> Result<(u64, u64)> {
    let retired = rows
        .retired_by(version)
        .held()
        .into_iter()
        .flatten()
        .filter(|id| !before.contains(*id));
    let written = first_row..rows.len() as RowId;
    let row = |id: RowId| {
        rows.get(id)
            .map(std::borrow::Cow::Borrowed)
            .ok_or_else(|| crate::error::corrupt(format!("row {id} of this commit is frozen")))
    };
    let (mut upserted, mut deleted) = (0, 0);
    // Counts do not depend on the order the rows are listed in.
    let listed = changes::Listing::Any;
    for (t, _) in changes::commit_changes(mode, version, retired, written, row, listed)? {
        match t {
            changes::ChangeType::Insert | changes::ChangeType::UpdatePostimage => upserted += 1,
            changes::ChangeType::Delete => deleted += 1,
            changes::ChangeType::UpdatePreimage => {}
        }
    }
    Ok((upserted, deleted))
}

/// The state of `key`, created (with the next number, and listed by it in `list` when the list
/// holds every key) if new.
fn key_state<'a>(
    keys: &'a mut BTreeMap<Bytes, KeyState>,
    (list, numbered): (&mut Vec<Bytes>, &mut u32),
    key: &Bytes,
) -> &'a mut KeyState {
    keys.entry(key.clone()).or_insert_with(|| {
        let no = *numbered;
        if list.len() == no as usize {
            list.push(key.clone());
        }
        *numbered += 1;
        KeyState {
            no,
            ..Default::default()
        }
    })
}
