//! AUTO CDC flows from SQL: creating one (and its target, and the hidden source of a `read_files`
//! flow), running its statement again (a refresh, or a redefinition), refreshing a table's flows
//! (loading the files that appeared since).

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use asof_storage::{
    ColumnSelection, Condition, FlowSpec, RefreshMode, SourceWrite, Store, StoredAs,
};
use datafusion::sql::sqlparser::tokenizer::TokenWithSpan;

use super::hidden::files_source;
use super::parse::{self, expr_sql, Cols, FlowAst, Source};
use super::snapshot::SnapshotChange;
use super::{names, Declared, Output, SqlSession};
use crate::arrow_conv::table_arrow_schema;
use crate::error::{QueryError, Result};
use crate::files::{ExistingFiles, FileSource};

impl SqlSession {
    pub(super) fn refresh(&mut self, table: &str, mode: RefreshMode) -> Result<Output> {
        if self.store.sources()?.iter().any(|s| s == table) {
            if mode == RefreshMode::Full {
                return self.full_refresh_appends(table);
            }
            return match self.refresh_appends(table)? {
                Some(out) => Ok(out),
                None => Err(QueryError::Invalid(format!(
                    "`{table}` has no flows to refresh"
                ))),
            };
        }
        let flows = self.store.flows(table)?;
        let mut lines = Vec::new();
        for f in &flows {
            if let Some(n) = self.load_new_files(f.source_table.as_deref())? {
                lines.push(format!("{}: loaded {n} new files", f.name));
            }
        }
        let before = self.latest_version(table)?;
        let commits = self.store.refresh_table(table, mode)?;
        for c in &commits {
            lines.push(format!(
                "{}: commit {} read {} events, upserted {} and deleted {} rows",
                c.parameters.get("flow").map_or("", String::as_str),
                c.version,
                c.metrics.num_events_read,
                c.metrics.num_upserted_rows,
                c.metrics.num_deleted_rows
            ));
        }
        for f in &flows {
            let wrote = commits.iter().any(|c| {
                c.parameters
                    .get("flow")
                    .is_some_and(|n| n.split(',').any(|n| n == f.name))
            });
            if !wrote {
                lines.push(format!("{}: nothing new", f.name));
            }
        }
        lines.extend(self.erasures_after(table, before)?);
        Ok(Output::Done(lines.join("\n")))
    }

    pub(super) fn create_flow(&mut self, f: FlowAst) -> Result<Output> {
        if self.flow_exists(&f.name)? {
            return self.rerun_flow(f);
        }
        match f.source.clone() {
            Some(Source::Table(source)) => self.create_flow_from(f, source),
            Some(Source::Snapshots(source)) => {
                let source = self.known_names()?.spelling(&source);
                self.create_snapshot_flow(f, source)
            }
            Some(Source::SnapshotFiles(mut files)) => {
                self.files_allowed()?;
                if files.evolution != crate::files::SchemaEvolution::None {
                    return Err(QueryError::Invalid(format!(
                        "flow `{}` reads snapshot files: schemaEvolutionMode is not supported for snapshots (each snapshot is a whole table of the same columns)",
                        f.name
                    )));
                }
                files.snapshot_column = Some(SNAPSHOT_FILE.into());
                let f = snapshot_files_flow(f);
                let source = self.create_files_source(&f.name, files)?;
                self.create_snapshot_flow(f, source.clone())
                    .inspect_err(|_| {
                        let _ = self.store.drop_table(&source);
                    })
            }
            Some(Source::Files(files)) => {
                self.files_allowed()?;
                let source = self.create_files_source(&f.name, files)?;
                // The hidden source belongs to the flow: if the flow is refused, it goes too, so
                // that the statement can be corrected and run again.
                self.create_flow_from(f, source.clone()).inspect_err(|_| {
                    let _ = self.store.drop_table(&source);
                })
            }
            None => Err(QueryError::Invalid("a flow needs a source".into())),
        }
    }

