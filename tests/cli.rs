//! End-to-end: the built `asof` binary on the shipped example.

use crate::common;

use std::process::Command;

fn asof(db: &std::path::Path, args: &[&str]) -> (bool, String, String) {
    common::run_asof(db, args)
}

#[test]
fn the_example_runs_and_is_idempotent() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let (ok, out, err) = asof(&db, &["example", "examples/company_points"]);
    assert!(ok, "{err}");
    assert!(out.contains("| A         | XFv3      | 2025-07-18T12:05:00 | 2025-07-18T12:15:43 | 2025-07-18T12:25:00 |"), "{out}");
    // Running it again replays the same events: nothing changes, all are counted as duplicates.
    let (ok, out, _) = asof(&db, &["example", "examples/company_points"]);
    assert!(ok);
    assert!(
        out.contains("0 rows upserted, 0 deleted, 0 late, 4 duplicates ignored"),
        "{out}"
    );

    let (ok, out, _) = asof(
        &db,
        &[
            "scan",
            "company_points",
            "--business-as-of",
            "2025-07-18T12:10:00",
            "--system-as-of",
            "2025-07-18T12:22:00",
            "--format",
            "csv",
        ],
    );
    assert!(ok);
    assert_eq!(
        out,
        "CompanyId,DataPoint,__START_AT,__END_AT,__SYSTEM_START_AT,__SYSTEM_END_AT\nA,XFv1,2025-07-18T10:01:00,2025-07-18T12:15:43,2025-07-18T12:20:00,2025-07-18T12:25:00\n"
    );
}

#[test]
fn errors_are_clear_and_exit_non_zero() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let (ok, _, err) = asof(&db, &["scan", "nope"]);
    assert!(!ok);
    assert_eq!(err.trim(), "error: no table named `nope`");
    let (ok, _, err) = asof(&db, &["example", "examples/company_points"]);
    assert!(ok, "{err}");
    let (ok, _, err) = asof(
        &db,
        &["scan", "company_points", "--business-as-of", "yesterday"],
    );
    assert!(!ok);
    assert!(
        err.contains("business time") && !err.contains("panicked"),
        "{err}"
    );
}

#[test]
fn sql_runs_statements_and_files_and_prints_csv() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let (ok, out, err) = asof(&db, &["sql", "-f", "examples/quickstart.sql"]);
    assert!(ok, "{err}");
    assert!(out.contains("| 1  | Paris |"), "{out}");
    // The late correction: what last month's report said, and what we know now.
    let (ok, out, err) = asof(
        &db,
        &[
            "sql",
            "--format",
            "csv",
            "SELECT city FROM customers_bitemporal FOR BUSINESS_TIME AS OF '2025-02-15T00:00:00' FOR SYSTEM_TIME AS OF '2025-04-01T00:00:00' WHERE id = 1; \
             SELECT city, __START_AT FROM customers_bitemporal FOR BUSINESS_TIME AS OF '2025-02-15T00:00:00' FOR SYSTEM_TIME AS OF '2025-06-01T00:00:00' WHERE id = 1",
        ],
    );
    assert!(ok, "{err}");
    assert_eq!(
        out,
        "city\nLyon\ncity,__START_AT\nNice,2025-02-01T00:00:00\n"
    );
    // The script can run again on the same database.
    let (ok, _, err) = asof(&db, &["sql", "-f", "examples/quickstart.sql"]);
    assert!(ok, "{err}");
    // Errors: a message on stderr, a non-zero exit, no panic.
    let (ok, _, err) = asof(
        &db,
        &[
            "sql",
            "CREATE FLOW f AS AUTO CDC INTO t FROM customer_changes KEYS id SEQUENCE BY valid_at",
        ],
    );
    assert!(!ok);
    assert!(
        err.starts_with("error: invalid query: syntax error at line 1, column "),
        "{err}"
    );
    assert!(!err.contains("panicked"));
}

