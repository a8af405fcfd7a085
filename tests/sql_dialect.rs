//! The Databricks SQL a user pastes runs as written: identifiers in any case, string literals in
//! double quotes, identifiers in backticks, and a re-run of the statement that created a
//! streaming table with its flow.

use crate::common;

use asof::{SqlSession, Store};

fn session() -> (tempfile::TempDir, SqlSession) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    (dir, SqlSession::new(store).unwrap())
}

fn rows(s: &mut SqlSession, sql: &str) -> (Vec<String>, Vec<Vec<Option<String>>>) {
    let (names, mut rows) = common::sql_rows(s, sql);
    rows.sort();
    (names, rows)
}

use common::cells;

const SOURCE: &str =
    "CREATE TABLE Customer_Events (CustomerId BIGINT, Name STRING, Seq BIGINT, Op STRING)";

const FLOW: &str = "CREATE OR REFRESH STREAMING TABLE customers; \
     CREATE FLOW customers_cdc AS AUTO CDC INTO CUSTOMERS FROM stream(customer_events) \
     KEYS (customerid) APPLY AS DELETE WHEN op = \"D\" SEQUENCE BY seq \
     COLUMNS * EXCEPT (OP, seq) STORED AS SCD TYPE 1";

#[test]
fn identifiers_match_in_any_case_and_results_keep_the_created_spelling() {
    let (_dir, mut s) = session();
    s.execute(SOURCE).unwrap();
    s.execute("INSERT INTO customer_events VALUES (1, 'Ana', 1, 'U'), (2, 'Bo', 1, 'U'), (2, 'Bo', 2, 'D')")
        .unwrap();
    s.execute(FLOW).unwrap();
    let (names, got) = rows(
        &mut s,
        "SELECT customerid, NAME FROM Customers WHERE CUSTOMERID >= 1",
    );
    assert_eq!(names, ["CustomerId", "Name"]);
    assert_eq!(got, [cells(&["1", "Ana"])]);
    let (_, got) = rows(
        &mut s,
        "SELECT c.name FROM customers c ORDER BY c.customerid",
    );
    assert_eq!(got, [cells(&["Ana"])]);
    // A function named like a column is still the function; an alias keeps its own spelling.
    let (names, got) = rows(&mut s, "SELECT count(*) AS name FROM CUSTOMER_EVENTS");
    assert_eq!(names, ["name"]);
    assert_eq!(got, [cells(&["3"])]);
    let out = s.execute("DESCRIBE HISTORY CUSTOMERS").unwrap();
    assert!(matches!(out.last(), Some(asof::SqlOutput::Batches(..))));
}

#[test]
fn double_quotes_are_strings_and_backticks_are_identifiers() {
    let (_dir, mut s) = session();
    s.execute("CREATE TABLE `my events` (id BIGINT, `full name` STRING)")
        .unwrap();
    s.execute("INSERT INTO `my events` VALUES (1, \"Ana\"), (2, \"O'Brien\")")
        .unwrap();
    let (names, got) = rows(
        &mut s,
        "SELECT id, `full name` FROM `my events` WHERE `full name` = \"Ana\"",
    );
    assert_eq!(names, ["id", "full name"]);
    assert_eq!(got, [cells(&["1", "Ana"])]);
    let (_, got) = rows(&mut s, "SELECT \"id\" AS x FROM `my events` WHERE id = 2");
    assert_eq!(got, [cells(&["id"])], "\"id\" is a string, not the column");
    let (_, got) = rows(&mut s, "SELECT `full name` FROM `my events` WHERE id = 2");
    assert_eq!(got, [cells(&["O'Brien"])]);
}

