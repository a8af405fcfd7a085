//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod keyed;
pub mod model;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::util::display::array_value_to_string;
use asof::{ScanRequest, Store};

pub fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

/// A small CSV reader for the test data (no quoting): header and rows; an empty field is `None`.
pub fn read_csv(path: &Path) -> (Vec<String>, Vec<Vec<Option<String>>>) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header = lines
        .next()
        .expect("header")
        .split(',')
        .map(str::to_string)
        .collect();
    let rows = lines
        .map(|l| {
            l.split(',')
                .map(|f| (!f.is_empty()).then(|| f.to_string()))
                .collect()
        })
        .collect();
    (header, rows)
}

/// A batch of string columns (the engine casts them to the flow's types).
pub fn string_batch(header: &[String], rows: &[Vec<Option<String>>]) -> RecordBatch {
    let schema = Arc::new(Schema::new(
        header
            .iter()
            .map(|h| Field::new(h, DataType::Utf8, true))
            .collect::<Vec<_>>(),
    ));
    let cols: Vec<ArrayRef> = (0..header.len())
        .map(|c| Arc::new(rows.iter().map(|r| r[c].clone()).collect::<StringArray>()) as ArrayRef)
        .collect();
    RecordBatch::try_new(schema, cols).expect("batch")
}

/// The whole current table as sorted rows of strings (`None` = NULL), with its column names.
pub fn table_strings(store: &Store, table: &str) -> (Vec<String>, Vec<Vec<Option<String>>>) {
    table_strings_with(store, table, &ScanRequest::default())
}

pub fn table_strings_with(
    store: &Store,
    table: &str,
    req: &ScanRequest,
) -> (Vec<String>, Vec<Vec<Option<String>>>) {
    let scan = asof::scan(store, table, req).expect("scan");
    let names = scan
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    let mut rows = Vec::new();
    for b in scan {
        let b = b.expect("batch");
        for r in 0..b.num_rows() {
            rows.push(
                b.columns()
                    .iter()
                    .map(|c| (!c.is_null(r)).then(|| array_value_to_string(c, r).expect("display")))
                    .collect(),
            );
        }
    }
    rows.sort();
    (names, rows)
}

pub fn sorted(mut rows: Vec<Vec<Option<String>>>) -> Vec<Vec<Option<String>>> {
    rows.sort();
    rows
}

/// The rows of the last query of `sql`, sorted (see [`sql_rows`]).
pub fn sorted_sql_rows(s: &mut asof::SqlSession, sql: &str) -> Vec<Vec<Option<String>>> {
    sorted(sql_rows(s, sql).1)
}

/// A row of non-NULL cells, as [`sql_rows`] gives it.
pub fn cells(v: &[&str]) -> Vec<Option<String>> {
    v.iter().map(|c| Some(c.to_string())).collect()
}

/// The current table read through the storage scan, as model rows.
pub fn engine_rows(store: &Store, table: &str) -> Vec<model::MRow> {
    engine_rows_at(store, table, None)
}

/// A stored row as a model row, its temporal bounds decoded.
fn model_row(
    row: &asof_storage::RowView<'_>,
    seq: &[asof::ColumnType],
    sys: &[asof::ColumnType],
) -> model::MRow {
    use asof::keycodec::decode_tuple;
    model::MRow {
        values: row.values.to_vec().expect("stored cells read back"),
        start: row.start.map(|b| decode_tuple(b, seq).unwrap()),
        end: row.end.map(|b| decode_tuple(b, seq).unwrap()),
        sys_start: row
            .sys_start
            .map(|b| decode_tuple(b, sys).unwrap().remove(0)),
        sys_end: row.sys_end.map(|b| decode_tuple(b, sys).unwrap().remove(0)),
    }
}

