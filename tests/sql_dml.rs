//! DML on streaming tables (docs/SEMANTICS.md §2.4): `INSERT`, `UPDATE`, `DELETE`, `MERGE INTO`
//! and `FOR PORTION OF BUSINESS_TIME`, each one commit, composed with the events of later
//! refreshes, and the same after restarts, replays and VACUUM.

use crate::common;

use asof::{Checkpoints, OnClose, SqlSession, Store, StoreOptions};
use common::{cells, sorted_sql_rows as rows};
use proptest::prelude::*;

fn session() -> (tempfile::TempDir, SqlSession) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    (dir, SqlSession::new(store).unwrap())
}

fn table(rows: &[&[&str]]) -> Vec<Vec<Option<String>>> {
    let mut t: Vec<Vec<Option<String>>> = rows
        .iter()
        .map(|r| {
            r.iter()
                .map(|c| (*c != "NULL").then(|| c.to_string()))
                .collect()
        })
        .collect();
    t.sort();
    t
}

const SOURCE: &str = "CREATE TABLE src (id INT, name STRING, city STRING, ts BIGINT, op STRING)";

fn flow(name: &str, stored_as: &str) -> String {
    format!(
        "CREATE OR REFRESH STREAMING TABLE {name} FLOW AUTO CDC FROM stream(src) KEYS (id) \
         APPLY AS DELETE WHEN op = 'D' SEQUENCE BY ts COLUMNS * EXCEPT (ts, op) STORED AS {stored_as}"
    )
}

#[test]
fn scd1_statements_hold_until_a_newer_event_of_the_feed() {
    let (_dir, mut s) = session();
    s.execute(SOURCE).unwrap();
    s.execute("INSERT INTO src VALUES (1, 'Ana', 'Lisbon', 10, 'U'), (2, 'Bo', 'Oslo', 10, 'U')")
        .unwrap();
    s.execute(&flow("t", "SCD TYPE 1")).unwrap();
    s.execute("DELETE FROM t WHERE id = 1").unwrap();
    s.execute("UPDATE t SET city = \"Bergen\" WHERE id = 2")
        .unwrap();
    s.execute("INSERT INTO t VALUES (3, 'Cy', 'Rome')").unwrap();
    assert_eq!(
        rows(&mut s, "SELECT * FROM t"),
        table(&[&["2", "Bo", "Bergen"], &["3", "Cy", "Rome"]])
    );
    // A late event (older than the statement's) does not undo it; a newer one wins over it.
    s.execute(
        "INSERT INTO src VALUES (1, 'Ana', 'Faro', 5, 'U'), (2, 'Bo', 'Tromso', 11, 'U'), (3, 'Cy', 'Milan', 1, 'U');
         REFRESH STREAMING TABLE t",
    )
    .unwrap();
    assert_eq!(
        rows(&mut s, "SELECT * FROM t"),
        table(&[&["2", "Bo", "Tromso"], &["3", "Cy", "Milan"]]),
        "3 had no event when it was inserted: any event of the feed is newer"
    );
    // An INSERT of a key that has a row is refused, and changes nothing.
    let err = s
        .execute("INSERT INTO t VALUES (2, 'Bo', 'x'), (4, 'Di', 'y')")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("column `id`") && err.contains("has a row already") && err.contains("(1 row)"),
        "{err}"
    );
    assert_eq!(rows(&mut s, "SELECT count(*) FROM t"), [cells(&["2"])]);
    // Nor may one statement insert a new key twice.
    let err = s
        .execute("INSERT INTO t VALUES (7, 'Ed', 'x'), (7, 'Ed', 'y')")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("has a row already") && err.contains("(1 row)"),
        "{err}"
    );
    assert_eq!(rows(&mut s, "SELECT count(*) FROM t"), [cells(&["2"])]);
}

#[test]
fn a_merge_value_that_does_not_convert_is_refused_not_nulled() {
    let (_dir, mut s) = session();
    s.execute(
        "CREATE TABLE counts (id INT, n BIGINT, seq INT);
         INSERT INTO counts VALUES (1, 5, 1);
         CREATE OR REFRESH STREAMING TABLE c FLOW AUTO CDC FROM stream(counts) KEYS (id)
           SEQUENCE BY seq COLUMNS * EXCEPT (seq) STORED AS SCD TYPE 1",
    )
    .unwrap();
    let err = s
        .execute(
            "MERGE INTO c USING (SELECT 1 AS id) AS s ON c.id = s.id WHEN MATCHED THEN UPDATE SET n = 'abc'",
        )
        .unwrap_err()
        .to_string();
    assert!(err.contains("abc"), "{err}");
    assert_eq!(rows(&mut s, "SELECT n FROM c"), [cells(&["5"])]);
}

