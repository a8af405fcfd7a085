//! Append flows from SQL (docs/SEMANTICS.md §1.7): `CREATE FLOW f AS INSERT [ONCE] INTO t BY
//! NAME query` and the standalone `CREATE [OR REFRESH] STREAMING TABLE t AS query`, whose query
//! reads `STREAM(source)` (or `STREAM source`, or `STREAM read_files(...)`). Each run appends to
//! `t` the query's rows over what the source received since the flow's checkpoint, in one commit
//! that also records the new checkpoint.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use asof_storage::{
    append_offset_parameter, source_version_parameter, AppendFlow, ChangeCommits, SourceRead,
    StreamRead,
};
use datafusion::datasource::MemTable;
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan};

use super::append_text::{append_flow_sql, STREAM_MARK};
use super::change_feed_table::{feed_schema, feed_table};
use super::parse::{quote_ident, read_files_args, split, stream_options, upper};
use super::provider::RowsTable;
use super::statement::AppendAst;
use super::{Output, SqlSession};
use crate::error::{QueryError, Result};
use crate::files::FileSource;

/// What a query streams from.
enum StreamFrom {
    /// A source table's rows; `WITH (skipChangeCommits = true)` leaves out what DML statements
    /// on it did.
    Table(String, ChangeCommits),
    Files(FileSource),
    /// `STREAM(t) WITH (readChangeFeed = true [, startingVersion = n])`.
    ChangeFeed {
        table: String,
        starting_version: u64,
        change_commits: ChangeCommits,
    },
}

/// The source a query's `STREAM ...` names, and the query with it replaced by [`STREAM_MARK`].
fn stream_of(query: &str) -> Result<(StreamFrom, String)> {
    let stmts = split(query)?;
    let [stmt] = stmts.as_slice() else {
        return Err(QueryError::Invalid(
            "an append flow's query is one statement".into(),
        ));
    };
    let words = stmt.words();
    let at = words
        .iter()
        .position(|t| {
            matches!(&t.token, Token::Word(w) if w.quote_style.is_none())
                && upper(&t.token) == "STREAM"
        })
        .ok_or_else(|| {
            QueryError::Invalid(
                "an append flow reads STREAM(source) or STREAM read_files(...)".into(),
            )
        })?;
    let word = |i: usize| words.get(i).map(|t| upper(&t.token)).unwrap_or_default();
    let paren = words.get(at + 1).is_some_and(|t| t.token == Token::LParen);
    let first = if paren { at + 2 } else { at + 1 };
    let (from, mut end) = if word(first) == "READ_FILES" {
        let (files, next) = read_files_args(&words, first + 1)?;
        (StreamFrom::Files(files), next)
    } else {
        match words.get(first).map(|t| &t.token) {
            Some(Token::Word(_)) => {
                let (name, next) = super::dotted_name_at(&words, first)?;
                (StreamFrom::Table(name, ChangeCommits::Read), next)
            }
            _ => {
                return Err(QueryError::Invalid(
                    "STREAM takes a source table: STREAM(source)".into(),
                ))
            }
        }
    };
    if paren {
        if words.get(end).map(|t| &t.token) != Some(&Token::RParen) {
            return Err(QueryError::Invalid("STREAM( without its `)`".into()));
        }
        end += 1;
    }
    let with = word(end) == "WITH" && words.get(end + 1).is_some_and(|t| t.token == Token::LParen);
    let from = if with {
        let (options, next) = stream_options(&words, end + 2)?;
        end = next;
        let skip = match options.get("skipchangecommits").map(String::as_str) {
            Some("true") => ChangeCommits::Skip,
            None | Some("false") => ChangeCommits::Read,
            Some(v) => {
                return Err(QueryError::Invalid(format!(
                    "skipChangeCommits takes true or false, not `{v}`"
                )))
            }
        };
        let known = |k: &String| ["readchangefeed", "skipchangecommits"].contains(&k.as_str());
        match (from, options.get("readchangefeed").map(String::as_str)) {
            (StreamFrom::Table(table, _), Some("true")) => StreamFrom::ChangeFeed {
                table,
                change_commits: skip,
                starting_version: match options.get("startingversion") {
                    Some(v) => v.parse().map_err(|_| {
                        QueryError::Invalid(format!(
                            "startingVersion takes a commit version, not `{v}`"
                        ))
                    })?,
                    None => 0,
                },
            },
            // A source table's stream: its DML statements are its change commits.
            (StreamFrom::Table(table, _), None | Some("false")) if options.keys().all(known) => {
                StreamFrom::Table(table, skip)
            }
            (from, None | Some("false")) if options.keys().all(known) => from,
            _ => {
                return Err(QueryError::Invalid(format!(
                    "STREAM(t) WITH takes readChangeFeed = true, startingVersion = n and skipChangeCommits = true, not {:?}",
                    options.keys().collect::<Vec<_>>()
                )))
            }
        }
    } else {
        from
    };
    let pos = |t: &TokenWithSpan| {
        stmt.tokens
            .iter()
            .position(|x| std::ptr::eq(x, t))
            .expect("token of this statement")
    };
    let (a, b) = (pos(words[at]), pos(words[end - 1]));
    let text = |r: &[TokenWithSpan]| {
        r.iter()
            .map(|t| super::parse::sql_text(&t.token))
            .collect::<String>()
    };
    let marked = format!(
        "{}{}{}",
        text(&stmt.tokens[..a]),
        STREAM_MARK,
        text(&stmt.tokens[b + 1..])
    );
    Ok((from, marked))
}

