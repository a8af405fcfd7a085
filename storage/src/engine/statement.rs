//! DML statements as events (docs/SEMANTICS.md §2.4): a statement says what a key's business
//! timeline shows over a range, and becomes the events that make the fold show it. Those events
//! are logged like a feed's and replayed like them, so a table stays a function of its log.
//!
//! A [`Patch`] over `[from, to)` writes, marked [`Origin::Statement`] (which replaces any event
//! with the same identity that came before it):
//!
//! - at `from`, and at every sequence of the key's events inside the range, the patch's row (an
//!   upsert of the whole row, or a delete);
//! - at `to`, unless an event there already sets the state from `to` on by itself, the row the
//!   timeline showed at `to` before (or a delete, if none): what follows the range stays as it was.
//!
//! SCD TYPE 1 has no business range: its patch takes effect at the key's latest sequence (or at
//! the latest truncate, or below every sequence for a key with no events), so later events of the
//! feed still win and late ones do not.

use std::collections::BTreeMap;
use std::ops::Bound;

use super::fold::{Bytes, Event, EventKind, Limit, Origin};
use super::{Incoming, KeyState, TableState};
use crate::error::Result;
use crate::flow::StoredAs;
use crate::value::Row;

/// What a patch does over its range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Edit {
    /// Shows the row where the key shows nothing yet: overlapping one of the key's versions (SCD1:
    /// a key with a row) is refused.
    Insert,
    /// Shows the row, whatever was there.
    Write,
    /// Shows no row.
    Remove,
}

/// One change a statement makes to one key.
#[derive(Clone, Debug)]
pub(crate) struct Patch {
    pub key: Bytes,
    /// Business range `[from, to)`: encoded sequences, `to` `None` for an open end. SCD TYPE 1
    /// ignores both.
    pub from: Bytes,
    pub to: Option<Bytes>,
    /// The whole row (output columns); a removal's row is only logged.
    pub row: Row,
    pub edit: Edit,
}

/// A statement's events, or why it cannot be applied.
pub(crate) enum Planned {
    Events(Vec<Incoming>),
    /// This many [`Edit::Insert`] patches overlap a version of their key, or each other.
    Overlaps(usize),
}

/// The byte that places a statement's SCD TYPE 1 event after a truncate at the same sequence.
const AFTER: u8 = 0x01;

impl TableState {
    /// The events that apply `patches` (system sequence `sys`: empty but for bitemporal tables).
    /// Keys the patches touch are brought back from their pages first. An error comes from
    /// reading a page.
    pub fn statement_events(&mut self, mut patches: Vec<Patch>, sys: &Bytes) -> Result<Planned> {
        patches.sort_by(|a, b| (&a.key, &a.from).cmp(&(&b.key, &b.from)));
        let width = self.types.len();
        let mode = self.schema.mode;
        let mut out = Vec::new();
        let mut overlaps = 0;
        for group in patches.chunk_by(|a, b| a.key == b.key) {
            let key = &group[0].key;
            if let Some(ks) = self.keys.get_mut(key) {
                // A thawed key's head must be rewritten: its pages are freed.
                self.dirty.add(key);
                ks.thaw(key, &mut self.rows, &mut self.pages, width)?;
            }
            let empty = KeyState::default();
            let ks = self.keys.get(key).unwrap_or(&empty);
            let mut events: BTreeMap<Bytes, Event> = BTreeMap::new();
            if mode == StoredAs::Scd1 {
                let at = self.scd1_point(ks);
                let mut has_row = ks.timeline.values().any(|v| v.end.is_none());
                for p in group {
                    // An insert of a key that has a row, or that the statement inserts twice.
                    if p.edit == Edit::Insert && has_row {
                        overlaps += 1;
                        continue;
                    }
                    has_row = p.edit != Edit::Remove;
                    events.insert(at.clone(), statement_event(p));
                }
            } else {
                overlaps += insert_overlaps(ks, group);
                if overlaps > 0 {
                    continue;
                }
                // What follows each range first, so that a range starting where another ends
                // replaces it.
                for p in group {
                    if let Some(to) = &p.to {
                        if let Some(ev) = self.restore_at(ks, to) {
                            events.entry(to.clone()).or_insert(ev);
                        }
                    }
                }
                for p in group {
                    let ev = statement_event(p);
                    let upper = match &p.to {
                        Some(t) => Bound::Excluded(&t[..]),
                        None => Bound::Unbounded,
                    };
                    for (m, _) in ks
                        .events
                        .range::<[u8], _>((Bound::Excluded(&p.from[..]), upper))
                    {
                        events.insert(m.clone(), ev.clone());
                    }
                    events.insert(p.from.clone(), ev);
                }
            }
            out.extend(events.into_iter().map(|(seq, event)| Incoming {
                key: key.clone(),
                seq,
                sys: sys.clone(),
                event,
            }));
        }
        if overlaps > 0 {
            return Ok(Planned::Overlaps(overlaps));
        }
        Ok(Planned::Events(out))
    }