#[test]
fn re_running_the_statement_that_created_a_streaming_table_refreshes_it() {
    let (_dir, mut s) = session();
    s.execute(SOURCE).unwrap();
    s.execute("INSERT INTO customer_events VALUES (1, 'Ana', 1, 'U')")
        .unwrap();
    let create = "CREATE OR REFRESH STREAMING TABLE customers \
         FLOW AUTO CDC FROM stream(customer_events) KEYS (CustomerId) \
         SEQUENCE BY Seq COLUMNS * EXCEPT (Op, Seq) STORED AS SCD TYPE 2";
    s.execute(create).unwrap();
    s.execute("INSERT INTO customer_events VALUES (1, 'Ana Maria', 2, 'U')")
        .unwrap();
    s.execute(create).unwrap();
    let (_, got) = rows(&mut s, "SELECT Name FROM customers WHERE __END_AT IS NULL");
    assert_eq!(got, [cells(&["Ana Maria"])]);
    let (_, history) = rows(&mut s, "DESCRIBE HISTORY customers");
    assert_eq!(
        history.len(),
        3,
        "create, first refresh, second refresh: {history:?}"
    );
    // The same statement again with nothing new: nothing happens.
    s.execute(create).unwrap();
    let (_, again) = rows(&mut s, "DESCRIBE HISTORY customers");
    assert_eq!(again, history);
    // A definition that would change the table's shape is refused, naming the flow, and
    // changes nothing.
    let e = s
        .execute(&create.replace("SCD TYPE 2", "SCD TYPE 1"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("cannot be redefined") && e.contains("customers"),
        "{e}"
    );
    let (_, after) = rows(&mut s, "DESCRIBE HISTORY customers");
    assert_eq!(after, history);
}

#[test]
fn re_running_a_flow_with_another_definition_rebuilds_its_table_in_one_commit() {
    let (dir, mut s) = session();
    s.execute(SOURCE).unwrap();
    s.execute("INSERT INTO customer_events VALUES (1, 'Ana', 1, 'U'), (2, 'Bo', 1, 'U'), (1, 'Ana', 2, 'D')")
        .unwrap();
    let create = "CREATE OR REFRESH STREAMING TABLE customers \
         FLOW AUTO CDC FROM stream(customer_events) KEYS (CustomerId) \
         SEQUENCE BY Seq COLUMNS * EXCEPT (Op, Seq) STORED AS SCD TYPE 1";
    s.execute(create).unwrap();
    let (_, before) = rows(&mut s, "SELECT CustomerId, Name FROM customers");
    assert_eq!(before, [cells(&["1", "Ana"]), cells(&["2", "Bo"])]);
    // The same flow, now reading deletes.
    let redefined = create.replace("SEQUENCE BY", "APPLY AS DELETE WHEN Op = \"D\" SEQUENCE BY");
    let out = s.execute(&redefined).unwrap();
    assert!(format!("{out:?}").contains("redefined"), "{out:?}");
    let current = "SELECT CustomerId, Name FROM customers";
    assert_eq!(rows(&mut s, current).1, [cells(&["2", "Bo"])]);
    let (names, history) = rows(&mut s, "DESCRIBE HISTORY customers");
    assert_eq!(
        history.len(),
        3,
        "create, first refresh, redefinition: {history:?}"
    );
    let params = names
        .iter()
        .position(|n| n == "operationParameters")
        .unwrap();
    let last = history
        .iter()
        .find(|r| r[0].as_deref() == Some("2"))
        .unwrap();
    let p = last[params].clone().unwrap();
    assert!(
        p.contains("redefined_flow") && p.contains("full_refresh"),
        "{p}"
    );
    // The past stays as it was computed.
    assert_eq!(
        rows(
            &mut s,
            "SELECT CustomerId, Name FROM customers VERSION AS OF 1"
        )
        .1,
        before
    );
    // Reopened (replayed or read from its pages), the same table and the new definition.
    drop(s);
    let mut s = SqlSession::new(Store::open(dir.path()).unwrap()).unwrap();
    assert_eq!(rows(&mut s, current).1, [cells(&["2", "Bo"])]);
    s.execute(&redefined).unwrap();
    let (_, again) = rows(&mut s, "DESCRIBE HISTORY customers");
    assert_eq!(again.len(), 3, "the same definition again: nothing new");
}

/// The value of the `DESCRIBE TABLE EXTENDED` row named `name` (the first one).
fn detail(s: &mut SqlSession, table: &str, name: &str) -> Vec<String> {
    let (names, rows) = common::sql_rows(s, &format!("DESCRIBE TABLE EXTENDED {table}"));
    assert_eq!(names, ["col_name", "data_type", "comment"]);
    rows.iter()
        .filter(|r| r[0].as_deref() == Some(name))
        .map(|r| r[1].clone().unwrap())
        .collect()
}

#[test]
fn comments_clustering_and_properties_are_stored_and_shown() {
    let (dir, mut s) = session();
    s.execute(SOURCE).unwrap();
    s.execute("INSERT INTO customer_events VALUES (1, 'Ana', 1, 'U'), (2, 'Bo', 1, 'U')")
        .unwrap();
    s.execute(
        "CREATE OR REFRESH STREAMING TABLE customers COMMENT 'one row per customer' \
         CLUSTER BY (CustomerId) TBLPROPERTIES ('owner' = 'crm'); \
         CREATE FLOW customers_cdc COMMENT \"from the CRM feed\" AS AUTO CDC INTO customers \
         FROM stream(customer_events) KEYS (CustomerId) APPLY AS DELETE WHEN Op = 'D' \
         SEQUENCE BY Seq COLUMNS * EXCEPT (Op, Seq) STORED AS SCD TYPE 2",
    )
    .unwrap();
    drop(s);
    // Everything below is read back from the store by a new session.
    let mut s = SqlSession::new(Store::open(dir.path()).unwrap()).unwrap();
    let (_, got) = rows(&mut s, "SHOW TBLPROPERTIES customers ('owner')");
    assert_eq!(got, [cells(&["owner", "crm"])]);
    let (_, got) = rows(&mut s, "SHOW TBLPROPERTIES customers (asof.clusterBy)");
    assert_eq!(got, [cells(&["asof.clusterBy", "CustomerId"])]);
    let (_, got) = rows(&mut s, "SHOW TBLPROPERTIES customers ('nope')");
    assert_eq!(
        got,
        [cells(&[
            "nope",
            "Table customers does not have property: nope"
        ])]
    );
    assert_eq!(
        detail(&mut s, "customers", "Comment"),
        ["one row per customer"]
    );
    assert_eq!(
        detail(&mut s, "customers", "Clustering Columns"),
        ["CustomerId"]
    );
    assert_eq!(detail(&mut s, "customers", "Keys"), ["CustomerId"]);
    assert_eq!(detail(&mut s, "customers", "Stored as"), ["SCD TYPE 2"]);
    assert_eq!(
        detail(&mut s, "customers", "Statistics"),
        ["2 current row versions, 2 in all"]
    );
    let flows = detail(&mut s, "customers", "Flow");
    assert_eq!(
        flows,
        [
            "CREATE FLOW customers_cdc COMMENT 'from the CRM feed' AS AUTO CDC INTO customers \
          FROM stream(Customer_Events) KEYS (CustomerId) APPLY AS DELETE WHEN Op = 'D' \
          SEQUENCE BY Seq COLUMNS * EXCEPT (Op, Seq) STORED AS SCD TYPE 2"
        ]
    );
    // The definition shown creates the same flow again.
    s.execute("DROP STREAMING TABLE customers").unwrap();
    assert!(s.execute("SELECT * FROM customers").is_err());
    s.execute(&flows[0]).unwrap();
    assert_eq!(detail(&mut s, "customers", "Flow"), flows);
    let (names, cols) = common::sql_rows(&mut s, "DESCRIBE customers");
    assert_eq!(names, ["col_name", "data_type", "comment"]);
    let cols: Vec<_> = cols.iter().map(|r| r[0].clone().unwrap()).collect();
    assert_eq!(cols, ["CustomerId", "Name", "__START_AT", "__END_AT"]);
    s.execute("DROP STREAMING TABLE IF EXISTS nothing").unwrap();
    let e = s
        .execute("DROP STREAMING TABLE customer_events")
        .unwrap_err();
    assert!(e.to_string().contains("not a streaming table"), "{e}");
}

#[test]
fn variables_are_substituted_from_the_session_and_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let options = asof::SessionOptions::default()
        .with_variable("tbl", "customer_events")
        .with_variable("min", "2");
    let mut s = SqlSession::with_options(store, options).unwrap();
    s.execute(SOURCE).unwrap();
    s.execute("INSERT INTO ${tbl} VALUES (1, 'Ana', 1, 'U'), (2, 'Bo', 1, 'U')")
        .unwrap();
    let (_, got) = rows(
        &mut s,
        "SELECT Name FROM ${ tbl } WHERE CustomerId >= ${min}",
    );
    assert_eq!(got, [cells(&["Bo"])]);
    let e = s.execute("SELECT ${nope}").unwrap_err().to_string();
    assert!(e.contains("`${nope}`") && e.contains("--var nope="), "{e}");
    drop(s);
    let (ok, out, err) = common::run_asof(
        dir.path(),
        &[
            "sql",
            "--var",
            "who=Ana",
            "SELECT CustomerId FROM customer_events WHERE Name = '${who}'",
        ],
    );
    assert!(ok, "{err}");
    assert!(out.contains("| 1 "), "{out}");
    let (ok, _, err) = common::run_asof(dir.path(), &["sql", "SELECT '${who}'"]);
    assert!(!ok);
    assert!(err.contains("--var who="), "{err}");
}

