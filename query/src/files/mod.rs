//! Files as sources: `read_files('path', format => 'csv' | 'json' | 'parquet', ...)` over one file
//! or a folder, with the schema inferred the way Databricks' `read_files` / Auto Loader does.
//!
//! - A folder is read recursively, in path order; names starting with `_` or `.` are skipped
//!   (Spark's convention for hidden and marker files such as `_SUCCESS`).
//! - `format` defaults to the extension of the first file (`.csv`, `.json`/`.jsonl`/`.ndjson`,
//!   `.parquet`).
//! - CSV options: `header` (default `false`, as in Databricks; without a header the columns are
//!   `_c0`, `_c1`, ...), `sep` or `delimiter` (default `,`), `quote`, `escape`. An empty field is
//!   NULL. Column types are inferred over every file (integers, floats, booleans, dates,
//!   timestamps, else strings).
//! - JSON is JSON Lines, one object per line, types inferred over every file; with `multiLine =>
//!   true`, whole JSON values over any number of lines (`multiline.rs`).
//! - The schemas of several files are merged by column name; a column whose types disagree is an
//!   error that names it and both files.
//! - `schemaHints => 'a INT, b STRING'` gives columns their types (`hints.rs`); a value that does
//!   not fit, and a column a later file adds, are an error, or with `rescuedDataColumn =>
//!   '_rescued_data'` go to that column as JSON (`conform.rs`).
//! - A file whose size or modification time changed within the last 100 ms, and changes again
//!   while a refresh waits for it, is still being written: it is left for the next refresh
//!   ([`FileSource::settled`], `settle.rs`).

mod conform;
mod hints;
mod multiline;
mod settle;
mod snapshot_dirs;

use std::fs::File;
use std::io::{BufReader, Seek};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::{Field, Schema, SchemaRef};

use crate::error::{QueryError, Result};

/// The file formats `read_files` understands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum FileFormat {
    /// Comma-separated values (RFC 4180 quoting).
    Csv,
    /// JSON Lines: one object per line.
    Json,
    /// Apache Parquet.
    Parquet,
}

/// What `read_files` was asked for: a path and its options.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct FileSource {
    /// A file or a folder.
    pub path: PathBuf,
    /// The format; `None` means "from the file extension".
    pub format: Option<FileFormat>,
    /// CSV: the first line names the columns.
    pub header: bool,
    /// CSV: the field separator.
    pub delimiter: u8,
    /// CSV: the quote character.
    pub quote: u8,
    /// CSV: the escape character, if any.
    pub escape: Option<u8>,
    /// Whether a flow created over the path loads the files already there
    /// (`includeExistingFiles`).
    #[serde(default, skip_serializing_if = "ExistingFiles::is_include")]
    pub existing: ExistingFiles,
    /// JSON: whole values over any number of lines (`multiLine`), not one object per line.
    #[serde(default, skip_serializing_if = "JsonLayout::is_lines")]
    pub json: JsonLayout,
    /// Column types given by name (`schemaHints`), as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema_hints: Option<String>,
    /// The column that keeps values that do not fit the schema (`rescuedDataColumn`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rescued_column: Option<String>,
    /// A folder of snapshots (`AUTO CDC FROM SNAPSHOT read_files(...)`): the column that names
    /// each row's file, the snapshot it belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_column: Option<String>,
    /// What a column that a later file adds does (`schemaEvolutionMode`).
    #[serde(default, skip_serializing_if = "SchemaEvolution::is_none")]
    pub evolution: SchemaEvolution,
}

/// What a column that a later file adds does to a `read_files` flow's table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum SchemaEvolution {
    /// It is an error (or goes to the rescued data column), as today by default.
    #[default]
    None,
    /// The table gains the column; rows read before read it NULL (`addNewColumns`).
    AddNewColumns,
}

impl SchemaEvolution {
    fn is_none(&self) -> bool {
        *self == SchemaEvolution::None
    }
}

/// How JSON files hold their rows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum JsonLayout {
    /// JSON Lines: one object per line (the default).
    #[default]
    Lines,
    /// Whole JSON values over any number of lines, each an object or an array of objects
    /// (`multiLine => true`).
    MultiLine,
}

impl JsonLayout {
    fn is_lines(&self) -> bool {
        *self == JsonLayout::Lines
    }
}

