//! Qualified names as Databricks writes them: `catalog.schema.table`, `CREATE SCHEMA`, `USE`.
//! Two tables named `t` in different schemas are two tables, in every statement and after a
//! reopen; names in the default schema read as they always did.

use crate::common;

use asof::{SqlSession, Store};
use common::{cells, sorted_sql_rows};

fn open(dir: &std::path::Path) -> SqlSession {
    SqlSession::new(Store::open(dir).unwrap()).unwrap()
}

fn err(s: &mut SqlSession, sql: &str) -> String {
    s.execute(sql).unwrap_err().to_string()
}

/// A source and an SCD2 target in `schema`, fed two versions of key 1 holding `word`.
fn pipeline(s: &mut SqlSession, schema: &str, word: &str) {
    s.execute(&format!(
        "CREATE TABLE {schema}.events (id BIGINT, v STRING, seq BIGINT); \
         INSERT INTO {schema}.events VALUES (1, '{word}-1', 1), (1, '{word}-2', 2); \
         CREATE OR REFRESH STREAMING TABLE {schema}.t; \
         CREATE FLOW {schema}_flow AS AUTO CDC INTO {schema}.t FROM stream({schema}.events) \
         KEYS (id) SEQUENCE BY seq STORED AS SCD TYPE 2"
    ))
    .unwrap();
}

#[test]
fn two_tables_named_t_in_different_schemas_stay_apart() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    s.execute("CREATE SCHEMA sales; CREATE SCHEMA IF NOT EXISTS ops COMMENT 'operations'")
        .unwrap();
    pipeline(&mut s, "sales", "s");
    pipeline(&mut s, "ops", "o");
    let current = "SELECT v FROM {} WHERE __END_AT IS NULL";
    for (name, want) in [
        ("sales.t", "s-2"),
        ("main.sales.t", "s-2"),
        ("ops.t", "o-2"),
        ("OPS.T", "o-2"),
    ] {
        assert_eq!(
            sorted_sql_rows(&mut s, &current.replace("{}", name)),
            [cells(&[want])],
            "{name}"
        );
    }
    // A temporal clause, a table function and DESCRIBE HISTORY on qualified names.
    assert_eq!(
        sorted_sql_rows(&mut s, "SELECT v FROM sales.t VERSION AS OF 0"),
        Vec::<Vec<Option<String>>>::new()
    );
    assert_eq!(
        sorted_sql_rows(
            &mut s,
            "SELECT v FROM ops.t FOR SYSTEM_TIME ALL WHERE __END_AT IS NOT NULL"
        ),
        [cells(&["o-1"])]
    );
    assert_eq!(
        sorted_sql_rows(
            &mut s,
            "SELECT v, _change_type FROM table_changes('sales.t', 1) WHERE _change_type = 'insert'"
        ),
        [cells(&["s-1", "insert"]), cells(&["s-2", "insert"])]
    );
    let history = common::sql_rows(&mut s, "DESCRIBE HISTORY ops.t").1;
    assert_eq!(history.len(), 2, "{history:?}");
    // USE reads unqualified names in that schema; `default.x` still reaches the default one.
    s.execute("CREATE TABLE t (x STRING); INSERT INTO t VALUES ('home')")
        .unwrap();
    s.execute("USE ops").unwrap();
    assert_eq!(
        sorted_sql_rows(&mut s, "SELECT v FROM t WHERE __END_AT IS NULL"),
        [cells(&["o-2"])]
    );
    assert_eq!(
        sorted_sql_rows(&mut s, "SELECT x FROM default.t"),
        [cells(&["home"])]
    );
    s.execute("USE SCHEMA default").unwrap();
    assert_eq!(
        sorted_sql_rows(&mut s, "SELECT x FROM t"),
        [cells(&["home"])]
    );
    drop(s);

    // After a reopen: the same tables, each with its own rows.
    let mut s = open(dir.path());
    let mut tables = s.store().tables().unwrap();
    tables.sort();
    assert_eq!(tables, ["ops.t", "sales.t"]);
    assert_eq!(
        sorted_sql_rows(&mut s, "SHOW SCHEMAS"),
        [cells(&["default"]), cells(&["ops"]), cells(&["sales"])]
    );
    assert_eq!(
        sorted_sql_rows(&mut s, "SELECT v FROM main.ops.t WHERE __END_AT IS NULL"),
        [cells(&["o-2"])]
    );
    assert_eq!(
        sorted_sql_rows(&mut s, "SELECT x FROM main.default.t"),
        [cells(&["home"])]
    );
}

#[test]
fn schemas_must_exist_and_are_dropped_only_when_empty_or_with_cascade() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    let e = err(&mut s, "CREATE TABLE nowhere.x (a INT)");
    assert!(e.contains("no schema named `nowhere`"), "{e}");
    let e = err(&mut s, "USE nowhere");
    assert!(e.contains("CREATE SCHEMA nowhere first"), "{e}");
    s.execute("CREATE SCHEMA sales").unwrap();
    let e = err(&mut s, "CREATE SCHEMA sales");
    assert!(e.contains("exists already"), "{e}");
    pipeline(&mut s, "sales", "s");
    let e = err(&mut s, "DROP SCHEMA sales");
    assert!(
        e.contains("holds 2 table(s)") && e.contains("sales.events") && e.contains("sales.t"),
        "{e}"
    );
    assert_eq!(
        sorted_sql_rows(&mut s, "SELECT count(*) FROM sales.t"),
        [cells(&["2"])]
    );
    s.execute("DROP SCHEMA sales CASCADE").unwrap();
    assert!(s.store().tables().unwrap().is_empty());
    assert!(s.store().sources().unwrap().is_empty());
    let e = err(&mut s, "SELECT * FROM sales.t");
    assert!(e.contains("sales.t") || e.contains("not found"), "{e}");
    s.execute("DROP SCHEMA IF EXISTS sales").unwrap();
    let e = err(&mut s, "DROP SCHEMA default");
    assert!(e.contains("cannot be dropped"), "{e}");
}

