//! Delta export (docs/EXPORT.md): `asof export` / `EXPORT ... TO DELTA` write a table as of a
//! version as a Delta table, and later exports carry only the commits since. Read back by
//! `deltalake` (delta-rs, from Python: tests/python/delta_read.py), a reader asof did not write,
//! and, in the property test, by a plain reading of the Delta log's add and remove actions.

use crate::common;

use std::collections::BTreeSet;
use std::fs::File;
use std::path::Path;
use std::process::Command;

use arrow::array::RecordBatch;
use arrow::compute::cast;
use arrow::datatypes::SchemaRef;
use arrow::util::display::array_value_to_string;
use asof::{export_delta, DeltaExport, ExportKind, ScanRequest, SqlSession, Store};
use proptest::prelude::*;

type Rows = Vec<Vec<Option<String>>>;

fn session(dir: &Path) -> SqlSession {
    SqlSession::new(Store::open(dir).unwrap()).unwrap()
}

const ACCOUNTS: &str =
    "CREATE TABLE moves (acct INT, balance BIGINT, note STRING, seq INT, sys TIMESTAMP, op STRING);
    CREATE OR REFRESH STREAMING TABLE accounts FLOW AUTO CDC FROM stream(moves) KEYS (acct)
      APPLY AS DELETE WHEN op = 'D' SEQUENCE BY seq SYSTEM SEQUENCE BY sys
      COLUMNS * EXCEPT (seq, sys, op) STORED AS BITEMPORAL";

/// A store at `dir` with the table `accounts`, refreshed after `rows` were appended to `moves`.
fn accounts(dir: &Path, rows: &str) -> SqlSession {
    let mut s = session(dir);
    s.execute(ACCOUNTS).unwrap();
    s.execute(&format!(
        "INSERT INTO moves VALUES {rows}; REFRESH STREAMING TABLE accounts"
    ))
    .unwrap();
    s
}

/// The rows of `batches` as text, each column cast to the type of `like`'s (so that a reader's
/// `large_string` and asof's `string` print alike), sorted.
fn rows_like(batches: &[RecordBatch], like: &SchemaRef) -> Rows {
    let mut rows = Vec::new();
    for b in batches {
        let columns: Vec<_> = like
            .fields()
            .iter()
            .map(|f| cast(b.column_by_name(f.name()).unwrap(), f.data_type()).unwrap())
            .collect();
        for i in 0..b.num_rows() {
            rows.push(
                columns
                    .iter()
                    .map(|c| (!c.is_null(i)).then(|| array_value_to_string(c, i).unwrap()))
                    .collect(),
            );
        }
    }
    rows.sort();
    rows
}

/// The table as asof reads it at `version`: its schema and rows.
fn table_at(store: &Store, table: &str, version: u64) -> (SchemaRef, Rows) {
    let req = ScanRequest {
        version: Some(version),
        ..Default::default()
    };
    let scan = asof::scan(store, table, &req).unwrap();
    let schema = scan.schema();
    let batches: Vec<_> = scan.collect::<Result<_, _>>().unwrap();
    let rows = rows_like(&batches, &schema);
    (schema, rows)
}

/// What `deltalake` reads from the Delta tables `dirs` (`dir` or `dir@version`), as one union,
/// and the asof version each one's commits recorded for `table`.
fn deltalake_reads(table: &str, dirs: &[String], like: &SchemaRef) -> (Rows, Vec<Option<u64>>) {
    let out = tempfile::NamedTempFile::new().unwrap();
    let run = Command::new(common::python())
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/python/delta_read.py"
        ))
        .arg(out.path())
        .arg(format!("asof {table}"))
        .args(dirs)
        .output()
        .expect("run delta_read.py");
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let info: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    let held = info
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["txn"].as_u64())
        .collect();
    let reader =
        arrow::ipc::reader::FileReader::try_new(File::open(out.path()).unwrap(), None).unwrap();
    let batches: Vec<_> = reader.collect::<Result<_, _>>().unwrap();
    (rows_like(&batches, like), held)
}

