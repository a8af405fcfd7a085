//! Source tables: durable, append-only Arrow tables that flows read from (`CREATE TABLE`,
//! `INSERT INTO`). Each append is one commit: its rows are stored as Arrow IPC, LZ4-compressed,
//! in chunks of bounded size, and read back a few chunks at a time (`store::source_rows`).

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::{Field, Schema, SchemaRef};
use arrow::ipc::writer::StreamWriter;
use serde::{Deserialize, Serialize};

use crate::error::{corrupt, Error, Result};
use crate::flow::{ChangeCommits, SourceColumn};
use crate::generated::{self, GeneratedColumn};
use crate::ingest::ConditionEvaluator;
use crate::value::{cast_column, ColumnType};

/// Rows of a source table with their positions (counting every row ever appended): what a DML
/// statement names rows by.
#[derive(Clone, Debug)]
pub struct PositionedRows {
    /// The rows.
    pub rows: RecordBatch,
    /// The position of each row.
    pub positions: Vec<u64>,
}

/// A source table's rows there now, with their positions ([`crate::Store::source_rows_positioned`]).
#[derive(Clone, Debug)]
pub struct PositionedTable {
    /// The table's schema.
    pub schema: SchemaRef,
    /// Its rows, by batch, each row with its position.
    pub rows: Vec<PositionedRows>,
    /// How many rows were ever written to it (positions count up to it).
    pub written: u64,
}

/// The operation of a source commit that appends rows.
pub(crate) const WRITE: &str = "WRITE";

/// The operation of the source commit that added columns ([`crate::Store::add_source_columns`]).
pub(crate) const ADD_COLUMNS: &str = "ADD COLUMNS";

/// The catalog record of a source table.
#[derive(Serialize, Deserialize)]
pub(crate) struct SourceRecord {
    pub name: String,
    pub columns: Vec<SourceColumn>,
    /// Where the rows come from, opaque to storage (the query layer keeps its `read_files`
    /// arguments here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
    /// The append flows that write to it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub append_flows: Vec<AppendFlow>,
    /// Its generated columns.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub generated: Vec<GeneratedColumn>,
}

/// What an append flow reads of the table it streams from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum StreamRead {
    /// The rows appended to a source table; the checkpoint counts rows.
    #[default]
    Rows,
    /// The change feed of a target table (`STREAM(t) WITH (readChangeFeed = true)`), from commit
    /// `starting_version` on; the checkpoint is the next commit to read.
    ChangeFeed {
        /// The first commit read (`startingVersion`).
        starting_version: u64,
        /// What is done with commits that changed or deleted rows (`skipChangeCommits`).
        #[serde(default)]
        change_commits: ChangeCommits,
    },
}

impl StreamRead {
    fn is_rows(&self) -> bool {
        *self == StreamRead::Rows
    }
}

/// An append flow (`CREATE FLOW f AS INSERT INTO t BY NAME query`, or the query of a standalone
/// `CREATE STREAMING TABLE t AS query`): each refresh appends to its table `query`'s rows over
/// what its source received since the flow's checkpoint. The query is the SQL layer's, opaque
/// to storage; the checkpoint is a parameter of the table's `WRITE` commits
/// ([`crate::Store::append_offset`]), so it is durable exactly when the rows are.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppendFlow {
    /// The flow's name (unique among all flows of the store).
    pub name: String,
    /// The table it streams from: a source table, or a target whose change feed it reads.
    pub source: String,
    /// What it reads of its source.
    #[serde(default, skip_serializing_if = "StreamRead::is_rows")]
    pub reads: StreamRead,
    /// What it appends, in the SQL layer's words.
    pub query: String,
    /// `INSERT ONCE`: runs until it has appended once.
    #[serde(default)]
    pub once: bool,
    /// `CREATE FLOW f COMMENT '...'`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// A source table's stream `WITH (skipChangeCommits = true)`: what DML statements on it
    /// removed or appended is not the flow's concern (a change feed's has its own, in `reads`).
    #[serde(default, skip_serializing_if = "ChangeCommits::is_read")]
    pub source_change_commits: ChangeCommits,
}

