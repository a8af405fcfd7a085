//! docs/SEMANTICS.md §7 through SQL: DESCRIBE HISTORY, VERSION AS OF / TIMESTAMP AS OF (with the temporal
//! clauses), table_changes, VACUUM and table properties.

use crate::common;

use asof::{SqlOutput, SqlSession, Store};
use common::{data_dir, read_csv, sorted};

type Rows = Vec<Vec<Option<String>>>;

fn query(s: &mut SqlSession, sql: &str) -> (Vec<String>, Rows) {
    common::sql_rows(s, sql)
}

fn err(s: &mut SqlSession, sql: &str) -> String {
    s.execute(sql).expect_err(sql).to_string()
}

/// The reference case fed one event per INSERT + REFRESH: commits 1..=4 of `company_points`.
fn reference(dir: &std::path::Path) -> SqlSession {
    let mut s = SqlSession::new(Store::open(dir).unwrap()).unwrap();
    s.execute("CREATE TABLE company_events (CompanyId STRING, DataPoint STRING, business_time TIMESTAMP, system_time TIMESTAMP, operation STRING)").unwrap();
    s.execute(&std::fs::read_to_string(data_dir().join("seed_bitemporal/flow.sql")).unwrap())
        .unwrap();
    let (_, events) = read_csv(&data_dir().join("seed_bitemporal/events.csv"));
    for e in events {
        let f = |i: usize| e[i].clone().unwrap();
        s.execute(&format!(
            "INSERT INTO company_events VALUES ('{}', '{}', TIMESTAMP '{}', TIMESTAMP '{}', '{}'); REFRESH STREAMING TABLE company_points",
            f(0), f(1), f(2), f(3), f(4)
        ))
        .unwrap();
    }
    s
}

#[test]
fn every_version_reads_back_exactly_and_with_the_temporal_clauses() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = reference(dir.path());
    for n in 1..=4 {
        let (_, exp) =
            read_csv(&data_dir().join(format!("seed_bitemporal/expected_after_{n}.csv")));
        let (_, got) = query(
            &mut s,
            &format!("SELECT * FROM company_points VERSION AS OF {n}"),
        );
        assert_eq!(sorted(got), sorted(exp), "version {n}");
    }
    // Combined with both timelines, in either order.
    let (_, a) = query(&mut s, "SELECT DataPoint FROM company_points VERSION AS OF 2 FOR SYSTEM_TIME AS OF '2025-07-18T12:22:00' FOR BUSINESS_TIME AS OF '2025-07-18T12:10:00'");
    assert_eq!(a, [[Some("XFv1".to_string())]]);
    let (_, b) = query(&mut s, "SELECT DataPoint FROM company_points FOR BUSINESS_TIME AS OF '2025-07-18T12:20:00' VERSION AS OF 2 p WHERE p.__SYSTEM_END_AT IS NULL");
    assert_eq!(b, [[Some("XFv2".to_string())]]);
    // TIMESTAMP AS OF: the commit current at that time, from DESCRIBE HISTORY.
    let (names, history) = query(&mut s, "DESCRIBE HISTORY company_points");
    assert_eq!(
        names[..4],
        ["version", "timestamp", "operation", "operationParameters"]
    );
    assert!(
        names.contains(&"num_late_events".to_string())
            && names.contains(&"duration_ms".to_string())
    );
    assert_eq!(
        history.len(),
        5,
        "CREATE TABLE and four refreshes, newest first"
    );
    assert_eq!(history[0][0].as_deref(), Some("4"));
    assert_eq!(history[4][2].as_deref(), Some("CREATE TABLE"));
    assert_eq!(history[0][2].as_deref(), Some("FLOW company_points_cdc"));
    let ts_of_3 = history[1][1].clone().unwrap();
    let (_, at_ts) = query(
        &mut s,
        &format!("SELECT * FROM company_points TIMESTAMP AS OF '{ts_of_3}'"),
    );
    let (_, at_v) = query(&mut s, "SELECT * FROM company_points VERSION AS OF 3");
    assert_eq!(sorted(at_ts), sorted(at_v));
    // The third event was late on business time: the history says so.
    let late = names.iter().position(|n| n == "num_late_events").unwrap();
    assert_eq!(history[1][late].as_deref(), Some("1"));

    let e = err(&mut s, "SELECT * FROM company_points VERSION AS OF 9");
    assert!(
        e.contains("no version 9") && e.contains("latest is 4"),
        "{e}"
    );
    let e = err(
        &mut s,
        "SELECT * FROM company_points TIMESTAMP AS OF '2001-01-01'",
    );
    assert!(e.contains("no version at that time"), "{e}");
    let e = err(&mut s, "SELECT * FROM company_points VERSION AS OF 'x'");
    assert!(e.contains("version number"), "{e}");
    // Source tables have a history too: CREATE TABLE and one WRITE per INSERT.
    let (_, h) = query(&mut s, "DESCRIBE HISTORY company_events");
    assert_eq!(h.len(), 5);
    assert_eq!(h[0][2].as_deref(), Some("WRITE"));
}