/// The table as of commit `version` (None = latest), as model rows.
pub fn engine_rows_at(store: &Store, table: &str, version: Option<u64>) -> Vec<model::MRow> {
    let mut rows = Vec::new();
    store
        .read(table, |r| {
            let schema = r.schema().clone();
            let seq = schema.sequence_types();
            let sys: Vec<asof::ColumnType> = schema.system_sequence.iter().cloned().collect();
            let spec = asof_storage::ScanSpec {
                version,
                ..Default::default()
            };
            let mut cursor = asof_storage::ScanCursor::default();
            while !cursor.is_done() {
                r.scan(&spec, &mut cursor, 1000, |row| {
                    rows.push(model_row(&row, &seq, &sys))
                })
                .unwrap();
            }
        })
        .unwrap();
    rows.sort_by_key(model::MRow::sort_key);
    rows
}

/// A scan of `table` pinned to its latest version, selecting every row.
pub fn pinned_to_latest(store: &Store, table: &str) -> asof_storage::ScanSpec {
    asof_storage::ScanSpec {
        version: Some(store.read(table, |t| t.latest_version()).unwrap()),
        ..Default::default()
    }
}

/// Up to `n` rows of `table` that `spec` selects, read by `cursor` from where it stopped (each
/// as its `Debug` form): a scan read a call at a time.
pub fn scan_step(
    store: &Store,
    table: &str,
    spec: &asof_storage::ScanSpec,
    cursor: &mut asof_storage::ScanCursor,
    n: usize,
) -> Vec<String> {
    let mut out = Vec::new();
    store
        .read(table, |t| {
            t.scan(spec, cursor, n, |r| out.push(format!("{r:?}")))
                .unwrap()
        })
        .unwrap();
    out
}

/// The flow of the reference case (`seed_bitemporal/flow.sql`) as a builder, over the typed
/// source schema; callers name it and finish it.
pub fn seed_flow_builder(name: &str, target: &str) -> asof::FlowBuilder {
    use arrow::datatypes::TimeUnit;
    use asof::{ColumnSelection, Condition, FlowSpec, StoredAs};
    let ts = DataType::Timestamp(TimeUnit::Microsecond, None);
    let schema = Schema::new(vec![
        Field::new("CompanyId", DataType::Utf8, false),
        Field::new("DataPoint", DataType::Utf8, true),
        Field::new("business_time", ts.clone(), false),
        Field::new("system_time", ts, false),
        Field::new("operation", DataType::Utf8, false),
    ]);
    FlowSpec::builder(name, target, &schema)
        .keys(["CompanyId"])
        .delete_when(Condition::equals("operation", "DELETE"))
        .sequence_by(["business_time"])
        .system_sequence_by("system_time")
        .columns(ColumnSelection::all_except([
            "business_time",
            "system_time",
            "operation",
        ]))
        .stored_as(StoredAs::Bitemporal)
}

/// The change feed of commits `from..=to`, as (version, change type, model row).
pub fn engine_changes(
    store: &Store,
    table: &str,
    from: u64,
    to: u64,
) -> Result<Vec<(u64, asof::ChangeType, model::MRow)>, asof::Error> {
    store.read(table, |r| {
        let schema = r.schema().clone();
        let seq = schema.sequence_types();
        let sys: Vec<asof::ColumnType> = schema.system_sequence.iter().cloned().collect();
        let mut out = Vec::new();
        r.changes(from, to, |v, kind, row| {
            out.push((v, kind, model_row(&row, &seq, &sys)))
        })?;
        Ok(out)
    })?
}

