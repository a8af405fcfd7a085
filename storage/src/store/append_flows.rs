//! Append flows (docs/SEMANTICS.md §1.7): their definitions live in their target's source record;
//! their checkpoints in the target's `WRITE` commits (`append_offset.<flow>`), written with the
//! rows they account for.

use std::collections::BTreeMap;

use super::chain::{put_commit, Link, Wrote};
use super::commit::{now_us, put_json, write_or_poison, CommitInfo};
use super::Store;
use crate::error::{Error, Result};
use crate::format::keys::{self, key};
use crate::kv::WriteBatch;
use crate::source::{AppendFlow, StreamRead};

/// The commit parameter of a `WRITE` by append flow `flow` that says how far it has read its
/// source: rows of a source table, or the next commit of a change feed.
pub fn append_offset_parameter(flow: &str) -> String {
    format!("append_offset.{flow}")
}

/// The parameter of an append table's commit that records the version of append flow `flow`'s
/// source that the flow last read whole or first read (statements on the source before it
/// removed nothing the flow had read).
pub fn source_version_parameter(flow: &str) -> String {
    format!("{}.{flow}", super::refresh::SOURCE_VERSION)
}

/// The operation of the source commit that created an append flow.
const CREATE_APPEND_FLOW: &str = "CREATE FLOW";

impl Store {
    /// Adds append flow `flow` to source table `target` (one commit of the table, operation
    /// `CREATE FLOW`). Its source must be a source table; its name must be free among all flows.
    pub fn create_append_flow(&self, target: &str, flow: AppendFlow) -> Result<()> {
        let mut g = self.write_inner()?;
        let inner = &mut *g;
        let taken = inner
            .tables
            .values()
            .any(|t| t.flows.iter().any(|f| f.spec.name == flow.name))
            || inner
                .sources
                .values()
                .any(|s| s.append_flows.iter().any(|f| f.name == flow.name));
        if taken {
            return Err(Error::AlreadyExists {
                kind: "flow",
                name: flow.name,
            });
        }
        source_exists(inner, &flow)?;
        let mut flows = inner
            .sources
            .get(target)
            .ok_or_else(|| Error::NotFound {
                kind: "source table",
                name: target.to_string(),
            })?
            .append_flows
            .clone();
        let parameters = BTreeMap::from([("flow".to_string(), flow.name.clone())]);
        flows.push(flow);
        write_flows(inner, target, flows, parameters)
    }

    /// Gives append flow `flow.name` of `target` the definition `flow` (one commit `CREATE
    /// FLOW` with the parameter `redefined`). Rows it appended stay; it goes on from its
    /// checkpoint, or, reading another source now, from that source's start.
    pub fn redefine_append_flow(&self, target: &str, flow: AppendFlow) -> Result<()> {
        let mut g = self.write_inner()?;
        let inner = &mut *g;
        let src = inner.sources.get(target).ok_or_else(|| Error::NotFound {
            kind: "source table",
            name: target.to_string(),
        })?;
        let mut flows = src.append_flows.clone();
        source_exists(inner, &flow)?;
        let Some(old) = flows.iter_mut().find(|f| f.name == flow.name) else {
            return Err(Error::NotFound {
                kind: "flow",
                name: flow.name,
            });
        };
        let mut parameters = BTreeMap::from([
            ("flow".to_string(), flow.name.clone()),
            (super::records::REDEFINED.to_string(), "true".to_string()),
        ]);
        if old.source != flow.source || old.reads != flow.reads {
            let start = match flow.reads {
                StreamRead::ChangeFeed {
                    starting_version, ..
                } => starting_version,
                StreamRead::Rows => 0,
            };
            parameters.insert(append_offset_parameter(&flow.name), start.to_string());
            // A new source is read from its start: statements on it before now removed nothing
            // the flow read.
            if let Some(last) = inner
                .sources
                .get(&flow.source)
                .and_then(|s| s.history.last())
            {
                parameters.insert(
                    source_version_parameter(&flow.name),
                    last.version.to_string(),
                );
            }
        }
        *old = flow;
        write_flows(inner, target, flows, parameters)
    }

    /// The append flows that write to source table `target`.
    pub fn append_flows(&self, target: &str) -> Result<Vec<AppendFlow>> {
        let g = self.read_inner()?;
        let src = g.sources.get(target).ok_or_else(|| Error::NotFound {
            kind: "source table",
            name: target.to_string(),
        })?;
        Ok(src.append_flows.clone())
    }

    /// How far append flow `flow` has read its source into `target`, as its last `WRITE` says
    /// (`None` if it has not run): rows of a source table, or the next commit of a change feed.
    pub fn append_offset(&self, target: &str, flow: &str) -> Result<Option<u64>> {
        let param = append_offset_parameter(flow);
        Ok(self
            .source_history(target)?
            .iter()
            .rev()
            .find_map(|c| c.parameters.get(&param).and_then(|v| v.parse().ok())))
    }
}

/// Refuses `flow` if what it reads is not there: a source table, or a target for its change
/// feed.
fn source_exists(inner: &super::Inner, flow: &AppendFlow) -> Result<()> {
    let found = match flow.reads {
        StreamRead::Rows => inner.sources.contains_key(&flow.source),
        StreamRead::ChangeFeed { .. } => inner.tables.contains_key(&flow.source),
    };
    if found {
        return Ok(());
    }
    Err(Error::NotFound {
        kind: match flow.reads {
            StreamRead::Rows => "source table",
            StreamRead::ChangeFeed { .. } => "streaming table (for its change feed)",
        },
        name: flow.source.clone(),
    })
}

/// Writes `flows` as the append flows of source `target`, with a commit `CREATE FLOW` of
/// `parameters`.
fn write_flows(
    inner: &mut super::Inner,
    target: &str,
    flows: Vec<AppendFlow>,
    parameters: BTreeMap<String, String>,
) -> Result<()> {
    let src = inner
        .sources
        .get_mut(target)
        .ok_or_else(|| Error::NotFound {
            kind: "source table",
            name: target.to_string(),
        })?;
    let mut rec = src.record();
    rec.append_flows = flows.clone();
    let last = src.history.last();
    let prev = last.and_then(|c| c.chain.clone());
    let mut commit = CommitInfo::bare(
        last.map_or(0, |c| c.version + 1),
        now_us().max(last.map_or(0, |c| c.timestamp_us + 1)),
        CREATE_APPEND_FLOW,
        parameters,
    );
    let mut b = WriteBatch::default();
    put_json(&mut b, key(keys::SOURCE, src.id, None, None), &rec)?;
    let at = Link {
        tag: keys::SOURCE_COMMIT,
        id: src.id,
        prev: prev.as_deref(),
        wrote: Wrote::Nothing,
    };
    put_commit(&mut b, at, &mut commit)?;
    write_or_poison(inner.kv.as_ref(), &mut inner.poisoned, b)?;
    let src = inner.sources.get_mut(target).expect("checked");
    src.append_flows = flows;
    src.history.push(commit);
    Ok(())
}