#[test]
fn table_changes_by_version_and_by_timestamp() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = reference(dir.path());
    let (names, rows) = query(
        &mut s,
        "SELECT DataPoint, __SYSTEM_START_AT, __SYSTEM_END_AT, _change_type, _commit_version FROM table_changes('company_points', 2, 2) ORDER BY _change_type",
    );
    assert_eq!(names[3..], ["_change_type", "_commit_version"]);
    // Event 2 closes XFv1's system time (an update of the row with identity (A, 10:01, 10:05)) and
    // writes the corrected XFv1 and XFv2 rows.
    let s_ = |x: &str| Some(x.to_string());
    assert_eq!(
        rows,
        vec![
            vec![
                s_("XFv1"),
                s_("2025-07-18T12:20:00"),
                None,
                s_("insert"),
                s_("2")
            ],
            vec![
                s_("XFv2"),
                s_("2025-07-18T12:20:00"),
                None,
                s_("insert"),
                s_("2")
            ],
            vec![
                s_("XFv1"),
                s_("2025-07-18T10:05:00"),
                s_("2025-07-18T12:20:00"),
                s_("update_postimage"),
                s_("2")
            ],
            vec![
                s_("XFv1"),
                s_("2025-07-18T10:05:00"),
                None,
                s_("update_preimage"),
                s_("2")
            ],
        ]
    );
    // The whole feed from commit 1, applied to the empty table of commit 0, gives the final table.
    let (_, feed) = query(&mut s, "SELECT CompanyId, DataPoint, __START_AT, __END_AT, __SYSTEM_START_AT, __SYSTEM_END_AT, _change_type FROM table_changes('company_points', 1) ORDER BY _commit_version");
    let mut table: Rows = Vec::new();
    for mut r in feed {
        let kind = r.pop().unwrap().unwrap();
        if kind == "insert" || kind == "update_postimage" {
            table.push(r);
        } else {
            let at = table
                .iter()
                .position(|x| *x == r)
                .expect("a removed row was there");
            table.remove(at);
        }
    }
    let (_, exp) = read_csv(&data_dir().join("seed_bitemporal/expected_after_4.csv"));
    assert_eq!(sorted(table), sorted(exp));
    // By timestamp: from the commit at or after it.
    let (_, history) = query(&mut s, "DESCRIBE HISTORY company_points");
    let ts_of_4 = history[0][1].clone().unwrap();
    let (_, by_ts) = query(
        &mut s,
        &format!("SELECT _commit_version FROM table_changes('company_points', '{ts_of_4}')"),
    );
    assert!(!by_ts.is_empty() && by_ts.iter().all(|r| r[0].as_deref() == Some("4")));
    let e = err(
        &mut s,
        "SELECT * FROM table_changes('company_points', 3, 2)",
    );
    assert!(e.contains("after the end"), "{e}");
    let e = err(
        &mut s,
        "SELECT * FROM table_changes('company_points', 1, 7)",
    );
    assert!(e.contains("no version 7"), "{e}");
    // An end far past the last commit is refused at once, nothing read.
    let e = err(
        &mut s,
        "SELECT * FROM table_changes('company_points', 1, 9000000000000000000)",
    );
    assert!(e.contains("no version 9000000000000000000"), "{e}");
    let e = err(&mut s, "SELECT * FROM table_changes('nope', 1)");
    assert!(e.contains("nope"), "{e}");
    // The feed streams a window of commits at a time; a query that reads it twice reads the
    // same rows twice.
    let (_, once) = query(
        &mut s,
        "SELECT count(*) FROM table_changes('company_points', 1)",
    );
    let (_, twice) = query(
        &mut s,
        "WITH c AS (SELECT * FROM table_changes('company_points', 1)) \
         SELECT (SELECT count(*) FROM c) AS n, count(*) AS pairs FROM c a JOIN c b \
           ON a._commit_version = b._commit_version AND a._change_type = b._change_type \
           AND a.DataPoint = b.DataPoint AND a.__SYSTEM_START_AT = b.__SYSTEM_START_AT",
    );
    assert_eq!(twice[0][0], once[0][0]);
    assert!(twice[0][1] >= once[0][0], "{twice:?}");
}

