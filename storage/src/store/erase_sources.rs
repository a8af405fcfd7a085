//! ERASE's part in the source tables (docs/SEMANTICS.md §12.2): which sources a table's flows
//! read, who else reads them, which chunks of their appends hold rows of erased keys, their
//! rewrite, and the source's own `ERASE` commit.

use std::collections::BTreeSet;

use arrow::array::{BooleanArray, RecordBatch};

use super::chain::{self, put_commit, rewrote_parameter, Link, Rewrite, Wrote, REWROTE};
use super::commit::{count_keys, now_us, put_json, CommitInfo};
use super::erase_intent::{Batches, ChunkCut, Marked, SourceCut};
use super::pages::Progressing;
use super::records::{ERASE, ERASED_BY, ERASE_REASON};
use super::{Inner, Table};
use crate::engine::fold::Bytes;
use crate::error::{corrupt, Result};
use crate::flow::Flow;
use crate::format::keys::{self, key, parse_version};
use crate::ingest::row_keys;
use crate::kv::{KvStore, WriteBatch};
use crate::positions::format_positions;
use crate::progress::Reporter;
use crate::source::{SourceTable, ERASED_ROWS};

/// The fewest chunks a source's survey reads for it to report its progress.
const PROGRESS_CHUNKS: u64 = 16;

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
}

/// What erasing the rows `to` names takes out of `src`: the chunks that hold one, the rows'
/// positions, and the appends' commits with their digests before; `None` if no row matches.
/// Reads a chunk at a time (a `CREATE TABLE ... AS SELECT` of 10M rows is one append: read
/// whole it took gigabytes) and writes nothing.
pub(super) fn survey_source(
    kv: &dyn KvStore,
    src: &SourceTable,
    to: &ErasedRows<'_>,
    progress: Option<&Progressing>,
) -> Result<Option<SourceCut>> {
    let ErasedRows {
        flows,
        through,
        erased,
        evaluator,
    } = *to;
    let last = src.history.last().expect("CREATE TABLE");
    let mut positions = Vec::new();
    let mut chunks = Vec::new();
    let mut appends: Vec<Marked> = Vec::new();
    // Positions count every row ever appended: earlier erasures' rows are skipped over.
    let mut position = 0u64;
    let mut hole = 0usize;
    let prefix = key(keys::APPEND, src.id, None, None);
    let total = count_keys(kv, &prefix)?;
    let task = format!("erasing from {}: finding the keys' rows", src.name);
    let bar = Reporter::begin(progress, &task, total, PROGRESS_CHUNKS);
    for (read, pair) in kv.scan_prefix(&prefix).enumerate() {
        bar.advance(read as u64 + 1);
        let (k, bytes) = pair?;
        let mut drop = Vec::new();
        let mut rows = 0usize;
        for batch in SourceTable::decode_chunk(&bytes)? {
            let batch = src.fit(batch)?;
            let keys: Vec<Vec<Option<Bytes>>> = flows
                .iter()
                .map(|f| row_keys(f, &batch, evaluator))
                .collect::<Result<_>>()?;
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
                    drop.push((rows + r) as u64);
                }
                position += 1;
            }
            rows += batch.num_rows();
        }
        if drop.is_empty() {
            continue;
        }
        chunks.push(ChunkCut {
            key: k.clone(),
            rows,
            drop,
        });
        let append = parse_version(&k)?;
        if let Some(c) = append_commit(src, append) {
            if appends.iter().all(|m| m.version != c.version) {
                appends.push(Marked::before(kv, keys::SOURCE_COMMIT, src.id, c)?);
            }
        }
    }
    if positions.is_empty() {
        return Ok(None);
    }
    Ok(Some(SourceCut {
        name: src.name.clone(),
        version: last.version + 1,
        timestamp_us: now_us().max(last.timestamp_us + 1),
        positions,
        chunks,
        appends,
    }))
}

