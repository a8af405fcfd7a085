//! Append flows: `CREATE FLOW f AS INSERT [ONCE] INTO t BY NAME SELECT ... FROM STREAM(src)` and
//! the standalone `CREATE OR REFRESH STREAMING TABLE t AS SELECT ... FROM STREAM(src)`: each run
//! appends what arrived since the flow's checkpoint, several flows may feed one table, and the
//! table can be the source of an AUTO CDC flow.

use crate::common;

use asof::{SqlSession, Store};

use common::{cells, sorted_sql_rows as rows};

const SETUP: &str = "CREATE TABLE orders_eu (id BIGINT, amount BIGINT, seq BIGINT); \
     CREATE TABLE orders_us (id BIGINT, amount BIGINT, seq BIGINT); \
     INSERT INTO orders_eu VALUES (1, 10, 1), (2, 20, 1); \
     INSERT INTO orders_us VALUES (3, 30, 1), (4, 0, 1); \
     CREATE OR REFRESH STREAMING TABLE all_orders; \
     CREATE FLOW eu AS INSERT INTO all_orders BY NAME \
       SELECT id, amount, seq, 'eu' AS region FROM STREAM(orders_eu); \
     CREATE FLOW us COMMENT 'a backfill' AS INSERT INTO ONCE all_orders BY NAME \
       SELECT region, id, amount, seq FROM (SELECT *, 'us' AS region FROM STREAM orders_us) WHERE amount > 0";

#[test]
fn append_flows_feed_one_table_each_from_its_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = SqlSession::new(Store::open(dir.path()).unwrap()).unwrap();
    s.execute(SETUP).unwrap();
    let all = "SELECT id, amount, region FROM all_orders";
    assert_eq!(
        rows(&mut s, all),
        [
            cells(&["1", "10", "eu"]),
            cells(&["2", "20", "eu"]),
            cells(&["3", "30", "us"])
        ]
    );
    s.execute("INSERT INTO orders_eu VALUES (5, 50, 1); INSERT INTO orders_us VALUES (6, 60, 1)")
        .unwrap();
    drop(s);
    // A new process: the checkpoints are in the store.
    let mut s = SqlSession::new(Store::open(dir.path()).unwrap()).unwrap();
    let out = s.execute("REFRESH STREAMING TABLE all_orders").unwrap();
    let said = format!("{out:?}");
    assert!(said.contains("eu: appended 1 rows"), "{said}");
    assert!(said.contains("us: ran once already"), "{said}");
    assert_eq!(
        rows(&mut s, "SELECT count(*) FROM all_orders"),
        [cells(&["4"])]
    );
    assert_eq!(
        rows(&mut s, "SELECT id FROM all_orders WHERE id = 5"),
        [cells(&["5"])]
    );
    // Refreshed again with nothing new: nothing is appended.
    s.execute("REFRESH STREAMING TABLE all_orders").unwrap();
    assert_eq!(
        rows(&mut s, "SELECT count(*) FROM all_orders"),
        [cells(&["4"])]
    );
    // The checkpoint is a parameter of each write.
    let (names, history) = common::sql_rows(&mut s, "DESCRIBE HISTORY all_orders");
    let params = names
        .iter()
        .position(|n| n == "operationParameters")
        .unwrap();
    let text: Vec<String> = history.iter().filter_map(|r| r[params].clone()).collect();
    assert!(
        text.iter().any(|p| p.contains("append_offset.eu")),
        "{text:?}"
    );
    // DESCRIBE shows each flow as the statement that creates it.
    let (_, described) = common::sql_rows(&mut s, "DESCRIBE TABLE EXTENDED all_orders");
    let flows: Vec<String> = described
        .iter()
        .filter(|r| r[0].as_deref() == Some("Flow"))
        .map(|r| r[1].clone().unwrap())
        .collect();
    assert_eq!(
        flows,
        [
            "CREATE FLOW eu AS INSERT INTO all_orders BY NAME \
               SELECT id, amount, seq, 'eu' AS region FROM STREAM(orders_eu)",
            "CREATE FLOW us COMMENT 'a backfill' AS INSERT ONCE INTO all_orders BY NAME \
               SELECT region, id, amount, seq FROM (SELECT *, 'us' AS region FROM STREAM(orders_us)) WHERE amount > 0"
        ]
    );
    // The appended table feeds an AUTO CDC flow.
    s.execute(
        "CREATE FLOW latest AS AUTO CDC INTO latest_orders FROM stream(all_orders) KEYS (id) \
         SEQUENCE BY seq STORED AS SCD TYPE 1",
    )
    .unwrap();
    assert_eq!(
        rows(&mut s, "SELECT count(*) FROM latest_orders"),
        [cells(&["4"])]
    );
}