#[test]
fn vacuum_keeps_the_table_and_refuses_travel_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = reference(dir.path());
    let (_, before) = query(&mut s, "SELECT * FROM company_points");
    // The default retention (7 days) keeps everything here.
    let out = s.execute("VACUUM company_points").unwrap();
    assert!(
        matches!(&out[0], SqlOutput::Done(l) if l.contains("nothing older")),
        "{out:?}"
    );
    assert_eq!(
        sorted(query(&mut s, "SELECT * FROM company_points VERSION AS OF 1").1).len(),
        1
    );
    // Less than seven days is refused until the table allows it, as Delta does; the error says how.
    let e = err(&mut s, "VACUUM company_points RETAIN 0 HOURS");
    assert!(
        e.contains("168 hours") && e.contains("'asof.vacuum.retentionCheck' = 'false'"),
        "{e}"
    );
    assert_eq!(
        sorted(query(&mut s, "SELECT * FROM company_points VERSION AS OF 1").1).len(),
        1,
        "the refused VACUUM removed nothing"
    );
    s.execute("ALTER STREAMING TABLE company_points SET TBLPROPERTIES ('asof.vacuum.retentionCheck' = 'false')").unwrap();
    s.execute("VACUUM company_points RETAIN 0 HOURS").unwrap();
    assert_eq!(
        sorted(query(&mut s, "SELECT * FROM company_points").1),
        sorted(before.clone())
    );
    let e = err(&mut s, "SELECT * FROM company_points VERSION AS OF 2");
    assert!(
        e.contains("removed by VACUUM") && e.contains("version 2"),
        "{e}"
    );
    // New events after the vacuum are applied as before; a restart reads the same.
    drop(s);
    let mut s = SqlSession::new(Store::open(dir.path()).unwrap()).unwrap();
    assert_eq!(
        sorted(query(&mut s, "SELECT * FROM company_points").1),
        sorted(before)
    );
    s.execute("INSERT INTO company_events VALUES ('B', 'YFv1', TIMESTAMP '2025-07-19T00:00:00', TIMESTAMP '2025-07-19T00:00:00', 'INSERT'); REFRESH STREAMING TABLE company_points").unwrap();
    assert_eq!(
        query(
            &mut s,
            "SELECT count(*) FROM company_points WHERE CompanyId = 'B'"
        )
        .1,
        [[Some("1".into())]]
    );
    let (_, h) = query(&mut s, "DESCRIBE HISTORY company_points");
    assert!(h.iter().any(|r| r[2].as_deref() == Some("VACUUM")));
    let e = err(&mut s, "VACUUM company_points RETAIN -1 HOURS");
    assert!(e.contains("hours"), "{e}");
    // Out of range or not a number: an error, never a panic.
    for bad in ["1e400", "1e30", "NaN"] {
        let e = err(&mut s, &format!("VACUUM company_points RETAIN {bad} HOURS"));
        assert!(e.contains("RETAIN"), "{bad}: {e}");
    }
}

