//! Reading an export's own data files back: their keys, to find the files a change touches, and
//! their rows, to write them again without the rows taken away.

use std::collections::HashSet;
use std::fs::File;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::{Schema, SchemaRef};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ProjectionMask;

use super::kernel::{DataFiles, DeltaDir};
use super::net::RowKeys;
use super::types::conform;
use super::ExportError;

/// The files (paths relative to the table) holding a row of one of `keys`.
pub(super) fn holding_keys(
    dir: &DeltaDir,
    files: &DataFiles,
    target: &SchemaRef,
    rk: &RowKeys,
    keys: &HashSet<Vec<u8>>,
) -> Result<Vec<String>, ExportError> {
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    let key_schema: SchemaRef = Arc::new(Schema::new(
        rk.key_columns()
            .iter()
            .map(|&i| target.field(i).clone())
            .collect::<Vec<_>>(),
    ));
    let mut touched = Vec::new();
    for path in files.paths() {
        let batches = read_columns(dir, path, &key_schema)?;
        let holds = batches.iter().try_fold(false, |found, b| {
            if found {
                return Ok::<_, ExportError>(true);
            }
            Ok(rk.keys_only(b)?.iter().any(|k| keys.contains(k.as_ref())))
        })?;
        if holds {
            touched.push(path.to_string());
        }
    }
    Ok(touched)
}

/// The rows of data file `path`, conformed to `target`.
pub(super) fn read(
    dir: &DeltaDir,
    path: &str,
    target: &SchemaRef,
) -> Result<Vec<RecordBatch>, ExportError> {
    read_columns(dir, path, target)
}

/// The columns of `schema` (found by name) of data file `path`.
fn read_columns(
    dir: &DeltaDir,
    path: &str,
    schema: &SchemaRef,
) -> Result<Vec<RecordBatch>, ExportError> {
    let local = dir.file_path(path)?;
    let io = |source| ExportError::Io {
        path: local.clone(),
        source,
    };
    let parquet = |e: parquet::errors::ParquetError| {
        io(std::io::Error::new(std::io::ErrorKind::InvalidData, e))
    };
    let builder = ParquetRecordBatchReaderBuilder::try_new(File::open(&local).map_err(io)?)
        .map_err(parquet)?;
    let roots = schema
        .fields()
        .iter()
        .map(|f| builder.schema().index_of(f.name()))
        .collect::<Result<Vec<_>, _>>()?;
    let mask = ProjectionMask::roots(builder.parquet_schema(), roots);
    let reader = builder
        .with_projection(mask)
        .with_batch_size(64 * 1024)
        .build()
        .map_err(parquet)?;
    reader
        .map(|b| conform(&b?, schema))
        .collect::<Result<Vec<_>, _>>()
}
