//! When a streaming table refreshes by itself (`SCHEDULE ...` and `TRIGGER ON UPDATE` on
//! `CREATE STREAMING TABLE`, `ALTER STREAMING TABLE t ADD | ALTER | DROP SCHEDULE`): stored as the
//! table property [`SCHEDULE_PROPERTY`] and followed by `asof run`.

use std::time::Duration;

/// The table property that holds a streaming table's schedule (empty: none).
pub const SCHEDULE_PROPERTY: &str = "asof.schedule";

/// A streaming table's schedule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Schedule {
    /// `SCHEDULE [REFRESH] EVERY n {SECONDS | MINUTES | HOURS | DAYS}` (seconds are asof's own,
    /// for tests and tight loops).
    Every(Duration),
    /// `SCHEDULE [REFRESH] CRON 'expr' [AT TIME ZONE 'tz']`: stored and shown; `asof run` does not
    /// evaluate cron expressions yet.
    Cron {
        /// The cron expression.
        expr: String,
        /// `AT TIME ZONE`.
        time_zone: Option<String>,
    },
    /// `TRIGGER ON UPDATE [AT MOST EVERY INTERVAL n unit]`: refreshed when a source of its flows
    /// changed, at most that often.
    OnUpdate {
        /// `AT MOST EVERY`.
        at_most_every: Option<Duration>,
    },
}

/// `n unit` as a duration: units `SECOND[S]`, `MINUTE[S]`, `HOUR[S]`, `DAY[S]`.
pub fn duration(n: u64, unit: &str) -> Option<Duration> {
    let secs = match unit.to_uppercase().trim_end_matches('S') {
        "SECOND" => 1,
        "MINUTE" => 60,
        "HOUR" => 3600,
        "DAY" => 86_400,
        _ => return None,
    };
    Some(Duration::from_secs(n.checked_mul(secs)?))
}

fn text(d: Duration) -> String {
    format!("{} SECONDS", d.as_secs())
}

impl Schedule {
    /// The property text (read back by [`Schedule::from_property`]).
    pub fn to_property(&self) -> String {
        match self {
            Schedule::Every(d) => format!("EVERY {}", text(*d)),
            Schedule::Cron { expr, time_zone } => match time_zone {
                Some(tz) => format!("CRON '{expr}' AT TIME ZONE '{tz}'"),
                None => format!("CRON '{expr}'"),
            },
            Schedule::OnUpdate { at_most_every } => match at_most_every {
                Some(d) => format!("ON UPDATE AT MOST EVERY {}", text(*d)),
                None => "ON UPDATE".to_string(),
            },
        }
    }

    /// The schedule a property text holds (`None` if empty or not one).
    pub fn from_property(p: &str) -> Option<Schedule> {
        let secs = |s: &str| -> Option<Duration> {
            let n = s.strip_suffix(" SECONDS")?.parse().ok()?;
            Some(Duration::from_secs(n))
        };
        if let Some(rest) = p.strip_prefix("EVERY ") {
            return secs(rest).map(Schedule::Every);
        }
        if p == "ON UPDATE" {
            return Some(Schedule::OnUpdate {
                at_most_every: None,
            });
        }
        if let Some(rest) = p.strip_prefix("ON UPDATE AT MOST EVERY ") {
            return Some(Schedule::OnUpdate {
                at_most_every: Some(secs(rest)?),
            });
        }
        let rest = p.strip_prefix("CRON '")?;
        let (expr, tail) = rest.split_once('\'')?;
        let time_zone = tail
            .strip_prefix(" AT TIME ZONE '")
            .and_then(|t| t.strip_suffix('\''))
            .map(str::to_string);
        Some(Schedule::Cron {
            expr: expr.to_string(),
            time_zone,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedules_read_back_from_their_property() {
        for s in [
            Schedule::Every(Duration::from_secs(300)),
            Schedule::Cron {
                expr: "0 0 * * *".into(),
                time_zone: Some("Europe/Oslo".into()),
            },
            Schedule::Cron {
                expr: "0 * * * *".into(),
                time_zone: None,
            },
            Schedule::OnUpdate {
                at_most_every: Some(Duration::from_secs(60)),
            },
            Schedule::OnUpdate {
                at_most_every: None,
            },
        ] {
            assert_eq!(Schedule::from_property(&s.to_property()), Some(s));
        }
        assert_eq!(Schedule::from_property(""), None);
        assert_eq!(duration(2, "hours"), Some(Duration::from_secs(7200)));
        assert_eq!(duration(2, "fortnights"), None);
    }
}