#[test]
fn scd2_update_for_portion_of_splits_versions_and_a_late_event_corrects_inside_it() {
    let (_dir, mut s) = session();
    s.execute(SOURCE).unwrap();
    s.execute(
        "INSERT INTO src VALUES (1, 'Ana', 'Lisbon', 10, 'U'), (1, 'Ana', 'Porto', 20, 'U'), (1, 'Ana', 'Faro', 30, 'U'), (2, 'Bo', 'Oslo', 10, 'U')",
    )
    .unwrap();
    s.execute(&flow("t", "SCD TYPE 2")).unwrap();
    let out = s
        .execute(
            "UPDATE t FOR PORTION OF BUSINESS_TIME FROM 12 TO 25 SET name = 'Ana B.' WHERE id = 1",
        )
        .unwrap();
    assert!(
        format!("{:?}", out[0]).contains("2 rows updated"),
        "{out:?}"
    );
    assert_eq!(
        rows(&mut s, "SELECT * FROM t WHERE id = 1"),
        table(&[
            &["1", "Ana", "Lisbon", "10", "12"],
            &["1", "Ana B.", "Lisbon", "12", "20"],
            &["1", "Ana B.", "Porto", "20", "25"],
            &["1", "Ana", "Porto", "25", "30"],
            &["1", "Ana", "Faro", "30", "NULL"],
        ])
    );
    // DELETE of whole versions leaves a gap; DELETE FOR PORTION OF cuts one.
    s.execute("DELETE FROM t FOR PORTION OF BUSINESS_TIME FROM 26 TO 28 WHERE id = 1")
        .unwrap();
    s.execute("DELETE FROM t WHERE id = 2").unwrap();
    // A late event inside the corrected range takes over from its sequence, as any late event.
    s.execute("INSERT INTO src VALUES (1, 'Ana', 'Evora', 15, 'U'), (2, 'Bo', 'Bergen', 40, 'U'); REFRESH STREAMING TABLE t")
        .unwrap();
    assert_eq!(
        rows(&mut s, "SELECT * FROM t"),
        table(&[
            &["1", "Ana", "Lisbon", "10", "12"],
            &["1", "Ana B.", "Lisbon", "12", "15"],
            &["1", "Ana", "Evora", "15", "20"],
            &["1", "Ana B.", "Porto", "20", "25"],
            &["1", "Ana", "Porto", "25", "26"],
            &["1", "Ana", "Porto", "28", "30"],
            &["1", "Ana", "Faro", "30", "NULL"],
            &["2", "Bo", "Bergen", "40", "NULL"],
        ])
    );
    // Each statement is a commit: time travel before it shows the table as it was.
    assert_eq!(
        rows(
            &mut s,
            "SELECT name, __START_AT FROM t VERSION AS OF 1 WHERE id = 1"
        ),
        table(&[&["Ana", "10"], &["Ana", "20"], &["Ana", "30"]])
    );
}

#[test]
fn dml_commits_are_named_in_the_history_and_the_change_feed() {
    let (_dir, mut s) = session();
    s.execute(SOURCE).unwrap();
    s.execute("INSERT INTO src VALUES (1, 'Ana', 'Lisbon', 10, 'U'), (2, 'Bo', 'Oslo', 10, 'U')")
        .unwrap();
    s.execute(&flow("t", "SCD TYPE 1")).unwrap();
    s.execute("UPDATE t SET city = 'Porto' WHERE id = 1; DELETE FROM t WHERE id = 2")
        .unwrap();
    let history = s.store().history("t").unwrap();
    let ops: Vec<(&str, u64, u64)> = history
        .iter()
        .map(|c| {
            (
                c.operation.as_str(),
                c.metrics.num_upserted_rows,
                c.metrics.num_deleted_rows,
            )
        })
        .collect();
    assert_eq!(
        ops,
        [
            ("CREATE TABLE", 0, 0),
            ("FLOW t", 2, 0),
            ("UPDATE", 1, 0),
            ("DELETE", 0, 1)
        ]
    );
    assert_eq!(
        history[2].parameters["statement"],
        "UPDATE t SET city = 'Porto' WHERE id = 1"
    );
    assert_eq!(
        rows(
            &mut s,
            "SELECT _commit_version, _change_type, id, city FROM table_changes('t', 2)"
        ),
        table(&[
            &["2", "update_postimage", "1", "Porto"],
            &["2", "update_preimage", "1", "Lisbon"],
            &["3", "delete", "2", "Oslo"],
        ])
    );
}

