//! Schedules: stored with the streaming table, shown, changed with ALTER, and followed by
//! `asof run`, which refreshes each table when its schedule says and lets other processes use the
//! store between rounds.

use crate::common;

use std::time::{Duration, Instant};

use common::run_asof;

const SETUP: &str = "CREATE TABLE ev (id BIGINT, v STRING, seq BIGINT); \
    INSERT INTO ev VALUES (1, 'a', 1); \
    CREATE OR REFRESH STREAMING TABLE every_second SCHEDULE EVERY 1 SECOND \
      FLOW AUTO CDC FROM stream(ev) KEYS (id) SEQUENCE BY seq STORED AS SCD TYPE 1; \
    CREATE OR REFRESH STREAMING TABLE on_update TRIGGER ON UPDATE \
      FLOW AUTO CDC FROM stream(ev) KEYS (id) SEQUENCE BY seq STORED AS SCD TYPE 1; \
    CREATE OR REFRESH STREAMING TABLE nightly SCHEDULE CRON '0 3 * * *' AT TIME ZONE 'Europe/Oslo' \
      FLOW AUTO CDC FROM stream(ev) KEYS (id) SEQUENCE BY seq STORED AS SCD TYPE 1; \
    CREATE OR REFRESH STREAMING TABLE cron_seconds SCHEDULE CRON '* * * * * ?' \
      FLOW AUTO CDC FROM stream(ev) KEYS (id) SEQUENCE BY seq STORED AS SCD TYPE 1";

#[test]
fn schedules_are_stored_shown_and_changed() {
    let dir = tempfile::tempdir().unwrap();
    let store = asof::Store::open(dir.path()).unwrap();
    let mut s = asof::SqlSession::new(store).unwrap();
    s.execute(SETUP).unwrap();
    let prop = |s: &mut asof::SqlSession, t: &str| {
        common::sql_rows(s, &format!("SHOW TBLPROPERTIES {t} ('asof.schedule')")).1[0][1].clone()
    };
    assert_eq!(
        prop(&mut s, "every_second").as_deref(),
        Some("EVERY 1 SECONDS")
    );
    assert_eq!(prop(&mut s, "on_update").as_deref(), Some("ON UPDATE"));
    assert_eq!(
        prop(&mut s, "nightly").as_deref(),
        Some("CRON '0 3 * * *' AT TIME ZONE 'Europe/Oslo'")
    );
    // A CRON schedule's next refresh is its next fire time: 03:00 in Oslo is 02:00 or 01:00 UTC.
    let (_, described) = common::sql_rows(&mut s, "DESCRIBE TABLE EXTENDED nightly");
    let next = described
        .iter()
        .find(|r| r[0].as_deref() == Some("Next refresh"))
        .and_then(|r| r[1].clone())
        .expect("a next refresh");
    let next = chrono::DateTime::parse_from_rfc3339(&next).unwrap();
    assert!(next > chrono::Utc::now(), "{next}");
    assert!(
        matches!(
            next.format("%H:%M:%S").to_string().as_str(),
            "02:00:00" | "01:00:00"
        ),
        "{next}"
    );
    for (bad, says) in [
        ("'0 3 * *'", "4 fields"),
        ("'0 61 3 * * ?'", "the cron expression"),
        (
            "'0 0 3 * * ?' AT TIME ZONE 'Atlantis/Capital'",
            "not a time zone",
        ),
    ] {
        let e = s
            .execute(&format!(
                "ALTER STREAMING TABLE nightly ALTER SCHEDULE CRON {bad}"
            ))
            .unwrap_err()
            .to_string();
        assert!(e.contains(says), "{bad}: {e}");
    }
    s.execute("ALTER STREAMING TABLE nightly ALTER SCHEDULE EVERY 2 HOURS")
        .unwrap();
    assert_eq!(
        prop(&mut s, "nightly").as_deref(),
        Some("EVERY 7200 SECONDS")
    );
    // DESCRIBE shows the schedule, the last refresh and the next (two hours after it).
    let (_, described) = common::sql_rows(&mut s, "DESCRIBE TABLE EXTENDED nightly");
    let value = |name: &str| {
        described
            .iter()
            .find(|r| r[0].as_deref() == Some(name))
            .and_then(|r| r[1].clone())
            .unwrap_or_else(|| panic!("no {name}: {described:?}"))
    };
    assert_eq!(value("Schedule"), "EVERY 7200 SECONDS");
    let at = |s: String| {
        chrono::DateTime::parse_from_rfc3339(&s)
            .unwrap()
            .timestamp_micros()
    };
    assert_eq!(
        at(value("Next refresh")) - at(value("Last refresh")),
        7_200_000_000
    );
    s.execute("ALTER STREAMING TABLE nightly DROP SCHEDULE")
        .unwrap();
    assert_eq!(prop(&mut s, "nightly").as_deref(), Some(""));
    s.execute(
        "ALTER STREAMING TABLE nightly ADD TRIGGER ON UPDATE AT MOST EVERY INTERVAL 5 MINUTES",
    )
    .unwrap();
    assert_eq!(
        prop(&mut s, "nightly").as_deref(),
        Some("ON UPDATE AT MOST EVERY 300 SECONDS")
    );
    let e = s
        .execute("ALTER STREAMING TABLE nightly ALTER SCHEDULE EVERY 0 HOURS")
        .unwrap_err()
        .to_string();
    assert!(e.contains("SECONDS, MINUTES, HOURS or DAYS"), "{e}");
}