/// The rows of the Delta table at `dir` (its latest version), read from its log's add and remove
/// actions and the Parquet files they name.
fn delta_log_reads(dir: &Path, like: &SchemaRef) -> Rows {
    let mut logs: Vec<_> = std::fs::read_dir(dir.join("_delta_log"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    logs.sort();
    let mut files = BTreeSet::new();
    for log in logs {
        for line in std::fs::read_to_string(log).unwrap().lines() {
            let action: serde_json::Value = serde_json::from_str(line).unwrap();
            if let Some(path) = action["add"]["path"].as_str() {
                files.insert(path.to_string());
            }
            if let Some(path) = action["remove"]["path"].as_str() {
                assert!(files.remove(path), "{path} removed but not there");
            }
        }
    }
    let mut batches = Vec::new();
    for f in files {
        let file = File::open(dir.join(f)).unwrap();
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
            .unwrap()
            .build()
            .unwrap();
        batches.extend(reader.map(Result::unwrap));
    }
    rows_like(&batches, like)
}

/// Checks that the Delta table at `dir` holds `table` as of `version`, row for row.
fn assert_delta_holds(store: &Store, table: &str, dir: &Path, version: u64) {
    let (schema, rows) = table_at(store, table, version);
    assert_eq!(
        delta_log_reads(dir, &schema),
        rows,
        "{table} at version {version}"
    );
}

fn export(store: &Store, table: &str, dir: &Path, version: Option<u64>) -> asof::ExportReport {
    let req = DeltaExport {
        table: table.to_string(),
        dir: dir.to_path_buf(),
        version,
    };
    export_delta(store, &req).unwrap()
}

#[test]
fn exports_after_late_corrections_deletes_and_dml_read_back_in_deltalake_as_the_table() {
    let db = tempfile::tempdir().unwrap();
    let delta = db.path().join("accounts_delta");
    let mut s = session(&db.path().join("store"));
    s.execute(ACCOUNTS).unwrap();
    let steps = [
        // Three accounts.
        "INSERT INTO moves VALUES (1, 100, 'open', 1, TIMESTAMP '2025-01-01', 'U'),
           (2, 50, 'open', 1, TIMESTAMP '2025-01-01', 'U'), (3, 7, 'open', 1, TIMESTAMP '2025-01-01', 'U')",
        // A later balance, a delete, and an event that arrives late on business time.
        "INSERT INTO moves VALUES (1, 80, 'pay', 5, TIMESTAMP '2025-02-01', 'U'),
           (2, NULL, NULL, 3, TIMESTAMP '2025-02-01', 'D'), (1, 90, 'late', 3, TIMESTAMP '2025-02-02', 'U')",
        // A duplicate (nothing changes) and a correction known later on system time.
        "INSERT INTO moves VALUES (1, 90, 'late', 3, TIMESTAMP '2025-02-02', 'U'),
           (3, 8, 'fix', 1, TIMESTAMP '2025-03-01', 'U'), (4, 1, 'new', 2, TIMESTAMP '2025-03-01', 'U')",
    ];
    let mut exported = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        s.execute(step).unwrap();
        s.execute("REFRESH STREAMING TABLE accounts").unwrap();
        let r = export(s.store(), "accounts", &delta, None);
        let expected = if i == 0 {
            ExportKind::Created
        } else {
            ExportKind::Incremental {
                since: exported[i - 1],
            }
        };
        assert_eq!(r.kind, expected, "{r}");
        assert_eq!(r.delta_version, i as u64);
        exported.push(r.asof_version);
    }
    // A DML statement on the table is carried over too.
    s.execute("UPDATE accounts SET note = 'audited' WHERE acct = 3")
        .unwrap();
    let out = s
        .execute(&format!(
            "EXPORT TABLE accounts TO DELTA '{}'",
            delta.display()
        ))
        .unwrap();
    let Some(asof::SqlOutput::Done(line)) = out.last() else {
        panic!("EXPORT answers a line")
    };
    let latest = s.store().latest_version("accounts").unwrap();
    assert_eq!(
        line,
        &format!(
            "accounts: version {latest} exported as Delta version 3: the commits since version {}; {}",
            exported[2],
            line.split("; ").nth(1).unwrap()
        )
    );
    exported.push(latest);
    // Nothing new: nothing written.
    assert_eq!(
        export(s.store(), "accounts", &delta, None).kind,
        ExportKind::UpToDate
    );

    // deltalake reads each Delta version as the table at the asof version it recorded.
    let (schema, now) = table_at(s.store(), "accounts", latest);
    assert_eq!(now.len(), 11, "{now:?}");
    let dirs: Vec<_> = (0..exported.len())
        .map(|d| format!("{}@{d}", delta.display()))
        .collect();
    for (d, dir) in dirs.iter().enumerate() {
        let (rows, held) = deltalake_reads("accounts", std::slice::from_ref(dir), &schema);
        assert_eq!(held, vec![Some(exported[d])]);
        assert_eq!(
            rows,
            table_at(s.store(), "accounts", exported[d]).1,
            "Delta version {d}"
        );
    }
    assert_eq!(delta_log_reads(&delta, &schema), now);

    // An earlier version rewrites the files; the latest again carries the commits since it.
    let r = export(s.store(), "accounts", &delta, Some(exported[0]));
    assert!(matches!(r.kind, ExportKind::Rewritten { .. }), "{r}");
    assert_eq!(
        delta_log_reads(&delta, &schema),
        table_at(s.store(), "accounts", exported[0]).1
    );
    let r = export(s.store(), "accounts", &delta, None);
    assert_eq!(r.kind, ExportKind::Incremental { since: exported[0] });
    let (rows, held) = deltalake_reads("accounts", &[delta.display().to_string()], &schema);
    assert_eq!((rows, held), (now, vec![Some(latest)]));
}

#[test]
fn nested_columns_export_and_carry_over_as_struct_array_and_map() {
    let db = tempfile::tempdir().unwrap();
    let delta = db.path().join("d");
    let mut s = session(&db.path().join("store"));
    s.execute(
        "CREATE TABLE ev (id BIGINT, seq BIGINT, addr STRUCT<city: STRING, zip: INT>,
            attrs MAP<STRING, BIGINT>, lines ARRAY<STRUCT<sku: STRING, qty: BIGINT>>);
         INSERT INTO ev SELECT 1 AS id, 1 AS seq, named_struct('city', 'Oslo', 'zip', 150) AS addr,
            map(['a', 'b'], [10, CAST(NULL AS BIGINT)]) AS attrs,
            array(named_struct('sku', 'x', 'qty', 2), NULL) AS lines;
         CREATE OR REFRESH STREAMING TABLE t FLOW AUTO CDC FROM stream(ev) KEYS (id)
            SEQUENCE BY seq STORED AS SCD TYPE 2",
    )
    .unwrap();
    assert_eq!(
        export(s.store(), "t", &delta, None).kind,
        ExportKind::Created
    );
    s.execute(
        "INSERT INTO ev SELECT 1 AS id, 2 AS seq, named_struct('city', 'Bergen', 'zip', NULL) AS addr,
            map(['c'], [3]) AS attrs, CAST(NULL AS ARRAY<STRUCT<sku: STRING, qty: BIGINT>>) AS lines;
         REFRESH STREAMING TABLE t",
    )
    .unwrap();
    let r = export(s.store(), "t", &delta, None);
    assert!(matches!(r.kind, ExportKind::Incremental { .. }), "{r}");
    let (schema, rows) = table_at(s.store(), "t", r.asof_version);
    assert_eq!(rows.len(), 2);
    let (read, held) = deltalake_reads("t", &[delta.display().to_string()], &schema);
    assert_eq!((read, held), (rows, vec![Some(r.asof_version)]));
}

