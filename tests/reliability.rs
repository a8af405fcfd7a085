//! A store of record never loses, fakes or half-applies a write. Each test here is a way it once
//! did, tried as a user would (SQL, the CLI), with the exact outcome asserted.

use crate::common;

use asof::{ExternalAccess, SessionOptions, SqlOutput, SqlSession, Store};
use common::sql_rows;

fn session(dir: &std::path::Path) -> SqlSession {
    SqlSession::new(Store::open(dir).unwrap()).unwrap()
}

fn err(s: &mut SqlSession, sql: &str) -> String {
    match s.execute(sql) {
        Ok(out) => panic!("{sql}: expected an error, got {out:?}"),
        Err(e) => e.to_string(),
    }
}

fn rows(s: &mut SqlSession, sql: &str) -> Vec<Vec<String>> {
    sql_rows(s, sql)
        .1
        .into_iter()
        .map(|r| r.into_iter().map(|v| v.unwrap_or_default()).collect())
        .collect()
}

fn history_ops(s: &mut SqlSession, table: &str) -> Vec<String> {
    let (names, rows) = sql_rows(s, &format!("DESCRIBE HISTORY {table}"));
    let op = names.iter().position(|n| n == "operation").unwrap();
    let mut ops: Vec<(u64, String)> = rows
        .iter()
        .map(|r| {
            (
                r[0].clone().unwrap().parse().unwrap(),
                r[op].clone().unwrap(),
            )
        })
        .collect();
    ops.sort();
    ops.into_iter().map(|(_, o)| o).collect()
}

fn asof(db: &std::path::Path, args: &[&str]) -> (bool, String, String) {
    common::run_asof(db, args)
}

/// 20,000 rows, three DataFusion batches; `v` is 1.7 at row 14,900 when `bad`.
fn twenty_thousand(bad: bool) -> String {
    let v = if bad {
        "CASE WHEN value = 14900 THEN 1.7 ELSE CAST(value AS DOUBLE) END"
    } else {
        "value"
    };
    format!("SELECT value AS id, {v} AS v FROM range(20000)")
}

#[test]
fn insert_select_is_one_commit_and_a_bad_row_at_14900_applies_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(dir.path());
    s.execute("CREATE TABLE src (id BIGINT, v BIGINT)").unwrap();
    let e = err(
        &mut s,
        &format!("INSERT INTO src {}", twenty_thousand(true)),
    );
    assert!(
        e.contains("`v`") && e.contains("Int64") && e.contains("(1 row)"),
        "{e}"
    );
    assert_eq!(rows(&mut s, "SELECT count(*) FROM src"), [["0"]]);
    assert_eq!(history_ops(&mut s, "src"), ["CREATE TABLE"]);

    let out = s
        .execute(&format!("INSERT INTO src {}", twenty_thousand(false)))
        .unwrap();
    assert!(
        matches!(&out[0], SqlOutput::Done(l) if l == "20000 rows inserted into src (20000 in all)"),
        "{out:?}"
    );
    assert_eq!(history_ops(&mut s, "src"), ["CREATE TABLE", "WRITE"]);
    // After a reopen too.
    drop(s);
    let mut s = session(dir.path());
    assert_eq!(
        rows(&mut s, "SELECT count(*), sum(v) FROM src"),
        [["20000", "199990000"]]
    );
}

#[test]
fn create_table_as_select_is_one_commit_or_no_table() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(dir.path());
    // The query fails in its second batch (row 14,900): no table, no rows.
    let e = err(
        &mut s,
        "CREATE TABLE t AS SELECT value AS id, 10 / (value - 14900) AS v FROM range(20000)",
    );
    assert!(e.to_lowercase().contains("divide by zero"), "{e}");
    let e = err(&mut s, "SELECT * FROM t");
    assert!(e.contains("not found"), "no table t: {e}");
    s.execute(&format!("CREATE TABLE t AS {}", twenty_thousand(false)))
        .unwrap();
    assert_eq!(history_ops(&mut s, "t"), ["CREATE TABLE", "WRITE"]);
    assert_eq!(rows(&mut s, "SELECT count(*) FROM t"), [["20000"]]);
}

