//! Which source row a flow's event came from (docs/SEMANTICS.md §7.5): the rows its commit read,
//! read through the flow again (a flow is deterministic), matched on the event's key, sequences
//! and kind. Nothing is stored for it: an id per event would cost space, this costs a read.

use std::ops::Range;

use super::key_log::LoggedEvent;
use super::source_rows::{SourceRead, SourceRows};
use super::Store;
use crate::error::Result;
use crate::flow::ChangeCommits;
use crate::format::keys::{self, key};
use crate::ingest::prepare;

/// A source row, where an event came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceRow {
    /// Its position in the source table, counted over every row ever appended (from 0).
    pub position: u64,
    /// The append that wrote it (from 0).
    pub append: u64,
    /// Its position within that append (from 0): for a file loaded by `read_files`, its row in
    /// the file.
    pub row_in_append: u64,
    /// The name the append was loaded under (the file of a `read_files` flow), if any.
    pub file: Option<String>,
}

impl Store {
    /// The row of its source that flow `flow` of `table` read as `event`, among the rows `rows`
    /// (positions counted over every row ever appended) its commit read; `None` if none of them
    /// gives that event now (the flow was redefined since, or the row was erased).
    pub fn source_row_of(
        &self,
        table: &str,
        flow: &str,
        rows: Range<u64>,
        event: &LoggedEvent,
    ) -> Result<Option<SourceRow>> {
        let source = {
            let g = self.read_inner()?;
            match &g.table(table)?.flow(flow)?.spec.source_table {
                Some(s) => s.clone(),
                None => return Ok(None),
            }
        };
        let g = self.read_inner()?;
        let t = g.table(table)?;
        let f = t.flow(flow)?;
        let Some(src) = g.sources.get(&source) else {
            return Ok(None);
        };
        let ts = t
            .commits
            .iter()
            .find(|c| c.version == event.version)
            .map_or(0, |c| c.timestamp_us);
        let read = SourceRead::After {
            from: rows.start,
            change_commits: ChangeCommits::Read,
        };
        // Rows a DML statement removed since were read by the commit all the same.
        let mut read = SourceRows::new(g.kv.clone(), src, read, &g.rewrites)?.with_removed();
        let (k, s, y) = &event.logged;
        while let Some(batch) = read.next_positioned()? {
            for (i, &position) in batch.positions.iter().enumerate() {
                if position >= rows.end {
                    return Ok(None);
                }
                let row = batch.rows.slice(i, 1);
                if let Ok((events, _)) = prepare(f, &row, g.evaluator.as_ref(), ts) {
                    let same = events
                        .iter()
                        .any(|e| (&e.key, &e.seq, &e.sys, e.event.kind) == (k, s, y, event.kind));
                    if same {
                        return Ok(Some(g.source_row_at(&source, position)?));
                    }
                }
            }
        }
        Ok(None)
    }
}

impl super::Inner {
    /// Where row `position` of source `source` was appended, and under which name.
    fn source_row_at(&self, source: &str, position: u64) -> Result<SourceRow> {
        let src = &self.sources[source];
        let mut start = 0;
        let mut append = 0;
        for c in src
            .history
            .iter()
            .filter(|c| crate::source_dml::appends_rows(c, super::sources::WRITE))
        {
            let n = c.metrics.num_upserted_rows;
            if position < start + n {
                break;
            }
            start += n;
            append += 1;
        }
        let file = self
            .kv
            .get(&key(keys::LOADED, src.id, Some(append), None))?
            .map(|v| String::from_utf8_lossy(&v).into_owned());
        Ok(SourceRow {
            position,
            append,
            row_in_append: position - start,
            file,
        })
    }
}
