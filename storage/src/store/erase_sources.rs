//! ERASE's part in the source tables (docs/SEMANTICS.md §12.2): which sources a table's flows
//! read, who else reads them, and the rewrite of the appends that hold rows of erased keys, with
//! the source's own `ERASE` commit.

use std::collections::BTreeSet;

use arrow::array::BooleanArray;

use super::chain::{self, put_commit, rewrote_parameter, Link, Rewrite, Wrote, REWROTE};
use super::commit::{now_us, put_json, CommitInfo};
use super::records::{ERASE, ERASED_BY, ERASE_REASON};
use super::{Inner, Table};
use crate::engine::fold::Bytes;
use crate::error::{corrupt, Result};
use crate::flow::Flow;
use crate::format::keys::{self, key, parse_version};
use crate::ingest::row_keys;
use crate::kv::{KvStore, WriteBatch};
use crate::positions::format_positions;
use crate::source::{SourceTable, ERASED_ROWS};

/// The table's sources, each with the flows of the table that read it.
pub(super) fn source_flows(t: &Table) -> Vec<(String, Vec<&Flow>)> {
    let mut out: Vec<(String, Vec<&Flow>)> = Vec::new();
    for f in &t.flows {
        let Some(s) = &f.spec.source_table else {
            continue;
        };
        match out.iter_mut().find(|(n, _)| n == s) {
            Some((_, flows)) => flows.push(f),
            None => out.push((s.clone(), vec![f])),
        }
    }
    out
}

/// Who else reads source `name` of `t`, or feeds it.
pub(super) fn readers_of_source(inner: &Inner, t: &Table, name: &str, out: &mut Vec<String>) {
    for other in inner.tables.values().filter(|o| o.name != t.name) {
        for f in &other.flows {
            if f.spec.source_table.as_deref() == Some(name) {
                out.push(format!(
                    "`{}` reads source `{name}` (flow `{}`)",
                    other.name, f.spec.name
                ));
            }
        }
    }
    for s in inner.sources.values() {
        for f in &s.append_flows {
            if f.source == name {
                out.push(format!(
                    "`{}` reads source `{name}` (flow `{}`)",
                    s.name, f.name
                ));
            }
            if s.name == name {
                out.push(format!(
                    "`{}` feeds source `{name}` (flow `{}`)",
                    f.source, f.name
                ));
            }
        }
    }
}

/// What to erase from a source table: the rows whose key, as one of `flows` gives it, is in
/// `erased`, among the rows before that flow's bound in `through` (a position).
pub(super) struct ErasedRows<'a> {
    pub flows: &'a [&'a Flow],
    /// For each of `flows`, the position from which its rows are kept.
    pub through: &'a [u64],
    pub erased: &'a BTreeSet<Bytes>,
    pub evaluator: Option<&'a std::sync::Arc<dyn crate::ingest::ConditionEvaluator>>,
    pub reason: &'a str,
    /// The table erased from.
    pub table: &'a str,
}

