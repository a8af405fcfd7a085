//! Retention (docs/SEMANTICS.md §12.3): the table property [`RETENTION_PROPERTY`] erases, at each
//! commit that changes the table, every key deleted for longer than a period, as `ERASE` does
//! (`erase.rs`), with a reason that names the rule. The clock is the system time of commits: a key
//! is deleted since the commit after which its business timeline (as then believed) ended.

use std::collections::{BTreeMap, BTreeSet};

use super::erase::{erasable_by_position, EraseReport, SourceRows};
use super::erase_sources::source_flows;
use super::{Inner, Table};
use crate::error::{Error, Result};

/// The table property that erases keys deleted for longer than its period: `'interval 30 days'`
/// (units `second`, `minute`, `hour`, `day`, `week`, singular or plural; `interval` may be left
/// out).
pub const RETENTION_PROPERTY: &str = "asof.erase.deletedKeysAfter";

/// The period of [`RETENTION_PROPERTY`] among `properties`, in microseconds, if set; an error
/// names the property, the value and the form it takes.
pub(crate) fn retention_period(properties: &BTreeMap<String, String>) -> Result<Option<i64>> {
    let Some(value) = properties.get(RETENTION_PROPERTY) else {
        return Ok(None);
    };
    let bad = || {
        Error::InvalidQuery(format!(
            "table property {RETENTION_PROPERTY} is a period such as 'interval 30 days' (a whole number of seconds, minutes, hours, days or weeks), not '{value}'"
        ))
    };
    let lower = value.trim().to_ascii_lowercase();
    let mut words = lower.split_whitespace().peekable();
    words.next_if_eq(&"interval");
    let n: i64 = words.next().and_then(|n| n.parse().ok()).ok_or_else(bad)?;
    let unit: i64 = match words.next().ok_or_else(bad)?.trim_end_matches('s') {
        "second" => 1,
        "minute" => 60,
        "hour" => 3600,
        "day" => 86_400,
        "week" => 7 * 86_400,
        _ => return Err(bad()),
    };
    if n < 0 || words.next().is_some() {
        return Err(bad());
    }
    n.checked_mul(unit)
        .and_then(|s| s.checked_mul(1_000_000))
        .map(Some)
        .ok_or_else(bad)
}

/// Refuses [`RETENTION_PROPERTY`] on `t` when an erasure of `t` would be refused: a source whose
/// rows cannot be erased by position. (A table fed by snapshots is refused by SQL, which knows
/// the sources' origins.)
pub(super) fn check_retention(inner: &Inner, t: &Table) -> Result<()> {
    for (name, _) in source_flows(t) {
        check_retention_source(inner, &t.name, &name)?;
    }
    Ok(())
}

/// [`check_retention`] of one source, `source`, of table `table`.
pub(super) fn check_retention_source(inner: &Inner, table: &str, source: &str) -> Result<()> {
    let Some(src) = inner.sources.get(source) else {
        return Ok(());
    };
    erasable_by_position(table, src).map_err(|e| match e {
        Error::InvalidErasure { problem, .. } => Error::InvalidQuery(format!(
            "table property {RETENTION_PROPERTY} on `{table}` refused: {problem}"
        )),
        e => e,
    })
}

impl Inner {
    /// Applies `table`'s retention after its commit at `now` (a commit timestamp): erases the
    /// keys deleted since before `now` less the period, with the rows of its sources that its
    /// flows have read. `None` when the property is not set or no key is that old.
    pub(super) fn apply_retention(&mut self, table: &str, now: i64) -> Result<Option<EraseReport>> {
        let t = self.table(table)?;
        let Some(period) = retention_period(&t.properties)? else {
            return Ok(None);
        };
        self.ensure_replayed(table)?;
        let t = self.table(table)?;
        let keys: BTreeSet<_> = t
            .state
            .deleted_before(now.saturating_sub(period))
            .into_iter()
            .collect();
        if keys.is_empty() {
            return Ok(None);
        }
        let reason = format!(
            "retention: deleted for longer than {} (table property {RETENTION_PROPERTY})",
            t.properties[RETENTION_PROPERTY].trim()
        );
        let report = self.erase_keys(table, &keys, &reason, SourceRows::Read)?;
        Ok(report.version.is_some().then_some(report))
    }

    /// [`Inner::apply_retention`] after commit `version` of `table`: its error says that the
    /// commit stands.
    pub(super) fn retention_after(&mut self, table: &str, version: u64, now: i64) -> Result<()> {
        self.apply_retention(table, now)
            .map(|_| ())
            .map_err(|e| Error::RetentionFailed {
                table: table.to_string(),
                version,
                problem: e.to_string(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn period(v: &str) -> Result<Option<i64>> {
        retention_period(&BTreeMap::from([(
            RETENTION_PROPERTY.to_string(),
            v.to_string(),
        )]))
    }

    #[test]
    fn a_period_is_read_in_the_units_delta_writes() {
        assert_eq!(
            period("interval 30 days").unwrap(),
            Some(30 * 86_400_000_000)
        );
        assert_eq!(period("INTERVAL 1 WEEK").unwrap(), Some(7 * 86_400_000_000));
        assert_eq!(period("2 hours").unwrap(), Some(7_200_000_000));
        assert_eq!(period(" interval 0 seconds ").unwrap(), Some(0));
        assert_eq!(retention_period(&BTreeMap::new()).unwrap(), None, "unset");
    }

    #[test]
    fn a_period_that_does_not_read_is_refused_naming_the_property() {
        for bad in [
            "30",
            "interval days",
            "-1 days",
            "3 fortnights",
            "1 day later",
            "9223372036854775807 weeks",
        ] {
            let e = period(bad).unwrap_err().to_string();
            assert!(
                e.contains(RETENTION_PROPERTY) && e.contains(bad),
                "{bad}: {e}"
            );
        }
    }
}