#[test]
fn scd2_insert_writes_history_and_refuses_an_overlap_with_nothing_applied() {
    let (_dir, mut s) = session();
    s.execute(SOURCE).unwrap();
    s.execute("INSERT INTO src VALUES (1, 'Ana', 'Lisbon', 10, 'U')")
        .unwrap();
    s.execute(&flow("t", "SCD TYPE 2")).unwrap();
    s.execute("INSERT INTO t (id, name, city, __START_AT, __END_AT) VALUES (1, 'Ana', 'Braga', 0, 10), (5, 'Eve', 'Nice', 3, NULL)")
        .unwrap();
    let before = rows(&mut s, "SELECT * FROM t");
    assert_eq!(
        before,
        table(&[
            &["1", "Ana", "Braga", "0", "10"],
            &["1", "Ana", "Lisbon", "10", "NULL"],
            &["5", "Eve", "Nice", "3", "NULL"],
        ])
    );
    for (sql, problem) in [
        (
            "INSERT INTO t (id, name, city, __START_AT) VALUES (9, 'ok', 'x', 1), (1, 'Ana', 'x', 5), (5, 'Eve', 'y', 100)",
            "overlaps a version of its key",
        ),
        (
            "INSERT INTO t (id, name, city, __START_AT, __END_AT) VALUES (7, 'a', 'b', 5, 5)",
            "is not after __START_AT",
        ),
        (
            "INSERT INTO t (id, name, city) VALUES (7, 'a', 'b')",
            "column `__START_AT`",
        ),
        (
            "INSERT INTO t (id, name, city, __START_AT) VALUES (NULL, 'a', 'b', 1)",
            "the key is NULL",
        ),
    ] {
        let err = s.execute(sql).unwrap_err().to_string();
        assert!(err.contains(problem), "{sql}: {err}");
        assert_eq!(rows(&mut s, "SELECT * FROM t"), before, "{sql}");
    }
    let err = s
        .execute("INSERT INTO t (id, name, city, __START_AT) VALUES (1, 'Ana', 'x', 5), (5, 'Eve', 'y', 100)")
        .unwrap_err()
        .to_string();
    assert!(err.contains("(2 rows)"), "{err}");
}

#[test]
fn bitemporal_statements_are_stamped_with_their_own_system_time() {
    let (_dir, mut s) = session();
    s.execute("CREATE TABLE ev (id INT, v STRING, bt TIMESTAMP)")
        .unwrap();
    s.execute("INSERT INTO ev VALUES (1, 'a', TIMESTAMP '2024-01-01'), (1, 'b', TIMESTAMP '2024-03-01'), (2, 'x', TIMESTAMP '2024-01-01')")
        .unwrap();
    s.execute("CREATE OR REFRESH STREAMING TABLE b FLOW AUTO CDC FROM stream(ev) KEYS (id) SEQUENCE BY bt COLUMNS * EXCEPT (bt) STORED AS BITEMPORAL")
        .unwrap();
    s.execute("UPDATE b FOR PORTION OF BUSINESS_TIME FROM TIMESTAMP '2024-02-01' TO TIMESTAMP '2024-04-01' SET v = 'fixed' WHERE id = 1; DELETE FROM b WHERE id = 2")
        .unwrap();
    let history = s.store().history("b").unwrap();
    let (flow_ts, update_ts) = (history[1].timestamp_us, history[2].timestamp_us);
    let now = "SELECT id, v, __START_AT, __END_AT FROM b WHERE __SYSTEM_END_AT IS NULL";
    assert_eq!(
        rows(&mut s, now),
        table(&[
            &["1", "a", "2024-01-01T00:00:00", "2024-02-01T00:00:00"],
            &["1", "fixed", "2024-02-01T00:00:00", "2024-04-01T00:00:00"],
            &["1", "b", "2024-04-01T00:00:00", "NULL"],
        ])
    );
    // What was believed before the statement is still answered, at a system time before it.
    let at = |us: i64| {
        chrono::DateTime::from_timestamp_micros(us)
            .unwrap()
            .format("%Y-%m-%dT%H:%M:%S%.6f")
            .to_string()
    };
    assert_eq!(
        rows(
            &mut s,
            &format!(
                "SELECT id, v, __START_AT FROM b FOR SYSTEM_TIME AS OF TIMESTAMP '{}'",
                at(flow_ts)
            )
        ),
        table(&[
            &["1", "a", "2024-01-01T00:00:00"],
            &["1", "b", "2024-03-01T00:00:00"],
            &["2", "x", "2024-01-01T00:00:00"],
        ])
    );
    // The rows the statement replaced end on system time at its commit.
    assert_eq!(
        rows(
            &mut s,
            "SELECT id, v, CAST(__SYSTEM_END_AT AS BIGINT) FROM b WHERE __SYSTEM_END_AT IS NOT NULL AND id = 1"
        ),
        table(&[
            &["1", "a", &update_ts.to_string()],
            &["1", "b", &update_ts.to_string()],
        ])
    );
}

