//! A short fuzzing run in the test suite: the same entry points as the cargo-fuzz targets in
//! `fuzz/` (`asof_query::fuzzing`, `asof_storage::fuzzing`), fed with the regression inputs kept in
//! `tests/data/fuzz/<target>/` and then with mutations of valid inputs. Any panic fails the test
//! and writes the input next to the regression inputs, to be kept once fixed.
//!
//! `ASOF_FUZZ_RUNS` sets the mutations per target (default 1500). Long, coverage-guided runs use
//! cargo-fuzz: see `fuzz/README.md`.

use crate::common;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

use asof::FileFormat;
use asof_query::fuzzing as q;
use asof_storage::fuzzing as st;
use rand::{Rng, SeedableRng};

fn corpus_dir(target: &str) -> PathBuf {
    common::data_dir().join("fuzz").join(target)
}

fn regressions(target: &str) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    if let Ok(d) = std::fs::read_dir(corpus_dir(target)) {
        for e in d.flatten() {
            out.push(std::fs::read(e.path()).unwrap());
        }
    }
    out
}

fn mutate(rng: &mut rand::rngs::StdRng, seeds: &[Vec<u8>]) -> Vec<u8> {
    let mut d = seeds[rng.gen_range(0..seeds.len())].clone();
    for _ in 0..rng.gen_range(1..5) {
        let n = d.len();
        match rng.gen_range(0..7) {
            0 if n > 0 => {
                let i = rng.gen_range(0..n);
                d[i] ^= 1 << rng.gen_range(0..8);
            }
            1 if n > 0 => {
                let i = rng.gen_range(0..n);
                d[i] = rng.gen();
            }
            2 if n > 0 => {
                let a = rng.gen_range(0..n);
                let b = (a + rng.gen_range(1..16)).min(n);
                d.drain(a..b);
            }
            3 => {
                let i = rng.gen_range(0..=n);
                let bytes: Vec<u8> = (0..rng.gen_range(1..8)).map(|_| rng.gen()).collect();
                d.splice(i..i, bytes);
            }
            4 if n > 0 => {
                let a = rng.gen_range(0..n);
                let b = (a + rng.gen_range(1..32)).min(n);
                let piece = d[a..b].to_vec();
                let i = rng.gen_range(0..=d.len());
                d.splice(i..i, piece);
            }
            5 if n > 0 => d.truncate(rng.gen_range(0..n)),
            _ => {
                // Splice in a tail of another seed.
                let other = &seeds[rng.gen_range(0..seeds.len())];
                if !other.is_empty() {
                    let from = rng.gen_range(0..other.len());
                    let at = rng.gen_range(0..=d.len());
                    d.truncate(at);
                    d.extend_from_slice(&other[from..]);
                }
            }
        }
    }
    d
}

