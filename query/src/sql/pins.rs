//! The versions a session reads tables at while one statement runs: each table's latest when the
//! statement starts (so that it never sees a commit that lands meanwhile), or those a receipt
//! records ([`super::SqlSession::query_with_receipt`], [`super::SqlSession::verify_receipt`]).

use std::collections::BTreeMap;

/// The versions a statement reads the tables at.
#[derive(Clone, Debug, Default)]
pub(super) struct Pins {
    pub targets: BTreeMap<String, u64>,
    pub sources: BTreeMap<String, u64>,
}
