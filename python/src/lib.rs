//! `import asof`: a store opened in the Python process. Results leave as `pyarrow.Table`s
//! through the Arrow C stream interface, and rows come in the same way, so no value is copied
//! on the way across.

use std::sync::Mutex;

use arrow::array::{RecordBatch, RecordBatchIterator, RecordBatchReader};
use arrow::datatypes::{DataType, Field, Schema};
use arrow_pyarrow::{FromPyArrow, IntoPyArrow};
use asof_query::sql::{Output, Results, SessionOptions, SqlSession};
use asof_storage::Store;
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyAny;

create_exception!(
    _asof,
    AsofError,
    PyException,
    "An error of asof, with the message `asof sql` prints."
);

fn err(e: impl std::fmt::Display) -> PyErr {
    AsofError::new_err(e.to_string())
}

/// A store, open in this process.
#[pyclass(module = "asof")]
struct Database {
    /// `None` once closed. A session runs one statement at a time.
    session: Mutex<Option<SqlSession>>,
}

impl Database {
    /// Runs `f` on the session with the GIL released: the lock is taken without it, so that a
    /// thread waiting for the session never holds the GIL the thread using it needs back.
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut SqlSession) -> Result<T, String> + Send,
    ) -> PyResult<T> {
        py.detach(|| {
            let mut guard = self
                .session
                .lock()
                .map_err(|_| "an earlier call failed while it ran; reopen the store".to_string())?;
            let session = guard.as_mut().ok_or("the store is closed")?;
            f(session)
        })
        .map_err(err)
    }
}

#[pymethods]
impl Database {
    #[new]
    fn new(py: Python<'_>, path: std::path::PathBuf) -> PyResult<Self> {
        let session = py
            .detach(|| {
                let store = Store::open(&path)
                    .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
                // Queries stream: `sql_reader` hands them over batch by batch, `sql` reads them whole.
                let options = SessionOptions::default().with_results(Results::Streamed);
                SqlSession::with_options(store, options).map_err(|e| e.to_string())
            })
            .map_err(err)?;
        Ok(Database {
            session: Mutex::new(Some(session)),
        })
    }