#[test]
fn merge_into_updates_deletes_and_inserts_by_the_first_clause_that_holds() {
    let (_dir, mut s) = session();
    s.execute(SOURCE).unwrap();
    s.execute("INSERT INTO src VALUES (1, 'Ana', 'Lisbon', 10, 'U'), (2, 'Bo', 'Oslo', 10, 'U'), (3, 'Cy', 'Rome', 10, 'U')")
        .unwrap();
    s.execute(&flow("t", "SCD TYPE 1")).unwrap();
    s.execute("CREATE TABLE changes (id INT, city STRING, gone BOOLEAN)")
        .unwrap();
    s.execute("INSERT INTO changes VALUES (1, 'Porto', false), (2, NULL, true), (4, 'Kyiv', false), (5, 'Nowhere', true)")
        .unwrap();
    let out = s
        .execute(
            "MERGE INTO t AS target USING changes AS c ON target.id = c.id
             WHEN MATCHED AND c.gone THEN DELETE
             WHEN MATCHED THEN UPDATE SET city = c.city
             WHEN NOT MATCHED AND NOT c.gone THEN INSERT (id, name, city) VALUES (c.id, 'new', c.city)",
        )
        .unwrap();
    assert!(format!("{:?}", out[0]).contains("3 rows merged"), "{out:?}");
    assert_eq!(
        rows(&mut s, "SELECT * FROM t"),
        table(&[
            &["1", "Ana", "Porto"],
            &["3", "Cy", "Rome"],
            &["4", "new", "Kyiv"],
        ])
    );
    assert_eq!(s.store().history("t").unwrap()[2].operation, "MERGE");
    // Two source rows for one target row: refused, nothing changed.
    s.execute("INSERT INTO changes VALUES (1, 'Faro', false)")
        .unwrap();
    let err = s
        .execute("MERGE INTO t USING changes ON t.id = changes.id WHEN MATCHED THEN UPDATE SET city = changes.city")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("1 target row match more than one source row"),
        "{err}"
    );
    assert_eq!(s.store().history("t").unwrap().len(), 3);
    // A full snapshot merged in: rows it no longer has are updated or deleted by source.
    s.execute("CREATE TABLE snap (id INT, city STRING); INSERT INTO snap VALUES (4, 'Lviv')")
        .unwrap();
    s.execute(
        "MERGE INTO t USING snap ON t.id = snap.id
         WHEN MATCHED THEN UPDATE SET city = snap.city
         WHEN NOT MATCHED BY SOURCE AND t.id = 3 THEN UPDATE SET city = 'archived'
         WHEN NOT MATCHED BY SOURCE THEN DELETE",
    )
    .unwrap();
    assert_eq!(
        rows(&mut s, "SELECT * FROM t"),
        table(&[&["3", "Cy", "archived"], &["4", "new", "Lviv"]])
    );
}