#[test]
fn a_fraction_into_bigint_is_an_error_naming_the_column_and_rows() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(dir.path());
    s.execute("CREATE TABLE src (id BIGINT, n BIGINT)").unwrap();
    let e = err(
        &mut s,
        "INSERT INTO src VALUES (1, 1.7), (2, 2.5), (3, 3.0)",
    );
    assert!(e.contains("`n`") && e.contains("(2 rows)"), "{e}");
    assert_eq!(rows(&mut s, "SELECT count(*) FROM src"), [["0"]]);
    // Whole values cast as before.
    s.execute("INSERT INTO src VALUES (1, 1.0), (2, 2)")
        .unwrap();
    assert_eq!(
        rows(&mut s, "SELECT id, n FROM src ORDER BY id"),
        [["1", "1"], ["2", "2"]]
    );
}

#[test]
fn session_only_ddl_is_refused_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(dir.path());
    s.execute("CREATE TABLE src (id BIGINT, v STRING); INSERT INTO src VALUES (1, 'a'), (2, 'b')")
        .unwrap();
    let e = err(&mut s, "BEGIN TRANSACTION");
    assert!(
        e.contains("not supported") || e.contains("not implemented"),
        "{e}"
    );
    // A DML statement on a source that fails part-way changes nothing.
    let e = err(
        &mut s,
        "UPDATE src SET v = 'z', id = CAST('x' AS BIGINT) WHERE id = 2",
    );
    assert!(!e.is_empty());
    assert_eq!(
        rows(&mut s, "SELECT id, v FROM src ORDER BY id"),
        [["1", "a"], ["2", "b"]]
    );
    assert_eq!(history_ops(&mut s, "src"), ["CREATE TABLE", "WRITE"]);
}

/// The source of the wedge: a row whose sequence is NULL.
const WEDGE: &str = "CREATE TABLE ev (id BIGINT, seq BIGINT, v STRING);
    INSERT INTO ev VALUES (1, 1, 'a'), (2, 1, 'b');
    CREATE OR REFRESH STREAMING TABLE t FLOW AUTO CDC FROM stream(ev) KEYS (id) SEQUENCE BY seq
      COLUMNS * EXCEPT (seq) STORED AS SCD TYPE 2;
    INSERT INTO ev VALUES (1, 2, 'a2'), (3, NULL, 'bad');";

