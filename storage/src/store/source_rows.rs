//! Reading a source table's rows: its stored chunks, decoded a few at a time from the key-value
//! store, never the whole table at once. A read is pinned to the moment it began (the rows
//! written by then, as they were then) and holds no lock while it reads: appends and DML
//! statements that land meanwhile are not seen. Only ERASE and DROP TABLE rewrite or delete
//! chunks; a read they overtake stops with [`Error::SourceRewritten`] instead of returning rows
//! that mix two states.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use arrow::array::{BooleanArray, RecordBatch};
use arrow::datatypes::SchemaRef;

use crate::error::{corrupt, Error, Result};
use crate::flow::ChangeCommits;
use crate::format::keys::{self, key};
use crate::kv::KvStore;
use crate::source::{PositionedRows, SourceTable, WRITE};

/// Which rows of a source table a read returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceRead {
    /// The rows there now: not erased, not removed by a DML statement.
    Now,
    /// The table as of its commit `version`: the rows written up to then, less those removed
    /// by then.
    AsOf(u64),
    /// The rows after the first `from` ever written (a flow's checkpoint, in which erased rows
    /// still count), as they are now; with [`ChangeCommits::Skip`], without the rows DML
    /// statements appended.
    After {
        /// Rows written before this position are not read.
        from: u64,
        /// What is done with the rows DML statements appended.
        change_commits: ChangeCommits,
    },
}

/// How many chunks one visit to the key-value store reads (each about 48 KiB of Arrow data).
const CHUNKS_PER_VISIT: usize = 8;

/// Counts the rewrites of source chunks (ERASE, DROP TABLE) in a store: a read that sees it
/// move while it reads stops.
#[derive(Clone, Default)]
pub(super) struct ChunkRewrites(Arc<AtomicU64>);

impl ChunkRewrites {
    /// Called before a batch that rewrites or deletes chunks is written.
    pub(super) fn bump(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }

