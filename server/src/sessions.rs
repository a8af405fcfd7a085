//! Statements run on blocking threads, each in a fresh SQL session over the one store: what a
//! request's text sets (`USE`, a declared streaming table) holds for that text only, as each
//! request of a Flight SQL client stands alone. At most `sessions` statements run at once.

use std::sync::Arc;

use arrow::array::{RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use asof_query::sql::{BatchStream, Output as SqlOutput, Results, SessionOptions, SqlSession};
use asof_query::QueryError;
use asof_storage::Store;
use tokio::sync::Semaphore;
use tonic::Status;

use crate::params;
use crate::results::Rows;
use crate::status::status;

/// What a request's statements gave.
pub(crate) enum Ran {
    /// The last statement was a query: its rows (a stream, if they were asked for as one).
    Rows(SchemaRef, Rows),
    /// Statements that changed something, each with the line `asof sql` prints for it.
    Done(Vec<String>),
}

impl Ran {
    /// As rows: a statement's lines are a one-column table (`result`), as the CLI prints them.
    pub(crate) fn into_rows(self) -> (SchemaRef, Rows) {
        match self {
            Ran::Rows(schema, rows) => (schema, rows),
            Ran::Done(lines) => {
                let schema = Arc::new(Schema::new(vec![Field::new(
                    "result",
                    DataType::Utf8,
                    false,
                )]));
                let batch =
                    RecordBatch::try_new(schema.clone(), vec![Arc::new(StringArray::from(lines))])
                        .expect("one string column");
                (schema, Rows::Batches(vec![batch]))
            }
        }
    }
}

/// The store and the statements running on it.
pub(crate) struct Sessions {
    store: Store,
    permits: Arc<Semaphore>,
}

impl Sessions {
    pub(crate) fn new(store: Store, sessions: usize) -> Sessions {
        Sessions {
            store,
            permits: Arc::new(Semaphore::new(sessions.max(1))),
        }
    }

    /// Computes the next batch of a query's `rows` on a blocking thread, holding a session
    /// permit meanwhile (a result read by `DoGet` counts towards `--sessions` while it computes,
    /// and no thread waits on a slow client); `rows` comes back with the batch.
    pub(crate) async fn next_batch(
        &self,
        mut rows: BatchStream,
    ) -> Result<(BatchStream, Option<RecordBatch>), Status> {
        let permit = self.permit().await?;
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let next = rows.next().transpose().map_err(|e| status(&e))?;
            Ok((rows, next))
        })
        .await
        .map_err(|e| Status::internal(format!("a query stopped: {e}")))?
    }

    /// One of the `--sessions` permits, once one is free.
    async fn permit(&self) -> Result<tokio::sync::OwnedSemaphorePermit, Status> {
        self.permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| Status::unavailable("asof serve is stopping"))
    }

    /// The store.
    pub(crate) fn store(&self) -> &Store {
        &self.store
    }

    /// Runs the `;`-separated statements of `sql`, once for each row of `params` if given (a
    /// prepared statement's parameters), else once; the last query's rows as `results` says.
    pub(crate) async fn run(
        &self,
        sql: String,
        params: Option<RecordBatch>,
        results: Results,
    ) -> Result<Ran, Status> {
        let permit = self.permit().await?;
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            run_blocking(store, &sql, params.as_ref(), results)
        })
        .await
        .map_err(|e| Status::internal(format!("a statement stopped: {e}")))?
    }
}

fn run_blocking(
    store: Store,
    sql: &str,
    params: Option<&RecordBatch>,
    results: Results,
) -> Result<Ran, Status> {
    let options = SessionOptions::default().with_results(results);
    let mut session = SqlSession::with_options(store, options).map_err(|e| status(&e))?;
    let texts = match params {
        None => vec![sql.to_string()],
        Some(p) => (0..p.num_rows())
            .map(|row| params::bind(sql, p, row))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| status(&QueryError::Invalid(e)))?,
    };
    let mut last = None;
    let mut lines = Vec::new();
    for text in texts {
        // Only the last statement's result is handed over as a stream: each earlier one is
        // read before the next statement runs.
        session
            .execute_script(&text, |out| match out {
                SqlOutput::Batches(schema, batches) => {
                    last = Some((schema, Rows::Batches(batches)))
                }
                SqlOutput::Stream(schema, stream) => last = Some((schema, Rows::Stream(stream))),
                SqlOutput::Done(line) => {
                    last = None;
                    lines.extend(line.lines().map(str::to_string));
                }
            })
            .map_err(|e| status(&e.error))?;
    }
    Ok(match last {
        Some((schema, rows)) => Ran::Rows(schema, rows),
        None => Ran::Done(lines),
    })
}