#[test]
fn table_properties_at_creation_and_later() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = SqlSession::new(Store::open(dir.path()).unwrap()).unwrap();
    s.execute(
        "CREATE TABLE src (id BIGINT, v STRING, ts BIGINT, op STRING);
         CREATE OR REFRESH STREAMING TABLE t TBLPROPERTIES ('pipelines.cdc.tombstoneGCThresholdInSeconds' = '0', 'quality' = 'gold');
         CREATE FLOW f AS AUTO CDC INTO t FROM stream(src) KEYS (id) APPLY AS DELETE WHEN op = 'D' SEQUENCE BY ts COLUMNS * EXCEPT (op)",
    )
    .unwrap();
    let (_, props) = query(&mut s, "SHOW TBLPROPERTIES t");
    assert!(props.contains(&vec![Some("quality".into()), Some("gold".into())]));
    assert!(props.contains(&vec![
        Some("pipelines.cdc.tombstoneGCThresholdInSeconds".into()),
        Some("0".into())
    ]));
    // With a threshold of 0 s a delete's tombstone is collected at the next commit, so a late
    // upsert older than the delete brings the key back (docs/SEMANTICS.md §6, the documented exception).
    s.execute("INSERT INTO src VALUES (1, 'a', 5, 'U'); REFRESH STREAMING TABLE t")
        .unwrap();
    s.execute("INSERT INTO src VALUES (1, NULL, 9, 'D'); REFRESH STREAMING TABLE t")
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(5));
    s.execute("INSERT INTO src VALUES (2, 'b', 1, 'U'); REFRESH STREAMING TABLE t")
        .unwrap();
    s.execute("INSERT INTO src VALUES (1, 'late', 7, 'U'); REFRESH STREAMING TABLE t")
        .unwrap();
    assert_eq!(
        query(&mut s, "SELECT v FROM t WHERE id = 1").1,
        [[Some("late".into())]]
    );
    // Raised again, the same late event would be ignored.
    s.execute("ALTER STREAMING TABLE t SET TBLPROPERTIES ('pipelines.cdc.tombstoneGCThresholdInSeconds' = '86400')").unwrap();
    s.execute("INSERT INTO src VALUES (3, 'c', 5, 'U'), (3, NULL, 9, 'D'); REFRESH STREAMING TABLE t; INSERT INTO src VALUES (4, 'd', 1, 'U'); REFRESH STREAMING TABLE t; INSERT INTO src VALUES (3, 'late', 7, 'U'); REFRESH STREAMING TABLE t").unwrap();
    assert_eq!(
        query(&mut s, "SELECT count(*) FROM t WHERE id = 3").1,
        [[Some("0".into())]]
    );
    // The setting survives a restart (the log replays it where it was made).
    drop(s);
    let mut s = SqlSession::new(Store::open(dir.path()).unwrap()).unwrap();
    assert_eq!(
        query(&mut s, "SELECT v FROM t WHERE id = 1").1,
        [[Some("late".into())]]
    );
    assert_eq!(
        query(&mut s, "SELECT count(*) FROM t WHERE id = 3").1,
        [[Some("0".into())]]
    );
    let e = err(&mut s, "ALTER STREAMING TABLE t SET TBLPROPERTIES ('pipelines.cdc.tombstoneGCThresholdInSeconds' = 'soon')");
    assert!(
        e.contains("tombstoneGCThresholdInSeconds") && e.contains("soon"),
        "{e}"
    );
    let (_, h) = query(&mut s, "DESCRIBE HISTORY t");
    assert_eq!(h[0][2].as_deref(), Some("FLOW f"));
    assert!(h
        .iter()
        .any(|r| r[2].as_deref() == Some("SET TBLPROPERTIES")));
}

