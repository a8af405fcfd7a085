//! Report receipts in a session (docs/SEMANTICS.md §12.1): a query run with a receipt reads every
//! table at a version fixed before it starts, and a receipt is verified by running its query
//! again at those versions.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::SchemaRef;
use datafusion::logical_expr::LogicalPlan;

use super::context::df;
use super::parse::split;
use super::pins::Pins;
use super::provider::{SourceProvider, TargetTable};
use super::statement::Kind;
use super::{Output, SqlSession};
use crate::error::{QueryError, Result};
use crate::receipt::{result_hash, Receipt, ReceiptCheck};

impl SqlSession {
    /// Runs one query with a receipt: every table it reads at its version now, the result, and
    /// the receipt that proves it later ([`SqlSession::verify_receipt`]).
    pub fn query_with_receipt(
        &mut self,
        sql: &str,
    ) -> Result<(SchemaRef, Vec<RecordBatch>, Receipt)> {
        let sql = self.substitute(sql)?;
        self.with_receipt(&sql)
    }

    /// [`SqlSession::query_with_receipt`] of a query whose `${name}`s were substituted already.
    fn with_receipt(&mut self, sql: &str) -> Result<(SchemaRef, Vec<RecordBatch>, Receipt)> {
        let stmt = one_query(self, sql)?;
        self.clear_scratch()?;
        self.register_all()?;
        let plan = self.plan(&stmt)?.logical_plan().clone();
        let mut pins = Pins::default();
        read_tables(&plan, &mut |t| match t {
            Read::Target(name) => {
                pins.targets.insert(name.to_string(), 0);
            }
            Read::Source(name) => {
                pins.sources.insert(name.to_string(), 0);
            }
        })?;
        for (name, v) in pins.targets.iter_mut() {
            *v = self.store.latest_version(name)?;
        }
        for (name, v) in pins.sources.iter_mut() {
            *v = self
                .store
                .source_history(name)?
                .last()
                .map_or(0, |c| c.version);
        }
        let (schema, batches) = self.run_pinned(&pins, &stmt)?;
        let (rows, hash) = result_hash(&schema, &batches)?;
        let receipt = Receipt {
            sql: sql.to_string(),
            tables: pins.targets,
            sources: pins.sources,
            rows,
            hash,
            namespace: (self.ns != super::namespace::Namespace::default())
                .then(|| format!("{}.{}", self.ns.catalog, self.ns.schema)),
        };
        Ok((schema, batches, receipt))
    }

    /// Runs a receipt's query again at the versions it records and compares the result's hash.
    pub fn verify_receipt(&mut self, token: &str) -> Result<ReceiptCheck> {
        let receipt = Receipt::parse(token)?;
        // The query's names are read where they were when the receipt was taken.
        let current = self.ns.clone();
        let taken_in = match receipt.namespace.as_ref().and_then(|n| n.split_once('.')) {
            Some((catalog, schema)) => super::namespace::Namespace {
                catalog: catalog.to_string(),
                schema: schema.to_string(),
            },
            None => super::namespace::Namespace::default(),
        };
        self.use_namespace(taken_in)?;
        let ran = one_query(self, &receipt.sql).and_then(|stmt| {
            let pins = Pins {
                targets: receipt.tables.clone(),
                sources: receipt.sources.clone(),
            };
            self.run_pinned(&pins, &stmt)
        });
        let cleared = self.clear_scratch();
        self.use_namespace(current)?;
        cleared?;
        let (schema, batches) = ran?;
        let (rows, hash) = result_hash(&schema, &batches)?;
        let mut erased_since = Vec::new();
        let logs = receipt
            .tables
            .iter()
            .map(|(t, &v)| (t, v, self.store.history(t)))
            .chain(
                receipt
                    .sources
                    .iter()
                    .map(|(t, &v)| (t, v, self.store.source_history(t))),
            );
        for (table, pinned, history) in logs {
            for c in history? {
                if c.version > pinned && c.operation == asof_storage::ERASE {
                    let reason = c.parameters.get(asof_storage::ERASE_REASON);
                    erased_since.push(format!(
                        "{table} at version {}: '{}'",
                        c.version,
                        reason.map_or("", String::as_str)
                    ));
                }
            }
        }
        Ok(ReceiptCheck {
            receipt,
            rows,
            hash,
            erased_since,
        })
    }