    pub(super) fn create_flow_from(&mut self, f: FlowAst, source: String) -> Result<Output> {
        let declared = self.declared.iter().find(|d| d.name == f.target);
        // A declared generated column is a column of the flow's source that its rows lack: the
        // store computes it from their other values.
        let (generated, fields) = match declared {
            Some(Declared {
                schema: Some(schema),
                generated,
                ..
            }) => (generated.clone(), generated_fields(schema, generated)),
            _ => (Vec::new(), Vec::new()),
        };
        let flow = self.flow_spec(&f, &source, &fields)?;
        let declared = self.declared.iter().find(|d| d.name == f.target);
        if let Some(Declared {
            schema: Some(schema),
            ..
        }) = declared
        {
            check_declared(
                &f.target,
                schema,
                &table_arrow_schema(&flow.target_schema()),
            )?;
        }
        let creates_table = !self.store.tables()?.contains(&f.target);
        if !creates_table {
            self.store.create_flow(flow)?;
        } else {
            let mut options = asof_storage::TableOptions::default();
            if let Some(d) = declared {
                options.properties = d.properties.clone();
                options.expectations = d.expectations.clone();
                options.generated = generated;
            }
            self.store.create_flow_with(flow, options)?;
        }
        // The statement creates the table and fills it, or does nothing: a table whose first
        // refresh failed is dropped again (it holds only its creation), and its declaration is
        // kept for the next try.
        let refreshed = match self.store.refresh(&f.name, RefreshMode::Incremental) {
            Err(e) if creates_table => {
                self.store.drop_table(&f.target)?;
                return Err(QueryError::Invalid(format!(
                    "flow `{}` into `{}` was not created, nothing was committed: {e}",
                    f.name, f.target
                )));
            }
            r => r?,
        };
        self.declared.retain(|d| d.name != f.target);
        let line = match refreshed {
            Some(c) => format!(
                "flow {} into {}: commit {} read {} events, upserted {} rows",
                f.name, f.target, c.version, c.metrics.num_events_read, c.metrics.num_upserted_rows
            ),
            None => format!(
                "flow {} into {} created; its source is empty",
                f.name, f.target
            ),
        };
        Ok(Output::Done(line))
    }

    /// The flow `f` describes, reading the source table `source`.
    /// The flow `f` describes, reading the source table `source`, whose rows the target's
    /// `generated` columns complete.
    pub(super) fn flow_spec(
        &self,
        f: &FlowAst,
        source: &str,
        generated: &[arrow::datatypes::FieldRef],
    ) -> Result<asof_storage::Flow> {
        let schema = self.store.source_schema(source).map_err(|e| match e {
            asof_storage::Error::NotFound { .. } => QueryError::Invalid(format!(
                "flow `{}` reads `{source}`, which is not a table",
                f.name
            )),
            e => e.into(),
        })?;
        let schema = if generated.is_empty() {
            schema
        } else {
            let fields: Vec<arrow::datatypes::FieldRef> =
                schema.fields().iter().chain(generated).cloned().collect();
            std::sync::Arc::new(arrow::datatypes::Schema::new(fields))
        };
        let columns: Vec<String> = schema.fields().iter().map(|f| f.name().clone()).collect();
        // Column names match without regard to case (see `names`).
        let known = names::Names::of(&columns);
        let one = |n: &String| known.spelling(n);
        let all = |v: &Vec<String>| v.iter().map(one).collect::<Vec<_>>();
        let sel = |c: &Cols| match c {
            Cols::All => ColumnSelection::All,
            Cols::Only(v) => ColumnSelection::Only(all(v)),
            Cols::Except(v) => ColumnSelection::AllExcept(all(v)),
        };
        let condition = |e: &[TokenWithSpan]| known.resolve(&expr_sql(e, &columns));
        let mut b = FlowSpec::builder(&f.name, &f.target, &schema)
            .keys(all(&f.keys))
            .sequence_by(all(&f.sequence_by))
            .source_table(source)
            .once(f.once)
            .change_commits(f.change_commits)
            .comment(f.comment.clone());
        if let Some(s) = &f.system_sequence_by {
            b = b.system_sequence_by(one(s));
        }
        b = b.stored_as(match f.stored_as.as_deref() {
            Some("SCD2") => StoredAs::Scd2,
            Some("BITEMPORAL") => StoredAs::Bitemporal,
            _ => StoredAs::Scd1,
        });
        if let Some(e) = &f.delete_when {
            b = b.delete_when(Condition::Expr(condition(e)?));
        }
        if let Some(e) = &f.truncate_when {
            b = b.truncate_when(Condition::Expr(condition(e)?));
        }
        if let Some(c) = &f.ignore_null_updates {
            b = b.ignore_null_updates(sel(c));
        }
        if let Some(c) = &f.columns {
            b = b.columns(sel(c));
        }
        if let Some(c) = &f.track_history {
            b = b.track_history(sel(c));
        }
        if let Some(c) = &f.columns_to_update {
            b = b.columns_to_update(one(c));
        }
        Ok(b.build().map_err(asof_storage::Error::from)?)
    }

