//! The Delta table on disk, through `delta_kernel` and its default engine: open or create it,
//! list its data files, and commit one change (files taken out, files written, and the asof
//! version it now holds, as the Delta `txn` of an application id).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{Array, RecordBatch, StringArray};
use arrow::datatypes::SchemaRef;
use delta_kernel::committer::FileSystemCommitter;
use delta_kernel::engine::arrow_conversion::TryFromArrow;
use delta_kernel::engine::arrow_data::ArrowEngineData;
use delta_kernel::object_store::local::LocalFileSystem;
use delta_kernel::schema::StructType;
use delta_kernel::transaction::create_table::create_table;
use delta_kernel::transaction::{
    BoundWriteContext, CommitResult, CreateTable, Transaction, UpdateTable, UpdateTableOperation,
};
use delta_kernel::{FilteredEngineData, Snapshot, SnapshotRef};
use delta_kernel_default_engine::executor::tokio::TokioBackgroundExecutor;
use delta_kernel_default_engine::{DefaultEngine, DefaultEngineBuilder};
use url::Url;

use super::ExportError;

/// Who wrote the commits (Delta's `engineInfo`).
const ENGINE_INFO: &str = concat!("asof ", env!("CARGO_PKG_VERSION"));

/// A folder holding (or about to hold) a Delta table.
pub(super) struct DeltaDir {
    dir: PathBuf,
    url: Url,
    engine: DefaultEngine<TokioBackgroundExecutor>,
}

/// The data files of a Delta snapshot: the kernel's scan metadata, with each selected row's path.
pub(super) struct DataFiles {
    parts: Vec<(FilteredEngineData, Vec<Option<String>>)>,
}

/// One change to commit.
pub(super) struct Change<'a> {
    /// The Arrow schema of the rows written.
    pub(super) schema: &'a SchemaRef,
    /// The table's application id and the asof version the Delta table holds after the commit.
    pub(super) app_id: &'a str,
    pub(super) asof_version: u64,
}

impl DeltaDir {
    pub(super) fn open(dir: &Path) -> Result<Self, ExportError> {
        let io = |source| ExportError::Io {
            path: dir.to_path_buf(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(io)?;
        let abs = std::fs::canonicalize(dir).map_err(io)?;
        let url = Url::from_directory_path(&abs).map_err(|()| ExportError::Delta {
            dir: dir.to_path_buf(),
            message: "the folder is not an absolute path".into(),
        })?;
        let engine = DefaultEngineBuilder::new(Arc::new(LocalFileSystem::new())).build();
        Ok(DeltaDir {
            dir: dir.to_path_buf(),
            url,
            engine,
        })
    }

    fn err(&self, e: impl std::fmt::Display) -> ExportError {
        ExportError::Delta {
            dir: self.dir.clone(),
            message: e.to_string(),
        }
    }

    /// The table's latest snapshot, or `None` if the folder holds no Delta table yet.
    pub(super) fn snapshot(&self) -> Result<Option<SnapshotRef>, ExportError> {
        if !self.dir.join("_delta_log").exists() {
            return Ok(None);
        }
        Snapshot::builder_for(self.url.as_str())
            .build(&self.engine)
            .map(Some)
            .map_err(|e| self.err(e))
    }

    /// The asof version the snapshot holds, as recorded by the commit of `app_id`.
    pub(super) fn asof_version(
        &self,
        snap: &SnapshotRef,
        app_id: &str,
    ) -> Result<Option<u64>, ExportError> {
        let v = snap
            .get_app_id_version(app_id, &self.engine)
            .map_err(|e| self.err(e))?;
        Ok(v.and_then(|v| u64::try_from(v).ok()))
    }

    /// Whether the snapshot's columns are `schema`'s (names and types, in order).
    pub(super) fn same_columns(
        &self,
        snap: &SnapshotRef,
        schema: &SchemaRef,
    ) -> Result<bool, ExportError> {
        let wanted = StructType::try_from_arrow(schema.as_ref()).map_err(|e| self.err(e))?;
        let have = snap.schema();
        Ok(have.fields().len() == wanted.fields().len()
            && have
                .fields()
                .zip(wanted.fields())
                .all(|(a, b)| a.name() == b.name() && a.data_type() == b.data_type()))
    }

    /// The snapshot's data files.
    pub(super) fn data_files(&self, snap: &SnapshotRef) -> Result<DataFiles, ExportError> {
        let scan = snap
            .clone()
            .scan_builder()
            .build()
            .map_err(|e| self.err(e))?;
        let mut parts = Vec::new();
        for meta in scan.scan_metadata(&self.engine).map_err(|e| self.err(e))? {
            let files = meta.map_err(|e| self.err(e))?.scan_files;
            let batch = files
                .data()
                .any_ref()
                .downcast_ref::<ArrowEngineData>()
                .map(ArrowEngineData::record_batch)
                .ok_or_else(|| self.err("scan metadata is not Arrow data"))?;
            let paths = batch
                .column_by_name("path")
                .and_then(|c| c.as_any().downcast_ref::<StringArray>())
                .ok_or_else(|| self.err("scan metadata has no path"))?;
            let selected = files.selection_vector();
            let rows = (0..paths.len())
                .map(|i| {
                    let on = selected.get(i).copied().unwrap_or(true) && paths.is_valid(i);
                    on.then(|| paths.value(i).to_string())
                })
                .collect();
            parts.push((files, rows));
        }
        Ok(DataFiles { parts })
    }

    /// The scan metadata of the files in `chosen`, ready to be taken out.
    pub(super) fn select(
        &self,
        files: DataFiles,
        chosen: &HashSet<&str>,
    ) -> Result<Vec<FilteredEngineData>, ExportError> {
        let mut out = Vec::new();
        for (part, rows) in files.parts {
            let selection: Vec<bool> = rows
                .iter()
                .map(|p| p.as_deref().is_some_and(|p| chosen.contains(p)))
                .collect();
            if selection.iter().any(|s| *s) {
                let (data, _) = part.into_parts();
                out.push(FilteredEngineData::try_new(data, selection).map_err(|e| self.err(e))?);
            }
        }
        Ok(out)
    }

    /// The local path of a data file named relative to the table.
    pub(super) fn file_path(&self, relative: &str) -> Result<PathBuf, ExportError> {
        self.url
            .join(relative)
            .ok()
            .and_then(|u| u.to_file_path().ok())
            .ok_or_else(|| self.err(format!("data file {relative} is not a local path")))
    }

    /// Begins creating the table with `change.schema`'s columns.
    pub(super) fn create(
        &self,
        change: Change<'_>,
    ) -> Result<Pending<'_, CreateTable>, ExportError> {
        let schema = StructType::try_from_arrow(change.schema.as_ref()).map_err(|e| self.err(e))?;
        let txn = create_table(self.url.as_str(), Arc::new(schema), ENGINE_INFO, true)
            .build(&self.engine, Box::new(FileSystemCommitter::new()))
            .map_err(|e| self.err(e))?;
        self.pending(txn, change)
    }

    /// Begins a commit on top of `snap` that takes out the files of `remove`.
    pub(super) fn update(
        &self,
        snap: &SnapshotRef,
        change: Change<'_>,
        remove: Vec<FilteredEngineData>,
    ) -> Result<Pending<'_, UpdateTable>, ExportError> {
        let mut txn = snap
            .clone()
            .update_table(UpdateTableOperation::Write, ENGINE_INFO, true)
            .build(&self.engine, Box::new(FileSystemCommitter::new()))
            .map_err(|e| self.err(e))?;
        for files in remove {
            txn.remove_files(files);
        }
        self.pending(txn, change)
    }