#[test]
fn a_null_sequence_no_longer_wedges_a_flow_an_expectation_drops_it_and_keeps_history() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(dir.path());
    s.execute(WEDGE).unwrap();
    // The refresh is rejected, and the message names the way out.
    let e = err(&mut s, "REFRESH STREAMING TABLE t");
    assert!(
        e.contains("`seq`")
            && e.contains("(1 row)")
            && e.contains("CONSTRAINT seq_present EXPECT (seq IS NOT NULL) ON VIOLATION DROP ROW"),
        "{e}"
    );
    // The way out: declare the expectation; the refresh applies the good row, drops the bad one.
    let out = s
        .execute(
            "CREATE OR REFRESH STREAMING TABLE t (CONSTRAINT seq_present EXPECT (seq IS NOT NULL) ON VIOLATION DROP ROW)",
        )
        .unwrap();
    assert!(
        matches!(&out[0], SqlOutput::Done(l) if l.contains("expectations set (commit 2)") && l.contains("commit 3 read 1 events")),
        "{out:?}"
    );
    assert_eq!(
        history_ops(&mut s, "t"),
        ["CREATE TABLE", "FLOW t", "SET EXPECTATIONS", "FLOW t"]
    );
    let (names, h) = sql_rows(&mut s, "DESCRIBE HISTORY t");
    let col = |n: &str| names.iter().position(|c| c == n).unwrap();
    let last = h.iter().find(|r| r[0].as_deref() == Some("3")).unwrap();
    assert_eq!(last[col("num_dropped_rows")].as_deref(), Some("1"));
    assert_eq!(last[col("num_events_read")].as_deref(), Some("1"));
    assert!(
        last[col("operationParameters")]
            .as_deref()
            .unwrap()
            .contains(r#""expectation.seq_present":"1 rows failed (drop row)""#),
        "{last:?}"
    );
    // History kept: version 1 still reads, and the table moved on.
    assert_eq!(
        rows(&mut s, "SELECT id, v FROM t VERSION AS OF 1 ORDER BY id"),
        [["1", "a"], ["2", "b"]]
    );
    assert_eq!(
        rows(
            &mut s,
            "SELECT id, v FROM t WHERE __END_AT IS NULL ORDER BY id"
        ),
        [["1", "a2"], ["2", "b"]]
    );
    // Later refreshes and a full refresh work, and the expectation survives a reopen.
    drop(s);
    let mut s = session(dir.path());
    s.execute("INSERT INTO ev VALUES (4, 1, 'd'), (5, NULL, 'bad2'); REFRESH STREAMING TABLE t; REFRESH STREAMING TABLE t FULL")
        .unwrap();
    assert_eq!(
        rows(
            &mut s,
            "SELECT id, v FROM t WHERE __END_AT IS NULL ORDER BY id"
        ),
        [["1", "a2"], ["2", "b"], ["4", "d"]]
    );
}

#[test]
fn an_expectation_that_fails_the_update_applies_nothing_and_says_which() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(dir.path());
    s.execute(
        "CREATE TABLE ev (id BIGINT, seq BIGINT, v STRING);
         CREATE OR REFRESH STREAMING TABLE t (CONSTRAINT positive EXPECT (id > 0) ON VIOLATION FAIL UPDATE, CONSTRAINT named EXPECT (v IS NOT NULL));
         CREATE FLOW f AS AUTO CDC INTO t FROM stream(ev) KEYS (id) SEQUENCE BY seq STORED AS SCD TYPE 1;
         INSERT INTO ev VALUES (1, 1, NULL), (-2, 1, 'x'), (-3, 1, 'y');",
    )
    .unwrap();
    let e = err(&mut s, "REFRESH STREAMING TABLE t");
    assert!(
        e.contains("2 rows violate expectation `positive` (id > 0)")
            && e.contains("nothing applied"),
        "{e}"
    );
    assert_eq!(history_ops(&mut s, "t"), ["CREATE TABLE"]);
    // An expectation on a column the source does not have is refused when it is declared.
    let e = err(
        &mut s,
        "CREATE OR REFRESH STREAMING TABLE t (CONSTRAINT c EXPECT (nope > 0) ON VIOLATION DROP ROW)",
    );
    assert!(e.contains("expectation `c`") && e.contains("nope"), "{e}");
    assert_eq!(history_ops(&mut s, "t"), ["CREATE TABLE"]);
}

#[test]
fn a_flow_condition_on_a_missing_column_is_refused_when_the_flow_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(dir.path());
    s.execute("CREATE TABLE ev (id BIGINT, seq BIGINT, op STRING)")
        .unwrap();
    let e = err(
        &mut s,
        "CREATE OR REFRESH STREAMING TABLE t FLOW AUTO CDC FROM stream(ev) KEYS (id)
           APPLY AS DELETE WHEN operation = 'DELETE' SEQUENCE BY seq STORED AS SCD TYPE 1",
    );
    assert!(
        e.contains("APPLY AS DELETE WHEN") && e.contains("operation"),
        "{e}"
    );
    // Nothing was persisted: the same name is free.
    assert!(s.execute("SELECT * FROM t").is_err());
    s.execute(
        "CREATE OR REFRESH STREAMING TABLE t FLOW AUTO CDC FROM stream(ev) KEYS (id)
           APPLY AS DELETE WHEN op = 'DELETE' SEQUENCE BY seq STORED AS SCD TYPE 1",
    )
    .unwrap();
}

