//! The apply rules of BITEMPORAL tables (docs/SEMANTICS.md): events newer on system time than
//! all of a key's extend its history at the end, a step per system time; anything else replays
//! the key's system history from the earliest system time it touches, keeping the rows that come
//! out the same and retiring the rest. Duplicates and events that lose a conflict change nothing
//! and do not count in that choice ([`first_change`]).

use std::collections::{BTreeMap, BTreeSet};

use foldhash::HashMap;

use super::fold::{
    refold, Bytes, Change, FoldInput, Limit, RowId, Timeline, TimelineDiff, Version,
};
use super::key_commit::KeyCommit;
use super::{Incoming, StoredRow};
use crate::value::Row;

/// A row computed by a system-time replay: (start, values, end, system start, system end).
type NewRow = (Bytes, Row, Option<Bytes>, Bytes, Option<Bytes>);

/// Marks a timeline version as "exists at the previous change point" during a replay.
const MARK: RowId = RowId::MAX;

/// BITEMPORAL: events newer on system time than all of the key's extend its history at the end;
/// anything else replays the key's system history from the earliest system time it touches.
pub(super) fn apply_key(mut c: KeyCommit<'_, '_>, mut evs: Vec<Incoming>) {
    c.forget_lookup();
    evs.sort_by(|a, b| (&a.sys, &a.seq).cmp(&(&b.sys, &b.seq)));
    let Some(t_min) = first_change(&c, &evs) else {
        // Duplicates and lost conflicts only: counted, nothing changes.
        for inc in evs {
            c.insert(inc);
        }
        return;
    };
    let in_order = c.ks.max_sys.as_ref().is_none_or(|m| t_min[..] > m[..]);
    if in_order {
        let no_truncates = BTreeSet::new();
        let input = FoldInput {
            truncates: &no_truncates,
            limit: Limit::None,
            rules: c.rules,
        };
        let mut evs = evs.into_iter().peekable();
        while let Some(first) = evs.peek() {
            let t = first.sys.clone();
            let mut diff = TimelineDiff::default();
            while let Some(inc) = evs.next_if(|e| e.sys == t) {
                let seq = inc.seq.clone();
                if let Some(appended) = c.insert(inc) {
                    let change = Change { at: &seq, appended };
                    refold(&mut c.ks.timeline, &c.ks.events, &input, change, &mut diff);
                }
            }
            emit_step(&mut c, diff, &t);
        }
    } else {
        let mut changed = false;
        for inc in evs {
            changed |= c.insert(inc).is_some();
        }
        if changed {
            replay_system_history(&mut c, &t_min);
        }
    }
}

/// The system time of the first of `evs` (sorted by system time, then sequence) that changes the
/// key's events, if any does. A duplicate, or an event that loses a conflict, changes nothing and
/// is not logged: deciding the path on the events that change something makes a commit and a
/// replay of its log take the same one, and number the key's new rows alike (a duplicate older
/// on system time than the key sent its commit down the replay path, and its replay, which never
/// sees it, down the appending one).
fn first_change(c: &KeyCommit<'_, '_>, evs: &[Incoming]) -> Option<Bytes> {
    let known = |e: &Incoming| {
        let cands = c.ks.events.get(&e.seq)?;
        let i = cands
            .binary_search_by(|(s, _)| s[..].cmp(&e.sys[..]))
            .ok()?;
        Some(&cands[i].1)
    };
    // Each event before the first that changes anything left the events as they were, so each
    // is judged against the key's events as they are.
    evs.iter()
        .find(|e| match known(e) {
            None => true,
            Some(cur) => !cur.same_as(&e.event) && e.event.beats(cur),
        })
        .map(|e| e.sys.clone())
}

/// The business timeline changed at system time `t` (newer than every row's system start).
fn emit_step(c: &mut KeyCommit<'_, '_>, diff: TimelineDiff, t: &Bytes) {
    for (start, v) in diff.removed {
        let r = v.row.expect("removed versions have rows");
        if c.rows[r].added == c.version {
            // Written by this very commit and never visible: close it in place.
            c.rows.get_mut(r).sys_end = Some(t.clone());
            continue;
        }
        c.retire(r);
        let old = &c.rows[r];
        let closed = StoredRow {
            key: c.key.clone(),
            values: old.values.clone(),
            start: Some(start),
            end: old.end.clone(),
            sys_start: old.sys_start.clone(),
            sys_end: Some(t.clone()),
            added: c.version,
            retired: None,
        };
        c.push_row(closed);
    }
    for start in diff.added {
        c.show_version(&start, true, Some(t.clone()));
    }
}

