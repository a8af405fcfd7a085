//! The business-time fold of docs/SEMANTICS.md §4–§5, made incremental.
//!
//! A key's *timeline* is the result of folding its events in sequence order: a map from version
//! start to [`Version`] (final values, end). SCD TYPE 1 uses the same fold with no tracked columns
//! (every upsert changes the open version in place), and keeps only the open version as its row.
//!
//! [`refold`] brings a timeline up to date after the events at some sequences changed. It restarts
//! at the version that was open just before the first change, whose starting state is known from the
//! timeline itself (the final values of the version it directly follows), and stops at the first
//! later version start where the new fold state equals the old one: from there on nothing can differ.
//! So a late event costs a logarithmic search plus the versions it really changes, and an event newer
//! than all others costs O(1) work beyond the search.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

use crate::bytes::Encoded;
use crate::keycodec::cmp_encoded;
use crate::value::{Row, Value};

pub(crate) use crate::record::{Bytes, Event, EventKind, Origin, RowId};

/// All events of one key: per sequence, the candidates sorted by system sequence (one candidate with
/// an empty system sequence for SCD1/SCD2).
pub(crate) type EventMap = BTreeMap<Bytes, Candidates>;

/// The candidates at one sequence; almost always exactly one, kept inline.
pub(crate) type Candidates = smallvec::SmallVec<[(Bytes, Event); 1]>;

/// Which candidate counts at a sequence: the one with the greatest system sequence within the limit.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Limit<'a> {
    /// The latest candidate.
    None,
    /// System sequence `<= t`.
    UpTo(&'a [u8]),
}

impl Limit<'_> {
    pub fn effective<'e>(&self, cands: &'e [(Bytes, Event)]) -> Option<&'e Event> {
        let ok = |s: &[u8]| match self {
            Limit::None => true,
            Limit::UpTo(t) => s <= *t,
        };
        cands.iter().rev().find(|(s, _)| ok(s)).map(|(_, e)| e)
    }
}

/// One version of a key's business timeline.
#[derive(Clone, Debug)]
pub(crate) struct Version {
    pub values: Row,
    pub end: Option<Bytes>,
    /// The target row that shows this version now, if any.
    pub row: Option<RowId>,
}

impl Version {
    /// A version no row shows yet.
    pub fn unshown(values: Row, end: Option<Bytes>) -> Self {
        Version {
            values,
            end,
            row: None,
        }
    }

    pub fn same_segment(&self, other: &Version) -> bool {
        self.end == other.end
            && (std::sync::Arc::ptr_eq(&self.values, &other.values)
                || self.values[..] == other.values[..])
    }
}

pub(crate) type Timeline = BTreeMap<Bytes, Version>;

/// How upserts merge with the previous state (docs/SEMANTICS.md §4) and what opens a version (docs/SEMANTICS.md §5).
pub(crate) struct FoldRules<'a> {
    pub tracked: &'a [bool],
    pub ignore_null: &'a [bool],
    pub any_ignore_null: bool,
}

impl FoldRules<'_> {
    fn merge(&self, prev: Option<&Row>, ev: &Event) -> Row {
        if ev.origin == Origin::Statement {
            // A statement writes the whole row, NULLs included.
            return ev.values.clone();
        }
        if let Some(cols) = &ev.update {
            // COLUMNS TO UPDATE: listed columns come from the event, the others stay.
            let mut out: Vec<Value> = match prev {
                Some(p) => p.to_vec(),
                None => vec![Value::Null; ev.values.len()],
            };
            for &c in cols.iter() {
                out[c as usize] = ev.values[c as usize].clone();
            }
            return out.into();
        }
        if !self.any_ignore_null {
            return ev.values.clone();
        }
        let needs = ev
            .values
            .iter()
            .zip(self.ignore_null)
            .any(|(v, &ig)| ig && v.is_null());
        match (needs, prev) {
            (true, Some(p)) => ev
                .values
                .iter()
                .zip(p.iter())
                .zip(self.ignore_null)
                .map(|((v, pv), &ig)| {
                    if ig && v.is_null() {
                        pv.clone()
                    } else {
                        v.clone()
                    }
                })
                .collect::<Vec<_>>()
                .into(),
            _ => ev.values.clone(),
        }
    }

    fn same_tracked(&self, a: &Row, b: &Row) -> bool {
        std::sync::Arc::ptr_eq(a, b)
            || a.iter()
                .zip(b.iter())
                .zip(self.tracked)
                .all(|((x, y), &t)| !t || x == y)
    }
}

