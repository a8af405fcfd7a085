//! Retention (docs/SEMANTICS.md §12.3): the table property `asof.erase.deletedKeysAfter` erases,
//! at each commit of the table, every key deleted for longer than its period, as `ERASE` does:
//! every byte of it leaves the store's files, the other keys read as before, the chains verify.

use crate::common;

use std::path::Path;

use asof::{SqlSession, Store, StoreOptions, RETENTION_PROPERTY};
use common::{files_holding, run_asof, sorted_sql_rows};
use proptest::prelude::*;

/// A value that occurs nowhere but in the data of key 2.
const MARKER: &str = "marker-77e1d0";

fn session(dir: &Path) -> SqlSession {
    let options = StoreOptions {
        hot_events_per_key: 1,
        ..Default::default()
    };
    SqlSession::new(Store::open_with(dir, options).unwrap()).unwrap()
}

/// An SCD2 table of people with the retention `period`, where key 2 (which carries the marker)
/// was deleted by the last commit.
fn build(dir: &Path, period: &str) {
    let mut s = session(dir);
    s.execute(&format!(
        "CREATE TABLE people (id INT, email STRING, seq INT, op STRING);
         INSERT INTO people VALUES (1, 'one@example.com', 1, 'U'), (2, '{MARKER}@example.com', 1, 'U'),
           (3, 'three@example.com', 1, 'U');
         CREATE OR REFRESH STREAMING TABLE customers
           TBLPROPERTIES ('{RETENTION_PROPERTY}' = '{period}')
           FLOW AUTO CDC FROM stream(people) KEYS (id) APPLY AS DELETE WHEN op = 'D'
           SEQUENCE BY seq COLUMNS * EXCEPT (seq, op) STORED AS SCD TYPE 2;
         INSERT INTO people VALUES (2, '{MARKER}-2@example.com', 2, 'U'), (1, 'one-b@example.com', 2, 'U');
         REFRESH STREAMING TABLE customers;
         INSERT INTO people VALUES (2, NULL, 3, 'D');
         REFRESH STREAMING TABLE customers;"
    ))
    .unwrap();
}

fn rows(dir: &Path, sql: &str) -> Vec<Vec<Option<String>>> {
    sorted_sql_rows(&mut session(dir), sql)
}

fn operations(dir: &Path) -> Vec<String> {
    let history = Store::open(dir).unwrap().history("customers").unwrap();
    history.into_iter().map(|c| c.operation).collect()
}

fn cells(rows: &[&[&str]]) -> Vec<Vec<Option<String>>> {
    rows.iter()
        .map(|r| {
            r.iter()
                .map(|c| (*c != "NULL").then(|| c.to_string()))
                .collect()
        })
        .collect()
}

const CURRENT: &str = "SELECT id, email, __START_AT, __END_AT FROM customers";

#[test]
fn a_key_deleted_for_longer_than_the_period_is_erased_at_the_next_commit_to_the_last_byte() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), "interval 0 seconds");
    // Deleted by the last commit, not before it: still there, and the search can fail.
    assert_eq!(
        operations(dir.path()),
        [
            "CREATE TABLE",
            "FLOW customers",
            "FLOW customers",
            "FLOW customers"
        ]
    );
    assert!(!files_holding(dir.path(), MARKER.as_bytes()).is_empty());

    let (ok, out, err) = run_asof(
        dir.path(),
        &[
            "sql",
            "INSERT INTO people VALUES (3, 'three-b@example.com', 2, 'U'); REFRESH STREAMING TABLE customers",
        ],
    );
    assert!(ok, "{out}{err}");
    assert_eq!(
        out.lines().last().unwrap(),
        "customers: commit 5 erased 1 key (3 events, 3 source rows), retention: deleted for longer than interval 0 seconds (table property asof.erase.deletedKeysAfter)"
    );
    assert_eq!(
        operations(dir.path()),
        [
            "CREATE TABLE",
            "FLOW customers",
            "FLOW customers",
            "FLOW customers",
            "FLOW customers",
            "ERASE"
        ]
    );
    let history = Store::open(dir.path())
        .unwrap()
        .history("customers")
        .unwrap();
    let erase = &history[5].parameters;
    assert_eq!(
        (erase["reason"].as_str(), erase["keys"].as_str(), erase["source_rows"].as_str()),
        (
            "retention: deleted for longer than interval 0 seconds (table property asof.erase.deletedKeysAfter)",
            "1",
            "3"
        )
    );
    assert_eq!(
        files_holding(dir.path(), MARKER.as_bytes()),
        Vec::<String>::new()
    );
    assert_eq!(
        rows(dir.path(), CURRENT),
        cells(&[
            &["1", "one-b@example.com", "2", "NULL"],
            &["1", "one@example.com", "1", "2"],
            &["3", "three-b@example.com", "2", "NULL"],
            &["3", "three@example.com", "1", "2"],
        ])
    );
    // A version from before the erasure reads without the key too.
    assert_eq!(
        rows(
            dir.path(),
            "SELECT id FROM customers VERSION AS OF 2 WHERE id = 2"
        ),
        Vec::<Vec<Option<String>>>::new()
    );
    assert_eq!(
        rows(dir.path(), "SELECT id, seq FROM people"),
        cells(&[&["1", "1"], &["1", "2"], &["3", "1"], &["3", "2"]])
    );
    let (ok, out, err) = run_asof(dir.path(), &["verify"]);
    assert!(ok, "{out}{err}");
    assert!(
        out.contains("table customers: ok: 6 commits linked; derived records match the log"),
        "{out}"
    );
}

