//! DataFusion as asof runs it: a session's context ([`new_context`]), and DataFusion's errors as
//! asof's ([`df`]).

use std::sync::Arc;

use datafusion::prelude::SessionContext;

use super::namespace;
use crate::error::{QueryError, Result};

/// DataFusion's error `e` as asof's (`QueryError::Invalid`): an error of asof raised inside a plan
/// by its own message (unwrapped), an exhausted memory pool as the limit the query reached,
/// anything else by DataFusion's message.
pub(super) fn df(e: datafusion::error::DataFusionError) -> QueryError {
    use datafusion::error::DataFusionError;
    // Errors of asof raised inside a DataFusion plan come back wrapped; unwrap them.
    match e.find_root() {
        DataFusionError::External(inner) => QueryError::Invalid(inner.to_string()),
        DataFusionError::ResourcesExhausted(what) => QueryError::Invalid(format!(
            "the query needs more memory than its limit (SessionOptions::query_memory, the CLI's --query-mib): {what}"
        )),
        _ => QueryError::Invalid(e.to_string()),
    }
}

/// A DataFusion context as asof uses it: identifiers keep their case (`CompanyId` stays
/// `CompanyId`, as Databricks shows it; `names.rs` spells other cases as created first), the
/// Databricks dialect, strings as plain `Utf8`, and its operators' memory bounded by
/// `query_memory` bytes ([`super::SessionOptions::query_memory`]), spilling to the system's
/// temporary directory.
pub(super) fn new_context(query_memory: usize) -> Result<SessionContext> {
    let mut config = datafusion::prelude::SessionConfig::new();
    config.options_mut().sql_parser.enable_ident_normalization = false;
    // Databricks SQL: "x" is a string, `x` an identifier (docs/SEMANTICS.md §11).
    config.options_mut().sql_parser.dialect = datafusion::common::config::Dialect::Databricks;
    config.options_mut().sql_parser.map_string_types_to_utf8view = false;
    // Names are read in catalog `main`, schema `default`, as in Databricks (`namespace.rs`).
    config.options_mut().catalog.default_catalog = namespace::DEFAULT_CATALOG.into();
    config.options_mut().catalog.default_schema = namespace::DEFAULT_SCHEMA.into();
    // What a sort keeps aside to merge its spilled runs: DataFusion's 10 MiB, or an eighth of
    // a smaller pool (else every sort in it would fail).
    let merge = &mut config.options_mut().execution.sort_spill_reservation_bytes;
    *merge = (*merge).min(query_memory / 8);
    use datafusion::execution::memory_pool::{FairSpillPool, TrackConsumersPool};
    // The pool names its largest holders when it is exhausted.
    let pool = TrackConsumersPool::new(
        FairSpillPool::new(query_memory),
        std::num::NonZeroUsize::new(3).expect("three is not zero"),
    );
    // A merge of spilled runs holds a batch or two of each run it reads, outside the pool: at
    // most sixteen runs at a time (more are merged in passes).
    let runtime = datafusion::execution::runtime_env::RuntimeEnvBuilder::new()
        .with_max_spill_merge_fan_in(16)
        .with_memory_pool(Arc::new(pool))
        .build_arc()
        .map_err(df)?;
    let ctx = SessionContext::new_with_config_rt(config, runtime);
    // Databricks' `array(1, 2)` is DataFusion's `make_array`.
    let make_array = datafusion::functions_nested::make_array::make_array_udf();
    ctx.register_udf(make_array.as_ref().clone().with_aliases(["array"]));
    Ok(ctx)
}