#[test]
fn a_csv_header_with_a_repeated_name_is_an_error_not_a_dropped_column() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("dup.csv");
    std::fs::write(&csv, "id,id,v\n1,2,x\n").unwrap();
    let mut s = session(&dir.path().join("db"));
    let e = err(
        &mut s,
        &format!(
            "SELECT * FROM read_files('{}', format => 'csv', header => true)",
            csv.display()
        ),
    );
    assert!(
        e.contains("names column `id` twice (columns 1 and 2)"),
        "{e}"
    );
    drop(s);
    // The CLI's CSV ingest likewise.
    let flow = dir.path().join("f.flow.json");
    std::fs::copy(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("examples/company_points/company_points_cdc.flow.json"),
        &flow,
    )
    .unwrap();
    let db = dir.path().join("db");
    let (ok, _, e) = asof(&db, &["create-flow", flow.to_str().unwrap()]);
    assert!(ok, "{e}");
    let (ok, _, e) = asof(
        &db,
        &["ingest", "company_points_cdc", csv.to_str().unwrap()],
    );
    assert!(!ok && e.contains("names column `id` twice"), "{e}");
}

#[test]
fn a_failing_script_says_which_statement_failed_and_what_is_committed() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let script = "CREATE TABLE a (x BIGINT);\nINSERT INTO a VALUES (1);\nSELECT x FROM a;\n\nINSERT INTO a VALUES (1.5);\nINSERT INTO a VALUES (2);";
    let (ok, out, e) = asof(&db, &["sql", script]);
    assert!(!ok);
    assert!(out.contains("| 1 |"), "the first statements' output: {out}");
    assert!(
        e.contains("statement 4 (line 5) failed")
            && e.contains("statements 1..3 are committed; statements 4..5 are not"),
        "{e}"
    );
    let (ok, out, _) = asof(&db, &["sql", "SELECT count(*) AS n FROM a"]);
    assert!(ok && out.contains("| 1 |"), "{out}");
}

#[test]
fn every_failing_cli_command_exits_non_zero() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    for args in [
        &["history", "nope"][..],
        &["scan", "nope"],
        &["sql", "SELECT * FROM nope"],
        &["ingest", "nope", "nope.csv"],
    ] {
        let (ok, _, e) = asof(&db, args);
        assert!(!ok && e.starts_with("error: "), "{args:?}: {e}");
    }
}

fn store_with_a_commit(dir: &std::path::Path) {
    let mut s = session(dir);
    s.execute("CREATE TABLE a (x BIGINT); INSERT INTO a VALUES (1)")
        .unwrap();
}

#[test]
fn a_lost_manifest_is_reported_and_repair_rebuilds_it() {
    for loss in ["missing", "empty", "damaged"] {
        let dir = tempfile::tempdir().unwrap();
        store_with_a_commit(dir.path());
        let manifest = dir.path().join("asof.manifest");
        let text = std::fs::read_to_string(&manifest).unwrap();
        assert!(text.starts_with("asof-manifest 1\n"), "{text}");
        match loss {
            "missing" => std::fs::remove_file(&manifest).unwrap(),
            "empty" => std::fs::write(&manifest, "").unwrap(),
            _ => std::fs::write(&manifest, "garbage\n").unwrap(),
        }
        let e = Store::open(dir.path()).err().expect("refused").to_string();
        assert!(
            e.contains(loss) && e.contains("asof --db DIR repair"),
            "{loss}: {e}"
        );
        let (ok, out, e) = asof(dir.path(), &["repair"]);
        assert!(ok, "{e}");
        assert!(
            out.contains("manifest rebuilt from 0 tables and 1 source tables"),
            "{out}"
        );
        let mut s = session(dir.path());
        assert_eq!(rows(&mut s, "SELECT x FROM a"), [["1"]]);
        assert_eq!(
            std::fs::read_to_string(&manifest).unwrap(),
            text,
            "{loss}: rebuilt as it was"
        );
    }
}