    /// The Arrow schema of a declared column list (`a INT, b STRING`), read by DataFusion, and
    /// the columns it declares generated.
    pub(super) fn declared_schema(
        &mut self,
        table: &str,
        columns: Option<&str>,
    ) -> Result<Option<(SchemaRef, Vec<asof_storage::GeneratedColumn>)>> {
        let Some(columns) = columns else {
            return Ok(None);
        };
        let (columns, generated) = super::generated::split_generated(columns)?;
        let scratch = format!("__asof_declare_{}", table.replace('.', "_"));
        let ddl = format!("CREATE TABLE {} ({columns})", parse::quote_ident(&scratch));
        let schema = self.ddl_schema(&ddl, &scratch).map_err(|e| {
            QueryError::Invalid(format!("the columns of streaming table `{table}`: {e}"))
        })?;
        Ok(Some((schema, generated)))
    }

    /// Creates the hidden source table of a `read_files` flow and loads the files into it.
    pub(super) fn create_files_source(
        &mut self,
        flow: &str,
        mut files: FileSource,
    ) -> Result<String> {
        files = files
            .canonical()
            .map_err(|e| QueryError::Invalid(format!("flow `{flow}`: {e}")))?;
        // Files still being written neither shape the schema nor count as there already.
        let (mut list, _) = FileSource::settled(files.list()?);
        let mut schema = files.infer(&list)?;
        // A snapshot subfolder not complete yet is not there yet (`includeExistingFiles => false`
        // skips only what is).
        if files.snapshot_column.is_some() {
            list = files.snapshots_ready(list);
        }
        if let Some(column) = &files.snapshot_column {
            let mut fields: Vec<arrow::datatypes::FieldRef> = schema.fields().to_vec();
            fields.push(std::sync::Arc::new(arrow::datatypes::Field::new(
                column,
                arrow::datatypes::DataType::Utf8,
                false,
            )));
            schema = std::sync::Arc::new(arrow::datatypes::Schema::new(fields));
        }
        let name = files_source(flow);
        // A hidden source without its flow is what an interrupted `CREATE ... FLOW` left (it
        // loads files in several commits before the flow exists): start it again.
        if self.store.sources()?.contains(&name) && !self.flow_exists(flow)? {
            self.store.drop_table(&name)?;
        }
        let origin = serde_json::to_string(&files)
            .map_err(|e| QueryError::Invalid(format!("cannot keep read_files options: {e}")))?;
        self.store
            .create_source_with_origin(&name, &schema, Some(&origin))?;
        if files.existing == ExistingFiles::Skip {
            // Taken as loaded, without their rows: only later files are read.
            let none = arrow::array::RecordBatch::new_empty(self.store.source_schema(&name)?);
            for path in &list {
                self.store
                    .append_loaded(&name, &none, &path.display().to_string())?;
            }
        }
        self.load_new_files(Some(&name))?;
        Ok(name)
    }