    /// Keeps the versions `receipt` read from VACUUM: each table's property
    /// `asof.vacuum.pinnedVersion` becomes the oldest version a kept receipt reads (a
    /// `SET TBLPROPERTIES` commit where it changes).
    pub fn pin_receipt(&mut self, receipt: &Receipt) -> Result<()> {
        use asof_storage::PINNED_VERSION_PROPERTY as PIN;
        for (table, &v) in &receipt.tables {
            let current = self
                .store
                .properties(table)?
                .get(PIN)
                .and_then(|p| p.trim().parse::<u64>().ok());
            if current.is_none_or(|c| v < c) {
                self.store
                    .set_properties(table, BTreeMap::from([(PIN.to_string(), v.to_string())]))?;
            }
        }
        Ok(())
    }

    /// Runs query `stmt` with every table registered again and read at `pins` (a commit since
    /// an earlier plan is not read); the pins are dropped after, whatever happened.
    fn run_pinned(
        &mut self,
        pins: &Pins,
        stmt: &super::parse::Stmt,
    ) -> Result<(SchemaRef, Vec<RecordBatch>)> {
        self.pins = Some(pins.clone());
        let out = self
            .clear_scratch()
            .and_then(|()| self.register_all())
            .and_then(|()| self.query(stmt));
        self.pins = None;
        out
    }

    /// Every table and source table at its latest version: what a query reads, whatever commits
    /// land while it runs (docs/SEMANTICS.md §8).
    pub(super) fn pins_now(&self) -> Result<Pins> {
        let mut pins = Pins::default();
        // A table dropped meanwhile is left out (the statement then finds it gone, or not).
        for name in self.store.tables()? {
            if let Ok(v) = self.store.latest_version(&name) {
                pins.targets.insert(name, v);
            }
        }
        for name in self.store.sources()? {
            // One written before source commit records is read as it is.
            if let Ok(Some(v)) = self.store.source_latest_version(&name) {
                pins.sources.insert(name, v);
            }
        }
        Ok(pins)
    }

    /// The version `table` is read at: pinned, or `None` (the latest).
    pub(super) fn pinned_version(&self, table: &str) -> Option<u64> {
        self.pins.as_ref()?.targets.get(table).copied()
    }

    /// The version of source `name` a receipt pinned, if any (the store checks it exists when
    /// the source is read).
    pub(super) fn pinned_source_version(&self, name: &str) -> Option<u64> {
        self.pins
            .as_ref()
            .and_then(|p| p.sources.get(name))
            .copied()
    }
}

/// `sql` as one query statement.
fn one_query(s: &SqlSession, sql: &str) -> Result<super::parse::Stmt> {
    let mut stmts = split(sql)?;
    if stmts.len() != 1 {
        return Err(QueryError::Invalid(
            "a receipt is for one query: give one statement".into(),
        ));
    }
    let stmt = stmts.remove(0);
    let query = matches!(s.classify(&stmt)?, Kind::Sql) && super::is_query(&stmt);
    if !query {
        return Err(QueryError::Invalid(
            "a receipt is for a query (SELECT, WITH or VALUES), not a statement that changes the store".into(),
        ));
    }
    // What these read is not pinned to a version: a receipt could not be checked later.
    let words = stmt.words();
    if let Some(f) = words.windows(2).find_map(|w| {
        let name = super::parse::upper(&w[0].token);
        let unpinned = matches!(
            name.as_str(),
            "TABLE_CHANGES" | "EXPLAIN_CHANGES" | "READ_FILES"
        );
        (unpinned && w[1].token == sqlparser::tokenizer::Token::LParen).then_some(name)
    }) {
        return Err(QueryError::Invalid(format!(
            "a receipt is for a query over tables; `{}` is not read at a pinned version",
            f.to_lowercase()
        )));
    }
    Ok(stmt)
}