    fn now(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// The rows of one read of a source table, batch by batch ([`super::Store::source_rows`]).
pub struct SourceRows {
    kv: Arc<dyn KvStore>,
    table: SourceTable,
    read: SourceRead,
    /// Rows at positions from `upto` on were written after the read's moment.
    upto: u64,
    /// The key of the next chunk to read; `None` once every chunk was read.
    next_key: Option<Vec<u8>>,
    /// The position of the next row of the next chunk.
    pos: u64,
    /// Index into `table.erased` of the first erased position not yet passed.
    hole: usize,
    decoded: VecDeque<RecordBatch>,
    /// Rows DML statements removed are read too.
    with_removed: bool,
    rewrites: ChunkRewrites,
    pinned: u64,
}

impl SourceRows {
    /// A read of `src` (its state now, the caller holding the store's lock) from `kv`.
    pub(super) fn new(
        kv: Arc<dyn KvStore>,
        src: &SourceTable,
        read: SourceRead,
        rewrites: &ChunkRewrites,
    ) -> Result<SourceRows> {
        if let SourceRead::AsOf(v) = read {
            if src.history.last().is_some_and(|c| c.version < v) {
                return Err(Error::InvalidQuery(format!(
                    "source table `{}` has no version {v}",
                    src.name
                )));
            }
        }
        // The latest version is the rows there now (read so, a table written before source
        // commit records included).
        let read = match read {
            SourceRead::AsOf(v) if src.history.last().is_none_or(|c| c.version == v) => {
                SourceRead::Now
            }
            read => read,
        };
        let upto = match read {
            SourceRead::AsOf(v) => src
                .history
                .iter()
                .filter(|c| c.version <= v && crate::source_dml::appends_rows(c, WRITE))
                .map(|c| c.metrics.num_upserted_rows)
                .sum(),
            _ => src.rows,
        };
        // An incremental read starts at the append that holds its first row.
        let (append, pos) = match read {
            SourceRead::After { from, .. } => first_append(src, from),
            _ => (0, 0),
        };
        let mut table = SourceTable::new(src.id, src.name.clone(), src.columns.clone());
        table.schema = src.schema.clone();
        // Only what `fit` asks of the history (whether columns were added): not a copy of it.
        table.history = src
            .history
            .iter()
            .filter(|c| c.operation == crate::source::ADD_COLUMNS)
            .cloned()
            .collect();
        table.erased = src.erased.clone();
        table.deleted = src.deleted.clone();
        table.changed = src.changed.clone();
        table.rows = src.rows;
        let hole = table.erased.partition_point(|&p| p < pos);
        Ok(SourceRows {
            kv,
            table,
            read,
            upto,
            next_key: Some(key(keys::APPEND, src.id, Some(append), None)),
            pos,
            hole,
            decoded: VecDeque::new(),
            with_removed: false,
            rewrites: rewrites.clone(),
            pinned: rewrites.now(),
        })
    }

    /// The table's schema (the schema of every batch).
    pub fn schema(&self) -> SchemaRef {
        self.table.schema.clone()
    }

    /// How many rows had been written to the table at the read's moment, or by the version it
    /// reads (erased and removed rows counted): what a flow's checkpoint counts.
    pub fn written(&self) -> u64 {
        self.upto
    }

    /// The next batch of rows, with the position of each; `None` at the end.
    pub fn next_positioned(&mut self) -> Result<Option<PositionedRows>> {
        loop {
            if self.pos >= self.upto && self.decoded.is_empty() {
                return Ok(None);
            }
            let Some(batch) = self.decoded.pop_front() else {
                if !self.read_chunks()? {
                    return self.finish();
                }
                continue;
            };
            let mut positions = Vec::with_capacity(batch.num_rows());
            let mut mask = Vec::with_capacity(batch.num_rows());
            for _ in 0..batch.num_rows() {
                while self.table.erased.get(self.hole) == Some(&self.pos) {
                    self.hole += 1;
                    self.pos += 1;
                }
                let keep = self.pos < self.upto && self.keeps(self.pos);
                if keep {
                    positions.push(self.pos);
                }
                mask.push(keep);
                self.pos += 1;
            }
            if positions.is_empty() {
                continue;
            }
            let rows = if positions.len() == batch.num_rows() {
                batch
            } else {
                arrow::compute::filter_record_batch(&batch, &BooleanArray::from(mask))
                    .map_err(|e| corrupt(format!("source `{}`: {e}", self.table.name)))?
            };
            return Ok(Some(PositionedRows { rows, positions }));
        }
    }

    /// The same read, with the rows DML statements removed (what the commits before them read).
    pub(super) fn with_removed(mut self) -> SourceRows {
        self.with_removed = true;
        self
    }

    /// An error if an ERASE or a DROP TABLE rewrote source chunks since the read began: for a
    /// caller that reads a table several times and needs each read to see the same rows.
    pub fn check_unchanged(&self) -> Result<()> {
        if self.rewrites.now() != self.pinned {
            return Err(Error::SourceRewritten {
                table: self.table.name.clone(),
            });
        }
        Ok(())
    }

    /// Reads all the rows into memory: for tables known to be small.
    pub fn collect_batches(self) -> Result<Vec<RecordBatch>> {
        self.collect()
    }

    /// Whether the row at `pos` (below `upto`, not erased) is read.
    fn keeps(&self, pos: u64) -> bool {
        let removed = match self.with_removed {
            true => None,
            false => self.table.deleted.get(pos),
        };
        match self.read {
            SourceRead::Now => removed.is_none(),
            SourceRead::AsOf(v) => removed.is_none_or(|r| r > v),
            SourceRead::After {
                from,
                change_commits,
            } => {
                let appended_by_dml = || {
                    self.table
                        .changed
                        .iter()
                        .any(|&(a, b)| (a..b).contains(&pos))
                };
                pos >= from
                    && removed.is_none()
                    && !(change_commits == ChangeCommits::Skip && appended_by_dml())
            }
        }
    }

    /// Decodes the next few chunks; `false` if there are none left.
    fn read_chunks(&mut self) -> Result<bool> {
        let Some(from) = self.next_key.take() else {
            return Ok(false);
        };
        let prefix = key(keys::APPEND, self.table.id, None, None);
        let mut last = None;
        for kv in self
            .kv
            .scan_prefix_from(&prefix, &from)
            .take(CHUNKS_PER_VISIT)
        {
            let (k, v) = kv?;
            for b in SourceTable::decode_chunk(&v)? {
                self.decoded.push_back(self.table.fit(b)?);
            }
            last = Some(k);
        }
        // Chunks read after an ERASE or a DROP TABLE began may not be those of the read's moment.
        if self.rewrites.now() != self.pinned {
            return Err(Error::SourceRewritten {
                table: self.table.name.clone(),
            });
        }
        match last {
            Some(mut k) => {
                // The smallest key after `k`.
                k.push(0);
                self.next_key = Some(k);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// The end of the chunks: every row written by the read's moment must have been seen.
    fn finish(&mut self) -> Result<Option<PositionedRows>> {
        while self.table.erased.get(self.hole) == Some(&self.pos) {
            self.hole += 1;
            self.pos += 1;
        }
        if self.pos < self.upto {
            return Err(corrupt(format!(
                "source `{}`: its commits record {} rows ({} erased), its chunks end at row {}",
                self.table.name,
                self.table.rows,
                self.table.erased.len(),
                self.pos
            )));
        }
        Ok(None)
    }
}

impl Iterator for SourceRows {
    type Item = Result<RecordBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_positioned()
            .transpose()
            .map(|r| r.map(|p| p.rows))
    }
}

/// The append that holds row `from` of `src` and the position of its first row; the first
/// append if the table's history does not count its appends (written before source commit
/// records).
fn first_append(src: &SourceTable, from: u64) -> (u64, u64) {
    let full_history = src
        .history
        .first()
        .is_some_and(|c| c.version == 0 && c.operation == "CREATE TABLE");
    if !full_history {
        return (0, 0);
    }
    let mut start = 0u64;
    let appends = src
        .history
        .iter()
        .filter(|c| crate::source_dml::appends_rows(c, WRITE));
    for (append, c) in appends.enumerate() {
        let n = c.metrics.num_upserted_rows;
        if from < start + n {
            return (append as u64, start);
        }
        start += n;
    }
    (src.appends, start)
}

/// Collected reads, for the few callers that need a whole (small) table.
pub(super) fn positioned_table(mut rows: SourceRows) -> Result<crate::source::PositionedTable> {
    let mut out = Vec::new();
    while let Some(p) = rows.next_positioned()? {
        out.push(p);
    }
    Ok(crate::source::PositionedTable {
        schema: rows.schema(),
        rows: out,
        written: rows.written(),
    })
}