/// The changes a refold made to a timeline, net over several refolds.
#[derive(Default, Debug)]
pub(crate) struct TimelineDiff {
    /// Versions that were in the timeline before and are gone (with their rows).
    pub removed: BTreeMap<Bytes, Version>,
    /// Starts of versions that are new (their `row` is `None`).
    pub added: BTreeSet<Bytes>,
}

impl TimelineDiff {
    pub fn is_empty(&self) -> bool {
        self.removed.is_empty() && self.added.is_empty()
    }
}

enum Step<'e> {
    Upsert(&'e Event),
    Delete,
}

/// What a refold reads besides the key's timeline and events.
pub(crate) struct FoldInput<'a, 'r> {
    /// The table's truncates (SCD1): deletes for every key, after the key's own event at the
    /// same sequence.
    pub truncates: &'a BTreeSet<Bytes>,
    /// Which candidate of a sequence counts.
    pub limit: Limit<'a>,
    pub rules: &'a FoldRules<'r>,
}

/// What changed at one sequence: the events there were inserted, replaced, or their effective
/// candidate changed under the limit.
pub(crate) struct Change<'a> {
    pub at: &'a [u8],
    /// `at` is a sequence the key did not have before and no event follows it: the open version
    /// then simply carries on.
    pub appended: bool,
}

