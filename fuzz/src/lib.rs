//! The parts of `asof-query` the fuzz targets exercise, compiled from their own sources so that
//! fuzzing does not build DataFusion: the error type, `read_files`, the AUTO CDC parser and the
//! fuzzing entry points (`query/src/fuzzing.rs`).
#![allow(dead_code, unused_imports)]

#[path = "../../query/src/error.rs"]
pub mod error;
#[path = "../../query/src/files.rs"]
pub mod files;
#[path = "../../query/src/fuzzing.rs"]
pub mod fuzzing;
#[path = "../../query/src/sql/parse.rs"]
pub mod parse;
/// `crate::sql::parse`, as the query crate names it.
pub mod sql {
    pub use super::parse;
}