#[test]
fn a_vacuum_since_the_last_export_rewrites_the_files() {
    let db = tempfile::tempdir().unwrap();
    let delta = db.path().join("d");
    let mut s = accounts(
        &db.path().join("store"),
        "(1, 1, 'a', 1, TIMESTAMP '2025-01-01', 'U')",
    );
    export(s.store(), "accounts", &delta, None);
    s.execute(
        "INSERT INTO moves VALUES (1, 2, 'b', 2, TIMESTAMP '2025-01-02', 'U');
         REFRESH STREAMING TABLE accounts;
         ALTER STREAMING TABLE accounts SET TBLPROPERTIES ('asof.vacuum.retentionCheck' = 'false');
         VACUUM accounts RETAIN 0 HOURS",
    )
    .unwrap();
    let r = export(s.store(), "accounts", &delta, None);
    let ExportKind::Rewritten { reason } = &r.kind else {
        panic!("{r}")
    };
    assert!(
        reason.contains("VACUUM") || reason.contains("vacuumed"),
        "{reason}"
    );
    let latest = s.store().latest_version("accounts").unwrap();
    assert_delta_holds(s.store(), "accounts", &delta, latest);
}

#[test]
fn a_folder_holding_another_tables_export_is_refused_and_kept() {
    let db = tempfile::tempdir().unwrap();
    let delta = db.path().join("d");
    let mut s = session(&db.path().join("store"));
    s.execute(ACCOUNTS).unwrap();
    s.execute(
        "CREATE OR REFRESH STREAMING TABLE others FLOW AUTO CDC FROM stream(moves) KEYS (acct)
           SEQUENCE BY seq COLUMNS * EXCEPT (seq, sys, op) STORED AS SCD TYPE 1;
         INSERT INTO moves VALUES (1, 1, 'a', 1, TIMESTAMP '2025-01-01', 'U');
         REFRESH STREAMING TABLE accounts; REFRESH STREAMING TABLE others",
    )
    .unwrap();
    export(s.store(), "accounts", &delta, None);
    let before = std::fs::read_dir(delta.join("_delta_log")).unwrap().count();
    let e = s
        .execute(&format!(
            "EXPORT TABLE others TO DELTA '{}'",
            delta.display()
        ))
        .unwrap_err()
        .to_string();
    assert!(e.contains("other than an export of `others`"), "{e}");
    assert_eq!(
        std::fs::read_dir(delta.join("_delta_log")).unwrap().count(),
        before
    );
    let e = s
        .execute("EXPORT TABLE accounts TO DELTA")
        .unwrap_err()
        .to_string();
    assert!(e.contains("folder"), "{e}");
}

