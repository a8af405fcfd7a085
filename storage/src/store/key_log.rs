//! A key's events as its table's log holds them, with the commit that logged each: what
//! `explain_changes` reads to say which event caused a correction, and how late it was.

use super::replay::VACUUM_BASE;
use super::Store;
use crate::engine::fold::Bytes;
use crate::error::{corrupt, Error, Result};
use crate::format::keys::{self, key, parse_version};
use crate::keycodec::{decode_tuple, decode_value, encode_tuple};
use crate::value::{ColumnType, Value};

pub use crate::record::{EventKind, Origin};

/// One event of a key, as logged.
#[derive(Clone, Debug, PartialEq)]
pub struct LoggedEvent {
    /// The commit that logged it (a vacuum base's for every event up to it).
    pub version: u64,
    /// Its sequence (`SEQUENCE BY`), one value per component.
    pub sequence: Vec<Value>,
    /// Its system sequence (BITEMPORAL), else `None`.
    pub system: Option<Value>,
    /// Upsert or delete.
    pub kind: EventKind,
    /// A feed's, or a DML statement's.
    pub origin: Origin,
    /// Its output values.
    pub values: Vec<Value>,
    /// Its key, sequence and system sequence as logged (encoded): what finding its source row
    /// compares.
    pub(crate) logged: (Bytes, Bytes, Bytes),
}

impl Store {
    /// Every event the log of `table` holds for the key `key` (its key columns' values, in
    /// `KEYS` order), in commit order. Reads the whole log: an audit question, not a query path.
    pub fn key_events(&self, table: &str, key_values: &[Value]) -> Result<Vec<LoggedEvent>> {
        let g = self.read_inner()?;
        let t = g.table(table)?;
        let schema = &t.state.schema;
        let key_types = schema.key_types();
        if key_values.len() != key_types.len() {
            return Err(Error::InvalidQuery(format!(
                "`{table}` has {} key columns; {} values were given",
                key_types.len(),
                key_values.len()
            )));
        }
        let coerced: Vec<Value> = key_values
            .iter()
            .zip(&key_types)
            .map(|(v, ty)| v.coerce(ty))
            .collect::<std::result::Result<_, _>>()
            .map_err(Error::InvalidQuery)?;
        let wanted = encode_tuple(coerced.iter(), &key_types).map_err(Error::InvalidQuery)?;
        let seq_types = t.flows[0].seq_types();
        let sys_type: Option<ColumnType> = match schema.mode {
            crate::flow::StoredAs::Bitemporal => Some(
                schema
                    .system_sequence
                    .clone()
                    .unwrap_or_else(ColumnType::commit_timestamp),
            ),
            _ => None,
        };
        let base = t
            .commits
            .first()
            .filter(|c| c.parameters.contains_key(VACUUM_BASE))
            .map_or(0, |c| c.version);
        let width = schema.columns.len();
        let mut out = Vec::new();
        for pair in g.kv.scan_prefix(&key(keys::EVENTS, t.id, None, None)) {
            let (k, v) = pair?;
            let version = parse_version(&k)?.max(base);
            let block = crate::format::packed_events::decode_block(&v)?;
            for e in block.events_from(t.state.log_narrowest, width)? {
                if e.key[..] != wanted[..] {
                    continue;
                }
                let sequence = match decode_tuple(&e.seq, &seq_types) {
                    Ok(s) => s,
                    // An SCD TYPE 1 statement's own positions (docs/FORMAT.md §3.5): just after a
                    // truncate's sequence, or below every sequence.
                    Err(_) if e.event.origin == Origin::Statement => {
                        match e.seq.split_last().map(|(_, t)| decode_tuple(t, &seq_types)) {
                            Some(Ok(s)) => s,
                            _ => vec![Value::Null; seq_types.len()],
                        }
                    }
                    Err(err) => return Err(corrupt(err)),
                };
                let system = match &sys_type {
                    Some(ty) => Some(decode_value(&e.sys, ty).map_err(corrupt)?.0),
                    None => None,
                };
                out.push(LoggedEvent {
                    version,
                    sequence,
                    system,
                    kind: e.event.kind,
                    origin: e.event.origin,
                    values: e.event.values.to_vec(),
                    logged: (e.key.clone(), e.seq.clone(), e.sys.clone()),
                });
            }
        }
        Ok(out)
    }
}
