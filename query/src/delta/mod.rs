//! Delta Lake export (docs/EXPORT.md): a table, current or as of a version, written as a Delta
//! table with its four temporal columns, through `delta_kernel`. A later export of the same table
//! into the same folder commits only what changed since the version the folder holds: the change
//! feed of the commits since (§7.3 of docs/SEMANTICS.md) gives the rows to take away and to add;
//! the data files holding rows to take away are written again without them (copy on write) and
//! the rows to add go to a new file. Each Delta commit records the asof version it holds as the
//! `txn` of the application id `asof <table>`.
//!
//! The modules: `types` (the Delta column types), `net` (the net effect of a change feed),
//! `kernel` (the Delta table through the kernel), `files` (reading exported files back).

mod files;
mod kernel;
mod net;
mod types;

use std::collections::HashSet;
use std::fmt;
use std::path::PathBuf;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use asof_storage::{CommitInfo, Store};

use crate::arrow_conv::table_arrow_schema;
use crate::changes::{change_feed, ChangeBound};
use crate::error::QueryError;
use crate::scan::{scan, ScanRequest};
use delta_kernel::SnapshotRef;
use kernel::{Change, DeltaDir};
use net::{NetChanges, RowKeys};

/// Rows per data file. A change rewrites every file holding a row it retires (copy on write),
/// so files are kept small enough for that to be cheap: about 10 MB on the 1M-event workload.
const ROWS_PER_FILE: usize = 1 << 18;

/// What to export, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeltaExport {
    /// The table (its stored name).
    pub table: String,
    /// The folder of the Delta table (created if missing).
    pub dir: PathBuf,
    /// The table as of this commit version; `None` = the latest.
    pub version: Option<u64>,
}

/// How an export changed the Delta table.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ExportKind {
    /// The Delta table was created.
    Created,
    /// Only the changes of the commits after `since` (the version the folder held) were written.
    Incremental {
        /// The asof version the Delta table held before.
        since: u64,
    },
    /// Every file was replaced, for `reason` (a vacuum or an erasure since the last export, an
    /// earlier version asked for, ...).
    Rewritten {
        /// Why the changes could not be carried over.
        reason: String,
    },
    /// The Delta table already held that version; nothing was written.
    UpToDate,
}

/// What an export did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExportReport {
    /// The table.
    pub table: String,
    /// The asof version the Delta table now holds.
    pub asof_version: u64,
    /// The Delta table's version after the export.
    pub delta_version: u64,
    /// How.
    pub kind: ExportKind,
    /// Data files written.
    pub files_written: usize,
    /// Data files taken out of the table (still on disk, for Delta time travel).
    pub files_removed: usize,
    /// Rows in the files written.
    pub rows_written: u64,
}

impl fmt::Display for ExportReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let how = match &self.kind {
            ExportKind::UpToDate => {
                return write!(
                    f,
                    "{}: Delta version {} already holds version {}; nothing written",
                    self.table, self.delta_version, self.asof_version
                )
            }
            ExportKind::Created => "created".to_string(),
            ExportKind::Incremental { since } => format!("the commits since version {since}"),
            ExportKind::Rewritten { reason } => format!("rewritten whole ({reason})"),
        };
        let files = |n: usize| format!("{n} file{}", if n == 1 { "" } else { "s" });
        write!(
            f,
            "{}: version {} exported as Delta version {}: {how}; {} rows in {} written, {} taken out",
            self.table,
            self.asof_version,
            self.delta_version,
            self.rows_written,
            files(self.files_written),
            files(self.files_removed)
        )
    }
}