#[test]
fn a_streaming_table_defined_by_its_query_appends_what_arrives() {
    let (_dir, mut s) = {
        let dir = tempfile::tempdir().unwrap();
        let s = SqlSession::new(Store::open(dir.path()).unwrap()).unwrap();
        (dir, s)
    };
    s.execute(SETUP).unwrap();
    let create = "CREATE OR REFRESH STREAMING TABLE big AS \
                  SELECT id, amount * 2 AS doubled FROM STREAM(orders_eu) WHERE amount >= 20";
    s.execute(create).unwrap();
    assert_eq!(
        rows(&mut s, "SELECT id, doubled FROM big"),
        [cells(&["2", "40"])]
    );
    s.execute("INSERT INTO orders_eu VALUES (7, 70, 1), (8, 1, 1)")
        .unwrap();
    s.execute(create).unwrap();
    assert_eq!(
        rows(&mut s, "SELECT id, doubled FROM big"),
        [cells(&["2", "40"]), cells(&["7", "140"])]
    );
    s.execute(create).unwrap();
    assert_eq!(rows(&mut s, "SELECT count(*) FROM big"), [cells(&["2"])]);
    // Another query under the same name redefines the flow: it goes on from its checkpoint
    // with the new query, the rows it appended stay.
    s.execute("INSERT INTO orders_eu VALUES (9, 25, 1), (10, 35, 1)")
        .unwrap();
    s.execute(&create.replace(">= 20", ">= 30")).unwrap();
    assert_eq!(
        rows(&mut s, "SELECT id, doubled FROM big"),
        [
            cells(&["10", "70"]),
            cells(&["2", "40"]),
            cells(&["7", "140"])
        ]
    );
    // An append flow into a table nobody declared.
    let e = s
        .execute("CREATE FLOW x AS INSERT INTO nowhere BY NAME SELECT * FROM STREAM(orders_eu)")
        .unwrap_err()
        .to_string();
    assert!(e.contains("declare it first"), "{e}");
    let e = s
        .execute("CREATE FLOW y AS INSERT INTO big BY NAME SELECT * FROM orders_eu")
        .unwrap_err()
        .to_string();
    assert!(e.contains("STREAM(source)"), "{e}");
}

#[test]
fn a_flow_reads_a_tables_change_feed_from_its_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = SqlSession::new(Store::open(dir.path()).unwrap()).unwrap();
    s.execute(
        "CREATE TABLE ev (id BIGINT, v STRING, seq BIGINT); \
         INSERT INTO ev VALUES (1, 'a', 1), (2, 'b', 1); \
         CREATE FLOW s AS AUTO CDC INTO silver FROM stream(ev) KEYS (id) SEQUENCE BY seq \
           STORED AS SCD TYPE 1; \
         CREATE OR REFRESH STREAMING TABLE silver_changes AS \
           SELECT id, v, _change_type, _commit_version FROM STREAM(silver) \
           WITH (readChangeFeed = true)",
    )
    .unwrap();
    let changes = "SELECT id, v, _change_type, _commit_version FROM silver_changes";
    assert_eq!(
        rows(&mut s, changes),
        [
            cells(&["1", "a", "insert", "1"]),
            cells(&["2", "b", "insert", "1"])
        ]
    );
    s.execute("INSERT INTO ev VALUES (1, 'a2', 2); REFRESH STREAMING TABLE silver")
        .unwrap();
    drop(s);
    let mut s = SqlSession::new(Store::open(dir.path()).unwrap()).unwrap();
    s.execute("REFRESH STREAMING TABLE silver_changes").unwrap();
    s.execute("REFRESH STREAMING TABLE silver_changes").unwrap();
    assert_eq!(
        rows(&mut s, changes),
        [
            cells(&["1", "a", "insert", "1"]),
            cells(&["1", "a", "update_preimage", "2"]),
            cells(&["1", "a2", "update_postimage", "2"]),
            cells(&["2", "b", "insert", "1"])
        ]
    );
    // Starting at a later version reads from there.
    s.execute(
        "CREATE OR REFRESH STREAMING TABLE late_changes AS SELECT id, _change_type \
         FROM STREAM(silver) WITH (readChangeFeed = true, startingVersion = 2)",
    )
    .unwrap();
    assert_eq!(
        rows(&mut s, "SELECT * FROM late_changes"),
        [
            cells(&["1", "update_postimage"]),
            cells(&["1", "update_preimage"])
        ]
    );
    // Skipping the commits that changed rows: commit 1 (inserts) and 3 (an insert) are read,
    // commit 2 (an update) is not.
    s.execute("INSERT INTO ev VALUES (3, 'c', 1); REFRESH STREAMING TABLE silver")
        .unwrap();
    s.execute(
        "CREATE OR REFRESH STREAMING TABLE inserts_only AS SELECT id, _commit_version \
         FROM STREAM(silver) WITH (readChangeFeed = true, skipChangeCommits = true)",
    )
    .unwrap();
    assert_eq!(
        rows(&mut s, "SELECT * FROM inserts_only"),
        [cells(&["1", "1"]), cells(&["2", "1"]), cells(&["3", "3"])]
    );
    let e = s
        .execute("CREATE OR REFRESH STREAMING TABLE x AS SELECT * FROM STREAM(silver) WITH (startAt = 1)")
        .unwrap_err()
        .to_string();
    assert!(e.contains("readChangeFeed"), "{e}");
}

