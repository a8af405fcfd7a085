//! The apply rules of SCD TYPE 1 and SCD TYPE 2 (docs/SEMANTICS.md): a key's events are inserted
//! one by one, each refolding the part of the business timeline it changes; the versions the
//! refolds removed retire their rows, the new ones get rows (SCD1 shows only the open version).

use std::collections::BTreeSet;

use super::fold::{refold, Bytes, Change, FoldInput, Limit, TimelineDiff};
use super::key_commit::KeyCommit;
use super::Incoming;
use crate::flow::StoredAs;

/// Applies the key's events of one commit, in sequence order.
pub(super) fn apply_key(
    mut c: KeyCommit<'_, '_>,
    mode: StoredAs,
    truncates: &BTreeSet<Bytes>,
    mut evs: Vec<Incoming>,
) {
    evs.sort_by(|a, b| a.seq.cmp(&b.seq));
    let input = FoldInput {
        truncates,
        limit: Limit::None,
        rules: c.rules,
    };
    let mut diff = TimelineDiff::default();
    for inc in evs {
        let seq = inc.seq.clone();
        if let Some(appended) = c.insert(inc) {
            let change = Change { at: &seq, appended };
            refold(&mut c.ks.timeline, &c.ks.events, &input, change, &mut diff);
        }
    }
    emit_rows(&mut c, mode, diff);
}

/// Retires the rows of the versions `diff` removed and writes rows for those it added.
pub(super) fn emit_rows(c: &mut KeyCommit<'_, '_>, mode: StoredAs, diff: TimelineDiff) {
    if diff.is_empty() {
        return;
    }
    c.forget_lookup();
    for (_, v) in diff.removed {
        if let Some(r) = v.row {
            c.retire(r);
        }
    }
    let scd2 = mode == StoredAs::Scd2;
    for start in diff.added {
        let open = c.ks.timeline.get(&start).is_some_and(|v| v.end.is_none());
        if !scd2 && !open {
            continue; // SCD1 shows only the open version.
        }
        c.show_version(&start, scd2, None);
    }
}