    /// The statement that created flow `f` run again: a refresh of its table when `f` is
    /// defined as the flow is, else the flow redefined and its table rebuilt
    /// ([`Store::redefine_flow`]), as Databricks does.
    pub(super) fn rerun_flow(&mut self, f: FlowAst) -> Result<Output> {
        let source = match &f.source {
            Some(Source::Table(t)) => t.clone(),
            // Taking new snapshots is its refresh; other AUTO CDC clauses redefine it; other
            // snapshots, keys or version are refused.
            Some(Source::Snapshots(_) | Source::SnapshotFiles(_)) => {
                let (f, snapshots) = match f.source.clone() {
                    Some(Source::SnapshotFiles(files)) => {
                        let name = self.same_files(&f.name, &f.target, files)?;
                        (snapshot_files_flow(f), name)
                    }
                    Some(Source::Snapshots(s)) => {
                        let s = self.known_names()?.spelling(&s);
                        (f, s)
                    }
                    _ => return Err(QueryError::Invalid("a flow needs a source".into())),
                };
                return match self.snapshot_flow_change(&f, &snapshots)? {
                    SnapshotChange::None => self.refresh(&f.target, RefreshMode::Incremental),
                    SnapshotChange::Clauses(spec) => self.redefine(&f, *spec),
                    SnapshotChange::Origin(what) => Err(QueryError::Invalid(format!(
                        "flow `{}` reads snapshots and exists with other {what}; asof can redefine a snapshot flow's other AUTO CDC clauses, not that: drop `{}` and create it again (nothing was changed)",
                        f.name, f.target
                    ))),
                };
            }
            Some(Source::Files(files)) => self.same_files(&f.name, &f.target, files.clone())?,
            None => return Err(QueryError::Invalid("a flow needs a source".into())),
        };
        let fields = self.generated_fields_of(&f.target)?;
        let spec = self.flow_spec(&f, &source, &fields)?;
        if self
            .store
            .flows(&f.target)?
            .iter()
            .any(|e| e == spec.spec())
        {
            return self.refresh(&f.target, RefreshMode::Incremental);
        }
        self.redefine(&f, spec)
    }

    /// Flow `f` redefined as `spec`, its table rebuilt from all its sources (or refreshed, if
    /// `spec` is its definition).
    fn redefine(&mut self, f: &FlowAst, spec: asof_storage::Flow) -> Result<Output> {
        match self.store.redefine_flow(spec)? {
            Some(c) => Ok(Output::Done(format!(
                "flow {} redefined: commit {} rebuilt {} from all its sources ({} events read, {} rows upserted, {} deleted)",
                f.name,
                c.version,
                f.target,
                c.metrics.num_events_read,
                c.metrics.num_upserted_rows,
                c.metrics.num_deleted_rows
            ))),
            None => self.refresh(&f.target, RefreshMode::Incremental),
        }
    }

    /// Whether a flow of that name exists.
    /// The fields of target `table`'s generated columns (none for a table not there).
    pub(super) fn generated_fields_of(
        &self,
        table: &str,
    ) -> Result<Vec<arrow::datatypes::FieldRef>> {
        let generated = match self.store.table_generated(table) {
            Ok(g) => g,
            Err(asof_storage::Error::NotFound { .. }) => Vec::new(),
            Err(e) => return Err(e.into()),
        };
        if generated.is_empty() {
            return Ok(Vec::new());
        }
        let schema = crate::arrow_conv::table_arrow_schema(&self.store.schema(table)?);
        Ok(generated_fields(&schema, &generated))
    }