/// Why an export failed; the Delta table is then as it was.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExportError {
    /// Reading the table failed.
    #[error(transparent)]
    Query(#[from] QueryError),
    /// A column has a type Delta cannot hold.
    #[error("column `{column}` of `{table}` has type {data_type}, which has no Delta type")]
    UnsupportedType {
        /// The table.
        table: String,
        /// The column.
        column: String,
        /// Its Arrow type.
        data_type: String,
    },
    /// The folder holds a Delta table that is not an export of this table, or other files.
    #[error("{} holds something other than an export of `{table}`; export to another folder", dir.display())]
    NotAnExport {
        /// The folder.
        dir: PathBuf,
        /// The table.
        table: String,
    },
    /// The table's columns changed since the folder's export.
    #[error("the Delta table at {} has other columns than `{table}` has now; export to another folder", dir.display())]
    ColumnsChanged {
        /// The folder.
        dir: PathBuf,
        /// The table.
        table: String,
    },
    /// The Delta table lacks rows the change feed takes away: something else wrote to it.
    #[error("the Delta table at {} lacks {missing} rows that `{table}`'s commits since version {since} take away; it was changed by another writer: export to another folder", dir.display())]
    OutOfStep {
        /// The folder.
        dir: PathBuf,
        /// The table.
        table: String,
        /// The version the folder held.
        since: u64,
        /// Rows not found.
        missing: u64,
    },
    /// The Delta kernel failed.
    #[error("Delta table at {}: {message}", dir.display())]
    Delta {
        /// The folder.
        dir: PathBuf,
        /// The kernel's message.
        message: String,
    },
    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// Arrow or Parquet failed.
    #[error("arrow: {0}")]
    Arrow(#[from] arrow::error::ArrowError),
}

/// Exports `req.table` as of `req.version` into the Delta table at `req.dir` (module docs).
pub fn export_delta(store: &Store, req: &DeltaExport) -> Result<ExportReport, ExportError> {
    let table = req.table.as_str();
    let storage = |e| ExportError::Query(QueryError::Storage(e));
    // One read of the log: the latest version is its last commit's (a commit landing meanwhile
    // is not half seen).
    let history = store.history(table).map_err(storage)?;
    let latest = history.last().map_or(0, |c| c.version);
    let schema = store.schema(table).map_err(storage)?;
    let run = Run {
        store,
        req,
        version: req.version.unwrap_or(latest),
        target: types::delta_schema(table, &table_arrow_schema(&schema))?,
        dir: DeltaDir::open(&req.dir)?,
        app_id: format!("asof {table}"),
    };
    let Some(snap) = run.dir.snapshot()? else {
        return run.create();
    };
    let Some(held) = run.dir.asof_version(&snap, &run.app_id)? else {
        return Err(run.not_an_export());
    };
    if !run.dir.same_columns(&snap, &run.target)? {
        return Err(ExportError::ColumnsChanged {
            dir: req.dir.clone(),
            table: table.to_string(),
        });
    }
    let erased = erased_since(&history, held);
    if held == run.version && erased.is_none() {
        return Ok(run.report(snap.version(), ExportKind::UpToDate, (0, 0, 0)));
    }
    let key_columns = schema
        .key_names()
        .iter()
        .filter_map(|k| run.target.index_of(k).ok())
        .collect::<Vec<_>>();
    let plan = erased
        .map_or(Ok(()), Err)
        .and_then(|()| carry_over(&history, held, run.version))
        .and_then(|()| RowKeys::new(&run.target, key_columns).map_err(|e| e.to_string()));
    match plan {
        Ok(rk) => run.carry(&snap, held, &rk),
        Err(reason) => run.rewrite(&snap, reason),
    }
}

/// One export under way: what it reads, and the Delta table it writes.
struct Run<'a> {
    store: &'a Store,
    req: &'a DeltaExport,
    /// The asof version exported.
    version: u64,
    /// The Arrow schema of the Delta table.
    target: SchemaRef,
    dir: DeltaDir,
    /// The application id whose `txn` records the asof version.
    app_id: String,
}

impl Run<'_> {
    fn change(&self) -> Change<'_> {
        Change {
            schema: &self.target,
            app_id: &self.app_id,
            asof_version: self.version,
        }
    }

    fn report(
        &self,
        delta_version: u64,
        kind: ExportKind,
        (files_written, files_removed, rows_written): (usize, usize, u64),
    ) -> ExportReport {
        ExportReport {
            table: self.req.table.clone(),
            asof_version: self.version,
            delta_version,
            kind,
            files_written,
            files_removed,
            rows_written,
        }
    }

    fn not_an_export(&self) -> ExportError {
        ExportError::NotAnExport {
            dir: self.req.dir.clone(),
            table: self.req.table.clone(),
        }
    }

    /// The table's rows at the version exported.
    fn rows(
        &self,
    ) -> Result<impl Iterator<Item = Result<RecordBatch, ExportError>> + '_, ExportError> {
        let req = ScanRequest {
            version: Some(self.version),
            batch_size: 64 * 1024,
            ..Default::default()
        };
        let mut rows = scan(self.store, &self.req.table, &req)?;
        if let Some(p) = self.store.progress() {
            let task = format!("exporting {} to Delta", self.req.table);
            rows = rows.with_progress(&p, &task)?;
        }
        Ok(rows.map(|b| b.map_err(ExportError::from)))
    }

    /// Creates the Delta table with every row.
    fn create(&self) -> Result<ExportReport, ExportError> {
        // Data files an interrupted export left may be there; anything else is not ours.
        let foreign = |e: std::fs::DirEntry| {
            !(e.path().extension().is_some_and(|x| x == "parquet") && e.path().is_file())
        };
        if std::fs::read_dir(&self.req.dir).is_ok_and(|mut d| d.any(|e| e.map_or(true, foreign))) {
            return Err(self.not_an_export());
        }
        let mut written = 0u64;
        let mut pending = self.dir.create(self.change())?;
        for file in in_files(self.rows()?, &self.target, &mut written) {
            pending.write(file?)?;
        }
        let (d, n) = pending.commit()?;
        Ok(self.report(d, ExportKind::Created, (n, 0, written)))
    }

    /// Carries the change feed since `held` over: the files holding rows it takes away are
    /// written again without them, and the rows it adds go to new files.
    fn carry(
        &self,
        snap: &SnapshotRef,
        held: u64,
        rk: &RowKeys,
    ) -> Result<ExportReport, ExportError> {
        let (dir, target) = (&self.dir, &self.target);
        let files = dir.data_files(snap)?;
        let mut feed = change_feed(
            self.store,
            &self.req.table,
            &ChangeBound::Version(held + 1),
            Some(&ChangeBound::Version(self.version)),
        )?;
        if let Some(p) = self.store.progress() {
            feed = feed.with_progress(p);
        }
        let feed = feed.collect::<Result<Vec<_>, _>>()?;
        let mut net = NetChanges::of_feed(&feed, target, rk)?;
        drop(feed);
        let touched = files::holding_keys(dir, &files, target, rk, &net.removed_keys)?;
        let chosen: HashSet<&str> = touched.iter().map(String::as_str).collect();
        let remove = dir.select(files, &chosen)?;
        let mut pending = dir.update(snap, self.change(), remove)?;
        let mut written = 0u64;
        // The touched files again, without the rows taken away: one file read at a time.
        let survivors = touched
            .iter()
            .map(|path| files::read(dir, path, target))
            .flat_map(|file| match file {
                Ok(batches) => batches.into_iter().map(Ok).collect(),
                Err(e) => vec![Err(e)],
            })
            .map(|batch| batch.and_then(|b| net.take_away(&b, rk)));
        for file in in_files(survivors, target, &mut written) {
            pending.write(file?)?;
        }
        if net.missing() > 0 {
            return Err(ExportError::OutOfStep {
                dir: self.req.dir.clone(),
                table: self.req.table.clone(),
                since: held,
                missing: net.missing(),
            });
        }
        for file in in_files(net.added.take().into_iter().map(Ok), target, &mut written) {
            pending.write(file?)?;
        }
        let (d, n) = pending.commit()?;
        Ok(self.report(
            d,
            ExportKind::Incremental { since: held },
            (n, touched.len(), written),
        ))
    }

    /// Takes every file out and writes every row again, for `reason`.
    fn rewrite(&self, snap: &SnapshotRef, reason: String) -> Result<ExportReport, ExportError> {
        let files = self.dir.data_files(snap)?;
        let all: HashSet<String> = files.paths().map(str::to_string).collect();
        let chosen: HashSet<&str> = all.iter().map(String::as_str).collect();
        let remove = self.dir.select(files, &chosen)?;
        let mut pending = self.dir.update(snap, self.change(), remove)?;
        let mut written = 0u64;
        for file in in_files(self.rows()?, &self.target, &mut written) {
            pending.write(file?)?;
        }
        let (d, n) = pending.commit()?;
        Ok(self.report(d, ExportKind::Rewritten { reason }, (n, all.len(), written)))
    }
}

