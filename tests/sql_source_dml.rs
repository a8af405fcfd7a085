//! `DELETE`, `UPDATE` and `MERGE INTO` on source tables: each one commit in the source's
//! history; a flow that already read a row they changed stops until a full refresh, unless it
//! reads its source `WITH (skipChangeCommits = true)`; earlier versions of the source still read
//! as they were (receipts taken before a change verify after it).

use crate::common;

use asof::{SqlSession, Store};
use common::{cells, sorted_sql_rows};
use proptest::prelude::*;

fn open(dir: &std::path::Path) -> SqlSession {
    SqlSession::new(Store::open(dir).unwrap()).unwrap()
}

fn err(s: &mut SqlSession, sql: &str) -> String {
    s.execute(sql).unwrap_err().to_string()
}

fn history_ops(s: &mut SqlSession, table: &str) -> Vec<String> {
    let (names, rows) = common::sql_rows(s, &format!("DESCRIBE HISTORY {table}"));
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

const SRC: &str = "CREATE TABLE src (id BIGINT, v STRING, seq BIGINT);
    INSERT INTO src VALUES (1, 'a', 1), (2, 'b', 1), (3, 'c', 1)";

#[test]
fn delete_update_and_merge_are_commits_of_the_source() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    s.execute(SRC).unwrap();
    s.execute("CREATE TABLE fixes (id BIGINT, v STRING)")
        .unwrap();
    s.execute("INSERT INTO fixes VALUES (2, 'B'), (4, 'd')")
        .unwrap();
    s.execute("DELETE FROM src WHERE id = 1").unwrap();
    s.execute("UPDATE src SET v = upper(v), seq = seq + 1 WHERE id = 3")
        .unwrap();
    s.execute(
        "MERGE INTO src t USING fixes f ON t.id = f.id \
         WHEN MATCHED THEN UPDATE SET v = f.v \
         WHEN NOT MATCHED THEN INSERT (id, v, seq) VALUES (f.id, f.v, 1)",
    )
    .unwrap();
    let q = "SELECT id, v, seq FROM src";
    let want = [
        cells(&["2", "B", "1"]),
        cells(&["3", "C", "2"]),
        cells(&["4", "d", "1"]),
    ];
    assert_eq!(sorted_sql_rows(&mut s, q), want);
    assert_eq!(
        history_ops(&mut s, "src"),
        ["CREATE TABLE", "WRITE", "DELETE", "UPDATE", "MERGE"]
    );
    // Nothing matched: a commit that changes nothing still says so; a bad column changes nothing.
    s.execute("DELETE FROM src WHERE id = 99").unwrap();
    let e = err(&mut s, "UPDATE src SET nope = 1");
    assert!(e.contains("no column `nope`"), "{e}");
    drop(s);
    let mut s = open(dir.path());
    assert_eq!(sorted_sql_rows(&mut s, q), want);
}

#[test]
fn a_flow_that_read_a_changed_row_stops_until_a_full_refresh() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    s.execute(SRC).unwrap();
    s.execute(
        "CREATE OR REFRESH STREAMING TABLE t FLOW AUTO CDC FROM stream(src) KEYS (id) \
         SEQUENCE BY seq COLUMNS * EXCEPT (seq) STORED AS SCD TYPE 1",
    )
    .unwrap();
    // A row the flow has not read yet may change: the flow reads it as it is.
    s.execute("INSERT INTO src VALUES (4, 'd', 1); DELETE FROM src WHERE id = 4")
        .unwrap();
    s.execute("REFRESH STREAMING TABLE t").unwrap();
    // A row it has read: the next refresh fails, naming the flow and the commit, and changes
    // nothing.
    s.execute("UPDATE src SET v = 'z' WHERE id = 2").unwrap();
    let e = err(&mut s, "REFRESH STREAMING TABLE t");
    assert!(
        e.contains("flow `t`") && e.contains("UPDATE") && e.contains("skipChangeCommits"),
        "{e}"
    );
    let q = "SELECT id, v FROM t";
    assert_eq!(
        sorted_sql_rows(&mut s, q),
        [cells(&["1", "a"]), cells(&["2", "b"]), cells(&["3", "c"])]
    );
    // Still failing after a reopen; a full refresh reads the source as it is now.
    drop(s);
    let mut s = open(dir.path());
    assert!(err(&mut s, "REFRESH STREAMING TABLE t").contains("cannot go on"));
    s.execute("REFRESH STREAMING TABLE t FULL").unwrap();
    assert_eq!(
        sorted_sql_rows(&mut s, q),
        [cells(&["1", "a"]), cells(&["2", "z"]), cells(&["3", "c"])]
    );
    s.execute("INSERT INTO src VALUES (5, 'e', 1); REFRESH STREAMING TABLE t")
        .unwrap();
    assert_eq!(sorted_sql_rows(&mut s, q).len(), 4);
}