#[test]
fn a_dml_commit_applies_the_rule_too() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), "interval 0 seconds");
    let (ok, out, err) = run_asof(
        dir.path(),
        &[
            "sql",
            "UPDATE customers SET email = 'one-c@example.com' WHERE id = 1",
        ],
    );
    assert!(ok, "{out}{err}");
    assert_eq!(
        out.trim(),
        "customers: 2 rows updated (commit 4: 1 rows upserted, 1 deleted)\ncustomers: commit 5 erased 1 key (3 events, 3 source rows), retention: deleted for longer than interval 0 seconds (table property asof.erase.deletedKeysAfter)"
    );
    assert!(files_holding(dir.path(), MARKER.as_bytes()).is_empty());
}

#[test]
fn another_property_set_erases_nothing() {
    // A pinned receipt sets a property after its query: that must not erase what it read.
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), "interval 0 seconds");
    let (ok, out, err) = run_asof(
        dir.path(),
        &[
            "sql",
            "ALTER STREAMING TABLE customers SET TBLPROPERTIES ('owner' = 'audit')",
        ],
    );
    assert!(ok, "{out}{err}");
    assert_eq!(out.trim(), "customers: properties set (commit 4)");
    assert_eq!(operations(dir.path()).last().unwrap(), "SET TBLPROPERTIES");
    assert!(!files_holding(dir.path(), MARKER.as_bytes()).is_empty());
}

#[test]
fn a_key_a_full_refresh_leaves_without_rows_is_deleted_since_that_refresh() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(dir.path());
    s.execute(&format!(
        "CREATE TABLE src (id INT, v STRING, seq INT);
         INSERT INTO src VALUES (1, 'a', 1);
         CREATE OR REFRESH STREAMING TABLE t TBLPROPERTIES ('{RETENTION_PROPERTY}' = '0 seconds')
           FLOW AUTO CDC FROM stream(src) KEYS (id) SEQUENCE BY seq COLUMNS * EXCEPT (seq)
           STORED AS SCD TYPE 1;
         INSERT INTO t (id, v) VALUES (9, '{MARKER}');"
    ))
    .unwrap();
    assert_eq!(
        sorted_sql_rows(&mut s, "SELECT id, v FROM t"),
        cells(&[&["1", "a"], &["9", MARKER]])
    );
    // The full refresh applies the source alone: key 9, written by DML, has no row after it.
    s.execute("REFRESH STREAMING TABLE t FULL").unwrap();
    assert_eq!(
        sorted_sql_rows(&mut s, "SELECT id FROM t"),
        cells(&[&["1"]])
    );
    let out = s
        .execute("INSERT INTO src VALUES (2, 'b', 1); REFRESH STREAMING TABLE t")
        .unwrap();
    let text = format!("{out:?}");
    assert!(
        text.contains("erased 1 key (1 event, 0 source rows)"),
        "{text}"
    );
    drop(s);
    assert!(files_holding(dir.path(), MARKER.as_bytes()).is_empty());
}

#[test]
fn a_key_deleted_less_long_than_the_period_stays() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), "interval 1 hour");
    let (ok, out, err) = run_asof(
        dir.path(),
        &[
            "sql",
            "INSERT INTO people VALUES (3, 'three-b@example.com', 2, 'U'); REFRESH STREAMING TABLE customers",
        ],
    );
    assert!(ok, "{out}{err}");
    assert_eq!(operations(dir.path()).last().unwrap(), "FLOW customers");
    assert_eq!(
        rows(
            dir.path(),
            "SELECT id, __START_AT, __END_AT FROM customers WHERE id = 2"
        ),
        cells(&[&["2", "1", "2"], &["2", "2", "3"]])
    );
}

