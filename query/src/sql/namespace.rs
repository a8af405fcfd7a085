//! Qualified names: `catalog.schema.table`, as Databricks writes them.
//!
//! A session reads a name in its current catalog and schema (`main` and `default` until `USE`
//! changes them). The store keeps a table under its full name with the default catalog and
//! schema left out, so that names made before schemas existed stay what they were:
//!
//! | written | current | kept as |
//! |---|---|---|
//! | `t` | `main.default` | `t` |
//! | `t` | `main.sales` | `sales.t` |
//! | `sales.t`, `main.sales.t` | any | `sales.t` |
//! | `default.t`, `main.default.t` | any | `t` |
//! | `t` | `prod.sales` | `prod.sales.t` |
//! | `prod.default.t` | any | `prod.default.t` |
//!
//! Schemas are kept the same way (`sales`, `prod.sales`). DataFusion sees every name in full
//! ([`reference`]), so a query reads `t`, `default.t` and `main.default.t` alike.

use datafusion::common::TableReference;

use crate::error::{QueryError, Result};

/// The catalog a name without one is in, until `USE CATALOG`.
pub(crate) const DEFAULT_CATALOG: &str = "main";
/// The schema a name without one is in, until `USE`; it always exists.
pub(crate) const DEFAULT_SCHEMA: &str = "default";

/// The session's current catalog and schema.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Namespace {
    pub catalog: String,
    pub schema: String,
}

impl Default for Namespace {
    fn default() -> Self {
        Namespace {
            catalog: DEFAULT_CATALOG.into(),
            schema: DEFAULT_SCHEMA.into(),
        }
    }
}

impl Namespace {
    /// The store's name of table `written` (one to three parts joined by `.`) read here.
    pub fn table(&self, written: &str) -> Result<String> {
        let parts: Vec<&str> = written.split('.').collect();
        let (catalog, schema, table) = match parts.as_slice() {
            [t] => (self.catalog.as_str(), self.schema.as_str(), *t),
            [s, t] => (self.catalog.as_str(), *s, *t),
            [c, s, t] => (*c, *s, *t),
            _ => {
                return Err(QueryError::Invalid(format!(
                    "`{written}` has more than three parts: a name is [catalog.][schema.]table"
                )))
            }
        };
        Ok(join(&[&stored_schema(catalog, schema), table]))
    }

    /// The store's name of schema `written` (`s` or `catalog.s`) read here.
    pub fn schema_name(&self, written: &str) -> Result<String> {
        match written.split('.').collect::<Vec<_>>().as_slice() {
            [s] => Ok(stored_schema(&self.catalog, s)),
            [c, s] => Ok(stored_schema(c, s)),
            _ => Err(QueryError::Invalid(format!(
                "`{written}` is not a schema name: a schema is [catalog.]schema"
            ))),
        }
    }

    /// The store's name of the current schema.
    pub fn current(&self) -> String {
        stored_schema(&self.catalog, &self.schema)
    }
}

/// A schema's stored name: `catalog.schema` without the default catalog, empty for the default
/// schema of the default catalog.
fn stored_schema(catalog: &str, schema: &str) -> String {
    match (catalog == DEFAULT_CATALOG, schema == DEFAULT_SCHEMA) {
        (true, true) => String::new(),
        (true, false) => schema.to_string(),
        (false, _) => format!("{catalog}.{schema}"),
    }
}

fn join(parts: &[&str]) -> String {
    parts
        .iter()
        .filter(|p| !p.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join(".")
}

/// The catalog and schema of a stored schema or table prefix (`""`, `s`, `c.s`).
pub(crate) fn split_schema(stored: &str) -> (String, String) {
    match stored.split_once('.') {
        _ if stored.is_empty() => (DEFAULT_CATALOG.into(), DEFAULT_SCHEMA.into()),
        Some((c, s)) => (c.into(), s.into()),
        None => (DEFAULT_CATALOG.into(), stored.into()),
    }
}

/// The stored schema a stored table name is in.
pub(crate) fn schema_of(stored_table: &str) -> &str {
    stored_table.rsplit_once('.').map_or("", |(s, _)| s)
}

/// The last part of a stored name: the table's own name.
pub(crate) fn last_part(stored: &str) -> &str {
    stored.rsplit_once('.').map_or(stored, |(_, t)| t)
}

/// The catalog, schema and name of a stored table name, each written out (`sales.t` is
/// `main`, `sales`, `t`): how a client that browses (a Flight SQL `GetTables`) lists it.
pub fn full_name(stored_table: &str) -> (String, String, String) {
    let (catalog, schema) = split_schema(schema_of(stored_table));
    (catalog, schema, last_part(stored_table).to_string())
}

/// The catalog and schema of a stored schema name, written out (`sales` is `main`, `sales`).
pub fn full_schema_name(stored_schema: &str) -> (String, String) {
    split_schema(stored_schema)
}

/// The full DataFusion reference of a stored table name.
pub(crate) fn reference(stored_table: &str) -> TableReference {
    let (catalog, schema) = split_schema(schema_of(stored_table));
    TableReference::full(catalog, schema, last_part(stored_table))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(catalog: &str, schema: &str) -> Namespace {
        Namespace {
            catalog: catalog.into(),
            schema: schema.into(),
        }
    }

    #[test]
    fn a_stored_name_is_written_out_in_full() {
        let full = |c: &str, s: &str, t: &str| (c.to_string(), s.to_string(), t.to_string());
        assert_eq!(full_name("t"), full("main", "default", "t"));
        assert_eq!(full_name("sales.t"), full("main", "sales", "t"));
        assert_eq!(full_name("prod.sales.t"), full("prod", "sales", "t"));
    }

    #[test]
    fn names_are_kept_without_the_default_catalog_and_schema() {
        let home = Namespace::default();
        assert_eq!(home.table("t").unwrap(), "t");
        assert_eq!(home.table("default.t").unwrap(), "t");
        assert_eq!(home.table("main.default.t").unwrap(), "t");
        assert_eq!(home.table("sales.t").unwrap(), "sales.t");
        assert_eq!(home.table("main.sales.t").unwrap(), "sales.t");
        assert_eq!(home.table("prod.default.t").unwrap(), "prod.default.t");
        assert_eq!(at("main", "sales").table("t").unwrap(), "sales.t");
        assert_eq!(at("main", "sales").table("default.t").unwrap(), "t");
        assert_eq!(at("prod", "sales").table("t").unwrap(), "prod.sales.t");
        assert_eq!(at("prod", "sales").table("ops.t").unwrap(), "prod.ops.t");
        assert!(home.table("a.b.c.d").is_err());
    }

    #[test]
    fn a_stored_name_gives_its_full_reference_back() {
        for (stored, full) in [
            ("t", "main.default.t"),
            ("sales.t", "main.sales.t"),
            ("prod.sales.t", "prod.sales.t"),
        ] {
            assert_eq!(reference(stored).to_string(), full);
        }
        assert_eq!(at("prod", "x").schema_name("sales").unwrap(), "prod.sales");
        assert_eq!(Namespace::default().schema_name("default").unwrap(), "");
        assert_eq!(split_schema("prod.sales"), ("prod".into(), "sales".into()));
    }
}