#[test]
fn period_predicates_compare_business_intervals_with_open_ends() {
    let (_dir, mut s) = session();
    s.execute(
        "CREATE TABLE ev (id BIGINT, v STRING, seq BIGINT); \
         INSERT INTO ev VALUES (1, 'a', 10), (1, 'b', 20), (1, 'c', 30); \
         CREATE FLOW f AS AUTO CDC INTO t FROM stream(ev) KEYS (id) SEQUENCE BY seq \
           STORED AS SCD TYPE 2",
    )
    .unwrap();
    let open = "CAST(NULL AS BIGINT)";
    for (predicate, expected) in [
        ("OVERLAPS PERIOD(15, 25)", vec!["a", "b"]),
        ("OVERLAPS PERIOD(35, 36)", vec!["c"]),
        (
            &format!("OVERLAPS PERIOD(0, {open})") as &str,
            vec!["a", "b", "c"],
        ),
        ("CONTAINS 20", vec!["b"]),
        ("CONTAINS 1000000", vec!["c"]),
        ("CONTAINS PERIOD(21, 29)", vec!["b"]),
        (&format!("CONTAINS PERIOD(35, {open})"), vec!["c"]),
        ("PRECEDES PERIOD(20, 40)", vec!["a"]),
        ("SUCCEEDS PERIOD(0, 20)", vec!["b", "c"]),
        ("IMMEDIATELY PRECEDES PERIOD(30, 40)", vec!["b"]),
        ("IMMEDIATELY SUCCEEDS PERIOD(0, 20)", vec!["b"]),
        (&format!("EQUALS PERIOD(30, {open})"), vec!["c"]),
        ("EQUALS PERIOD(10, 20)", vec!["a"]),
    ] {
        let sql =
            format!("SELECT v FROM t WHERE PERIOD(__START_AT, __END_AT) {predicate} AND id = 1");
        let (_, got) = rows(&mut s, &sql);
        let want: Vec<_> = expected.iter().map(|v| cells(&[v])).collect();
        assert_eq!(got, want, "{predicate}");
    }
    let e = s
        .execute("SELECT v FROM t WHERE PERIOD(__START_AT, __END_AT) TOUCHES PERIOD(1, 2)")
        .unwrap_err()
        .to_string();
    assert!(e.contains("OVERLAPS, CONTAINS"), "{e}");
}