pub(crate) struct SourceTable {
    pub id: u32,
    pub name: String,
    pub schema: SchemaRef,
    pub columns: Vec<SourceColumn>,
    pub rows: u64,
    /// Number of appends (the next chunk sequence).
    pub appends: u64,
    /// See [`SourceRecord::origin`].
    pub origin: Option<String>,
    /// The names given to appends by [`crate::Store::append_loaded`] (the files loaded so far).
    pub loaded: std::collections::BTreeSet<String>,
    /// One commit per statement that changed the table (`CREATE TABLE`, then `WRITE`s).
    pub history: Vec<crate::commit_info::CommitInfo>,
    /// See [`SourceRecord::append_flows`].
    pub append_flows: Vec<AppendFlow>,
    /// See [`SourceRecord::generated`].
    pub generated: Vec<GeneratedColumn>,
    /// The positions (in the numbering of all rows ever appended) of the rows ERASE removed, in
    /// order: `rows` still counts them, so that flows' checkpoints keep their meaning.
    pub erased: Vec<u64>,
    /// The positions of the rows DML statements removed, with the version that removed each
    /// (they stay in their chunks: the table as of an earlier version reads them).
    pub deleted: crate::removed::Removed,
    /// The positions DML statements appended, as ranges `[a, b)` (what `skipChangeCommits`
    /// leaves out).
    pub changed: Vec<(u64, u64)>,
}

/// About how many bytes of Arrow data one stored chunk holds.
const CHUNK_BYTES: usize = 48 * 1024;

impl SourceTable {
    pub fn new(id: u32, name: String, columns: Vec<SourceColumn>) -> Self {
        let schema = Arc::new(Schema::new(
            columns
                .iter()
                .map(|c| Field::new(&c.name, c.ty.to_arrow(), true))
                .collect::<Vec<_>>(),
        ));
        SourceTable {
            id,
            name,
            schema,
            columns,
            rows: 0,
            appends: 0,
            origin: None,
            loaded: Default::default(),
            history: Vec::new(),
            append_flows: Vec::new(),
            generated: Vec::new(),
            erased: Vec::new(),
            deleted: Default::default(),
            changed: Vec::new(),
        }
    }

    /// The columns for an Arrow schema, or an error naming the unsupported column.
    pub fn columns_of(schema: &Schema) -> Result<Vec<SourceColumn>> {
        schema
            .fields()
            .iter()
            .map(|f| {
                ColumnType::from_arrow(f.data_type())
                    .map(|ty| SourceColumn {
                        name: f.name().clone(),
                        ty,
                    })
                    .ok_or_else(|| {
                        Error::InvalidQuery(format!(
                            "column `{}` has type {}, which asof does not store",
                            f.name(),
                            f.data_type()
                        ))
                    })
            })
            .collect()
    }

    /// A batch decoded from one of its chunks, under its schema now: a chunk written before
    /// columns were added lacks them, and reads them NULL.
    pub(crate) fn fit(&self, b: RecordBatch) -> Result<RecordBatch> {
        let n = b.num_rows();
        let cols = self
            .schema
            .fields()
            .iter()
            .map(|f| match b.column_by_name(f.name()) {
                Some(c) => Ok(c.clone()),
                // Only a table that gained columns has chunks without them.
                None if b.num_columns() < self.schema.fields().len()
                    && self.history.iter().any(|c| c.operation == ADD_COLUMNS) =>
                {
                    Ok(arrow::array::new_null_array(f.data_type(), n))
                }
                None => Err(corrupt(format!(
                    "source `{}`: a chunk lacks column `{}`",
                    self.name,
                    f.name()
                ))),
            })
            .collect::<Result<Vec<_>>>()?;
        RecordBatch::try_new_with_options(
            self.schema.clone(),
            cols,
            &arrow::array::RecordBatchOptions::new().with_row_count(Some(n)),
        )
        .map_err(|e| corrupt(format!("source `{}`: {e}", self.name)))
    }