#[test]
fn commit_metrics_count_the_rows_the_change_feed_lists() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = SqlSession::new(Store::open(dir.path()).unwrap()).unwrap();
    s.execute("CREATE TABLE ev (id INT, v STRING, seq INT, op STRING)")
        .unwrap();
    for mode in ["SCD TYPE 1", "SCD TYPE 2"] {
        let t = if mode == "SCD TYPE 1" { "one" } else { "two" };
        s.execute(&format!(
            "CREATE OR REFRESH STREAMING TABLE {t} FLOW AUTO CDC FROM stream(ev) KEYS (id)
               APPLY AS DELETE WHEN op = 'D' SEQUENCE BY seq COLUMNS * EXCEPT (seq, op) STORED AS {mode}"
        ))
        .unwrap();
    }
    // Three keys inserted; then one updated and one deleted, in one commit each.
    let steps = [
        "INSERT INTO ev VALUES (1, 'a', 1, 'U'), (2, 'b', 1, 'U'), (3, 'c', 1, 'U')",
        "INSERT INTO ev VALUES (1, 'a2', 2, 'U'), (2, 'b', 2, 'D')",
    ];
    let mut got = Vec::new();
    for step in steps {
        s.execute(step).unwrap();
        for t in ["one", "two"] {
            s.execute(&format!("REFRESH STREAMING TABLE {t}")).unwrap();
            let c = s.store().history(t).unwrap().last().unwrap().clone();
            got.push((t, c.metrics.num_upserted_rows, c.metrics.num_deleted_rows));
        }
    }
    assert_eq!(
        got,
        [
            ("one", 3, 0),
            ("two", 3, 0),
            // SCD1: the update is one upserted row, the delete one deleted row.
            ("one", 1, 1),
            // SCD2: the update closes a version and opens one (two upserted rows); the delete
            // closes a version (its __END_AT set: upserted).
            ("two", 3, 0),
        ]
    );
    // The same counts as the change feed of those commits.
    for (t, v, upserted, deleted) in [("one", 2, 1, 1), ("two", 2, 3, 0)] {
        let (_, feed) = query(
            &mut s,
            &format!("SELECT _change_type FROM table_changes('{t}', {v}, {v})"),
        );
        let count = |ty: &[&str]| {
            feed.iter()
                .filter(|r| ty.contains(&r[0].as_deref().unwrap()))
                .count() as u64
        };
        assert_eq!(count(&["insert", "update_postimage"]), upserted, "{t}");
        assert_eq!(count(&["delete"]), deleted, "{t}");
    }
}

#[test]
fn a_long_change_feed_reports_its_progress_window_by_window() {
    let dir = tempfile::tempdir().unwrap();
    // Commits applied whole, so that the table stays in memory and its feed is read a window
    // of commits at a time.
    let options = asof::StoreOptions {
        commit_part_rows: 1 << 20,
        ..Default::default()
    };
    let mut s = SqlSession::new(Store::open_with(dir.path(), options).unwrap()).unwrap();
    // 150,000 inserts in one commit and 150,000 updates in the next: more than one window.
    s.execute(
        &(ids_into_scd1(150000)
            + "\
         INSERT INTO ev SELECT id, CAST(2 AS BIGINT) AS seq FROM ev; \
         REFRESH STREAMING TABLE t"),
    )
    .unwrap();
    // The total is the row versions the commits wrote or retired: 150,000 written, then
    // 150,000 retired and 150,000 written. The second commit is larger than a window: it is
    // read a group of keys at a time.
    feed_of_two_commits_reports(&mut s, 450000);
}

#[test]
fn a_long_change_feed_reports_its_progress_span_by_span() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = SqlSession::new(Store::open(dir.path()).unwrap()).unwrap();
    // 150,000 inserts in one commit and 150,000 updates in the next: commits applied in parts,
    // after which the table is not in memory.
    s.execute(
        &(ids_into_scd1(150000)
            + "\
         INSERT INTO ev SELECT id, CAST(2 AS BIGINT) AS seq FROM ev; \
         REFRESH STREAMING TABLE t"),
    )
    .unwrap();
    // Read from the table's records a span of keys at a time, both commits in one window (their
    // 450,000 changes held in an external sort until the last span): one pass over 150,000
    // keys.
    feed_of_two_commits_reports(&mut s, 150000);
}

