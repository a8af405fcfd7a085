//! SQL over files and the rest of the dialect: `read_files` (CSV, JSON, Parquet; a file or a
//! folder; as a query and as a streaming flow source), `VALUES` column names, `AUTO CDC ONCE`,
//! declared streaming-table columns, several flows into one target, and the temporal table
//! functions.

use crate::common;

use asof::{SqlOutput, SqlSession, Store};
use common::{data_dir, read_csv, sorted};

fn session(dir: &std::path::Path) -> SqlSession {
    SqlSession::new(Store::open(dir).unwrap()).unwrap()
}

/// The rows of the last query of `sql`, sorted, and its column names.
fn query(s: &mut SqlSession, sql: &str) -> (Vec<String>, Vec<Vec<Option<String>>>) {
    let (names, rows) = common::sql_rows(s, sql);
    (names, sorted(rows))
}

const FLOW_BODY: &str = "KEYS (CompanyId)
APPLY AS DELETE WHEN operation = \"DELETE\"
SEQUENCE BY business_time
SYSTEM SEQUENCE BY system_time
COLUMNS * EXCEPT (business_time, system_time, operation)
STORED AS BITEMPORAL";

/// The reference events as one CSV file per event, in `dir`.
fn event_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let text = std::fs::read_to_string(data_dir().join("seed_bitemporal/events.csv")).unwrap();
    let mut lines = text.lines();
    let header = lines.next().unwrap();
    lines
        .enumerate()
        .map(|(i, l)| {
            let p = dir.join(format!("events_{i}.csv"));
            std::fs::write(&p, format!("{header}\n{l}\n")).unwrap();
            p
        })
        .collect()
}

/// The statement that creates the reference flow over the CSV files of folder `landing`.
fn create_over(landing: &std::path::Path) -> String {
    format!(
        "CREATE OR REFRESH STREAMING TABLE company_points FLOW AUTO CDC
         FROM stream(read_files('{}', format => 'csv', header => true)) {FLOW_BODY}",
        landing.display()
    )
}

/// The statement that creates SCD TYPE 1 table `t`, keyed by `id` and sequenced by `seq`, over
/// the CSV files of folder `landing`.
fn create_scd1_over(landing: &std::path::Path) -> String {
    format!(
        "CREATE OR REFRESH STREAMING TABLE t FLOW AUTO CDC
         FROM stream(read_files('{}', format => 'csv', header => true))
         KEYS (id) SEQUENCE BY seq STORED AS SCD TYPE 1",
        landing.display()
    )
}

#[test]
fn a_streaming_flow_over_a_folder_picks_up_new_files_on_refresh() {
    let db = tempfile::tempdir().unwrap();
    let landing = tempfile::tempdir().unwrap();
    let staged = tempfile::tempdir().unwrap();
    let files = event_files(staged.path());
    let mut s = session(db.path());
    s.execute(&create_over(landing.path()))
        .expect_err("an empty folder has no schema to infer");
    std::fs::copy(&files[0], landing.path().join("events_0.csv")).unwrap();
    s.execute(&create_over(landing.path())).unwrap();
    let (_, exp) = read_csv(&data_dir().join("seed_bitemporal/expected_after_1.csv"));
    assert_eq!(query(&mut s, "SELECT * FROM company_points").1, sorted(exp));
    // Each new file is loaded once, across restarts; a refresh with no new file changes nothing.
    for n in 2..=4 {
        std::fs::copy(
            &files[n - 1],
            landing.path().join(format!("events_{}.csv", n - 1)),
        )
        .unwrap();
        drop(s);
        s = session(db.path());
        let out = s.execute("REFRESH STREAMING TABLE company_points").unwrap();
        assert!(
            matches!(&out[0], SqlOutput::Done(l) if l.contains("loaded 1 new files")),
            "{out:?}"
        );
        let (_, exp) =
            read_csv(&data_dir().join(format!("seed_bitemporal/expected_after_{n}.csv")));
        assert_eq!(
            query(&mut s, "SELECT * FROM company_points").1,
            sorted(exp),
            "after file {n}"
        );
    }
    let out = s.execute("REFRESH STREAMING TABLE company_points").unwrap();
    assert!(
        matches!(&out[0], SqlOutput::Done(l) if l.contains("loaded 0 new files") && l.contains("nothing new")),
        "{out:?}"
    );
    // A file with a column the inferred schema lacks is refused by name; the table is unchanged.
    std::fs::write(
        landing.path().join("events_9.csv"),
        "CompanyId,DataPoint,business_time,system_time,operation,extra\nB,x,2025-07-19T00:00:00,2025-07-19T00:00:00,INSERT,1\n",
    )
    .unwrap();
    let e = s
        .execute("REFRESH STREAMING TABLE company_points")
        .unwrap_err()
        .to_string();
    assert!(e.contains("`extra`") && e.contains("events_9.csv"), "{e}");
    let (_, exp) = read_csv(&data_dir().join("seed_bitemporal/expected_after_4.csv"));
    assert_eq!(query(&mut s, "SELECT * FROM company_points").1, sorted(exp));
}