#[test]
fn statements_that_cannot_apply_say_why_and_change_nothing() {
    let (_dir, mut s) = session();
    s.execute(SOURCE).unwrap();
    s.execute("INSERT INTO src VALUES (1, 'Ana', 'Lisbon', 10, 'U')")
        .unwrap();
    s.execute(&flow("t1", "SCD TYPE 1")).unwrap();
    s.execute(&flow("t2", "SCD TYPE 2")).unwrap();
    for (sql, says) in [
        ("UPDATE t1 SET id = 2", "a key of `t1`"),
        ("UPDATE t2 SET __END_AT = 5", "FOR PORTION OF BUSINESS_TIME"),
        ("UPDATE t1 SET nope = 1", "has no column `nope`"),
        (
            "UPDATE t1 FOR PORTION OF BUSINESS_TIME FROM 1 TO 2 SET name = 'x'",
            "SCD TYPE 1",
        ),
        (
            "DELETE FROM t2 FOR PORTION OF SYSTEM_TIME FROM 1 TO 2",
            "system time is the store's",
        ),
        ("UPDATE missing SET a = 1", "no table named `missing`"),
        (
            "INSERT INTO t2 (id, __SYSTEM_START_AT) VALUES (1, 1)",
            "system time is the store's",
        ),
    ] {
        let err = s.execute(sql).unwrap_err().to_string();
        assert!(err.contains(says), "{sql}: {err}");
    }
    assert_eq!(s.store().history("t1").unwrap().len(), 2);
    assert_eq!(s.store().history("t2").unwrap().len(), 2);
}

#[test]
fn a_full_refresh_recomputes_the_table_from_its_sources_and_drops_statements() {
    let (_dir, mut s) = session();
    s.execute(SOURCE).unwrap();
    s.execute("INSERT INTO src VALUES (1, 'Ana', 'Lisbon', 10, 'U')")
        .unwrap();
    s.execute(&flow("t", "SCD TYPE 1")).unwrap();
    s.execute("UPDATE t SET city = 'Porto'").unwrap();
    assert_eq!(rows(&mut s, "SELECT city FROM t"), [cells(&["Porto"])]);
    s.execute("REFRESH STREAMING TABLE t FULL").unwrap();
    assert_eq!(rows(&mut s, "SELECT city FROM t"), [cells(&["Lisbon"])]);
    assert_eq!(
        rows(&mut s, "SELECT city FROM t VERSION AS OF 2"),
        [cells(&["Porto"])],
        "time travel still shows it"
    );
}

/// One step of the property test below.
#[derive(Clone, Debug)]
enum Step {
    /// Events of the feed: (key, sequence, value, delete).
    Feed(Vec<(u8, u8, u8, bool)>),
    Update {
        key: u8,
        value: u8,
    },
    Portion {
        key: u8,
        from: u8,
        len: u8,
        value: u8,
    },
    Delete {
        key: u8,
    },
    Insert {
        key: u8,
        start: u8,
        value: u8,
    },
}

impl Step {
    fn sql(&self, table: &str, history: bool) -> String {
        match self {
            Step::Feed(events) => {
                let values: Vec<String> = events
                    .iter()
                    .map(|(k, q, v, d)| {
                        format!("({k}, 'v{v}', 'c', {q}, '{}')", if *d { "D" } else { "U" })
                    })
                    .collect();
                format!(
                    "INSERT INTO src VALUES {}; REFRESH STREAMING TABLE {table}",
                    values.join(", ")
                )
            }
            Step::Update { key, value } => {
                format!("UPDATE {table} SET name = 's{value}' WHERE id = {key}")
            }
            Step::Portion { key, from, len, value } if history => format!(
                "UPDATE {table} FOR PORTION OF BUSINESS_TIME FROM {from} TO {} SET name = 'p{value}' WHERE id = {key}",
                *from as u32 + *len as u32 + 1
            ),
            Step::Portion { key, value, .. } => {
                format!("UPDATE {table} SET city = 'p{value}' WHERE id = {key}")
            }
            Step::Delete { key } => format!("DELETE FROM {table} WHERE id = {key}"),
            // Keys 10.. are inserted only: the statement may be refused when the key exists.
            Step::Insert { key, start, value } if history => format!(
                "INSERT INTO {table} (id, name, city, __START_AT) VALUES ({}, 'i{value}', 'c', {start})",
                key + 10
            ),
            Step::Insert { key, value, .. } => format!(
                "INSERT INTO {table} VALUES ({}, 'i{value}', 'c')",
                key + 10
            ),
        }
    }
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => prop::collection::vec((0u8..3, 0u8..30, 0u8..5, prop::bool::weighted(0.15)), 1..5)
            .prop_map(Step::Feed),
        1 => (0u8..3, 0u8..5).prop_map(|(key, value)| Step::Update { key, value }),
        1 => (0u8..3, 0u8..30, 0u8..10, 0u8..5)
            .prop_map(|(key, from, len, value)| Step::Portion { key, from, len, value }),
        1 => (0u8..3).prop_map(|key| Step::Delete { key }),
        1 => (0u8..2, 0u8..30, 0u8..5).prop_map(|(key, start, value)| Step::Insert { key, start, value }),
    ]
}