/// AUTO CDC rules are per key: a feed split by a hash of its key into four stores gives four
/// tables whose union, read from their Delta exports, is the table of one store fed everything
/// (docs/SCALING.md).
#[test]
fn four_stores_fed_by_key_hash_export_tables_whose_union_is_the_whole_table() {
    let db = tempfile::tempdir().unwrap();
    let mut whole = session(&db.path().join("whole"));
    whole.execute(ACCOUNTS).unwrap();
    let mut parts: Vec<_> = (0..4)
        .map(|p| {
            let mut s = session(&db.path().join(format!("part{p}")));
            s.execute(ACCOUNTS).unwrap();
            s
        })
        .collect();
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut next = |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n
    };
    for _round in 0..4 {
        let mut by_part: Vec<Vec<String>> = vec![Vec::new(); 4];
        let mut all = Vec::new();
        for _ in 0..150 {
            let key = next(60);
            let row = format!(
                "({key}, {}, 'n{}', {}, TIMESTAMP '2025-01-01' + INTERVAL '{}' MINUTE, '{}')",
                next(1000),
                next(5),
                next(20),
                next(500),
                if next(10) == 0 { "D" } else { "U" }
            );
            // The router: a hash of the key, modulo the number of stores.
            let part = (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 62) as usize;
            by_part[part].push(row.clone());
            all.push(row);
        }
        let insert = |rows: &[String]| {
            format!(
                "INSERT INTO moves VALUES {}; REFRESH STREAMING TABLE accounts",
                rows.join(", ")
            )
        };
        whole.execute(&insert(&all)).unwrap();
        for (s, rows) in parts.iter_mut().zip(&by_part) {
            if !rows.is_empty() {
                s.execute(&insert(rows)).unwrap();
            }
        }
        for (p, s) in parts.iter().enumerate() {
            export(
                s.store(),
                "accounts",
                &db.path().join(format!("delta{p}")),
                None,
            );
        }
    }
    let latest = whole.store().latest_version("accounts").unwrap();
    let (schema, rows) = table_at(whole.store(), "accounts", latest);
    assert!(rows.len() > 100, "{}", rows.len());
    let dirs: Vec<_> = (0..4)
        .map(|p| db.path().join(format!("delta{p}")).display().to_string())
        .collect();
    let (union, _) = deltalake_reads("accounts", &dirs, &schema);
    assert_eq!(union, rows);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Whatever the commits and wherever exports fall (an earlier version too), the Delta table
    /// holds the table at the version it records.
    #[test]
    fn exports_anywhere_hold_the_table_at_their_version(
        steps in prop::collection::vec(
            (prop::collection::vec((0u8..6, 0u16..100, 0u8..8, 0u8..30, prop::bool::weighted(0.15)), 1..12),
             prop::option::of(0u8..4)),
            1..7)
    ) {
        let db = tempfile::tempdir().unwrap();
        let delta = db.path().join("d");
        let mut s = session(&db.path().join("store"));
        s.execute(ACCOUNTS).unwrap();
        for (events, export_at) in steps {
            let rows: Vec<_> = events
                .iter()
                .map(|(k, v, seq, sys, del)| format!(
                    "({k}, {v}, NULL, {seq}, TIMESTAMP '2025-01-01' + INTERVAL '{sys}' HOUR, '{}')",
                    if *del { "D" } else { "U" }
                ))
                .collect();
            s.execute(&format!(
                "INSERT INTO moves VALUES {}; REFRESH STREAMING TABLE accounts",
                rows.join(", ")
            ))
            .unwrap();
            if let Some(back) = export_at {
                let latest = s.store().latest_version("accounts").unwrap();
                let version = latest.saturating_sub(u64::from(back)).max(1);
                let r = export(s.store(), "accounts", &delta, Some(version));
                let (schema, expected) = table_at(s.store(), "accounts", version);
                prop_assert_eq!(delta_log_reads(&delta, &schema), expected, "{}", r);
            }
        }
    }
}

