//! The change feed of a table as a table an append flow's query streams (`FROM STREAM(t) WITH
//! (readChangeFeed = true)`), a window of commits at a time, as `table_changes` reads it; with
//! `skipChangeCommits`, without the commits that changed or deleted rows.

use std::sync::Arc;

use asof_storage::ChangeCommits;

use crate::changes::ChangeBound;
use crate::error::{QueryError, Result};

/// The columns of the change feed of `table`.
pub(super) fn feed_schema(
    store: &asof_storage::Store,
    table: &str,
) -> Result<arrow::datatypes::SchemaRef> {
    let (from, to) = (ChangeBound::Version(0), ChangeBound::Version(0));
    Ok(crate::changes::change_feed(store, table, &from, Some(&to))?.schema())
}

/// The change feed of `table` from commit `from` to `to`, as a table a query streams a window of
/// commits at a time, as `table_changes` does; with `ChangeCommits::Skip`, without the commits
/// that changed or deleted rows (`skipChangeCommits`).
pub(super) fn feed_table(
    store: &asof_storage::Store,
    table: &str,
    (from, to): (u64, u64),
    change_commits: ChangeCommits,
    progress: Option<Arc<dyn asof_storage::Progress>>,
) -> Result<Arc<dyn datafusion::catalog::TableProvider>> {
    let (start, end) = (ChangeBound::Version(from), ChangeBound::Version(to));
    let schema = crate::changes::change_feed(store, table, &start, Some(&end))?.schema();
    let (store, name) = (store.clone(), table.to_string());
    let to_df = |e: QueryError| datafusion::error::DataFusionError::External(Box::new(e));
    let open: super::provider::OpenBatches = Box::new(move || {
        let mut feed =
            crate::changes::change_feed(&store, &name, &start, Some(&end)).map_err(to_df)?;
        if let Some(p) = &progress {
            feed = feed.with_progress(p.clone());
        }
        let feed = feed.map(move |b| b.map_err(to_df));
        Ok(match change_commits {
            ChangeCommits::Skip => Box::new(InsertCommits::new(feed)),
            _ => Box::new(feed),
        })
    });
    Ok(Arc::new(super::provider::RowsTable::reopened(
        table, schema, open,
    )))
}

/// A change feed without the commits that changed or deleted rows (any row whose
/// `_change_type` is not `insert`): `skipChangeCommits`. Each commit's rows are held until its
/// last (the feed lists commits in order), then given if all are inserts.
struct InsertCommits<I> {
    feed: I,
    /// The commit being read, whether a row of it was not an insert, and its rows so far.
    commit: Option<(i64, bool, Vec<arrow::array::RecordBatch>)>,
    ready: std::collections::VecDeque<arrow::array::RecordBatch>,
    ended: bool,
}

impl<I> InsertCommits<I> {
    fn new(feed: I) -> Self {
        InsertCommits {
            feed,
            commit: None,
            ready: Default::default(),
            ended: false,
        }
    }

    /// The commit read so far is whole: its rows are given if all were inserts.
    fn close_commit(&mut self) {
        if let Some((_, false, rows)) = self.commit.take() {
            self.ready.extend(rows);
        }
    }

    /// Takes `b`, cut where its commit changes.
    fn take(&mut self, b: &arrow::array::RecordBatch) -> datafusion::error::Result<()> {
        use arrow::array::{Array, AsArray};
        let column = |name: &str| {
            b.column_by_name(name).cloned().ok_or_else(|| {
                datafusion::error::DataFusionError::Internal(format!(
                    "the change feed has no `{name}`"
                ))
            })
        };
        let (kinds, versions) = (column("_change_type")?, column("_commit_version")?);
        let (kinds, versions) = (
            kinds.as_string::<i32>(),
            versions.as_primitive::<arrow::datatypes::Int64Type>(),
        );
        let mut start = 0;
        while start < b.num_rows() {
            let v = versions.value(start);
            let mut end = start;
            let mut changed = false;
            while end < b.num_rows() && versions.value(end) == v {
                changed |= kinds.is_valid(end) && kinds.value(end) != "insert";
                end += 1;
            }
            if self.commit.as_ref().is_some_and(|(c, _, _)| *c != v) {
                self.close_commit();
            }
            let (_, was_changed, rows) = self.commit.get_or_insert((v, false, Vec::new()));
            *was_changed |= changed;
            if *was_changed {
                rows.clear();
            } else {
                rows.push(b.slice(start, end - start));
            }
            start = end;
        }
        Ok(())
    }
}

impl<I> Iterator for InsertCommits<I>
where
    I: Iterator<Item = datafusion::error::Result<arrow::array::RecordBatch>>,
{
    type Item = datafusion::error::Result<arrow::array::RecordBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(b) = self.ready.pop_front() {
                return Some(Ok(b));
            }
            if self.ended {
                return None;
            }
            match self.feed.next() {
                Some(Ok(b)) => {
                    if let Err(e) = self.take(&b) {
                        self.ended = true;
                        return Some(Err(e));
                    }
                }
                Some(Err(e)) => {
                    self.ended = true;
                    return Some(Err(e));
                }
                None => {
                    self.close_commit();
                    self.ended = true;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::InsertCommits;
    use arrow::array::{Int64Array, RecordBatch, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use std::sync::Arc;

    fn batch(rows: &[(i64, &str)]) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("_change_type", DataType::Utf8, false),
            Field::new("_commit_version", DataType::Int64, false),
        ]));
        let kinds: StringArray = rows.iter().map(|(_, k)| Some(*k)).collect();
        let versions: Int64Array = rows.iter().map(|(v, _)| Some(*v)).collect();
        RecordBatch::try_new(schema, vec![Arc::new(kinds), Arc::new(versions)]).unwrap()
    }

    /// Commits cut across batches, and batches that hold several commits: only the commits
    /// whose every row is an insert come out, whole, in order.
    #[test]
    fn only_commits_of_inserts_pass_however_the_feed_is_batched() {
        let feed = vec![
            batch(&[(1, "insert"), (1, "insert"), (2, "insert")]),
            batch(&[
                (2, "update_preimage"),
                (2, "update_postimage"),
                (3, "insert"),
            ]),
            batch(&[(3, "insert"), (4, "delete")]),
            batch(&[(5, "insert")]),
        ];
        let out: Vec<(i64, String)> = InsertCommits::new(feed.into_iter().map(Ok))
            .flat_map(|b| {
                let b = b.unwrap();
                let kinds = b
                    .column(0)
                    .as_any()
                    .downcast_ref::<StringArray>()
                    .unwrap()
                    .clone();
                let versions = b
                    .column(1)
                    .as_any()
                    .downcast_ref::<Int64Array>()
                    .unwrap()
                    .clone();
                (0..b.num_rows())
                    .map(move |i| (versions.value(i), kinds.value(i).to_string()))
                    .collect::<Vec<_>>()
            })
            .collect();
        let want: Vec<(i64, String)> = [
            (1, "insert"),
            (1, "insert"),
            (3, "insert"),
            (3, "insert"),
            (5, "insert"),
        ]
        .iter()
        .map(|(v, k)| (*v, k.to_string()))
        .collect();
        assert_eq!(out, want);
    }
}
