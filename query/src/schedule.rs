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
    /// `SCHEDULE [REFRESH] CRON 'expr' [AT TIME ZONE 'tz']`: Quartz syntax as Databricks writes
    /// it (`seconds minutes hours day-of-month month day-of-week [year]`, `?`, `L`, `W`, `#`,
    /// weekdays 1 = Sunday), or the five fields of POSIX cron (weekdays 0 = Sunday); evaluated in
    /// the time zone (UTC if none).
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

/// A cron schedule ready to evaluate: the expression and its time zone.
#[derive(Clone, Debug)]
pub struct CronSchedule {
    cron: croner::Cron,
    zone: chrono_tz::Tz,
}

impl CronSchedule {
    /// Reads `expr` (Quartz with six or seven fields, or POSIX with five) in time zone `zone`
    /// (an IANA name; UTC if none). The error says what is wrong.
    pub fn new(expr: &str, zone: Option<&str>) -> Result<CronSchedule, String> {
        let fields = expr.split_whitespace().count();
        if !(5..=7).contains(&fields) {
            return Err(format!(
                "the cron expression `{expr}` has {fields} fields: Quartz takes 6 or 7 (seconds minutes hours day-of-month month day-of-week [year]), POSIX cron 5"
            ));
        }
        let parser = croner::parser::CronParser::builder()
            .seconds(croner::parser::Seconds::Optional)
            .year(croner::parser::Year::Optional)
            // Quartz numbers weekdays from 1 (Sunday); POSIX from 0.
            .alternative_weekdays(fields >= 6)
            .build();
        let cron = parser
            .parse(expr)
            .map_err(|e| format!("the cron expression `{expr}`: {e}"))?;
        let zone = match zone {
            None => chrono_tz::Tz::UTC,
            Some(z) => z.parse::<chrono_tz::Tz>().map_err(|_| {
                format!("`{z}` is not a time zone (an IANA name such as 'Europe/Oslo')")
            })?,
        };
        Ok(CronSchedule { cron, zone })
    }

    /// The latest time the schedule fires at or before `now` (`None` if it never did in the last
    /// year or so).
    pub fn last_at_or_before(
        &self,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Option<chrono::DateTime<chrono::Utc>> {
        let local = now.with_timezone(&self.zone);
        self.cron
            .find_previous_occurrence(&local, true)
            .ok()
            .map(|t| t.with_timezone(&chrono::Utc))
    }

    /// The first time the schedule fires after `now`.
    pub fn next_after(
        &self,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Option<chrono::DateTime<chrono::Utc>> {
        let local = now.with_timezone(&self.zone);
        self.cron
            .find_next_occurrence(&local, false)
            .ok()
            .map(|t| t.with_timezone(&chrono::Utc))
    }
}

impl Schedule {
    /// Checks what can be checked before the schedule is stored: a cron expression and its time
    /// zone.
    pub fn check(&self) -> Result<(), String> {
        match self {
            Schedule::Cron { expr, time_zone } => {
                CronSchedule::new(expr, time_zone.as_deref()).map(|_| ())
            }
            _ => Ok(()),
        }
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
        let at = |s: &str| {
            chrono::DateTime::parse_from_rfc3339(s)
                .unwrap()
                .with_timezone(&chrono::Utc)
        };
        // Quartz, as Databricks writes it: every day at 02:30 in Oslo (UTC+1 in winter).
        let daily = CronSchedule::new("0 30 2 * * ?", Some("Europe/Oslo")).unwrap();
        assert_eq!(
            daily.next_after(at("2026-12-01T06:00:00Z")),
            Some(at("2026-12-02T01:30:00Z"))
        );
        assert_eq!(
            daily.last_at_or_before(at("2026-12-01T06:00:00Z")),
            Some(at("2026-12-01T01:30:00Z"))
        );
        // Quartz weekdays count from Sunday = 1; POSIX from Sunday = 0: both say Monday here.
        let monday = at("2026-11-30T09:00:00Z");
        for expr in ["0 0 9 ? * 2", "0 9 * * 1", "0 0 9 ? * MON *"] {
            let c = CronSchedule::new(expr, None).unwrap();
            assert_eq!(c.last_at_or_before(monday), Some(monday), "{expr}");
        }
        assert!(CronSchedule::new("0 0 * *", None)
            .unwrap_err()
            .contains("4 fields"));
        assert!(CronSchedule::new("0 0 * * * ?", Some("Mars/Olympus"))
            .unwrap_err()
            .contains("not a time zone"));
        assert_eq!(duration(2, "hours"), Some(Duration::from_secs(7200)));
        assert_eq!(duration(2, "fortnights"), None);
    }
}