#[test]
fn skip_change_commits_ignores_what_dml_on_the_source_did() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    s.execute(SRC).unwrap();
    s.execute(
        "CREATE OR REFRESH STREAMING TABLE t FLOW AUTO CDC \
         FROM stream(src) WITH (skipChangeCommits = true) KEYS (id) \
         SEQUENCE BY seq COLUMNS * EXCEPT (seq) STORED AS SCD TYPE 1;
         CREATE OR REFRESH STREAMING TABLE copy;
         CREATE FLOW copy_src AS INSERT INTO copy BY NAME
           SELECT id, v FROM STREAM(src) WITH (skipChangeCommits = true);
         CREATE OR REFRESH STREAMING TABLE strict;
         CREATE FLOW strict_src AS INSERT INTO strict BY NAME SELECT id, v FROM STREAM(src)",
    )
    .unwrap();
    s.execute(
        "UPDATE src SET v = 'z', seq = 2 WHERE id = 2; DELETE FROM src WHERE id = 3; \
         INSERT INTO src VALUES (4, 'd', 1)",
    )
    .unwrap();
    s.execute("REFRESH STREAMING TABLE t; REFRESH STREAMING TABLE copy")
        .unwrap();
    // The update's row and the delete are not the flows' concern; the insert is.
    let want = [
        cells(&["1", "a"]),
        cells(&["2", "b"]),
        cells(&["3", "c"]),
        cells(&["4", "d"]),
    ];
    assert_eq!(sorted_sql_rows(&mut s, "SELECT id, v FROM t"), want);
    assert_eq!(sorted_sql_rows(&mut s, "SELECT id, v FROM copy"), want);
    // An append flow that does not skip stops, as an AUTO CDC flow does.
    let e = err(&mut s, "REFRESH STREAMING TABLE strict");
    assert!(e.contains("flow `strict_src`"), "{e}");
    // DESCRIBE shows the option, so that the flow can be created again as it is.
    let (_, rows) = common::sql_rows(&mut s, "DESCRIBE TABLE EXTENDED t");
    assert!(
        rows.iter()
            .flatten()
            .flatten()
            .any(|c| c.contains("FROM stream(src) WITH (skipChangeCommits = true)")),
        "{rows:?}"
    );
}

#[test]
fn a_receipt_taken_before_a_source_change_still_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    s.execute(SRC).unwrap();
    let (_, taken) = common::sql_rows(&mut s, "RECEIPT FOR SELECT id, v FROM src ORDER BY id");
    let token = taken[0][0].clone().unwrap();
    s.execute("DELETE FROM src WHERE id = 1; UPDATE src SET v = 'x'")
        .unwrap();
    let (_, checked) = common::sql_rows(&mut s, &format!("VERIFY RECEIPT '{token}'"));
    assert_eq!(checked[0][0], Some("true".into()), "{checked:?}");
    assert_eq!(
        sorted_sql_rows(&mut s, "SELECT id, v FROM src"),
        [cells(&["2", "x"]), cells(&["3", "x"])]
    );
}

