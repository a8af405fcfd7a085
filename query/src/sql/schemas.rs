//! Schemas and catalogs in a session: `CREATE SCHEMA`, `CREATE CATALOG`, `DROP SCHEMA`, `USE`,
//! `SHOW SCHEMAS` (`registry.rs` registers the names with DataFusion).

use std::sync::Arc;

use arrow::array::{RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};

use super::context::df;
use super::namespace::{self, schema_of, split_schema, Namespace, DEFAULT_SCHEMA};
use super::statement::NamespaceStmt;
use super::{Output, SqlSession};
use crate::error::{QueryError, Result};

impl SqlSession {
    pub(super) fn namespace(&mut self, stmt: NamespaceStmt) -> Result<Output> {
        match stmt {
            NamespaceStmt::CreateSchema {
                name,
                if_not_exists,
                comment,
            } => {
                let stored = self.ns.schema_name(&name)?;
                if self.schema_known(&stored)? {
                    if if_not_exists {
                        return Ok(Output::Done(format!("schema {name} exists already")));
                    }
                    return Err(QueryError::Invalid(format!(
                        "schema `{name}` exists already"
                    )));
                }
                let (catalog, _) = split_schema(&stored);
                if !self.catalog_known(&catalog)? {
                    return Err(QueryError::Invalid(format!(
                        "no catalog named `{catalog}`: CREATE CATALOG {catalog} first"
                    )));
                }
                self.store.create_schema(&stored, &comment)?;
                Ok(Output::Done(format!("schema {name} created")))
            }
            NamespaceStmt::CreateCatalog {
                name,
                if_not_exists,
                comment,
            } => {
                if name.contains('.') {
                    return Err(QueryError::Invalid(format!(
                        "`{name}` is not a catalog name: a catalog name has one part"
                    )));
                }
                if self.catalog_known(&name)? {
                    if if_not_exists {
                        return Ok(Output::Done(format!("catalog {name} exists already")));
                    }
                    return Err(QueryError::Invalid(format!(
                        "catalog `{name}` exists already"
                    )));
                }
                // A catalog is its schemas: it starts with `default`, as in Databricks.
                self.store
                    .create_schema(&format!("{name}.{DEFAULT_SCHEMA}"), &comment)?;
                Ok(Output::Done(format!("catalog {name} created")))
            }
            NamespaceStmt::DropSchema {
                name,
                if_exists,
                cascade,
            } => {
                let stored = self.schema_spelling(&self.ns.schema_name(&name)?)?;
                if stored.is_empty() {
                    return Err(QueryError::Invalid(
                        "schema `default` of catalog `main` cannot be dropped".into(),
                    ));
                }
                if !self.schema_known(&stored)? {
                    if if_exists {
                        return Ok(Output::Done(format!("schema {name} does not exist")));
                    }
                    return Err(QueryError::Invalid(format!("no schema named `{name}`")));
                }
                let mut inside: Vec<String> = self.store.tables()?;
                inside.extend(self.store.sources()?);
                inside.extend(self.store.views()?.into_iter().map(|(v, _)| v));
                inside.retain(|t| schema_of(t) == stored);
                if !inside.is_empty() && !cascade {
                    return Err(QueryError::Invalid(format!(
                        "schema `{name}` holds {} table(s) and view(s) ({}): drop them first, or DROP SCHEMA {name} CASCADE",
                        inside.len(),
                        inside.join(", ")
                    )));
                }
                // Nothing outside the schema may read what goes with it: checked before anything
                // is dropped.
                for t in self.store.tables()? {
                    if inside.contains(&t) {
                        continue;
                    }
                    if let Some(f) = self
                        .store
                        .flows(&t)?
                        .into_iter()
                        .find(|f| f.source_table.as_ref().is_some_and(|s| inside.contains(s)))
                    {
                        return Err(QueryError::Invalid(format!(
                            "`{t}` (outside schema `{name}`) reads `{}` through flow `{}`: drop it first; nothing was dropped",
                            f.source_table.unwrap_or_default(),
                            f.name
                        )));
                    }
                }
                for t in self.store.sources()? {
                    if inside.contains(&t) {
                        continue;
                    }
                    if let Some(f) = self
                        .store
                        .append_flows(&t)?
                        .into_iter()
                        .find(|f| inside.contains(&f.source))
                    {
                        return Err(QueryError::Invalid(format!(
                            "`{t}` (outside schema `{name}`) reads `{}` through flow `{}`: drop it first; nothing was dropped",
                            f.source, f.name
                        )));
                    }
                }
                // Tables that feed others go after those they feed: drop what can be dropped,
                // again, until everything is gone or nothing more can go.
                let mut left: Vec<String> = inside.clone();
                while !left.is_empty() {
                    let before = left.len();
                    let mut failed = Vec::new();
                    let mut last = None;
                    for t in left {
                        match self.store.drop_table(&t) {
                            Ok(()) => self.deregister_named(&t)?,
                            Err(e) => {
                                last = Some(e);
                                failed.push(t);
                            }
                        }
                    }
                    if let (Some(e), true) = (last, failed.len() == before) {
                        return Err(e.into());
                    }
                    left = failed;
                }
                self.store.drop_schema(&stored)?;
                let (catalog, schema) = split_schema(&stored);
                if let Some(c) = self.ctx.catalog(&catalog) {
                    c.deregister_schema(&schema, true).map_err(df)?;
                }
                if self.ns.current() == stored {
                    self.set_namespace(Namespace::default())?;
                }
                Ok(Output::Done(format!(
                    "schema {name} dropped{}",
                    if inside.is_empty() {
                        String::new()
                    } else {
                        format!(" with {}", inside.join(", "))
                    }
                )))
            }
            NamespaceStmt::UseSchema(name) => {
                let stored = self.schema_spelling(&self.ns.schema_name(&name)?)?;
                if !self.schema_known(&stored)? {
                    return Err(QueryError::Invalid(format!(
                        "no schema named `{name}`: CREATE SCHEMA {name} first"
                    )));
                }
                let (catalog, schema) = split_schema(&stored);
                self.set_namespace(Namespace { catalog, schema })?;
                Ok(Output::Done(format!("using schema {name}")))
            }
            NamespaceStmt::UseCatalog(name) => {
                if !self.catalog_known(&name)? {
                    return Err(QueryError::Invalid(format!(
                        "no catalog named `{name}`: CREATE CATALOG {name} first"
                    )));
                }
                self.set_namespace(Namespace {
                    catalog: name.clone(),
                    schema: DEFAULT_SCHEMA.into(),
                })?;
                Ok(Output::Done(format!("using catalog {name}")))
            }
            NamespaceStmt::ShowSchemas { catalog } => {
                let catalog = catalog.unwrap_or_else(|| self.ns.catalog.clone());
                let mut names: Vec<String> = self
                    .store
                    .schemas()?
                    .into_iter()
                    .map(|(s, _)| split_schema(&s))
                    .filter(|(c, _)| *c == catalog)
                    .map(|(_, s)| s)
                    .collect();
                if catalog == namespace::DEFAULT_CATALOG {
                    names.push(DEFAULT_SCHEMA.into());
                }
                names.sort();
                let schema = Arc::new(Schema::new(vec![Field::new(
                    "databaseName",
                    DataType::Utf8,
                    false,
                )]));
                let batch = RecordBatch::try_new(
                    schema.clone(),
                    vec![Arc::new(StringArray::from_iter_values(names))],
                )?;
                Ok(Output::Batches(schema, vec![batch]))
            }
        }
    }

