//! Audit (docs/FORMAT.md §3.8): the commit logs are hash-chained, and `asof verify` finds a changed
//! byte in any stored value of a commit log or a table's derived records, naming the commit.

use crate::common;

use asof::{KvStore, Problem, Receipt, SledKv, SqlSession, Store, StoreOptions, WriteBatch};
use common::run_asof;

/// A store written through every kind of commit: source creates and appends, flows of each mode
/// (one over files), DML, properties, a full refresh, an append flow and a VACUUM; with a hot tail
/// of one event per key, so keys have frozen pages.
fn build(dir: &std::path::Path) {
    let options = StoreOptions {
        hot_events_per_key: 1,
        ..Default::default()
    };
    let mut s = SqlSession::new(Store::open_with(dir, options).unwrap()).unwrap();
    let landing = dir.join("landing");
    std::fs::create_dir_all(&landing).unwrap();
    std::fs::write(
        landing.join("a.csv"),
        "id,v,seq\n1,x,1\n1,y,2\n1,z,3\n2,w,1\n",
    )
    .unwrap();
    s.execute(&format!(
        "CREATE OR REFRESH STREAMING TABLE files FLOW AUTO CDC
           FROM stream(read_files('{}', format => 'csv', header => true))
           KEYS (id) SEQUENCE BY seq STORED AS SCD TYPE 2",
        landing.display()
    ))
    .unwrap();
    s.execute(
        "CREATE TABLE src (id INT, v STRING, seq INT, sys TIMESTAMP, op STRING);
         INSERT INTO src VALUES (1, 'a', 1, TIMESTAMP '2025-01-01', 'U'), (2, 'b', 1, TIMESTAMP '2025-01-01', 'U');
         CREATE OR REFRESH STREAMING TABLE one FLOW AUTO CDC FROM stream(src) KEYS (id)
           APPLY AS DELETE WHEN op = 'D' SEQUENCE BY seq COLUMNS * EXCEPT (seq, sys, op) STORED AS SCD TYPE 1;
         CREATE OR REFRESH STREAMING TABLE two FLOW AUTO CDC FROM stream(src) KEYS (id)
           APPLY AS DELETE WHEN op = 'D' SEQUENCE BY seq COLUMNS * EXCEPT (seq, sys, op) STORED AS SCD TYPE 2;
         CREATE OR REFRESH STREAMING TABLE both FLOW AUTO CDC FROM stream(src) KEYS (id)
           APPLY AS DELETE WHEN op = 'D' SEQUENCE BY seq SYSTEM SEQUENCE BY sys COLUMNS * EXCEPT (seq, sys, op)
           STORED AS BITEMPORAL;
         INSERT INTO src VALUES (1, 'a2', 2, TIMESTAMP '2025-02-01', 'U'), (2, 'b', 2, TIMESTAMP '2025-02-01', 'D'),
           (1, 'a0', 0, TIMESTAMP '2025-03-01', 'U'), (1, 'a3', 3, TIMESTAMP '2025-03-02', 'U'),
           (1, 'a4', 4, TIMESTAMP '2025-03-03', 'U'), (1, 'a5', 5, TIMESTAMP '2025-03-04', 'U');
         REFRESH STREAMING TABLE one; REFRESH STREAMING TABLE two; REFRESH STREAMING TABLE both;
         UPDATE two FOR PORTION OF BUSINESS_TIME FROM 1 TO 2 SET v = 'fixed' WHERE id = 1;
         DELETE FROM one WHERE id = 1;
         ALTER STREAMING TABLE one SET TBLPROPERTIES ('asof.vacuum.retentionCheck' = 'false');
         REFRESH STREAMING TABLE two FULL;
         CREATE OR REFRESH STREAMING TABLE copies AS SELECT id, v FROM STREAM(src);
         VACUUM one RETAIN 0 HOURS;",
    )
    .unwrap();
}

#[test]
fn verify_passes_on_a_store_written_through_every_kind_of_commit() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    let (ok, out, err) = run_asof(dir.path(), &["verify"]);
    assert!(ok, "{out}{err}");
    for line in [
        "table one: ok:",
        "table two: ok:",
        "table both: ok:",
        "source table src: ok:",
        "derived records match the log",
    ] {
        assert!(out.contains(line), "{line}: {out}");
    }
    assert!(!out.contains("before the chain"), "{out}");
    let report = Store::open(dir.path()).unwrap().verify().unwrap();
    let one = report.tables.iter().find(|t| t.name == "one").unwrap();
    // VACUUM RETAIN 0 HOURS kept its last commit as the base: the base and the VACUUM are linked.
    assert_eq!((one.linked, one.before_chain), (2, 0), "{report:?}");
}