#[test]
fn read_files_in_queries_csv_json_and_parquet() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(&dir.path().join("db"));
    let csv = data_dir().join("seed_bitemporal/events.csv");
    let (names, rows) = query(
        &mut s,
        &format!(
            "SELECT * FROM read_files('{}', format => 'csv', header => true) WHERE operation <> 'DELETE'",
            csv.display()
        ),
    );
    assert_eq!(names[0], "CompanyId");
    assert_eq!(rows.len(), 3);
    // Without a header the columns are _c0, _c1, ... (the header line is then a row).
    let (names, rows) = query(
        &mut s,
        &format!("SELECT * FROM read_files('{}')", csv.display()),
    );
    assert_eq!(names[..2], ["_c0", "_c1"]);
    assert_eq!(rows.len(), 5);

    // JSON Lines, format from the extension; CTAS keeps it as a source table.
    let json = dir.path().join("e.json");
    std::fs::write(
        &json,
        "{\"id\": 1, \"v\": \"a\", \"ts\": 1}\n{\"id\": 1, \"v\": \"b\", \"ts\": 2}\n{\"id\": 2, \"v\": null, \"ts\": 1}\n",
    )
    .unwrap();
    s.execute(&format!(
        "CREATE TABLE j AS SELECT * FROM read_files('{}')",
        json.display()
    ))
    .unwrap();
    assert_eq!(
        query(&mut s, "SELECT count(*), max(v) FROM j").1,
        [[Some("3".into()), Some("b".into())]]
    );

    // Parquet: written by arrow, read back through read_files, and used by a flow.
    let pq = dir.path().join("p.parquet");
    let (_, batches) = match s.execute("SELECT * FROM j").unwrap().pop().unwrap() {
        SqlOutput::Batches(schema, b) => (schema, b),
        o => panic!("{o:?}"),
    };
    let mut w = parquet::arrow::ArrowWriter::try_new(
        std::fs::File::create(&pq).unwrap(),
        batches[0].schema(),
        None,
    )
    .unwrap();
    for b in &batches {
        w.write(b).unwrap();
    }
    w.close().unwrap();
    s.execute(&format!(
        "CREATE OR REFRESH STREAMING TABLE jt FLOW AUTO CDC FROM read_files('{}', format => 'parquet') KEYS (id) SEQUENCE BY ts STORED AS SCD TYPE 1",
        pq.display()
    ))
    .unwrap();
    assert_eq!(
        query(&mut s, "SELECT id, v FROM jt").1,
        [
            vec![Some("1".into()), Some("b".into())],
            vec![Some("2".into()), None]
        ]
    );
    // Errors name the problem.
    let e = s
        .execute("SELECT * FROM read_files('/no/such/place', format => 'csv')")
        .unwrap_err()
        .to_string();
    assert!(e.contains("/no/such/place"), "{e}");
    let e = s
        .execute(&format!(
            "SELECT * FROM read_files('{}', colour => 'red')",
            csv.display()
        ))
        .unwrap_err()
        .to_string();
    assert!(e.contains("colour"), "{e}");
}

#[test]
fn values_columns_are_named_col1_col2_as_in_databricks() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(dir.path());
    let (names, rows) = query(&mut s, "SELECT * FROM VALUES (1, 'a'), (2, 'b')");
    assert_eq!(names, ["col1", "col2"]);
    assert_eq!(rows.len(), 2);
    s.execute("CREATE TABLE v AS SELECT * FROM (VALUES (1, 'x', 10))")
        .unwrap();
    let (names, _) = query(&mut s, "SELECT col1, col2, col3 FROM v");
    assert_eq!(names, ["col1", "col2", "col3"]);
    // An explicit alias list still wins.
    let (names, _) = query(&mut s, "SELECT * FROM (VALUES (1, 2)) AS t(a, b)");
    assert_eq!(names, ["a", "b"]);
}

