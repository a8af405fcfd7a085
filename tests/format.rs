//! On-disk format compatibility: stores written by format versions 1 to 13 are committed under
//! `tests/data/fixture_v1/` to `tests/data/fixture_v13/` and must open
//! and read the same with every later build (older stores are upgraded in place on open). A change of the format must
//! bump `FORMAT_VERSION` (and keep reading the earlier versions, or say why not), so an accidental
//! change fails here.
//!
//! To write the fixture of the current version (only together with a deliberate format change):
//! `cargo test --test integration format::write_fixture -- --ignored`.

use crate::common;

use asof::{KvStore, SledKv, SqlSession, Store, WriteBatch, FORMAT_VERSION};
use common::{data_dir, read_csv, sorted};

fn fixture_dir(version: u32) -> std::path::PathBuf {
    data_dir().join(format!("fixture_v{version}"))
}

/// The statements that built the fixture: every kind of record the format has.
fn script() -> String {
    let (_, events) = read_csv(&data_dir().join("seed_bitemporal/events.csv"));
    let mut sql = String::from(
        "CREATE TABLE company_events (CompanyId STRING, DataPoint STRING, business_time TIMESTAMP, system_time TIMESTAMP, operation STRING);
         CREATE OR REFRESH STREAMING TABLE company_points TBLPROPERTIES ('owner' = 'audit');
         CREATE FLOW company_points_cdc AS AUTO CDC INTO company_points FROM stream(company_events) KEYS (CompanyId)
           APPLY AS DELETE WHEN operation = 'DELETE' SEQUENCE BY business_time SYSTEM SEQUENCE BY system_time
           COLUMNS * EXCEPT (business_time, system_time, operation) STORED AS BITEMPORAL;
         CREATE OR REFRESH STREAMING TABLE latest FLOW AUTO CDC FROM stream(company_events) KEYS (CompanyId)
           APPLY AS DELETE WHEN operation = 'DELETE' SEQUENCE BY business_time COLUMNS * EXCEPT (system_time, operation)
           STORED AS SCD TYPE 1;
         CREATE VIEW points_now AS SELECT CompanyId, DataPoint, __START_AT AS valid_from FROM company_points WHERE __SYSTEM_END_AT IS NULL;",
    );
    for e in events {
        let f = |i: usize| e[i].clone().unwrap();
        sql.push_str(&format!(
            "INSERT INTO company_events VALUES ('{}', '{}', TIMESTAMP '{}', TIMESTAMP '{}', '{}');
             REFRESH STREAMING TABLE company_points; REFRESH STREAMING TABLE latest;",
            f(0),
            f(1),
            f(2),
            f(3),
            f(4)
        ));
    }
    sql.push_str("ALTER STREAMING TABLE latest SET TBLPROPERTIES ('pipelines.cdc.tombstoneGCThresholdInSeconds' = '3600', 'asof.vacuum.retentionCheck' = 'false'); VACUUM latest RETAIN 0 HOURS;");
    sql
}

/// Version 3 adds statement events: the fixture of version 3 also has a table changed by DML.
fn script_v3() -> String {
    script()
        + "CREATE OR REFRESH STREAMING TABLE corrected FLOW AUTO CDC FROM stream(company_events) KEYS (CompanyId)
             APPLY AS DELETE WHEN operation = 'DELETE' SEQUENCE BY business_time COLUMNS * EXCEPT (system_time, operation)
             STORED AS SCD TYPE 2;
           UPDATE corrected FOR PORTION OF BUSINESS_TIME FROM TIMESTAMP '2025-07-18T11:00:00' TO TIMESTAMP '2025-07-18T12:10:00'
             SET DataPoint = 'fixed' WHERE CompanyId = 'A';
           INSERT INTO corrected (CompanyId, DataPoint, __START_AT) VALUES ('Z', 'z', TIMESTAMP '2025-01-01T00:00:00');"
}

/// Version 4 adds erasures: the fixture of version 4 also has a table, fed from a source of its
/// own, from which a key was erased.
fn script_v4() -> String {
    script_v3()
        + "CREATE TABLE people (id INT, email STRING, seq INT);
           INSERT INTO people VALUES (1, 'one@example.com', 1), (2, 'two@example.com', 1), (3, 'three@example.com', 1);
           CREATE OR REFRESH STREAMING TABLE customers FLOW AUTO CDC FROM stream(people) KEYS (id)
             SEQUENCE BY seq COLUMNS * EXCEPT (seq) STORED AS SCD TYPE 2;
           INSERT INTO people VALUES (2, 'two-b@example.com', 2), (1, 'one-b@example.com', 2);
           REFRESH STREAMING TABLE customers;
           ERASE FROM customers WHERE id = 2 REASON 'fixture';"
}

/// Version 5 adds zone maps to the page entries of key heads: the fixture of version 5 also has a
/// bitemporal table with a long history on one key (frozen pages, one of them thawed by a late
/// event and frozen again).
fn script_v5() -> String {
    let values = |from: i32, to: i32| {
        (from..to)
            .map(|i| format!("(1, {i}, {}, {})", i * 10, i * 10))
            .collect::<Vec<_>>()
            .join(", ")
    };
    script_v4()
        + &format!(
            "CREATE TABLE readings (id INT, v INT, b INT, s INT);
             INSERT INTO readings VALUES {}, (2, -1, 0, 0);
             CREATE OR REFRESH STREAMING TABLE readings_bt FLOW AUTO CDC FROM stream(readings) KEYS (id)
               SEQUENCE BY b SYSTEM SEQUENCE BY s COLUMNS * EXCEPT (b, s) STORED AS BITEMPORAL;
             INSERT INTO readings VALUES {}, (1, 1000, 55, 2000);
             REFRESH STREAMING TABLE readings_bt;",
            values(0, 60),
            values(60, 120)
        )
}