impl SqlSession {
    /// `CREATE FLOW f AS INSERT INTO t BY NAME query`: the flow, then its first run. Run again
    /// with the same definition, a refresh of `t`.
    pub(super) fn create_append_flow(&mut self, a: AppendAst) -> Result<Output> {
        let (from, query) = stream_of(&a.query)?;
        let mut source_change_commits = ChangeCommits::Read;
        let (source, reads) = match from {
            StreamFrom::Table(t, c) => {
                source_change_commits = c;
                (self.stored_name(&t)?, StreamRead::Rows)
            }
            StreamFrom::Files(files) => {
                self.files_allowed()?;
                // Run again: the flow's hidden source as it is (the same folder and options).
                let exists = self.store.sources()?.contains(&a.target)
                    && self
                        .store
                        .append_flows(&a.target)?
                        .iter()
                        .any(|f| f.name == a.name);
                let source = if exists {
                    self.same_files(&a.name, &a.target, files)?
                } else {
                    self.create_files_source(&a.name, files)?
                };
                (source, StreamRead::Rows)
            }
            StreamFrom::ChangeFeed {
                table,
                starting_version,
                change_commits,
            } => (
                self.stored_name(&table)?,
                StreamRead::ChangeFeed {
                    starting_version,
                    change_commits,
                },
            ),
        };
        let flow = AppendFlow {
            name: a.name.clone(),
            source,
            reads,
            query,
            once: a.once,
            comment: a.comment,
            source_change_commits,
        };
        let existing = self.store.append_flows(&a.target).unwrap_or_default();
        if let Some(old) = existing.iter().find(|f| f.name == flow.name) {
            // Another definition: the flow goes on with it (the rows it appended stay; REFRESH
            // ... FULL recomputes them), as a Databricks flow whose query changed.
            if *old != flow {
                self.store.redefine_append_flow(&a.target, flow)?;
            }
            return self.run_append_flows(&a.target);
        }
        if !self.store.sources()?.contains(&a.target) {
            // A streaming table declared in this session (`CREATE OR REFRESH STREAMING TABLE t
            // [(cols)]`) is created now: with its declared columns, or the query's.
            let Some(declared) = self.declared.iter().position(|d| d.name == a.target) else {
                return Err(QueryError::Invalid(format!(
                    "append flow `{}` writes to `{}`, which is not a table that accepts INSERT (declare it first: CREATE OR REFRESH STREAMING TABLE {})",
                    a.name, a.target, a.target
                )));
            };
            let schema = match self.declared[declared].schema.clone() {
                Some(schema) => schema,
                None => {
                    let empty = self.empty_stream(&flow)?;
                    self.run_over(&flow.query, empty)?.0
                }
            };
            let mut w = self.store.begin_create_source(&a.target, &schema, None)?;
            w.set_generated(self.declared[declared].generated.clone())?;
            self.store.commit_write(w, None)?;
            self.declared.remove(declared);
        }
        self.store.create_append_flow(&a.target, flow.clone())?;
        let line = self.run_append_flow(&a.target, &flow)?;
        Ok(Output::Done(line))
    }