/// Runs `sql` in the session and returns the column names and rows (as displayed strings, NULL =
/// None, in the order the query gave them) of its last statement, which must be a query.
pub fn sql_rows(s: &mut asof::SqlSession, sql: &str) -> (Vec<String>, Vec<Vec<Option<String>>>) {
    let out = s.execute(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    let Some(asof::SqlOutput::Batches(schema, batches)) = out.into_iter().last() else {
        panic!("{sql}: no query")
    };
    let names = schema.fields().iter().map(|f| f.name().clone()).collect();
    let mut rows = Vec::new();
    for b in batches {
        for r in 0..b.num_rows() {
            rows.push(
                b.columns()
                    .iter()
                    .map(|c| (!c.is_null(r)).then(|| array_value_to_string(c, r).unwrap()))
                    .collect(),
            );
        }
    }
    (names, rows)
}

/// Runs the built `asof` binary on database `db` with `args`, from the repository's root:
/// (success, stdout, stderr).
pub fn run_asof(db: &Path, args: &[&str]) -> (bool, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_asof"))
        .arg("--db")
        .arg(db)
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run asof");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

/// A copy of a committed store folder, to open (opening may write: sled's recovery, the
/// manifest). Files only: git keeps no empty folders (sled's `blobs/`), and sled recreates them.
pub fn copy_of_fixture(dir: &Path) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    copy_folder(dir, tmp.path());
    tmp
}

/// Copies the files and folders under `from` into `to`.
fn copy_folder(from: &Path, to: &Path) {
    for e in std::fs::read_dir(from)
        .expect("the fixture is committed")
        .flatten()
    {
        let target = to.join(e.file_name());
        if e.path().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy_folder(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

/// Writes a committed store fixture afresh in `dir`: the statements of `script`, run on a new
/// store.
pub fn write_fixture(dir: &Path, script: &str) {
    let _ = std::fs::remove_dir_all(dir);
    let mut s = asof::SqlSession::new(Store::open(dir).unwrap()).unwrap();
    s.execute(script).unwrap();
}

/// Every file under `dir` whose bytes contain `needle`.
pub fn files_holding(dir: &Path, needle: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if std::fs::read(&p)
                .unwrap()
                .windows(needle.len())
                .any(|w| w == needle)
            {
                out.push(p.display().to_string());
            }
        }
    }
    out
}

/// The Python of `target/python-venv`, with the clients of tests/python/requirements.txt
/// installed (by tests/python/setup.sh, from PyPI on first use).
pub fn python() -> String {
    let setup = std::process::Command::new("sh")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/python/setup.sh"
        ))
        .output()
        .expect("run tests/python/setup.sh");
    assert!(
        setup.status.success(),
        "{}",
        String::from_utf8_lossy(&setup.stderr)
    );
    String::from_utf8(setup.stdout).unwrap().trim().to_string()
}

/// Writes `body` to `path` (making its folder), dated 5 s ago so that `read_files` takes it as
/// written whole (files still being written wait).
#[allow(dead_code)]
pub fn write_settled(path: &std::path::Path, body: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, body).unwrap();
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(5);
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(old)
        .unwrap();
}

/// What a store or session reported as progress ([`asof::Progress`]), in order: `begin TASK of
/// TOTAL`, `at DONE`, `end`.
#[derive(Default)]
pub struct Recorded(pub std::sync::Mutex<Vec<String>>);

impl Recorded {
    /// The calls so far.
    pub fn calls(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

impl asof::Progress for Recorded {
    fn begin(&self, task: &str, total: u64) {
        self.0
            .lock()
            .unwrap()
            .push(format!("begin {task} of {total}"));
    }
    fn advance(&self, done: u64) {
        self.0.lock().unwrap().push(format!("at {done}"));
    }
    fn end(&self) {
        self.0.lock().unwrap().push("end".into());
    }
}

/// A source `src (id, v, seq)` and an SCD TYPE 2 table `t` over it, then `commits` refreshes, each
/// of one append with keys 1 and 2: key 1 is in every commit's one event block and every append's
/// one chunk (what an erasure of it rewrites).
pub fn key_in_every_commit(s: &mut asof::SqlSession, commits: usize) {
    s.execute(
        "CREATE TABLE src (id INT, v STRING, seq INT);
         CREATE OR REFRESH STREAMING TABLE t FLOW AUTO CDC FROM stream(src) KEYS (id)
           SEQUENCE BY seq STORED AS SCD TYPE 2",
    )
    .unwrap();
    for i in 0..commits {
        s.execute(&format!(
            "INSERT INTO src VALUES (1, 'a{i}', {i}), (2, 'b{i}', {i}); REFRESH STREAMING TABLE t"
        ))
        .unwrap();
    }
}
