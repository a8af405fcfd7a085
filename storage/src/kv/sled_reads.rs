//! How [`SledKv`] reads a value whose key sled gave it: through its pointer into the value log,
//! whole or only its first bytes ([`Part`]), sled read again when a compaction or a purge moved
//! it meanwhile; and several keys' values in one walk of sled's range.

use std::sync::Arc;

use super::values::{Part, ValueLog};
use super::{separated, Leading, SledKv};
use crate::error::{Error, Result};

impl SledKv {
    /// `key`'s value, sled holding `held` for it when the caller read it: read from the log when
    /// it is there, else sled read again, for a compaction or a purge may have moved it since; as
    /// long as it keeps moving, again. `None`: the key was deleted meanwhile. The same pointer
    /// missing twice in the same log is damage.
    pub(super) fn resolve(
        &self,
        log: &ValueLog,
        key: &[u8],
        held: &[u8],
    ) -> Result<Option<Vec<u8>>> {
        Ok(self
            .resolve_part(log, key, held, Part::Whole)?
            .map(|(v, _)| v))
    }

    /// [`SledKv::resolve`], only `part` of the value, with the length of the whole value.
    pub(super) fn resolve_part(
        &self,
        log: &ValueLog,
        key: &[u8],
        held: &[u8],
        part: Part,
    ) -> Result<Option<Leading>> {
        if let Some(v) = separated::value_part(log, key, held, part)? {
            return Ok(Some(v));
        }
        let mut last = (held.to_vec(), None::<Arc<ValueLog>>);
        loop {
            let log = self.values()?;
            let Some(held) = self.db()?.get(key)? else {
                return Ok(None);
            };
            if held[..] == last.0[..] && last.1.as_ref().is_some_and(|l| Arc::ptr_eq(l, &log)) {
                return Err(Error::Corrupt(format!(
                    "the value of key {} is not in the value log where the store's records say",
                    String::from_utf8_lossy(key)
                )));
            }
            if let Some(v) = separated::value_part(&log, key, &held, part)? {
                return Ok(Some(v));
            }
            last = (held.to_vec(), Some(log));
        }
    }

    /// The values of `keys`, each as `part(i)` says for `keys[i]`: in one walk of sled's range
    /// from the first to the last if they are ascending (see [`KvStore::get_many`]).
    pub(super) fn get_many_parts(
        &self,
        keys: &[Vec<u8>],
        part: impl Fn(usize) -> Part,
    ) -> Result<Vec<Option<Leading>>> {
        let (Some(first), Some(last)) = (keys.first(), keys.last()) else {
            return Ok(Vec::new());
        };
        let log = self.values()?;
        if keys.len() < 3 || keys.windows(2).any(|w| w[0] >= w[1]) {
            let db = self.db()?;
            let one = |(i, k): (usize, &Vec<u8>)| match db.get(k)? {
                Some(held) if !separated::is_own(k) => self.resolve_part(&log, k, &held, part(i)),
                _ => Ok(None),
            };
            return keys.iter().enumerate().map(one).collect();
        }
        let db = self.db()?;
        let mut out = Vec::with_capacity(keys.len());
        let mut wanted = keys.iter().peekable();
        for pair in db.range(&first[..]..=&last[..]) {
            let (k, held) = pair?;
            // Keys asked for that sled does not hold, before this one.
            while wanted.next_if(|w| w[..] < k[..]).is_some() {
                out.push(None);
            }
            if wanted.next_if(|w| w[..] == k[..]).is_some() {
                out.push(match separated::is_own(&k) {
                    true => None,
                    false => self.resolve_part(&log, &k, &held, part(out.len()))?,
                });
            }
        }
        out.resize(keys.len(), None);
        Ok(out)
    }
}
