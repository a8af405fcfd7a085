//! Entry points for fuzzing, shared by the cargo-fuzz targets in `fuzz/` and the short in-tree run
//! (`tests/fuzz.rs`). Each takes arbitrary bytes and must return, never panic: an `Err` is a
//! correct answer to bad input.
//!
//! This module uses only `crate::error`, `crate::files` and `crate::sql::parse`, so that the fuzz
//! crate can compile it without DataFusion.

use std::sync::atomic::{AtomicU64, Ordering};

use arrow::array::RecordBatch;
use asof_storage::{FlowSpec, MemKv, ScanCursor, ScanSpec, Store, StoredAs};

use crate::error::{QueryError, Result};
use crate::files::{FileFormat, FileSource};
use crate::sql::parse::split;
use crate::sql::statement::classify;

/// The SQL front door's own parsing: statement splitting, the AUTO CDC grammar, `read_files`
/// arguments, table properties. Returns the number of statements.
pub fn parse_sql(data: &[u8]) -> Result<usize> {
    let text = std::str::from_utf8(data).map_err(|e| QueryError::Invalid(e.to_string()))?;
    let stmts = split(text)?;
    for s in &stmts {
        classify(s)?;
    }
    Ok(stmts.len())
}

/// `read_files` on one file holding `data`: schema inference and reading, as CSV (with a header),
/// JSON Lines or Parquet.
pub fn read_file(data: &[u8], format: FileFormat) -> Result<Vec<RecordBatch>> {
    static N: AtomicU64 = AtomicU64::new(0);
    let path = std::env::temp_dir().join(format!(
        "asof-fuzz-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::write(&path, data).map_err(|e| QueryError::Invalid(e.to_string()))?;
    let run = || -> Result<Vec<RecordBatch>> {
        let mut src = FileSource::new(&path);
        src.format = Some(format);
        src.header = true;
        let files = src.list()?;
        let schema = src.infer(&files)?;
        let mut out = Vec::new();
        for f in &files {
            out.extend(src.read(f, &schema)?);
        }
        Ok(out)
    };
    let r = run();
    let _ = std::fs::remove_file(&path);
    r
}

/// The ingest path end to end on a file: read it, then apply it to a fresh in-memory store through
/// a flow keyed on its first column and sequenced by its second (BITEMPORAL with the third as
/// system sequence when there is one), and scan the result. Returns the rows written.
pub fn ingest_file(data: &[u8], format: FileFormat) -> Result<u64> {
    let batches = read_file(data, format)?;
    let Some(first) = batches.first() else {
        return Ok(0);
    };
    let schema = first.schema();
    let names: Vec<&String> = schema.fields().iter().map(|f| f.name()).collect();
    if names.len() < 2 {
        return Ok(0);
    }
    let mut b = FlowSpec::builder("f", "t", &schema)
        .keys([names[0].as_str()])
        .sequence_by([names[1].as_str()])
        .stored_as(StoredAs::Scd2);
    if names.len() >= 3 {
        b = b
            .stored_as(StoredAs::Bitemporal)
            .system_sequence_by(names[2].as_str());
    }
    let Ok(flow) = b.build() else {
        return Ok(0); // a column that cannot be a key or a sequence: refused, correctly
    };
    let store = Store::with_kv(Box::new(MemKv::default()))?;
    store.create_flow(flow)?;
    let mut written = 0;
    for b in &batches {
        if let Ok(c) = store.apply("f", b) {
            written += c.metrics.num_upserted_rows;
        }
    }
    let mut n = 0u64;
    store.read("t", |r| {
        let mut cursor = ScanCursor::default();
        while !cursor.is_done() {
            r.scan(&ScanSpec::default(), &mut cursor, 1024, |_| n += 1)?;
        }
        Ok::<_, asof_storage::Error>(())
    })??;
    Ok(written)
}