    /// Its catalog record.
    pub(crate) fn record(&self) -> SourceRecord {
        SourceRecord {
            name: self.name.clone(),
            columns: self.columns.clone(),
            origin: self.origin.clone(),
            append_flows: self.append_flows.clone(),
            generated: self.generated.clone(),
        }
    }

    /// The table of catalog record `rec`, its rows not read.
    pub(crate) fn from_record(id: u32, rec: SourceRecord) -> Self {
        let mut src = SourceTable::new(id, rec.name, rec.columns);
        src.origin = rec.origin;
        src.append_flows = rec.append_flows;
        src.generated = rec.generated;
        src
    }

    /// Casts `batch` (matched by column name) to this table's schema; missing columns are NULL.
    pub fn conform(&self, batch: &RecordBatch) -> Result<RecordBatch> {
        let n = batch.num_rows();
        let mut cols = Vec::with_capacity(self.columns.len());
        for c in &self.columns {
            let col = match batch.column_by_name(&c.name) {
                Some(a) => {
                    let (a, failed) = cast_column(a, &c.ty).map_err(|e| Error::InvalidBatch {
                        column: c.name.clone(),
                        problem: format!("cannot be converted to {}: {e}", c.ty),
                        rows: n,
                    })?;
                    if failed > 0 {
                        return Err(Error::InvalidBatch {
                            column: c.name.clone(),
                            problem: format!("has values that cannot be converted to {}", c.ty),
                            rows: failed,
                        });
                    }
                    a
                }
                None => arrow::array::new_null_array(&c.ty.to_arrow(), n),
            };
            cols.push(col);
        }
        for f in batch.schema().fields() {
            if !self.columns.iter().any(|c| &c.name == f.name()) {
                return Err(Error::InvalidBatch {
                    column: f.name().clone(),
                    problem: format!("is not a column of `{}`", self.name),
                    rows: n,
                });
            }
        }
        RecordBatch::try_new(self.schema.clone(), cols)
            .map_err(|e| Error::InvalidQuery(e.to_string()))
    }

    /// The stored chunks of `batch`.
    pub fn encode_chunks(batch: &RecordBatch) -> Result<Vec<Vec<u8>>> {
        let total = batch.get_array_memory_size().max(1);
        let rows = batch.num_rows().max(1);
        let per_chunk = (rows * CHUNK_BYTES / total).clamp(1, rows);
        let mut out = Vec::new();
        let mut offset = 0;
        while offset < batch.num_rows() {
            let len = per_chunk.min(batch.num_rows() - offset);
            out.push(Self::encode_chunk(&batch.slice(offset, len))?);
            offset += len;
        }
        Ok(out)
    }

    /// `rows` as one stored chunk, however large (a chunk rewritten with fewer rows by an
    /// erasure keeps its number).
    pub fn encode_chunk(rows: &RecordBatch) -> Result<Vec<u8>> {
        let mut buf = Vec::new();
        {
            let mut w = StreamWriter::try_new(&mut buf, &rows.schema())
                .map_err(|e| corrupt(e.to_string()))?;
            w.write(rows).map_err(|e| corrupt(e.to_string()))?;
            w.finish().map_err(|e| corrupt(e.to_string()))?;
        }
        crate::format::lz4::compress(&buf, crate::format::lz4::Effort::Quick)
    }

    pub fn decode_chunk(bytes: &[u8]) -> Result<Vec<RecordBatch>> {
        let raw = crate::format::lz4::decompress(bytes)
            .map_err(|e| corrupt(format!("source chunk: {e}")))?;
        // arrow's IPC stream reader allocates whatever length a message header claims (a damaged
        // chunk can make that exabytes, an abort) and can panic on damaged input (both found by
        // fuzzing, `tests/data/fuzz/decode_source_chunk`). The push decoder slices the bytes we
        // have instead, and a panic inside is turned into an error.
        crate::error::no_panic("source chunk", || {
            let mut buf = arrow::buffer::Buffer::from_vec(raw);
            let mut decoder = arrow::ipc::reader::StreamDecoder::new();
            let mut out = Vec::new();
            while !buf.is_empty() {
                match decoder.decode(&mut buf) {
                    Ok(Some(b)) => out.push(b),
                    Ok(None) => {}
                    Err(e) => return Err(corrupt(format!("source chunk: {e}"))),
                }
            }
            decoder
                .finish()
                .map_err(|e| corrupt(format!("source chunk: {e}")))?;
            Ok(out)
        })
    }

