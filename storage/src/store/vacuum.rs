//! VACUUM: forgetting history older than a retention, with the retention check.

use std::collections::BTreeMap;

use super::chain::{self, put_commit, Link, Wrote};
use super::commit::{now_us, put_event_blocks, put_json, write_or_poison, CommitInfo};
use super::load::Load;
use super::pages;
use super::records::TOMBSTONE_GC_PROPERTY;
use super::records::{FULL_REFRESH, SOURCE_OFFSET};
use super::refresh::checkpoint_in;
use super::replay::{gc_secs_in, load_commits, replay_log, ReplayRange, VACUUM_BASE};
use super::Store;
use crate::error::{Error, Result};
use crate::format::keys::{self, key, parse_version};
use crate::kv::{KvStore, WriteBatch};

/// The table property that, set to `false`, lets VACUUM keep less than [`MIN_RETAIN`] of history.
pub const RETENTION_CHECK_PROPERTY: &str = "asof.vacuum.retentionCheck";

/// The table property that keeps a version readable: VACUUM refuses to remove it (or any later
/// one), so that the receipts that read it still verify.
pub const PINNED_VERSION_PROPERTY: &str = "asof.vacuum.pinnedVersion";

/// The shortest history [`Store::vacuum`] keeps unless told otherwise: seven days, as Delta Lake.
pub const MIN_RETAIN: std::time::Duration = std::time::Duration::from_secs(168 * 3600);

/// Whether VACUUM refuses to keep less than [`MIN_RETAIN`] of history.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RetentionCheck {
    /// Refuse, unless the table property [`RETENTION_CHECK_PROPERTY`] is `false`.
    Enforced,
    /// Keep whatever the caller asks, even nothing.
    Disabled,
}

/// What a VACUUM did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VacuumReport {
    /// The oldest version that can still be read (time travel, change feed).
    pub oldest_version: u64,
    /// Commit records removed.
    pub commits_removed: u64,
    /// Row versions dropped from the row store (retired before the oldest version kept).
    pub row_versions_removed: u64,
    /// Events in the log before, and in the compacted log after.
    pub events_before: u64,
    /// See `events_before`.
    pub events_after: u64,
    /// Bytes of the table's log (commit records and event blocks) before and after.
    pub bytes_before: u64,
    /// See `bytes_before`.
    pub bytes_after: u64,
}

impl Store {
    /// VACUUM: forgets the history older than `retain` (time travel and the change feed can no
    /// longer reach it) and frees what only that history used.
    ///
    /// The oldest version kept, `h`, is the one that was current `retain` ago. Commit records
    /// before it are deleted and commit `h` becomes the *base*: on replay, every event block up to
    /// it is applied as one commit at `h`, which gives the table at `h` exactly (docs/SEMANTICS.md §3: a table
    /// depends only on its set of events), so the row versions retired before `h` are never
    /// rebuilt. Event blocks before the last full refresh up to `h` are deleted; if a tombstone GC
    /// dropped events up to `h`, the blocks up to `h` are instead replaced by the event set the
    /// table held at `h`. The table is rebuilt from the new log; the current table and every
    /// version kept read exactly as before. The vacuum is itself a commit (operation `VACUUM`).
    ///
    /// A `retain` under [`MIN_RETAIN`] (seven days) is refused unless the table property
    /// [`RETENTION_CHECK_PROPERTY`] is `false`, as Delta Lake does: see [`Store::vacuum_with`].
    /// So is a VACUUM that would remove the version the property [`PINNED_VERSION_PROPERTY`] names.
    pub fn vacuum(&self, table: &str, retain: std::time::Duration) -> Result<VacuumReport> {
        self.vacuum_with(table, retain, RetentionCheck::Enforced)
    }