#[test]
fn json_and_arrow_outputs_and_the_shell_on_a_pipe() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let (ok, _, err) = asof(
        &db,
        &[
            "sql",
            "CREATE TABLE t AS SELECT * FROM (VALUES (1, 'a'), (2, NULL)) AS v(id, name)",
        ],
    );
    assert!(ok, "{err}");
    let (ok, out, err) = asof(
        &db,
        &["sql", "--format", "json", "SELECT * FROM t ORDER BY id"],
    );
    assert!(ok, "{err}");
    assert_eq!(out, "{\"id\":1,\"name\":\"a\"}\n{\"id\":2}\n");
    let file = dir.path().join("out.arrow");
    let (ok, _, err) = asof(
        &db,
        &[
            "sql",
            "--format",
            "arrow",
            "--output",
            file.to_str().unwrap(),
            "SELECT * FROM t",
        ],
    );
    assert!(ok, "{err}");
    let reader =
        arrow::ipc::reader::FileReader::try_new(std::fs::File::open(&file).unwrap(), None).unwrap();
    assert_eq!(reader.map(|b| b.unwrap().num_rows()).sum::<usize>(), 2);
    let (ok, _, err) = asof(&db, &["sql", "--format", "arrow", "SELECT 1"]);
    assert!(!ok && err.contains("--output"), "{err}");

    // `asof shell` reads a script from a pipe.
    let mut child = Command::new(env!("CARGO_BIN_EXE_asof"))
        .arg("--db")
        .arg(&db)
        .arg("shell")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"SELECT count(*) AS n FROM t;\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("| 2 |"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn sql_reads_files_and_writes_parquet_quietly_when_not_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let out_file = dir.path().join("points.parquet");
    let script = "CREATE OR REFRESH STREAMING TABLE company_points FLOW AUTO CDC
        FROM stream(read_files('tests/data/seed_bitemporal/events.csv', format => 'csv', header => true))
        KEYS (CompanyId) APPLY AS DELETE WHEN operation = 'DELETE' SEQUENCE BY business_time
        SYSTEM SEQUENCE BY system_time COLUMNS * EXCEPT (business_time, system_time, operation)
        STORED AS BITEMPORAL;
        REFRESH STREAMING TABLE company_points FULL;
        SELECT * FROM company_points ORDER BY __SYSTEM_START_AT, __START_AT";
    let (ok, out, err) = asof(
        &db,
        &[
            "sql",
            script,
            "--format",
            "parquet",
            "--output",
            out_file.to_str().unwrap(),
        ],
    );
    assert!(ok, "{err}");
    assert!(out.is_empty(), "{out}");
    // Statement lines go to stderr; no progress bar is drawn on a pipe.
    assert!(err.contains("company_points"), "{err}");
    assert!(!err.contains('%') && !err.contains('\r'), "{err}");
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
        std::fs::File::open(&out_file).unwrap(),
    )
    .unwrap()
    .build()
    .unwrap();
    let rows: usize = reader.map(|b| b.unwrap().num_rows()).sum();
    assert_eq!(rows, 6, "expected_after_4 has six rows");
    // Without --output the binary formats are refused with a clear message.
    let (ok, _, err) = asof(&db, &["sql", "SELECT 1", "--format", "parquet"]);
    assert!(!ok && err.contains("--output"), "{err}");
}

/// The statements of the Databricks SQL surface added last, through the `asof sql` binary:
/// schemas and qualified names, nested and generated columns, DML on a source table, and a
/// period predicate the scan takes.
#[test]
fn the_databricks_surface_runs_through_asof_sql() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let script = "
        CREATE SCHEMA sales;
        USE sales;
        CREATE TABLE ev (id BIGINT, seq BIGINT, addr STRUCT<city: STRING>, tags ARRAY<STRING>);
        INSERT INTO ev SELECT 1 AS id, 1 AS seq, named_struct('city', 'Oslo') AS addr,
            array('a', 'b') AS tags;
        INSERT INTO ev SELECT 1 AS id, 2 AS seq, named_struct('city', 'Bergen') AS addr,
            array('c') AS tags;
        CREATE OR REFRESH STREAMING TABLE people (id BIGINT, addr STRUCT<city: STRING>,
            tags ARRAY<STRING>, city STRING GENERATED ALWAYS AS (upper(addr.city)))
        FLOW AUTO CDC FROM stream(ev) KEYS (id) SEQUENCE BY seq COLUMNS * EXCEPT (seq)
        STORED AS SCD TYPE 2;
        DELETE FROM ev WHERE seq = 1;";
    let (ok, out, err) = asof(&db, &["sql", script]);
    assert!(ok, "{out}\n{err}");
    let (ok, out, err) = asof(
        &db,
        &[
            "sql",
            "SELECT id, city, tags[1] AS tag FROM main.sales.people \
             WHERE PERIOD(__START_AT, __END_AT) CONTAINS 1",
        ],
    );
    assert!(ok, "{err}");
    assert!(out.contains("OSLO") && out.contains("| a "), "{out}");
    assert!(!out.contains("BERGEN"), "{out}");
    let (ok, out, err) = asof(&db, &["sql", "DESCRIBE HISTORY sales.ev"]);
    assert!(ok && out.contains("DELETE"), "{out}\n{err}");
    // The flow had read the deleted row: its refresh stops, naming it.
    let (ok, _, err) = asof(&db, &["sql", "REFRESH STREAMING TABLE sales.people"]);
    assert!(!ok && err.contains("skipChangeCommits"), "{err}");
    let (ok, out, _) = asof(&db, &["sql", "SHOW SCHEMAS"]);
    assert!(
        ok && out.contains("sales") && out.contains("default"),
        "{out}"
    );
}