    /// Whether the table's commit records go back to its `CREATE TABLE`: one written before
    /// source tables had commit records (or partly so) counts its rows and appends from its
    /// chunks when it opens.
    pub(crate) fn full_history(&self) -> bool {
        self.history
            .first()
            .is_some_and(|c| c.version == 0 && c.operation == "CREATE TABLE")
    }

    /// How many rows are there now: written, less those erased or removed.
    pub fn rows_there(&self) -> u64 {
        // Removed, less those erased since.
        let erased_too = self
            .erased
            .iter()
            .filter(|&&p| self.deleted.contains(p))
            .count() as u64;
        self.rows - self.erased.len() as u64 - (self.deleted.len() - erased_too)
    }
}

/// Rows on their way into a source table: one statement's worth (`INSERT ... SELECT`, `CREATE
/// TABLE ... AS SELECT`), committed as one append by [`crate::Store::commit_write`] however many
/// batches it is given, or not at all.
///
/// Batches are checked against the table and compressed as they are pushed, so an error at any
/// row is found before anything is written, and what the statement holds is its compressed
/// chunks, not its Arrow batches: in memory up to 16 MiB, then in a temporary file
/// (`source_chunks.rs`). No lock is held while rows are pushed: the rows may
/// come from a query that reads the store.
pub struct SourceWrite {
    /// The table, as it was when the write began (its id, name, columns).
    pub(crate) table: SourceTable,
    /// What the commit does besides appending.
    pub(crate) kind: WriteKind,
    /// The compressed chunks, in order (in a temporary file once they are many).
    pub(crate) chunks: crate::source_chunks::Chunks,
    /// Rows pushed.
    pub(crate) rows: u64,
    /// Parameters of the commit.
    pub(crate) parameters: std::collections::BTreeMap<String, String>,
    /// What computes generated columns' expressions.
    pub(crate) evaluator: Option<Arc<dyn ConditionEvaluator>>,
    /// The rows a DML statement removes, with the statement ([`crate::Store::begin_source_dml`]).
    pub(crate) change: Option<crate::source_dml::SourceChange>,
    /// The source a flow computed these rows from, the flow, and the source's version then.
    pub(crate) read: Option<(String, String, u64)>,
    /// Flows whose checkpoints the rows follow on, with those checkpoints (`None`: never ran).
    pub(crate) checkpoints: Vec<(String, Option<u64>)>,
    /// How many rows the table had when the rows a full refresh removes were read.
    pub(crate) written: Option<u64>,
    /// The write's duration and peak memory, from its start to its commit.
    pub(crate) clock: crate::commit_clock::CommitClock,
}

/// Whether a [`SourceWrite`] appends to a table that exists or creates it.
pub(crate) enum WriteKind {
    /// Append to the table with this id (checked again at commit: it may have been dropped).
    Append,
    /// Create the table with the rows (`CREATE TABLE ... AS SELECT`); it has no id yet.
    Create,
}

impl SourceWrite {
    pub(crate) fn new(
        table: SourceTable,
        kind: WriteKind,
        evaluator: Option<Arc<dyn ConditionEvaluator>>,
    ) -> Self {
        SourceWrite {
            table,
            kind,
            chunks: Default::default(),
            rows: 0,
            parameters: Default::default(),
            evaluator,
            change: None,
            read: None,
            checkpoints: Vec::new(),
            written: None,
            clock: crate::commit_clock::CommitClock::start(),
        }
    }