fn options(hot: usize) -> StoreOptions {
    StoreOptions {
        hot_events_per_key: hot,
        checkpoints: Checkpoints {
            every_events: 5,
            on_close: OnClose::Leave,
        },
        ..Default::default()
    }
}

const MODES: [&str; 3] = ["SCD TYPE 1", "SCD TYPE 2", "BITEMPORAL"];

/// The table as the query reads it; a bitemporal table as now believed (its system times are
/// commit times, which differ between stores).
fn snapshot(s: &mut SqlSession, mode: &str) -> Vec<Vec<Option<String>>> {
    match mode {
        "SCD TYPE 1" => rows(s, "SELECT * FROM t"),
        "SCD TYPE 2" => rows(s, "SELECT * FROM t"),
        _ => rows(
            s,
            "SELECT id, name, city, __START_AT, __END_AT FROM t WHERE __SYSTEM_END_AT IS NULL",
        ),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Restarts between statements, a small hot tail, a replay of the whole log and a VACUUM never
    /// change a table that DML statements and refreshes changed in turn.
    #[test]
    fn statements_and_refreshes_survive_restarts_replays_and_vacuum(
        mode in 0usize..3,
        steps in prop::collection::vec(step(), 1..10),
        reopen_at in prop::collection::vec(prop::bool::ANY, 10),
    ) {
        let mode = MODES[mode];
        let history = mode != "SCD TYPE 1";
        let set_up = format!("{SOURCE}; {}; ALTER STREAMING TABLE t SET TBLPROPERTIES ('asof.vacuum.retentionCheck' = 'false')", flow("t", mode));
        // A: one session all along. B: reopened where `reopen_at` says, with a hot tail of 1.
        let a_dir = tempfile::tempdir().unwrap();
        let mut a = SqlSession::new(Store::open(a_dir.path()).unwrap()).unwrap();
        a.execute(&set_up).unwrap();
        let b_dir = tempfile::tempdir().unwrap();
        let mut b = Some(SqlSession::new(Store::open_with(b_dir.path(), options(1)).unwrap()).unwrap());
        b.as_mut().unwrap().execute(&set_up).unwrap();
        // C: reopened before every step, with a checkpoint at every close: each statement runs
        // on a table not in memory, reading only the heads of the keys it touches.
        let c_dir = tempfile::tempdir().unwrap();
        SqlSession::new(Store::open(c_dir.path()).unwrap()).unwrap().execute(&set_up).unwrap();
        for (i, st) in steps.iter().enumerate() {
            let sql = st.sql("t", history);
            let ra = a.execute(&sql).map(|_| ());
            if reopen_at[i] {
                drop(b.take()); // closes the store first: one opener at a time
                b = Some(SqlSession::new(Store::open_with(b_dir.path(), options(1)).unwrap()).unwrap());
            }
            let rb = b.as_mut().unwrap().execute(&sql).map(|_| ());
            prop_assert_eq!(ra.is_ok(), rb.is_ok(), "{}: {:?} {:?}", sql, ra, rb);
            let mut c = SqlSession::new(Store::open(c_dir.path()).unwrap()).unwrap();
            let rc = c.execute(&sql).map(|_| ());
            prop_assert_eq!(ra.is_ok(), rc.is_ok(), "{}: {:?} {:?}", sql, ra, rc);

            let (sa, sb) = (snapshot(&mut a, mode), snapshot(b.as_mut().unwrap(), mode));
            prop_assert_eq!(&sa, &sb, "after {}", sql);
            prop_assert_eq!(&sa, &snapshot(&mut c, mode), "after {} (C)", sql);
            for s in [&mut a, b.as_mut().unwrap(), &mut c] {
                counts_match(s)?;
            }
        }
        let expected = snapshot(&mut a, mode);
        drop(a);
        drop(b);
        // Replayed from the log alone: the derived records deleted.
        {
            let kv = asof::SledKv::open(a_dir.path(), 1 << 20).unwrap();
            let mut batch = asof::WriteBatch::default();
            for tag in [b"K", b"P", b"X", b"G"] {
                for r in asof::KvStore::scan_prefix(&kv, tag) {
                    batch.delete(r.unwrap().0);
                }
            }
            asof::KvStore::write(&kv, batch).unwrap();
        }
        let mut a = SqlSession::new(Store::open(a_dir.path()).unwrap()).unwrap();
        prop_assert_eq!(&snapshot(&mut a, mode), &expected, "replayed");
        a.execute("VACUUM t RETAIN 0 HOURS").unwrap();
        prop_assert_eq!(&snapshot(&mut a, mode), &expected, "vacuumed");
        drop(a);
        let mut a = SqlSession::new(Store::open_with(a_dir.path(), options(2)).unwrap()).unwrap();
        prop_assert_eq!(&snapshot(&mut a, mode), &expected, "vacuumed and reopened");
        counts_match(&mut a)?;
    }
}

/// `count(*)`, answered from the table's kept count where the store knows it (docs/SEMANTICS.md
/// §8), equals `count(id)`, which scans.
fn counts_match(s: &mut SqlSession) -> Result<(), TestCaseError> {
    prop_assert_eq!(
        rows(s, "SELECT count(*) FROM t"),
        rows(s, "SELECT count(id) FROM t")
    );
    Ok(())
}

/// A DML commit reads no events. A store closed without a checkpoint after one applied to the
/// table in memory (a crash, a full disk) is checkpointed by the next process that reads it, so
/// that later opens read keys from their pages instead of the whole table every time. A DML
/// commit on a table not in memory reads only its keys' heads, and checkpoints at once.
#[test]
fn a_dml_commit_left_without_a_checkpoint_is_checkpointed_by_the_next_reader() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mut s = SqlSession::new(Store::open(dir.path()).unwrap()).unwrap();
        s.execute(
            "CREATE TABLE ev (id INT, name STRING, seq INT);
             INSERT INTO ev VALUES (1, 'a', 1), (2, 'b', 1);
             CREATE OR REFRESH STREAMING TABLE t FLOW AUTO CDC FROM stream(ev) KEYS (id)
               SEQUENCE BY seq STORED AS SCD TYPE 2",
        )
        .unwrap();
    }
    {
        let store = Store::open_with(dir.path(), options(8)).unwrap();
        store.read("t", |_| ()).unwrap(); // the table in memory
        let mut s = SqlSession::new(store).unwrap();
        s.execute("UPDATE t SET name = 'c' WHERE id = 1").unwrap();
    }
    let current = |store: &Store| {
        store
            .key_span(
                "t",
                (std::ops::Bound::Unbounded, std::ops::Bound::Unbounded),
                16,
                asof::Caching::Pass,
            )
            .unwrap()
            .is_some()
    };
    {
        let store = Store::open(dir.path()).unwrap();
        assert!(!current(&store), "the UPDATE is only in the log");
        let mut s = SqlSession::new(store).unwrap();
        assert_eq!(rows(&mut s, "SELECT count(*) FROM t"), [cells(&["2"])]);
    }
    let store = Store::open(dir.path()).unwrap();
    assert!(
        current(&store),
        "the reader wrote the checkpoint as it closed"
    );
    drop(store);
    {
        let store = Store::open_with(dir.path(), options(8)).unwrap();
        let mut s = SqlSession::new(store).unwrap();
        s.execute("UPDATE t SET name = 'd' WHERE id = 2").unwrap();
        assert!(current(s.store()), "the table was not read whole");
    }
    let store = Store::open(dir.path()).unwrap();
    assert!(current(&store), "the UPDATE wrote its checkpoint");
    let mut s = SqlSession::new(store).unwrap();
    assert_eq!(
        rows(&mut s, "SELECT id, name FROM t WHERE __END_AT IS NULL"),
        [cells(&["1", "c"]), cells(&["2", "d"])]
    );
}