#[test]
fn a_full_refresh_recomputes_an_append_table_from_all_its_flows() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = SqlSession::new(Store::open(dir.path()).unwrap()).unwrap();
    s.execute(SETUP).unwrap();
    // A row written by hand, and a flow redefined: it goes on from its checkpoint with its new
    // query, the rows it appended stay.
    s.execute(
        "INSERT INTO all_orders (id, amount, seq, region) VALUES (9, 90, 1, 'manual'); \
         CREATE FLOW eu AS INSERT INTO all_orders BY NAME \
           SELECT id, amount * 100 AS amount, seq, 'EU' AS region FROM STREAM(orders_eu); \
         INSERT INTO orders_eu VALUES (5, 5, 1); REFRESH STREAMING TABLE all_orders",
    )
    .unwrap();
    let all = "SELECT id, amount, region FROM all_orders";
    assert_eq!(
        rows(&mut s, all),
        [
            cells(&["1", "10", "eu"]),
            cells(&["2", "20", "eu"]),
            cells(&["3", "30", "us"]),
            cells(&["5", "500", "EU"]),
            cells(&["9", "90", "manual"]),
        ]
    );
    // An AUTO CDC flow reads the table.
    s.execute(
        "CREATE OR REFRESH STREAMING TABLE latest FLOW AUTO CDC FROM stream(all_orders) \
         KEYS (id) SEQUENCE BY seq STORED AS SCD TYPE 1",
    )
    .unwrap();
    // The full refresh: every flow over all its source (the ONCE backfill too), in one commit;
    // the row written by hand is gone, as in Databricks.
    let out = format!(
        "{:?}",
        s.execute("REFRESH STREAMING TABLE all_orders FULL")
            .unwrap()
    );
    assert!(out.contains("removed 5 rows and wrote 4"), "{out}");
    let want = [
        cells(&["1", "1000", "EU"]),
        cells(&["2", "2000", "EU"]),
        cells(&["3", "30", "us"]),
        cells(&["5", "500", "EU"]),
    ];
    assert_eq!(rows(&mut s, all), want);
    let (names, history) = common::sql_rows(&mut s, "DESCRIBE HISTORY all_orders");
    let op = names.iter().position(|n| n == "operation").unwrap();
    assert!(
        history
            .iter()
            .any(|r| r[op].as_deref() == Some("FULL REFRESH")),
        "{history:?}"
    );
    // The checkpoints restart after the rows read: nothing new is appended twice.
    s.execute("REFRESH STREAMING TABLE all_orders").unwrap();
    assert_eq!(rows(&mut s, all), want);
    // The AUTO CDC flow had read rows the full refresh removed: it stops until its own full
    // refresh, which reads the table as it is now.
    let e = s
        .execute("REFRESH STREAMING TABLE latest")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("FULL REFRESH") && e.contains("flow `latest`"),
        "{e}"
    );
    s.execute("REFRESH STREAMING TABLE latest FULL").unwrap();
    assert_eq!(
        rows(&mut s, "SELECT id, amount FROM latest"),
        [
            cells(&["1", "1000"]),
            cells(&["2", "2000"]),
            cells(&["3", "30"]),
            cells(&["5", "500"]),
        ]
    );
}