    /// Runs `;`-separated statements, as `asof sql` does; returns the last query's rows, or the
    /// lines `asof sql` prints for statements that changed something.
    fn sql<'py>(&self, py: Python<'py>, statements: &str) -> PyResult<Bound<'py, PyAny>> {
        let outputs = self.with(py, |s| s.execute(statements).map_err(|e| e.to_string()))?;
        let mut last = None;
        let mut lines = Vec::new();
        for out in outputs {
            match out {
                Output::Batches(schema, batches) => last = Some((schema, batches)),
                Output::Stream(schema, stream) => {
                    last = Some((schema, stream.collect::<Result<_, _>>().map_err(err)?));
                }
                Output::Done(line) => {
                    last = None;
                    lines.extend(line.lines().map(str::to_string));
                }
            }
        }
        let (schema, batches) = match last {
            Some(rows) => rows,
            None => lines_batch(lines)?,
        };
        let reader: Box<dyn RecordBatchReader + Send> = Box::new(RecordBatchIterator::new(
            batches.into_iter().map(Ok),
            schema,
        ));
        // A pyarrow.RecordBatchReader over the C stream, read into a pyarrow.Table.
        reader.into_pyarrow(py)?.call_method0("read_all")
    }

    /// Runs `;`-separated statements as `sql` does, and returns the last query's rows as a
    /// `pyarrow.RecordBatchReader` that computes them a batch at a time as it is read: a result
    /// larger than memory can go to a file (`pyarrow.parquet.ParquetWriter`) or be consumed batch
    /// by batch. The reader reads the tables as they were when it was made, whatever commits
    /// after (an ERASE, VACUUM or DROP of a table it reads stops it with an error). It keeps the
    /// store open until it is read to its end or released, `close()` or not. If the last statement
    /// changed something, the reader holds the lines `sql` returns.
    fn sql_reader<'py>(&self, py: Python<'py>, statements: &str) -> PyResult<Bound<'py, PyAny>> {
        let (last, lines) = self.with(py, |s| {
            let (mut last, mut lines) = (None, Vec::new());
            s.execute_script(statements, |out| match out {
                Output::Done(line) => {
                    last = None;
                    lines.extend(line.lines().map(str::to_string));
                }
                out => last = Some(out),
            })
            .map_err(|e| e.to_string())?;
            Ok((last, lines))
        })?;
        let to_arrow =
            |e: asof_query::QueryError| arrow::error::ArrowError::ExternalError(Box::new(e));
        let reader: Box<dyn RecordBatchReader + Send> = match last {
            Some(Output::Stream(schema, stream)) => Box::new(RecordBatchIterator::new(
                stream.map(move |b| b.map_err(to_arrow)),
                schema,
            )),
            Some(Output::Batches(schema, batches)) => Box::new(RecordBatchIterator::new(
                batches.into_iter().map(Ok),
                schema,
            )),
            Some(Output::Done(_)) | None => {
                let (schema, batches) = lines_batch(lines)?;
                Box::new(RecordBatchIterator::new(
                    batches.into_iter().map(Ok),
                    schema,
                ))
            }
        };
        reader.into_pyarrow(py)
    }

    /// Appends rows to source table `source` as one commit; returns the table's row count after it.
    fn append(&self, py: Python<'_>, source: &str, data: &Bound<'_, PyAny>) -> PyResult<u64> {
        let batches = batches_of(py, data)?;
        self.with(py, |s| {
            let store = s.store();
            let mut w = store.begin_append(source).map_err(|e| e.to_string())?;
            for b in &batches {
                w.push(b).map_err(|e| e.to_string())?;
            }
            store.commit_write(w, None).map_err(|e| e.to_string())
        })
    }

    /// The streaming tables.
    fn tables(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        self.with(py, |s| s.store().tables().map_err(|e| e.to_string()))
    }

    /// Closes the store.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        // Closes even after a call failed while it ran (a poisoned lock).
        py.detach(|| {
            let mut guard = self.session.lock().unwrap_or_else(|e| e.into_inner());
            guard.take();
        });
        Ok(())
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(
        &self,
        py: Python<'_>,
        _kind: &Bound<'_, PyAny>,
        _value: &Bound<'_, PyAny>,
        _traceback: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.close(py)
    }
}

/// The record batches of `data`: anything with the Arrow C stream interface (a pyarrow.Table,
/// a RecordBatchReader, a polars frame...), a pyarrow.RecordBatch, or a pandas.DataFrame (its
/// index left out).
fn batches_of(py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<Vec<RecordBatch>> {
    if let Ok(pandas) = py.import("pandas") {
        if data.is_instance(&pandas.getattr("DataFrame")?)? {
            let table = py
                .import("pyarrow")?
                .getattr("Table")?
                .call_method1("from_pandas", (data, py.None(), false))?;
            return batches_of(py, &table);
        }
    }
    if data.hasattr("__arrow_c_stream__")? {
        let reader = arrow::ffi_stream::ArrowArrayStreamReader::from_pyarrow_bound(data)?;
        return reader
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| PyValueError::new_err(e.to_string()));
    }
    if data.hasattr("__arrow_c_array__")? {
        return Ok(vec![RecordBatch::from_pyarrow_bound(data)?]);
    }
    Err(PyValueError::new_err(format!(
        "append takes a pyarrow.Table or RecordBatch, a pandas.DataFrame, or an object with __arrow_c_stream__, not {}",
        data.get_type().name()?
    )))
}

#[pymodule]
fn _asof(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Database>()?;
    m.add("AsofError", m.py().get_type::<AsofError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}

/// The lines `asof sql` prints for statements that changed something, as a one-column batch
/// (`result`).
fn lines_batch(lines: Vec<String>) -> PyResult<(arrow::datatypes::SchemaRef, Vec<RecordBatch>)> {
    let schema = std::sync::Arc::new(Schema::new(vec![Field::new(
        "result",
        DataType::Utf8,
        false,
    )]));
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![std::sync::Arc::new(arrow::array::StringArray::from(lines))],
    )
    .map_err(err)?;
    Ok((schema, vec![batch]))
}