/// Rewrites, into `b`, every append of `src` that holds a row `to` names, without those rows,
/// and writes the source's `ERASE` commit. Returns the positions of the rows removed.
pub(super) fn erase_source_rows(
    kv: &dyn KvStore,
    src: &SourceTable,
    to: &ErasedRows<'_>,
    b: &mut WriteBatch,
) -> Result<Vec<u64>> {
    let ErasedRows {
        flows,
        through,
        erased,
        evaluator,
        reason,
        table,
    } = *to;
    let last = src.history.last().expect("CREATE TABLE");
    let version = last.version + 1;
    let mut positions = Vec::new();
    let mut rewrites = Vec::new();
    // Positions count every row ever appended: earlier erasures' rows are skipped over.
    let mut position = 0u64;
    let mut hole = 0usize;
    // The append being read, and whether a chunk of it was rewritten.
    let mut current: Option<(u64, bool)> = None;
    // A chunk at a time, each rewritten under its own key (a `CREATE TABLE ... AS SELECT` of 10M
    // rows is one append: read whole it took gigabytes); an append whose chunks were rewritten
    // has its commit marked once its last chunk is read.
    for pair in kv.scan_prefix(&key(keys::APPEND, src.id, None, None)) {
        let (k, bytes) = pair?;
        let append = parse_version(&k)?;
        if let Some((done, true)) = current.filter(|(a, _)| *a != append) {
            mark_append(kv, src, done, version, b, &mut rewrites)?;
        }
        if current.is_none_or(|(a, _)| a != append) {
            current = Some((append, false));
        }
        let mut kept = Vec::new();
        let mut gone = 0;
        for batch in SourceTable::decode_chunk(&bytes)? {
            let batch = src.fit(batch)?;
            let keys: Vec<Vec<Option<Bytes>>> = flows
                .iter()
                .map(|f| row_keys(f, &batch, evaluator))
                .collect::<Result<_>>()?;
            let mut keep = Vec::with_capacity(batch.num_rows());
            for r in 0..batch.num_rows() {
                while src.erased.get(hole) == Some(&position) {
                    position += 1;
                    hole += 1;
                }
                let hit = keys.iter().zip(through).any(|(k, &bound)| {
                    position < bound && k[r].as_ref().is_some_and(|k| erased.contains(k))
                });
                if hit {
                    positions.push(position);
                    gone += 1;
                }
                keep.push(!hit);
                position += 1;
            }
            let mask = BooleanArray::from(keep);
            kept.push(
                arrow::compute::filter_record_batch(&batch, &mask)
                    .map_err(|e| corrupt(e.to_string()))?,
            );
        }
        if gone == 0 {
            continue;
        }
        current = Some((append, true));
        let rows = arrow::compute::concat_batches(&src.schema, &kept)
            .map_err(|e| corrupt(e.to_string()))?;
        // The chunk keeps its number; one left with no row goes (readers take an append's
        // chunks in order, whatever their numbers).
        match rows.num_rows() {
            0 => b.delete(k),
            _ => b.put(k, SourceTable::encode_chunk(&rows)?),
        }
    }
    if let Some((done, true)) = current {
        mark_append(kv, src, done, version, b, &mut rewrites)?;
    }
    if positions.is_empty() {
        return Ok(positions);
    }
    let parameters = [
        (ERASE_REASON.to_string(), reason.to_string()),
        ("table".to_string(), table.to_string()),
        ("rows".to_string(), positions.len().to_string()),
        (ERASED_ROWS.to_string(), format_positions(&positions)),
        (REWROTE.to_string(), rewrote_parameter(&rewrites)),
    ]
    .into_iter()
    .collect();
    let ts = now_us().max(last.timestamp_us + 1);
    let mut commit = CommitInfo::bare(version, ts, ERASE, parameters);
    let at = Link {
        tag: keys::SOURCE_COMMIT,
        id: src.id,
        prev: last.chain.as_deref(),
        wrote: Wrote::Nothing,
    };
    put_commit(b, at, &mut commit)?;
    Ok(positions)
}

/// Marks the commit that wrote append `append` of `src` as erased by `version` (in `b`), and
/// records how its digest changed in `rewrites`.
fn mark_append(
    kv: &dyn KvStore,
    src: &SourceTable,
    append: u64,
    version: u64,
    b: &mut WriteBatch,
    rewrites: &mut Vec<Rewrite>,
) -> Result<()> {
    // Append n is the n-th `WRITE` (those written before the chain do not say).
    let write = src
        .history
        .iter()
        .find(|c| c.parameters.get(chain::APPEND_PARAMETER) == Some(&append.to_string()))
        .or_else(|| {
            src.history
                .iter()
                .filter(|c| c.operation == super::sources::WRITE)
                .nth(append as usize)
                .filter(|c| !c.parameters.contains_key(chain::APPEND_PARAMETER))
        });
    let Some(c) = write else {
        return Ok(());
    };
    let mut marked = c.clone();
    marked
        .parameters
        .insert(ERASED_BY.to_string(), version.to_string());
    if c.chain.is_some() {
        let old = chain::stored_digest(kv, keys::SOURCE_COMMIT, src.id, c, None)?;
        let new = chain::stored_digest(kv, keys::SOURCE_COMMIT, src.id, &marked, Some(&*b))?;
        rewrites.push(Rewrite {
            by: version,
            version: c.version,
            old: chain::hex(&old),
            new: chain::hex(&new),
        });
    }
    put_json(
        b,
        key(keys::SOURCE_COMMIT, src.id, Some(c.version), None),
        &marked,
    )
}

/// The commit records of source `id`, in version order.
pub(super) fn source_history(kv: &dyn KvStore, id: u32) -> Result<Vec<CommitInfo>> {
    kv.scan_prefix(&key(keys::SOURCE_COMMIT, id, None, None))
        .map(|pair| {
            let (_, v) = pair?;
            serde_json::from_slice(&v).map_err(|e| corrupt(format!("source commit record: {e}")))
        })
        .collect()
}