/// `table_changes('t', 1, 2)` counts 450,000 changes and reports its progress once, in two
/// steps or more, from `begin ... of {total}` to `at {total}` and its end.
fn feed_of_two_commits_reports(s: &mut SqlSession, total: u64) {
    let recorded = std::sync::Arc::new(common::Recorded::default());
    s.set_progress(recorded.clone());
    let (_, n) = query(s, "SELECT count(*) FROM table_changes('t', 1, 2)");
    assert_eq!(n, [vec![Some("450000".to_string())]]);
    let calls = recorded.0.lock().unwrap().clone();
    let feed: Vec<&String> = calls
        .iter()
        .skip_while(|c| !c.starts_with("begin reading the change feed of t"))
        .collect();
    let begin = format!("begin reading the change feed of t of {total}");
    assert_eq!(feed.first().map(|c| c.as_str()), Some(begin.as_str()));
    assert!(feed.contains(&&format!("at {total}")), "{calls:?}");
    assert_eq!(feed.last().map(|c| c.as_str()), Some("end"));
    assert_eq!(
        feed.iter().filter(|c| c.starts_with("begin")).count(),
        1,
        "{calls:?}"
    );
    assert!(
        feed.iter().filter(|c| c.starts_with("at ")).count() >= 2,
        "{calls:?}"
    );
}

#[test]
fn a_large_refresh_and_the_rebuild_after_a_vacuum_report_their_progress() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = SqlSession::new(Store::open(dir.path()).unwrap()).unwrap();
    let recorded = std::sync::Arc::new(common::Recorded::default());
    s.set_progress(recorded.clone());
    // 150,000 source rows in one refresh: read and parted, then applied in parts.
    s.execute(
        &(ids_into_scd1(150000)
            + "\
         REFRESH STREAMING TABLE t; \
         INSERT INTO ev VALUES (1, 2); \
         REFRESH STREAMING TABLE t; \
         ALTER STREAMING TABLE t SET TBLPROPERTIES ('asof.vacuum.retentionCheck' = 'false'); \
         VACUUM t RETAIN 0 HOURS"),
    )
    .unwrap();
    let calls = recorded.0.lock().unwrap().clone();
    let begun: Vec<&str> = calls
        .iter()
        .filter(|c| c.starts_with("begin"))
        .map(String::as_str)
        .collect();
    assert_eq!(begun.len(), 3, "{calls:?}");
    assert_eq!(begun[0], "begin reading 150000 source rows for t of 150000");
    assert_eq!(begun[1], "begin applying events to t of 150000");
    // The rebuild counts event blocks (about 5,000 events each here).
    let blocks = begun[2]
        .strip_prefix("begin rebuilding the records of t from its log of ")
        .unwrap_or_else(|| panic!("{calls:?}"));
    assert!(
        (20..100).contains(&blocks.parse::<u32>().unwrap()),
        "{blocks}"
    );
    // Each piece of work ends, and reaches its total before it does.
    for total in ["150000", "150000", blocks] {
        let at = format!("at {total}");
        assert!(calls.contains(&at), "{at}: {calls:?}");
    }
    assert_eq!(calls.iter().filter(|c| *c == "end").count(), 3, "{calls:?}");
    assert_eq!(calls.last().map(String::as_str), Some("end"));
}