/// The tags whose values `verify` covers: commit records and what they wrote (C, E, H, A, L) by
/// the chain, a table's derived records (K, P, X, G) by a replay of its log.
const COVERED: &[u8] = b"CEHALKPXG";

#[test]
fn a_flipped_byte_in_any_stored_value_is_found() {
    let built = tempfile::tempdir().unwrap();
    build(built.path());
    let keys: Vec<Vec<u8>> = {
        let kv = SledKv::open(built.path(), 1 << 20).unwrap();
        kv.scan_prefix(b"").map(|r| r.unwrap().0).collect()
    };
    let mut tried: std::collections::BTreeMap<u8, usize> = Default::default();
    // A few keys of each kind, a byte at the start, the middle and the end of each, each in a
    // fresh copy of the store.
    let cases = keys
        .iter()
        .filter(|k| COVERED.contains(&k[0]))
        .flat_map(|k| [0, 1, 2].map(|third| (k, third)));
    for (k, third) in cases {
        let n = tried.entry(k[0]).or_default();
        if *n >= 9 {
            continue;
        }
        *n += 1;
        let copy = common::copy_of_fixture(built.path());
        {
            let kv = SledKv::open(copy.path(), 1 << 20).unwrap();
            let mut v = kv.get(k).unwrap().unwrap();
            let at = (v.len() - 1) * third / 2;
            v[at] ^= 0x04;
            let mut b = WriteBatch::default();
            b.put(k.clone(), v);
            kv.write(b).unwrap();
        }
        let tag = k[0] as char;
        match Store::open(copy.path()) {
            // Refused on open (a commit record that no longer parses): found.
            Err(e) => assert!(e.to_string().contains("corrupt"), "{tag}: {e}"),
            Ok(store) => {
                let report = store.verify().unwrap();
                assert!(
                    !report.ok(),
                    "a changed byte in a `{tag}` value went unnoticed"
                );
                if matches!(tag, 'C' | 'E' | 'H' | 'A' | 'L') {
                    assert!(
                        report
                            .tables
                            .iter()
                            .any(|t| matches!(t.problem, Some(Problem::Commit { .. }))),
                        "{tag}: {report:?}"
                    );
                }
            }
        }
    }
    let kinds: Vec<u8> = tried.keys().copied().collect();
    assert_eq!(
        kinds,
        b"ACEGHKLPX".to_vec(),
        "every kind of record was tried"
    );
}

#[test]
fn verify_names_the_first_commit_that_does_not_match() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    // Commit 2 of `two` (its first refresh after creation) gets another event block's bytes.
    {
        let kv = SledKv::open(dir.path(), 1 << 20).unwrap();
        let store_keys: Vec<(Vec<u8>, Vec<u8>)> =
            kv.scan_prefix(b"E").map(|r| r.unwrap()).collect();
        let id_of = |name: &str| -> u32 {
            for r in kv.scan_prefix(b"T") {
                let (k, v) = r.unwrap();
                let rec: serde_json::Value = serde_json::from_slice(&v).unwrap();
                if rec["name"] == name {
                    return u32::from_be_bytes(k[1..5].try_into().unwrap());
                }
            }
            panic!("no table {name}")
        };
        let two = id_of("two").to_be_bytes();
        let version = |k: &[u8]| u64::from_be_bytes(k[5..13].try_into().unwrap());
        let target = store_keys
            .iter()
            .find(|(k, _)| k[1..5] == two && version(k) == 2)
            .unwrap();
        let other = store_keys
            .iter()
            .find(|(k, _)| k[1..5] == two && version(k) == 1)
            .unwrap();
        let mut b = WriteBatch::default();
        b.put(target.0.clone(), other.1.clone());
        kv.write(b).unwrap();
    }
    let (ok, out, _) = run_asof(dir.path(), &["verify"]);
    assert!(!ok);
    assert!(out.contains("table two: MISMATCH: commit 2:"), "{out}");
    assert!(out.contains("table one: ok"), "{out}");
}