#[test]
fn only_from_to_trims_each_rows_interval_to_the_window() {
    let (_dir, mut s) = session();
    s.execute(
        "CREATE TABLE ev (id BIGINT, v STRING, seq BIGINT, sys TIMESTAMP); \
         INSERT INTO ev VALUES (1, 'a', 10, TIMESTAMP '2025-01-01'), (1, 'b', 20, TIMESTAMP '2025-01-01'), \
           (1, 'c', 30, TIMESTAMP '2025-01-01'), (2, 'x', 5, TIMESTAMP '2025-01-01'), (1, 'B', 20, TIMESTAMP '2025-03-01'); \
         CREATE FLOW f AS AUTO CDC INTO t FROM stream(ev) KEYS (id) SEQUENCE BY seq \
           SYSTEM SEQUENCE BY sys COLUMNS * EXCEPT (sys) STORED AS BITEMPORAL",
    )
    .unwrap();
    // Business: rows overlapping [15, 25), cut to it; open ends closed at the window's end.
    let (_, got) = rows(
        &mut s,
        "SELECT id, v, __START_AT, __END_AT FROM t FOR BUSINESS_TIME ONLY FROM 15 TO 25 \
         FOR SYSTEM_TIME AS OF TIMESTAMP '2025-02-01'",
    );
    assert_eq!(
        got,
        [
            cells(&["1", "a", "15", "20"]),
            cells(&["1", "b", "20", "25"]),
            cells(&["2", "x", "15", "25"]),
        ]
    );
    // System time too: what was believed during February, the intervals of belief cut to it.
    let (_, got) = rows(
        &mut s,
        "SELECT v, __SYSTEM_START_AT, __SYSTEM_END_AT FROM t FOR SYSTEM_TIME ONLY FROM TIMESTAMP '2025-02-01' TO TIMESTAMP '2025-04-01' \
         FOR BUSINESS_TIME AS OF 22",
    );
    assert_eq!(
        got,
        [
            cells(&["B", "2025-03-01T00:00:00", "2025-04-01T00:00:00"]),
            cells(&["b", "2025-02-01T00:00:00", "2025-03-01T00:00:00"]),
            cells(&["x", "2025-02-01T00:00:00", "2025-04-01T00:00:00"]),
        ]
    );
    // The table function takes it as text.
    let (_, got) = rows(
        &mut s,
        "SELECT v, __START_AT, __END_AT FROM temporal_scan('t', 'ONLY FROM 25 TO 40', 'AS OF 2025-02-01T00:00:00')",
    );
    assert_eq!(
        got,
        [
            cells(&["b", "25", "30"]),
            cells(&["c", "30", "40"]),
            cells(&["x", "25", "40"])
        ]
    );
    let err = s
        .execute("SELECT * FROM t FOR BUSINESS_TIME ONLY AS OF 3")
        .unwrap_err()
        .to_string();
    assert!(err.contains("ONLY takes FROM a TO b"), "{err}");
}