#[test]
fn once_flows_declared_columns_and_two_flows_into_one_target() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(dir.path());
    s.execute(
        "CREATE TABLE backfill (id BIGINT, v STRING, ts BIGINT);
         CREATE TABLE live (id BIGINT, v STRING, ts BIGINT);
         INSERT INTO backfill VALUES (1, 'old', 1), (2, 'old', 1);
         INSERT INTO live VALUES (1, 'new', 5);
         CREATE OR REFRESH STREAMING TABLE t (id BIGINT, v STRING);
         CREATE FLOW hist AS AUTO CDC ONCE INTO t FROM backfill KEYS (id) SEQUENCE BY ts COLUMNS * EXCEPT (ts) STORED AS SCD TYPE 2;
         CREATE FLOW cur AS AUTO CDC INTO t FROM stream(live) KEYS (id) SEQUENCE BY ts COLUMNS * EXCEPT (ts) STORED AS SCD TYPE 2",
    )
    .unwrap();
    let current = |s: &mut SqlSession| query(s, "SELECT id, v FROM t WHERE __END_AT IS NULL").1;
    assert_eq!(
        current(&mut s),
        [
            vec![Some("1".into()), Some("new".into())],
            vec![Some("2".into()), Some("old".into())]
        ]
    );
    // ONCE: new backfill rows are not read by a refresh, only by a full one.
    s.execute("INSERT INTO backfill VALUES (3, 'old', 1); INSERT INTO live VALUES (2, 'new', 5); REFRESH STREAMING TABLE t").unwrap();
    assert_eq!(
        query(&mut s, "SELECT count(*) FROM t WHERE id = 3").1,
        [[Some("0".into())]]
    );
    assert_eq!(
        query(&mut s, "SELECT v FROM t WHERE id = 2 AND __END_AT IS NULL").1,
        [[Some("new".into())]]
    );
    s.execute("REFRESH STREAMING TABLE t FULL").unwrap();
    assert_eq!(
        query(&mut s, "SELECT v FROM t WHERE id = 3").1,
        [[Some("old".into())]]
    );
    // Declared columns are checked against what the flow produces.
    let e = s
        .execute(
            "CREATE OR REFRESH STREAMING TABLE u (id BIGINT, colour STRING);
             CREATE FLOW fu AS AUTO CDC INTO u FROM live KEYS (id) SEQUENCE BY ts",
        )
        .unwrap_err()
        .to_string();
    assert!(e.contains("`colour`") && e.contains("`u`"), "{e}");
    // A second flow must use the target's keys.
    let e = s
        .execute("CREATE FLOW other AS AUTO CDC INTO t FROM live KEYS (v) SEQUENCE BY ts COLUMNS * EXCEPT (ts) STORED AS SCD TYPE 2")
        .unwrap_err()
        .to_string();
    assert!(e.to_lowercase().contains("key"), "{e}");
}