/// A bitemporal table of account balances, the events of which arrive late.
fn ledger(s: &mut SqlSession) {
    s.execute(
        "CREATE TABLE bookings (account INT, balance BIGINT, booked DATE);
         INSERT INTO bookings VALUES (1, 100, DATE '2025-01-01'), (2, 50, DATE '2025-01-01'), (3, 70, DATE '2025-01-01');
         CREATE OR REFRESH STREAMING TABLE balances FLOW AUTO CDC FROM stream(bookings) KEYS (account)
           SEQUENCE BY booked STORED AS BITEMPORAL",
    )
    .unwrap();
}

const REPORT: &str = "SELECT account, balance FROM balances
    FOR BUSINESS_TIME AS OF DATE '2025-03-31' WHERE __SYSTEM_END_AT IS NULL ORDER BY account";

#[test]
fn a_receipt_taken_before_50_late_corrections_still_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = SqlSession::new(Store::open(dir.path()).unwrap()).unwrap();
    ledger(&mut s);
    let (_, _, receipt) = s.query_with_receipt(REPORT).unwrap();
    assert_eq!(receipt.rows, 3);
    assert_eq!(receipt.tables.keys().collect::<Vec<_>>(), ["balances"]);
    // 50 corrections, each late on business time (booked in March, known now).
    for i in 0..50 {
        s.execute(&format!(
            "INSERT INTO bookings VALUES ({}, {}, DATE '2025-03-{:02}'); REFRESH STREAMING TABLE balances",
            i % 3 + 1,
            1000 + i,
            i % 28 + 1
        ))
        .unwrap();
    }
    let (schema, now) = {
        let out = s.execute(REPORT).unwrap();
        match out.into_iter().next().unwrap() {
            asof::SqlOutput::Batches(schema, b) => (schema, b),
            other => panic!("{other:?}"),
        }
    };
    assert_ne!(
        asof::result_hash(&schema, &now).unwrap().1,
        receipt.hash,
        "the report changed since"
    );
    let check = s.verify_receipt(&receipt.token()).unwrap();
    assert!(check.matches(), "{check:?}");
    assert_eq!(check.rows, 3);
    // After a restart too.
    drop(s);
    let mut s = SqlSession::new(Store::open(dir.path()).unwrap()).unwrap();
    assert!(s.verify_receipt(&receipt.token()).unwrap().matches());
}

#[test]
fn receipts_in_sql_take_and_check_a_report() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = SqlSession::new(Store::open(dir.path()).unwrap()).unwrap();
    ledger(&mut s);
    let (names, taken) = common::sql_rows(&mut s, &format!("RECEIPT PINNED FOR {REPORT}"));
    assert_eq!(names, ["receipt", "rows", "hash", "versions"]);
    let token = taken[0][0].clone().unwrap();
    let receipt = Receipt::parse(&token).unwrap();
    assert_eq!(
        taken[0][1..],
        [
            Some("3".to_string()),
            Some(receipt.hash.clone()),
            Some("balances at version 1".to_string())
        ]
    );
    // PINNED keeps version 1 from VACUUM, as `--pin` does.
    assert_eq!(
        s.store().properties("balances").unwrap()["asof.vacuum.pinnedVersion"],
        "1"
    );
    s.execute(
        "INSERT INTO bookings VALUES (2, 80, DATE '2025-03-15'); REFRESH STREAMING TABLE balances",
    )
    .unwrap();
    let verify =
        |s: &mut SqlSession, token: &str| common::sql_rows(s, &format!("VERIFY RECEIPT '{token}'"));
    let (names, checked) = verify(&mut s, &token);
    assert_eq!(
        names,
        [
            "verified",
            "rows",
            "hash",
            "receipt_rows",
            "receipt_hash",
            "versions",
            "erased_since"
        ]
    );
    let h = Some(receipt.hash.clone());
    let three = Some("3".to_string());
    assert_eq!(
        checked[0],
        [
            Some("true".into()),
            three.clone(),
            h.clone(),
            three.clone(),
            h.clone(),
            Some("balances at version 1".into()),
            None
        ]
    );
    // A receipt whose hash was changed does not verify: an answer, not an error.
    let forged = Receipt {
        hash: "0".repeat(64),
        ..receipt.clone()
    };
    let (_, checked) = verify(&mut s, &forged.token());
    assert_eq!(checked[0][0], Some("false".into()));
    assert_eq!(checked[0][2], h);
    // A statement that changes the store takes no receipt.
    let e = s
        .execute("RECEIPT FOR DELETE FROM balances WHERE account = 1")
        .unwrap_err()
        .to_string();
    assert!(e.contains("a receipt is for a query"), "{e}");
}

