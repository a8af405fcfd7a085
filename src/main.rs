//! The `asof` command-line tool.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, Field, Schema};
use asof::{Flow, FlowSpec, KeySelection, ScanRequest, Store, TimeSelection, Value};
use clap::{Parser, Subcommand, ValueEnum};

mod allocator;
mod runner;

/// The most rows of a row group of `--format parquet` output: the writer holds a row group's
/// encoded columns until it is full (arrow's default, 1M rows, held about 65 MB of a 19.8M-row
/// change feed's output). DuckDB writes row groups of 122,880 rows.
const PARQUET_ROW_GROUP_ROWS: usize = 128 * 1024;

/// asof: an embedded bitemporal time-travel store with Databricks AUTO CDC semantics.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    /// The database folder (created on first use).
    #[arg(long, global = true, env = "ASOF_DB", default_value = "asof.db")]
    db: PathBuf,
    /// How long to wait, in seconds, for another process that has the store open to let go
    /// (default 2).
    #[arg(long, global = true, env = "ASOF_WAIT", value_name = "SECONDS")]
    wait: Option<f64>,
    /// When tables are rebuilt from their logs: on first use (lazy, the default) or while
    /// opening (eager).
    #[arg(long, global = true, env = "ASOF_OPEN", value_enum, default_value_t = Open::Lazy)]
    open: Open,
    /// The key-value layer's page cache, in MiB of memory (default 64). Smaller bounds what a
    /// query or a load keeps of the keys and pages it read; a scan reads each page once, so it
    /// costs little; a load of millions of keys is slower with less (docs/PERFORMANCE.md).
    #[arg(long, global = true, env = "ASOF_CACHE_MIB", value_name = "MIB",
          value_parser = clap::value_parser!(u64).range(1..=1 << 20))]
    cache_mib: Option<u64>,
    /// The read cache: frozen pages and key heads that as-of and time-travel reads decoded,
    /// kept from their second read on, in MiB (default 192; 0 keeps none). It serves a script
    /// (`sql -f`) or a server that asks about the same times again; what is read once is not
    /// kept (docs/PERFORMANCE.md).
    #[arg(long, global = true, env = "ASOF_READ_CACHE_MIB", value_name = "MIB",
          value_parser = clap::value_parser!(u64).range(0..=1 << 20))]
    read_cache_mib: Option<u64>,
    /// What a query's sorts, groupings and joins may hold together, in MiB (default 128):
    /// sorts and groupings spill to temporary files beyond it; a join whose held side needs
    /// more fails and says so. Scans stream and take none of it.
    #[arg(long, global = true, env = "ASOF_QUERY_MIB", value_name = "MIB",
          value_parser = clap::value_parser!(u64).range(1..=1 << 20))]
    query_mib: Option<u64>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Runs `;`-separated SQL statements (the Databricks AUTO CDC dialect) and prints each query's
    /// result.
    Sql {
        /// The statements.
        #[arg(required_unless_present = "file")]
        statements: Option<String>,
        /// Read the statements from this file instead.
        #[arg(short = 'f', long = "file")]
        file: Option<PathBuf>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
        /// Write query results to this file instead of standard output (required for `arrow`).
        #[arg(long)]
        output: Option<PathBuf>,
        /// A value for `${name}` in the statements (repeatable).
        #[arg(long = "var", value_name = "NAME=VALUE", value_parser = parse_var)]
        vars: Vec<(String, String)>,
        /// Run one query and print, after its result, a receipt: a token that holds the table
        /// versions it read, its text and the hash of its result (`asof verify-receipt` checks it).
        #[arg(long)]
        receipt: bool,
        /// With `--receipt`: keep the versions it read from VACUUM (the table property
        /// `asof.vacuum.pinnedVersion`), so that the receipt verifies whatever VACUUM is run.
        #[arg(long, requires = "receipt")]
        pin: bool,
    },
    /// Runs a receipt's query again at the table versions it records and checks that the result
    /// has the same hash; fails if it does not.
    VerifyReceipt {
        /// The token `asof sql --receipt` printed.
        token: String,
    },
    /// An interactive SQL prompt with line editing and history (statements end with `;`). With
    /// standard input not a terminal, runs it as a script.
    Shell,
    /// Runs an example folder: creates the flows of its `*.flow.json` files, applies each flow's
    /// `<flow>.events.csv`, and prints every target table and its history.
    Example {
        /// The folder, e.g. examples/company_points.
        dir: PathBuf,
    },
    /// Creates a flow (and its target table) from a JSON flow definition.
    CreateFlow {
        /// The flow definition (the serialised `FlowSpec`).
        file: PathBuf,
    },
    /// Applies a CSV file of events through a flow, as one commit.
    Ingest {
        /// The flow.
        flow: String,
        /// The CSV file (header line; empty fields are NULL).
        file: PathBuf,
    },
    /// Prints a target table, optionally as of a business and/or system time.
    Scan {
        /// The table.
        table: String,
        /// Rows valid at this business time.
        #[arg(long)]
        business_as_of: Option<String>,
        /// Rows as known at this system time.
        #[arg(long)]
        system_as_of: Option<String>,
        /// Only this key (single-column keys).
        #[arg(long)]
        key: Option<String>,
        /// The table as of this commit version.
        #[arg(long)]
        version: Option<u64>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
    },
    /// Writes a table, with its four temporal columns, as a Delta table (docs/EXPORT.md); an
    /// export into the same folder again commits only the changes since the last one.
    Export {
        /// The table.
        table: String,
        /// The Delta table's folder (created if missing).
        #[arg(long)]
        delta: PathBuf,
        /// The table as of this commit version (default: the latest).
        #[arg(long)]
        version: Option<u64>,
    },
    /// Draws the bitemporal history of one key of a BITEMPORAL table as SVG: business time
    /// across, system time up, one rectangle per row version, open ends as arrows.
    Plot {
        /// The table.
        table: String,
        /// The key (single-column keys).
        #[arg(long)]
        key: String,
        /// Write the picture here (default: standard output).
        #[arg(long)]
        output: Option<PathBuf>,
        /// Mark this business time (with --system-as-of: the as-of point of a query).
        #[arg(long)]
        business_as_of: Option<String>,
        /// Mark this system time.
        #[arg(long)]
        system_as_of: Option<String>,
    },
    /// Prints a table's commit history.
    History {
        /// The table.
        table: String,
    },
    /// Refreshes streaming tables on their schedules (`SCHEDULE EVERY ...`, `TRIGGER ON UPDATE`)
    /// until stopped with Ctrl-C or SIGTERM, logging each refresh. The store is open only while
    /// a round of refreshes runs.
    Run {
        /// How often to look at the schedules, in milliseconds.
        #[arg(long, default_value_t = 1000)]
        poll_ms: u64,
    },
    /// Serves the store over Arrow Flight SQL until Ctrl-C or SIGTERM: every statement `asof sql`
    /// takes, prepared statements with parameters, from many clients at once (docs/SERVER.md).
    /// The store stays open, and so locked to other processes, while it serves.
    Serve {
        /// The address to listen on (port 0: one the system picks, printed on start).
        #[arg(long, default_value = "127.0.0.1:50051")]
        listen: std::net::SocketAddr,
        /// The bearer token every client must send; required unless listening on loopback.
        #[arg(long, env = "ASOF_TOKEN", hide_env_values = true)]
        token: Option<String>,
        /// A PEM certificate (chain) to serve TLS with; needs --tls-key.
        #[arg(long, requires = "tls_key")]
        tls_cert: Option<PathBuf>,
        /// The certificate's PEM private key.
        #[arg(long, requires = "tls_cert")]
        tls_key: Option<PathBuf>,
        /// How many statements run at once; more wait their turn.
        #[arg(long, default_value_t = 8)]
        sessions: usize,
    },
    /// Lists the tables.
    Tables,
    /// Recomputes the hash chain of every table's commit log from the stored bytes and compares
    /// each table's derived records with a replay of its log; names the first commit that does
    /// not match, and fails if any does.
    Verify,
    /// Rebuilds a lost or damaged manifest from the commits the store holds. Run it only after
    /// making sure the folder's files are yours and complete: the manifest is what lets an open
    /// tell that an acknowledged commit went missing.
    Repair,
}