/// A table a plan reads.
enum Read<'a> {
    Target(&'a str),
    Source(&'a str),
}

/// Calls `f` with every store table `plan` reads, through views too.
fn read_tables(plan: &LogicalPlan, f: &mut dyn FnMut(Read<'_>)) -> Result<()> {
    use datafusion::common::tree_node::TreeNodeRecursion;
    let mut found = Ok(());
    plan.apply_with_subqueries(|node| {
        if let LogicalPlan::TableScan(scan) = node {
            let provider = datafusion::datasource::source_as_provider(&scan.source)?;
            let any: &dyn std::any::Any = provider.as_ref();
            if let Some(t) = any.downcast_ref::<TargetTable>() {
                f(Read::Target(t.table()));
            } else if let Some(s) = any.downcast_ref::<SourceProvider>() {
                f(Read::Source(s.name()));
            } else if let Some(v) = any.downcast_ref::<datafusion::catalog::view::ViewTable>() {
                if let Err(e) = read_tables(v.logical_plan(), f) {
                    found = Err(e);
                    return Ok(TreeNodeRecursion::Stop);
                }
            }
        }
        Ok(TreeNodeRecursion::Continue)
    })
    .map_err(df)?;
    found
}

impl SqlSession {
    /// `RECEIPT [PINNED] FOR query`: the query run with a receipt ([`SqlSession::query_with_receipt`]),
    /// answered with one row: `receipt` (the token), `rows`, `hash` and `versions` (what it read).
    /// `PINNED` keeps those versions from VACUUM ([`SqlSession::pin_receipt`]).
    pub(super) fn receipt_statement(&mut self, query: &str, pinned: bool) -> Result<Output> {
        let (_, _, receipt) = self.with_receipt(query)?;
        if pinned {
            self.pin_receipt(&receipt)?;
        }
        let batch = RecordBatch::try_from_iter([
            (
                "receipt",
                Arc::new(StringArray::from(vec![receipt.token()])) as ArrayRef,
            ),
            (
                "rows",
                Arc::new(Int64Array::from(vec![receipt.rows as i64])) as _,
            ),
            (
                "hash",
                Arc::new(StringArray::from(vec![receipt.hash.clone()])) as _,
            ),
            (
                "versions",
                Arc::new(StringArray::from(vec![receipt.versions()])) as _,
            ),
        ])
        .map_err(|e| QueryError::Invalid(e.to_string()))?;
        Ok(Output::Batches(batch.schema(), vec![batch]))
    }

    /// `VERIFY RECEIPT 'token'`: one row, `verified` (whether the query returns at those versions
    /// what the receipt says), the receipt's and today's `rows` and `hash`, the `versions` read
    /// and the erasures made since (`erased_since`, NULL if none). A receipt that does not verify
    /// is an answer, not an error.
    pub(super) fn verify_receipt_statement(&mut self, token: &str) -> Result<Output> {
        let check = self.verify_receipt(token)?;
        let erased = (!check.erased_since.is_empty()).then(|| check.erased_since.join("; "));
        let batch = RecordBatch::try_from_iter([
            (
                "verified",
                Arc::new(BooleanArray::from(vec![check.matches()])) as ArrayRef,
            ),
            (
                "rows",
                Arc::new(Int64Array::from(vec![check.rows as i64])) as _,
            ),
            (
                "hash",
                Arc::new(StringArray::from(vec![check.hash.clone()])) as _,
            ),
            (
                "receipt_rows",
                Arc::new(Int64Array::from(vec![check.receipt.rows as i64])) as _,
            ),
            (
                "receipt_hash",
                Arc::new(StringArray::from(vec![check.receipt.hash.clone()])) as _,
            ),
            (
                "versions",
                Arc::new(StringArray::from(vec![check.receipt.versions()])) as _,
            ),
            (
                "erased_since",
                Arc::new(StringArray::from(vec![erased])) as _,
            ),
        ])
        .map_err(|e| QueryError::Invalid(e.to_string()))?;
        Ok(Output::Batches(batch.schema(), vec![batch]))
    }
}