#[test]
fn a_new_store_has_a_manifest_before_its_first_commit() {
    let dir = tempfile::tempdir().unwrap();
    drop(Store::open(dir.path()).unwrap());
    assert_eq!(
        std::fs::read_to_string(dir.path().join("asof.manifest")).unwrap(),
        "asof-manifest 1\n"
    );
}

#[test]
fn a_second_process_waits_for_the_lock_and_names_its_holder() {
    let dir = tempfile::tempdir().unwrap();
    store_with_a_commit(dir.path());
    let held = Store::open(dir.path()).unwrap();
    let (ok, _, e) = asof(dir.path(), &["--wait", "0.2", "tables"]);
    assert!(!ok);
    assert!(
        e.contains(&format!("in use by process {}", std::process::id()))
            && e.contains("waited 200 ms")
            && e.contains("--wait"),
        "{e}"
    );
    // With a long enough wait it gets in once the holder lets go.
    let release = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(700));
        drop(held);
    });
    let (ok, _, e) = asof(dir.path(), &["--wait", "20", "sql", "SELECT x FROM a"]);
    release.join().unwrap();
    assert!(ok, "{e}");
}

#[test]
fn a_sandboxed_session_refuses_files_and_settings_and_still_queries() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("x.csv");
    std::fs::write(&csv, "a,b\n1,2\n").unwrap();
    let out = dir.path().join("out.csv");
    let store = Store::open(dir.path().join("db")).unwrap();
    let mut s = SqlSession::with_options(
        store,
        SessionOptions::default().with_external_access(ExternalAccess::Denied),
    )
    .unwrap();
    s.execute("CREATE TABLE a (x BIGINT); INSERT INTO a VALUES (1)")
        .unwrap();
    for stmt in [
        format!("SELECT * FROM read_files('{}')", csv.display()),
        format!("COPY (SELECT 1) TO '{}'", out.display()),
        format!(
            "CREATE EXTERNAL TABLE e STORED AS CSV LOCATION '{}'",
            csv.display()
        ),
        "SET datafusion.execution.batch_size = 1".to_string(),
        // EXPLAIN ANALYZE runs what it explains.
        format!("EXPLAIN ANALYZE COPY (SELECT 1) TO '{}'", out.display()),
        format!(
            "CREATE OR REFRESH STREAMING TABLE t FLOW AUTO CDC FROM stream(read_files('{}')) KEYS (a) SEQUENCE BY b",
            csv.display()
        ),
    ] {
        let e = err(&mut s, &stmt);
        assert!(e.contains("refused") && e.contains("Denied"), "{stmt}: {e}");
    }
    assert!(!out.exists());
    assert_eq!(rows(&mut s, "SELECT x FROM a"), [["1"]]);
    // The default session allows them.
    let mut open = session(&dir.path().join("db2"));
    assert_eq!(
        rows(
            &mut open,
            &format!(
                "SELECT count(*) FROM read_files('{}', header => true)",
                csv.display()
            )
        ),
        [["1"]]
    );
}

#[test]
fn a_refused_read_files_flow_leaves_nothing_and_can_be_run_again() {
    let dir = tempfile::tempdir().unwrap();
    let files = dir.path().join("in");
    std::fs::create_dir(&files).unwrap();
    std::fs::write(files.join("a.csv"), "id,seq,op\n1,1,U\n").unwrap();
    let mut s = session(&dir.path().join("db"));
    let create = |cond: &str| {
        format!(
            "CREATE OR REFRESH STREAMING TABLE t FLOW AUTO CDC FROM stream(read_files('{}', format => 'csv', header => true)) KEYS (id) APPLY AS DELETE WHEN {cond} SEQUENCE BY seq STORED AS SCD TYPE 1",
            files.display()
        )
    };
    let e = err(&mut s, &create("operation = 'D'"));
    assert!(e.contains("operation"), "{e}");
    // Corrected, the same statement runs: no hidden source was left behind to be "in the way".
    s.execute(&create("op = 'D'")).unwrap();
    assert_eq!(rows(&mut s, "SELECT id FROM t"), [["1"]]);
}