#[test]
fn an_erasure_after_the_exported_version_rewrites_it_without_the_key() {
    let db = tempfile::tempdir().unwrap();
    let delta = db.path().join("d");
    let mut s = accounts(
        &db.path().join("store"),
        "(1, 1, 'a', 1, TIMESTAMP '2025-01-01', 'U'),
           (2, 2, 'b', 1, TIMESTAMP '2025-01-01', 'U')",
    );
    let held = export(s.store(), "accounts", &delta, None).asof_version;
    s.execute("ERASE FROM accounts WHERE acct = 2 REASON 'request 7'")
        .unwrap();
    // The same version, exported again: the erased key has left it.
    let r = export(s.store(), "accounts", &delta, Some(held));
    assert!(matches!(r.kind, ExportKind::Rewritten { .. }), "{r}");
    let (schema, rows) = table_at(s.store(), "accounts", held);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(delta_log_reads(&delta, &schema), rows);
}

#[test]
fn a_first_export_interrupted_after_its_data_files_can_run_again() {
    let db = tempfile::tempdir().unwrap();
    let delta = db.path().join("d");
    std::fs::create_dir_all(&delta).unwrap();
    // What an export killed before its first commit leaves: data files, no log.
    std::fs::write(
        delta.join("0b7e5a43-left-over.parquet"),
        b"PAR1 half written",
    )
    .unwrap();
    let s = accounts(
        &db.path().join("store"),
        "(1, 1, 'a', 1, TIMESTAMP '2025-01-01', 'U')",
    );
    let r = export(s.store(), "accounts", &delta, None);
    assert_eq!(r.kind, ExportKind::Created);
    assert_delta_holds(s.store(), "accounts", &delta, r.asof_version);
}