#[test]
fn setting_the_property_erases_the_keys_deleted_long_enough_already() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), "interval 1 week");
    let (ok, out, err) = run_asof(
        dir.path(),
        &[
            "sql",
            &format!("ALTER STREAMING TABLE customers SET TBLPROPERTIES ('{RETENTION_PROPERTY}' = '0 seconds')"),
        ],
    );
    assert!(ok, "{out}{err}");
    assert_eq!(
        out.trim(),
        "customers: properties set (commit 4)\ncustomers: commit 5 erased 1 key (3 events, 3 source rows), retention: deleted for longer than 0 seconds (table property asof.erase.deletedKeysAfter)"
    );
    assert_eq!(operations(dir.path())[4..], ["SET TBLPROPERTIES", "ERASE"]);
    assert_eq!(
        rows(dir.path(), "SELECT DISTINCT id FROM customers"),
        cells(&[&["1"], &["3"]])
    );
    assert!(files_holding(dir.path(), MARKER.as_bytes()).is_empty());
    let (_, out, _) = run_asof(dir.path(), &["sql", "SHOW TBLPROPERTIES customers"]);
    assert!(out.contains("0 seconds"), "{out}");
}

#[test]
fn a_period_that_does_not_read_is_refused_and_nothing_changes() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), "interval 1 week");
    let (ok, _, err) = run_asof(
        dir.path(),
        &[
            "sql",
            &format!("ALTER STREAMING TABLE customers SET TBLPROPERTIES ('{RETENTION_PROPERTY}' = 'soon')"),
        ],
    );
    assert!(!ok);
    assert!(
        err.contains(
            "table property asof.erase.deletedKeysAfter is a period such as 'interval 30 days'"
        ) && err.contains("not 'soon'"),
        "{err}"
    );
    assert_eq!(operations(dir.path()).len(), 4);
    let mut s = session(dir.path());
    let e = s
        .execute(&format!(
            "CREATE TABLE other (id INT, seq INT);
             CREATE OR REFRESH STREAMING TABLE o TBLPROPERTIES ('{RETENTION_PROPERTY}' = '3 fortnights')
               FLOW AUTO CDC FROM stream(other) KEYS (id) SEQUENCE BY seq STORED AS SCD TYPE 1"
        ))
        .unwrap_err()
        .to_string();
    assert!(e.contains("not '3 fortnights'"), "{e}");
    assert!(!s.store().tables().unwrap().contains(&"o".to_string()));
}

#[test]
fn a_table_fed_by_snapshots_refuses_the_property() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(dir.path());
    s.execute(
        "CREATE TABLE snaps (id INT, v STRING, version INT);
         INSERT INTO snaps VALUES (1, 'a', 1);
         CREATE OR REFRESH STREAMING TABLE t;
         CREATE FLOW f AS AUTO CDC FROM SNAPSHOT snaps INTO t KEYS (id) SEQUENCE BY version STORED AS SCD TYPE 1",
    )
    .unwrap();
    let e = s
        .execute(&format!(
            "ALTER STREAMING TABLE t SET TBLPROPERTIES ('{RETENTION_PROPERTY}' = '1 day')"
        ))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("flow `f` reads snapshots of `snaps`") && e.contains("nothing changed"),
        "{e}"
    );
    let e = s
        .execute(&format!(
            "CREATE TABLE snaps2 (id INT, v STRING, version INT);
             CREATE OR REFRESH STREAMING TABLE t2 TBLPROPERTIES ('{RETENTION_PROPERTY}' = '1 day');
             CREATE FLOW f2 AS AUTO CDC FROM SNAPSHOT snaps2 INTO t2 KEYS (id) SEQUENCE BY version STORED AS SCD TYPE 1"
        ))
        .unwrap_err()
        .to_string();
    assert!(e.contains("flow `f2` reads snapshots"), "{e}");
    // Nor may a snapshot flow join a table that has the property.
    let e = s
        .execute(&format!(
            "CREATE TABLE ev (id INT, v STRING, seq INT);
             CREATE OR REFRESH STREAMING TABLE t3 TBLPROPERTIES ('{RETENTION_PROPERTY}' = '1 day');
             CREATE FLOW fe AS AUTO CDC INTO t3 FROM stream(ev) KEYS (id) SEQUENCE BY seq COLUMNS * EXCEPT (seq)
               STORED AS SCD TYPE 1;
             CREATE OR REFRESH STREAMING TABLE t3 FLOW AUTO CDC FROM SNAPSHOT snaps KEYS (id) SEQUENCE BY version
               STORED AS SCD TYPE 1"
        ))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(
            "flow `t3` reads snapshots, and `t3` has table property asof.erase.deletedKeysAfter"
        ),
        "{e}"
    );
}