#[test]
fn vacuum_keeps_the_checkpoint_of_every_flow_of_a_table() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(dir.path());
    s.execute(
        "CREATE TABLE a (id BIGINT, seq BIGINT); CREATE TABLE b (id BIGINT, seq BIGINT);
         INSERT INTO a VALUES (1, 1); INSERT INTO b VALUES (2, 1);
         CREATE FLOW fa AS AUTO CDC INTO t FROM stream(a) KEYS (id) SEQUENCE BY seq STORED AS SCD TYPE 2;
         CREATE FLOW fb AS AUTO CDC INTO t FROM stream(b) KEYS (id) SEQUENCE BY seq STORED AS SCD TYPE 2;
         INSERT INTO b VALUES (3, 1); REFRESH STREAMING TABLE t;
         ALTER STREAMING TABLE t SET TBLPROPERTIES ('asof.vacuum.retentionCheck' = 'false');
         VACUUM t RETAIN 0 HOURS;",
    )
    .unwrap();
    // Nothing new: neither flow reads its source again (fa's last commit was vacuumed away).
    let out = s.execute("REFRESH STREAMING TABLE t").unwrap();
    assert!(
        matches!(&out[0], SqlOutput::Done(l) if l == "fa: nothing new\nfb: nothing new"),
        "{out:?}"
    );
    drop(s);
    let mut s = session(dir.path());
    s.execute("INSERT INTO a VALUES (4, 1); REFRESH STREAMING TABLE t")
        .unwrap();
    let (names, h) = sql_rows(&mut s, "DESCRIBE HISTORY t");
    let read = names.iter().position(|n| n == "num_events_read").unwrap();
    assert_eq!(h[0][read].as_deref(), Some("1"), "only the new row: {h:?}");
    assert_eq!(
        rows(&mut s, "SELECT id FROM t ORDER BY id"),
        [["1"], ["2"], ["3"], ["4"]]
    );
}

#[test]
fn a_row_dropped_by_two_expectations_counts_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(dir.path());
    s.execute(
        "CREATE TABLE ev (id BIGINT, seq BIGINT);
         INSERT INTO ev VALUES (1, 1), (-1, NULL), (-2, 3);
         CREATE OR REFRESH STREAMING TABLE t (CONSTRAINT has_seq EXPECT (seq IS NOT NULL) ON VIOLATION DROP ROW, CONSTRAINT pos EXPECT (id > 0) ON VIOLATION DROP ROW)
           FLOW AUTO CDC FROM stream(ev) KEYS (id) SEQUENCE BY seq STORED AS SCD TYPE 1",
    )
    .unwrap();
    let (names, h) = sql_rows(&mut s, "DESCRIBE HISTORY t");
    let col = |n: &str| names.iter().position(|c| c == n).unwrap();
    assert_eq!(h[0][col("num_dropped_rows")].as_deref(), Some("2"));
    assert_eq!(h[0][col("num_events_read")].as_deref(), Some("1"));
    let params = h[0][col("operationParameters")].clone().unwrap();
    assert!(
        params.contains(r#""expectation.has_seq":"1 rows failed (drop row)""#)
            && params.contains(r#""expectation.pos":"2 rows failed (drop row)""#),
        "{params}"
    );
}

#[test]
fn a_flow_whose_first_refresh_fails_creates_no_table() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(dir.path());
    s.execute("CREATE TABLE ev (id BIGINT, seq BIGINT); INSERT INTO ev VALUES (1, NULL)")
        .unwrap();
    let create = "CREATE OR REFRESH STREAMING TABLE t FLOW AUTO CDC FROM stream(ev) KEYS (id) SEQUENCE BY seq STORED AS SCD TYPE 1";
    let e = err(&mut s, create);
    assert!(
        e.contains("was not created, nothing was committed")
            && e.contains("CONSTRAINT seq_present"),
        "{e}"
    );
    assert!(s.execute("SELECT * FROM t").is_err(), "no table t");
    // With the expectation declared, the same statement goes through.
    s.execute(&create.replace(
        "TABLE t FLOW",
        "TABLE t (CONSTRAINT seq_present EXPECT (seq IS NOT NULL) ON VIOLATION DROP ROW) FLOW",
    ))
    .unwrap();
    assert_eq!(rows(&mut s, "SELECT count(*) FROM t"), [["0"]]);
}