/// Version 6 adds DML on source tables, schemas, nested values and generated columns: the
/// fixture of version 6 also has a schema with a source changed by DELETE and UPDATE, a flow
/// those changes stopped, nested columns and a generated one.
fn script_v6() -> String {
    script_v5()
        + "CREATE SCHEMA ops COMMENT 'version 6';
           CREATE TABLE ops.ev (id BIGINT, seq BIGINT, addr STRUCT<city: STRING, zip: INT>,
             tags ARRAY<DOUBLE>, attrs MAP<STRING, BIGINT>);
           INSERT INTO ops.ev SELECT 1 AS id, 1 AS seq, named_struct('city', 'Oslo', 'zip', 150) AS addr,
             array(1.5, cast('NaN' AS DOUBLE)) AS tags, map(['a'], [1]) AS attrs;
           INSERT INTO ops.ev SELECT 2 AS id, 1 AS seq, named_struct('city', 'Bergen', 'zip', NULL) AS addr,
             array() AS tags, map(['b'], [CAST(NULL AS BIGINT)]) AS attrs;
           CREATE OR REFRESH STREAMING TABLE ops.places (id BIGINT, addr STRUCT<city: STRING, zip: INT>,
             tags ARRAY<DOUBLE>, attrs MAP<STRING, BIGINT>,
             city STRING GENERATED ALWAYS AS (upper(addr.city)))
           FLOW AUTO CDC FROM stream(ops.ev) KEYS (id) SEQUENCE BY seq COLUMNS * EXCEPT (seq)
           STORED AS SCD TYPE 2;
           CREATE TABLE ops.numbered (n BIGINT GENERATED ALWAYS AS IDENTITY, word STRING);
           INSERT INTO ops.numbered (word) VALUES ('one'), ('two'), ('three');
           DELETE FROM ops.numbered WHERE word = 'two';
           UPDATE ops.ev SET seq = 2, addr = named_struct('city', 'Trondheim', 'zip', 7000) WHERE id = 2;
           CREATE TABLE ops.deliveries (day BIGINT, amount BIGINT, loaded BIGINT);
           INSERT INTO ops.deliveries VALUES (1, 10, 100), (2, 20, 100);
           CREATE OR REFRESH STREAMING TABLE ops.daily;
           CREATE FLOW ops_load AS INSERT INTO ops.daily BY NAME REPLACE USING (day) SEQUENCE BY loaded
             SELECT day, amount, loaded FROM STREAM(ops.deliveries);
           INSERT INTO ops.deliveries VALUES (1, 11, 200);
           REFRESH STREAMING TABLE ops.daily;
           CREATE FLOW ops_load AS INSERT INTO ops.daily BY NAME REPLACE USING (day) SEQUENCE BY loaded
             SELECT day, amount * 10 AS amount, loaded FROM STREAM(ops.deliveries);
           REFRESH STREAMING TABLE ops.daily FULL;"
}

/// Version 7 keeps, for every mode, since when a key is deleted, which retention reads: the
/// fixture of version 7 also has a table whose retention erased a key.
fn script_v7() -> String {
    script_v6()
        + "CREATE TABLE accounts_feed (id INT, holder STRING, seq INT, op STRING);
           INSERT INTO accounts_feed VALUES (1, 'kept', 1, 'U'), (2, 'erased-by-retention', 1, 'U');
           CREATE OR REFRESH STREAMING TABLE accounts
             TBLPROPERTIES ('asof.erase.deletedKeysAfter' = 'interval 0 seconds')
             FLOW AUTO CDC FROM stream(accounts_feed) KEYS (id) APPLY AS DELETE WHEN op = 'D'
             SEQUENCE BY seq COLUMNS * EXCEPT (seq, op) STORED AS BITEMPORAL;
           INSERT INTO accounts_feed VALUES (2, NULL, 2, 'D');
           REFRESH STREAMING TABLE accounts;
           INSERT INTO accounts_feed VALUES (1, 'kept-b', 2, 'U');
           REFRESH STREAMING TABLE accounts;"
}

/// Version 8 writes the row directory of a commit applied in parts a part at a time: the
/// fixture of version 8 is written with parts of 4 source rows, and also has a table loaded by
/// one refresh of 12 events and then refreshed in full.
fn script_v8() -> String {
    script_v7()
        + "CREATE TABLE prices_feed (id INT, price INT, seq INT, op STRING);
           INSERT INTO prices_feed VALUES (1, 10, 1, 'U'), (2, 20, 1, 'U'), (3, 30, 1, 'U'),
             (4, 40, 1, 'U'), (5, 50, 1, 'U'), (6, 60, 1, 'U'), (1, 11, 2, 'U'), (2, 21, 2, 'U'),
             (3, 31, 3, 'U'), (3, 32, 2, 'U'), (5, NULL, 2, 'D'), (6, 61, 2, 'U');
           CREATE OR REFRESH STREAMING TABLE prices FLOW AUTO CDC FROM stream(prices_feed) KEYS (id)
             APPLY AS DELETE WHEN op = 'D' SEQUENCE BY seq COLUMNS * EXCEPT (op)
             STORED AS SCD TYPE 2;
           REFRESH STREAMING TABLE prices FULL;"
}

/// Source rows per part when the fixture of version 8 was written.
const FIXTURE_V8_PART_ROWS: u64 = 4;

/// Version 10's script: version 8's, and a table with one key of 6,000 versions in one commit,
/// whose head lists its pages apart, in chunks.
fn script_v10() -> String {
    script_v8()
        + "CREATE TABLE long_feed (id INT, v BIGINT, b BIGINT, s BIGINT);
           INSERT INTO long_feed SELECT 1, value * 10 AS v, value AS b, value AS s FROM range(6000);
           CREATE OR REFRESH STREAMING TABLE long_key FLOW AUTO CDC FROM stream(long_feed)
             KEYS (id) SEQUENCE BY b SYSTEM SEQUENCE BY s COLUMNS * EXCEPT (b, s)
             STORED AS BITEMPORAL;"
}

#[test]
#[ignore = "rebuilds the committed fixture; run only with a deliberate format change"]
fn write_fixture() {
    let dir = fixture_dir(FORMAT_VERSION);
    let _ = std::fs::remove_dir_all(&dir);
    let options = asof::StoreOptions {
        commit_part_rows: FIXTURE_V8_PART_ROWS,
        ..Default::default()
    };
    let mut s = SqlSession::new(Store::open_with(&dir, options).unwrap()).unwrap();
    s.execute(&script_v10()).unwrap();
}

/// Writes the fixture of version 8's script (the one of version 9 too) afresh in `dir`.
fn write_v8_fixture(dir: &std::path::Path) {
    let _ = std::fs::remove_dir_all(dir);
    let options = asof::StoreOptions {
        commit_part_rows: FIXTURE_V8_PART_ROWS,
        ..Default::default()
    };
    let mut s = SqlSession::new(Store::open_with(dir, options).unwrap()).unwrap();
    s.execute(&script_v8()).unwrap();
}