/// An erasure after version `held`, which changes every version, `held` too (an erased key
/// leaves every version of the table): the reason to rewrite.
fn erased_since(history: &[CommitInfo], held: u64) -> Option<String> {
    history
        .iter()
        .find(|c| c.version > held && c.operation == asof_storage::ERASE)
        .map(|c| format!("version {} erased keys from every version", c.version))
}

/// Whether the changes of commits `held+1..=version` can be carried over from the change feed;
/// if not, why.
fn carry_over(history: &[CommitInfo], held: u64, version: u64) -> Result<(), String> {
    if held > version {
        return Err(format!("it held version {held}, later than {version}"));
    }
    let oldest = history.first().map_or(0, |c| c.version);
    if held < oldest {
        return Err(format!("the history before version {oldest} was vacuumed"));
    }
    // Commits whose effect the change feed lists in full; anything else (VACUUM, ERASE, a
    // redefinition) is carried by a rewrite.
    let fed = |op: &str| {
        op.starts_with("FLOW ")
            || matches!(
                op,
                "WRITE" | "UPDATE" | "DELETE" | "MERGE" | "SET TBLPROPERTIES" | "SET EXPECTATIONS"
            )
    };
    match history
        .iter()
        .find(|c| c.version > held && c.version <= version && !fed(&c.operation))
    {
        Some(c) => Err(format!("version {} is {}", c.version, c.operation)),
        None => Ok(()),
    }
}

/// `batches` conformed to `target` and gathered into files of up to [`ROWS_PER_FILE`] rows;
/// counts the rows into `written`.
fn in_files<'a>(
    batches: impl Iterator<Item = Result<RecordBatch, ExportError>> + 'a,
    target: &'a SchemaRef,
    written: &'a mut u64,
) -> impl Iterator<Item = Result<RecordBatch, ExportError>> + 'a {
    let mut batches = batches;
    std::iter::from_fn(move || {
        let mut parts = Vec::new();
        let mut rows = 0;
        while rows < ROWS_PER_FILE {
            match batches.next() {
                None => break,
                Some(Ok(b)) if b.num_rows() == 0 => {}
                Some(Ok(b)) => match types::conform(&b, target) {
                    Ok(b) => {
                        rows += b.num_rows();
                        parts.push(b);
                    }
                    Err(e) => return Some(Err(e)),
                },
                Some(Err(e)) => return Some(Err(e)),
            }
        }
        if parts.is_empty() {
            return None;
        }
        *written += rows as u64;
        Some(arrow::compute::concat_batches(target, &parts).map_err(ExportError::from))
    })
}
