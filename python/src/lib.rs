//! `import asof`: a store opened in the Python process. Results leave as `pyarrow.Table`s
//! through the Arrow C stream interface, and rows come in the same way, so no value is copied
//! on the way across.

use std::sync::Mutex;

use arrow::array::{RecordBatch, RecordBatchIterator, RecordBatchReader};
use arrow::datatypes::{DataType, Field, Schema};
use arrow_pyarrow::{FromPyArrow, IntoPyArrow};
use asof_query::sql::{Output, SqlSession};
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
    fn with<T>(&self, f: impl FnOnce(&mut SqlSession) -> PyResult<T>) -> PyResult<T> {
        let mut guard = self
            .session
            .lock()
            .map_err(|_| err("an earlier call failed while it ran; reopen the store"))?;
        let session = guard.as_mut().ok_or_else(|| err("the store is closed"))?;
        f(session)
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
                SqlSession::new(store).map_err(|e| e.to_string())
            })
            .map_err(err)?;
        Ok(Database {
            session: Mutex::new(Some(session)),
        })
    }

    /// Runs `;`-separated statements, as `asof sql` does; returns the last query's rows, or the
    /// lines `asof sql` prints for statements that changed something.
    fn sql<'py>(&self, py: Python<'py>, statements: &str) -> PyResult<Bound<'py, PyAny>> {
        let outputs = self.with(|s| py.detach(|| s.execute(statements)).map_err(err))?;
        let mut last = None;
        let mut lines = Vec::new();
        for out in outputs {
            match out {
                Output::Batches(schema, batches) => last = Some((schema, batches)),
                Output::Done(line) => {
                    last = None;
                    lines.extend(line.lines().map(str::to_string));
                }
            }
        }
        let (schema, batches) = match last {
            Some(rows) => rows,
            None => {
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
                (schema, vec![batch])
            }
        };
        let reader: Box<dyn RecordBatchReader + Send> = Box::new(RecordBatchIterator::new(
            batches.into_iter().map(Ok),
            schema,
        ));
        // A pyarrow.RecordBatchReader over the C stream, read into a pyarrow.Table.
        reader.into_pyarrow(py)?.call_method0("read_all")
    }

    /// Appends rows to source table `source` as one commit; returns the table's row count after it.
    fn append(&self, py: Python<'_>, source: &str, data: &Bound<'_, PyAny>) -> PyResult<u64> {
        let batches = batches_of(py, data)?;
        self.with(|s| {
            let store = s.store().clone();
            py.detach(|| {
                let mut w = store.begin_append(source)?;
                for b in &batches {
                    w.push(b)?;
                }
                store.commit_write(w, None)
            })
            .map_err(err)
        })
    }

    /// The streaming tables.
    fn tables(&self) -> PyResult<Vec<String>> {
        self.with(|s| s.store().tables().map_err(err))
    }

    /// Closes the store.
    fn close(&self) -> PyResult<()> {
        let mut guard = self
            .session
            .lock()
            .map_err(|_| err("an earlier call failed while it ran"))?;
        guard.take();
        Ok(())
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(
        &self,
        _kind: &Bound<'_, PyAny>,
        _value: &Bound<'_, PyAny>,
        _traceback: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.close()
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
