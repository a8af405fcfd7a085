//! The versions a session reads tables at, pinned by a receipt being checked
//! ([`super::SqlSession::verify_receipt`]) instead of their latest.

use std::collections::BTreeMap;

/// The versions a session reads tables at, instead of their latest.
#[derive(Clone, Debug, Default)]
pub(super) struct Pins {
    pub targets: BTreeMap<String, u64>,
    pub sources: BTreeMap<String, u64>,
}