#[test]
fn a_flow_redefined_on_another_source_reads_that_source_from_its_start() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = SqlSession::new(Store::open(dir.path()).unwrap()).unwrap();
    s.execute(SETUP).unwrap();
    s.execute(
        "CREATE FLOW eu AS INSERT INTO all_orders BY NAME \
           SELECT id, amount, seq, 'from us' AS region FROM STREAM(orders_us)",
    )
    .unwrap();
    assert_eq!(
        rows(
            &mut s,
            "SELECT id, region FROM all_orders WHERE region = 'from us'"
        ),
        [cells(&["3", "from us"]), cells(&["4", "from us"])]
    );
    let (names, history) = common::sql_rows(&mut s, "DESCRIBE HISTORY all_orders");
    let params = names
        .iter()
        .position(|n| n == "operationParameters")
        .unwrap();
    assert!(
        history.iter().any(|r| r[params]
            .as_deref()
            .is_some_and(|p| p.contains("redefined_flow"))),
        "{history:?}"
    );
}

#[test]
fn a_replace_flow_replaces_the_rows_its_new_rows_match_unless_they_are_newer() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = SqlSession::new(Store::open(dir.path()).unwrap()).unwrap();
    // Daily totals per store, delivered (and re-delivered) whole per day, with a load time.
    s.execute(
        "CREATE TABLE deliveries (day BIGINT, store STRING, amount BIGINT, loaded BIGINT);
         INSERT INTO deliveries VALUES (1, 'a', 10, 100), (1, 'b', 20, 100);
         CREATE OR REFRESH STREAMING TABLE daily;
         CREATE FLOW load AS INSERT INTO daily BY NAME REPLACE USING (day) SEQUENCE BY loaded
           SELECT day, store, amount, loaded FROM STREAM(deliveries)",
    )
    .unwrap();
    let q = "SELECT day, store, amount FROM daily";
    // Day 1 again, corrected and with a store fewer; day 2 new.
    s.execute(
        "INSERT INTO deliveries VALUES (1, 'a', 11, 200), (2, 'a', 5, 200);
         REFRESH STREAMING TABLE daily",
    )
    .unwrap();
    assert_eq!(
        rows(&mut s, q),
        [cells(&["1", "a", "11"]), cells(&["2", "a", "5"])]
    );
    // A late re-delivery of day 1 (loaded before the correction) changes nothing of it.
    s.execute(
        "INSERT INTO deliveries VALUES (1, 'a', 10, 150), (1, 'b', 20, 150), (3, 'c', 7, 150);
         REFRESH STREAMING TABLE daily",
    )
    .unwrap();
    assert_eq!(
        rows(&mut s, q),
        [
            cells(&["1", "a", "11"]),
            cells(&["2", "a", "5"]),
            cells(&["3", "c", "7"])
        ]
    );
    let (names, history) = common::sql_rows(&mut s, "DESCRIBE HISTORY daily");
    let op = names.iter().position(|n| n == "operation").unwrap();
    assert_eq!(
        history
            .iter()
            .filter(|r| r[op].as_deref() == Some("REPLACE"))
            .count(),
        3
    );
    // Two deliveries of a day in one run: the later one stays. A full refresh runs the flow
    // once over all deliveries: per day, the last.
    s.execute(
        "INSERT INTO deliveries VALUES (3, 'c', 8, 300), (3, 'c', 9, 400), (3, 'd', 1, 400);
         REFRESH STREAMING TABLE daily",
    )
    .unwrap();
    let want = [
        cells(&["1", "a", "11"]),
        cells(&["2", "a", "5"]),
        cells(&["3", "c", "9"]),
        cells(&["3", "d", "1"]),
    ];
    assert_eq!(rows(&mut s, q), want);
    s.execute("REFRESH STREAMING TABLE daily FULL").unwrap();
    assert_eq!(rows(&mut s, q), want);
}