#[test]
fn the_hash_does_not_depend_on_the_order_rows_come_in() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = SqlSession::new(Store::open(dir.path()).unwrap()).unwrap();
    ledger(&mut s);
    let base = "SELECT account, balance FROM balances WHERE __SYSTEM_END_AT IS NULL";
    let hashes: Vec<String> = [
        "",
        " ORDER BY account",
        " ORDER BY account DESC",
        " ORDER BY balance",
    ]
    .iter()
    .map(|order| {
        s.query_with_receipt(&format!("{base}{order}"))
            .unwrap()
            .2
            .hash
    })
    .collect();
    assert!(hashes.iter().all(|h| h == &hashes[0]), "{hashes:?}");
    // A different answer is a different hash.
    let other = s
        .query_with_receipt(&format!("{base} AND account < 3"))
        .unwrap()
        .2;
    assert_ne!(other.hash, hashes[0]);
}

#[test]
fn a_receipt_pins_source_tables_too_and_refuses_statements() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = SqlSession::new(Store::open(dir.path()).unwrap()).unwrap();
    ledger(&mut s);
    let (_, _, receipt) = s
        .query_with_receipt("SELECT count(*), sum(balance) FROM bookings")
        .unwrap();
    assert_eq!(receipt.sources.get("bookings"), Some(&1));
    s.execute("INSERT INTO bookings VALUES (4, 5, DATE '2025-02-01')")
        .unwrap();
    assert!(s.verify_receipt(&receipt.token()).unwrap().matches());
    for sql in [
        "INSERT INTO bookings VALUES (5, 1, DATE '2025-01-01')",
        "SELECT 1; SELECT 2",
        "DELETE FROM balances WHERE account = 1",
        "SELECT count(*) FROM table_changes('balances', 1)",
    ] {
        let err = s.query_with_receipt(sql).unwrap_err().to_string();
        assert!(err.contains("a receipt is for"), "{sql}: {err}");
    }
    assert!(Receipt::parse("asof-receipt-1:zz").is_err());
}

#[test]
fn receipts_through_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mut s = SqlSession::new(Store::open(dir.path()).unwrap()).unwrap();
        ledger(&mut s);
    }
    let (ok, out, err) = run_asof(dir.path(), &["sql", "--receipt", REPORT]);
    assert!(ok, "{err}");
    let token = out
        .lines()
        .find_map(|l| l.strip_prefix("receipt: "))
        .expect("a receipt line")
        .to_string();
    assert!(out.contains("| 1       | 100     |"), "{out}");
    run_asof(
        dir.path(),
        &["sql", "INSERT INTO bookings VALUES (1, 1, DATE '2025-02-01'); REFRESH STREAMING TABLE balances"],
    );
    let (ok, out, _) = run_asof(dir.path(), &["verify-receipt", &token]);
    assert!(ok && out.starts_with("receipt verified: 3 rows"), "{out}");
    // A receipt whose hash was changed does not verify.
    let mut forged = Receipt::parse(&token).unwrap();
    forged.hash = "0".repeat(64);
    let (ok, out, _) = run_asof(dir.path(), &["verify-receipt", &forged.token()]);
    assert!(!ok && out.starts_with("MISMATCH"), "{out}");
    // With --format csv the rows stay clean on stdout and the receipt goes to stderr.
    let (ok, out, err) = run_asof(
        dir.path(),
        &[
            "sql",
            "--receipt",
            "--format",
            "csv",
            "SELECT account FROM balances WHERE account = 2 AND __SYSTEM_END_AT IS NULL",
        ],
    );
    assert!(ok);
    assert_eq!(out, "account\n2\n");
    assert!(err.starts_with("receipt: asof-receipt-1:"), "{err}");
}