#[derive(Clone, Copy, ValueEnum)]
enum Open {
    /// Each table on first use.
    Lazy,
    /// Every table while opening.
    Eager,
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    /// Aligned text tables.
    Table,
    /// CSV: one header line, NULL as an empty field, ISO 8601 timestamps.
    Csv,
    /// Newline-delimited JSON objects.
    Json,
    /// An Arrow IPC file (needs --output).
    Arrow,
    /// A Parquet file, Snappy-compressed (needs --output).
    Parquet,
}

/// A progress bar on standard error, drawn only when it is a terminal.
struct Bar(indicatif::ProgressBar);

impl Bar {
    fn for_terminal() -> Option<std::sync::Arc<Bar>> {
        use std::io::IsTerminal;
        std::io::stderr()
            .is_terminal()
            .then(|| std::sync::Arc::new(Bar(indicatif::ProgressBar::hidden())))
    }
}

impl asof::Progress for Bar {
    fn begin(&self, task: &str, total: u64) {
        self.0.set_style(
            indicatif::ProgressStyle::with_template(
                "{msg} [{bar:40}] {percent}% ({elapsed}, about {eta} left)",
            )
            .expect("valid template")
            .progress_chars("=> "),
        );
        self.0.set_message(task.to_string());
        self.0.set_length(total);
        self.0.set_position(0);
        self.0.reset_elapsed();
        self.0.reset_eta();
        self.0
            .set_draw_target(indicatif::ProgressDrawTarget::stderr());
    }
    fn advance(&self, done: u64) {
        self.0.set_position(done);
    }
    fn end(&self) {
        self.0.finish_and_clear();
        self.0
            .set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
}

fn main() -> ExitCode {
    // Before any other thread exists (docs/PERFORMANCE.md: huge pages and freed memory).
    if let Err(e) = asof::tune_process_memory() {
        eprintln!("warning: transparent huge pages stay on: {e}");
    }
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn run(mut cli: Cli) -> Res<()> {
    if let Command::Sql {
        statements,
        file,
        receipt,
        ..
    } = &mut cli.command
    {
        if let Some(f) = file.take() {
            let text = std::fs::read_to_string(&f).map_err(|e| format!("{}: {e}", f.display()))?;
            *statements = Some(text);
        }
        // Before the store opens: mimalloc keeps the first purge it schedules (src/allocator.rs).
        if *receipt
            || statements
                .as_deref()
                .is_some_and(asof::SqlSession::reads_only)
        {
            allocator::purge_quickly();
        }
    }
    let mut options = asof::StoreOptions {
        open: match cli.open {
            Open::Lazy => asof::OpenMode::Lazy,
            Open::Eager => asof::OpenMode::Eager,
        },
        ..Default::default()
    };
    if let Some(mib) = cli.cache_mib {
        options.cache_bytes = mib << 20;
    }
    if let Some(mib) = cli.read_cache_mib {
        options.read_cache_bytes = mib << 20;
    }
    if let Some(w) = cli.wait {
        options.lock_wait = std::time::Duration::try_from_secs_f64(w)
            .map_err(|_| format!("--wait takes a number of seconds, not {w}"))?;
    }
    if matches!(cli.command, Command::Repair) {
        options.manifest = asof::ManifestCheck::Rebuild;
    }
    if let Command::Run { poll_ms } = cli.command {
        return runner::run(
            &cli.db,
            options,
            std::time::Duration::from_millis(poll_ms.max(1)),
        );
    }
    let store = Store::open_with(&cli.db, options)
        .map_err(|e| format!("cannot open {}: {e}", cli.db.display()))?;
    match cli.command {
        Command::Sql {
            statements,
            file,
            format,
            output,
            vars,
            receipt,
            pin,
        } => {
            // A file's statements were read into `statements` above.
            let (Some(text), None) = (statements, file) else {
                unreachable!("clap requires one")
            };
            if matches!(format, Format::Arrow | Format::Parquet) && output.is_none() {
                return Err("--format arrow and --format parquet need --output FILE".into());
            }
            // Results stream to their output as the query computes them.
            let mut options = vars.into_iter().fold(
                asof::SessionOptions::default().with_results(asof::Results::Streamed),
                |o, (k, v)| o.with_variable(k, v),
            );
            if let Some(mib) = cli.query_mib {
                options = options.with_query_memory((mib << 20) as usize);
            }
            let mut session = asof::SqlSession::with_options(store, options)?;
            if let Some(bar) = Bar::for_terminal() {
                session.set_progress(bar);
            }
            if receipt {
                let (schema, batches, receipt) = session.query_with_receipt(&text)?;
                let mut file = match &output {
                    Some(p) => Some(File::create(p).map_err(|e| format!("{}: {e}", p.display()))?),
                    None => None,
                };
                let table = matches!(format, Format::Table) && file.is_none();
                print_output(
                    asof::SqlOutput::Batches(schema, batches),
                    format,
                    file.as_mut(),
                )?;
                if pin {
                    session.pin_receipt(&receipt)?;
                }
                let line = format!("receipt: {}", receipt.token());
                if table {
                    println!("{line}");
                } else {
                    eprintln!("{line}");
                }
                return Ok(());
            }
            run_script(&mut session, &text, format, output.as_deref())
        }
        Command::VerifyReceipt { token } => {
            let mut session = asof::SqlSession::new(store)?;
            let check = session.verify_receipt(&token)?;
            let tables = check.receipt.versions();
            if check.matches() {
                println!(
                    "receipt verified: {} rows, hash {}, reading {}",
                    check.rows, check.hash, tables
                );
                Ok(())
            } else {
                println!(
                    "MISMATCH: reading {} the query now returns {} rows, hash {}; the receipt says {} rows, hash {}",
                    tables,
                    check.rows,
                    check.hash,
                    check.receipt.rows,
                    check.receipt.hash
                );
                if !check.erased_since.is_empty() {
                    println!(
                        "keys were erased since the receipt was taken: {}",
                        check.erased_since.join("; ")
                    );
                }
                Err("the receipt does not verify".into())
            }
        }
        Command::Shell => shell(store),
        Command::Run { .. } => unreachable!("handled before the store is opened"),
        Command::Serve {
            listen,
            token,
            tls_cert,
            tls_key,
            sessions,
        } => {
            let tls = tls_cert
                .zip(tls_key)
                .map(|(cert, key)| asof::TlsFiles { cert, key });
            let options = asof::ServeOptions {
                listen,
                token,
                tls,
                sessions,
            };
            asof::serve(store, options, |addr| {
                println!("asof serve: listening on {addr}");
                let _ = std::io::Write::flush(&mut std::io::stdout());
            })?;
            println!("asof serve: stopped");
            Ok(())
        }
        Command::Example { dir } => example(&store, &dir),
        Command::CreateFlow { file } => {
            create_flow(&store, &file)?;
            Ok(())
        }
        Command::Ingest { flow, file } => {
            let c = store.apply(&flow, &read_csv(&file)?)?;
            println!(
                "commit {} of {}: {}",
                c.version,
                flow,
                metrics_line(&c.metrics)
            );
            Ok(())
        }
        Command::Scan {
            table,
            business_as_of,
            system_as_of,
            key,
            version,
            format,
        } => {
            let req = ScanRequest {
                business: business_as_of
                    .map_or(TimeSelection::All, |t| TimeSelection::as_of(t.as_str())),
                system: system_as_of
                    .map_or(TimeSelection::All, |t| TimeSelection::as_of(t.as_str())),
                keys: key.map_or(KeySelection::All, |k| {
                    KeySelection::Eq(vec![Value::Str(k.into())])
                }),
                version,
                ..Default::default()
            };
            print_batches(&asof::scan_all(&store, &table, &req)?, format)
        }
        Command::History { table } => print_history(&store, &table),
        Command::Export {
            table,
            delta,
            version,
        } => {
            if let Some(bar) = Bar::for_terminal() {
                store.set_progress(bar);
            }
            let report = asof::export_delta(
                &store,
                &asof::DeltaExport {
                    table,
                    dir: delta,
                    version,
                },
            )?;
            println!("{report}");
            Ok(())
        }
        Command::Plot {
            table,
            key,
            output,
            business_as_of,
            system_as_of,
        } => {
            let text = |t: Option<String>| t.map(|t| Value::Str(t.into()));
            let svg = asof::key_history_svg(
                &store,
                &table,
                &asof::PlotRequest {
                    key: vec![Value::Str(key.into())],
                    business_as_of: text(business_as_of),
                    system_as_of: text(system_as_of),
                },
            )?;
            match output {
                Some(path) => std::fs::write(&path, svg)
                    .map_err(|e| format!("cannot write {}: {e}", path.display()))?,
                None => print!("{svg}"),
            }
            Ok(())
        }
        Command::Repair => {
            let (tables, sources) = (store.tables()?.len(), store.sources()?.len());
            println!(
                "{}: manifest rebuilt from {tables} tables and {sources} source tables",
                cli.db.display()
            );
            Ok(())
        }
        Command::Tables => {
            for t in store.tables()? {
                println!("{t}");
            }
            Ok(())
        }
        Command::Verify => {
            let report = store.verify()?;
            for t in &report.tables {
                let kind = if t.source { "source table" } else { "table" };
                let before = match t.before_chain {
                    0 => String::new(),
                    n => format!(", {n} written before the chain (not covered)"),
                };
                match &t.problem {
                    None => println!(
                        "{kind} {}: ok: {} commits linked{before}{}",
                        t.name,
                        t.linked,
                        if t.source {
                            ""
                        } else {
                            "; derived records match the log"
                        }
                    ),
                    Some(p) => println!("{kind} {}: MISMATCH: {p}", t.name),
                }
            }
            if report.ok() {
                Ok(())
            } else {
                Err("the store does not match its hash chain".into())
            }
        }
    }
}

fn create_flow(store: &Store, file: &Path) -> Res<String> {
    let spec: FlowSpec =
        serde_json::from_reader(File::open(file).map_err(|e| format!("{}: {e}", file.display()))?)
            .map_err(|e| format!("{}: {e}", file.display()))?;
    let name = spec.name.clone();
    let exists = store
        .tables()?
        .iter()
        .any(|t| store.flows(t).is_ok_and(|fs| fs.contains(&spec)));
    if !exists {
        store.create_flow(Flow::new(spec)?)?;
    }
    Ok(name)
}

/// Reads a CSV file with every column as a string; the flow casts them to its types.
fn read_csv(file: &Path) -> Res<RecordBatch> {
    let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let header = text
        .lines()
        .next()
        .ok_or_else(|| format!("{}: empty file", file.display()))?;
    let names: Vec<&str> = header.split(',').map(str::trim).collect();
    for (i, n) in names.iter().enumerate() {
        if let Some(j) = names[..i].iter().position(|m| m == n) {
            return Err(format!(
                "{}: the header names column `{n}` twice (columns {} and {}); rename one",
                file.display(),
                j + 1,
                i + 1
            )
            .into());
        }
    }
    let schema = Arc::new(Schema::new(
        names
            .iter()
            .map(|h| Field::new(*h, DataType::Utf8, true))
            .collect::<Vec<_>>(),
    ));
    let reader = arrow::csv::ReaderBuilder::new(schema.clone())
        .with_header(true)
        .build(File::open(file)?)?;
    let batches: Vec<RecordBatch> = reader.collect::<Result<_, _>>()?;
    Ok(arrow::compute::concat_batches(&schema, &batches)?)
}

fn metrics_line(m: &asof::CommitMetrics) -> String {
    format!(
        "{} events read, {} rows upserted, {} deleted, {} late, {} duplicates ignored, {} conflicts resolved",
        m.num_events_read, m.num_upserted_rows, m.num_deleted_rows, m.num_late_events, m.num_duplicates_ignored, m.num_conflicts_resolved
    )
}

fn print_history(store: &Store, table: &str) -> Res<()> {
    for c in store.history(table)? {
        let ts = chrono::DateTime::from_timestamp_micros(c.timestamp_us)
            .map(|t| t.to_rfc3339())
            .unwrap_or_default();
        println!(
            "  v{:<3} {ts}  {:<28} {}",
            c.version,
            c.operation,
            metrics_line(&c.metrics)
        );
    }
    Ok(())
}

fn print_batches(batches: &[RecordBatch], format: Format) -> Res<()> {
    let schema = match batches.first() {
        Some(b) => b.schema(),
        // Nothing, and no schema to lay out: an empty table, as before streaming.
        None if matches!(format, Format::Table) => {
            println!("{}", arrow::util::pretty::pretty_format_batches(&[])?);
            return Ok(());
        }
        None => return Ok(()),
    };
    let batches = batches.iter().cloned().map(Ok);
    write_batches(schema, batches, format, &mut std::io::stdout())
}

/// Writes a query's batches in `format` as they come (a table is laid out once it has them
/// all): a result larger than memory streams to a file.
fn write_batches(
    schema: arrow::datatypes::SchemaRef,
    batches: impl Iterator<Item = Res<RecordBatch>>,
    format: Format,
    out: &mut (dyn std::io::Write + Send),
) -> Res<()> {
    // An empty result still writes its header (CSV) or schema (Arrow, Parquet).
    let mut batches = batches.peekable();
    let empty = std::iter::once(Ok(RecordBatch::new_empty(schema.clone())));
    let batches: Box<dyn Iterator<Item = Res<RecordBatch>>> = match batches.peek() {
        None => Box::new(empty),
        Some(_) => Box::new(batches),
    };
    match format {
        Format::Table => {
            let all = batches.collect::<Res<Vec<_>>>()?;
            writeln!(out, "{}", arrow::util::pretty::pretty_format_batches(&all)?)?
        }
        Format::Csv => {
            let mut w = arrow::csv::WriterBuilder::new()
                .with_header(true)
                .build(out);
            for b in batches {
                w.write(&b?)?;
            }
        }
        Format::Json => {
            let mut w = arrow::json::LineDelimitedWriter::new(out);
            for b in batches {
                w.write(&b?)?;
            }
            w.finish()?;
        }
        Format::Arrow => {
            let mut w = arrow::ipc::writer::FileWriter::try_new(out, &schema)?;
            for b in batches {
                w.write(&b?)?;
            }
            w.finish()?;
        }
        Format::Parquet => {
            let props = parquet::file::properties::WriterProperties::builder()
                .set_compression(parquet::basic::Compression::SNAPPY)
                .set_max_row_group_row_count(Some(PARQUET_ROW_GROUP_ROWS))
                .build();
            let mut w = parquet::arrow::ArrowWriter::try_new(out, schema, Some(props))?;
            for b in batches {
                w.write(&b?)?;
            }
            w.close()?;
        }
    }
    Ok(())
}

/// Runs a script, printing each statement's output as soon as it is done; a failing statement
/// ends it with an error that says which statement failed and what is committed.
fn run_script(
    session: &mut asof::SqlSession,
    text: &str,
    format: Format,
    output: Option<&Path>,
) -> Res<()> {
    let mut file = match output {
        Some(p) => Some(File::create(p).map_err(|e| format!("{}: {e}", p.display()))?),
        None => None,
    };
    let mut printed: Res<()> = Ok(());
    let ran = session.execute_script(text, |out| {
        if printed.is_ok() {
            printed = print_output(out, format, file.as_mut());
        }
    });
    printed?;
    ran?;
    Ok(())
}

/// Prints one statement's output: a query result in `format` (to `file` if given), and the
/// line of another statement on stdout for tables, stderr otherwise.
fn print_output(out: asof::SqlOutput, format: Format, file: Option<&mut File>) -> Res<()> {
    let (schema, batches): (_, Box<dyn Iterator<Item = Res<RecordBatch>>>) = match out {
        asof::SqlOutput::Batches(schema, batches) => {
            (schema, Box::new(batches.into_iter().map(Ok)))
        }
        asof::SqlOutput::Stream(schema, stream) => (
            schema,
            Box::new(stream.map(|b| b.map_err(|e| -> Box<dyn std::error::Error> { e.into() }))),
        ),
        asof::SqlOutput::Done(line) => {
            if matches!(format, Format::Table) && file.is_none() {
                println!("{line}")
            } else {
                eprintln!("{line}")
            }
            return Ok(());
        }
    };
    match file {
        Some(f) => write_batches(schema, batches, format, f),
        None => write_batches(schema, batches, format, &mut std::io::stdout()),
    }
}

/// The interactive prompt; a script when standard input is not a terminal.
fn shell(store: Store) -> Res<()> {
    use std::io::{IsTerminal, Read};
    let mut session = asof::SqlSession::new(store)?;
    if let Some(bar) = Bar::for_terminal() {
        session.set_progress(bar);
    }
    if !std::io::stdin().is_terminal() {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text)?;
        return run_script(&mut session, &text, Format::Table, None);
    }
    let mut rl = rustyline::DefaultEditor::new()?;
    // The history lives beside the user, not in the store: what was typed may name keys an
    // ERASE must leave no trace of in the store's folder.
    let history = std::env::var_os("HOME").map(|h| std::path::Path::new(&h).join(".asof_history"));
    if let Some(h) = &history {
        let _ = rl.load_history(h);
    }
    println!(
        "asof {}: SQL in the Databricks AUTO CDC dialect; end statements with `;`, Ctrl-D quits.",
        env!("CARGO_PKG_VERSION")
    );
    let mut buf = String::new();
    loop {
        let prompt = if buf.is_empty() { "asof> " } else { "  ... " };
        match rl.readline(prompt) {
            Ok(line) => {
                buf.push_str(&line);
                buf.push('\n');
                if line.trim_end().ends_with(';') {
                    let _ = rl.add_history_entry(buf.trim());
                    if let Err(e) = run_script(&mut session, &buf, Format::Table, None) {
                        eprintln!("error: {e}");
                    }
                    buf.clear();
                }
            }
            Err(rustyline::error::ReadlineError::Interrupted) => buf.clear(),
            Err(rustyline::error::ReadlineError::Eof) => break,
            Err(e) => return Err(e.into()),
        }
    }
    if let Some(h) = &history {
        let _ = rl.save_history(h);
    }
    Ok(())
}

fn example(store: &Store, dir: &Path) -> Res<()> {
    let mut flows: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".flow.json"))
        .collect();
    flows.sort();
    if flows.is_empty() {
        return Err(format!("{} has no *.flow.json file", dir.display()).into());
    }
    for f in flows {
        let name = create_flow(store, &f)?;
        let events = dir.join(format!("{name}.events.csv"));
        let c = store.apply(&name, &read_csv(&events)?)?;
        println!(
            "flow {name}: commit {} applied {}\n  {}",
            c.version,
            events.display(),
            metrics_line(&c.metrics)
        );
    }
    for table in store.tables()? {
        println!("\n== {table}");
        print_batches(
            &asof::scan_all(store, &table, &ScanRequest::default())?,
            Format::Table,
        )?;
        println!("history of {table}:");
        print_history(store, &table)?;
    }
    Ok(())
}

/// `--var name=value`.
fn parse_var(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
        _ => Err(format!("--var takes NAME=VALUE, not `{s}`")),
    }
}
