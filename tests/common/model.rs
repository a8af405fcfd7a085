//! A reference model of docs/SEMANTICS.md §3–§6, written for clarity and independently of the engine: every
//! call recomputes the whole table from the set of events, the slow and obvious way.

use std::cmp::Ordering;

use asof::{StoredAs, Value};

#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    Upsert,
    Delete,
    Truncate,
}

#[derive(Clone, Debug)]
pub struct MEvent {
    pub key: Vec<Value>,
    pub seq: Vec<Value>,
    /// System sequence (bitemporal flows with SYSTEM SEQUENCE BY).
    pub sys: Option<Value>,
    pub op: Op,
    /// Output column values.
    pub values: Vec<Value>,
    /// COLUMNS TO UPDATE: positions of the output columns written (keys included); None = all.
    pub update: Option<Vec<u32>>,
}

pub struct MFlow {
    pub mode: StoredAs,
    pub tracked: Vec<bool>,
    pub ignore_null: Vec<bool>,
}

/// A target row: values, and the temporal columns as values.
#[derive(Clone, Debug, PartialEq)]
pub struct MRow {
    pub values: Vec<Value>,
    pub start: Option<Vec<Value>>,
    pub end: Option<Vec<Value>>,
    pub sys_start: Option<Value>,
    pub sys_end: Option<Value>,
}

impl MRow {
    /// A total order for comparing row sets.
    pub fn sort_key(&self) -> String {
        format!("{self:?}")
    }
}

fn cmp_vals(a: &[Value], b: &[Value]) -> Ordering {
    asof_storage_cmp(a, b)
}

fn asof_storage_cmp(a: &[Value], b: &[Value]) -> Ordering {
    for (x, y) in a.iter().zip(b) {
        let o = x.canonical_cmp(y);
        if o != Ordering::Equal {
            return o;
        }
    }
    a.len().cmp(&b.len())
}

/// docs/SEMANTICS.md §3: among events with one identity, a delete wins; otherwise the greater values.
fn winner<'a>(a: &'a MEvent, b: &'a MEvent) -> &'a MEvent {
    let rank = |e: &MEvent| matches!(e.op, Op::Delete) as u8;
    match rank(a).cmp(&rank(b)) {
        Ordering::Greater => a,
        Ordering::Less => b,
        Ordering::Equal => match cmp_vals(&a.values, &b.values) {
            Ordering::Greater => a,
            Ordering::Less => b,
            Ordering::Equal => {
                if a.update >= b.update {
                    a
                } else {
                    b
                }
            }
        },
    }
}

fn resolve(events: &[MEvent], with_sys: bool) -> Vec<MEvent> {
    let mut out: Vec<MEvent> = Vec::new();
    for e in events.iter().filter(|e| e.op != Op::Truncate) {
        let same = |x: &MEvent| x.key == e.key && x.seq == e.seq && (!with_sys || x.sys == e.sys);
        match out.iter().position(same) {
            Some(i) => out[i] = winner(&out[i], e).clone(),
            None => out.push(e.clone()),
        }
    }
    out
}

fn merge(flow: &MFlow, prev: Option<&Vec<Value>>, e: &MEvent) -> Vec<Value> {
    if let Some(cols) = &e.update {
        let mut v = prev
            .cloned()
            .unwrap_or_else(|| vec![Value::Null; e.values.len()]);
        for &c in cols {
            v[c as usize] = e.values[c as usize].clone();
        }
        return v;
    }
    e.values
        .iter()
        .enumerate()
        .map(|(i, x)| {
            if flow.ignore_null[i] && x.is_null() {
                prev.map_or(Value::Null, |p| p[i].clone())
            } else {
                x.clone()
            }
        })
        .collect()
}

type Segment = (Vec<Value>, Vec<Value>, Option<Vec<Value>>);

/// docs/SEMANTICS.md §5 over one key's events (each a step at a sequence; `None` = delete), in sequence order.
fn fold(flow: &MFlow, steps: &[(Vec<Value>, Option<&MEvent>)]) -> Vec<Segment> {
    let mut out = Vec::new();
    let mut open: Option<(Vec<Value>, Vec<Value>)> = None; // (values, start)
    let mut prev: Option<Vec<Value>> = None;
    for (s, step) in steps {
        match step {
            None => {
                if let Some((v, st)) = open.take() {
                    out.push((v, st, Some(s.clone())));
                }
                prev = None;
            }
            Some(e) => {
                let vals = merge(flow, prev.as_ref(), e);
                let same_tracked = |a: &Vec<Value>| {
                    a.iter()
                        .zip(&vals)
                        .zip(&flow.tracked)
                        .all(|((x, y), &t)| !t || x == y)
                };
                open = match open.take() {
                    Some((v, st)) if same_tracked(&v) => Some((vals.clone(), st)),
                    Some((v, st)) => {
                        out.push((v, st, Some(s.clone())));
                        Some((vals.clone(), s.clone()))
                    }
                    None => Some((vals.clone(), s.clone())),
                };
                prev = Some(vals);
            }
        }
    }
    if let Some((v, st)) = open {
        out.push((v, st, None));
    }
    out
}