#[test]
fn rows_no_flow_has_read_are_kept_and_bring_the_key_back_as_a_new_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(dir.path());
    s.execute(&format!(
        "CREATE TABLE a (id INT, v STRING, seq INT, op STRING);
         CREATE TABLE b (id INT, v STRING, seq INT, op STRING);
         CREATE OR REFRESH STREAMING TABLE t TBLPROPERTIES ('{RETENTION_PROPERTY}' = '0 seconds');
         CREATE FLOW fa AS AUTO CDC INTO t FROM stream(a) KEYS (id) APPLY AS DELETE WHEN op = 'D'
           SEQUENCE BY seq COLUMNS * EXCEPT (seq, op) STORED AS SCD TYPE 2;
         CREATE FLOW fb AS AUTO CDC INTO t FROM stream(b) KEYS (id) APPLY AS DELETE WHEN op = 'D'
           SEQUENCE BY seq COLUMNS * EXCEPT (seq, op) STORED AS SCD TYPE 2;
         INSERT INTO a VALUES (1, 'x', 1, 'U'), (2, 'old', 1, 'U');
         REFRESH STREAMING TABLE t;
         INSERT INTO a VALUES (2, NULL, 2, 'D');
         REFRESH STREAMING TABLE t;
         INSERT INTO b VALUES (2, 'new', 5, 'U');
         INSERT INTO a VALUES (1, 'y', 3, 'U');"
    ))
    .unwrap();
    // One refresh: `fa` commits, and retention erases key 2 with the rows `fa` read, not the
    // row of `b` that `fb` has not; then `fb` brings key 2 back, as a new key.
    s.execute("REFRESH STREAMING TABLE t").unwrap();
    let ops: Vec<String> = s
        .store()
        .history("t")
        .unwrap()
        .into_iter()
        .map(|c| c.operation)
        .collect();
    assert_eq!(ops[ops.len() - 3..], ["FLOW fa", "ERASE", "FLOW fb"]);
    assert_eq!(
        sorted_sql_rows(&mut s, "SELECT id, v, __START_AT, __END_AT FROM t"),
        cells(&[
            &["1", "x", "1", "3"],
            &["1", "y", "3", "NULL"],
            &["2", "new", "5", "NULL"]
        ])
    );
    assert_eq!(
        sorted_sql_rows(&mut s, "SELECT id, seq FROM a"),
        cells(&[&["1", "1"], &["1", "3"]])
    );
    assert_eq!(
        sorted_sql_rows(&mut s, "SELECT id, v FROM b"),
        cells(&[&["2", "new"]])
    );
    assert!(s.store().verify().unwrap().ok());
}

/// One source row: key, value, sequence, system time (days), delete.
type Row = (u8, u8, u8, u8, bool);

fn row() -> impl Strategy<Value = Row> {
    (0u8..5, 0u8..3, 0u8..6, 0u8..4, prop::bool::weighted(0.3))
}

const MODES: [&str; 3] = ["SCD TYPE 1", "SCD TYPE 2", "BITEMPORAL"];

fn insert(rows: &[Row]) -> String {
    let values: Vec<String> = rows
        .iter()
        .map(|(k, v, seq, sys, d)| {
            format!(
                "({k}, 'v{v}', {seq}, TIMESTAMP '2025-01-0{}', '{}')",
                sys + 1,
                if *d { "D" } else { "U" }
            )
        })
        .collect();
    format!("INSERT INTO src VALUES {}", values.join(", "))
}