/// Refolds `tl` after the events of `events` at `change.at` changed, adding what changed to
/// `diff`.
pub(crate) fn refold(
    tl: &mut Timeline,
    events: &EventMap,
    input: &FoldInput<'_, '_>,
    change: Change<'_>,
    diff: &mut TimelineDiff,
) {
    let FoldInput {
        truncates,
        limit,
        rules,
    } = input;
    let (lo, hi) = (change.at, change.at);
    let limit = *limit;
    if change.appended && truncates.last().is_none_or(|t| cmp_encoded(t, lo).is_lt()) {
        append(tl, events, limit, rules, lo, diff);
        return;
    }
    // The state just before `lo`: the version open then (start < lo <= end) and the merge base.
    let open_before = tl
        .range::<Encoded, _>((Bound::Unbounded, Bound::Excluded(Encoded::new(lo))))
        .next_back()
        .filter(|(_, v)| v.end.as_deref().is_none_or(|e| cmp_encoded(e, lo).is_ge()));
    // The refold starts at that version (whose merge base is the version it directly follows),
    // or at `lo` itself when no version is open just before it.
    let (region_start, mut base): (Bytes, Option<Row>) = match open_before {
        Some((s, _)) => {
            let base = tl
                .range::<Encoded, _>((Bound::Unbounded, Bound::Excluded(Encoded::new(s))))
                .next_back()
                .filter(|(_, p)| p.end.as_ref() == Some(s))
                .map(|(_, p)| p.values.clone());
            (s.clone(), base)
        }
        None => (lo.into(), None),
    };
    let mut open: Option<(Bytes, Row)> = None;
    let mut new_versions: Vec<(Bytes, Version)> = Vec::new();
    let mut converged_at: Option<Bytes> = None;
    let mut ev_iter = events
        .range::<Encoded, _>((
            Bound::Included(Encoded::new(&region_start)),
            Bound::Unbounded,
        ))
        .peekable();
    let mut tr_iter = truncates
        .range::<Encoded, _>((
            Bound::Included(Encoded::new(&region_start)),
            Bound::Unbounded,
        ))
        .peekable();
    loop {
        // Next step in sequence order; at equal sequences the key's own event comes first.
        let take_event = match (ev_iter.peek(), tr_iter.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some((e, _)), Some(t)) => e <= t,
        };
        let (x, step): (&Bytes, Option<Step<'_>>) = if take_event {
            let (x, cands) = ev_iter.next().expect("peeked");
            (
                x,
                limit.effective(cands).map(|e| match e.kind {
                    EventKind::Upsert => Step::Upsert(e),
                    EventKind::Delete => Step::Delete,
                }),
            )
        } else {
            (tr_iter.next().expect("peeked"), Some(Step::Delete))
        };
        let Some(step) = step else { continue };
        if cmp_encoded(x, hi).is_gt() && tl.contains_key(x) {
            let old_pre = tl
                .range::<Encoded, _>((Bound::Unbounded, Bound::Excluded(Encoded::new(x))))
                .next_back()
                .filter(|(_, p)| p.end.as_ref() == Some(x))
                .map(|(_, p)| &p.values);
            let new_pre = open.as_ref().map(|(_, v)| v);
            let same = match (old_pre, new_pre) {
                (None, None) => true,
                (Some(a), Some(b)) => std::sync::Arc::ptr_eq(a, b) || a[..] == b[..],
                _ => false,
            };
            if same {
                if let Some((s, v)) = open.take() {
                    new_versions.push((s, Version::unshown(v, Some(x.clone()))));
                }
                converged_at = Some(x.clone());
                break;
            }
        }
        match step {
            Step::Delete => {
                if let Some((s, v)) = open.take() {
                    new_versions.push((s, Version::unshown(v, Some(x.clone()))));
                }
                base = None;
            }
            Step::Upsert(ev) => {
                let vals = rules.merge(base.as_ref(), ev);
                open = match open.take() {
                    Some((s, ov)) if rules.same_tracked(&ov, &vals) => Some((s, vals.clone())),
                    Some((s, ov)) => {
                        new_versions.push((s, Version::unshown(ov, Some(x.clone()))));
                        Some((x.clone(), vals.clone()))
                    }
                    None => Some((x.clone(), vals.clone())),
                };
                base = Some(vals);
            }
        }
    }
    if let Some((s, v)) = open.take() {
        new_versions.push((s, Version::unshown(v, None)));
    }

    // Replace the old versions of the region [region_start, converged_at) by the new ones, keeping
    // every version that came out the same (and its row).
    let upper = match &converged_at {
        Some(c) => Bound::Excluded(&c[..]),
        None => Bound::Unbounded,
    };
    let old_starts: Vec<Bytes> = tl
        .range::<Encoded, _>((
            Bound::Included(Encoded::new(&region_start)),
            upper.map(Encoded::new),
        ))
        .map(|(k, _)| k.clone())
        .collect();
    let mut new_iter = new_versions.into_iter().peekable();
    for s in old_starts {
        // New versions that start before this old one are additions.
        while let Some((ns, _)) = new_iter.peek() {
            if *ns >= s {
                break;
            }
            let (ns, nv) = new_iter.next().expect("peeked");
            insert_version(tl, ns, nv, diff);
        }
        let same = matches!(new_iter.peek(), Some((ns, nv)) if *ns == s && tl[&s].same_segment(nv));
        if same {
            let (_, nv) = new_iter.next().expect("peeked");
            // Same segment: keep the row; share the newest values allocation.
            let old = tl.get_mut(&s).expect("listed");
            old.values = nv.values;
        } else {
            let old = tl.remove(&s).expect("listed");
            if old.row.is_some() {
                diff.removed.insert(s.clone(), old);
            } else {
                diff.added.remove(&s);
            }
        }
    }
    for (ns, nv) in new_iter {
        insert_version(tl, ns, nv, diff);
    }
}

