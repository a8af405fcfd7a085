//! Registering the store's schemas, tables and views with DataFusion, each under its full name
//! (`namespace.rs`), for the statement about to run.

use std::sync::Arc;

use datafusion::catalog::{
    CatalogProvider, MemoryCatalogProvider, MemorySchemaProvider, TableProvider,
};

use super::context::df;
use super::namespace::{reference, schema_of, split_schema, Namespace};
use super::parse::split;
use super::provider::{self, TargetTable};
use super::SqlSession;
use crate::error::Result;
use crate::scan::TimeSelection;

impl SqlSession {
    /// Registers every schema, table and view of the store with DataFusion, each under its full
    /// name (`namespace.rs`).
    pub(super) fn register_all(&mut self) -> Result<()> {
        for (schema, _) in self.store.schemas()? {
            self.df_schema(&schema)?;
        }
        for name in self.store.sources()? {
            let version = self.pinned_source_version(&name);
            let t = provider::SourceProvider::new(self.store.clone(), &name, version)?;
            self.register_named(&name, Arc::new(t))?;
        }
        for name in self.store.tables()? {
            let t = TargetTable::new(
                self.store.clone(),
                &name,
                TimeSelection::All,
                TimeSelection::All,
                self.pinned_version(&name),
            )?;
            self.register_named(&name, Arc::new(t))?;
        }
        // Views that read other views plan once those are registered: plan what can be planned,
        // again, until nothing more plans.
        let mut left = self.store.views()?;
        for (name, _) in &left {
            self.deregister_named(name)?;
        }
        while !left.is_empty() {
            let before = left.len();
            let mut failed = Vec::new();
            for (name, sql) in left {
                // A view's names are read in its own schema, whatever the session uses now.
                let (catalog, schema) = split_schema(schema_of(&name));
                let current = self.ns.clone();
                self.use_namespace(Namespace { catalog, schema })?;
                let planned = self.plan_view(&sql);
                self.use_namespace(current)?;
                match planned {
                    Ok(plan) => self.register_named(&name, plan.into_view())?,
                    Err(_) => failed.push((name, sql)),
                }
            }
            // A view that does not plan (a table it reads was dropped) is left out, so that it
            // does not stop every other statement; a query of it says it is not found.
            if failed.len() == before {
                break;
            }
            left = failed;
        }
        Ok(())
    }

    /// The plan of a view's SQL.
    fn plan_view(&mut self, sql: &str) -> Result<datafusion::dataframe::DataFrame> {
        let mut text = String::new();
        for stmt in split(sql)? {
            text = self.rewrite(&stmt)?;
        }
        self.runtime.block_on(self.ctx.sql(&text)).map_err(df)
    }

    /// The DataFusion schema of stored schema `stored`, made if missing.
    pub(super) fn df_schema(
        &self,
        stored: &str,
    ) -> Result<Arc<dyn datafusion::catalog::SchemaProvider>> {
        let (catalog, schema) = split_schema(stored);
        let c = match self.ctx.catalog(&catalog) {
            Some(c) => c,
            None => {
                let c: Arc<dyn CatalogProvider> = Arc::new(MemoryCatalogProvider::new());
                self.ctx.register_catalog(&catalog, c.clone());
                c
            }
        };
        Ok(match c.schema(&schema) {
            Some(s) => s,
            None => {
                let s: Arc<dyn datafusion::catalog::SchemaProvider> =
                    Arc::new(MemorySchemaProvider::new());
                c.register_schema(&schema, s.clone()).map_err(df)?;
                s
            }
        })
    }

    /// Registers `provider` under the full reference of stored name `name`, in place of what was
    /// there.
    pub(super) fn register_named(
        &mut self,
        name: &str,
        provider: Arc<dyn TableProvider>,
    ) -> Result<()> {
        self.df_schema(schema_of(name))?;
        self.deregister_named(name)?;
        self.ctx
            .register_table(reference(name), provider)
            .map_err(df)?;
        Ok(())
    }

    /// Forgets stored name `name` in DataFusion.
    pub(super) fn deregister_named(&mut self, name: &str) -> Result<()> {
        let r = reference(name);
        if self
            .ctx
            .catalog(r.catalog().unwrap_or_default())
            .is_some_and(|c| c.schema(r.schema().unwrap_or_default()).is_some())
        {
            self.ctx.deregister_table(r).map_err(df)?;
        }
        Ok(())
    }
}