    /// Makes `generated` columns of the table this write creates (before any row is pushed):
    /// their values are computed for every row written from now on.
    pub fn set_generated(&mut self, generated: Vec<GeneratedColumn>) -> Result<()> {
        if !matches!(self.kind, WriteKind::Create) || self.rows > 0 {
            return Err(Error::InvalidQuery(format!(
                "the generated columns of `{}` are set when it is created, before its rows",
                self.table.name
            )));
        }
        generated::validate(&self.table.columns, &generated, self.evaluator.as_ref())?;
        self.table.generated = generated;
        Ok(())
    }

    /// Says that flow `flow` computed these rows from source table `source` as of its version
    /// `version`: the commit is refused if a statement removed rows of the source since.
    pub fn read_from(&mut self, source: &str, flow: &str, version: u64) {
        self.read = Some((source.to_string(), flow.to_string(), version));
    }

    /// Says that these rows follow on append flow `flow`'s checkpoint `checkpoint` (`None`: the
    /// flow never ran): the commit is refused if another run of the flow committed meanwhile.
    pub fn follows_checkpoint(&mut self, flow: &str, checkpoint: Option<u64>) {
        self.checkpoints.push((flow.to_string(), checkpoint));
    }

    /// Says that the rows this write removes were read when `written` rows had been written to
    /// the table ([`crate::Store::source_rows_positioned`]): a full refresh is refused if rows
    /// were written since (they would survive it).
    pub fn removes_all_of(&mut self, written: u64) {
        self.written = Some(written);
    }

    /// Adds `positions` to the rows the DML statement this write commits removes
    /// ([`crate::Store::begin_source_dml`]), as its queries yield them (in any order; a
    /// position given twice is removed once).
    pub fn remove(&mut self, positions: &[u64]) -> Result<()> {
        match &mut self.change {
            Some(change) => {
                change.deleted.extend_from_slice(positions);
                Ok(())
            }
            None => Err(Error::InvalidQuery(format!(
                "rows of `{}` are removed by a DML statement (Store::begin_source_dml), not by an append",
                self.table.name
            ))),
        }
    }

    /// How many rows the DML statement this write commits removes, so far.
    pub fn removed(&mut self) -> u64 {
        self.change.as_mut().map_or(0, |change| {
            change.deleted.sort_unstable();
            change.deleted.dedup();
            change.deleted.len() as u64
        })
    }

    /// Records `key = value` among the commit's parameters (an append flow's checkpoint, say).
    /// A write with parameters is committed even with no rows.
    pub fn set_parameter(&mut self, key: impl Into<String>, value: impl Into<String>) {
        self.parameters.insert(key.into(), value.into());
    }

    /// Checks `batch` against the table (columns matched by name and cast to its types, missing
    /// ones NULL) and adds it. On an error in its rows nothing of this batch is added; the write
    /// may still be dropped, and then nothing of the statement is written. On an error writing
    /// the temporary file that holds the chunks, the write cannot be committed.
    pub fn push(&mut self, batch: &RecordBatch) -> Result<()> {
        let given = batch.schema();
        let mut batch = self.table.conform(batch)?;
        if batch.num_rows() == 0 {
            return Ok(());
        }
        if !self.table.generated.is_empty() {
            batch = generated::fill(
                batch,
                &given,
                &self.table.columns,
                &self.table.generated,
                self.table.rows + self.rows,
                self.evaluator.as_ref(),
            )?;
        }
        for chunk in SourceTable::encode_chunks(&batch)? {
            self.chunks.push(chunk)?;
        }
        self.rows += batch.num_rows() as u64;
        Ok(())
    }

    /// Rows pushed so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// The name of the table written to.
    pub fn table(&self) -> &str {
        &self.table.name
    }
}

/// The commit parameter of a source's `ERASE` that lists the positions of the rows it removed,
/// as ranges (`3-7,12`).
pub(crate) const ERASED_ROWS: &str = "erased_rows";

/// The positions of the rows the `ERASE` commits of `history` removed, sorted.
pub(crate) fn erased_positions(history: &[crate::commit_info::CommitInfo]) -> Result<Vec<u64>> {
    let mut out = Vec::new();
    for c in history {
        out.extend(crate::positions::positions_in(c, ERASED_ROWS)?);
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}
