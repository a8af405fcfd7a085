//! Nested columns (`STRUCT`, `ARRAY`, `MAP`), as JSON CDC feeds carry them: stored through a
//! flow, time-travelled, scanned from frozen pages after a reopen, read from nested JSON files,
//! and `IGNORE NULL UPDATES` treats a NULL struct as a null update.

use crate::common;

use asof::{SqlSession, Store, StoreOptions};
use common::{cells, sorted_sql_rows};

/// A store that freezes nearly every version into pages, so reads go through them.
fn open(dir: &std::path::Path) -> SqlSession {
    let options = StoreOptions {
        hot_events_per_key: 1,
        ..Default::default()
    };
    SqlSession::new(Store::open_with(dir, options).unwrap()).unwrap()
}

const FEED: &str = "
    CREATE TABLE ev (id BIGINT, seq BIGINT, addr STRUCT<city: STRING, zip: INT>,
                     scores ARRAY<DOUBLE>);
    INSERT INTO ev SELECT 1 AS id, 1 AS seq, named_struct('city', 'Oslo', 'zip', 150) AS addr,
        array(1.5, cast('NaN' AS DOUBLE), cast('-inf' AS DOUBLE)) AS scores;
    INSERT INTO ev SELECT 1 AS id, 2 AS seq, named_struct('city', 'Bergen', 'zip', NULL) AS addr,
        CAST(NULL AS ARRAY<DOUBLE>) AS scores;
    INSERT INTO ev SELECT 2 AS id, 1 AS seq, CAST(NULL AS STRUCT<city: STRING, zip: INT>) AS addr,
        array() AS scores;
    INSERT INTO ev SELECT 1 AS id, 3 AS seq, named_struct('city', 'Tromsø', 'zip', 9008) AS addr,
        array(-0.0, 1e300) AS scores";

#[test]
fn nested_columns_are_stored_time_travelled_and_read_back_from_pages() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    s.execute(FEED).unwrap();
    s.execute(
        "CREATE OR REFRESH STREAMING TABLE t FLOW AUTO CDC FROM stream(ev) KEYS (id) \
         SEQUENCE BY seq COLUMNS * EXCEPT (seq) STORED AS SCD TYPE 2",
    )
    .unwrap();
    let history = "SELECT id, __START_AT, addr.city, addr['zip'], scores, \
                   array_length(scores), isnan(scores[2]) FROM t";
    let want = [
        cells(&["1", "1", "Oslo", "150", "[1.5, NaN, -inf]", "3", "true"]),
        vec![
            Some("1".into()),
            Some("2".into()),
            Some("Bergen".into()),
            None,
            None,
            None,
            None,
        ],
        cells(&["1", "3", "Tromsø", "9008", "[-0.0, 1e300]", "2", "false"]),
        vec![
            Some("2".into()),
            Some("1".into()),
            None,
            None,
            Some("[]".into()),
            Some("0".into()),
            None,
        ],
    ];
    assert_eq!(sorted_sql_rows(&mut s, history), want);
    // A filter on a field, time travel and the change feed.
    assert_eq!(
        sorted_sql_rows(&mut s, "SELECT id FROM t WHERE addr.city = 'Bergen'"),
        [cells(&["1"])]
    );
    assert_eq!(
        sorted_sql_rows(
            &mut s,
            "SELECT addr.city FROM t VERSION AS OF 1 WHERE __END_AT IS NULL AND id = 1"
        ),
        [cells(&["Tromsø"])]
    );
    assert_eq!(
        sorted_sql_rows(
            &mut s,
            "SELECT addr.city, _change_type FROM table_changes('t', 1) WHERE id = 1 \
             AND _change_type = 'insert'"
        )
        .len(),
        3
    );
    // An update whose nested values equal the current ones opens no version.
    s.execute(
        "INSERT INTO ev SELECT 2 AS id, 2 AS seq, CAST(NULL AS STRUCT<city: STRING, zip: INT>) \
            AS addr, array() AS scores; REFRESH STREAMING TABLE t",
    )
    .unwrap();
    assert_eq!(
        sorted_sql_rows(&mut s, "SELECT count(*) FROM t WHERE id = 2"),
        [cells(&["1"])]
    );
    drop(s);
    // Reopened: the same rows, read from the key heads and pages.
    let mut s = open(dir.path());
    assert_eq!(sorted_sql_rows(&mut s, history), want);
    assert_eq!(
        sorted_sql_rows(
            &mut s,
            "SELECT scores FROM t FOR BUSINESS_TIME AS OF 1 WHERE id = 1"
        ),
        [cells(&["[1.5, NaN, -inf]"])]
    );
}

