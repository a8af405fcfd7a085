//! The SQL fuzzing entry point: statements planned and executed against a small store, not only
//! parsed. Kept apart from [`crate::fuzzing`], which the cargo-fuzz crate compiles without
//! DataFusion; the `sql_execute` target depends on this crate instead.

use asof_storage::{MemKv, Store};

use crate::error::{QueryError, Result};
use crate::sql::{ExternalAccess, SessionOptions, SqlSession};

/// The store every input runs against: a source of events, and SCD TYPE 2 and BITEMPORAL tables
/// fed by it, with a few versions and late events.
pub const SETUP: &str = "CREATE TABLE ev (id BIGINT, seq BIGINT, sys BIGINT, op STRING, v STRING);
INSERT INTO ev VALUES (1, 1, 1, 'U', 'a'), (1, 3, 2, 'U', 'b'), (2, 1, 3, 'U', 'c'), (1, 2, 4, 'U', 'late'), (2, 5, 5, 'D', NULL);
CREATE OR REFRESH STREAMING TABLE h FLOW AUTO CDC FROM stream(ev) KEYS (id) APPLY AS DELETE WHEN op = 'D'
  SEQUENCE BY seq COLUMNS * EXCEPT (seq, sys, op) STORED AS SCD TYPE 2;
CREATE OR REFRESH STREAMING TABLE b FLOW AUTO CDC FROM stream(ev) KEYS (id) APPLY AS DELETE WHEN op = 'D'
  SEQUENCE BY seq SYSTEM SEQUENCE BY sys COLUMNS * EXCEPT (seq, sys, op) STORED AS BITEMPORAL;";

/// Runs `data` as a SQL script against a fresh in-memory store holding [`SETUP`], in a session
/// that may not touch files or settings. Returns how many statements produced an output before
/// the first error; an `Err` is a correct answer to bad input, a panic is a bug.
pub fn execute(data: &[u8]) -> Result<usize> {
    let text = std::str::from_utf8(data).map_err(|e| QueryError::Invalid(e.to_string()))?;
    let store = Store::with_kv(Box::new(MemKv::default()))?;
    let mut session = SqlSession::with_options(
        store,
        SessionOptions::default().with_external_access(ExternalAccess::Denied),
    )?;
    session.execute(SETUP)?;
    let mut n = 0;
    let ran = session.execute_script(text, |_| n += 1);
    match ran {
        Ok(()) => Ok(n),
        Err(e) => Err(*e.error),
    }
}