/// Runs `f` on the regression inputs, then on mutations of `seeds`; returns the executions.
fn run(target: &str, seeds: Vec<Vec<u8>>, f: impl Fn(&[u8])) -> usize {
    let runs: usize = std::env::var("ASOF_FUZZ_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1500);
    run_n(target, seeds, runs, f)
}

/// [`run`] with `runs` mutations.
fn run_n(target: &str, seeds: Vec<Vec<u8>>, runs: usize, f: impl Fn(&[u8])) -> usize {
    let mut rng = rand::rngs::StdRng::seed_from_u64(0xa50f);
    let mut inputs = regressions(target);
    inputs.extend(seeds.iter().cloned());
    let n_fixed = inputs.len();
    // Decoders that panic inside are caught by the library; keep their messages off the output.
    std::panic::set_hook(Box::new(|_| {}));
    for i in 0..n_fixed + runs {
        let input = match inputs.get(i) {
            Some(fixed) => fixed.clone(),
            None => mutate(&mut rng, &seeds),
        };
        if catch_unwind(AssertUnwindSafe(|| f(&input))).is_err() {
            let _ = std::panic::take_hook();
            let dir = corpus_dir(target);
            std::fs::create_dir_all(&dir).unwrap();
            let path = dir.join(format!("crash-{i}"));
            std::fs::write(&path, &input).unwrap();
            panic!("{target}: input {i} panics; written to {}", path.display());
        }
    }
    let _ = std::panic::take_hook();
    n_fixed + runs
}

/// The values under `tag` of the fixtures of format 1 (LZ4 blocks without a checksum), format 9
/// (zstd event blocks), 10 (a key head with its page list in chunks), 11 (key heads with their
/// hot rows' zone), 12 (pages whose histories take their rows' values) and the current format
/// (a page list in chunks with its pages' boxes).
fn fixture_values(tag: u8) -> Vec<Vec<u8>> {
    values_of(
        tag,
        &[
            "fixture_v1",
            "fixture_v9",
            "fixture_v10",
            "fixture_v11",
            "fixture_v12",
            "fixture_v13",
        ],
    )
}

/// The values under `tag` of these fixtures.
fn values_of(tag: u8, fixtures: &[&str]) -> Vec<Vec<u8>> {
    use asof::KvStore;
    let mut values = Vec::new();
    for fixture in fixtures {
        let tmp = common::copy_of_fixture(&common::data_dir().join(fixture));
        let kv = asof::SledKv::open(tmp.path(), 1 << 20).unwrap();
        let before = values.len();
        values.extend(kv.scan_prefix(&[tag]).map(|r| r.unwrap().1));
        assert!(values.len() > before, "{fixture}");
    }
    values
}

#[test]
fn sql_parser() {
    let seeds = vec![
        std::fs::read(common::data_dir().join("seed_bitemporal/flow.sql")).unwrap(),
        std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/quickstart.sql")).unwrap(),
        b"CREATE OR REFRESH STREAMING TABLE t (a INT, b STRING) TBLPROPERTIES ('x' = '1') FLOW AUTO CDC FROM stream(read_files('/tmp/x', format => 'csv', header => true)) KEYS (a) IGNORE NULL UPDATES ON * EXCEPT (b) APPLY AS TRUNCATE WHEN b = \"T\" SEQUENCE BY STRUCT(a, b) COLUMNS TO UPDATE c STORED AS SCD TYPE 1; ALTER STREAMING TABLE t SET TBLPROPERTIES (pipelines.cdc.tombstoneGCThresholdInSeconds = 5); VACUUM t RETAIN 2 HOURS; DESCRIBE HISTORY t; REFRESH STREAMING TABLE t FULL".to_vec(),
    ];
    let n = run("sql_parser", seeds, |d| {
        let _ = q::parse_sql(d);
    });
    println!("sql_parser: {n} executions");
}

/// Statements planned and executed against a small store (tables, flows, history), in a session
/// that refuses files: DDL, DML, temporal clauses, VACUUM with hostile numbers.
#[test]
fn sql_execute() {
    let seeds = vec![
        b"SELECT * FROM h FOR BUSINESS_TIME AS OF 2 WHERE id = 1; SELECT count(*) FROM b FOR SYSTEM_TIME AS OF 3 FOR BUSINESS_TIME AS OF 2".to_vec(),
        b"VACUUM h RETAIN 1e400 HOURS; VACUUM b RETAIN 0 HOURS; ALTER STREAMING TABLE h SET TBLPROPERTIES ('asof.vacuum.retentionCheck' = 'false'); VACUUM h RETAIN 0 HOURS".to_vec(),
        b"INSERT INTO ev VALUES (3, NULL, 1, 'U', 'x'); REFRESH STREAMING TABLE h; CREATE OR REFRESH STREAMING TABLE h (CONSTRAINT s EXPECT (seq IS NOT NULL) ON VIOLATION DROP ROW); REFRESH STREAMING TABLE b FULL".to_vec(),
        b"DELETE FROM ev WHERE id = 1; UPDATE ev SET v = 'z'; SELECT * FROM table_changes('b', 0, 2); DESCRIBE HISTORY h; SELECT * FROM h VERSION AS OF 1".to_vec(),
        b"CREATE TABLE c AS SELECT * FROM ev WHERE seq > 1; INSERT INTO c SELECT * FROM c; CREATE VIEW w AS SELECT id FROM c; DROP TABLE c; SELECT * FROM temporal_scan('b', 'AS OF 3', 'ALL')".to_vec(),
    ];
    let runs = std::env::var("ASOF_FUZZ_RUNS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .map(|r| r / 5)
        .unwrap_or(1000);
    let n = run_n("sql_execute", seeds, runs, |d| {
        let _ = asof_query::fuzzing_sql::execute(d);
    });
    println!("sql_execute: {n} executions");
}

#[test]
fn csv_and_json_ingest() {
    let csv = std::fs::read(common::data_dir().join("seed_bitemporal/events.csv")).unwrap();
    let json = b"{\"k\": 1, \"seq\": 1, \"sys\": 2, \"v\": \"a\"}\n{\"k\": 1, \"seq\": 0, \"sys\": 3, \"v\": null}\n{\"k\": 2, \"seq\": 5, \"sys\": 1, \"v\": \"b\", \"extra\": [1, 2]}\n".to_vec();
    let n = run(
        "ingest_csv",
        vec![csv, b"a,b\n1,2\n,\n3,x\n".to_vec()],
        |d| {
            let _ = q::ingest_file(d, FileFormat::Csv);
        },
    );
    let m = run("ingest_json", vec![json], |d| {
        let _ = q::ingest_file(d, FileFormat::Json);
    });
    println!("ingest: {n} CSV and {m} JSON executions");
}

#[test]
fn parquet_reading() {
    let batch = arrow::array::RecordBatch::try_from_iter(vec![
        (
            "k",
            std::sync::Arc::new(arrow::array::Int64Array::from(vec![1, 2, 1]))
                as arrow::array::ArrayRef,
        ),
        (
            "seq",
            std::sync::Arc::new(arrow::array::Int64Array::from(vec![1, 1, 2])) as _,
        ),
        (
            "v",
            std::sync::Arc::new(arrow::array::StringArray::from(vec![
                Some("a"),
                None,
                Some("c"),
            ])) as _,
        ),
    ])
    .unwrap();
    let mut buf = Vec::new();
    let mut w = parquet::arrow::ArrowWriter::try_new(&mut buf, batch.schema(), None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    let n = run("read_parquet", vec![buf], |d| {
        let _ = q::ingest_file(d, FileFormat::Parquet);
    });
    println!("read_parquet: {n} executions");
}

#[test]
fn stored_data_decoding() {
    let n = run("decode_event_block", fixture_values(b'E'), |d| {
        for width in [2, 3] {
            let _ = st::decode_event_block(d, width);
        }
    });
    let m = run("decode_source_chunk", fixture_values(b'A'), |d| {
        let _ = st::decode_source_chunk(d);
    });
    // Key heads: those of format 9 list their pages in their meta, one of format 10 apart, in
    // chunks; those of format 11 hold their hot rows' zone; one of format 13 lists its pages
    // with their boxes.
    let k = run(
        "decode_key_head",
        values_of(
            b'K',
            &[
                "fixture_v9",
                "fixture_v10",
                "fixture_v11",
                "fixture_v12",
                "fixture_v13",
            ],
        ),
        |d| {
            let _ = st::decode_key_head(d);
        },
    );
    // Pages: those of format 11 keep their history's values, those of format 12 take them from
    // the page's rows.
    let p = run(
        "decode_cold_page",
        values_of(b'P', &["fixture_v11", "fixture_v12"]),
        |d| {
            for width in [2, 3] {
                let _ = st::decode_cold_page(d, width);
            }
        },
    );
    println!("decoding: {n} event blocks, {m} source chunks, {k} key heads and {p} pages");
}