/// `DESCRIBE HISTORY` has each commit's cost in memory: the process's peak resident memory while
/// it ran, for commits that apply events (whole or in parts), NULL for the others; kept in the
/// commit record, so a reopen reads the same.
#[cfg(target_os = "linux")]
#[test]
fn a_commit_records_the_peak_memory_of_the_process_while_it_ran() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = SqlSession::new(Store::open(dir.path()).unwrap()).unwrap();
    // 100,000 source rows: more than a part, so the commit is applied in parts.
    s.execute(
        &(ids_into_scd1(100000)
            + "\
         INSERT INTO ev VALUES (1, 2); \
         REFRESH STREAMING TABLE t"),
    )
    .unwrap();
    let peaks = |s: &mut SqlSession| {
        let (names, history) = query(s, "DESCRIBE HISTORY t");
        let col = names.iter().position(|n| n == "peak_memory_bytes").unwrap();
        history
            .iter()
            .map(|r| {
                let bytes = r[col].as_ref().map(|b| b.parse::<u64>().unwrap());
                (r[2].clone().unwrap(), bytes)
            })
            .collect::<Vec<_>>()
    };
    let got = peaks(&mut s);
    let ops: Vec<&str> = got.iter().map(|(op, _)| op.as_str()).collect();
    assert_eq!(ops, ["FLOW f", "FLOW f", "CREATE TABLE"]);
    // A process that ran DataFusion and applied 100,000 rows holds more than 16 MiB; a
    // figure of several GB would be a unit wrong.
    for (op, bytes) in &got[..2] {
        let bytes = bytes.unwrap_or_else(|| panic!("{op}: no peak memory"));
        assert!((16 << 20..16 << 30).contains(&bytes), "{op}: {bytes}");
    }
    assert_eq!(
        got[2].1, None,
        "a commit that applies no events measures nothing"
    );
    // The source's writes (`CREATE TABLE ... AS SELECT`, `INSERT`) measure theirs too.
    let (names, history) = query(&mut s, "DESCRIBE HISTORY ev");
    let col = names.iter().position(|n| n == "peak_memory_bytes").unwrap();
    let writes: Vec<Option<String>> = history
        .iter()
        .filter(|r| r[2].as_deref() == Some("WRITE"))
        .map(|r| r[col].clone())
        .collect();
    assert_eq!(writes.len(), 2, "{history:?}");
    for bytes in writes {
        let bytes: u64 = bytes.expect("a write's peak memory").parse().unwrap();
        assert!((16 << 20..16 << 30).contains(&bytes), "{bytes}");
    }
    drop(s);
    let mut s = SqlSession::new(Store::open(dir.path()).unwrap()).unwrap();
    assert_eq!(peaks(&mut s), got);
}

/// The statements that make source `ev` of `n` rows `(id, seq = 1)` and the SCD TYPE 1 flow `f`
/// into `t` that reads it (its first refresh applies them).
fn ids_into_scd1(n: u64) -> String {
    format!(
        "CREATE TABLE ev AS SELECT CAST(value AS BIGINT) AS id, CAST(1 AS BIGINT) AS seq \
         FROM generate_series(1, {n}); \
         CREATE FLOW f AS AUTO CDC INTO t FROM stream(ev) KEYS (id) SEQUENCE BY seq \
           STORED AS SCD TYPE 1; "
    )
}

/// A query that scans every key of a table not in memory reports the keys it has read (the CLI
/// draws a bar); a query of one key does not.
#[test]
fn a_scan_of_every_key_reports_its_progress_and_a_point_query_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = SqlSession::new(Store::open(dir.path()).unwrap()).unwrap();
    s.execute(&(ids_into_scd1(150000) + "REFRESH STREAMING TABLE t"))
        .unwrap();
    drop(s);
    let mut s = SqlSession::new(Store::open(dir.path()).unwrap()).unwrap();
    let recorded = std::sync::Arc::new(common::Recorded::default());
    s.set_progress(recorded.clone());
    let (_, n) = query(&mut s, "SELECT count(*), max(seq) FROM t");
    assert_eq!(n, [vec![Some("150000".to_string()), Some("1".to_string())]]);
    let calls = recorded.0.lock().unwrap().clone();
    let scan: Vec<&String> = calls
        .iter()
        .skip_while(|c| !c.starts_with("begin scanning t"))
        .collect();
    assert_eq!(
        scan.first().map(|c| c.as_str()),
        Some("begin scanning t of 150000"),
        "{calls:?}"
    );
    assert!(scan.contains(&&"at 150000".to_string()), "{calls:?}");
    assert_eq!(scan.last().map(|c| c.as_str()), Some("end"), "{calls:?}");
    recorded.0.lock().unwrap().clear();
    query(&mut s, "SELECT * FROM t WHERE id = 7");
    let calls = recorded.0.lock().unwrap().clone();
    assert!(
        !calls.iter().any(|c| c.starts_with("begin scanning")),
        "{calls:?}"
    );
}