/// A statement refused on a table not in memory (an INSERT whose range the key has) changes
/// nothing: planning it read the key's head and thawed its pages, and that state is dropped, so
/// a later commit that does not touch the key leaves its pages and history as they were.
#[test]
fn a_statement_refused_on_a_table_not_in_memory_leaves_the_key_it_read_whole() {
    let dir = tempfile::tempdir().unwrap();
    let opts = || StoreOptions {
        hot_events_per_key: 1,
        ..Default::default()
    };
    let open = || SqlSession::new(Store::open_with(dir.path(), opts()).unwrap()).unwrap();
    let key_1 = "SELECT id, name, __START_AT, __END_AT FROM t WHERE id = 1";
    let before = {
        let mut s = open();
        s.execute(SOURCE).unwrap();
        // Key 1's versions in three commits, so that most are frozen in pages.
        s.execute(&flow("t", "SCD TYPE 2")).unwrap();
        for part in 0..3 {
            let values: Vec<String> = (1..=20)
                .map(|i| format!("(1, 'v{part}_{i}', 'c', {}, 'U')", part * 20 + i))
                .chain([format!("(2, 'e{part}', 'c', {part}, 'U')")])
                .collect();
            s.execute(&format!(
                "INSERT INTO src VALUES {}; REFRESH STREAMING TABLE t",
                values.join(", ")
            ))
            .unwrap();
        }
        rows(&mut s, key_1)
    };
    assert_eq!(before.len(), 60);
    {
        let mut s = open();
        let e = s
            .execute("INSERT INTO t (id, name, city, __START_AT) VALUES (1, 'x', 'c', 2)")
            .unwrap_err()
            .to_string();
        assert!(e.contains("overlaps"), "{e}");
        s.execute("UPDATE t SET name = 'z' WHERE id = 2").unwrap();
    }
    let mut s = open();
    assert_eq!(rows(&mut s, key_1), before);
    assert!(s.store().verify().unwrap().ok());
}

