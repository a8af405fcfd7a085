//! [`MemKv`]: the key-value layer in memory, for tests, fuzzing and scratch stores.

use super::{KvPair, KvStore, WriteBatch};
use crate::error::{Error, Result};

/// An in-memory [`KvStore`]: nothing survives the process. For tests, fuzzing, and embedders that
/// want a scratch store.
#[derive(Default)]
pub struct MemKv {
    map: std::sync::RwLock<std::collections::BTreeMap<Vec<u8>, Vec<u8>>>,
}

impl KvStore for MemKv {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let m = self
            .map
            .read()
            .map_err(|_| Error::Poisoned("memory store".into()))?;
        Ok(m.get(key).cloned())
    }

    fn scan_prefix<'a>(&'a self, prefix: &[u8]) -> Box<dyn Iterator<Item = Result<KvPair>> + 'a> {
        let items: Vec<Result<KvPair>> = match self.map.read() {
            Ok(m) => m
                .range(prefix.to_vec()..)
                .take_while(|(k, _)| k.starts_with(prefix))
                .map(|(k, v)| Ok((k.clone(), v.clone())))
                .collect(),
            Err(_) => vec![Err(Error::Poisoned("memory store".into()))],
        };
        Box::new(items.into_iter())
    }

    fn scan_prefix_from<'a>(
        &'a self,
        prefix: &[u8],
        from: &[u8],
    ) -> Box<dyn Iterator<Item = Result<KvPair>> + 'a> {
        let from = from.max(prefix).to_vec();
        let items: Vec<Result<KvPair>> = match self.map.read() {
            Ok(m) => m
                .range(from..)
                .take_while(|(k, _)| k.starts_with(prefix))
                .map(|(k, v)| Ok((k.clone(), v.clone())))
                .collect(),
            Err(_) => vec![Err(Error::Poisoned("memory store".into()))],
        };
        Box::new(items.into_iter())
    }

    fn write(&self, batch: WriteBatch) -> Result<()> {
        let mut m = self
            .map
            .write()
            .map_err(|_| Error::Poisoned("memory store".into()))?;
        for (k, v) in batch.ops {
            match v {
                Some(v) => m.insert(k, v),
                None => m.remove(&k),
            };
        }
        Ok(())
    }
}