#[test]
fn temporal_table_functions_match_the_clauses() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(dir.path());
    s.execute(&format!(
        "CREATE OR REFRESH STREAMING TABLE company_points FLOW AUTO CDC FROM read_files('{}', format => 'csv', header => true) {FLOW_BODY}",
        data_dir().join("seed_bitemporal/events.csv").display()
    ))
    .unwrap();
    let pairs = [
        (
            "SELECT * FROM company_points FOR SYSTEM_TIME AS OF '2025-07-18T12:22:00' FOR BUSINESS_TIME AS OF '2025-07-18T12:10:00'",
            "SELECT * FROM table_as_of('company_points', '2025-07-18T12:10:00', '2025-07-18T12:22:00')",
        ),
        (
            "SELECT * FROM company_points FOR SYSTEM_TIME AS OF '2025-07-18T12:22:00'",
            "SELECT * FROM table_as_of('company_points', NULL, '2025-07-18T12:22:00')",
        ),
        (
            "SELECT * FROM company_points FOR SYSTEM_TIME BETWEEN '2025-07-18T12:00:00' AND '2025-07-18T12:20:00' FOR BUSINESS_TIME FROM '2025-07-18T12:00:00' TO '2025-07-18T12:10:00'",
            "SELECT * FROM temporal_scan('company_points', 'FROM 2025-07-18T12:00:00 TO 2025-07-18T12:10:00', 'BETWEEN 2025-07-18T12:00:00 AND 2025-07-18T12:20:00')",
        ),
        (
            "SELECT * FROM company_points",
            "SELECT * FROM temporal_scan('company_points', 'ALL', 'ALL')",
        ),
    ];
    for (clause, function) in pairs {
        let a = query(&mut s, clause);
        assert!(!a.1.is_empty(), "{clause}");
        assert_eq!(a, query(&mut s, function), "{function}");
    }
    let e = s
        .execute("SELECT * FROM temporal_scan('company_points', 'SOMETIME', 'ALL')")
        .unwrap_err()
        .to_string();
    assert!(e.contains("SOMETIME"), "{e}");
}

#[test]
fn a_flow_over_a_glob_that_skips_existing_files_reads_only_later_ones() {
    let db = tempfile::tempdir().unwrap();
    let landing = tempfile::tempdir().unwrap();
    let staged = tempfile::tempdir().unwrap();
    let files = event_files(staged.path());
    // Files in day folders; a file outside the pattern is never read.
    let day = |d: &str| {
        let p = landing.path().join(d);
        std::fs::create_dir_all(&p).unwrap();
        p
    };
    std::fs::copy(&files[0], day("2025-07-18").join("e0.csv")).unwrap();
    std::fs::copy(&files[1], day("2025-07-18").join("e1.txt")).unwrap();
    let mut s = session(db.path());
    s.execute(&format!(
        "CREATE OR REFRESH STREAMING TABLE company_points FLOW AUTO CDC
         FROM stream(read_files('{}/2025-*/*.csv', format => 'csv', header => true,
           includeExistingFiles => false)) {FLOW_BODY}",
        landing.path().display()
    ))
    .unwrap();
    assert!(query(&mut s, "SELECT * FROM company_points").1.is_empty());
    std::fs::copy(&files[0], day("2025-07-19").join("e0.csv")).unwrap();
    std::fs::copy(&files[1], day("other").join("e1.csv")).unwrap();
    let out = s.execute("REFRESH STREAMING TABLE company_points").unwrap();
    assert!(
        matches!(&out[0], SqlOutput::Done(l) if l.contains("loaded 1 new files")),
        "{out:?}"
    );
    let (_, exp) = read_csv(&data_dir().join("seed_bitemporal/expected_after_1.csv"));
    assert_eq!(query(&mut s, "SELECT * FROM company_points").1, sorted(exp));
}

/// `multiLine => true` reads JSON written over several lines (Python's `json` module, indented):
/// a file holding an array of objects and a file holding objects one after another, as a query
/// and as the source of an AUTO CDC flow. Without it, such a file is refused, not misread.
#[test]
fn multi_line_json_from_python_feeds_a_flow() {
    let db = tempfile::tempdir().unwrap();
    let folder = data_dir().join("multiline_json");
    let mut s = session(db.path());
    let (_, rows) = query(
        &mut s,
        &format!(
            "SELECT id, name, city, amount, seq FROM read_files('{}', format => 'json', multiLine => true)",
            folder.display()
        ),
    );
    let row = |v: [&str; 5]| v.iter().map(|c| Some(c.to_string())).collect::<Vec<_>>();
    assert_eq!(
        rows,
        [
            row(["1", "Ana", "Lisbon", "12.5", "1"]),
            row(["1", "Ana", "Porto", "13.0", "2"]),
            row(["2", "Bo", "Oslo", "7.0", "1"]),
            row(["3", "Cy", "Rome", "1.25", "1"]),
        ]
    );
    s.execute(&format!(
        "CREATE OR REFRESH STREAMING TABLE customers FLOW AUTO CDC
         FROM stream(read_files('{}', format => 'json', multiLine => true))
         KEYS (id) SEQUENCE BY seq COLUMNS * EXCEPT (seq) STORED AS SCD TYPE 1",
        folder.display()
    ))
    .unwrap();
    let (_, rows) = query(&mut s, "SELECT id, city FROM customers");
    assert_eq!(
        rows,
        [["1", "Porto"], ["2", "Oslo"], ["3", "Rome"]]
            .map(|r| r.map(|c| Some(c.to_string())).to_vec())
    );
    let e = s
        .execute(&format!(
            "SELECT * FROM read_files('{}', format => 'json')",
            folder.join("orders_1.json").display()
        ))
        .unwrap_err()
        .to_string();
    assert!(e.contains("orders_1.json"), "{e}");
}

