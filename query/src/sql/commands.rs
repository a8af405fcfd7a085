//! The commands a session runs itself: `SHOW TBLPROPERTIES`, `DROP STREAMING TABLE`, `DESCRIBE
//! HISTORY`, `VACUUM`, `EXPORT ... TO DELTA`.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::RecordBatch;

use super::export::ExportAst;
use super::{Output, SqlSession};
use crate::delta::{export_delta, DeltaExport};
use crate::error::{QueryError, Result};

/// `VACUUM t` without `RETAIN`: seven days, as Delta Lake.
const DEFAULT_RETAIN_HOURS: f64 = 168.0;

impl SqlSession {
    /// `SHOW TBLPROPERTIES t [('key')]`.
    pub(super) fn show_properties(&self, name: &str, key: Option<String>) -> Result<Output> {
        let mut props = self.store.properties(name)?;
        if let Some(key) = key {
            let value = props
                .remove(&key)
                .unwrap_or_else(|| format!("Table {name} does not have property: {key}"));
            props = BTreeMap::from([(key, value)]);
        }
        let schema = Arc::new(arrow::datatypes::Schema::new(vec![
            arrow::datatypes::Field::new("key", arrow::datatypes::DataType::Utf8, false),
            arrow::datatypes::Field::new("value", arrow::datatypes::DataType::Utf8, false),
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(arrow::array::StringArray::from_iter_values(props.keys())),
                Arc::new(arrow::array::StringArray::from_iter_values(props.values())),
            ],
        )?;
        Ok(Output::Batches(schema, vec![batch]))
    }

    /// `DROP STREAMING TABLE [IF EXISTS] t`.
    pub(super) fn drop_streaming_table(&mut self, name: &str, if_exists: bool) -> Result<Output> {
        if !self.store.tables()?.contains(&name.to_string()) {
            if if_exists {
                return Ok(Output::Done(format!("{name} does not exist")));
            }
            return Err(QueryError::Invalid(format!(
                "`{name}` is not a streaming table"
            )));
        }
        self.store.drop_table(name)?;
        self.deregister_named(name)?;
        Ok(Output::Done(format!("{name} dropped")))
    }

    /// `DESCRIBE HISTORY t`, of a target or a source table.
    pub(super) fn describe_history(&self, name: &str) -> Result<Output> {
        let history = match self.store.history(name) {
            Ok(h) => h,
            Err(asof_storage::Error::NotFound { .. }) => self.store.source_history(name)?,
            Err(e) => return Err(e.into()),
        };
        let batch = crate::history::history_batch(&history)?;
        Ok(Output::Batches(batch.schema(), vec![batch]))
    }

    /// `VACUUM t [RETAIN n HOURS]`.
    pub(super) fn vacuum(&self, name: &str, retain_hours: Option<f64>) -> Result<Output> {
        let hours = retain_hours.unwrap_or(DEFAULT_RETAIN_HOURS);
        let retain = std::time::Duration::try_from_secs_f64(hours * 3600.0)
            .map_err(|e| QueryError::Invalid(format!("VACUUM RETAIN {hours} HOURS: {e}")))?;
        let r = self.store.vacuum(name, retain)?;
        if r.commits_removed == 0 {
            return Ok(Output::Done(format!(
                "{name}: nothing older than {hours} hours to remove; history kept from version {}",
                r.oldest_version
            )));
        }
        Ok(Output::Done(format!(
            "{name}: history kept from version {}; removed {} commits and {} row versions; log {} -> {} bytes",
            r.oldest_version, r.commits_removed, r.row_versions_removed, r.bytes_before, r.bytes_after
        )))
    }

    /// `EXPORT [TABLE] t TO DELTA 'folder' [VERSION AS OF n]`.
    pub(super) fn export(&self, e: &ExportAst) -> Result<Output> {
        let req = DeltaExport {
            table: e.name.clone(),
            dir: e.dir.clone().into(),
            version: e.version,
        };
        let report =
            export_delta(&self.store, &req).map_err(|e| QueryError::Export(Box::new(e)))?;
        Ok(Output::Done(report.to_string()))
    }
}