    /// [`Store::vacuum`], with the retention check [`RetentionCheck::Disabled`] for callers that
    /// mean to drop recent history whatever the table's properties say (tests, tools): then
    /// neither the retention nor a pinned version stops it.
    pub fn vacuum_with(
        &self,
        table: &str,
        retain: std::time::Duration,
        check: RetentionCheck,
    ) -> Result<VacuumReport> {
        let mut g = self.write_inner()?;
        let inner = &mut *g;
        // The table is rebuilt below: it is read whole first only when its records cannot say
        // how many row versions it has (reading it whole doubled a VACUUM's peak memory).
        let rows_before = inner.row_versions(table)?;
        let t = inner.tables.get(table).ok_or_else(|| Error::NotFound {
            kind: "table",
            name: table.to_string(),
        })?;
        let checked = t
            .properties
            .get(RETENTION_CHECK_PROPERTY)
            .is_none_or(|v| !v.trim().eq_ignore_ascii_case("false"));
        if matches!(check, RetentionCheck::Enforced) && checked && retain < MIN_RETAIN {
            return Err(Error::RetentionTooShort {
                table: table.to_string(),
                hours: retain.as_secs_f64() / 3600.0,
            });
        }
        let now = now_us().max(t.commits.last().expect("a commit").timestamp_us + 1);
        let cutoff = now.saturating_sub(i64::try_from(retain.as_micros()).unwrap_or(i64::MAX));
        let oldest_kept = t.commits[0].version;
        let i = t.commits.partition_point(|c| c.timestamp_us <= cutoff);
        let h = if i == 0 {
            oldest_kept
        } else {
            t.commits[i - 1].version
        };
        let pinned = t
            .properties
            .get(PINNED_VERSION_PROPERTY)
            .and_then(|v| v.trim().parse::<u64>().ok());
        if let (RetentionCheck::Enforced, Some(p)) = (check, pinned) {
            if p < h {
                return Err(Error::VersionPinned {
                    table: table.to_string(),
                    pinned: p,
                    oldest: h,
                });
            }
        }
        let id = t.id;
        let next = t.commits.last().expect("a commit").version + 1;
        let vacuum_commit = |removed: u64| {
            let parameters = BTreeMap::from([
                (
                    "retain_hours".to_string(),
                    format!("{:.3}", retain.as_secs_f64() / 3600.0),
                ),
                ("oldest_version".to_string(), h.to_string()),
                ("commits_removed".to_string(), removed.to_string()),
            ]);
            CommitInfo::bare(next, now, "VACUUM", parameters)
        };
        let prev = t.commits.last().and_then(|c| c.chain.clone());
        let at = Link {
            tag: keys::COMMIT,
            id,
            prev: prev.as_deref(),
            wrote: Wrote::Events,
        };
        if h == oldest_kept {
            // Nothing old enough to forget: the vacuum is only recorded.
            let mut commit = vacuum_commit(0);
            let mut b = WriteBatch::default();
            put_commit(&mut b, at, &mut commit)?;
            write_or_poison(inner.kv.as_ref(), &mut inner.poisoned, b)?;
            inner
                .tables
                .get_mut(table)
                .expect("found")
                .commits
                .push(commit);
            return Ok(VacuumReport {
                oldest_version: h,
                commits_removed: 0,
                row_versions_removed: 0,
                events_before: 0,
                events_after: 0,
                bytes_before: 0,
                bytes_after: 0,
            });
        }
        let log_bytes = |kv: &dyn KvStore| -> Result<(u64, u64)> {
            let mut bytes = 0;
            let mut events = 0;
            for tag in [keys::COMMIT, keys::EVENTS] {
                for kv in kv.scan_prefix(&key(tag, id, None, None)) {
                    let (k, v) = kv?;
                    bytes += (k.len() + v.len()) as u64;
                    if tag == keys::EVENTS {
                        events +=
                            crate::format::packed_events::decode_block(&v)?.flags.len() as u64;
                    }
                }
            }
            Ok((bytes, events))
        };
        let (bytes_before, events_before) = log_bytes(inner.kv.as_ref())?;

        let mut b = WriteBatch::default();
        let mut commits_removed = 0;
        let h_at = t.commits.partition_point(|c| c.version < h);
        let kept_from = &t.commits[..=h_at];
        // The GC threshold in force at `h`, which the removed commits may have set.
        let gc_secs = gc_secs_in(kept_from, t.flows[0].spec.tombstone_gc_threshold_secs)?;
        if kept_from
            .iter()
            .any(|c| c.metrics.num_tombstones_collected > 0)
        {
            // A tombstone GC dropped events the log still has: write the event set the table held
            // at `h` (from a replay up to it) as the base, in place of the blocks up to `h`.
            let mut at_h = t.detached_state();
            replay_log(
                inner.kv.as_ref(),
                id,
                &mut at_h,
                &t.commits,
                ReplayRange {
                    after: None,
                    up_to: Some(h),
                },
                &mut |_, _| Ok(()),
            )?;
            let (events, truncates) = at_h.event_set()?;
            for kv in inner.kv.scan_prefix(&key(keys::EVENTS, id, None, None)) {
                let (k, _) = kv?;
                if parse_version(&k)? > h {
                    break;
                }
                b.delete(k);
            }
            put_event_blocks(&mut b, id, h, &t.state.schema, &events, &truncates)?;
        } else if let Some(f) = kept_from
            .iter()
            .rev()
            .find(|c| c.parameters.contains_key(FULL_REFRESH))
        {
            // Otherwise the blocks up to `h` are the event set already, and stay where they are;
            // only those before the last full refresh, which it made irrelevant, go.
            for kv in inner.kv.scan_prefix(&key(keys::EVENTS, id, None, None)) {
                let (k, _) = kv?;
                if parse_version(&k)? >= f.version {
                    break;
                }
                b.delete(k);
            }
        }
        for c in t.commits.iter().take_while(|c| c.version < h) {
            b.delete(key(keys::COMMIT, id, Some(c.version), None));
            commits_removed += 1;
        }
        // Commit `h` becomes the base: on replay, every block up to it is applied as one commit
        // at `h` (never reset: what a full refresh dropped is gone already).
        let mut base = t.commits[h_at].clone();
        base.parameters.remove(FULL_REFRESH);
        base.parameters
            .insert(VACUUM_BASE.to_string(), "true".to_string());
        base.parameters
            .insert(TOMBSTONE_GC_PROPERTY.to_string(), gc_secs.to_string());
        // Every flow's checkpoint as of `h`, and the source version it last read whole: the
        // commits that recorded them are going.
        for f in &t.flows {
            if let Some(offset) = checkpoint_in(&t.commits[..=h_at], &f.spec.name) {
                base.parameters.insert(
                    format!("{SOURCE_OFFSET}.{}", f.spec.name),
                    offset.to_string(),
                );
            }
            let read = super::refresh::source_version_in(&t.commits[..=h_at], &f.spec.name);
            if read > 0 {
                base.parameters.insert(
                    format!("{}.{}", super::refresh::SOURCE_VERSION, f.spec.name),
                    read.to_string(),
                );
            }
        }
        // The base keeps its link in the chain; what it now holds is in the VACUUM commit's
        // digest of it, which is chained like any commit.
        put_json(&mut b, key(keys::COMMIT, id, Some(h), None), &base)?;
        let base_digest = chain::base_digest(inner.kv.as_ref(), id, &base, Some(&b))?;
        let mut commit = vacuum_commit(commits_removed);
        commit
            .parameters
            .insert(chain::BASE_DIGEST.to_string(), chain::hex(&base_digest));
        put_commit(&mut b, at, &mut commit)?;
        write_or_poison(inner.kv.as_ref(), &mut inner.poisoned, b)?;
        // Free the old state before rebuilding, so a VACUUM never holds two copies of the table
        // (it doubled peak memory). Nobody can see the empty state: the write lock is held, and if
        // the rebuild fails the store is poisoned and refuses reads until it is reopened.
        {
            let t = inner.tables.get_mut(table).expect("found");
            t.state = t.new_state();
            t.load = Load::Pending;
            t.generation += 1;
            t.recent_keys.clear();
        }
        // Rebuild from the log as it now is, and write the derived records again (the rows changed
        // ids), as an open of a store whose records are not current would.
        let t = inner.tables.get_mut(table).expect("found");
        let rebuilt = load_commits(inner.kv.as_ref(), id, &t.name).and_then(|commits| {
            t.commits = commits;
            pages::rebuild(
                inner.kv.as_ref(),
                t,
                inner.progress.as_ref(),
                &inner.checkpoints,
            )
        });
        rebuilt.inspect_err(|e| inner.poisoned = Some(e.to_string()))?;
        t.load = Load::Replayed;
        t.unsaved = 0;
        let rows_after = t.state.rows.len() as u64;
        // Measured only once the table is whole again: an error here leaves a correct store.
        let (bytes_after, events_after) = log_bytes(inner.kv.as_ref())?;
        Ok(VacuumReport {
            oldest_version: h,
            commits_removed,
            row_versions_removed: rows_before.saturating_sub(rows_after),
            events_before,
            events_after,
            bytes_before,
            bytes_after,
        })
    }
}