fn keys_of(events: &[MEvent]) -> Vec<Vec<Value>> {
    let mut keys: Vec<Vec<Value>> = Vec::new();
    for e in events {
        if !keys.contains(&e.key) {
            keys.push(e.key.clone());
        }
    }
    keys
}

/// The target table docs/SEMANTICS.md defines for this set of events.
pub fn model(flow: &MFlow, events: &[MEvent]) -> Vec<MRow> {
    let bt = flow.mode == StoredAs::Bitemporal;
    let resolved = resolve(events, bt);
    let mut truncates: Vec<Vec<Value>> = events
        .iter()
        .filter(|e| e.op == Op::Truncate)
        .map(|e| e.seq.clone())
        .collect();
    truncates.sort_by(|a, b| cmp_vals(a, b));
    truncates.dedup();
    let mut rows = Vec::new();
    for key in keys_of(&resolved) {
        let mine: Vec<&MEvent> = resolved.iter().filter(|e| e.key == key).collect();
        match flow.mode {
            StoredAs::Scd1 | StoredAs::Scd2 => {
                let mut steps: Vec<(Vec<Value>, u8, Option<&MEvent>)> = mine
                    .iter()
                    .map(|e| (e.seq.clone(), 0, (e.op == Op::Upsert).then_some(*e)))
                    .collect();
                if flow.mode == StoredAs::Scd1 {
                    // A truncate is a delete of every key, after the key's own event at its sequence.
                    steps.extend(truncates.iter().map(|t| (t.clone(), 1, None)));
                }
                steps.sort_by(|a, b| cmp_vals(&a.0, &b.0).then(a.1.cmp(&b.1)));
                let steps: Vec<_> = steps.into_iter().map(|(s, _, e)| (s, e)).collect();
                for (values, start, end) in fold(flow, &steps) {
                    if flow.mode == StoredAs::Scd1 {
                        if end.is_none() {
                            rows.push(MRow {
                                values,
                                start: None,
                                end: None,
                                sys_start: None,
                                sys_end: None,
                            });
                        }
                    } else {
                        rows.push(MRow {
                            values,
                            start: Some(start),
                            end,
                            sys_start: None,
                            sys_end: None,
                        });
                    }
                }
            }
            StoredAs::Bitemporal => {
                let mut times: Vec<Value> =
                    mine.iter().map(|e| e.sys.clone().expect("sys")).collect();
                times.sort_by(|a, b| a.canonical_cmp(b));
                times.dedup();
                let mut open: Vec<(Segment, Value)> = Vec::new();
                for t in &times {
                    // E(t): per sequence, the event with the greatest system time <= t.
                    let mut best: Vec<&MEvent> = Vec::new();
                    for e in mine.iter().filter(|e| {
                        e.sys.as_ref().expect("sys").canonical_cmp(t) != Ordering::Greater
                    }) {
                        match best.iter().position(|b| b.seq == e.seq) {
                            Some(i) => {
                                if e.sys
                                    .as_ref()
                                    .unwrap()
                                    .canonical_cmp(best[i].sys.as_ref().unwrap())
                                    == Ordering::Greater
                                {
                                    best[i] = e;
                                }
                            }
                            None => best.push(e),
                        }
                    }
                    best.sort_by(|a, b| cmp_vals(&a.seq, &b.seq));
                    let steps: Vec<_> = best
                        .iter()
                        .map(|e| (e.seq.clone(), (e.op == Op::Upsert).then_some(*e)))
                        .collect();
                    let segs = fold(flow, &steps);
                    let mut still = Vec::new();
                    for (seg, since) in open.drain(..) {
                        if segs.contains(&seg) {
                            still.push((seg, since));
                        } else {
                            rows.push(MRow {
                                values: seg.0,
                                start: Some(seg.1),
                                end: seg.2,
                                sys_start: Some(since),
                                sys_end: Some(t.clone()),
                            });
                        }
                    }
                    for seg in segs {
                        if !still.iter().any(|(s, _)| *s == seg) {
                            still.push((seg, t.clone()));
                        }
                    }
                    open = still;
                }
                for (seg, since) in open {
                    rows.push(MRow {
                        values: seg.0,
                        start: Some(seg.1),
                        end: seg.2,
                        sys_start: Some(since),
                        sys_end: None,
                    });
                }
            }
        }
    }
    rows.sort_by_key(MRow::sort_key);
    rows
}