/// The table, with `properties`; SCD1 collects tombstones at once, so retention meets keys whose
/// events are forgotten.
fn set_up(mode: &str, properties: &str) -> String {
    let system = if mode == "BITEMPORAL" {
        "SYSTEM SEQUENCE BY sys"
    } else {
        ""
    };
    format!(
        "CREATE TABLE src (id INT, v STRING, seq INT, sys TIMESTAMP, op STRING);
         CREATE OR REFRESH STREAMING TABLE t
           TBLPROPERTIES ('pipelines.cdc.tombstoneGCThresholdInSeconds' = '0'{properties})
           FLOW AUTO CDC FROM stream(src) KEYS (id)
           APPLY AS DELETE WHEN op = 'D' SEQUENCE BY seq {system}
           COLUMNS * EXCEPT (seq, sys, op) STORED AS {mode}"
    )
}

/// The keys of `t` that have an open row now: the live ones.
fn live_keys(s: &mut SqlSession, mode: &str) -> std::collections::BTreeSet<String> {
    let q = match mode {
        "SCD TYPE 1" => "SELECT id FROM t",
        "SCD TYPE 2" => "SELECT id FROM t WHERE __END_AT IS NULL",
        _ => "SELECT id FROM t WHERE __END_AT IS NULL AND __SYSTEM_END_AT IS NULL",
    };
    sorted_sql_rows(s, q)
        .into_iter()
        .map(|r| r[0].clone().unwrap())
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    /// With a period of 0, a commit erases every key that an earlier commit left deleted; every
    /// key never left deleted reads as in a table without retention, across reopens; the store
    /// verifies.
    #[test]
    fn keys_left_deleted_are_erased_and_the_others_read_as_without_retention(
        mode in 0usize..3,
        batches in prop::collection::vec(prop::collection::vec(row(), 1..6), 1..6),
        reopen_after in prop::collection::vec(any::<bool>(), 6),
    ) {
        let mode = MODES[mode];
        let a_dir = tempfile::tempdir().unwrap();
        let mut a = session(a_dir.path());
        let b_dir = tempfile::tempdir().unwrap();
        let mut b = session(b_dir.path());
        a.execute(&set_up(mode, &format!(", '{RETENTION_PROPERTY}' = '0 seconds'"))).unwrap();
        b.execute(&set_up(mode, "")).unwrap();
        let mut ever_deleted = std::collections::BTreeSet::new();
        let mut known = std::collections::BTreeSet::new();
        for (i, batch) in batches.iter().enumerate() {
            for q in [insert(batch), "REFRESH STREAMING TABLE t".to_string()] {
                a.execute(&q).unwrap();
                b.execute(&q).unwrap();
            }
            known.extend(batch.iter().map(|r| r.0.to_string()));
            // A key erased and fed again is a new key in `a`, and may then differ from `b`.
            for live in [live_keys(&mut a, mode), live_keys(&mut b, mode)] {
                ever_deleted.extend(known.iter().filter(|k| !live.contains(*k)).cloned());
            }
            if reopen_after[i] {
                drop(a);
                a = session(a_dir.path());
            }
        }
        // Left deleted by the commits so far: erased by the next one, of a key of its own.
        let left_deleted: std::collections::BTreeSet<String> =
            known.difference(&live_keys(&mut a, mode)).cloned().collect();
        for s in [&mut a, &mut b] {
            s.execute("INSERT INTO src VALUES (9, 'v', 1, TIMESTAMP '2025-01-01', 'U'); REFRESH STREAMING TABLE t").unwrap();
        }
        let keys_of = |rows: &[Vec<Option<String>>]| -> std::collections::BTreeSet<String> {
            rows.iter().map(|r| r[0].clone().unwrap()).collect()
        };
        let q = "SELECT * FROM t";
        let (ra, rb) = (sorted_sql_rows(&mut a, q), sorted_sql_rows(&mut b, q));
        // No key left deleted has a row; keys never deleted read as without retention.
        prop_assert!(keys_of(&ra).is_disjoint(&left_deleted), "{:?} {:?}", ra, left_deleted);
        let never = |r: &Vec<Option<String>>| !ever_deleted.contains(r[0].as_ref().unwrap());
        let ra_kept: Vec<_> = ra.iter().filter(|r| never(r)).cloned().collect();
        let rb_kept: Vec<_> = rb.iter().filter(|r| never(r)).cloned().collect();
        prop_assert_eq!(ra_kept, rb_kept);
        // The source keeps no row of a key left deleted.
        let src = sorted_sql_rows(&mut a, "SELECT id FROM src");
        prop_assert!(keys_of(&src).is_disjoint(&left_deleted));
        drop(a);
        let a = Store::open(a_dir.path()).unwrap();
        let report = a.verify().unwrap();
        prop_assert!(report.ok(), "{:?}", report);
    }
}