#[test]
fn a_catalog_holds_its_own_schemas() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    let e = err(&mut s, "USE CATALOG prod");
    assert!(e.contains("CREATE CATALOG prod first"), "{e}");
    s.execute("CREATE CATALOG prod; CREATE SCHEMA sales")
        .unwrap();
    s.execute("CREATE TABLE sales.x (a INT); INSERT INTO sales.x VALUES (1)")
        .unwrap();
    s.execute("USE CATALOG prod").unwrap();
    let e = err(&mut s, "CREATE TABLE sales.x (a INT)");
    assert!(e.contains("no schema named `prod.sales`"), "{e}");
    s.execute("CREATE SCHEMA sales; USE sales; CREATE TABLE x (a INT); INSERT INTO x VALUES (2)")
        .unwrap();
    s.execute("CREATE TABLE default.y (b INT)").unwrap();
    let mut sources = s.store().sources().unwrap();
    sources.sort();
    assert_eq!(sources, ["prod.default.y", "prod.sales.x", "sales.x"]);
    assert_eq!(sorted_sql_rows(&mut s, "SELECT a FROM x"), [cells(&["2"])]);
    assert_eq!(
        sorted_sql_rows(&mut s, "SELECT a FROM main.sales.x"),
        [cells(&["1"])]
    );
    assert_eq!(
        sorted_sql_rows(&mut s, "SHOW SCHEMAS"),
        [cells(&["default"]), cells(&["sales"])]
    );
}

#[test]
fn schema_names_match_in_any_case_and_views_read_their_own_schema() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    s.execute("CREATE SCHEMA Sales").unwrap();
    let e = err(&mut s, "CREATE SCHEMA sales");
    assert!(e.contains("exists already"), "{e}");
    s.execute(
        "CREATE TABLE sales.t (x INT); INSERT INTO SALES.t VALUES (1);
         USE sales; CREATE VIEW v AS SELECT x FROM t; USE default;
         CREATE TABLE t (x INT); INSERT INTO t VALUES (2)",
    )
    .unwrap();
    // The view reads `t` of its own schema, whatever the session uses.
    assert_eq!(
        sorted_sql_rows(&mut s, "SELECT x FROM sales.v"),
        [cells(&["1"])]
    );
    // A view that no longer plans stops nothing else.
    s.execute("DROP TABLE Sales.t").unwrap();
    assert_eq!(sorted_sql_rows(&mut s, "SELECT x FROM t"), [cells(&["2"])]);
    s.execute("DROP VIEW sales.v").unwrap();
}

#[test]
fn a_table_defined_with_its_flow_in_two_schemas_has_two_flows() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    s.execute("CREATE SCHEMA a; CREATE SCHEMA b; CREATE TABLE ev (id BIGINT, seq BIGINT)")
        .unwrap();
    for schema in ["a", "b"] {
        s.execute(&format!(
            "USE {schema}; CREATE OR REFRESH STREAMING TABLE t FLOW AUTO CDC \
             FROM stream(default.ev) KEYS (id) SEQUENCE BY seq STORED AS SCD TYPE 1"
        ))
        .unwrap();
    }
    let mut flows: Vec<String> = ["a.t", "b.t"]
        .iter()
        .flat_map(|t| s.store().flows(t).unwrap())
        .map(|f| f.name.clone())
        .collect();
    flows.sort();
    assert_eq!(flows, ["a.t", "b.t"]);
}

#[test]
fn a_receipt_taken_in_a_schema_verifies_from_any_session() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    s.execute(
        "CREATE SCHEMA sales; CREATE TABLE sales.t (x INT); INSERT INTO sales.t VALUES (1), (2);
         CREATE TABLE t (x INT); INSERT INTO t VALUES (9)",
    )
    .unwrap();
    s.execute("USE sales").unwrap();
    let (_, taken) = common::sql_rows(&mut s, "RECEIPT FOR SELECT sum(x) FROM t");
    let token = taken[0][0].clone().unwrap();
    drop(s);
    let mut s = open(dir.path());
    s.execute("INSERT INTO sales.t VALUES (3)").unwrap();
    let (_, checked) = common::sql_rows(&mut s, &format!("VERIFY RECEIPT '{token}'"));
    assert_eq!(checked[0][0], Some("true".into()), "{checked:?}");
    // The session's own schema is as it was.
    assert_eq!(sorted_sql_rows(&mut s, "SELECT x FROM t"), [cells(&["9"])]);
}

#[test]
fn a_receipt_taken_in_the_default_schema_verifies_after_use() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    s.execute(
        "CREATE SCHEMA sales; CREATE TABLE sales.t (x INT); INSERT INTO sales.t VALUES (1);
         CREATE TABLE t (x INT); INSERT INTO t VALUES (9); CREATE VIEW b AS SELECT x FROM t;
         CREATE VIEW a AS SELECT x FROM b",
    )
    .unwrap();
    let (_, taken) = common::sql_rows(&mut s, "RECEIPT FOR SELECT sum(x) FROM t");
    let token = taken[0][0].clone().unwrap();
    s.execute("USE sales").unwrap();
    let (_, checked) = common::sql_rows(&mut s, &format!("VERIFY RECEIPT '{token}'"));
    assert_eq!(checked[0][0], Some("true".into()), "{checked:?}");
    // A view of a view, on a session's first statement.
    drop(s);
    let mut s = open(dir.path());
    assert_eq!(sorted_sql_rows(&mut s, "SELECT x FROM a"), [cells(&["9"])]);
}