#[test]
fn a_large_result_streams_to_its_file_and_an_empty_one_keeps_its_schema() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    // 30,000 rows: several batches, written as the query computes them.
    let (ok, _, err) = asof(
        &db,
        &[
            "sql",
            "CREATE TABLE t AS SELECT CAST(value AS BIGINT) AS id, concat('row ', CAST(value AS STRING)) AS name \
             FROM generate_series(1, 30000)",
        ],
    );
    assert!(ok, "{err}");
    let read = |path: &std::path::Path| {
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
            std::fs::File::open(path).unwrap(),
        )
        .unwrap()
        .build()
        .unwrap();
        let schema = arrow::array::RecordBatchReader::schema(&reader);
        let batches: Vec<_> = reader.map(|b| b.unwrap()).collect();
        (schema, batches)
    };
    // `query` written to file `name` as Parquet, read back.
    let to_parquet = |name: &str, query: &str| {
        let path = dir.path().join(name);
        let file = path.to_str().unwrap();
        let (ok, _, err) = asof(
            &db,
            &["sql", "--format", "parquet", "--output", file, query],
        );
        assert!(ok, "{err}");
        read(&path)
    };
    let (_, batches) = to_parquet("big.parquet", "SELECT id, name FROM t WHERE id % 2 = 0");
    let ids: Vec<i64> = batches
        .iter()
        .flat_map(|b| {
            let c = b
                .column(0)
                .as_any()
                .downcast_ref::<arrow::array::Int64Array>();
            c.unwrap().values().to_vec()
        })
        .collect();
    assert_eq!(ids.len(), 15_000);
    assert_eq!(
        ids.iter().sum::<i64>(),
        (1..=15_000).map(|i| 2 * i).sum::<i64>()
    );
    // No row: the file still says what the columns are.
    let (schema, batches) = to_parquet("empty.parquet", "SELECT id, name FROM t WHERE id < 0");
    assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), 0);
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    assert_eq!(names, ["id", "name"]);
    // CSV: one header, every row.
    let (ok, out, err) = asof(
        &db,
        &[
            "sql",
            "--format",
            "csv",
            "SELECT id FROM t WHERE id > 29990 ORDER BY id",
        ],
    );
    assert!(ok, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "id");
    assert_eq!(
        lines[1..],
        (29991..=30000).map(|i| i.to_string()).collect::<Vec<_>>()
    );
    // A query that fails while its rows are read stops the script there: what follows does not
    // run.
    let (ok, _, err) = asof(
        &db,
        &[
            "sql",
            "SELECT CAST(name AS INT) FROM t; CREATE TABLE after_failure (x INT)",
        ],
    );
    assert!(!ok, "{err}");
    assert!(err.contains("statement 1"), "{err}");
    let (ok, out, err) = asof(&db, &["tables"]);
    assert!(ok, "{err}");
    assert!(!out.contains("after_failure"), "{out}");
}

#[test]
fn the_page_cache_is_set_in_mib_and_a_size_out_of_range_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let (ok, _, err) = asof(
        &db,
        &["--cache-mib", "1", "example", "examples/company_points"],
    );
    assert!(ok, "{err}");
    let (ok, out, err) = asof(
        &db,
        &[
            "--cache-mib",
            "1",
            "sql",
            "--format",
            "csv",
            "SELECT count(*) AS n FROM company_points",
        ],
    );
    assert!(ok, "{err}");
    assert_eq!(out, "n\n6\n");
    for bad in ["0", "1048577", "many"] {
        let (ok, _, err) = asof(&db, &["--cache-mib", bad, "tables"]);
        assert!(!ok, "{bad}");
        assert!(
            err.contains(&format!("invalid value '{bad}' for '--cache-mib <MIB>'")),
            "{bad}: {err}"
        );
    }
}