/// Rewrites the chunks of `cut` without the rows it drops, each under its own key (a chunk left
/// with no row goes: readers take an append's chunks in order, whatever their numbers). A chunk
/// rewritten already is left as it is.
pub(super) fn rewrite_chunks(
    kv: &dyn KvStore,
    src: &SourceTable,
    cut: &SourceCut,
    w: &mut Batches<'_>,
) -> Result<()> {
    for c in &cut.chunks {
        w.visited();
        let Some(bytes) = kv.get(&c.key)? else {
            continue;
        };
        let batches: Vec<RecordBatch> = SourceTable::decode_chunk(&bytes)?
            .into_iter()
            .map(|b| src.fit(b))
            .collect::<Result<_>>()?;
        if batches.iter().map(RecordBatch::num_rows).sum::<usize>() != c.rows {
            continue;
        }
        let rows = arrow::compute::concat_batches(&src.schema, &batches)
            .map_err(|e| corrupt(e.to_string()))?;
        let mut keep = vec![true; rows.num_rows()];
        for &r in &c.drop {
            let row = usize::try_from(r).ok().and_then(|r| keep.get_mut(r));
            *row.ok_or_else(|| {
                corrupt(format!(
                    "an erasure's intent drops row {r} of a chunk of `{}` of {} rows",
                    src.name, c.rows
                ))
            })? = false;
        }
        let rows = arrow::compute::filter_record_batch(&rows, &BooleanArray::from(keep))
            .map_err(|e| corrupt(e.to_string()))?;
        match rows.num_rows() {
            0 => w.delete(c.key.clone())?,
            _ => w.put(c.key.clone(), SourceTable::encode_chunk(&rows)?)?,
        }
    }
    Ok(())
}

/// Writes, into `b`, the records of the appends' commits of `cut` marked as erased, and the
/// source's `ERASE` commit, for `reason` and erasing from `table`. Their chunks are rewritten
/// already: the digests after are read from the store.
pub(super) fn commit_source_erasure(
    kv: &dyn KvStore,
    src: &SourceTable,
    cut: &SourceCut,
    reason: &str,
    table: &str,
    b: &mut WriteBatch,
) -> Result<()> {
    let mut rewrites = Vec::new();
    for m in &cut.appends {
        let c = src
            .history
            .iter()
            .find(|c| c.version == m.version)
            .ok_or_else(|| corrupt(format!("source `{}` has no commit {}", src.name, m.version)))?;
        let mut marked = c.clone();
        marked
            .parameters
            .insert(ERASED_BY.to_string(), cut.version.to_string());
        if let Some(old) = &m.old {
            let new = chain::stored_digest(kv, keys::SOURCE_COMMIT, src.id, &marked)?;
            rewrites.push(Rewrite {
                by: cut.version,
                version: c.version,
                old: old.clone(),
                new: chain::hex(&new),
            });
        }
        put_json(
            b,
            key(keys::SOURCE_COMMIT, src.id, Some(c.version), None),
            &marked,
        )?;
    }
    let last = src.history.last().expect("CREATE TABLE");
    let parameters = [
        (ERASE_REASON.to_string(), reason.to_string()),
        ("table".to_string(), table.to_string()),
        ("rows".to_string(), cut.positions.len().to_string()),
        (ERASED_ROWS.to_string(), format_positions(&cut.positions)),
        (REWROTE.to_string(), rewrote_parameter(&rewrites)),
    ]
    .into_iter()
    .collect();
    let mut commit = CommitInfo::bare(cut.version, cut.timestamp_us, ERASE, parameters);
    let at = Link {
        tag: keys::SOURCE_COMMIT,
        id: src.id,
        prev: last.chain.as_deref(),
        wrote: Wrote::Nothing,
    };
    put_commit(b, at, &mut commit)
}

/// The commit that wrote append `append` of `src`: append n is the n-th `WRITE` (those written
/// before the chain do not say).
fn append_commit(src: &SourceTable, append: u64) -> Option<&CommitInfo> {
    src.history
        .iter()
        .find(|c| c.parameters.get(chain::APPEND_PARAMETER) == Some(&append.to_string()))
        .or_else(|| {
            src.history
                .iter()
                .filter(|c| c.operation == super::sources::WRITE)
                .nth(append as usize)
                .filter(|c| !c.parameters.contains_key(chain::APPEND_PARAMETER))
        })
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