#[test]
fn maps_and_lists_of_structs_keep_their_nulls() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    s.execute(
        "CREATE TABLE ev (id BIGINT, seq BIGINT, attrs MAP<STRING, BIGINT>, \
            lines ARRAY<STRUCT<sku: STRING, qty: BIGINT>>); \
         INSERT INTO ev SELECT 1 AS id, 1 AS seq, \
            map(['a', 'b'], [10, CAST(NULL AS BIGINT)]) AS attrs, \
            array(named_struct('sku', 'x', 'qty', 2), NULL) AS lines; \
         CREATE OR REFRESH STREAMING TABLE t FLOW AUTO CDC FROM stream(ev) KEYS (id) \
            SEQUENCE BY seq STORED AS SCD TYPE 1",
    )
    .unwrap();
    let q = "SELECT attrs['a'], attrs['b'] IS NULL, cardinality(attrs), lines[1]['sku'], \
             lines[2] IS NULL FROM t";
    let want = [cells(&["10", "true", "2", "x", "true"])];
    assert_eq!(
        sorted_sql_rows(&mut s, "DESCRIBE t")
            .into_iter()
            .map(|r| r[1].clone().unwrap())
            .collect::<Vec<_>>(),
        // attrs, id, lines, seq
        [
            "map<string,bigint>",
            "bigint",
            "array<struct<sku:string,qty:bigint>>",
            "bigint",
        ]
    );
    assert_eq!(sorted_sql_rows(&mut s, q), want);
    drop(s);
    let mut s = open(dir.path());
    assert_eq!(sorted_sql_rows(&mut s, q), want);
}

#[test]
fn ignore_null_updates_treats_a_null_struct_as_a_null_update() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    s.execute(
        "CREATE TABLE ev (id BIGINT, seq BIGINT, name STRING, addr STRUCT<city: STRING>);
         INSERT INTO ev SELECT 1 AS id, 1 AS seq, 'Ana' AS name, named_struct('city', 'Oslo') AS addr;
         INSERT INTO ev SELECT 1 AS id, 2 AS seq, 'Ana B' AS name,
             CAST(NULL AS STRUCT<city: STRING>) AS addr;
         CREATE OR REFRESH STREAMING TABLE t FLOW AUTO CDC FROM stream(ev) KEYS (id)
             IGNORE NULL UPDATES SEQUENCE BY seq STORED AS SCD TYPE 1",
    )
    .unwrap();
    assert_eq!(
        sorted_sql_rows(&mut s, "SELECT name, addr.city FROM t"),
        [cells(&["Ana B", "Oslo"])]
    );
}

#[test]
fn nested_json_files_feed_a_flow() {
    let dir = tempfile::tempdir().unwrap();
    let landing = dir.path().join("landing");
    std::fs::create_dir(&landing).unwrap();
    std::fs::write(
        landing.join("a.json"),
        concat!(
            r#"{"id": 1, "seq": 1, "customer": {"name": "Ana", "tags": ["vip", "eu"]}}"#,
            "\n",
            r#"{"id": 1, "seq": 2, "customer": {"name": "Ana", "tags": ["eu"]}}"#,
            "\n",
            r#"{"id": 2, "seq": 1, "customer": {"name": "Bo", "tags": []}}"#,
            "\n"
        ),
    )
    .unwrap();
    let mut s = open(&dir.path().join("db"));
    s.execute(&format!(
        "CREATE OR REFRESH STREAMING TABLE t FLOW AUTO CDC \
         FROM stream(read_files('{}', format => 'json')) KEYS (id) SEQUENCE BY seq \
         STORED AS SCD TYPE 2",
        landing.display()
    ))
    .unwrap();
    assert_eq!(
        sorted_sql_rows(
            &mut s,
            "SELECT id, customer.name, customer.tags FROM t WHERE __END_AT IS NULL"
        ),
        [cells(&["1", "Ana", "[eu]"]), cells(&["2", "Bo", "[]"])]
    );
}

#[test]
fn a_nested_column_cannot_be_a_key_or_a_sequence() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    s.execute(
        "CREATE TABLE ev AS SELECT named_struct('a', 1) AS k, array(1) AS seq, 1 AS id, 1 AS n",
    )
    .unwrap();
    let e = s
        .execute(
            "CREATE OR REFRESH STREAMING TABLE t FLOW AUTO CDC FROM stream(ev) KEYS (k) \
             SEQUENCE BY n STORED AS SCD TYPE 1",
        )
        .unwrap_err()
        .to_string();
    assert!(e.contains("`k`"), "{e}");
    let e = s
        .execute(
            "CREATE OR REFRESH STREAMING TABLE t FLOW AUTO CDC FROM stream(ev) KEYS (id) \
             SEQUENCE BY seq STORED AS SCD TYPE 1",
        )
        .unwrap_err()
        .to_string();
    assert!(e.contains("`seq`"), "{e}");
    assert!(s.store().tables().unwrap().is_empty());
}

#[test]
fn a_nested_value_that_does_not_fit_its_column_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    s.execute("CREATE TABLE ev (id BIGINT, s STRUCT<n: BIGINT>)")
        .unwrap();
    for bad in ["named_struct('n', 1.7)", "named_struct('n', 'x')"] {
        let e = s
            .execute(&format!("INSERT INTO ev SELECT 1 AS id, {bad} AS s"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("`s`") || e.contains("s:"), "{bad}: {e}");
    }
    s.execute("INSERT INTO ev SELECT 1 AS id, named_struct('n', 2.0) AS s")
        .unwrap();
    assert_eq!(
        sorted_sql_rows(&mut s, "SELECT s.n FROM ev"),
        [cells(&["2"])]
    );
}