#[test]
fn a_table_of_key_columns_only_in_another_order_carries_over() {
    let db = tempfile::tempdir().unwrap();
    let delta = db.path().join("d");
    let mut s = session(&db.path().join("store"));
    s.execute(
        "CREATE TABLE ev (a INT, b STRING, seq INT, op STRING);
         CREATE OR REFRESH STREAMING TABLE pairs FLOW AUTO CDC FROM stream(ev) KEYS (b, a)
           APPLY AS DELETE WHEN op = 'D' SEQUENCE BY seq COLUMNS * EXCEPT (seq, op) STORED AS SCD TYPE 1;
         INSERT INTO ev VALUES (1, 'x', 1, 'U'), (2, 'y', 1, 'U'), (3, 'x', 1, 'U');
         REFRESH STREAMING TABLE pairs",
    )
    .unwrap();
    export(s.store(), "pairs", &delta, None);
    s.execute(
        "INSERT INTO ev VALUES (1, 'x', 2, 'D'), (4, 'z', 2, 'U'); REFRESH STREAMING TABLE pairs",
    )
    .unwrap();
    let r = export(s.store(), "pairs", &delta, None);
    assert!(matches!(r.kind, ExportKind::Incremental { .. }), "{r}");
    let (schema, rows) = table_at(s.store(), "pairs", r.asof_version);
    assert_eq!(rows.len(), 3);
    assert_eq!(delta_log_reads(&delta, &schema), rows);
}

#[test]
fn an_export_of_a_table_read_span_by_span_reports_the_keys_it_has_written() {
    let db = tempfile::tempdir().unwrap();
    let (store_dir, delta) = (db.path().join("store"), db.path().join("d"));
    let mut s = session(&store_dir);
    s.execute(ACCOUNTS).unwrap();
    s.execute(
        "INSERT INTO moves SELECT CAST(value AS INT) AS acct, CAST(value AS BIGINT) AS b, 'n', 1, \
           TIMESTAMP '2025-01-01', 'U' FROM generate_series(1, 600);
         REFRESH STREAMING TABLE accounts",
    )
    .unwrap();
    drop(s);
    // A new process: the table is not in memory, so the export reads it 256 keys at a time.
    let store = Store::open(&store_dir).unwrap();
    let recorded = std::sync::Arc::new(common::Recorded::default());
    store.set_progress(recorded.clone());
    let r = export(&store, "accounts", &delta, None);
    assert_eq!(r.kind, ExportKind::Created);
    assert_eq!(r.rows_written, 600);
    // Span by span, each at most 256 keys (how many depends on the scan's threads), to the end.
    let calls = recorded.calls();
    let reported = calls.len();
    assert_eq!(calls[0], "begin exporting accounts to Delta of 600");
    assert_eq!(calls[calls.len() - 2..], ["at 600", "end"]);
    let done: Vec<u64> = calls[1..calls.len() - 1]
        .iter()
        .map(|c| c.strip_prefix("at ").unwrap().parse().unwrap())
        .collect();
    assert!(done.len() >= 3, "{calls:?}");
    let mut last = 0;
    for d in done {
        assert!(d > last && d - last <= 256, "{calls:?}");
        last = d;
    }
    assert_delta_holds(&store, "accounts", &delta, 1);
    // The refresh below reads only the keys it changes: the table stays out of memory, and the
    // carry-over reads its one commit's changes span by span: one pass over the 600 keys (its
    // few changes other than deletes held until its last delete), each span of 64 keys counted
    // for the two passes a feed may need.
    let mut s = SqlSession::new(store).unwrap();
    s.execute(
        "INSERT INTO moves VALUES (7, 70, 'm', 2, TIMESTAMP '2025-01-02', 'U');
         REFRESH STREAMING TABLE accounts",
    )
    .unwrap();
    let r = export(s.store(), "accounts", &delta, None);
    assert_eq!(r.kind, ExportKind::Incremental { since: 1 });
    let calls = recorded.calls()[reported..].to_vec();
    assert_eq!(
        calls[0],
        "begin reading the change feed of accounts of 1200"
    );
    assert_eq!(calls[calls.len() - 2..], ["at 1200", "end"]);
    let mut last = 0;
    for c in &calls[1..calls.len() - 1] {
        let d: u64 = c.strip_prefix("at ").unwrap().parse().unwrap();
        assert!(d > last && d - last <= 128, "{calls:?}");
        last = d;
    }
    assert_delta_holds(s.store(), "accounts", &delta, 2);
}