#[test]
fn vacuum_refuses_to_remove_a_version_a_pinned_receipt_reads() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mut s = SqlSession::new(Store::open(dir.path()).unwrap()).unwrap();
        ledger(&mut s);
        s.execute("ALTER STREAMING TABLE balances SET TBLPROPERTIES ('asof.vacuum.retentionCheck' = 'false')")
            .unwrap();
    }
    let (ok, out, err) = run_asof(dir.path(), &["sql", "--receipt", "--pin", REPORT]);
    assert!(ok, "{err}");
    let token = out
        .lines()
        .find_map(|l| l.strip_prefix("receipt: "))
        .unwrap()
        .to_string();
    let pinned = Receipt::parse(&token).unwrap().tables["balances"];
    run_asof(
        dir.path(),
        &["sql", "INSERT INTO bookings VALUES (2, 7, DATE '2025-03-01'); REFRESH STREAMING TABLE balances"],
    );
    let (ok, _, err) = run_asof(dir.path(), &["sql", "VACUUM balances RETAIN 0 HOURS"]);
    assert!(!ok);
    assert!(
        err.contains(&format!("version {pinned} is pinned")) && err.contains("nothing was changed"),
        "{err}"
    );
    let (ok, out, _) = run_asof(dir.path(), &["verify-receipt", &token]);
    assert!(ok, "{out}");
    // Unpinned (the property set to nothing), VACUUM goes ahead, and the receipt says why it
    // cannot be checked any more.
    let (ok, _, err) = run_asof(
        dir.path(),
        &["sql", "ALTER STREAMING TABLE balances SET TBLPROPERTIES ('asof.vacuum.pinnedVersion' = ''); VACUUM balances RETAIN 0 HOURS"],
    );
    assert!(ok, "{err}");
    let (ok, _, err) = run_asof(dir.path(), &["verify-receipt", &token]);
    assert!(!ok);
    assert!(err.contains("removed by VACUUM"), "{err}");
}

#[test]
fn row_lineage_names_the_file_and_row_an_event_came_from() {
    let dir = tempfile::tempdir().unwrap();
    let landing = dir.path().join("landing");
    std::fs::create_dir_all(&landing).unwrap();
    std::fs::write(landing.join("a.csv"), "id,city,at\n1,Lyon,10\n2,Oslo,10\n").unwrap();
    let mut s = SqlSession::new(Store::open(dir.path().join("db")).unwrap()).unwrap();
    let create = format!(
        "CREATE OR REFRESH STREAMING TABLE home FLOW AUTO CDC
           FROM stream(read_files('{}', format => 'csv', header => true))
           KEYS (id) SEQUENCE BY at COLUMNS * EXCEPT (at) STORED AS SCD TYPE 2",
        landing.display()
    );
    s.execute(&create).unwrap();
    std::fs::write(
        landing.join("b.csv"),
        "id,city,at\n2,Rome,20\n1,Nice,20\n1,Nice,20\n",
    )
    .unwrap();
    s.execute("REFRESH STREAMING TABLE home").unwrap();
    let (_, got) = common::sql_rows(
        &mut s,
        "SELECT _business, _source_rows, _source_row, _source_file, _source_file_row
         FROM row_lineage('home', 1, 25)",
    );
    let file = landing.join("b.csv").display().to_string();
    // Nice at 20 is the second data row of b.csv (the third, the same event again, a duplicate).
    assert_eq!(got, [common::cells(&["20", "2..5", "3", &file, "2"])]);
    let (_, got) = common::sql_rows(
        &mut s,
        "SELECT _source_row, _source_file, _source_file_row FROM row_lineage('home', 2, 15)",
    );
    assert_eq!(
        got,
        [common::cells(&[
            "1",
            &landing.join("a.csv").display().to_string(),
            "2"
        ])]
    );
}

