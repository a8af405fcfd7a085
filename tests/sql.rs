//! The SQL front door: the reference case run as written, source tables, refresh, temporal
//! clauses, views, and documented errors.

use crate::common;

use asof::{SqlOutput, SqlSession, Store};
use common::{data_dir, read_csv, sorted};

fn session() -> (tempfile::TempDir, SqlSession) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    (dir, SqlSession::new(store).unwrap())
}

/// The rows of the last query of `sql`, sorted, and its column names.
fn query(s: &mut SqlSession, sql: &str) -> (Vec<String>, Vec<Vec<Option<String>>>) {
    let (names, rows) = common::sql_rows(s, sql);
    (names, sorted(rows))
}

fn events_values(rows: &[Vec<Option<String>>]) -> String {
    rows.iter()
        .map(|r| {
            let f = |i: usize| r[i].clone().unwrap();
            format!(
                "('{}', '{}', TIMESTAMP '{}', TIMESTAMP '{}', '{}')",
                f(0),
                f(1),
                f(2),
                f(3),
                f(4)
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A session holding the reference case: its source with all four events, and its flow.
fn reference_session() -> (tempfile::TempDir, SqlSession) {
    let (dir, mut s) = session();
    let (_, events) = read_csv(&data_dir().join("seed_bitemporal/events.csv"));
    s.execute(CREATE_SOURCE).unwrap();
    s.execute(&format!(
        "INSERT INTO company_events VALUES {}",
        events_values(&events)
    ))
    .unwrap();
    s.execute(&std::fs::read_to_string(data_dir().join("seed_bitemporal/flow.sql")).unwrap())
        .unwrap();
    (dir, s)
}

const CREATE_SOURCE: &str = "CREATE TABLE company_events (CompanyId STRING, DataPoint STRING, business_time TIMESTAMP, system_time TIMESTAMP, operation STRING)";

#[test]
fn the_reference_flow_runs_as_written() {
    let (_dir, mut s) = reference_session();
    let (names, rows) = query(&mut s, "SELECT * FROM company_points");
    let (exp_names, exp) = read_csv(&data_dir().join("seed_bitemporal/expected_after_4.csv"));
    assert_eq!(names, exp_names);
    assert_eq!(rows, sorted(exp));
}

#[test]
fn events_one_at_a_time_with_insert_and_refresh() {
    let (_dir, mut s) = session();
    let (_, events) = read_csv(&data_dir().join("seed_bitemporal/events.csv"));
    s.execute(CREATE_SOURCE).unwrap();
    let flow = std::fs::read_to_string(data_dir().join("seed_bitemporal/flow.sql")).unwrap();
    s.execute(&flow).unwrap();
    for n in 1..=4 {
        s.execute(&format!(
            "INSERT INTO company_events VALUES {}; REFRESH STREAMING TABLE company_points",
            events_values(&events[n - 1..n])
        ))
        .unwrap();
        let (_, rows) = query(&mut s, "SELECT * FROM company_points");
        let (_, exp) =
            read_csv(&data_dir().join(format!("seed_bitemporal/expected_after_{n}.csv")));
        assert_eq!(rows, sorted(exp), "after event {n}");
    }
    // Nothing new: REFRESH says so; FULL rebuilds the same table.
    let out = s.execute("REFRESH STREAMING TABLE company_points").unwrap();
    assert!(
        matches!(&out[0], SqlOutput::Done(l) if l.contains("nothing new")),
        "{out:?}"
    );
    s.execute("REFRESH STREAMING TABLE company_points FULL")
        .unwrap();
    let (_, exp) = read_csv(&data_dir().join("seed_bitemporal/expected_after_4.csv"));
    assert_eq!(query(&mut s, "SELECT * FROM company_points").1, sorted(exp));
}

#[test]
fn temporal_clauses_joins_aggregates_and_views() {
    let (dir, mut s) = reference_session();
    let (_, rows) = query(
        &mut s,
        "SELECT DataPoint FROM company_points FOR SYSTEM_TIME AS OF '2025-07-18T12:22:00' FOR BUSINESS_TIME AS OF '2025-07-18T12:10:00'",
    );
    assert_eq!(rows, vec![vec![Some("XFv1".to_string())]]);
    let (_, rows) = query(&mut s, "SELECT p.DataPoint FROM company_points FOR VALID_TIME AS OF '2025-07-18T12:10:00' p WHERE p.__SYSTEM_END_AT IS NULL");
    assert_eq!(rows, vec![vec![Some("XFv3".to_string())]]);
    let (_, rows) = query(&mut s, "SELECT count(*) FROM company_points FOR SYSTEM_TIME BETWEEN '2025-07-18T12:00:00' AND '2025-07-18T12:20:00'");
    assert_eq!(rows, vec![vec![Some("3".to_string())]]);
    let (_, rows) = query(&mut s, "SELECT count(*) FROM company_points FOR SYSTEM_TIME FROM '2025-07-18T12:00:00' TO '2025-07-18T12:20:00'");
    assert_eq!(rows, vec![vec![Some("1".to_string())]]);
    let (_, rows) = query(
        &mut s,
        "SELECT count(*) FROM company_points FOR SYSTEM_TIME ALL WHERE CompanyId = 'A'",
    );
    assert_eq!(rows, vec![vec![Some("6".to_string())]]);
    // Joins and window functions over source and target tables.
    let (_, rows) = query(
        &mut s,
        "SELECT e.operation, count(*) FROM company_events e JOIN company_points p ON e.CompanyId = p.CompanyId AND e.DataPoint = p.DataPoint GROUP BY e.operation",
    );
    assert_eq!(rows.len(), 3);
    let (_, rows) = query(&mut s, "SELECT DataPoint, row_number() OVER (ORDER BY __START_AT, __SYSTEM_START_AT) FROM company_points WHERE __SYSTEM_END_AT IS NULL");
    assert_eq!(rows.len(), 3);
    // A view renames the temporal columns and survives a restart.
    s.execute("CREATE VIEW points_v AS SELECT CompanyId, DataPoint, __START_AT AS valid_from, __END_AT AS valid_to FROM company_points WHERE __SYSTEM_END_AT IS NULL").unwrap();
    drop(s);
    let mut s = SqlSession::new(Store::open(dir.path()).unwrap()).unwrap();
    let (names, rows) = query(&mut s, "SELECT * FROM points_v");
    assert_eq!(names, ["CompanyId", "DataPoint", "valid_from", "valid_to"]);
    assert_eq!(rows.len(), 3);
}

#[test]
fn create_table_as_select_and_scd_flows() {
    let (_dir, mut s) = session();
    s.execute(
        "CREATE TABLE src AS SELECT * FROM (VALUES (1, 'a', 1, 'U'), (1, 'b', 2, 'U'), (2, 'x', 1, 'U'), (2, NULL, 3, 'D')) AS v(id, val, ts, op);
         CREATE OR REFRESH STREAMING TABLE t1;
         CREATE FLOW f1 AS AUTO CDC INTO t1 FROM stream(src) KEYS (id) APPLY AS DELETE WHEN op = \"D\" SEQUENCE BY ts COLUMNS * EXCEPT (op, ts) STORED AS SCD TYPE 1;
         CREATE OR REFRESH STREAMING TABLE t2 FLOW AUTO CDC FROM STREAM src KEYS (id) APPLY AS DELETE WHEN op = 'D' SEQUENCE BY ts COLUMNS * EXCEPT (op) STORED AS SCD TYPE 2",
    )
    .unwrap();
    assert_eq!(
        query(&mut s, "SELECT id, val FROM t1").1,
        vec![vec![Some("1".into()), Some("b".into())]]
    );
    let (_, rows) = query(&mut s, "SELECT id, val, __START_AT, __END_AT FROM t2");
    assert_eq!(rows.len(), 3);
    assert!(rows.contains(&vec![
        Some("2".into()),
        Some("x".into()),
        Some("1".into()),
        Some("3".into())
    ]));
    s.execute("DROP TABLE t2").unwrap();
    assert!(s.execute("SELECT * FROM t2").is_err());
}

#[test]
fn documented_errors() {
    let (_dir, mut s) = session();
    s.execute("CREATE TABLE src (id BIGINT, ts BIGINT, f DOUBLE, upd ARRAY<STRING>, op STRING)")
        .unwrap();
    let err = |s: &mut SqlSession, sql: &str| s.execute(sql).expect_err(sql).to_string();
    let e = err(
        &mut s,
        "CREATE FLOW f AS AUTO CDC INTO t FROM src KEYS (nope) SEQUENCE BY ts",
    );
    assert!(e.contains("KEYS") && e.contains("nope"), "{e}");
    let e = err(&mut s, "CREATE FLOW f AS AUTO CDC INTO t FROM src KEYS (id) APPLY AS TRUNCATE WHEN op = 'T' SEQUENCE BY ts STORED AS SCD TYPE 2");
    assert!(e.contains("TRUNCATE") && e.contains("SCD TYPE 1"), "{e}");
    let e = err(&mut s, "CREATE FLOW f AS AUTO CDC INTO t FROM src KEYS (id) SEQUENCE BY ts COLUMNS TO UPDATE upd STORED AS BITEMPORAL");
    assert!(
        e.contains("COLUMNS TO UPDATE") && e.contains("BITEMPORAL"),
        "{e}"
    );
    let e = err(&mut s, "CREATE FLOW f AS AUTO CDC INTO t FROM src KEYS (id) IGNORE NULL UPDATES SEQUENCE BY ts COLUMNS TO UPDATE upd");
    assert!(
        e.contains("IGNORE NULL UPDATES") && e.contains("COLUMNS TO UPDATE"),
        "{e}"
    );
    let e = err(
        &mut s,
        "CREATE FLOW f AS AUTO CDC INTO t FROM src KEYS (id) SEQUENCE BY f",
    );
    assert!(e.contains("cannot be ordered"), "{e}");
    let e = err(
        &mut s,
        "CREATE FLOW f AS AUTO CDC INTO t FROM missing KEYS (id) SEQUENCE BY ts",
    );
    assert!(e.contains("missing"), "{e}");
    let e = err(
        &mut s,
        "CREATE FLOW f AS AUTO CDC INTO t FROM src KEYS id SEQUENCE BY ts",
    );
    assert!(e.contains("syntax error at line 1, column 48"), "{e}");
    // A NULL sequence in the source: the flow is created, its first refresh is refused whole.
    s.execute("INSERT INTO src VALUES (1, NULL, 1.0, NULL, 'U')")
        .unwrap();
    let e = err(
        &mut s,
        "CREATE FLOW f AS AUTO CDC INTO t FROM src KEYS (id) SEQUENCE BY ts",
    );
    assert!(
        e.contains("`ts`") && e.contains("NULL") && e.contains("1 row"),
        "{e}"
    );
    let e = err(&mut s, "SELEC 1");
    assert!(
        e.to_lowercase().contains("syntax") || e.contains("Expected"),
        "{e}"
    );
}

#[test]
fn key_filters_are_pushed_into_the_storage_scan() {
    let (_dir, mut s) = reference_session();
    let plan = |s: &mut SqlSession, sql: &str| {
        query(s, &format!("EXPLAIN {sql}"))
            .1
            .iter()
            .map(|r| r[1].clone().unwrap_or_default())
            .collect::<Vec<_>>()
            .join("\n")
    };
    // The key equality is taken by the scan: no filter is left for DataFusion to run.
    let p = plan(
        &mut s,
        "SELECT DataPoint FROM company_points WHERE CompanyId = 'A'",
    );
    assert!(!p.contains("FilterExec"), "{p}");
    // The scan streams from the store (no in-memory copy of the table), with the key taken.
    assert!(
        p.contains("StoreScanExec: table=company_points, keys=Eq"),
        "{p}"
    );
    assert!(
        !p.contains("MemoryExec") && !p.contains("DataSourceExec"),
        "{p}"
    );
    // Another predicate stays a DataFusion filter.
    let p = plan(
        &mut s,
        "SELECT DataPoint FROM company_points WHERE DataPoint = 'XFv1'",
    );
    assert!(p.contains("FilterExec"), "{p}");
    assert_eq!(
        query(
            &mut s,
            "SELECT count(*) FROM company_points WHERE CompanyId = 'A'"
        )
        .1,
        vec![vec![Some("6".to_string())]]
    );
    assert_eq!(
        query(
            &mut s,
            "SELECT count(*) FROM company_points WHERE CompanyId = 'B'"
        )
        .1,
        vec![vec![Some("0".to_string())]]
    );
}

/// A statement reads every table at the version it had when the statement started: a query that
/// reads a table twice gives one answer for both, while another session commits to it.
#[test]
fn a_query_reading_a_table_twice_sees_one_version_while_commits_land() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let mut writer = SqlSession::new(store.clone()).unwrap();
    writer
        .execute(
            "CREATE TABLE ev (id INT, seq INT);
             CREATE OR REFRESH STREAMING TABLE t FLOW AUTO CDC FROM stream(ev) KEYS (id)
               SEQUENCE BY seq STORED AS SCD TYPE 2",
        )
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let stopped = stop.clone();
    let writes = std::thread::spawn(move || {
        let mut i = 0;
        while !stopped.load(Ordering::Relaxed) {
            writer
                .execute(&format!(
                    "INSERT INTO ev VALUES ({}, {i}); REFRESH STREAMING TABLE t",
                    i % 7
                ))
                .unwrap();
            i += 1;
        }
        i
    });
    let mut reader = SqlSession::new(store).unwrap();
    for _ in 0..150 {
        let out = reader
            .execute(
                "SELECT (SELECT count(*) FROM t) AS a, (SELECT count(*) FROM t WHERE id >= 0) AS b,
                        (SELECT count(*) FROM ev) AS c,
                        (SELECT count(*) FROM table_changes('t', 0) WHERE _change_type = 'insert') AS d",
            )
            .unwrap();
        let Some(SqlOutput::Batches(_, batches)) = out.last() else {
            panic!("a query answers rows")
        };
        let cell = |c: usize| {
            arrow::util::display::array_value_to_string(batches[0].column(c), 0).unwrap()
        };
        assert_eq!(cell(0), cell(1), "one query, two versions of t");
        // Every row version of this SCD TYPE 2 table was an insert in the feed: an open-ended
        // change feed ends at the version the statement reads.
        assert_eq!(cell(3), cell(0), "the change feed read another version");
        // Each event makes at most one row version, and the source is pinned after the table:
        // the table never holds more rows than the source had events.
        assert!(cell(2).parse::<u64>().unwrap() >= cell(0).parse::<u64>().unwrap());
    }
    stop.store(true, Ordering::Relaxed);
    assert!(writes.join().unwrap() > 0);
}

/// A query's operators share a bounded pool of memory (`SessionOptions::query_memory`): a sort
/// and a grouping larger than it spill to temporary files and give the same rows; a join whose
/// held side needs more fails with an error that names the limit, and the session goes on.
#[test]
fn a_sort_larger_than_the_query_memory_spills_and_a_join_that_cannot_fails_naming_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let options = asof::SessionOptions::default().with_query_memory(4 << 20);
    let mut s = SqlSession::with_options(store, options).unwrap();
    // 300,000 rows of about 60 bytes: 18 MB, more than four times the pool.
    s.execute(
        "CREATE TABLE src AS SELECT value AS id, value % 7 AS g, \
         concat(repeat('x', 50), CAST(value AS STRING)) AS pad FROM range(300000)",
    )
    .unwrap();
    let (_, sorted_rows) = common::sql_rows(&mut s, "SELECT id, pad FROM src ORDER BY pad DESC");
    assert_eq!(sorted_rows.len(), 300000);
    // Strings sort by character: "x…99999" before "x…299999" before "x…0" (descending).
    assert_eq!(sorted_rows[0][0].as_deref(), Some("99999"));
    assert_eq!(sorted_rows[299999][0].as_deref(), Some("0"));
    let (_, groups) = query(
        &mut s,
        "SELECT count(*), sum(n) FROM (SELECT pad, count(*) AS n FROM src GROUP BY pad)",
    );
    assert_eq!(groups, [common::cells(&["300000", "300000"])]);
    let e = s
        .execute("SELECT count(*) FROM src a JOIN src b ON a.pad = b.pad")
        .unwrap_err()
        .to_string();
    assert!(e.contains("--query-mib"), "{e}");
    let (_, count) = query(&mut s, "SELECT count(*) FROM src WHERE g = 3");
    assert_eq!(count, [common::cells(&["42857"])]);
}

#[test]
fn a_script_reads_only_when_every_statement_is_a_query_or_shows_what_is_stored() {
    let reads = [
        "SELECT 1",
        "WITH x AS (SELECT 1 AS a) SELECT a FROM x; VALUES (1)",
        "select * from t; DESCRIBE HISTORY t; DESCRIBE t; SHOW TBLPROPERTIES t",
        "SELECT * FROM table_changes('t', 1)",
    ];
    for sql in reads {
        assert!(SqlSession::reads_only(sql), "{sql}");
    }
    let writes = [
        "SELECT 1; INSERT INTO t VALUES (1)",
        "CREATE TABLE s AS SELECT 1 AS a",
        "CREATE VIEW v AS SELECT 1",
        "UPDATE t SET a = 1",
        "DELETE FROM t WHERE a = 1",
        "REFRESH STREAMING TABLE t",
        "VACUUM t",
        "ERASE FROM t WHERE id = 1 REASON 'r'",
        "SELECT 1; DROP STREAMING TABLE t",
        "EXPORT TABLE t TO DELTA '/tmp/x'",
        // A script that does not parse is not known to only read.
        "SELECT 'unclosed",
    ];
    for sql in writes {
        assert!(!SqlSession::reads_only(sql), "{sql}");
    }
}