/// Whether a flow over files loads those already there when it is created.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ExistingFiles {
    /// They are loaded, as every later one (the default).
    #[default]
    Include,
    /// They are taken as loaded, without their rows (`includeExistingFiles => false`): the flow
    /// reads only files that appear after it was created.
    Skip,
}

impl ExistingFiles {
    fn is_include(&self) -> bool {
        *self == ExistingFiles::Include
    }
}

impl FileSource {
    /// A source over `path` with Databricks' default options.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        FileSource {
            path: path.into(),
            format: None,
            header: false,
            delimiter: b',',
            quote: b'"',
            escape: None,
            existing: ExistingFiles::Include,
            json: JsonLayout::Lines,
            schema_hints: None,
            rescued_column: None,
            snapshot_column: None,
            evolution: SchemaEvolution::None,
        }
    }

    /// Sets an option given as `name => 'value'` in SQL. Names are case-insensitive.
    pub fn set_option(&mut self, name: &str, value: &str) -> Result<()> {
        let byte = |what: &str| -> Result<u8> {
            match value.as_bytes() {
                [b] => Ok(*b),
                _ if value == "\\t" => Ok(b'\t'),
                _ => Err(QueryError::Invalid(format!(
                    "read_files option `{what}` takes one character, not `{value}`"
                ))),
            }
        };
        let flag = |what: &str| -> Result<bool> {
            match value.to_ascii_lowercase().as_str() {
                "true" => Ok(true),
                "false" => Ok(false),
                _ => Err(QueryError::Invalid(format!(
                    "read_files option `{what}` is true or false, not `{value}`"
                ))),
            }
        };
        match name.to_ascii_lowercase().as_str() {
            "format" => {
                self.format = Some(match value.to_ascii_lowercase().as_str() {
                    "csv" => FileFormat::Csv,
                    "json" => FileFormat::Json,
                    "parquet" => FileFormat::Parquet,
                    other => {
                        return Err(QueryError::Invalid(format!(
                            "read_files cannot read format `{other}` (csv, json or parquet)"
                        )))
                    }
                })
            }
            "header" => self.header = flag("header")?,
            "sep" | "delimiter" => self.delimiter = byte("sep")?,
            "quote" => self.quote = byte("quote")?,
            "escape" => self.escape = Some(byte("escape")?),
            "includeexistingfiles" => {
                self.existing = match flag("includeExistingFiles")? {
                    true => ExistingFiles::Include,
                    false => ExistingFiles::Skip,
                }
            }
            "multiline" => {
                self.json = match flag("multiLine")? {
                    true => JsonLayout::MultiLine,
                    false => JsonLayout::Lines,
                }
            }
            "schemahints" => {
                hints::parse(value)?;
                self.schema_hints = Some(value.to_string());
            }
            "schemaevolutionmode" => {
                self.evolution = match value.to_ascii_lowercase().as_str() {
                    "addnewcolumns" => SchemaEvolution::AddNewColumns,
                    "none" | "failonnewcolumns" => SchemaEvolution::None,
                    _ => {
                        return Err(QueryError::Invalid(format!(
                            "read_files option `schemaEvolutionMode` takes 'addNewColumns' or 'none', not '{value}'"
                        )))
                    }
                };
            }
            "rescueddatacolumn" => {
                if value.is_empty() {
                    return Err(QueryError::Invalid(
                        "read_files option `rescuedDataColumn` names a column".into(),
                    ));
                }
                self.rescued_column = Some(value.to_string());
            }
            // Accepted for compatibility; types are always inferred.
            "infercolumntypes" | "inferschema" => {}
            other => {
                return Err(QueryError::Invalid(format!(
                    "read_files has no option `{other}` here (format, header, sep, quote, escape, includeExistingFiles, multiLine, schemaHints, rescuedDataColumn)"
                )))
            }
        }
        Ok(())
    }

    /// Of `new` files (not loaded yet), those whose size and modification time have not changed
    /// for 100 ms (`settle.rs`), in their order, and how many were left for the next refresh (still being
    /// written).
    pub fn settled(new: Vec<PathBuf>) -> (Vec<PathBuf>, usize) {
        settle::settled(new)
    }

    /// For a snapshot folder: the snapshot `file` belongs to (its subfolder, or its own name;
    /// `snapshot_dirs.rs`).
    pub fn snapshot_name(&self, file: &Path) -> String {
        snapshot_dirs::snapshot_name(&self.path, file)
    }

    /// For a snapshot folder: of the `new` files, those whose snapshot is complete (files of
    /// the folder itself, and of subfolders that hold `_SUCCESS`).
    pub fn snapshots_ready(&self, new: Vec<PathBuf>) -> Vec<PathBuf> {
        snapshot_dirs::ready(&self.path, new)
    }

    /// For a snapshot folder: `settled` without the subfolders some of whose `wanted` files are
    /// still being written.
    pub fn whole_snapshots(&self, settled: Vec<PathBuf>, wanted: &[PathBuf]) -> Vec<PathBuf> {
        snapshot_dirs::whole(&self.path, settled, wanted)
    }

    /// The files this source covers, in path order.
    pub fn list(&self) -> Result<Vec<PathBuf>> {
        if let Some((base, pattern)) = self.glob() {
            let within = FileSource {
                path: base.clone(),
                ..self.clone()
            };
            return Ok(within
                .list()?
                .into_iter()
                .filter(|f| {
                    let rel: Vec<String> = f
                        .strip_prefix(&base)
                        .map(|r| {
                            r.components()
                                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                                .collect()
                        })
                        .unwrap_or_default();
                    rel.len() >= pattern.len()
                        && pattern.iter().zip(&rel).all(|(p, n)| glob_match(p, n))
                })
                .collect());
        }
        let meta = std::fs::metadata(&self.path).map_err(|e| {
            QueryError::Invalid(format!(
                "read_files: cannot read {}: {e}",
                self.path.display()
            ))
        })?;
        if meta.is_file() {
            return Ok(vec![self.path.clone()]);
        }
        let mut out = Vec::new();
        let mut dirs = vec![self.path.clone()];
        while let Some(d) = dirs.pop() {
            let entries = std::fs::read_dir(&d).map_err(|e| {
                QueryError::Invalid(format!("read_files: cannot list {}: {e}", d.display()))
            })?;
            for e in entries {
                let e = e.map_err(|e| QueryError::Invalid(format!("read_files: {e}")))?;
                let name = e.file_name();
                let name = name.to_string_lossy();
                if name.starts_with('_') || name.starts_with('.') {
                    continue;
                }
                let p = e.path();
                if p.is_dir() {
                    dirs.push(p);
                } else {
                    out.push(p);
                }
            }
        }
        out.sort();
        Ok(out)
    }

    /// A path with `*` or `?` in it (`landing/*/2025-*/*.json`): the folder before the first
    /// such part, and the parts from there on.
    fn glob(&self) -> Option<(PathBuf, Vec<String>)> {
        let parts: Vec<String> = self
            .path
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let first = parts.iter().position(|p| p.contains(['*', '?']))?;
        let base: PathBuf = self.path.components().take(first).collect();
        Some((base, parts[first..].to_vec()))
    }

    /// The source with its folder made absolute (a glob keeps its pattern), so that it names the
    /// same files from anywhere.
    pub fn canonical(&self) -> Result<FileSource> {
        let (base, pattern) = self
            .glob()
            .unwrap_or_else(|| (self.path.clone(), Vec::new()));
        let base = if base.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            base
        };
        let mut path = std::fs::canonicalize(&base).map_err(|e| {
            QueryError::Invalid(format!("read_files: cannot read {}: {e}", base.display()))
        })?;
        path.extend(pattern);
        Ok(FileSource {
            path,
            ..self.clone()
        })
    }

    fn format_of(&self, file: &Path) -> Result<FileFormat> {
        if let Some(f) = self.format {
            return Ok(f);
        }
        match file
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            Some("csv") => Ok(FileFormat::Csv),
            Some("json" | "jsonl" | "ndjson") => Ok(FileFormat::Json),
            Some("parquet") => Ok(FileFormat::Parquet),
            _ => Err(QueryError::Invalid(format!(
                "read_files: cannot tell the format of {}; give format => 'csv' | 'json' | 'parquet'",
                file.display()
            ))),
        }
    }

    /// The schema inferred over `files`, merged by column name, with the types `schemaHints`
    /// gives and the rescued data column.
    pub fn infer(&self, files: &[PathBuf]) -> Result<SchemaRef> {
        let hints = match &self.schema_hints {
            Some(h) => hints::parse(h)?,
            None => Vec::new(),
        };
        let hinted = |name: &str| hints.iter().find(|h| h.name().eq_ignore_ascii_case(name));
        let mut merged: Vec<(Field, PathBuf)> = Vec::new();
        for file in files {
            let schema = self.infer_one(file)?;
            // A repeated name would make one column shadow the other: refuse it.
            let names: Vec<&String> = schema.fields().iter().map(|f| f.name()).collect();
            for (i, n) in names.iter().enumerate() {
                if let Some(j) = names[..i].iter().position(|m| m == n) {
                    return Err(QueryError::Invalid(format!(
                        "read_files: {}: the header names column `{n}` twice (columns {} and {}); rename one",
                        file.display(),
                        j + 1,
                        i + 1
                    )));
                }
            }
            for f in schema.fields() {
                match merged.iter_mut().find(|(m, _)| m.name() == f.name()) {
                    None => merged.push((f.as_ref().clone().with_nullable(true), file.clone())),
                    Some((m, from)) => {
                        // A hinted column takes its hint's type, whatever the files say.
                        if m.data_type() == f.data_type()
                            || f.data_type().is_null()
                            || hinted(f.name()).is_some()
                        {
                            continue;
                        }
                        if m.data_type().is_null() {
                            *m = f.as_ref().clone().with_nullable(true);
                            continue;
                        }
                        // Integers that meet floats widen, as Spark's inference does.
                        if m.data_type().is_numeric() && f.data_type().is_numeric() {
                            *m = m
                                .clone()
                                .with_data_type(arrow::datatypes::DataType::Float64);
                            continue;
                        }
                        return Err(QueryError::Invalid(format!(
                            "read_files: column `{}` is {} in {} but {} in {}",
                            f.name(),
                            m.data_type(),
                            from.display(),
                            f.data_type(),
                            file.display()
                        )));
                    }
                }
            }
        }
        if merged.is_empty() {
            return Err(QueryError::Invalid(format!(
                "read_files: no columns found under {}",
                self.path.display()
            )));
        }
        let mut fields: Vec<Field> = merged
            .into_iter()
            .map(|(f, _)| match hinted(f.name()) {
                Some(h) => f.with_data_type(h.data_type().clone()),
                None => f,
            })
            .collect();
        for h in &hints {
            if !fields
                .iter()
                .any(|f| f.name().eq_ignore_ascii_case(h.name()))
            {
                fields.push(h.clone());
            }
        }
        if let Some(r) = &self.rescued_column {
            if fields.iter().any(|f| f.name() == r) {
                return Err(QueryError::Invalid(format!(
                    "read_files: the files have a column `{r}`; name the rescued data column otherwise"
                )));
            }
            fields.push(conform::rescued_field(r));
        }
        Ok(Arc::new(Schema::new(fields)))
    }

    fn open(file: &Path) -> Result<File> {
        File::open(file).map_err(|e| {
            QueryError::Invalid(format!("read_files: cannot open {}: {e}", file.display()))
        })
    }

    fn infer_one(&self, file: &Path) -> Result<Schema> {
        let bad = |e: &dyn std::fmt::Display| {
            QueryError::Invalid(format!("read_files: {}: {e}", file.display()))
        };
        match self.format_of(file)? {
            FileFormat::Csv => {
                let (schema, _) = self
                    .csv_format()
                    .infer_schema(Self::open(file)?, None)
                    .map_err(|e| bad(&e))?;
                Ok(if self.header {
                    schema
                } else {
                    Schema::new(
                        schema
                            .fields()
                            .iter()
                            .enumerate()
                            .map(|(i, f)| f.as_ref().clone().with_name(format!("_c{i}")))
                            .collect::<Vec<_>>(),
                    )
                })
            }
            FileFormat::Json if self.json == JsonLayout::MultiLine => multiline::infer(file),
            FileFormat::Json => {
                let mut r = BufReader::new(Self::open(file)?);
                let (schema, _) =
                    arrow::json::reader::infer_json_schema(&mut r, None).map_err(|e| bad(&e))?;
                Ok(schema)
            }
            FileFormat::Parquet => parquet_guard(file, || {
                let b = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
                    Self::open(file)?,
                )
                .map_err(|e| bad(&e))?;
                Ok(b.schema().as_ref().clone())
            }),
        }
    }

    fn csv_format(&self) -> arrow::csv::reader::Format {
        let mut f = arrow::csv::reader::Format::default()
            .with_header(self.header)
            .with_delimiter(self.delimiter)
            .with_quote(self.quote)
            .with_null_regex(regex::Regex::new("^$").expect("valid regex"));
        if let Some(e) = self.escape {
            f = f.with_escape(e);
        }
        f
    }

    /// Reads one file under `schema` (from [`FileSource::infer`]); columns a file lacks are NULL,
    /// values that do not fit are an error or rescued ([`conform`]).
    pub fn read(&self, file: &Path, schema: &SchemaRef) -> Result<Vec<RecordBatch>> {
        let own = Arc::new(self.infer_one(file)?);
        // The file's columns read as the table types them: text stays as written, decimals are
        // exact, and a value that does not parse is an error naming the file.
        let typed = Arc::new(Schema::new(
            own.fields()
                .iter()
                .map(|f| {
                    schema
                        .field_with_name(f.name())
                        .cloned()
                        .unwrap_or_else(|_| f.as_ref().clone())
                })
                .collect::<Vec<_>>(),
        ));
        let rescued = self.rescued_column.as_deref();
        let conform = |batches: Vec<RecordBatch>| -> Result<Vec<RecordBatch>> {
            batches
                .iter()
                .map(|b| conform::conform(b, schema, file, rescued))
                .collect()
        };
        // The file's own types, but text where the table keeps text (so that it stays as written).
        let own_or_text = Arc::new(Schema::new(
            own.fields()
                .iter()
                .zip(typed.fields())
                .map(|(o, t)| match t.data_type() {
                    arrow::datatypes::DataType::Utf8 => t.as_ref().clone(),
                    _ => o.as_ref().clone(),
                })
                .collect::<Vec<_>>(),
        ));
        match self.read_as(file, &typed) {
            Ok(batches) => conform(batches),
            // Some value does not parse as its column's type: read with the file's own types,
            // `conform` finds each value that does not fit, and rescues them or names them.
            Err(e) => match self.read_as(file, &own_or_text).and_then(conform) {
                Ok(batches) if rescued.is_some() => Ok(batches),
                Ok(_) => Err(e),
                Err(named) => Err(named),
            },
        }
    }

    /// The rows of `file` read with the types of `read_schema` (Parquet: its own).
    fn read_as(&self, file: &Path, read_schema: &SchemaRef) -> Result<Vec<RecordBatch>> {
        let bad = |e: &dyn std::fmt::Display| {
            QueryError::Invalid(format!("read_files: {}: {e}", file.display()))
        };
        let batches: Vec<RecordBatch> = match self.format_of(file)? {
            FileFormat::Csv => {
                let mut b = arrow::csv::ReaderBuilder::new(read_schema.clone())
                    .with_header(self.header)
                    .with_delimiter(self.delimiter)
                    .with_quote(self.quote)
                    .with_null_regex(regex::Regex::new("^$").expect("valid regex"))
                    .with_batch_size(64 * 1024);
                if let Some(e) = self.escape {
                    b = b.with_escape(e);
                }
                b.build(Self::open(file)?)
                    .map_err(|e| bad(&e))?
                    .collect::<Result<_, _>>()
                    .map_err(|e| bad(&e))?
            }
            FileFormat::Json if self.json == JsonLayout::MultiLine => {
                multiline::read(file, read_schema)?
            }
            FileFormat::Json => {
                let mut f = Self::open(file)?;
                f.rewind().map_err(|e| bad(&e))?;
                // A number or a boolean read into a text column is its JSON text.
                arrow::json::ReaderBuilder::new(read_schema.clone())
                    .with_coerce_primitive(true)
                    .with_batch_size(64 * 1024)
                    .build(BufReader::new(f))
                    .map_err(|e| bad(&e))?
                    .collect::<Result<_, _>>()
                    .map_err(|e| bad(&e))?
            }
            FileFormat::Parquet => parquet_guard(file, || {
                parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(Self::open(
                    file,
                )?)
                .map_err(|e| bad(&e))?
                .with_batch_size(64 * 1024)
                .build()
                .map_err(|e| bad(&e))?
                .collect::<Result<_, _>>()
                .map_err(|e| bad(&e))
            })?,
        };
        Ok(batches)
    }
}