/// The format record of the store in `dir`.
fn format_record(dir: &std::path::Path) -> u32 {
    let kv = SledKv::open(dir, 1 << 20).unwrap();
    let v = kv.get(b"M format").unwrap().unwrap();
    u32::from_be_bytes(v.try_into().unwrap())
}

/// Damages every event block of the store in `dir`: a table that must be replayed from its log
/// can no longer be read.
fn damage_event_blocks(dir: &std::path::Path) {
    let kv = SledKv::open(dir, 1 << 20).unwrap();
    let mut b = WriteBatch::default();
    for r in kv.scan_prefix(b"E") {
        let (k, _) = r.unwrap();
        b.put(k, b"damaged".to_vec());
    }
    assert!(!b.is_empty());
    kv.write(b).unwrap();
}

use common::sorted_sql_rows as rows;

/// Expected rows written as text, an empty cell for NULL.
fn cells<const N: usize>(rows: &[[&str; N]]) -> Vec<Vec<Option<String>>> {
    rows.iter()
        .map(|r| {
            r.iter()
                .map(|c| (!c.is_empty()).then(|| c.to_string()))
                .collect()
        })
        .collect()
}

/// Opens the store in `dir` and reads every table once: a store of an earlier format is upgraded
/// and each table writes its derived records (from its log) in the current format.
fn upgrade(dir: &std::path::Path) {
    let store = Store::open(dir).unwrap();
    for t in store.tables().unwrap() {
        store.read(&t, |r| r.live_rows()).unwrap();
    }
    drop(store);
    assert_eq!(format_record(dir), FORMAT_VERSION, "upgraded in place");
}

#[test]
fn the_version_1_fixture_is_upgraded_once_and_then_reads_from_its_pages() {
    let tmp = common::copy_of_fixture(&fixture_dir(1));
    assert_eq!(format_record(tmp.path()), 1);
    reads_the_same(Store::open(tmp.path()).unwrap());
    assert_eq!(
        format_record(tmp.path()),
        FORMAT_VERSION,
        "upgraded in place"
    );
    // The first use of each table wrote its pages: the log is no longer read to open a table.
    damage_event_blocks(tmp.path());
    let store = Store::open(tmp.path()).unwrap();
    for t in ["company_points", "latest"] {
        store.read(t, |r| r.live_rows()).unwrap();
    }
}

#[test]
fn the_version_2_fixture_opens_and_once_upgraded_reads_the_same_without_its_log() {
    let tmp = common::copy_of_fixture(&fixture_dir(2));
    reads_the_same(Store::open(tmp.path()).unwrap());
    assert_eq!(
        format_record(tmp.path()),
        FORMAT_VERSION,
        "upgraded in place"
    );
    let tmp = common::copy_of_fixture(&fixture_dir(2));
    upgrade(tmp.path());
    damage_event_blocks(tmp.path());
    reads_the_same(Store::open(tmp.path()).unwrap());
}

#[test]
fn the_version_3_fixture_reads_its_statement_events_from_the_log_and_from_its_pages() {
    // Sorted; the two versions the portion cut keep their own `business_time`, so they stay two.
    let expected = [
        ["A", "XFv1", "2025-07-18T10:01:00", "2025-07-18T11:00:00"],
        ["A", "XFv2", "2025-07-18T12:15:43", "2025-07-18T12:30:00"],
        ["A", "XFv3", "2025-07-18T12:10:00", "2025-07-18T12:15:43"],
        ["A", "fixed", "2025-07-18T11:00:00", "2025-07-18T12:05:00"],
        ["A", "fixed", "2025-07-18T12:05:00", "2025-07-18T12:10:00"],
        ["Z", "z", "2025-01-01T00:00:00", ""],
    ];
    let expected = cells(&expected);
    let query = "SELECT CompanyId, DataPoint, __START_AT, __END_AT FROM corrected";
    for damaged in [false, true] {
        let tmp = common::copy_of_fixture(&fixture_dir(3));
        if damaged {
            upgrade(tmp.path());
            damage_event_blocks(tmp.path());
        }
        let store = Store::open(tmp.path()).unwrap();
        let history = operations(&store, "corrected");
        assert_eq!(
            history,
            ["CREATE TABLE", "FLOW corrected", "UPDATE", "WRITE"]
        );
        reads_the_same(store.clone());
        let mut s = SqlSession::new(store).unwrap();
        assert_eq!(rows(&mut s, query), expected, "damaged log: {damaged}");
        assert_eq!(
            rows(&mut s, &format!("{query} VERSION AS OF 1")).len(),
            3,
            "before the statements"
        );
    }
    // Replayed from the log alone (its derived records deleted), it reads the same.
    let tmp = common::copy_of_fixture(&fixture_dir(3));
    {
        let kv = SledKv::open(tmp.path(), 1 << 20).unwrap();
        let mut b = WriteBatch::default();
        for tag in [b"K", b"P", b"X", b"G"] {
            for r in kv.scan_prefix(tag) {
                b.delete(r.unwrap().0);
            }
        }
        kv.write(b).unwrap();
    }
    let mut s = SqlSession::new(Store::open(tmp.path()).unwrap()).unwrap();
    assert_eq!(rows(&mut s, query), expected, "replayed");
}

/// The operations of `table`'s commits, in order.
fn operations(store: &Store, table: &str) -> Vec<String> {
    store
        .history(table)
        .unwrap()
        .iter()
        .map(|c| c.operation.clone())
        .collect()
}

/// The fixture's tables, history, properties and views, at every version; and it takes commits.
fn reads_the_same(store: Store) {
    let mut tables = store.tables().unwrap();
    tables.retain(|t| t != "corrected" && t != "customers");
    tables.sort();
    assert_eq!(tables, ["company_points", "latest"]);
    assert_eq!(store.history("company_points").unwrap().len(), 5);
    let latest = store.history("latest").unwrap();
    assert_eq!(latest.last().unwrap().operation, "VACUUM");
    assert_eq!(
        store.properties("company_points").unwrap()["owner"],
        "audit"
    );
    let mut s = SqlSession::new(store).unwrap();
    for n in 1..=4 {
        let (_, exp) =
            read_csv(&data_dir().join(format!("seed_bitemporal/expected_after_{n}.csv")));
        assert_eq!(
            rows(
                &mut s,
                &format!("SELECT * FROM company_points VERSION AS OF {n}")
            ),
            sorted(exp),
            "version {n}"
        );
    }
    assert_eq!(
        rows(&mut s, "SELECT CompanyId, DataPoint FROM latest"),
        Vec::<Vec<Option<String>>>::new(),
        "the last event deleted A"
    );
    assert_eq!(
        rows(&mut s, "SELECT count(*) FROM points_now"),
        [[Some("3".to_string())]]
    );
    assert_eq!(
        rows(&mut s, "SELECT count(*) FROM company_events"),
        [[Some("4".to_string())]]
    );
    // And it takes new commits.
    s.execute("INSERT INTO company_events VALUES ('B', 'n', TIMESTAMP '2025-08-01T00:00:00', TIMESTAMP '2025-08-01T00:00:00', 'INSERT'); REFRESH STREAMING TABLE latest").unwrap();
    assert_eq!(
        rows(&mut s, "SELECT DataPoint FROM latest"),
        [[Some("n".to_string())]]
    );
}

