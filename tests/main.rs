//! The integration tests, in one binary: each file of `tests/` is a module here, and
//! `tests/common/` holds what they share. One binary links DataFusion once instead of once per
//! file (36 files made 36 test executables of about 320 MB each, which filled CI's disk).
//!
//! Run one file's tests with its module name as the filter: `cargo test --test integration serve::`.
//! proptest keeps the failing cases it found in `proptest-regressions/<module>.txt` (commit them).

mod common;

mod audit;
mod cli;
mod cold;
mod compressible;
mod crash;
mod delta_export;
mod engine_model;
mod erase;
mod faults;
mod flow_rules;
mod format;
mod fuzz;
mod golden;
mod ingest;
mod pages;
mod plot;
mod query;
mod read_cache;
mod redefine;
mod reliability;
mod reopen;
mod retention;
mod scan_threads;
mod schedule;
mod serve;
mod sources;
mod sql;
mod sql_append;
mod sql_count;
mod sql_dialect;
mod sql_dml;
mod sql_files;
mod sql_generated;
mod sql_history;
mod sql_nested;
mod sql_pushdown;
mod sql_schemas;
mod sql_snapshot;
mod sql_source_dml;