/// `schemaHints` gives columns their types; a value that does not fit its column is an error
/// that names the file, the column and how many values, and nothing of the refresh is applied
/// to the table; with `rescuedDataColumn` the value goes to `_rescued_data` as JSON with the
/// file's path (the column reads NULL), and so do the values of a column a later file adds.
#[test]
fn schema_hints_and_the_rescued_data_column() {
    let db = tempfile::tempdir().unwrap();
    let landing = tempfile::tempdir().unwrap();
    let file = |name: &str, text: &str| std::fs::write(landing.path().join(name), text).unwrap();
    file("a.csv", "id,amount,seq\n1,10,1\n2,20,1\n");
    let mut s = session(db.path());
    let flow = |s: &mut SqlSession, name: &str, options: &str| {
        s.execute(&format!(
            "CREATE OR REFRESH STREAMING TABLE {name} FLOW AUTO CDC
             FROM stream(read_files('{}', format => 'csv', header => true, schemaHints => 'id STRING, amount DECIMAL(10, 2)'{options}))
             KEYS (id) SEQUENCE BY seq COLUMNS * EXCEPT (seq) STORED AS SCD TYPE 1",
            landing.path().display()
        ))
    };
    flow(&mut s, "strict", "").unwrap();
    flow(&mut s, "kept", ", rescuedDataColumn => '_rescued_data'").unwrap();
    let (names, rows) = query(
        &mut s,
        "SELECT arrow_typeof(id), arrow_typeof(amount), amount FROM strict",
    );
    assert_eq!(names.len(), 3);
    assert_eq!(
        rows[0],
        ["Utf8", "Decimal128(10, 2)", "10.00"].map(|c| Some(c.to_string()))
    );
    file("b.csv", "id,amount,seq,note\n3,n/a,1,late\n4,40,1,\n");
    let e = s
        .execute("REFRESH STREAMING TABLE strict")
        .unwrap_err()
        .to_string();
    assert!(e.contains("b.csv") && e.contains("note"), "{e}");
    let (_, rows) = query(&mut s, "SELECT id FROM strict");
    assert_eq!(rows.len(), 2, "nothing of b.csv");
    s.execute("REFRESH STREAMING TABLE kept").unwrap();
    let (_, rows) = query(&mut s, "SELECT id, amount, _rescued_data FROM kept");
    let b = landing.path().join("b.csv").display().to_string();
    assert_eq!(
        rows,
        [
            [Some("1".into()), Some("10.00".into()), None],
            [Some("2".into()), Some("20.00".into()), None],
            [
                Some("3".into()),
                None,
                Some(format!(
                    r#"{{"_file_path":"{b}","amount":"n/a","note":"late"}}"#
                ))
            ],
            [Some("4".into()), Some("40.00".into()), None],
        ]
    );
    // A value that does not fit, without a new column: the error counts them.
    file("c.csv", "id,amount,seq\n5,x,1\n6,y,1\n");
    let e = s
        .execute(&format!(
            "SELECT * FROM read_files('{}', format => 'csv', header => true, schemaHints => 'amount INT')",
            landing.path().join("c.csv").display()
        ))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("c.csv") && e.contains("column `amount`: 2 value(s) do not fit Int32"),
        "{e}"
    );
    let e = s
        .execute(&format!(
            "SELECT * FROM read_files('{}', schemaHints => 'amount MAP<STRING, INT>')",
            landing.path().display()
        ))
        .unwrap_err()
        .to_string();
    assert!(e.contains("schemaHints") && e.contains("amount"), "{e}");
}