#[test]
fn declaring_an_existing_table_with_other_properties_is_an_error_not_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(dir.path());
    s.execute(
        "CREATE TABLE ev (id BIGINT, seq BIGINT);
         CREATE OR REFRESH STREAMING TABLE t TBLPROPERTIES ('owner' = 'audit');
         CREATE FLOW f AS AUTO CDC INTO t FROM stream(ev) KEYS (id) SEQUENCE BY seq;",
    )
    .unwrap();
    // The same declaration again is a refresh; a different one is refused.
    s.execute("CREATE OR REFRESH STREAMING TABLE t TBLPROPERTIES ('owner' = 'audit')")
        .unwrap();
    let e = err(
        &mut s,
        "CREATE OR REFRESH STREAMING TABLE t TBLPROPERTIES ('owner' = 'ops')",
    );
    assert!(
        e.contains("ALTER STREAMING TABLE t SET TBLPROPERTIES"),
        "{e}"
    );
}

#[test]
fn a_prepared_statement_is_checked_like_the_statement_it_holds() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(dir.path());
    s.execute("CREATE TABLE src (id BIGINT); INSERT INTO src VALUES (1)")
        .unwrap();
    let e = err(&mut s, "PREPARE p AS DELETE FROM src WHERE id = 1");
    assert!(e.contains("nothing was changed"), "{e}");
    let e = err(&mut s, "EXPLAIN ANALYZE DELETE FROM src WHERE id = 1");
    assert!(e.contains("nothing was changed"), "{e}");
    assert_eq!(rows(&mut s, "SELECT id FROM src"), [["1"]]);
}

#[test]
fn a_declaration_survives_a_flow_whose_first_refresh_failed() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(dir.path());
    s.execute(
        "CREATE TABLE bad (id BIGINT, seq BIGINT); INSERT INTO bad VALUES (-1, 1);
         CREATE TABLE good (id BIGINT, seq BIGINT); INSERT INTO good VALUES (1, 1);
         CREATE OR REFRESH STREAMING TABLE t (CONSTRAINT pos EXPECT (id > 0) ON VIOLATION FAIL UPDATE);",
    )
    .unwrap();
    let e = err(
        &mut s,
        "CREATE FLOW f AS AUTO CDC INTO t FROM stream(bad) KEYS (id) SEQUENCE BY seq",
    );
    assert!(e.contains("expectation `pos`"), "{e}");
    // The next flow into `t` creates it with the declared expectation.
    s.execute("CREATE FLOW g AS AUTO CDC INTO t FROM stream(good) KEYS (id) SEQUENCE BY seq")
        .unwrap();
    s.execute("INSERT INTO good VALUES (-5, 2)").unwrap();
    let e = err(&mut s, "REFRESH STREAMING TABLE t");
    assert!(e.contains("expectation `pos`"), "{e}");
    assert_eq!(rows(&mut s, "SELECT id FROM t"), [["1"]]);
}