    /// Where an SCD TYPE 1 statement takes effect on `ks`: its latest sequence, unless a truncate
    /// came later (then just after that truncate); below every sequence for a key with none.
    fn scd1_point(&self, ks: &KeyState) -> Bytes {
        let last = ks.events.last_key_value().map(|(s, _)| s);
        match (last, self.truncates.last()) {
            (Some(s), Some(t)) if t[..] < s[..] => s.clone(),
            (Some(s), None) => s.clone(),
            (_, Some(t)) => {
                let mut after = t.to_vec();
                after.push(AFTER);
                after.into()
            }
            // An encoded NULL sorts below every sequence a feed can have.
            (None, None) => Bytes::from(&[0u8][..]),
        }
    }

    /// The event at `to` that keeps the timeline from `to` on as it is now, if the key's own event
    /// there does not already.
    fn restore_at(&self, ks: &KeyState, to: &Bytes) -> Option<Event> {
        let own = ks.events.get(to).and_then(|c| Limit::None.effective(c));
        if own.is_some_and(|e| self.sets_whole_state(e)) {
            return None;
        }
        let shown = ks
            .timeline
            .range::<[u8], _>((Bound::Unbounded, Bound::Included(&to[..])))
            .next_back()
            .filter(|(_, v)| v.end.as_deref().is_none_or(|e| e > &to[..]))
            .map(|(_, v)| v.values.clone());
        Some(match shown {
            Some(values) => Event {
                kind: EventKind::Upsert,
                values,
                update: None,
                origin: Origin::Statement,
            },
            None => Event {
                kind: EventKind::Delete,
                values: vec![crate::value::Value::Null; self.types.len()].into(),
                update: None,
                origin: Origin::Statement,
            },
        })
    }

    /// Whether `e` gives the state after it without merging with the state before it.
    fn sets_whole_state(&self, e: &Event) -> bool {
        match e.kind {
            EventKind::Delete => true,
            EventKind::Upsert => {
                e.update.is_none()
                    && (e.origin == Origin::Statement
                        || !e
                            .values
                            .iter()
                            .zip(&self.ignore_null)
                            .any(|(v, &ig)| ig && v.is_null()))
            }
        }
    }
}

fn statement_event(p: &Patch) -> Event {
    Event {
        kind: if p.edit == Edit::Remove {
            EventKind::Delete
        } else {
            EventKind::Upsert
        },
        values: p.row.clone(),
        update: None,
        origin: Origin::Statement,
    }
}

/// How many of `group`'s inserts overlap a version of the key, or an earlier insert of the group.
fn insert_overlaps(ks: &KeyState, group: &[Patch]) -> usize {
    let overlap = |a: &Bytes, a_end: &Option<Bytes>, b: &Bytes, b_end: &Option<Bytes>| {
        a_end.as_ref().is_none_or(|e| e[..] > b[..]) && b_end.as_ref().is_none_or(|e| e[..] > a[..])
    };
    let mut n = 0;
    for (i, p) in group.iter().enumerate() {
        if p.edit != Edit::Insert {
            continue;
        }
        let with_version = ks
            .timeline
            .iter()
            .any(|(s, v)| overlap(&p.from, &p.to, s, &v.end));
        let with_earlier = group[..i]
            .iter()
            .any(|q| q.edit == Edit::Insert && overlap(&p.from, &p.to, &q.from, &q.to));
        if with_version || with_earlier {
            n += 1;
        }
    }
    n
}
