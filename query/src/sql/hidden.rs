//! The names of a flow's hidden tables: `prefix` and the flow's name, in the flow's schema.

/// The name of the hidden source table that holds the files a `read_files` flow loaded.
pub(super) fn files_source(flow: &str) -> String {
    hidden_table("__asof_files_", flow)
}

/// The hidden events table of snapshot flow `flow`.
pub(super) fn snapshot_events(flow: &str) -> String {
    hidden_table("__asof_snapshots_", flow)
}

/// The name of a hidden table of `flow`: `prefix` and the flow's name, in the flow's schema (so
/// that the schema's tables include it: `sales.t` has `sales.__asof_files_t`).
fn hidden_table(prefix: &str, flow: &str) -> String {
    match flow.rsplit_once('.') {
        Some((schema, name)) => format!("{schema}.{prefix}{name}"),
        None => format!("{prefix}{flow}"),
    }
}