#[test]
fn a_replace_where_flow_swaps_the_rows_its_condition_selects() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = SqlSession::new(Store::open(dir.path()).unwrap()).unwrap();
    s.execute(
        "CREATE TABLE today (store STRING, amount BIGINT);
         INSERT INTO today VALUES ('a', 1), ('b', 2);
         CREATE OR REFRESH STREAMING TABLE latest;
         CREATE FLOW snap AS INSERT INTO latest BY NAME REPLACE WHERE amount < 100
           SELECT store, amount FROM STREAM(today)",
    )
    .unwrap();
    s.execute("INSERT INTO latest VALUES ('kept', 500)")
        .unwrap();
    s.execute("INSERT INTO today VALUES ('c', 3); REFRESH STREAMING TABLE latest")
        .unwrap();
    assert_eq!(
        rows(&mut s, "SELECT store, amount FROM latest"),
        [cells(&["c", "3"]), cells(&["kept", "500"])]
    );
    // New rows the condition does not select: refused, nothing written.
    s.execute("INSERT INTO today VALUES ('d', 300)").unwrap();
    let e = s
        .execute("REFRESH STREAMING TABLE latest")
        .unwrap_err()
        .to_string();
    assert!(e.contains("do not match the condition"), "{e}");
    assert_eq!(
        rows(&mut s, "SELECT store, amount FROM latest"),
        [cells(&["c", "3"]), cells(&["kept", "500"])]
    );
}

#[test]
fn a_read_files_append_flow_run_again_takes_only_new_files() {
    let dir = tempfile::tempdir().unwrap();
    let landing = dir.path().join("landing");
    std::fs::create_dir(&landing).unwrap();
    let write = |name: &str, body: &str| common::write_settled(&landing.join(name), body);
    write("b.csv", "id,v\n1,a\n2,b\n");
    let mut s = SqlSession::new(Store::open(dir.path().join("db")).unwrap()).unwrap();
    let create = format!(
        "CREATE OR REFRESH STREAMING TABLE t AS SELECT * FROM STREAM read_files('{}', format => 'csv', header => true)",
        landing.display()
    );
    s.execute(&create).unwrap();
    write("a.csv", "id,v\n3,c\n");
    s.execute(&create).unwrap();
    s.execute(&create).unwrap();
    assert_eq!(
        rows(&mut s, "SELECT id, v FROM t"),
        [cells(&["1", "a"]), cells(&["2", "b"]), cells(&["3", "c"])]
    );
    // Another folder under the same flow is refused.
    let other = create.replace("landing", "elsewhere");
    let e = s.execute(&other).unwrap_err().to_string();
    assert!(e.contains("another folder"), "{e}");
}

#[test]
fn an_append_flow_redefined_onto_a_missing_source_is_refused_and_its_source_cannot_be_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = SqlSession::new(Store::open(dir.path()).unwrap()).unwrap();
    s.execute(SETUP).unwrap();
    let e = s
        .execute("CREATE FLOW eu AS INSERT INTO all_orders BY NAME SELECT * FROM STREAM(nosuch)")
        .unwrap_err()
        .to_string();
    assert!(e.contains("nosuch"), "{e}");
    s.execute("REFRESH STREAMING TABLE all_orders").unwrap();
    let e = s.execute("DROP TABLE orders_eu").unwrap_err().to_string();
    assert!(e.contains("append flow"), "{e}");
}

#[test]
fn a_replace_flow_refuses_rows_without_a_sequence_and_quoted_columns_work() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = SqlSession::new(Store::open(dir.path()).unwrap()).unwrap();
    s.execute(
        "CREATE TABLE deliveries (`the day` BIGINT, amount BIGINT, loaded BIGINT);
         INSERT INTO deliveries VALUES (1, 10, 100);
         CREATE OR REFRESH STREAMING TABLE daily;
         CREATE FLOW load AS INSERT INTO daily BY NAME REPLACE USING (`the day`) SEQUENCE BY LOADED
           SELECT * FROM STREAM(deliveries)",
    )
    .unwrap();
    s.execute("INSERT INTO deliveries VALUES (1, 11, NULL)")
        .unwrap();
    let e = s
        .execute("REFRESH STREAMING TABLE daily")
        .unwrap_err()
        .to_string();
    assert!(e.contains("no sequence"), "{e}");
    assert_eq!(rows(&mut s, "SELECT amount FROM daily"), [cells(&["10"])]);
}