/// A statement on the model: the rows `(id, v)` in the order a source keeps them.
#[derive(Clone, Debug)]
enum Op {
    Insert(i64, i64),
    Delete(i64),
    Update(i64, i64),
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..6i64, 0..100i64).prop_map(|(k, v)| Op::Insert(k, v)),
        (0..6i64).prop_map(Op::Delete),
        (0..6i64, 0..100i64).prop_map(|(k, v)| Op::Update(k, v)),
        Just(Op::Reopen),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Any mix of inserts, deletes, updates and reopens leaves the source holding what a list of
    /// rows would.
    #[test]
    fn a_source_holds_what_its_statements_left(ops in proptest::collection::vec(op(), 1..12)) {
        let dir = tempfile::tempdir().unwrap();
        let mut s = open(dir.path());
        s.execute("CREATE TABLE src (k BIGINT, v BIGINT)").unwrap();
        let mut model: Vec<(i64, i64)> = Vec::new();
        for op in ops {
            match op {
                Op::Insert(k, v) => {
                    s.execute(&format!("INSERT INTO src VALUES ({k}, {v})")).unwrap();
                    model.push((k, v));
                }
                Op::Delete(k) => {
                    s.execute(&format!("DELETE FROM src WHERE k = {k}")).unwrap();
                    model.retain(|r| r.0 != k);
                }
                Op::Update(k, v) => {
                    s.execute(&format!("UPDATE src SET v = {v} WHERE k = {k}")).unwrap();
                    for r in model.iter_mut().filter(|r| r.0 == k) {
                        r.1 = v;
                    }
                }
                Op::Reopen => {
                    drop(s);
                    s = open(dir.path());
                }
            }
            let mut want: Vec<Vec<Option<String>>> = model
                .iter()
                .map(|(k, v)| vec![Some(k.to_string()), Some(v.to_string())])
                .collect();
            want.sort();
            prop_assert_eq!(sorted_sql_rows(&mut s, "SELECT k, v FROM src"), want);
        }
    }
}

#[test]
fn a_flow_made_again_after_its_table_was_dropped_is_not_stopped_by_old_statements() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    s.execute(SRC).unwrap();
    let make = "CREATE OR REFRESH STREAMING TABLE t FLOW AUTO CDC FROM stream(src) KEYS (id) \
                SEQUENCE BY seq COLUMNS * EXCEPT (seq) STORED AS SCD TYPE 1";
    s.execute(make).unwrap();
    s.execute("DELETE FROM src WHERE id = 1").unwrap();
    assert!(err(&mut s, "REFRESH STREAMING TABLE t").contains("cannot go on"));
    s.execute("DROP STREAMING TABLE t").unwrap();
    s.execute(make).unwrap();
    s.execute("INSERT INTO src VALUES (4, 'd', 1); REFRESH STREAMING TABLE t")
        .unwrap();
    assert_eq!(
        sorted_sql_rows(&mut s, "SELECT id FROM t"),
        [cells(&["2"]), cells(&["3"]), cells(&["4"])]
    );
}

#[test]
fn a_merge_that_only_inserts_reaches_flows_that_skip_change_commits() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    s.execute(SRC).unwrap();
    s.execute(
        "CREATE OR REFRESH STREAMING TABLE t FLOW AUTO CDC \
         FROM stream(src) WITH (skipChangeCommits = true) KEYS (id) \
         SEQUENCE BY seq COLUMNS * EXCEPT (seq) STORED AS SCD TYPE 1;
         CREATE TABLE more (id BIGINT, v STRING);
         INSERT INTO more VALUES (7, 'g'), (1, 'dup');
         MERGE INTO src USING more ON src.id = more.id
           WHEN NOT MATCHED THEN INSERT (id, v, seq) VALUES (more.id, more.v, 1);
         REFRESH STREAMING TABLE t",
    )
    .unwrap();
    assert_eq!(
        sorted_sql_rows(&mut s, "SELECT id, v FROM t"),
        [
            cells(&["1", "a"]),
            cells(&["2", "b"]),
            cells(&["3", "c"]),
            cells(&["7", "g"])
        ]
    );
}

