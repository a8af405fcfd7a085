//! # asof-query
//!
//! The query layer of asof: temporal scans of target tables into Apache Arrow record batches
//! (docs/SEMANTICS.md §8), with key, business-time, system-time and projection selection pushed into the
//! storage scan, and point as-of lookups.
#![warn(missing_docs)]

mod arrow_conv;
mod changes;
mod delta;
mod error;
mod explain;
mod files;
#[doc(hidden)]
pub mod fuzzing;
#[doc(hidden)]
pub mod fuzzing_sql;
mod history;
mod plot;
mod receipt;
mod scan;
mod schedule;
mod spill;
pub mod sql;

pub use arrow_conv::{sequence_type, table_arrow_schema};
pub use changes::{change_feed, table_changes, ChangeBound, ChangeFeed};
pub use delta::{export_delta, DeltaExport, ExportError, ExportKind, ExportReport};
pub use error::{QueryError, Result};
pub use files::{ExistingFiles, FileFormat, FileSource, JsonLayout};
pub use history::history_batch;
pub use plot::{key_history_svg, PlotRequest};
pub use receipt::{result_hash, Receipt};
pub use scan::{
    key_history, lookup, scan, scan_all, KeySelection, LookupRow, ScanRequest, ScanThreads,
    TableScan, TimeSelection,
};
pub use schedule::{CronSchedule, Schedule, SCHEDULE_PROPERTY};
