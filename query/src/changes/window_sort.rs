//! The changes of a window of small commits that a change feed reads by spans of keys
//! (`ChangeFeed`), on their way through an external sort (`spill.rs`): each span lists its
//! changes commit by commit, and the feed lists them commit by commit over all the spans, each
//! commit's deletes first, each in key order. A record is a few rows of one span's changes of one
//! commit, keyed by the commit and whether they are deletes; records of the same key keep the
//! order they were pushed in, the spans' key order.

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use asof_storage::ChangePass;

use crate::error::{QueryError, Result};
use crate::spill::{Record, Sorted, Sorter};

/// The most rows of a record: the merge holds one record of each run it reads.
const RECORD_ROWS: usize = 1024;

/// What the sort holds in memory before it writes a run to a temporary file.
const SORT_BYTES: usize = 32 << 20;

/// A window's changes, sorted as they are pushed.
pub(super) struct WindowSort(Sorter);

impl WindowSort {
    pub(super) fn new() -> WindowSort {
        WindowSort(Sorter::new(SORT_BYTES))
    }

    /// Adds a span's changes of commit `version` that `pass` lists (`Deletes` or `Others`).
    pub(super) fn push(
        &mut self,
        version: u64,
        pass: ChangePass,
        batches: &[RecordBatch],
    ) -> Result<()> {
        let mut key = version.to_be_bytes().to_vec();
        key.push(u8::from(pass != ChangePass::Deletes));
        for b in batches {
            for at in (0..b.num_rows()).step_by(RECORD_ROWS) {
                let rows = b.slice(at, RECORD_ROWS.min(b.num_rows() - at));
                let payload = ipc_bytes(&rows)?;
                self.0.push(Record {
                    key: key.clone(),
                    payload,
                })?;
            }
        }
        Ok(())
    }

    /// The changes pushed, in order.
    pub(super) fn finish(self) -> Result<Draining> {
        Ok(Draining {
            sorted: self.0.finish()?,
            peeked: None,
        })
    }
}

/// A window's changes read back from its sort, in order.
pub(super) struct Draining {
    sorted: Sorted,
    peeked: Option<RecordBatch>,
}

impl Draining {
    /// The next changes, joined into a batch of about `rows` rows (of schema `out`); `None` at
    /// the end.
    pub(super) fn next_batch(
        &mut self,
        out: &SchemaRef,
        rows: usize,
    ) -> Result<Option<RecordBatch>> {
        let mut run = Vec::new();
        let mut held = 0;
        while held < rows {
            let b = match self.peeked.take() {
                Some(b) => b,
                None => match self.sorted.next() {
                    Some(record) => from_ipc(&record?.payload)?,
                    None => break,
                },
            };
            if held > 0 && held + b.num_rows() > 2 * rows {
                self.peeked = Some(b);
                break;
            }
            held += b.num_rows();
            run.push(b);
        }
        match run.len() {
            0 => Ok(None),
            1 => Ok(run.pop()),
            _ => Ok(Some(arrow::compute::concat_batches(out, &run)?)),
        }
    }
}

/// `batch` in Arrow's IPC stream format.
fn ipc_bytes(batch: &RecordBatch) -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    let mut w = arrow::ipc::writer::StreamWriter::try_new(&mut bytes, &batch.schema())?;
    w.write(batch)?;
    w.finish()?;
    drop(w);
    Ok(bytes)
}

/// The batch of a record.
fn from_ipc(bytes: &[u8]) -> Result<RecordBatch> {
    let mut r = arrow::ipc::reader::StreamReader::try_new(std::io::Cursor::new(bytes), None)?;
    r.next()
        .transpose()?
        .ok_or_else(|| QueryError::Invalid("a change feed's window lost a batch".into()))
}