    fn pending<S>(
        &self,
        txn: Transaction<S>,
        change: Change<'_>,
    ) -> Result<Pending<'_, S>, ExportError> {
        let version = i64::try_from(change.asof_version).map_err(|e| self.err(e))?;
        let txn = txn.with_transaction_id(change.app_id.to_string(), version);
        let context = txn
            .write_state()
            .and_then(|w| w.write_context_builder().build())
            .map_err(|e| self.err(e))?;
        Ok(Pending {
            dir: self,
            txn,
            context,
            written: 0,
        })
    }
}

/// A Delta commit being prepared: files are written one by one, and nothing is visible to a
/// reader before [`Pending::commit`] (a file written and never committed is left for a Delta
/// `VACUUM`).
pub(super) struct Pending<'a, S> {
    dir: &'a DeltaDir,
    txn: Transaction<S>,
    context: BoundWriteContext,
    written: usize,
}

impl<S: std::fmt::Debug> Pending<'_, S> {
    /// Writes `batch` as one data file of the commit.
    pub(super) fn write(&mut self, batch: RecordBatch) -> Result<(), ExportError> {
        let data = ArrowEngineData::new(batch);
        let added =
            futures::executor::block_on(self.dir.engine.write_parquet(&data, &self.context))
                .map_err(|e| self.dir.err(e))?;
        self.txn.add_files(added);
        self.written += 1;
        Ok(())
    }

    /// Commits; returns the Delta version and the number of files written.
    pub(super) fn commit(self) -> Result<(u64, usize), ExportError> {
        let (dir, mut txn) = (self.dir, self.txn);
        for _ in 0..3 {
            match txn.commit(&dir.engine).map_err(|e| dir.err(e))? {
                CommitResult::Committed(c) => return Ok((c.commit_version(), self.written)),
                CommitResult::Conflicted(c) => {
                    return Err(dir.err(format!(
                        "another writer committed Delta version {} meanwhile; export again",
                        c.conflict_version()
                    )))
                }
                CommitResult::Retryable(r) => txn = r.transaction,
            }
        }
        Err(dir.err("the commit failed three times"))
    }
}

impl DataFiles {
    /// The paths of the files, relative to the table.
    pub(super) fn paths(&self) -> impl Iterator<Item = &str> {
        self.parts
            .iter()
            .flat_map(|(_, rows)| rows.iter().flatten().map(String::as_str))
    }
}
