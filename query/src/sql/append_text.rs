//! An append flow's query as the store keeps it, its `STREAM ...` replaced by a mark
//! ([`STREAM_MARK`]), and the statement that creates the flow, written back from it
//! ([`append_flow_sql`]: what `DESCRIBE` shows, and what `append.rs` records as the statement of
//! a replace flow's commit).

use asof_storage::{AppendFlow, ChangeCommits, StreamRead};

/// Where a query's `STREAM ...` is in its text, replaced by this identifier.
pub(super) const STREAM_MARK: &str = "__asof_stream";

/// The statement that creates append flow `f` of `target`.
pub(super) fn append_flow_sql(target: &str, f: &AppendFlow) -> String {
    let mut s = format!("CREATE FLOW {}", f.name);
    if let Some(c) = &f.comment {
        s += &format!(" COMMENT '{}'", c.replace('\'', "''"));
    }
    let once = if f.once { " ONCE" } else { "" };
    let stream = match f.reads {
        StreamRead::Rows if f.source_change_commits == ChangeCommits::Skip => {
            format!("STREAM({}) WITH (skipChangeCommits = true)", f.source)
        }
        StreamRead::Rows => format!("STREAM({})", f.source),
        StreamRead::ChangeFeed {
            starting_version,
            change_commits,
        } => format!(
            "STREAM({}) WITH (readChangeFeed = true, startingVersion = {starting_version}{})",
            f.source,
            match change_commits {
                ChangeCommits::Read => "",
                ChangeCommits::Skip => ", skipChangeCommits = true",
            }
        ),
    };
    let query = f.query.replacen(STREAM_MARK, &stream, 1);
    s + &format!(" AS INSERT{once} INTO {target} BY NAME {query}")
}