#[test]
fn two_runs_of_one_flow_from_the_same_checkpoint_commit_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = SqlSession::new(Store::open(dir.path()).unwrap()).unwrap();
    s.execute(
        "CREATE TABLE src (id BIGINT); INSERT INTO src VALUES (1);
         CREATE OR REFRESH STREAMING TABLE copy AS SELECT id FROM STREAM(src);
         INSERT INTO src VALUES (2)",
    )
    .unwrap();
    // Two runs read from the same checkpoint; the first to commit wins.
    let store = s.store().clone();
    let checkpoint = store.append_offset("copy", "copy").unwrap();
    let new_rows = store
        .source_rows_after("src", "copy", 1, asof::ChangeCommits::Read, 0)
        .and_then(|r| r.collect_batches())
        .unwrap();
    let write = |store: &Store| {
        let mut w = store.begin_append("copy").unwrap();
        for b in &new_rows {
            w.push(b).unwrap();
        }
        w.follows_checkpoint("copy", checkpoint);
        w.set_parameter(asof::append_offset_parameter("copy"), "2");
        w
    };
    let (first, second) = (write(&store), write(&store));
    store.commit_write(first, None).unwrap();
    let e = store.commit_write(second, None).unwrap_err();
    assert!(matches!(e, asof::Error::FlowRanMeanwhile { .. }), "{e}");
    assert_eq!(
        rows(&mut s, "SELECT id FROM copy"),
        [cells(&["1"]), cells(&["2"])]
    );
}

#[test]
fn a_column_a_later_file_adds_joins_the_tables_with_add_new_columns() {
    let dir = tempfile::tempdir().unwrap();
    let landing = dir.path().join("landing");
    std::fs::create_dir(&landing).unwrap();
    let write = |name: &str, body: &str| common::write_settled(&landing.join(name), body);
    write("1.csv", "id,v,seq\n1,a,1\n");
    let db = dir.path().join("db");
    let mut s = SqlSession::new(Store::open(&db).unwrap()).unwrap();
    let files = format!(
        "read_files('{}', format => 'csv', header => true, schemaEvolutionMode => 'addNewColumns')",
        landing.display()
    );
    let bronze =
        format!("CREATE OR REFRESH STREAMING TABLE bronze AS SELECT * FROM STREAM {files}");
    s.execute(&bronze).unwrap();
    s.execute(&format!(
        "CREATE OR REFRESH STREAMING TABLE latest FLOW AUTO CDC FROM stream({files}) KEYS (id) \
         SEQUENCE BY seq STORED AS SCD TYPE 1"
    ))
    .unwrap();
    write("2.csv", "id,v,seq,region\n2,b,1,eu\n1,c,2,us\n");
    s.execute(&bronze).unwrap();
    s.execute("REFRESH STREAMING TABLE latest").unwrap();
    // A column whose values are all empty has no type yet: it comes as STRING.
    write("3.csv", "id,v,seq,region,zip\n3,c,1,,\n");
    s.execute("REFRESH STREAMING TABLE bronze FULL").unwrap();
    assert_eq!(
        rows(&mut s, "SELECT id, zip FROM bronze WHERE id = 3"),
        [vec![Some("3".into()), None]]
    );
    s.execute("DELETE FROM bronze WHERE id = 3").unwrap();
    let want = [
        vec![Some("1".into()), Some("a".into()), None],
        cells(&["1", "c", "us"]),
        cells(&["2", "b", "eu"]),
    ];
    assert_eq!(rows(&mut s, "SELECT id, v, region FROM bronze"), want);
    // The AUTO CDC target gained `region` when it was refreshed after file 2 (not `zip`: it has
    // not been refreshed since file 3).
    assert_eq!(
        rows(&mut s, "SELECT id, v, region FROM latest"),
        [cells(&["1", "c", "us"]), cells(&["2", "b", "eu"])]
    );
    assert!(s.execute("SELECT zip FROM latest").is_err());
    drop(s);
    let mut s = SqlSession::new(Store::open(&db).unwrap()).unwrap();
    assert_eq!(rows(&mut s, "SELECT id, v, region FROM bronze"), want);
    let (names, history) = common::sql_rows(&mut s, "DESCRIBE HISTORY bronze");
    let op = names.iter().position(|n| n == "operation").unwrap();
    assert!(
        history
            .iter()
            .any(|r| r[op].as_deref() == Some("ADD COLUMNS")),
        "{history:?}"
    );
}