/// An INSERT refused for overlapping a version thaws the key it planned for, in the table in
/// memory, and writes nothing. A scan of the table stopped inside that key (a row per call) reads
/// on from the key's rows as they now lie, not from the frozen rows it read before the thaw:
/// it returns the table once, as a scan begun after it does.
#[test]
fn a_scan_stopped_inside_a_key_reads_on_as_pinned_after_a_refused_insert_thawed_it() {
    let dir = tempfile::tempdir().unwrap();
    let options = StoreOptions {
        hot_events_per_key: 2,
        ..Default::default()
    };
    let store = Store::open_with(dir.path(), options).unwrap();
    let mut s = SqlSession::new(store.clone()).unwrap();
    s.execute(SOURCE).unwrap();
    let values: Vec<String> = (0..60)
        .map(|i| format!("(1, 'Ana', 'c{i}', {}, 'U')", 10 * i))
        .collect();
    s.execute(&format!("INSERT INTO src VALUES {}", values.join(", ")))
        .unwrap();
    s.execute(&flow("t", "SCD TYPE 2")).unwrap();
    let cold = |store: &Store| store.read("t", |t| t.cold_stats()).unwrap();
    assert!(cold(&store).frozen_events > 20, "{:?}", cold(&store));
    let spec = common::pinned_to_latest(&store, "t");
    let read = |cursor: &mut asof_storage::ScanCursor, n: usize| {
        common::scan_step(&store, "t", &spec, cursor, n)
    };
    let (mut got, mut cursor) = (Vec::new(), asof_storage::ScanCursor::default());
    for _ in 0..3 {
        got.extend(read(&mut cursor, 1));
    }
    let thawed = cold(&store).pages_thawed;
    let err = s
        .execute("INSERT INTO t (id, name, city, __START_AT) VALUES (1, 'Ana', 'x', 15)")
        .unwrap_err()
        .to_string();
    assert!(err.contains("overlaps a version of its key"), "{err}");
    assert!(
        cold(&store).pages_thawed > thawed,
        "the refused insert thawed nothing"
    );
    while !cursor.is_done() {
        got.extend(read(&mut cursor, 1));
    }
    let (mut want, mut fresh) = (Vec::new(), asof_storage::ScanCursor::default());
    while !fresh.is_done() {
        want.extend(read(&mut fresh, 1000));
    }
    assert_eq!(want.len(), 60);
    assert_eq!(got, want);
}