    /// `CREATE [OR REFRESH] STREAMING TABLE t AS query`: the table, shaped as the query's rows,
    /// and an append flow named `t` that fills it. Run again, a refresh.
    pub(super) fn create_streaming_query(&mut self, name: &str, query: &str) -> Result<Output> {
        let ast = AppendAst {
            name: name.to_string(),
            target: name.to_string(),
            once: false,
            comment: None,
            query: query.to_string(),
        };
        if self.store.sources()?.contains(&name.to_string()) {
            return self.create_append_flow(ast);
        }
        let (from, marked) = stream_of(query)?;
        let source_schema = match &from {
            StreamFrom::Table(t, _) => self.store.source_schema(&self.stored_name(t)?)?,
            StreamFrom::ChangeFeed { table, .. } => {
                let table = self.stored_name(table)?;
                feed_schema(&self.store, &table)?
            }
            StreamFrom::Files(files) => {
                self.files_allowed()?;
                let files = files.canonical()?;
                // Files still being written do not shape the schema.
                files.infer(&FileSource::settled(files.list()?).0)?
            }
        };
        // The table's columns: the query's, over no rows.
        let empty =
            MemTable::try_new(source_schema.clone(), vec![vec![]]).map_err(super::context::df)?;
        let schema = self.run_over(&marked, Arc::new(empty))?.0;
        self.store.create_source(name, &schema)?;
        self.create_append_flow(ast).inspect_err(|_| {
            let _ = self.store.drop_table(name);
        })
    }

    /// Runs every append flow that writes to `target`; `None` if it has none.
    pub(super) fn refresh_appends(&mut self, target: &str) -> Result<Option<Output>> {
        if !self.store.sources()?.contains(&target.to_string())
            || self.store.append_flows(target)?.is_empty()
        {
            return Ok(None);
        }
        self.run_append_flows(target).map(Some)
    }

    /// `REFRESH STREAMING TABLE t FULL` of a table append flows fill: one commit that removes
    /// every row of `t` and appends what each flow's query gives over all of its source (its
    /// rows as they are now, or its change feed from its starting version), with each flow's
    /// checkpoint.
    pub(super) fn full_refresh_appends(&mut self, target: &str) -> Result<Output> {
        let flows = self.store.append_flows(target)?;
        if flows.is_empty() {
            return Err(QueryError::Invalid(format!(
                "`{target}` has no flows to refresh: REFRESH ... FULL recomputes a table from its flows"
            )));
        }
        self.refuse_if_snapshots(target, "REFRESH ... FULL")?;
        // A replace flow's runs replaced rows one delivery at a time; run once over all of its
        // source, only one that keeps the newest delivery per key (SEQUENCE BY) gives the same.
        for f in &flows {
            let replace = super::replace::split_replace(&f.query)?.0;
            if replace.is_some() && flows.len() > 1 {
                return Err(QueryError::Invalid(format!(
                    "`{target}` is filled by replace flow `{}` and other flows: its runs replaced their rows too, which a full refresh cannot redo; nothing was changed",
                    f.name
                )));
            }
            match replace {
                Some(super::replace::Replace::Using {
                    sequence: Some(_), ..
                })
                | None => {}
                Some(_) => {
                    return Err(QueryError::Invalid(format!(
                        "`{target}` is filled by replace flow `{}` without SEQUENCE BY: a full refresh cannot tell which of its deliveries stay; nothing was changed",
                        f.name
                    )))
                }
            }
        }
        let mut offsets = Vec::new();
        let mut lines = Vec::new();
        let mut started = Vec::new();
        for f in &flows {
            started.push((f.name.clone(), self.store.append_offset(target, &f.name)?));
        }
        // The columns the flows' rows bring are added first: the write below is of the table's
        // columns when it begins. A source's from a run over no rows, after a `read_files`
        // flow's hidden source took its new files (and none after: a file with new columns
        // would come too late); a change feed's from its query over the feed, read whole (as it
        // always was) and kept for the write.
        let mut feeds = Vec::new();
        for f in &flows {
            let (schema, feed) = match f.reads {
                StreamRead::Rows => {
                    self.load_new_files(Some(&f.source))?;
                    let empty = self.empty_stream(f)?;
                    (self.run_over(&f.query, empty)?.0, None)
                }
                StreamRead::ChangeFeed { .. } => {
                    let feed = self.whole_stream(f)?;
                    (self.stream_over(&f.query, feed.0.clone())?.0, Some(feed))
                }
            };
            self.add_new_columns(target, f, &schema)?;
            feeds.push(feed);
        }
        // The positions of the rows there now, read a batch at a time (not the rows).
        let mut now = self.store.source_rows(target, SourceRead::Now)?;
        let written = now.written();
        let mut removed: Vec<u64> = Vec::new();
        while let Some(p) = now.next_positioned()? {
            removed.extend(p.positions);
        }
        let n_removed = removed.len();
        let mut w = self.store.begin_source_dml(
            target,
            asof_storage::SourceDmlOperation::FullRefresh,
            removed,
            &format!("REFRESH STREAMING TABLE {target} FULL"),
        )?;
        w.removes_all_of(written);
        // Each flow's rows go into the write as its query gives them (a refresh of 10M rows
        // held them all, and the table's rows: 3.1 GB).
        for (f, feed) in flows.iter().zip(feeds) {
            if f.reads == StreamRead::Rows {
                let latest = self
                    .store
                    .source_history(&f.source)?
                    .last()
                    .map_or(0, |c| c.version);
                offsets.push((source_version_parameter(&f.name), latest));
            }
            let (stream, offset, read) = match feed {
                Some(feed) => feed,
                None => self.whole_stream(f)?,
            };
            let (schema, mut rows) = self.stream_over(&f.query, stream)?;
            let before = w.rows();
            match super::replace::split_replace(&f.query)?.0 {
                // A replace flow's one run over all of its source, into an empty table: what
                // stays is known once all of it is read.
                Some(r) => {
                    let mut all = Vec::new();
                    while let Some(b) = self.next_batch(&mut rows)? {
                        all.push(b);
                    }
                    for b in self.replaced_fresh(&r, &all, &schema)? {
                        w.push(&b)?;
                    }
                }
                None => {
                    while let Some(b) = self.next_batch(&mut rows)? {
                        w.push(&b)?;
                    }
                }
            }
            let n = w.rows() - before;
            lines.push(format!("{}: {n} rows ({read} read)", f.name));
            offsets.push((append_offset_parameter(&f.name), offset));
        }
        for (k, v) in offsets {
            w.set_parameter(k, v.to_string());
        }
        // A run of a flow that committed meanwhile would be lost under the refresh.
        for (flow, checkpoint) in started {
            w.follows_checkpoint(&flow, checkpoint);
        }
        let written = w.rows();
        self.store.commit_write(w, None)?;
        lines.push(format!(
            "{target}: full refresh removed {n_removed} rows and wrote {written}"
        ));
        Ok(Output::Done(lines.join("\n")))
    }