#[test]
fn explain_changes_names_the_late_event_or_statement_behind_each_correction() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = SqlSession::new(Store::open(dir.path()).unwrap()).unwrap();
    s.execute(
        "CREATE TABLE moves (id INT, city STRING, at INT);
         INSERT INTO moves VALUES (1, 'Lyon', 10), (1, 'Paris', 30), (2, 'Oslo', 10);
         CREATE OR REFRESH STREAMING TABLE home FLOW AUTO CDC FROM stream(moves) KEYS (id)
           SEQUENCE BY at COLUMNS * EXCEPT (at) STORED AS SCD TYPE 2;
         INSERT INTO moves VALUES (1, 'Nice', 20), (2, 'Rome', 20);
         REFRESH STREAMING TABLE home;
         UPDATE home SET city = 'PARIS' WHERE id = 1 AND city = 'Paris'",
    )
    .unwrap();
    let (_, got) = common::sql_rows(
        &mut s,
        "SELECT _commit_version, _change_type, city, __START_AT, __END_AT, _cause, _cause_origin,
                _cause_business, _latest_business_before, _late_on_business
         FROM explain_changes('home', 1, 2)",
    );
    let row = |r: &[&str]| -> Vec<Option<String>> {
        r.iter()
            .map(|c| (!c.is_empty()).then(|| c.to_string()))
            .collect()
    };
    let mut expected = vec![
        // Commit 2: the late move to Nice (at 20, behind 30) split Lyon's version.
        row(&[
            "2",
            "update_preimage",
            "Lyon",
            "10",
            "30",
            "upsert",
            "feed",
            "20",
            "30",
            "true",
        ]),
        row(&[
            "2",
            "update_postimage",
            "Lyon",
            "10",
            "20",
            "upsert",
            "feed",
            "20",
            "30",
            "true",
        ]),
        row(&[
            "2", "insert", "Nice", "20", "30", "upsert", "feed", "20", "30", "true",
        ]),
        // Commit 3: the UPDATE, a statement, at the version's own start.
        row(&[
            "3",
            "update_preimage",
            "Paris",
            "30",
            "",
            "upsert",
            "statement",
            "30",
            "30",
            "false",
        ]),
        row(&[
            "3",
            "update_postimage",
            "PARIS",
            "30",
            "",
            "upsert",
            "statement",
            "30",
            "30",
            "false",
        ]),
    ];
    let mut got = got;
    got.sort();
    expected.sort();
    assert_eq!(got, expected);
    // Key 2 had one correction, in commit 2; from version 3 on, none.
    let (_, got) = common::sql_rows(&mut s, "SELECT count(*) FROM explain_changes('home', 2, 3)");
    assert_eq!(got, [common::cells(&["0"])]);
    let err = s
        .execute("SELECT * FROM explain_changes('home', 1)")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("explain_changes('table', key, from [, to])"),
        "{err}"
    );
    // The lineage of the version valid at 25 (Nice, from 20): the late event, the commit that
    // logged it and the rows of the source that commit read.
    let (_, got) = common::sql_rows(
        &mut s,
        "SELECT _commit_version, _operation, _event, _origin, _business, _source, _source_rows,
                _source_row
         FROM row_lineage('home', 1, 25)",
    );
    // The one row of that range the event came from: (1, 'Nice', 20), the fourth of `moves`.
    assert_eq!(
        got,
        [common::cells(&[
            "2",
            "FLOW home",
            "upsert",
            "feed",
            "20",
            "moves",
            "3..5",
            "3"
        ])]
    );
    // The version from 30 holds the feed's event and the UPDATE that rewrote it.
    let (_, got) = common::sql_rows(
        &mut s,
        "SELECT _commit_version, _origin, _statement FROM row_lineage('home', 1, 31) ORDER BY _commit_version",
    );
    assert_eq!(
        got,
        [
            vec![Some("1".into()), Some("feed".into()), None],
            vec![
                Some("3".into()),
                Some("statement".into()),
                Some("UPDATE home SET city = 'PARIS' WHERE id = 1 AND city = 'Paris'".into())
            ],
        ]
    );
    // An SCD TYPE 1 key a statement inserted, with a sequence of two components: its statement
    // event sits below every sequence, and reads back as NULLs.
    s.execute(
        "CREATE TABLE ev2 (id INT, v STRING, a INT, b INT);
         INSERT INTO ev2 VALUES (1, 'x', 1, 1);
         CREATE OR REFRESH STREAMING TABLE latest FLOW AUTO CDC FROM stream(ev2) KEYS (id)
           SEQUENCE BY STRUCT(a, b) COLUMNS * EXCEPT (a, b) STORED AS SCD TYPE 1;
         INSERT INTO latest VALUES (9, 'new')",
    )
    .unwrap();
    let (_, got) = common::sql_rows(
        &mut s,
        "SELECT _change_type, v, _cause_origin, _cause_business FROM explain_changes('latest', 9, 0)",
    );
    assert_eq!(
        got,
        [common::cells(&[
            "insert",
            "new",
            "statement",
            "[Null, Null]"
        ])]
    );
}