/// The fold step for an event after every other event of the key: only the last version can
/// change.
fn append(
    tl: &mut Timeline,
    events: &EventMap,
    limit: Limit<'_>,
    rules: &FoldRules<'_>,
    seq: &[u8],
    diff: &mut TimelineDiff,
) {
    let Some((x, cands)) = events.get_key_value(Encoded::new(seq)) else {
        return;
    };
    let Some(ev) = limit.effective(cands) else {
        return;
    };
    let open = tl
        .last_key_value()
        .filter(|(_, v)| v.end.is_none())
        .map(|(s, v)| (s.clone(), v.values.clone()));
    match (ev.kind, open) {
        (EventKind::Delete, None) => {}
        (EventKind::Delete, Some((start, values))) => {
            replace_version(tl, start, Version::unshown(values, Some(x.clone())), diff);
        }
        (EventKind::Upsert, None) => {
            let vals = rules.merge(None, ev);
            insert_version(tl, x.clone(), Version::unshown(vals, None), diff);
        }
        (EventKind::Upsert, Some((start, values))) => {
            let vals = rules.merge(Some(&values), ev);
            if rules.same_tracked(&values, &vals) {
                if vals[..] != values[..] {
                    replace_version(tl, start, Version::unshown(vals, None), diff);
                }
            } else {
                replace_version(tl, start, Version::unshown(values, Some(x.clone())), diff);
                insert_version(tl, x.clone(), Version::unshown(vals, None), diff);
            }
        }
    }
}

/// Replaces the version at `start` by `v`: what removing it and then [`insert_version`] do,
/// in its slot (one search of the timeline, not two: the end of a key's timeline is replaced
/// at nearly every event a commit appends).
fn replace_version(tl: &mut Timeline, start: Bytes, mut v: Version, diff: &mut TimelineDiff) {
    let Some(slot) = version_mut(tl, &start) else {
        return insert_version(tl, start, v, diff);
    };
    // The version a row showed comes back unchanged with that row; else it is removed.
    let back = match slot.row {
        Some(_) if slot.same_segment(&v) => Some(slot.row),
        Some(_) => None,
        None => {
            diff.added.remove(&start);
            (diff.removed.get(&start))
                .filter(|p| p.same_segment(&v))
                .map(|p| p.row)
        }
    };
    match back {
        Some(row) => {
            diff.removed.remove(&start);
            v.row = row;
            *slot = v;
        }
        None => {
            let old = std::mem::replace(slot, v);
            diff.added.insert(start.clone());
            if old.row.is_some() {
                diff.removed.insert(start, old);
            }
        }
    }
}

/// The version at `start`, found without a search of the timeline when it is one of the last
/// two: where the events a commit appends change it, at nearly every event (a version appended,
/// and the one before it, which it closed).
pub(crate) fn version_mut<'t>(tl: &'t mut Timeline, start: &Bytes) -> Option<&'t mut Version> {
    match tl.iter().rev().take(2).position(|(s, _)| s == start) {
        Some(from_end) => tl.values_mut().nth_back(from_end),
        None => tl.get_mut(start),
    }
}

fn insert_version(tl: &mut Timeline, start: Bytes, mut v: Version, diff: &mut TimelineDiff) {
    // A version removed earlier in this commit that comes back unchanged keeps its row.
    if let Some(old) = diff.removed.get(&start) {
        if old.same_segment(&v) {
            let old = diff.removed.remove(&start).expect("present");
            v.row = old.row;
            tl.insert(start, v);
            return;
        }
    }
    diff.added.insert(start.clone());
    tl.insert(start, v);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_is_found_at_the_end_of_a_timeline_and_anywhere_in_it() {
        let start = |i: u8| Bytes::from(&[i][..]);
        let mut tl = Timeline::new();
        for i in (0..40).step_by(2) {
            tl.insert(
                start(i),
                Version::unshown(Row::from(Vec::new()), Some(start(i + 2))),
            );
        }
        // The last, the one before it, one in the middle, the first; and starts not there.
        for i in [38, 36, 20, 0] {
            let v = version_mut(&mut tl, &start(i)).expect("there");
            assert_eq!(v.end, Some(start(i + 2)));
            v.row = Some(RowId::from(i));
        }
        for i in [39, 37, 1, 41] {
            assert!(version_mut(&mut tl, &start(i)).is_none());
        }
        let shown: Vec<u8> = tl
            .iter()
            .filter(|(_, v)| v.row.is_some())
            .map(|(s, _)| s[0])
            .collect();
        assert_eq!(shown, vec![0, 20, 36, 38]);
        assert!(version_mut(&mut Timeline::new(), &start(0)).is_none());
    }
}