#[test]
fn the_version_4_fixture_reads_without_its_erased_key_and_verifies() {
    let tmp = common::copy_of_fixture(&fixture_dir(4));
    let store = Store::open(tmp.path()).unwrap();
    let history = operations(&store, "customers");
    assert_eq!(
        history,
        ["CREATE TABLE", "FLOW customers", "FLOW customers", "ERASE"]
    );
    assert!(store.verify().unwrap().ok());
    reads_the_same(store.clone());
    let mut s = SqlSession::new(store).unwrap();
    let cell = |c: &str| Some(c.to_string());
    assert_eq!(
        rows(
            &mut s,
            "SELECT id, email, __START_AT, __END_AT FROM customers"
        ),
        [
            [cell("1"), cell("one-b@example.com"), cell("2"), None],
            [cell("1"), cell("one@example.com"), cell("1"), cell("2")],
            [cell("3"), cell("three@example.com"), cell("1"), None],
        ]
    );
    assert_eq!(
        rows(&mut s, "SELECT id FROM people"),
        [[cell("1")], [cell("1")], [cell("3")]]
    );
    // The flow's checkpoint still counts the erased rows: a new row is read once.
    s.execute(
        "INSERT INTO people VALUES (4, 'four@example.com', 1); REFRESH STREAMING TABLE customers",
    )
    .unwrap();
    assert_eq!(
        rows(&mut s, "SELECT id FROM customers WHERE __END_AT IS NULL"),
        [[cell("1")], [cell("3")], [cell("4")]]
    );
}

#[test]
fn the_version_5_fixture_answers_as_of_queries_from_its_zone_mapped_pages_without_its_log() {
    let tmp = common::copy_of_fixture(&fixture_dir(5));
    assert_eq!(format_record(tmp.path()), 5);
    assert!(Store::open(tmp.path()).unwrap().verify().unwrap().ok());
    // Once upgraded (version 7 rebuilds the key heads), read from the pages alone: the log is
    // damaged.
    upgrade(tmp.path());
    damage_event_blocks(tmp.path());
    let store = Store::open(tmp.path()).unwrap();
    let mut s = SqlSession::new(store.clone()).unwrap();
    let cell = |c: &str| Some(c.to_string());
    let as_of = |s: &mut SqlSession, b: i32, sys: i32| {
        rows(
            s,
            &format!(
                "SELECT id, v, __START_AT, __END_AT, __SYSTEM_START_AT, __SYSTEM_END_AT FROM readings_bt
                 FOR BUSINESS_TIME AS OF {b} FOR SYSTEM_TIME AS OF {sys}"
            ),
        )
    };
    assert_eq!(
        as_of(&mut s, 555, 1500),
        [
            [
                cell("1"),
                cell("55"),
                cell("550"),
                cell("560"),
                cell("560"),
                None
            ],
            [cell("2"), cell("-1"), cell("0"), None, cell("0"), None],
        ]
    );
    // The late correction, at system time 2000.
    assert_eq!(
        as_of(&mut s, 55, 2000),
        [
            [
                cell("1"),
                cell("1000"),
                cell("55"),
                cell("60"),
                cell("2000"),
                None
            ],
            [cell("2"), cell("-1"), cell("0"), None, cell("0"), None],
        ]
    );
    assert_eq!(
        rows(
            &mut s,
            "SELECT count(*), count(__SYSTEM_END_AT) FROM readings_bt"
        ),
        [[cell("242"), cell("120")]]
    );
    let cold = store.read("readings_bt", |r| r.cold_stats()).unwrap();
    assert!(cold.frozen_keys == 1 && cold.page_bytes > 0, "{cold:?}");
}

#[test]
fn the_version_6_fixture_reads_its_schemas_nested_and_generated_columns_and_source_changes() {
    let tmp = common::copy_of_fixture(&fixture_dir(6));
    assert_eq!(format_record(tmp.path()), 6);
    let store = Store::open(tmp.path()).unwrap();
    assert!(store.verify().unwrap().ok());
    let mut s = SqlSession::new(store).unwrap();
    let cell = |c: &str| Some(c.to_string());
    assert_eq!(
        rows(&mut s, "SHOW SCHEMAS"),
        [[cell("default")], [cell("ops")]]
    );
    // Nested values and the generated column, as written.
    assert_eq!(
        rows(
            &mut s,
            "SELECT id, addr.city, addr.zip, tags, attrs['a'], attrs['b'] IS NULL, city FROM ops.places"
        ),
        [
            [
                cell("1"),
                cell("Oslo"),
                cell("150"),
                cell("[1.5, NaN]"),
                cell("1"),
                cell("true"),
                cell("OSLO")
            ],
            [
                cell("2"),
                cell("Bergen"),
                None,
                cell("[]"),
                None,
                cell("true"),
                cell("BERGEN")
            ],
        ]
    );
    // The source's DELETE and UPDATE: the rows there now, the rows before them, the identity.
    assert_eq!(
        rows(&mut s, "SELECT n, word FROM ops.numbered"),
        [[cell("1"), cell("one")], [cell("3"), cell("three")]]
    );
    assert_eq!(
        rows(&mut s, "SELECT id, seq, addr.city FROM ops.ev"),
        [
            [cell("1"), cell("1"), cell("Oslo")],
            [cell("2"), cell("2"), cell("Trondheim")]
        ]
    );
    // The flow had read the updated row: it stays stopped until a full refresh.
    let e = s
        .execute("REFRESH STREAMING TABLE ops.places")
        .unwrap_err()
        .to_string();
    assert!(e.contains("UPDATE"), "{e}");
    s.execute("REFRESH STREAMING TABLE ops.places FULL")
        .unwrap();
    assert_eq!(
        rows(
            &mut s,
            "SELECT id, city FROM ops.places WHERE __END_AT IS NULL"
        ),
        [[cell("1"), cell("OSLO")], [cell("2"), cell("TRONDHEIM")]]
    );
    // A replace flow, redefined, then a full refresh: its commits read back, and it goes on.
    assert_eq!(
        rows(&mut s, "SELECT day, amount FROM ops.daily"),
        [[cell("1"), cell("110")], [cell("2"), cell("200")]]
    );
    let (names, history) = common::sql_rows(&mut s, "DESCRIBE HISTORY ops.daily");
    let op = names.iter().position(|n| n == "operation").unwrap();
    let ops: Vec<&str> = history.iter().filter_map(|r| r[op].as_deref()).collect();
    for want in ["REPLACE", "FULL REFRESH", "CREATE FLOW"] {
        assert!(ops.contains(&want), "{ops:?}");
    }
    s.execute("INSERT INTO ops.deliveries VALUES (2, 21, 300); REFRESH STREAMING TABLE ops.daily")
        .unwrap();
    assert_eq!(
        rows(&mut s, "SELECT day, amount FROM ops.daily"),
        [[cell("1"), cell("110")], [cell("2"), cell("210")]]
    );
}