#[test]
fn an_scd2_target_gains_the_column_its_files_add_and_older_versions_read_null() {
    let dir = tempfile::tempdir().unwrap();
    let landing = dir.path().join("landing");
    std::fs::create_dir(&landing).unwrap();
    let write = |name: &str, body: &str| common::write_settled(&landing.join(name), body);
    write("1.csv", "id,v,seq\n1,a,10\n2,x,10\n");
    let db = dir.path().join("db");
    let mut s = SqlSession::new(Store::open(&db).unwrap()).unwrap();
    s.execute(&format!(
        "CREATE OR REFRESH STREAMING TABLE hist FLOW AUTO CDC FROM stream(read_files('{}', \
         format => 'csv', header => true, schemaEvolutionMode => 'addNewColumns')) KEYS (id) \
         SEQUENCE BY seq COLUMNS * EXCEPT (seq) STORED AS SCD TYPE 2",
        landing.display()
    ))
    .unwrap();
    // A table fed by its change feed, downstream.
    s.execute(
        "CREATE OR REFRESH STREAMING TABLE feed AS SELECT id, v, _change_type FROM STREAM(hist) \
         WITH (readChangeFeed = true)",
    )
    .unwrap();
    s.execute(
        "CREATE OR REFRESH STREAMING TABLE wide_feed AS SELECT * FROM STREAM(hist) \
         WITH (readChangeFeed = true)",
    )
    .unwrap();
    // Key 1 gets a region (a change of a tracked column: a new version); key 3 arrives.
    write("2.csv", "id,v,seq,region\n1,a,20,eu\n3,y,10,us\n");
    s.execute("REFRESH STREAMING TABLE hist").unwrap();
    // Downstream, a query that names its columns goes on; one that takes them all gains `region`.
    s.execute("REFRESH STREAMING TABLE feed; REFRESH STREAMING TABLE wide_feed")
        .unwrap();
    assert_eq!(
        rows(
            &mut s,
            "SELECT id, region, _change_type FROM wide_feed WHERE region IS NOT NULL"
        ),
        // (In SCD TYPE 2 key 1's new version is a row of its own: an insert; §7.3.)
        [cells(&["1", "eu", "insert"]), cells(&["3", "us", "insert"])]
    );
    // A late event on key 2, with the new column.
    write("3.csv", "id,v,seq,region\n2,z,5,eu\n");
    s.execute("REFRESH STREAMING TABLE hist").unwrap();
    let history = "SELECT id, v, region, __START_AT, __END_AT FROM hist";
    let want = vec![
        vec![
            Some("1".into()),
            Some("a".into()),
            None,
            Some("10".into()),
            Some("20".into()),
        ],
        vec![
            Some("1".into()),
            Some("a".into()),
            Some("eu".into()),
            Some("20".into()),
            None,
        ],
        vec![
            Some("2".into()),
            Some("x".into()),
            None,
            Some("10".into()),
            None,
        ],
        cells(&["2", "z", "eu", "5", "10"]),
        vec![
            Some("3".into()),
            Some("y".into()),
            Some("us".into()),
            Some("10".into()),
            None,
        ],
    ];
    assert_eq!(rows(&mut s, history), want);
    let (names, log) = common::sql_rows(&mut s, "DESCRIBE HISTORY hist");
    let op = names.iter().position(|n| n == "operation").unwrap();
    let ops: Vec<&str> = log.iter().filter_map(|r| r[op].as_deref()).collect();
    assert_eq!(
        ops.iter().filter(|o| **o == "ADD COLUMNS").count(),
        1,
        "{ops:?}"
    );
    // Reopened, and replayed from its log (its events from before read NULL in `region`).
    drop(s);
    let store = Store::open(&db).unwrap();
    let report = store.verify().unwrap();
    assert!(report.ok(), "{report:?}");
    let mut s = SqlSession::new(store).unwrap();
    assert_eq!(rows(&mut s, history), want);
    // The table as of its first commit has the column too, NULL.
    assert_eq!(
        rows(&mut s, "SELECT id, region FROM hist VERSION AS OF 1"),
        [vec![Some("1".into()), None], vec![Some("2".into()), None]]
    );
}