    pub(super) fn flow_exists(&self, flow: &str) -> Result<bool> {
        for t in self.store.tables()? {
            if self.store.flows(&t)?.iter().any(|f| f.name == flow) {
                return Ok(true);
            }
        }
        for s in self.store.sources()? {
            if self.store.append_flows(&s)?.iter().any(|f| f.name == flow) {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The hidden source of `read_files` flow `flow` (into `target`), run again with `files`:
    /// refused when the folder or the options are not those it was created with.
    pub(super) fn same_files(&self, flow: &str, target: &str, files: FileSource) -> Result<String> {
        let name = files_source(flow);
        let files = files.canonical().unwrap_or(files);
        let stored = self.store.source_origin(&name)?.0;
        let mut now = serde_json::to_value(&files).ok();
        // A snapshot folder's source also names its snapshot column: compare without it.
        let mut then = stored.and_then(|o| serde_json::from_str::<serde_json::Value>(&o).ok());
        for v in [&mut now, &mut then].into_iter().flatten() {
            if let Some(o) = v.as_object_mut() {
                o.remove("snapshot_column");
            }
        }
        if now != then {
            return Err(QueryError::Invalid(format!(
                "flow `{flow}` reads files from another folder or with other options than it was created with; asof cannot change that yet: drop `{target}` and create it again (its history goes with it)"
            )));
        }
        Ok(name)
    }

    /// Loads the files that appeared since the last load into the flow's hidden source table, one
    /// durable append per file, named by its path. Returns how many, or `None` when the flow does
    /// not read files.
    pub(super) fn load_new_files(&mut self, source: Option<&str>) -> Result<Option<usize>> {
        let Some(source) = source else {
            return Ok(None);
        };
        let (origin, loaded) = self.store.source_origin(source)?;
        let Some(origin) = origin else {
            return Ok(None);
        };
        if super::snapshot::SnapshotOrigin::parse(&origin).is_some() {
            self.feed_snapshots(source)?;
            return Ok(None);
        }
        let files: FileSource = serde_json::from_str(&origin).map_err(|e| {
            QueryError::Invalid(format!(
                "the read_files options of `{source}` are damaged: {e}"
            ))
        })?;
        let mut schema = self.store.source_schema(source)?;
        let new: Vec<_> = files
            .list()?
            .into_iter()
            .filter(|p| !loaded.contains(&p.display().to_string()))
            .collect();
        // A snapshot subfolder is taken once complete, and whole.
        let new = match files.snapshot_column {
            Some(_) => files.snapshots_ready(new),
            None => new,
        };
        // A file still being written waits for the next refresh.
        let (settled, _still_written) = FileSource::settled(new.clone());
        let new = match files.snapshot_column {
            Some(_) => files.whole_snapshots(settled, &new),
            None => settled,
        };
        let bytes: u64 = new
            .iter()
            .filter_map(|p| std::fs::metadata(p).ok())
            .map(|m| m.len())
            .sum();
        let bar = self.progress.clone().filter(|_| bytes >= 16 << 20);
        if let Some(b) = &bar {
            b.begin(&format!("loading {} file(s)", new.len()), bytes);
        }
        let mut done = 0;
        // A file's rows as an append to the source, encoded (its chunks compressed).
        let written = |store: &Store, mut batch: RecordBatch| {
            if batch.num_rows() == 0 {
                batch = RecordBatch::new_empty(batch.schema());
            }
            let mut w = store.begin_append(source)?;
            w.push(&batch)?;
            Ok::<_, QueryError>(w)
        };
        // Files' appends committed in one flush, each a commit of its own.
        let mut loaded = |store: &Store, files: Vec<(SourceWrite, &std::path::Path)>| {
            if files.is_empty() {
                return Ok(());
            }
            let paths: Vec<_> = files.iter().map(|(_, p)| *p).collect();
            let named = (files.into_iter())
                .map(|(w, p)| (w, Some(p.display().to_string())))
                .collect();
            store.commit_writes(named)?;
            for path in paths {
                done += std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
            }
            if let Some(b) = &bar {
                b.advance(done);
            }
            Ok::<_, QueryError>(())
        };
        let read = |path: &std::path::Path, schema: &SchemaRef| -> Result<RecordBatch> {
            let batches = files.read(path, schema)?;
            Ok(arrow::compute::concat_batches(schema, &batches)?)
        };
        // Files of one schema, not snapshots, into a source whose rows number nothing (no
        // identity column counts the rows before them): each is read and encoded on another
        // thread while the ones before it are committed (a durable commit per file: the 10M
        // load spent its first 12 s here, one core half idle; docs/PERFORMANCE.md sessions 47,
        // 48).
        let ahead = files.evolution != crate::files::SchemaEvolution::AddNewColumns
            && files.snapshot_column.is_none()
            && new.len() > 1
            && self.store.source_generated(source)?.is_empty();
        if ahead {
            let store = &self.store;
            return std::thread::scope(|scope| {
                // Readers taking every other file, so that both cores read while this thread
                // commits. Each holds at most two files (one waiting in its channel, one it is
                // sending): with the group being committed, at most FILES_PER_COMMIT + 4 files
                // in memory (each read whole, its append's chunks in memory up to 16 MiB).
                let mut readers = Vec::new();
                for first in 0..FILE_READERS {
                    let (tx, rx) = std::sync::mpsc::sync_channel(1);
                    let reader = std::thread::Builder::new()
                        .name("asof-read-files".into())
                        .spawn_scoped(scope, {
                            let (read, written, new, schema) = (&read, &written, &new, &schema);
                            move || {
                                for path in new.iter().skip(first).step_by(FILE_READERS) {
                                    // Ends after an error, or when the receiver is gone (the
                                    // load stopped on an error).
                                    let file = read(path, schema).and_then(|b| written(store, b));
                                    let failed = file.is_err();
                                    if tx.send(file).is_err() || failed {
                                        return;
                                    }
                                }
                            }
                        });
                    match reader {
                        Ok(_) => readers.push(rx),
                        Err(_) => break,
                    }
                }
                if readers.len() == FILE_READERS {
                    // The files in their order, each reader's in turn, committed a few at a time
                    // in one flush. A file that cannot be read stops the load after the files
                    // before it are committed.
                    let (mut group, mut group_bytes) = (Vec::new(), 0);
                    for (i, path) in new.iter().enumerate() {
                        let w = readers[i % FILE_READERS].recv().map_err(|_| {
                            QueryError::Invalid("a reader of the files stopped".into())
                        });
                        match w.and_then(|w| w) {
                            Ok(w) => group.push((w, path.as_path())),
                            Err(e) => {
                                loaded(store, group)?;
                                return Err(e);
                            }
                        }
                        group_bytes += std::fs::metadata(path).map_or(0, |m| m.len());
                        if group.len() == FILES_PER_COMMIT || group_bytes >= GROUP_FILE_BYTES {
                            loaded(store, std::mem::take(&mut group))?;
                            group_bytes = 0;
                        }
                    }
                    loaded(store, group)?;
                } else {
                    // A reader that started stops at its first file's send.
                    drop(readers);
                    for path in &new {
                        loaded(
                            store,
                            vec![(written(store, read(path, &schema)?)?, path.as_path())],
                        )?;
                    }
                }
                if let Some(b) = &bar {
                    b.end();
                }
                Ok(Some(new.len()))
            });
        }
        for path in &new {
            // `addNewColumns`: a column this file adds becomes a column of the table first.
            if files.evolution == crate::files::SchemaEvolution::AddNewColumns {
                let own = files.infer(std::slice::from_ref(path))?;
                // A column with no value in the file has no type yet: STRING, as Auto Loader.
                let added: Vec<arrow::datatypes::FieldRef> = own
                    .fields()
                    .iter()
                    .filter(|f| {
                        !schema
                            .fields()
                            .iter()
                            .any(|s| s.name().eq_ignore_ascii_case(f.name()))
                    })
                    .map(|f| match f.data_type() {
                        arrow::datatypes::DataType::Null => std::sync::Arc::new(
                            f.as_ref()
                                .clone()
                                .with_data_type(arrow::datatypes::DataType::Utf8),
                        ),
                        _ => f.clone(),
                    })
                    .collect();
                if !added.is_empty() {
                    self.store.add_source_columns(source, &added)?;
                    schema = self.store.source_schema(source)?;
                }
            }
            let batch = match &files.snapshot_column {
                // A snapshot's rows, and its name (its file's path under the folder, or its
                // subfolder's name) as its column.
                Some(column) => {
                    let (read, at) = read_without(&files, path, &schema, column)?;
                    let name = files.snapshot_name(path);
                    let mut cols = read.columns().to_vec();
                    cols.insert(
                        at,
                        std::sync::Arc::new(arrow::array::StringArray::from(vec![
                            name;
                            read.num_rows()
                        ])),
                    );
                    arrow::array::RecordBatch::try_new(schema.clone(), cols)?
                }
                None => read(path, &schema)?,
            };
            loaded(
                &self.store,
                vec![(written(&self.store, batch)?, path.as_path())],
            )?;
        }
        if let Some(b) = &bar {
            b.end();
        }
        Ok(Some(new.len()))
    }
}

/// How many threads read and encode a `read_files` load's files ahead of its commits.
const FILE_READERS: usize = 2;

/// How many files read ahead are committed in one durable write (each still a commit of its
/// own): a flush for eight files, not one for each (docs/PERFORMANCE.md, session 49).
const FILES_PER_COMMIT: usize = 8;

/// Files read ahead are committed once they hold this many bytes on disk, if fewer than
/// [`FILES_PER_COMMIT`]: a group of large files would hold their appends' chunks (up to 16 MiB
/// each in memory) and write them in one batch.
const GROUP_FILE_BYTES: u64 = 16 << 20;

/// Checks a flow's target columns against the columns its streaming table declared: each declared
/// column must exist, with a type the flow's can be cast to.
fn check_declared(table: &str, declared: &SchemaRef, actual: &SchemaRef) -> Result<()> {
    for d in declared.fields() {
        let Ok(a) = actual.field_with_name(d.name()) else {
            return Err(QueryError::Invalid(format!(
                "streaming table `{table}` declares column `{}`, which its flow does not produce (it produces {})",
                d.name(),
                actual.fields().iter().map(|f| f.name().as_str()).collect::<Vec<_>>().join(", ")
            )));
        };
        if a.data_type() != d.data_type()
            && !arrow::compute::can_cast_types(a.data_type(), d.data_type())
        {
            return Err(QueryError::Invalid(format!(
                "streaming table `{table}` declares column `{}` as {}, but its flow produces {}",
                d.name(),
                d.data_type(),
                a.data_type()
            )));
        }
    }
    Ok(())
}

/// The fields of the `generated` columns among `schema`'s.
fn generated_fields(
    schema: &SchemaRef,
    generated: &[asof_storage::GeneratedColumn],
) -> Vec<arrow::datatypes::FieldRef> {
    generated
        .iter()
        .filter_map(|g| schema.field_with_name(&g.column).ok())
        .map(|f| std::sync::Arc::new(f.clone()))
        .collect()
}

/// Snapshot flow `f` over a folder of files: each file one snapshot, its name (the hidden
/// source's column [`SNAPSHOT_FILE`]) the version unless `SEQUENCE BY` names another; the target
/// leaves that column out.
fn snapshot_files_flow(mut f: FlowAst) -> FlowAst {
    if f.sequence_by.is_empty() {
        f.sequence_by = vec![SNAPSHOT_FILE.into()];
    }
    f.columns = Some(super::snapshot::leave_out(f.columns.take(), SNAPSHOT_FILE));
    f
}

/// The column of a snapshot folder's hidden source that names each row's file.
const SNAPSHOT_FILE: &str = "_snapshot_file";

/// The rows of file `path`, read with `schema` less `column` (the file does not hold it), and
/// where that column goes.
fn read_without(
    files: &FileSource,
    path: &std::path::Path,
    schema: &SchemaRef,
    column: &str,
) -> Result<(arrow::array::RecordBatch, usize)> {
    let at = schema.index_of(column)?;
    let mut fields: Vec<arrow::datatypes::FieldRef> = schema.fields().to_vec();
    fields.remove(at);
    let own: SchemaRef = std::sync::Arc::new(arrow::datatypes::Schema::new(fields));
    let batches = files.read(path, &own)?;
    Ok((arrow::compute::concat_batches(&own, &batches)?, at))
}