#[test]
fn rows_computed_from_a_source_that_a_statement_changed_meanwhile_are_not_written() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    s.execute(SRC).unwrap();
    s.execute("CREATE TABLE copy (id BIGINT, v STRING, seq BIGINT)")
        .unwrap();
    let store = s.store().clone();
    let read_at = store.source_history("src").unwrap().last().unwrap().version;
    let rows = store
        .source_rows("src", asof::SourceRead::Now)
        .and_then(|r| r.collect_batches())
        .unwrap();
    // A flow computed its rows from `src` as of `read_at`; a DELETE lands before it commits.
    let mut w = store.begin_append("copy").unwrap();
    for b in &rows {
        w.push(b).unwrap();
    }
    w.read_from("src", "copy_flow", read_at);
    s.execute("DELETE FROM src WHERE id = 1").unwrap();
    let e = store.commit_write(w, None).unwrap_err();
    assert!(
        matches!(e, asof::Error::SourceChangedMeanwhile { .. }),
        "{e}"
    );
    assert_eq!(
        sorted_sql_rows(&mut s, "SELECT count(*) FROM copy"),
        [cells(&["0"])]
    );
}

/// A full refresh after rows of the source were deleted: the keys no source row names any more
/// leave the table, and a replay of the log (`verify`, a rebuild) resets them too, the same
/// whether the refresh was applied whole or in parts of 4 rows.
#[test]
fn a_full_refresh_after_a_source_delete_drops_the_keys_left_and_replays_alike() {
    for part_rows in [asof::DEFAULT_COMMIT_PART_ROWS, 4] {
        let dir = tempfile::tempdir().unwrap();
        let options = asof::StoreOptions {
            commit_part_rows: part_rows,
            ..Default::default()
        };
        let mut s = SqlSession::new(Store::open_with(dir.path(), options).unwrap()).unwrap();
        s.execute(
            "CREATE TABLE src AS SELECT value AS id, 'a' AS v, CAST(1 AS BIGINT) AS seq \
               FROM generate_series(1, 12);
             INSERT INTO src SELECT id, 'b' AS v, CAST(2 AS BIGINT) AS seq FROM src;
             CREATE OR REFRESH STREAMING TABLE t FLOW AUTO CDC FROM stream(src) KEYS (id) \
               SEQUENCE BY seq COLUMNS * EXCEPT (seq) STORED AS SCD TYPE 2",
        )
        .unwrap();
        let q = "SELECT id, v, __START_AT, __END_AT FROM t";
        assert_eq!(sorted_sql_rows(&mut s, q).len(), 24);
        s.execute("DELETE FROM src WHERE id > 4; REFRESH STREAMING TABLE t FULL")
            .unwrap();
        let want: Vec<_> = (1..=4)
            .flat_map(|id| {
                let id = id.to_string();
                [
                    cells(&[&id, "a", "1", "2"]),
                    vec![Some(id), Some("b".into()), Some("2".into()), None],
                ]
            })
            .collect();
        assert_eq!(sorted_sql_rows(&mut s, q), want, "parts of {part_rows}");
        let report = s.store().verify().unwrap();
        assert!(report.ok(), "parts of {part_rows}: {report:?}");
        drop(s);
        // Closed, the store wrote a checkpoint at the full refresh: `verify` now replays it.
        let mut s = SqlSession::new(Store::open(dir.path()).unwrap()).unwrap();
        assert_eq!(sorted_sql_rows(&mut s, q), want, "parts of {part_rows}");
        let report = s.store().verify().unwrap();
        assert!(report.ok(), "parts of {part_rows}, reopened: {report:?}");
    }
}