#[test]
fn full_refreshes_and_drops_that_could_not_be_redone_whole_are_refused_before_any_change() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = SqlSession::new(Store::open(dir.path()).unwrap()).unwrap();
    s.execute(
        "CREATE TABLE a (day BIGINT, amount BIGINT, loaded BIGINT);
         CREATE TABLE b (day BIGINT, amount BIGINT, loaded BIGINT);
         INSERT INTO a VALUES (1, 5, 50); INSERT INTO b VALUES (1, 10, 100);
         CREATE OR REFRESH STREAMING TABLE daily;
         CREATE FLOW plain AS INSERT INTO daily BY NAME SELECT * FROM STREAM(a);
         CREATE FLOW latest AS INSERT INTO daily BY NAME REPLACE USING (day) SEQUENCE BY loaded
           SELECT * FROM STREAM(b)",
    )
    .unwrap();
    let e = s
        .execute("REFRESH STREAMING TABLE daily FULL")
        .unwrap_err()
        .to_string();
    assert!(e.contains("other flows"), "{e}");
    assert_eq!(rows(&mut s, "SELECT amount FROM daily"), [cells(&["10"])]);
    // A schema whose table feeds one outside it: nothing is dropped.
    s.execute(
        "CREATE SCHEMA sales; CREATE TABLE sales.src (id BIGINT); CREATE TABLE sales.keep (x INT);
         CREATE OR REFRESH STREAMING TABLE outside AS SELECT id FROM STREAM(sales.src)",
    )
    .unwrap();
    let e = s
        .execute("DROP SCHEMA sales CASCADE")
        .unwrap_err()
        .to_string();
    assert!(e.contains("nothing was dropped"), "{e}");
    assert!(s
        .store()
        .sources()
        .unwrap()
        .contains(&"sales.keep".to_string()));
}

#[test]
fn rows_written_while_columns_were_added_are_refused_not_misread() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = SqlSession::new(Store::open(dir.path()).unwrap()).unwrap();
    s.execute("CREATE TABLE t (id BIGINT); INSERT INTO t VALUES (1)")
        .unwrap();
    let store = s.store().clone();
    let before = store
        .source_rows("t", asof::SourceRead::Now)
        .and_then(|r| r.collect_batches())
        .unwrap();
    let mut w = store.begin_append("t").unwrap();
    for b in &before {
        w.push(b).unwrap();
    }
    let extra: arrow::datatypes::FieldRef = std::sync::Arc::new(arrow::datatypes::Field::new(
        "region",
        arrow::datatypes::DataType::Utf8,
        true,
    ));
    store.add_source_columns("t", &[extra]).unwrap();
    let e = store.commit_write(w, None).unwrap_err().to_string();
    assert!(e.contains("columns of `t` changed"), "{e}");
    assert_eq!(
        rows(&mut s, "SELECT id, region FROM t"),
        [vec![Some("1".into()), None]]
    );
}

#[test]
fn a_full_refresh_that_a_write_overtook_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = SqlSession::new(Store::open(dir.path()).unwrap()).unwrap();
    s.execute("CREATE TABLE t (id BIGINT); INSERT INTO t VALUES (1)")
        .unwrap();
    let store = s.store().clone();
    let now = store.source_rows_positioned("t").unwrap();
    let removed: Vec<u64> = now.rows.iter().flat_map(|p| p.positions.clone()).collect();
    // A row lands after the rows were read, before the refresh begins its write.
    s.execute("INSERT INTO t VALUES (2)").unwrap();
    let mut w = store
        .begin_source_dml(
            "t",
            asof::SourceDmlOperation::FullRefresh,
            removed,
            "REFRESH",
        )
        .unwrap();
    w.removes_all_of(now.written);
    let e = store.commit_write(w, None).unwrap_err();
    assert!(matches!(e, asof::Error::FlowRanMeanwhile { .. }), "{e}");
    assert_eq!(
        rows(&mut s, "SELECT id FROM t"),
        [cells(&["1"]), cells(&["2"])]
    );
}