/// A quote inside a string literal (`'it''s'`, `"O'Brien"`) survives every path a statement takes:
/// an INSERT into a source, a flow's condition, a query, DML, ERASE. (sqlparser writes a string
/// token back without doubling its quotes; the session writes them doubled.)
#[test]
fn quotes_inside_string_literals_survive_every_path() {
    let (_dir, mut s) = session();
    s.execute(
        "CREATE TABLE people (id INT, name STRING, seq INT, op STRING);
         INSERT INTO people VALUES (1, 'it''s', 1, 'U'), (2, \"O'Brien\", 1, 'U'), (3, 'say \"hi\"', 1, 'U'),
           (4, 'gone', 1, 'U'), (4, 'x', 2, 'it''s gone');
         CREATE OR REFRESH STREAMING TABLE t FLOW AUTO CDC FROM stream(people) KEYS (id)
           APPLY AS DELETE WHEN op = 'it''s gone' SEQUENCE BY seq COLUMNS * EXCEPT (seq, op)
           STORED AS SCD TYPE 1;",
    )
    .unwrap();
    let names = |s: &mut SqlSession, sql: &str| -> Vec<Vec<Option<String>>> { rows(s, sql).1 };
    assert_eq!(
        names(&mut s, "SELECT name FROM t"),
        [
            cells(&["O'Brien"]),
            cells(&["it's"]),
            cells(&["say \"hi\""])
        ]
    );
    assert_eq!(
        names(
            &mut s,
            "SELECT id FROM t WHERE name IN ('it''s', \"O'Brien\")"
        ),
        [cells(&["1"]), cells(&["2"])]
    );
    s.execute("UPDATE t SET name = 'it''s fixed' WHERE name = 'it''s'")
        .unwrap();
    assert_eq!(
        names(&mut s, "SELECT name FROM t WHERE id = 1"),
        [cells(&["it's fixed"])]
    );
    s.execute("ERASE FROM t WHERE id = 2 REASON 'O''Brien''s request'")
        .unwrap();
    assert_eq!(
        s.store().history("t").unwrap().last().unwrap().parameters["reason"],
        "O'Brien's request"
    );
    assert_eq!(
        names(&mut s, "SELECT id FROM t"),
        [cells(&["1"]), cells(&["3"])]
    );
}