/// Runs a Parquet read. The parquet crate can panic on a damaged file instead of returning an
/// error (found by fuzzing, `tests/data/fuzz/read_parquet`); that is an error here.
fn parquet_guard<T>(file: &Path, f: impl FnOnce() -> Result<T>) -> Result<T> {
    asof_storage::catch_panic(f).unwrap_or_else(|msg| {
        Err(QueryError::Invalid(format!(
            "read_files: {} is not a readable Parquet file ({msg})",
            file.display()
        )))
    })
}

/// Whether `name` (one path part) matches `pattern`: `*` any run of characters, `?` one.
fn glob_match(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    // Classic two-pointer wildcard match with backtracking to the last `*`.
    let (mut i, mut j, mut star, mut mark) = (0, 0, None, 0);
    while j < n.len() {
        if i < p.len() && (p[i] == '?' || p[i] == n[j]) {
            i += 1;
            j += 1;
        } else if i < p.len() && p[i] == '*' {
            star = Some(i);
            mark = j;
            i += 1;
        } else if let Some(s) = star {
            i = s + 1;
            mark += 1;
            j = mark;
        } else {
            return false;
        }
    }
    p[i..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_folder_with_header_merges_and_skips_hidden_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("a.csv"),
            "id,name,ts\n1,x,2025-01-01T00:00:00\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("b.csv"), "id,score\n2,1.5\n3,\n").unwrap();
        std::fs::write(dir.path().join("_SUCCESS"), "").unwrap();
        let mut src = FileSource::new(dir.path());
        src.set_option("format", "csv").unwrap();
        src.set_option("header", "true").unwrap();
        let files = src.list().unwrap();
        assert_eq!(files.len(), 2);
        let schema = src.infer(&files).unwrap();
        let names: Vec<_> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(names, ["id", "name", "ts", "score"]);
        let b = src.read(&files[1], &schema).unwrap();
        assert_eq!(b[0].num_rows(), 2);
        assert_eq!(b[0].column(1).null_count(), 2, "name is missing from b.csv");
        assert_eq!(b[0].column(3).null_count(), 1, "an empty field is NULL");
    }

    #[test]
    fn csv_without_header_names_columns_like_spark_and_bad_options_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("x.csv");
        std::fs::write(&f, "1;a\n2;b\n").unwrap();
        let mut src = FileSource::new(&f);
        src.set_option("sep", ";").unwrap();
        let schema = src.infer(&src.list().unwrap()).unwrap();
        assert_eq!(schema.field(0).name(), "_c0");
        assert_eq!(schema.field(1).name(), "_c1");
        let e = src.set_option("header", "yes").unwrap_err().to_string();
        assert!(e.contains("header"), "{e}");
        let e = src.set_option("format", "avro").unwrap_err().to_string();
        assert!(e.contains("avro"), "{e}");
        let e = FileSource::new(dir.path().join("none")).list().unwrap_err();
        assert!(e.to_string().contains("none"), "{e}");
    }

    #[test]
    fn conflicting_types_name_the_column_and_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.json"), "{\"k\": 1}\n").unwrap();
        std::fs::write(dir.path().join("b.json"), "{\"k\": \"x\"}\n").unwrap();
        let src = FileSource::new(dir.path());
        let e = src.infer(&src.list().unwrap()).unwrap_err().to_string();
        assert!(
            e.contains("`k`") && e.contains("a.json") && e.contains("b.json"),
            "{e}"
        );
    }

    #[test]
    fn globs_match_parts_of_paths() {
        assert!(glob_match("2025-*", "2025-07"));
        assert!(glob_match("*.json", "a.json"));
        assert!(glob_match("a?c*", "abcdef"));
        assert!(!glob_match("*.json", "a.csv"));
        assert!(!glob_match("2025-*", "2024-07"));
        let dir = tempfile::tempdir().unwrap();
        for f in [
            "a/2025-01/x.json",
            "a/2025-02/y.json",
            "a/2024-12/z.json",
            "b/2025-01/w.json",
            "a/2025-03/v.csv",
        ] {
            let p = dir.path().join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "{}").unwrap();
        }
        let src = FileSource::new(dir.path().join("*/2025-*/*.json"))
            .canonical()
            .unwrap();
        let names: Vec<String> = src
            .list()
            .unwrap()
            .iter()
            .map(|p| {
                p.strip_prefix(std::fs::canonicalize(dir.path()).unwrap())
                    .unwrap()
                    .display()
                    .to_string()
            })
            .collect();
        assert_eq!(
            names,
            ["a/2025-01/x.json", "a/2025-02/y.json", "b/2025-01/w.json"]
        );
    }
}