/// Recomputes the key's rows whose system interval reaches `t` or later, and replaces those
/// that differ.
fn replay_system_history(c: &mut KeyCommit<'_, '_>, t: &Bytes) {
    let no_truncates = BTreeSet::new();
    let rows = &c.rows;
    let ks = &*c.ks;
    // Old rows the replay may change, and when each segment alive just before `t` opened.
    // Frozen rows are never in the region: a key is thawed before a replay from a system time
    // its frozen rows or events reach (see `cold`).
    let region: Vec<RowId> = ks
        .rows
        .iter()
        .copied()
        .filter(|&r| !rows.is_retired(r) && rows[r].sys_end.as_deref().is_none_or(|e| e >= &t[..]))
        .collect();
    // The rows alive just before `t` are the business timeline then: no refold of the events
    // known before `t` is needed.
    let mut opened: HashMap<Bytes, Bytes> = HashMap::default();
    let mut tl = Timeline::new();
    for &r in &region {
        let row = &rows[r];
        let ss = row.sys_start.as_ref().expect("bitemporal row");
        if ss[..] < t[..] {
            let start = row.start.clone().expect("bitemporal row");
            opened.insert(start.clone(), ss.clone());
            tl.insert(
                start,
                Version {
                    values: row.values.clone(),
                    end: row.end.clone(),
                    row: Some(MARK),
                },
            );
        }
    }
    let mut points: BTreeMap<Bytes, Vec<Bytes>> = BTreeMap::new();
    for (seq, cands) in &ks.events {
        for (s, _) in cands {
            if s[..] >= t[..] {
                points.entry(s.clone()).or_default().push(seq.clone());
            }
        }
    }
    // (start, values, end, sys_start, sys_end)
    let mut new_rows: Vec<NewRow> = Vec::new();
    for (ti, seqs) in points {
        let mut diff = TimelineDiff::default();
        let input = FoldInput {
            truncates: &no_truncates,
            limit: Limit::UpTo(&ti),
            rules: c.rules,
        };
        for seq in seqs {
            let change = Change {
                at: &seq,
                appended: false,
            };
            refold(&mut tl, &ks.events, &input, change, &mut diff);
        }
        for (start, v) in diff.removed {
            let since = opened.remove(&start).unwrap_or_else(|| ti.clone());
            if since < ti {
                new_rows.push((start, v.values, v.end, since, Some(ti.clone())));
            }
        }
        for start in diff.added {
            opened.insert(start.clone(), ti.clone());
            tl.get_mut(&start).expect("added").row = Some(MARK);
        }
    }
    for (start, v) in tl.iter_mut() {
        v.row = None;
        let since = opened.get(start).cloned().unwrap_or_else(|| t.clone());
        new_rows.push((start.clone(), v.values.clone(), v.end.clone(), since, None));
    }
    // Keep old rows that came out the same; retire the rest; add the new ones.
    let mut old_by_id: HashMap<(Bytes, Bytes), RowId> = HashMap::default();
    for &r in &region {
        let row = &rows[r];
        old_by_id.insert(
            (
                row.start.clone().expect("bt"),
                row.sys_start.clone().expect("bt"),
            ),
            r,
        );
    }
    for (start, values, end, since, until) in new_rows {
        let kept = old_by_id
            .get(&(start.clone(), since.clone()))
            .copied()
            .filter(|&r| {
                let row = &c.rows[r];
                row.end == end && row.sys_end == until && row.values[..] == values[..]
            });
        let id = match kept {
            Some(r) => {
                old_by_id.remove(&(start.clone(), since.clone()));
                r
            }
            None => c.push_row(StoredRow {
                key: c.key.clone(),
                values,
                start: Some(start.clone()),
                end,
                sys_start: Some(since),
                sys_end: until.clone(),
                added: c.version,
                retired: None,
            }),
        };
        if until.is_none() {
            tl.get_mut(&start).expect("current version").row = Some(id);
        }
    }
    for (_, r) in old_by_id {
        c.retire(r);
    }
    c.ks.timeline = tl;
}