    /// All that append flow `f` reads, for a full refresh: the stream, the checkpoint after it,
    /// and what it is. A `read_files` flow's new files are loaded into its hidden source before
    /// (by the caller), not here.
    fn whole_stream(
        &mut self,
        f: &AppendFlow,
    ) -> Result<(Arc<dyn datafusion::catalog::TableProvider>, u64, Read)> {
        if let StreamRead::ChangeFeed {
            starting_version,
            change_commits,
        } = f.reads
        {
            let latest = self.store.latest_version(&f.source)?;
            let t = feed_table(
                &self.store,
                &f.source,
                (starting_version, latest),
                change_commits,
                self.progress.clone(),
            )?;
            let read = format!(
                "commits {starting_version} to {latest} of the change feed of {}",
                f.source
            );
            return Ok((t, latest + 1, Read::Said(read)));
        }
        // The checkpoint counts every row ever appended to the source.
        let rows = self.store.source_rows(&f.source, SourceRead::Now)?;
        let total = rows.written();
        let t = RowsTable::new(&f.source, rows);
        let read = Read::Rows {
            counted: t.counted(),
            all_of: Some(f.source.clone()),
        };
        Ok((Arc::new(t), total, read))
    }

    fn run_append_flows(&mut self, target: &str) -> Result<Output> {
        let mut lines = Vec::new();
        for f in self.store.append_flows(target)? {
            lines.push(self.run_append_flow(target, &f)?);
        }
        Ok(Output::Done(lines.join("\n")))
    }

