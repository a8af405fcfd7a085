//! Schemas: names made by `CREATE SCHEMA`, under which tables are named `schema.table`.
//!
//! The store keeps only the schema's name and comment; a table belongs to a schema by its name
//! (the SQL layer decides how qualified names are spelled: docs/SEMANTICS.md §11).

use super::commit::write_or_poison;
use super::Store;
use crate::error::{Error, Result};
use crate::format::keys;
use crate::kv::WriteBatch;

impl Store {
    /// Makes schema `name` with `comment` (empty for none).
    pub fn create_schema(&self, name: &str, comment: &str) -> Result<()> {
        let mut g = self.write_inner()?;
        let inner = &mut *g;
        if inner.schemas.contains_key(name) {
            return Err(Error::AlreadyExists {
                kind: "schema",
                name: name.to_string(),
            });
        }
        let mut b = WriteBatch::default();
        b.put(keys::schema(name), comment.as_bytes().to_vec());
        write_or_poison(inner.kv.as_ref(), &mut inner.poisoned, b)?;
        inner.schemas.insert(name.to_string(), comment.to_string());
        Ok(())
    }

    /// The schemas made by [`Store::create_schema`]: name and comment, by name.
    pub fn schemas(&self) -> Result<Vec<(String, String)>> {
        Ok(self
            .read_inner()?
            .schemas
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }

    /// Forgets schema `name`. Its tables are the caller's to drop first.
    pub fn drop_schema(&self, name: &str) -> Result<()> {
        let mut g = self.write_inner()?;
        let inner = &mut *g;
        if !inner.schemas.contains_key(name) {
            return Err(Error::NotFound {
                kind: "schema",
                name: name.to_string(),
            });
        }
        let mut b = WriteBatch::default();
        b.delete(keys::schema(name));
        write_or_poison(inner.kv.as_ref(), &mut inner.poisoned, b)?;
        inner.schemas.remove(name);
        Ok(())
    }
}