#[test]
fn a_version_6_store_learns_since_when_its_keys_are_deleted_and_retention_erases_them() {
    // Version 6 kept no deletion time for bitemporal keys; the upgrade rebuilds the key heads, so
    // key A, deleted in business time before the upgrade, is erased once the property is set.
    let tmp = common::copy_of_fixture(&fixture_dir(6));
    let mut s = SqlSession::new(Store::open(tmp.path()).unwrap()).unwrap();
    let cell = |c: &str| Some(c.to_string());
    assert_eq!(
        rows(&mut s, "SELECT DISTINCT CompanyId FROM company_points"),
        [[cell("A")]]
    );
    s.execute("ALTER STREAMING TABLE company_points SET TBLPROPERTIES ('asof.erase.deletedKeysAfter' = '0 seconds')")
        .unwrap();
    let history = s.store().history("company_points").unwrap();
    let last = history.last().unwrap();
    assert_eq!(
        (last.operation.as_str(), last.parameters["keys"].as_str()),
        ("ERASE", "1")
    );
    assert_eq!(
        rows(&mut s, "SELECT count(*) FROM company_points"),
        [[cell("0")]]
    );
    assert!(s.store().verify().unwrap().ok());
}

#[test]
fn the_version_7_fixture_reads_a_key_its_retention_erased_as_never_there() {
    let tmp = common::copy_of_fixture(&fixture_dir(7));
    assert_eq!(format_record(tmp.path()), 7);
    let store = Store::open(tmp.path()).unwrap();
    assert!(store.verify().unwrap().ok());
    let ops: Vec<String> = store
        .history("accounts")
        .unwrap()
        .into_iter()
        .map(|c| c.operation)
        .collect();
    assert_eq!(
        ops,
        [
            "CREATE TABLE",
            "FLOW accounts",
            "FLOW accounts",
            "FLOW accounts",
            "ERASE"
        ]
    );
    let mut s = SqlSession::new(store).unwrap();
    let cell = |c: &str| Some(c.to_string());
    assert_eq!(
        rows(
            &mut s,
            "SELECT id, holder, __START_AT, __END_AT FROM accounts WHERE __SYSTEM_END_AT IS NULL"
        ),
        [
            [cell("1"), cell("kept"), cell("1"), cell("2")],
            [cell("1"), cell("kept-b"), cell("2"), None]
        ]
    );
    assert_eq!(
        rows(&mut s, "SELECT id, holder FROM accounts_feed"),
        [[cell("1"), cell("kept")], [cell("1"), cell("kept-b")]]
    );
    assert!(common::files_holding(tmp.path(), b"erased-by-retention").is_empty());
    // The rule goes on: key 1 deleted now is erased at the commit after.
    s.execute("INSERT INTO accounts_feed VALUES (1, NULL, 3, 'D'); REFRESH STREAMING TABLE accounts;
               INSERT INTO accounts_feed VALUES (3, 'new', 1, 'U'); REFRESH STREAMING TABLE accounts")
        .unwrap();
    assert_eq!(
        rows(&mut s, "SELECT DISTINCT id FROM accounts"),
        [[cell("3")]]
    );
}

/// The parts of each row directory (`X` table version part) of the store in `dir`, by table and
/// version: more than one for a commit applied in parts.
fn row_dir_parts(dir: &std::path::Path) -> std::collections::BTreeMap<(u32, u64), Vec<u32>> {
    let kv = SledKv::open(dir, 1 << 20).unwrap();
    let mut parts = std::collections::BTreeMap::<_, Vec<u32>>::new();
    for r in kv.scan_prefix(b"X") {
        let (k, _) = r.unwrap();
        assert_eq!(k.len(), 17, "tag, table, version, part");
        let id = u32::from_be_bytes(k[1..5].try_into().unwrap());
        let version = u64::from_be_bytes(k[5..13].try_into().unwrap());
        let part = u32::from_be_bytes(k[13..17].try_into().unwrap());
        parts.entry((id, version)).or_default().push(part);
    }
    parts
}

/// The rows of `prices` in the fixtures of versions 8 and 9, sorted as text.
const PRICES: [[&str; 4]; 11] = [
    ["1", "10", "1", "2"],
    ["1", "11", "2", ""],
    ["2", "20", "1", "2"],
    ["2", "21", "2", ""],
    ["3", "30", "1", "2"],
    ["3", "31", "3", ""],
    ["3", "32", "2", "3"],
    ["4", "40", "1", ""],
    ["5", "50", "1", "2"],
    ["6", "60", "1", "2"],
    ["6", "61", "2", ""],
];

/// The first byte of each stored value of the store in `dir` whose key starts with `tag`.
fn first_bytes(dir: &std::path::Path, tag: &[u8]) -> std::collections::BTreeSet<u8> {
    let kv = SledKv::open(dir, 1 << 20).unwrap();
    kv.scan_prefix(tag).map(|r| r.unwrap().1[0]).collect()
}

#[test]
fn the_version_8_fixture_is_upgraded_and_then_reads_the_same_without_its_log() {
    let tmp = common::copy_of_fixture(&fixture_dir(8));
    assert_eq!(format_record(tmp.path()), 8);
    // The load of 12 events in parts of 4 rows (3 parts) and its full refresh wrote
    // directories of several parts, numbered from 0.
    let parts = row_dir_parts(tmp.path());
    let parted: Vec<&Vec<u32>> = parts.values().filter(|p| p.len() > 1).collect();
    assert!(parted.len() >= 2, "{parts:?}");
    for p in parts.values() {
        assert_eq!(*p, (0..p.len() as u32).collect::<Vec<_>>());
    }
    // Its event blocks are LZ4 (archive format byte 2), and stay so: the log is not rewritten.
    assert_eq!(first_bytes(tmp.path(), b"E"), [2].into());
    assert!(Store::open(tmp.path()).unwrap().verify().unwrap().ok());
    upgrade(tmp.path());
    assert_eq!(first_bytes(tmp.path(), b"E"), [2].into());
    // Read from the pages the upgrade wrote, the log damaged.
    damage_event_blocks(tmp.path());
    let mut s = SqlSession::new(Store::open(tmp.path()).unwrap()).unwrap();
    let history = rows(&mut s, "SELECT id, price, __START_AT, __END_AT FROM prices");
    assert_eq!(history, cells(&PRICES));
}

/// Version 9 is read as it is: opening it sets the format record, and no table is rebuilt
/// (its log damaged first, it still reads from its pages).
#[test]
fn the_version_9_fixture_reads_its_packed_pages_and_zstd_log() {
    let tmp = common::copy_of_fixture(&fixture_dir(9));
    assert_eq!(format_record(tmp.path()), 9);
    // Event blocks in zstd (archive format byte 3).
    assert_eq!(first_bytes(tmp.path(), b"E"), [3].into());
    let parts = row_dir_parts(tmp.path());
    assert!(
        parts.values().filter(|p| p.len() > 1).count() >= 2,
        "{parts:?}"
    );
    let store = Store::open(tmp.path()).unwrap();
    assert!(store.verify().unwrap().ok());
    let frozen = store.read("readings_bt", |r| r.cold_stats()).unwrap();
    assert!(frozen.pages > 0, "{frozen:?}");
    drop(store);
    // Read from its pages and directories alone: the log is not needed.
    damage_event_blocks(tmp.path());
    let mut s = SqlSession::new(Store::open(tmp.path()).unwrap()).unwrap();
    let history = rows(&mut s, "SELECT id, price, __START_AT, __END_AT FROM prices");
    assert_eq!(history, cells(&PRICES));
    let before = common::copy_of_fixture(&fixture_dir(8));
    let mut old = SqlSession::new(Store::open(before.path()).unwrap()).unwrap();
    let q = "SELECT * FROM readings_bt";
    assert_eq!(rows(&mut s, q), rows(&mut old, q));
    drop(s);
    assert_eq!(format_record(tmp.path()), FORMAT_VERSION);
}

/// Version 10: a key of more than 64 pages lists them apart from its head's meta, in chunks
/// (FORMAT.md §9.1). Its lookups, a scan and a commit read them as a key of few pages does.
#[test]
fn the_version_10_fixture_reads_a_key_whose_page_list_is_in_chunks() {
    let tmp = common::copy_of_fixture(&fixture_dir(10));
    assert_eq!(format_record(tmp.path()), 10);
    {
        let kv = SledKv::open(tmp.path(), 1 << 20).unwrap();
        let apart = kv
            .scan_prefix(b"K")
            .map(|r| r.unwrap().1)
            .filter(|v| v.len() >= 4 && v[3] & 0x80 != 0)
            .count();
        assert_eq!(apart, 1, "one key head lists its pages apart");
    }
    assert!(Store::open(tmp.path()).unwrap().verify().unwrap().ok());
    // Read from its pages alone.
    damage_event_blocks(tmp.path());
    let store = Store::open(tmp.path()).unwrap();
    let frozen = store.read("long_key", |r| r.cold_stats()).unwrap();
    assert!(frozen.pages > 64, "{frozen:?}");
    // Event i is at business and system time i, with v = 10 i: as of business time b, known at
    // system time s, the answer is event min(b, s).
    let key = [asof::Value::Int(1)];
    for (b, s) in [
        (4_000, 3_000),
        (10, 5_999),
        (5_999, 5_999),
        (0, 0),
        (2_500, 2_501),
    ] {
        let (bt, st) = ([asof::Value::Int(b)], asof::Value::Int(s));
        let got = asof::lookup(&store, "long_key", &key, Some(&bt[..]), Some(&st))
            .unwrap()
            .expect("a row");
        assert_eq!(got.values[1], asof::Value::Int(10 * b.min(s)), "({b}, {s})");
    }
    let mut s = SqlSession::new(store).unwrap();
    let q = "SELECT count(*), sum(v) FROM long_key WHERE __SYSTEM_END_AT IS NULL";
    assert_eq!(
        rows(&mut s, q),
        cells(&[[
            "6000",
            &(0..6000i64).map(|i| 10 * i).sum::<i64>().to_string()
        ]])
    );
    // A late event into the key's first versions thaws its pages and writes its head again.
    late_event_into_the_long_key(&mut s);
}

/// A late event into the fixtures' long key's first versions (business time 5, known at 6000),
/// and the version it makes.
fn late_event_into_the_long_key(s: &mut SqlSession) {
    s.execute(
        "INSERT INTO long_feed VALUES (1, 7, 5, 6000);
         REFRESH STREAMING TABLE long_key;",
    )
    .unwrap();
    let q = "SELECT v FROM long_key WHERE __SYSTEM_END_AT IS NULL AND __START_AT = 5";
    assert_eq!(rows(s, q), cells(&[["7"]]));
}

/// Each of `queries`, each by a store just opened, answers the same (and something) in the
/// stores in `a` and `b`.
fn answers_the_same(a: &std::path::Path, b: &std::path::Path, queries: &[&str]) {
    for q in queries {
        let mut x = SqlSession::new(Store::open(a).unwrap()).unwrap();
        let mut y = SqlSession::new(Store::open(b).unwrap()).unwrap();
        let got = rows(&mut x, q);
        assert!(!got.is_empty(), "{q}");
        assert_eq!(got, rows(&mut y, q), "{q}");
    }
}

/// As-of queries on both timelines of the fixtures' long key (event i at business and system
/// time i, with v = 10 i: as of business time b, known at system time s, the answer is event
/// min(b, s)), in its pages and in its hot tail, with the value each must return.
fn long_key_as_of(s: &mut SqlSession) {
    for (b, sys) in [
        (4_000, 3_000),
        (10, 5_999),
        (5_999, 5_999),
        (0, 0),
        (5_990, 5_995),
    ] {
        let q = format!(
            "SELECT id, v FROM long_key FOR BUSINESS_TIME AS OF {b} FOR SYSTEM_TIME AS OF {sys}"
        );
        let want = (10 * b.min(sys)).to_string();
        assert_eq!(rows(s, &q), cells(&[["1", &want]]), "({b}, {sys})");
    }
}

/// Version 11: each key head holds the zone map of its hot rows (flag bit 30), and a scan
/// whose filter it rules out leaves them undecoded. Scans as of points in the pages and in the
/// hot tail read the same as from version 10's heads, which have no such zone.
#[test]
fn the_version_11_fixture_scans_its_hot_rows_by_their_zone_as_version_10_does_without() {
    let heads = |dir: &std::path::Path| -> (usize, usize) {
        let kv = SledKv::open(dir, 1 << 20).unwrap();
        let heads: Vec<Vec<u8>> = kv.scan_prefix(b"K").map(|r| r.unwrap().1).collect();
        let zoned = heads.iter().filter(|v| v.len() >= 4 && v[3] & 0x40 != 0);
        (heads.len(), zoned.count())
    };
    let new = common::copy_of_fixture(&fixture_dir(11));
    let old = common::copy_of_fixture(&fixture_dir(10));
    assert_eq!(format_record(new.path()), 11);
    let (n, zoned) = heads(new.path());
    assert!(n > 1 && zoned == n, "{zoned} of {n} heads hold a hot zone");
    assert_eq!(heads(old.path()).1, 0, "version 10's heads hold none");
    assert!(Store::open(new.path()).unwrap().verify().unwrap().ok());
    // Read from the pages alone, each query by a store just opened (the table not in memory).
    damage_event_blocks(new.path());
    damage_event_blocks(old.path());
    let queries = [
        "SELECT * FROM readings_bt",
        "SELECT * FROM readings_bt FOR BUSINESS_TIME AS OF 15 FOR SYSTEM_TIME AS OF 250",
        "SELECT id, price FROM prices WHERE __START_AT <= 2 AND (__END_AT > 2 OR __END_AT IS NULL)",
        "SELECT * FROM company_points FOR SYSTEM_TIME AS OF TIMESTAMP '2025-07-18T12:00:00'",
    ];
    answers_the_same(new.path(), old.path(), &queries);
    for dir in [new.path(), old.path()] {
        long_key_as_of(&mut SqlSession::new(Store::open(dir).unwrap()).unwrap());
    }
}

/// The pages of the store in `dir`: how many, how many of them flag their history as taking
/// its values from their rows (bit 31 of their first word, format 12), and their bytes.
fn pages(dir: &std::path::Path) -> (usize, usize, usize) {
    let kv = SledKv::open(dir, 1 << 20).unwrap();
    let pages: Vec<Vec<u8>> = kv.scan_prefix(b"P").map(|r| r.unwrap().1).collect();
    let shared = pages.iter().filter(|v| v.len() >= 4 && v[3] & 0x80 != 0);
    (
        pages.len(),
        shared.count(),
        pages.iter().map(Vec::len).sum(),
    )
}

/// Version 12: a page's history (its events and timeline versions) names the entries of the
/// page's rows that hold its values instead of storing them again. Version 11's pages are read
/// as they are, read the same, and a late event that thaws them writes them in the new layout.
#[test]
fn the_version_12_fixture_stores_page_values_once_and_reads_as_version_11_does() {
    let new = common::copy_of_fixture(&fixture_dir(12));
    let old = common::copy_of_fixture(&fixture_dir(11));
    assert_eq!(format_record(new.path()), 12);
    let (n, shared, bytes) = pages(new.path());
    let (n_old, shared_old, bytes_old) = pages(old.path());
    assert!(n > 64 && shared == n, "{shared} of {n} pages");
    assert_eq!(
        (n_old, shared_old),
        (n, 0),
        "the same pages, in version 11's layout"
    );
    // Version 11 stored each value of the long key three times per page (its values, steps of
    // 10, compress well either way: the workload's pages shrink by a quarter, PERFORMANCE.md).
    assert!(
        bytes < bytes_old,
        "{bytes} bytes against version 11's {bytes_old}"
    );
    // Both match a replay of their logs; version 11 is upgraded in place, nothing rewritten.
    for dir in [new.path(), old.path()] {
        let report = Store::open(dir).unwrap().verify().unwrap();
        assert!(report.ok(), "{report:?}");
    }
    assert_eq!(format_record(old.path()), FORMAT_VERSION);
    assert_eq!(pages(old.path()), (n_old, 0, bytes_old));
    // Read from the pages alone, each query by a store just opened.
    damage_event_blocks(new.path());
    damage_event_blocks(old.path());
    let queries = [
        "SELECT * FROM readings_bt",
        "SELECT * FROM readings_bt FOR BUSINESS_TIME AS OF 15 FOR SYSTEM_TIME AS OF 250",
        "SELECT * FROM long_key",
        "SELECT count(*), sum(v) FROM long_key FOR SYSTEM_TIME AS OF 3000",
    ];
    answers_the_same(new.path(), old.path(), &queries);
    for dir in [new.path(), old.path()] {
        long_key_as_of(&mut SqlSession::new(Store::open(dir).unwrap()).unwrap());
    }
    // A late event into the long key's first versions thaws its pages (their events and
    // versions refolded) and freezes them again: in the new layout in both stores.
    for dir in [new.path(), old.path()] {
        late_event_into_the_long_key(&mut SqlSession::new(Store::open(dir).unwrap()).unwrap());
    }
    let (n_after, shared_after, _) = pages(old.path());
    assert!(
        shared_after > 0 && shared_after < n_after,
        "{shared_after} of {n_after}"
    );
    answers_the_same(new.path(), old.path(), &queries);
    answers_the_same(
        new.path(),
        old.path(),
        &["SELECT * FROM long_key FOR SYSTEM_TIME AS OF 6000"],
    );
}

/// The key heads of the store in `dir` that list their pages apart, in chunks (bit 31 of a
/// head's first word), and how many of those lists store their pages' boxes (bit 31 of the
/// list's first word, format 13).
fn lists_apart(dir: &std::path::Path) -> (usize, usize) {
    let kv = SledKv::open(dir, 1 << 20).unwrap();
    let word = |v: &[u8], at: usize| u32::from_le_bytes(v[at..at + 4].try_into().unwrap());
    let lists: Vec<u32> = (kv.scan_prefix(b"K").map(|r| r.unwrap().1))
        .filter(|v| word(v, 0) & 1 << 31 != 0)
        // The meta's length (below the flags of bits 30 and 31), the list's length, the list.
        .map(|v| word(&v, 4 + (word(&v, 0) & ((1 << 30) - 1)) as usize + 4))
        .collect();
    let boxed = lists.iter().filter(|&&w| w & 1 << 31 != 0).count();
    (lists.len(), boxed)
}

/// Version 13: a key head's page list in chunks stores the boxes of its pages' live rows
/// (FORMAT.md §6), by which a scan of the latest version chooses the key's pages on its first
/// read, without decompressing a chunk. Version 12's lists have none: read as they are, they
/// answer the same, and a late event that writes the long key's head again gives it boxes.
#[test]
fn the_version_13_fixture_chooses_a_long_keys_pages_by_stored_boxes_as_version_12_by_zones() {
    assert_eq!(
        FORMAT_VERSION, 13,
        "a new format version needs a new fixture beside this one"
    );
    let new = common::copy_of_fixture(&fixture_dir(13));
    let old = common::copy_of_fixture(&fixture_dir(12));
    assert_eq!(format_record(new.path()), 13);
    assert_eq!(
        lists_apart(new.path()),
        (1, 1),
        "the long key's list, boxed"
    );
    assert_eq!(
        lists_apart(old.path()),
        (1, 0),
        "version 12 stores no boxes"
    );
    for dir in [new.path(), old.path()] {
        let report = Store::open(dir).unwrap().verify().unwrap();
        assert!(report.ok(), "{report:?}");
    }
    // Version 12 is upgraded in place, nothing rewritten.
    assert_eq!(format_record(old.path()), FORMAT_VERSION);
    assert_eq!(lists_apart(old.path()), (1, 0));
    // Read from the pages alone, each query by a store just opened: as-of points on the
    // diagonal of both timelines and off it, in the pages and in the hot tail.
    damage_event_blocks(new.path());
    damage_event_blocks(old.path());
    let queries = [
        "SELECT * FROM long_key FOR BUSINESS_TIME AS OF 4000 FOR SYSTEM_TIME AS OF 3000",
        "SELECT * FROM long_key FOR BUSINESS_TIME AS OF 100 FOR SYSTEM_TIME AS OF 5000",
        "SELECT * FROM long_key FOR BUSINESS_TIME AS OF 5998 FOR SYSTEM_TIME AS OF 5999",
        "SELECT count(*), sum(v) FROM long_key FOR SYSTEM_TIME AS OF 3000",
        "SELECT * FROM readings_bt FOR BUSINESS_TIME AS OF 15 FOR SYSTEM_TIME AS OF 250",
    ];
    answers_the_same(new.path(), old.path(), &queries);
    for dir in [new.path(), old.path()] {
        long_key_as_of(&mut SqlSession::new(Store::open(dir).unwrap()).unwrap());
    }
    // A late event into the long key's first versions writes its head again: boxed in both.
    for dir in [new.path(), old.path()] {
        late_event_into_the_long_key(&mut SqlSession::new(Store::open(dir).unwrap()).unwrap());
    }
    assert_eq!(lists_apart(old.path()), (1, 1));
    assert_eq!(lists_apart(new.path()), (1, 1));
    answers_the_same(new.path(), old.path(), &queries);
    answers_the_same(
        new.path(),
        old.path(),
        &["SELECT * FROM long_key FOR BUSINESS_TIME AS OF 5 FOR SYSTEM_TIME AS OF 6000"],
    );
}

/// The fixture of version 8 written again since the value log (FORMAT.md §5.3): the same script,
/// its values of 128 bytes or more in `values/`.
fn value_log_fixture_dir() -> std::path::PathBuf {
    data_dir().join("fixture_v8_values")
}

#[test]
#[ignore = "rebuilds the committed fixture; run only with a deliberate change of the value log"]
fn write_value_log_fixture() {
    write_v8_fixture(&value_log_fixture_dir());
}

/// The files of the store in `dir` and their bytes, `asof.*` aside.
fn store_files(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let name = e.path().strip_prefix(dir).unwrap().display().to_string();
            if e.path().is_dir() {
                stack.push(e.path());
            } else if !name.starts_with("asof.") {
                out.push((name, std::fs::read(e.path()).unwrap()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn the_value_log_fixture_opens_without_a_migration_and_reads_as_the_one_written_before_it() {
    let with_log = common::copy_of_fixture(&value_log_fixture_dir());
    let segments: Vec<String> = store_files(with_log.path())
        .into_iter()
        .map(|(name, _)| name)
        .filter(|n| n.starts_with("values/"))
        .collect();
    assert_eq!(segments, ["values/00000000.vlog"]);
    // Every table, source and commit of the fixture written before the value log, migrated on
    // its open, reads the same as the one written with it.
    let before = common::copy_of_fixture(&fixture_dir(8));
    let mut a = SqlSession::new(Store::open(with_log.path()).unwrap()).unwrap();
    let mut b = SqlSession::new(Store::open(before.path()).unwrap()).unwrap();
    for q in [
        "SELECT id, price, __START_AT, __END_AT FROM prices",
        "SELECT * FROM company_points",
        "SELECT * FROM readings_bt",
        "SELECT * FROM ops.places",
        "SELECT * FROM ops.numbered",
        "SELECT id, holder, __START_AT, __END_AT FROM accounts",
        "SELECT _commit_version, _change_type, CompanyId, DataPoint FROM table_changes('company_points', 0)",
    ] {
        let got = rows(&mut a, q);
        assert!(!got.is_empty(), "{q}");
        assert_eq!(got, rows(&mut b, q), "{q}");
    }
    drop((a, b));
    assert!(Store::open(with_log.path()).unwrap().verify().unwrap().ok());
    // Opened as it is: its sled files and segment were not copied anew by a migration (a copy
    // would write them again; an open writes sled's files, so only the segment is compared).
    // The upgrade to version 9 rebuilt the pages, appending to the segment.
    let segment = |dir: &std::path::Path| std::fs::read(dir.join("values/00000000.vlog")).unwrap();
    assert!(segment(with_log.path()).starts_with(&segment(&value_log_fixture_dir())));
}