    /// One run of append flow `f` into `target`: a line saying what it did.
    fn run_append_flow(&mut self, target: &str, f: &AppendFlow) -> Result<String> {
        let offset = self.store.append_offset(target, &f.name)?;
        if f.once && offset.is_some() {
            return Ok(format!("{}: ran once already (INSERT ONCE)", f.name));
        }
        if let StreamRead::ChangeFeed {
            starting_version,
            change_commits,
        } = f.reads
        {
            let from = offset.unwrap_or(starting_version);
            let latest = self.store.latest_version(&f.source)?;
            if from > latest {
                return Ok(format!("{}: nothing new", f.name));
            }
            let stream = feed_table(
                &self.store,
                &f.source,
                (from, latest),
                change_commits,
                self.progress.clone(),
            )?;
            let read = format!(
                "commits {from} to {latest} of the change feed of {}",
                f.source
            );
            let run = Run {
                checkpoint: offset,
                offset: latest + 1,
                read: Read::Said(read),
                first_read: None,
                source_version: None,
            };
            return self.append(target, f, stream, run);
        }
        // A `read_files` flow's hidden source first takes the files that appeared since.
        self.load_new_files(Some(&f.source))?;
        let from = offset.unwrap_or(0);
        // The source version the flow last read whole, or first read: DML statements on the
        // source before it removed nothing the flow had read. A first read records it.
        let read_whole = source_version_parameter(&f.name);
        let since = match offset {
            None => self
                .store
                .source_history(&f.source)?
                .last()
                .map_or(0, |c| c.version),
            Some(_) => self
                .store
                .source_history(target)?
                .iter()
                .rev()
                .find_map(|c| c.parameters.get(&read_whole).and_then(|v| v.parse().ok()))
                .unwrap_or(0),
        };
        // The rows after the checkpoint (which counts rows an ERASE removed since), and the
        // version they are read at.
        let read_at = self
            .store
            .source_history(&f.source)?
            .last()
            .map_or(0, |c| c.version);
        let new_rows = self.store.source_rows_after(
            &f.source,
            &f.name,
            from,
            f.source_change_commits,
            since,
        )?;
        let total = new_rows.written();
        if total <= from {
            return Ok(format!("{}: nothing new", f.name));
        }
        let stream = RowsTable::new(&f.source, new_rows);
        let read = Read::Rows {
            counted: stream.counted(),
            all_of: None,
        };
        let run = Run {
            checkpoint: offset,
            offset: total,
            read,
            first_read: offset.is_none().then(|| (read_whole, since.to_string())),
            source_version: Some(read_at),
        };
        self.append(target, f, Arc::new(stream), run)
    }

    /// Appends to `target` what `f`'s query gives over `stream` (`read` says what that is), with
    /// the checkpoint `offset` (and `parameter`, if any), in one commit: a line saying what it
    /// did.
    fn append(
        &mut self,
        target: &str,
        f: &AppendFlow,
        stream: Arc<dyn datafusion::catalog::TableProvider>,
        run: Run,
    ) -> Result<String> {
        let Run {
            checkpoint,
            offset,
            read,
            first_read,
            source_version,
        } = run;
        let (schema, mut rows) = self.stream_over(&f.query, stream)?;
        self.add_new_columns(target, f, &schema)?;
        let (replace, _) = super::replace::split_replace(&f.query)?;
        let mut w = match replace {
            // The rows go into the write as the query gives them (which holds them in a
            // temporary file once they are many): a run over 10M rows held them all, 1 GB.
            None => {
                let mut w = self.store.begin_append(target)?;
                while let Some(b) = self.next_batch(&mut rows)? {
                    w.push(&b)?;
                }
                w
            }
            // What a delivery replaces is known once all of it is read.
            Some(r) => {
                let mut batches = Vec::new();
                while let Some(b) = self.next_batch(&mut rows)? {
                    batches.push(b);
                }
                self.refuse_if_snapshots(target, "replace flows")?;
                let (removed, kept) = self.replaced(target, &r, &batches, &schema)?;
                let mut w = self.store.begin_source_dml(
                    target,
                    asof_storage::SourceDmlOperation::Replace,
                    removed,
                    &append_flow_sql(target, f),
                )?;
                for b in &kept {
                    w.push(b)?;
                }
                w
            }
        };
        // Another run of the flow committed meanwhile: these rows would be appended twice.
        w.follows_checkpoint(&f.name, checkpoint);
        w.set_parameter(append_offset_parameter(&f.name), offset.to_string());
        w.set_parameter("flow", f.name.clone());
        if let Some((k, v)) = first_read {
            w.set_parameter(k, v);
        }
        // The rows were computed outside the store's lock: a statement that removed source rows
        // meanwhile voids them.
        if let Some(v) = source_version {
            w.read_from(&f.source, &f.name, v);
        }
        let rows = w.rows();
        self.store.commit_write(w, None)?;
        Ok(format!(
            "{}: appended {rows} rows to {target} ({read} read)",
            f.name
        ))
    }

