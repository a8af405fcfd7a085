//! The `asof` command-line tool.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, Field, Schema};
use asof::{Flow, FlowSpec, KeySelection, ScanRequest, Store, TimeSelection, Value};
use clap::{Parser, Subcommand, ValueEnum};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// asof: an embedded bitemporal time-travel store with Databricks AUTO CDC semantics.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    /// The database folder (created on first use).
    #[arg(long, global = true, env = "ASOF_DB", default_value = "asof.db")]
    db: PathBuf,
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
    },
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
    /// Prints a table's commit history.
    History {
        /// The table.
        table: String,
    },
    /// Lists the tables.
    Tables,
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Table,
    Csv,
}

fn main() -> ExitCode {
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

fn run(cli: Cli) -> Res<()> {
    let store =
        Store::open(&cli.db).map_err(|e| format!("cannot open {}: {e}", cli.db.display()))?;
    match cli.command {
        Command::Sql {
            statements,
            file,
            format,
        } => {
            let text = match (statements, file) {
                (_, Some(f)) => {
                    std::fs::read_to_string(&f).map_err(|e| format!("{}: {e}", f.display()))?
                }
                (Some(s), None) => s,
                (None, None) => unreachable!("clap requires one"),
            };
            let mut session = asof::SqlSession::new(store)?;
            for out in session.execute(&text)? {
                match out {
                    asof::SqlOutput::Batches(schema, batches) => {
                        let batches = if batches.is_empty() {
                            vec![RecordBatch::new_empty(schema)]
                        } else {
                            batches
                        };
                        print_batches(&batches, format)?
                    }
                    asof::SqlOutput::Done(line) => {
                        if matches!(format, Format::Table) {
                            println!("{line}")
                        } else {
                            eprintln!("{line}")
                        }
                    }
                }
            }
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
        Command::History { table } => {
            print_history(&store, &table);
            Ok(())
        }
        Command::Tables => {
            for t in store.tables()? {
                println!("{t}");
            }
            Ok(())
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
    let schema = Arc::new(Schema::new(
        header
            .split(',')
            .map(|h| Field::new(h.trim(), DataType::Utf8, true))
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
        "{} events read, {} row versions written, {} retired, {} late, {} duplicates ignored, {} conflicts resolved",
        m.num_events_read, m.num_upserted_rows, m.num_deleted_rows, m.num_late_events, m.num_duplicates_ignored, m.num_conflicts_resolved
    )
}

fn print_history(store: &Store, table: &str) {
    match store.history(table) {
        Ok(h) => {
            for c in h {
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
        }
        Err(e) => eprintln!("error: {e}"),
    }
}

fn print_batches(batches: &[RecordBatch], format: Format) -> Res<()> {
    match format {
        Format::Table => println!("{}", arrow::util::pretty::pretty_format_batches(batches)?),
        Format::Csv => {
            let mut w = arrow::csv::WriterBuilder::new()
                .with_header(true)
                .build(std::io::stdout());
            for b in batches {
                w.write(b)?;
            }
        }
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
        print_history(store, &table);
    }
    Ok(())
}
