//! The records the engine works on and the format encodes: events on their way into a table,
//! events as a key stores them, and stored row versions. Plain data: they import nothing of the
//! engine or of the format, so both can use them without importing each other.

use crate::value::Row;

pub(crate) use crate::bytes::Bytes;
pub(crate) type RowId = u32;

/// Upsert or delete. (Truncates are kept per table, not per key.)
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum EventKind {
    /// Sets the key's values.
    Upsert = 0,
    /// Deletes the key.
    Delete = 1,
}

/// Where an event came from: a change feed, or a DML statement on the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum Origin {
    /// A source row applied through a flow.
    #[default]
    Feed,
    /// A DML statement (`INSERT`, `UPDATE`, `DELETE`, `MERGE`): its values are the whole row
    /// (no IGNORE NULL UPDATES merge), and it replaces any event with the same identity that
    /// came before it (docs/SEMANTICS.md §2.4).
    Statement,
}

/// One event of a key, as stored: output values and, with COLUMNS TO UPDATE, the output columns it
/// writes (sorted positions; `None` = all).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Event {
    pub kind: EventKind,
    pub values: Row,
    pub update: Option<Box<[u32]>>,
    pub origin: Origin,
}

impl Event {
    /// Whether this event, arriving now, replaces `other`, which has the same identity.
    /// docs/SEMANTICS.md §2.4: a statement's event replaces whatever came before it, and a feed's
    /// never replaces a statement's; between feed events (§3), a delete beats an upsert, otherwise
    /// the greater payload in the canonical order wins.
    pub fn beats(&self, other: &Event) -> bool {
        use std::cmp::Ordering::*;
        match (self.origin, other.origin) {
            (Origin::Statement, _) => return true,
            (Origin::Feed, Origin::Statement) => return false,
            (Origin::Feed, Origin::Feed) => {}
        }
        match self.kind.cmp(&other.kind) {
            Greater => true,
            Less => false,
            Equal => match crate::value::cmp_rows(&self.values, &other.values) {
                Greater => true,
                Less => false,
                Equal => self.update > other.update,
            },
        }
    }
    pub fn same_as(&self, other: &Event) -> bool {
        self.kind == other.kind
            && self.origin == other.origin
            && self.values[..] == other.values[..]
            && self.update == other.update
    }
}

/// A validated event on its way into a table.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Incoming {
    pub key: Bytes,
    pub seq: Bytes,
    /// System sequence (bitemporal); empty otherwise.
    pub sys: Bytes,
    pub event: Event,
}

/// One stored version of a target row. It knows the commit that wrote it and the commit that
/// retired it, which is all time travel and the change feed need.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredRow {
    pub(crate) key: Bytes,
    pub(crate) values: Row,
    pub(crate) start: Option<Bytes>,
    pub(crate) end: Option<Bytes>,
    pub(crate) sys_start: Option<Bytes>,
    pub(crate) sys_end: Option<Bytes>,
    pub(crate) added: u64,
    pub(crate) retired: Option<u64>,
}

/// A key's frozen rows read back, by id.
pub(crate) type ColdRows = Vec<(RowId, StoredRow)>;