    /// Columns of a run's rows (`schema`) that `target` lacks, added to it when `f` reads files
    /// with `schemaEvolutionMode => 'addNewColumns'`, or the change feed of a target that gained
    /// them (its source's files brought them); otherwise the write refuses them.
    fn add_new_columns(
        &mut self,
        target: &str,
        f: &AppendFlow,
        schema: &arrow::datatypes::SchemaRef,
    ) -> Result<()> {
        let upstream = match f.reads {
            StreamRead::Rows => {
                let evolves = self
                    .store
                    .source_origin(&f.source)?
                    .0
                    .and_then(|o| serde_json::from_str::<FileSource>(&o).ok())
                    .is_some_and(|files| {
                        files.evolution == crate::files::SchemaEvolution::AddNewColumns
                    });
                if !evolves {
                    return Ok(());
                }
                self.store.source_schema(&f.source)?
            }
            StreamRead::ChangeFeed { .. } => {
                crate::arrow_conv::table_arrow_schema(&self.store.schema(&f.source)?)
            }
        };
        let from_files = upstream;
        let have = self.store.source_schema(target)?;
        // Columns the files (or the target upstream) brought, not one the query computes.
        let added: Vec<arrow::datatypes::FieldRef> = schema
            .fields()
            .iter()
            .filter(|c| {
                !have
                    .fields()
                    .iter()
                    .any(|h| h.name().eq_ignore_ascii_case(c.name()))
                    && from_files.field_with_name(c.name()).is_ok()
            })
            .cloned()
            .collect();
        if !added.is_empty() {
            self.store.add_source_columns(target, &added)?;
        }
        Ok(())
    }

    /// No rows of what `f` streams from, with their columns.
    fn empty_stream(&self, f: &AppendFlow) -> Result<Arc<dyn datafusion::catalog::TableProvider>> {
        let schema = match f.reads {
            StreamRead::Rows => self.store.source_schema(&f.source)?,
            StreamRead::ChangeFeed { .. } => feed_schema(&self.store, &f.source)?,
        };
        Ok(Arc::new(
            MemTable::try_new(schema, vec![vec![]]).map_err(super::context::df)?,
        ))
    }

    /// Runs `marked` (a query whose stream is [`STREAM_MARK`]) over `stream`: its rows, all.
    fn run_over(
        &mut self,
        marked: &str,
        stream: Arc<dyn datafusion::catalog::TableProvider>,
    ) -> Result<(arrow::datatypes::SchemaRef, Vec<arrow::array::RecordBatch>)> {
        let (schema, mut rows) = self.stream_over(marked, stream)?;
        let mut out = Vec::new();
        while let Some(b) = self.next_batch(&mut rows)? {
            out.push(b);
        }
        Ok((schema, out))
    }

    /// [`SqlSession::run_over`], its rows streamed as the query gives them.
    fn stream_over(
        &mut self,
        marked: &str,
        stream: Arc<dyn datafusion::catalog::TableProvider>,
    ) -> Result<(
        arrow::datatypes::SchemaRef,
        datafusion::physical_plan::SendableRecordBatchStream,
    )> {
        self.clear_scratch()?;
        self.register_all()?;
        let name = self.register_scratch("stream", stream)?;
        // A replace flow's `REPLACE ...` clause is its caller's (`replace.rs`).
        let (_, marked) = super::replace::split_replace(marked)?;
        let text = marked.replacen(STREAM_MARK, &quote_ident(&name), 1);
        let stmts = split(&text)?;
        let [stmt] = stmts.as_slice() else {
            return Err(QueryError::Invalid(
                "an append flow's query is one statement".into(),
            ));
        };
        self.query_stream(stmt)
    }
}

/// What a run read, said once it has run (the rows of a source table are counted as they
/// stream).
enum Read {
    Said(String),
    Rows {
        counted: Arc<AtomicU64>,
        /// `Some(source)`: the whole of it.
        all_of: Option<String>,
    },
}

impl std::fmt::Display for Read {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Read::Said(s) => f.write_str(s),
            Read::Rows { counted, all_of } => {
                let n = counted.load(Ordering::Relaxed);
                match all_of {
                    None => write!(f, "{n} new source rows"),
                    Some(source) => write!(f, "all {n} rows of {source}"),
                }
            }
        }
    }
}

/// What one run of an append flow read.
struct Run {
    /// The flow's checkpoint it started from (`None`: its first run).
    checkpoint: Option<u64>,
    /// The flow's checkpoint after it.
    offset: u64,
    /// What it read, in words.
    read: Read,
    /// On a flow's first read of a source table: the parameter that records the version read.
    first_read: Option<(String, String)>,
    /// The version of the source table read, if the flow reads one's rows.
    source_version: Option<u64>,
}