/// `asof run`, killed if the test fails before it stops it (else the process would outlive the
/// test and hold its output open).
struct Runner(Option<std::process::Child>);

impl Drop for Runner {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The rows of `table`'s `id` column as the CLI prints them, sorted.
fn ids(db: &std::path::Path, table: &str) -> Vec<String> {
    let (ok, out, err) = run_asof(
        db,
        &["sql", "--format", "csv", &format!("SELECT id FROM {table}")],
    );
    assert!(ok, "{err}");
    let mut ids: Vec<String> = out.lines().skip(1).map(str::to_string).collect();
    ids.sort();
    ids
}

#[test]
fn asof_run_refreshes_tables_on_their_schedules_until_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, _, err) = run_asof(dir.path(), &["sql", SETUP]);
    assert!(ok, "{err}");
    // ON UPDATE over files: a file that appears in the folder is an update of its source.
    let landing = tempfile::tempdir().unwrap();
    std::fs::write(landing.path().join("a.csv"), "id,v,seq\n1,a,1\n").unwrap();
    let (ok, _, err) = run_asof(
        dir.path(),
        &[
            "sql",
            &format!(
                "CREATE OR REFRESH STREAMING TABLE from_files TRIGGER ON UPDATE \
                   FLOW AUTO CDC FROM stream(read_files('{}', format => 'csv', header => true)) \
                   KEYS (id) SEQUENCE BY seq STORED AS SCD TYPE 1",
                landing.path().display()
            ),
        ],
    );
    assert!(ok, "{err}");
    let mut runner = Runner(Some(
        std::process::Command::new(env!("CARGO_BIN_EXE_asof"))
            .arg("--db")
            .arg(dir.path())
            .args(["--wait", "10", "run", "--poll-ms", "100"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    // Another process inserts while it runs: it gets the store between rounds.
    std::thread::sleep(Duration::from_millis(500));
    let (ok, _, err) = run_asof(
        dir.path(),
        &["--wait", "10", "sql", "INSERT INTO ev VALUES (2, 'b', 1)"],
    );
    assert!(ok, "{err}");
    std::fs::write(landing.path().join("b.csv"), "id,v,seq\n2,b,1\n").unwrap();
    let started = Instant::now();
    loop {
        std::thread::sleep(Duration::from_millis(300));
        let both = ["every_second", "on_update", "cron_seconds", "from_files"]
            .iter()
            .all(|t| ids(dir.path(), t) == ["1", "2"]);
        if both {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "not refreshed");
    }
    // The nightly CRON table has not fired since it was created: it holds what its creation read.
    assert_eq!(ids(dir.path(), "nightly"), ["1"]);
    let runner = runner.0.take().unwrap();
    let pid = runner.id().to_string();
    std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap();
    let out = runner.wait_with_output().unwrap();
    assert!(out.status.success());
    let log = String::from_utf8_lossy(&out.stdout);
    assert!(log.contains("every_second:"), "{log}");
    assert!(log.contains("on_update:"), "{log}");
    assert!(log.contains("cron_seconds:"), "{log}");
    assert!(log.contains("from_files:"), "{log}");
    assert!(!log.contains("nightly:"), "{log}");
    assert!(log.trim_end().ends_with("asof run: stopped"), "{log}");
}