    /// The store's name of table `written` (`t`, `s.t`, `c.s.t`, in any case) in this session;
    /// its schema spelled as it was created.
    pub(super) fn stored_name(&self, written: &str) -> Result<String> {
        let stored = self.ns.table(written)?;
        let schema = schema_of(&stored);
        let stored = if schema.is_empty() {
            stored
        } else {
            format!(
                "{}.{}",
                self.schema_spelling(schema)?,
                namespace::last_part(&stored)
            )
        };
        Ok(self.known_names()?.spelling(&stored))
    }

    /// Stored schema `stored` as it was created (schema names match in any case).
    fn schema_spelling(&self, stored: &str) -> Result<String> {
        Ok(self
            .store
            .schemas()?
            .into_iter()
            .map(|(s, _)| s)
            .find(|s| s.eq_ignore_ascii_case(stored))
            .unwrap_or_else(|| stored.to_string()))
    }

    /// Refuses a new table named `stored` whose schema was not created.
    pub(super) fn schema_exists(&self, stored_table: &str) -> Result<()> {
        let schema = schema_of(stored_table);
        if self.schema_known(schema)? {
            return Ok(());
        }
        Err(QueryError::Invalid(format!(
            "no schema named `{schema}` for table `{stored_table}`: CREATE SCHEMA {schema} first"
        )))
    }

    fn schema_known(&self, stored: &str) -> Result<bool> {
        Ok(stored.is_empty()
            || self
                .store
                .schemas()?
                .iter()
                .any(|(s, _)| s.eq_ignore_ascii_case(stored)))
    }

    fn catalog_known(&self, catalog: &str) -> Result<bool> {
        Ok(catalog == namespace::DEFAULT_CATALOG
            || self
                .store
                .schemas()?
                .iter()
                .any(|(s, _)| split_schema(s).0.eq_ignore_ascii_case(catalog) && s.contains('.')))
    }

    /// Reads names in `ns` from now on (the scratch tables of the last statement go first: they
    /// live in the current schema).
    fn set_namespace(&mut self, ns: Namespace) -> Result<()> {
        self.clear_scratch()?;
        self.use_namespace(ns)
    }

    /// Reads names in `ns` (its DataFusion schema made if missing).
    pub(super) fn use_namespace(&mut self, ns: Namespace) -> Result<()> {
        self.df_schema(&ns.current())?;
        let state = self.ctx.state_ref();
        let mut state = state.write();
        let options = state.config_mut().options_mut();
        options.catalog.default_catalog = ns.catalog.clone();
        options.catalog.default_schema = ns.schema.clone();
        drop(state);
        self.ns = ns;
        Ok(())
    }
}
