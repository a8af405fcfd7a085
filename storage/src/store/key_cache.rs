//! The last few keys of a table read without loading it ([`super::Store::read_key`]): an
//! application that looks up the same keys again and again (a service answering as-of questions
//! about its customers) reads each key's head and pages once, then answers from memory, and its
//! point index ([`crate::engine::lookup`]) is built once. Bounded by [`KEYS`]; valid for one
//! commit of the table (a key asked after a later commit is read again).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use crate::engine::TableState;

/// How many keys a table keeps read.
pub(super) const KEYS: usize = 64;

/// Keys read at one commit, most recent last.
#[derive(Default)]
pub(super) struct KeyCache {
    inner: Mutex<Cached>,
}

#[derive(Default)]
struct Cached {
    /// The commit the states are as of.
    version: u64,
    keys: VecDeque<(Vec<u8>, Arc<TableState>)>,
}

impl KeyCache {
    /// The state of `key` read at commit `version`, if kept.
    pub fn get(&self, key: &[u8], version: u64) -> Option<Arc<TableState>> {
        let mut c = self.inner.lock().ok()?;
        if c.version != version {
            return None;
        }
        let i = c.keys.iter().position(|(k, _)| k == key)?;
        let hit = c.keys.remove(i)?;
        let state = hit.1.clone();
        c.keys.push_back(hit);
        Some(state)
    }

    /// Keeps the state of `key` read at commit `version` (forgetting states of other commits,
    /// and the least recently used key beyond [`KEYS`]).
    pub fn put(&self, key: &[u8], version: u64, state: Arc<TableState>) {
        let Ok(mut c) = self.inner.lock() else {
            return;
        };
        if c.version != version {
            c.keys.clear();
            c.version = version;
        }
        c.keys.retain(|(k, _)| k != key);
        if c.keys.len() == KEYS {
            c.keys.pop_front();
        }
        c.keys.push_back((key.to_vec(), state));
    }

    /// Forgets every key (the table is in memory now, or was changed).
    pub fn clear(&self) {
        if let Ok(mut c) = self.inner.lock() {
            c.keys.clear();
        }
    }
}