#[test]
fn a_source_table_written_before_source_commit_records_opens_with_its_rows() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mut s = session(dir.path());
        s.execute("CREATE TABLE src (id BIGINT); INSERT INTO src VALUES (1), (2); INSERT INTO src VALUES (3)")
            .unwrap();
    }
    // What an early build wrote: the same chunks, no `H` commit records.
    {
        use asof::KvStore;
        let kv = asof::SledKv::open(dir.path(), 1 << 20).unwrap();
        let mut b = asof::WriteBatch::default();
        for kv in kv.scan_prefix(b"H") {
            b.delete(kv.unwrap().0);
        }
        kv.write(b).unwrap();
    }
    // Nor a manifest (it follows commit records).
    std::fs::remove_file(dir.path().join("asof.manifest")).unwrap();
    let mut s = session(dir.path());
    assert_eq!(
        rows(&mut s, "SELECT count(*), sum(id) FROM src"),
        [["3", "6"]]
    );
    // A new append takes the next append number: nothing is overwritten.
    s.execute("INSERT INTO src VALUES (4)").unwrap();
    drop(s);
    let mut s = session(dir.path());
    assert_eq!(
        rows(&mut s, "SELECT count(*), sum(id) FROM src"),
        [["4", "10"]]
    );
}

#[test]
fn a_failed_refresh_of_several_flows_says_it_kept_the_steps_before_the_failure() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(dir.path());
    let script = "CREATE TABLE a (id BIGINT, seq BIGINT); CREATE TABLE b (id BIGINT, seq BIGINT);
        CREATE FLOW fa AS AUTO CDC INTO t FROM stream(a) KEYS (id) SEQUENCE BY seq;
        CREATE FLOW fb AS AUTO CDC INTO t FROM stream(b) KEYS (id) SEQUENCE BY seq;
        INSERT INTO a VALUES (1, 1); INSERT INTO b VALUES (2, NULL);
        REFRESH STREAMING TABLE t;
        SELECT 1";
    let e = s.execute_script(script, |_| {}).unwrap_err();
    assert_eq!((e.statement, e.steps), (7, asof::Steps::Several));
    let text = e.to_string();
    assert!(
        text.contains("statements 1..6 are committed; statement 7 keeps the steps it committed before it failed")
            && text.ends_with("; statement 8 is not"),
        "{text}"
    );
    // fa's commit is there, fb's is not.
    assert_eq!(rows(&mut s, "SELECT id FROM t"), [["1"]]);
    // A one-commit statement says so.
    let e = s
        .execute_script("SELECT 1; INSERT INTO a VALUES (1.5, 1)", |_| {})
        .unwrap_err();
    assert_eq!(e.steps, asof::Steps::One);
    assert!(
        e.to_string()
            .ends_with("statement 1 is committed; statement 2 is not"),
        "{e}"
    );
}

#[test]
fn a_constraint_declared_twice_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(dir.path());
    let e = err(
        &mut s,
        "CREATE OR REFRESH STREAMING TABLE t (CONSTRAINT c EXPECT (a > 0), CONSTRAINT c EXPECT (b > 0) ON VIOLATION DROP ROW)",
    );
    assert!(e.contains("declares CONSTRAINT `c` twice"), "{e}");
}

#[test]
fn create_table_with_columns_as_select_keeps_its_rows_by_position() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(dir.path());
    let out = s
        .execute("CREATE TABLE t (a BIGINT, b STRING) AS SELECT 1, 'x' UNION ALL SELECT 2, 'y'")
        .unwrap();
    assert!(
        matches!(&out[0], SqlOutput::Done(l) if l == "table t created with 2 rows"),
        "{out:?}"
    );
    assert_eq!(
        rows(&mut s, "SELECT a, b FROM t ORDER BY a"),
        [["1", "x"], ["2", "y"]]
    );
    assert_eq!(history_ops(&mut s, "t"), ["CREATE TABLE", "WRITE"]);
    let e = err(&mut s, "CREATE TABLE u (a BIGINT) AS SELECT 1, 2");
    assert!(e.contains("2 columns for 1 declared"), "{e}");
    assert!(s.execute("SELECT * FROM u").is_err(), "no table u");
}
