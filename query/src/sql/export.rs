//! `EXPORT [TABLE] t TO DELTA 'folder' [VERSION AS OF n]`: the table written as a Delta table
//! ([`crate::export_delta`]; docs/EXPORT.md).

use super::{Output, SqlSession};
use crate::delta::{export_delta, DeltaExport};
use crate::error::{QueryError, Result};

impl SqlSession {
    pub(super) fn export(&self, table: &str, dir: &str, version: Option<u64>) -> Result<Output> {
        let req = DeltaExport {
            table: table.to_string(),
            dir: dir.into(),
            version,
        };
        let report =
            export_delta(&self.store, &req).map_err(|e| QueryError::Export(Box::new(e)))?;
        Ok(Output::Done(report.to_string()))
    }
}