/// A file still being written when a refresh lists the folder is not loaded half-way: it is
/// left for a later refresh, which loads it whole.
#[test]
fn a_file_still_being_written_is_left_for_the_next_refresh() {
    use std::io::Write;
    let db = tempfile::tempdir().unwrap();
    let landing = tempfile::tempdir().unwrap();
    std::fs::write(landing.path().join("a.csv"), "id,seq\n0,1\n").unwrap();
    let mut s = session(db.path());
    s.execute(&create_scd1_over(landing.path())).unwrap();
    let mut f = std::fs::File::create(landing.path().join("b.csv")).unwrap();
    f.write_all(b"id,seq\n").unwrap();
    f.flush().unwrap();
    let writer = std::thread::spawn(move || {
        // Written for about a second, a row every 2 ms: well over the 100 ms between listings.
        for i in 1..=400 {
            f.write_all(format!("{i},1\n").as_bytes()).unwrap();
            f.flush().unwrap();
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    });
    std::thread::sleep(std::time::Duration::from_millis(20));
    s.execute("REFRESH STREAMING TABLE t").unwrap();
    let (_, rows) = query(&mut s, "SELECT count(*) FROM t");
    assert_eq!(rows, [[Some("1".to_string())]], "b.csv was being written");
    writer.join().unwrap();
    s.execute("REFRESH STREAMING TABLE t").unwrap();
    let (_, rows) = query(&mut s, "SELECT count(*) FROM t");
    assert_eq!(rows, [[Some("401".to_string())]], "b.csv whole");
}

/// Values are never changed in silence on their way in: text stays as written (`02134` under a
/// `STRING` hint, or `00123` in a column the first files made text), and a value that its
/// column's type would change (a fraction in an integer column) is an error that counts them,
/// or with a rescued data column is kept there.
#[test]
fn values_keep_their_text_or_are_refused_never_changed() {
    let db = tempfile::tempdir().unwrap();
    let landing = tempfile::tempdir().unwrap();
    let file = |name: &str, text: &str| std::fs::write(landing.path().join(name), text).unwrap();
    file("a.csv", "id,zip,code,n,price\n1,02134,a1,5,1.25\n");
    let mut s = session(db.path());
    for (table, options) in [
        ("strict", ""),
        ("kept", ", rescuedDataColumn => '_rescued_data'"),
    ] {
        s.execute(&format!(
            "CREATE OR REFRESH STREAMING TABLE {table} AS SELECT * FROM STREAM read_files('{}',
               format => 'csv', header => true, schemaHints => 'zip STRING, price DECIMAL(10, 2)'{options})",
            landing.path().display()
        ))
        .unwrap();
    }
    let (_, rows) = query(
        &mut s,
        "SELECT zip, code, CAST(price AS STRING) FROM strict",
    );
    assert_eq!(
        rows,
        [[Some("02134".into()), Some("a1".into()), Some("1.25".into())]]
    );
    // A later file whose values its columns' types would change.
    file("b.csv", "id,zip,code,n,price\n2,00501,00123,12.75,3.50\n");
    let e = s
        .execute("REFRESH STREAMING TABLE strict")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("b.csv") && e.contains("column `n`: 1 value(s) do not fit Int64"),
        "{e}"
    );
    s.execute("REFRESH STREAMING TABLE kept").unwrap();
    let (_, rows) = query(
        &mut s,
        "SELECT zip, code, n, CAST(price AS STRING), _rescued_data FROM kept WHERE id = 2",
    );
    let row = &rows[0];
    assert_eq!(
        row[..4],
        [
            Some("00501".into()),
            Some("00123".into()),
            None,
            Some("3.50".into())
        ]
    );
    let rescued = row[4].clone().unwrap_or_default();
    assert!(rescued.contains(r#""n":"12.75""#), "{row:?}");
}

/// A JSON number under a `STRING` hint is read as its text, as Spark reads it.
#[test]
fn a_json_number_under_a_string_hint_is_its_text() {
    let db = tempfile::tempdir().unwrap();
    let landing = tempfile::tempdir().unwrap();
    std::fs::write(
        landing.path().join("a.json"),
        "{\"id\": 1, \"zip\": 2134, \"ok\": true}\n",
    )
    .unwrap();
    let mut s = session(db.path());
    let (_, rows) = query(
        &mut s,
        &format!(
            "SELECT zip, ok, arrow_typeof(zip) FROM read_files('{}', schemaHints => 'zip STRING, ok STRING')",
            landing.path().display()
        ),
    );
    assert_eq!(
        rows,
        [[
            Some("2134".into()),
            Some("true".into()),
            Some("Utf8".into())
        ]]
    );
}

/// `read_files` in a query reads the files as the query scans them, one at a time: a query that
/// scans them twice reads them twice, and a file that does not fit its column fails the query,
/// named, however late in the list it comes.
#[test]
fn a_query_over_files_reads_them_as_it_scans_them_each_time() {
    let dir = tempfile::tempdir().unwrap();
    let files = dir.path().join("files");
    std::fs::create_dir(&files).unwrap();
    for (i, v) in ["10", "20", "30"].into_iter().enumerate() {
        std::fs::write(
            files.join(format!("part_{i}.csv")),
            format!("id,v\n{i},{v}\n"),
        )
        .unwrap();
    }
    let mut s = session(&dir.path().join("db"));
    let from = format!(
        "read_files('{}', format => 'csv', header => true, schemaHints => 'v BIGINT')",
        files.display()
    );
    let (_, rows) = query(
        &mut s,
        &format!("WITH f AS (SELECT * FROM {from}) SELECT (SELECT count(*) FROM f) + (SELECT sum(v) FROM f) AS n"),
    );
    assert_eq!(rows, [[Some("63".to_string())]]);
    // The last file's value is not a number, where the others' are.
    std::fs::write(files.join("part_2.csv"), "id,v\n2,not_a_number\n").unwrap();
    let e = s
        .execute(&format!("SELECT sum(v) FROM {from}"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("part_2.csv") && e.contains("`v`"), "{e}");
}

/// What a [`asof::Progress`] was told, in order.
#[derive(Default)]
struct Told(std::sync::Mutex<Vec<String>>);

impl asof::Progress for Told {
    fn begin(&self, task: &str, total: u64) {
        self.0.lock().unwrap().push(format!("begin {task} {total}"));
    }
    fn advance(&self, done: u64) {
        self.0.lock().unwrap().push(format!("advance {done}"));
    }
    fn end(&self) {
        self.0.lock().unwrap().push("end".into());
    }
}

/// A query over 16 MiB of files or more reports its reading, a file at a time, in bytes.
#[test]
fn a_query_over_many_megabytes_of_files_reports_its_progress_file_by_file() {
    let dir = tempfile::tempdir().unwrap();
    let files = dir.path().join("files");
    std::fs::create_dir(&files).unwrap();
    let row = "x".repeat(100);
    let mut sizes = Vec::new();
    for f in 0..2 {
        let text: String = std::iter::once("id,v\n".to_string())
            .chain((0..90_000).map(|i| format!("{i},{row}\n")))
            .collect();
        std::fs::write(files.join(format!("part_{f}.csv")), &text).unwrap();
        sizes.push(text.len() as u64);
    }
    let total: u64 = sizes.iter().sum();
    assert!(total >= 16 << 20, "{total}");
    let told = std::sync::Arc::new(Told::default());
    let mut s = session(&dir.path().join("db"));
    s.set_progress(told.clone());
    let (_, rows) = query(
        &mut s,
        &format!(
            "SELECT count(*) FROM read_files('{}', format => 'csv', header => true)",
            files.display()
        ),
    );
    assert_eq!(rows, [[Some("180000".to_string())]]);
    assert_eq!(
        *told.0.lock().unwrap(),
        [
            format!("begin reading 2 file(s) {total}"),
            format!("advance {}", sizes[0]),
            format!("advance {total}"),
            "end".to_string(),
        ]
    );
}

/// A folder's first file loaded, then files 1 to 3 new, file `bad` of them unreadable: the
/// refresh fails naming it, the files before it stay loaded (each is its own commit) and those
/// after it are not; once it is mended, the next refresh loads it and the files after it, and the
/// table is the reference's.
fn a_bad_file_stops_the_load_at_it(bad: usize) {
    let db = tempfile::tempdir().unwrap();
    let landing = tempfile::tempdir().unwrap();
    let staged = tempfile::tempdir().unwrap();
    let files = event_files(staged.path());
    let mut s = session(db.path());
    let named = |i: usize| landing.path().join(format!("events_{i}.csv"));
    std::fs::copy(&files[0], named(0)).unwrap();
    s.execute(&create_over(landing.path())).unwrap();
    let text = std::fs::read_to_string(&files[bad]).unwrap();
    let header = text.lines().next().unwrap();
    for (i, f) in files.iter().enumerate().take(4).skip(1) {
        if i == bad {
            let row = "B,x,not a time,2025-07-19T00:00:00,INSERT";
            std::fs::write(named(i), format!("{header}\n{row}\n")).unwrap();
        } else {
            std::fs::copy(f, named(i)).unwrap();
        }
    }
    let e = s
        .execute("REFRESH STREAMING TABLE company_points")
        .unwrap_err()
        .to_string();
    assert!(e.contains(&format!("events_{bad}.csv")), "{e}");
    std::fs::copy(&files[bad], named(bad)).unwrap();
    let out = s.execute("REFRESH STREAMING TABLE company_points").unwrap();
    let loaded = format!("loaded {} new files", 4 - bad);
    assert!(
        matches!(&out[0], SqlOutput::Done(l) if l.contains(&loaded)),
        "{out:?}"
    );
    let (_, exp) = read_csv(&data_dir().join("seed_bitemporal/expected_after_4.csv"));
    assert_eq!(query(&mut s, "SELECT * FROM company_points").1, sorted(exp));
}

/// Files are read two ahead of their loading (by two threads, each taking every other file):
/// here the bad file is the second new one, the second reader's.
#[test]
fn a_file_that_cannot_be_read_stops_the_load_there_and_the_next_refresh_takes_up_from_it() {
    a_bad_file_stops_the_load_at_it(2);
}

/// The bad file is the first new one (the first reader's), and the second reader has read the
/// next one.
#[test]
fn a_first_new_file_that_cannot_be_read_loads_none_of_the_files_after_it() {
    a_bad_file_stops_the_load_at_it(1);
}

/// Files read ahead are committed several in one flush, each still a commit of the flow's source
/// named by its file: a bad file past the first such group stops the load after every file
/// before it, and the next refresh takes up from it.
#[test]
fn files_committed_several_to_a_flush_are_each_a_commit_and_a_bad_one_stops_the_load_at_it() {
    let db = tempfile::tempdir().unwrap();
    let landing = tempfile::tempdir().unwrap();
    let mut s = session(db.path());
    let named = |i: usize| landing.path().join(format!("f_{i:02}.csv"));
    let write = |i: usize, seq: &str| {
        std::fs::write(named(i), format!("id,seq,v\n{i},{seq},{}\n", i * 10)).unwrap();
    };
    write(0, "1");
    s.execute(&create_scd1_over(landing.path())).unwrap();
    let (bad, files) = (13, 20);
    for i in 1..files {
        write(i, if i == bad { "not a number" } else { "1" });
    }
    let e = s
        .execute("REFRESH STREAMING TABLE t")
        .unwrap_err()
        .to_string();
    assert!(e.contains(&format!("f_{bad}.csv")), "{e}");
    let count = |s: &mut SqlSession| query(s, "SELECT count(*) FROM t").1[0][0].clone();
    // The files before the bad one were loaded; the flow did not run.
    let source = (s.store().sources().unwrap().into_iter())
        .find(|n| n.starts_with("__asof_files_"))
        .unwrap();
    let loaded = |s: &SqlSession| -> Vec<String> {
        (s.store().source_history(&source).unwrap().into_iter())
            .filter_map(|c| c.parameters.get("file").cloned())
            .map(|f| f.rsplit('/').next().unwrap().to_string())
            .collect()
    };
    let expected = |n: usize| (0..n).map(|i| format!("f_{i:02}.csv")).collect::<Vec<_>>();
    assert_eq!(loaded(&s), expected(bad));
    assert_eq!(count(&mut s), Some("1".to_string()));
    write(bad, "1");
    let out = s.execute("REFRESH STREAMING TABLE t").unwrap();
    assert!(
        matches!(&out[0], SqlOutput::Done(l) if l.contains(&format!("loaded {} new files", files - bad))),
        "{out:?}"
    );
    assert_eq!(loaded(&s), expected(files));
    assert_eq!(count(&mut s), Some(files.to_string()));
    // And so after a reopen.
    drop(s);
    let mut s = session(db.path());
    assert_eq!(loaded(&s), expected(files));
    assert_eq!(count(&mut s), Some(files.to_string()));
}