/// A full refresh whose source holds a truncate (SCD TYPE 1, `APPLY AS TRUNCATE`, `IGNORE NULL
/// UPDATES`) after rows of the source were deleted: a replay resets every key before the
/// truncate refolds them, as the commit did, so `verify` after a reopen finds the same table.
/// (Key 3's event after the truncate would otherwise refold alone, and write a row the commit
/// never wrote.)
#[test]
fn a_full_refresh_with_a_truncate_replays_alike() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    s.execute(
        "CREATE TABLE src (id BIGINT, v STRING, seq BIGINT, op STRING);
         INSERT INTO src VALUES (1, 'a', 1, 'U'), (2, 'b', 1, 'U'), (3, 'c', 1, 'U'),
           (4, 'd', 1, 'U'), (3, NULL, 2, 'U'), (4, NULL, 2, 'U'), (1, NULL, 2, 'U'),
           (3, NULL, 5, 'U');
         CREATE OR REFRESH STREAMING TABLE t FLOW AUTO CDC FROM stream(src) KEYS (id)
           IGNORE NULL UPDATES APPLY AS TRUNCATE WHEN op = 'T' SEQUENCE BY seq
           COLUMNS * EXCEPT (seq, op) STORED AS SCD TYPE 1",
    )
    .unwrap();
    let q = "SELECT id, v FROM t";
    assert_eq!(
        sorted_sql_rows(&mut s, q),
        [
            cells(&["1", "a"]),
            cells(&["2", "b"]),
            cells(&["3", "c"]),
            cells(&["4", "d"])
        ]
    );
    s.execute(
        "DELETE FROM src WHERE id > 2;
         INSERT INTO src VALUES (0, NULL, 3, 'T'), (2, 'B', 4, 'U');
         REFRESH STREAMING TABLE t FULL",
    )
    .unwrap();
    let want = [cells(&["2", "B"])];
    assert_eq!(sorted_sql_rows(&mut s, q), want);
    drop(s);
    let mut s = open(dir.path());
    assert_eq!(sorted_sql_rows(&mut s, q), want);
    let report = s.store().verify().unwrap();
    assert!(report.ok(), "{report:?}");
}

/// A statement's queries stream what they remove and write into one write: an UPDATE or a
/// MERGE that fails on a row late in a source of many chunks (after rows were pushed) leaves
/// the source as it was, with no commit, and the next statement applies.
#[test]
fn a_statement_that_fails_on_a_late_row_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    s.execute(
        "CREATE TABLE src AS SELECT value AS id, CAST(value AS STRING) AS v, \
         CAST(1 AS BIGINT) AS seq FROM range(300000)",
    )
    .unwrap();
    let state = "SELECT count(*), sum(id), count(DISTINCT v), sum(seq) FROM src";
    let before = sorted_sql_rows(&mut s, state);
    let history = history_ops(&mut s, "src");
    // Division by zero at the last row only.
    let e = err(&mut s, "UPDATE src SET seq = 10 / (299999 - id)");
    assert!(e.to_lowercase().contains("divide by zero"), "{e}");
    let e = err(
        &mut s,
        "MERGE INTO src t USING (SELECT 299999 AS id) f ON t.id = f.id \
         WHEN NOT MATCHED BY SOURCE THEN UPDATE SET seq = 2 \
         WHEN MATCHED THEN UPDATE SET seq = 1 / (t.id - 299999)",
    );
    assert!(e.to_lowercase().contains("divide by zero"), "{e}");
    assert_eq!(sorted_sql_rows(&mut s, state), before);
    assert_eq!(history_ops(&mut s, "src"), history);
    s.execute("UPDATE src SET seq = 2 WHERE id % 3 = 0")
        .unwrap();
    s.execute("DELETE FROM src WHERE id % 3 = 1").unwrap();
    assert_eq!(
        sorted_sql_rows(&mut s, state),
        [cells(&["200000", "29999900000", "200000", "300000"])]
    );
}
