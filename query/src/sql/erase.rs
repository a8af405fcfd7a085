//! `ERASE FROM t WHERE condition REASON 'why'`: the condition is evaluated over the table's keys
//! (every key it has events of, deleted ones too), and the store erases the keys it selects
//! ([`asof_storage::Store::erase`]; docs/SEMANTICS.md §12.2).

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, RecordBatch, UInt64Array};
use arrow::datatypes::{DataType, Field, Schema};
use datafusion::datasource::MemTable;

use asof_storage::{ERASE, ERASE_REASON};

use super::parse::quote_ident;
use super::{Output, SqlSession};
use crate::arrow_conv::ValueBuilder;
use crate::error::{QueryError, Result};

/// The column that numbers the keys while the condition runs.
const KEY_NUMBER: &str = "__asof_key_number";

impl SqlSession {
    /// The latest version of `table`, to name what a statement's commits did after it.
    pub(super) fn latest_version(&self, table: &str) -> Result<u64> {
        Ok(self.store.history(table)?.last().map_or(0, |c| c.version))
    }

    /// A line for each erasure of `table` after `version`: those its retention made after the
    /// statement's own commits (docs/SEMANTICS.md §12.3).
    pub(super) fn erasures_after(&self, table: &str, version: u64) -> Result<Vec<String>> {
        Ok(self
            .store
            .history(table)?
            .iter()
            .filter(|c| c.version > version && c.operation == ERASE)
            .map(|c| {
                let p = |k: &str| c.parameters.get(k).map_or("0", String::as_str);
                let n = |k: &str, one: &str, many: &str| {
                    let v = p(k);
                    format!("{v} {}", if v == "1" { one } else { many })
                };
                format!(
                    "{table}: commit {} erased {} ({}, {}), {}",
                    c.version,
                    n("keys", "key", "keys"),
                    n("events", "event", "events"),
                    n("source_rows", "source row", "source rows"),
                    p(ERASE_REASON)
                )
            })
            .collect())
    }

    pub(super) fn erase(&mut self, table: &str, condition: &str, reason: &str) -> Result<Output> {
        if !self.store.tables()?.iter().any(|t| t == table) {
            return Err(QueryError::Invalid(
                if self.store.sources()?.iter().any(|s| s == table) {
                    format!("`{table}` is a source table: ERASE runs on streaming tables, and removes the rows of their sources that carry the erased keys; nothing was changed")
                } else {
                    format!("no streaming table named `{table}`; nothing was changed")
                },
            ));
        }
        // A snapshot flow diffs each snapshot against the one before, read from the table that
        // holds them: an erased key would come back from there.
        self.refuse_if_fed_by_snapshots(table, "ERASE FROM")?;
        let schema = self.store.schema(table)?;
        let keys = self.store.table_keys(table)?;
        let names = schema.key_names();
        let mut fields = Vec::new();
        let mut columns: Vec<ArrayRef> = Vec::new();
        for (j, &i) in schema.key_columns.iter().enumerate() {
            let (name, ty) = &schema.columns[i];
            let mut b = ValueBuilder::new(ty, keys.len());
            for k in &keys {
                b.append(&k[j]);
            }
            fields.push(Field::new(name, ty.to_arrow(), true));
            columns.push(b.finish()?);
        }
        fields.push(Field::new(KEY_NUMBER, DataType::UInt64, false));
        columns.push(Arc::new(UInt64Array::from_iter_values(
            0..keys.len() as u64,
        )));
        let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
            .map_err(|e| QueryError::Invalid(e.to_string()))?;
        // A context of its own: the condition sees the keys and nothing else.
        let ctx = super::context::new_context(self.options.query_memory)?;
        let keys_table =
            MemTable::try_new(batch.schema(), vec![vec![batch]]).map_err(super::context::df)?;
        ctx.register_table(
            datafusion::common::TableReference::bare(table),
            Arc::new(keys_table),
        )
        .map_err(super::context::df)?;
        let refused = |e: &dyn std::fmt::Display| {
            QueryError::Invalid(format!(
                "ERASE FROM `{table}`: the condition may name only the key columns ({}): {e}; nothing was changed",
                names.join(", ")
            ))
        };
        // One expression, nothing after it (no `UNION`, no second statement).
        {
            use sqlparser::dialect::DatabricksDialect;
            use sqlparser::parser::Parser;
            use sqlparser::tokenizer::Token;
            let mut p = Parser::new(&DatabricksDialect {})
                .try_with_sql(condition)
                .map_err(|e| refused(&e))?;
            p.parse_expr().map_err(|e| refused(&e))?;
            if p.peek_token().token != Token::EOF {
                return Err(refused(&"it must be one expression"));
            }
        }
        let query = format!(
            "SELECT {KEY_NUMBER} FROM {} WHERE {condition}",
            quote_ident(table)
        );
        let selected = self.runtime.block_on(async {
            let frame = ctx.sql(&query).await?;
            frame.collect().await
        });
        let selected = selected.map_err(|e| refused(&e))?;
        let mut chosen = Vec::new();
        for b in &selected {
            let numbers = b
                .column(0)
                .as_any()
                .downcast_ref::<UInt64Array>()
                .ok_or_else(|| QueryError::Invalid("ERASE: key numbers".into()))?;
            for i in 0..numbers.len() {
                let key = keys
                    .get(numbers.value(i) as usize)
                    .ok_or_else(|| refused(&"it selects rows that are not keys"))?;
                chosen.push(key.clone());
            }
        }
        let r = self.store.erase(table, &chosen, reason)?;
        let Some(version) = r.version else {
            return Ok(Output::Done(format!(
                "{table}: no key matched; nothing was erased"
            )));
        };
        let n =
            |count: u64, what: &str| format!("{count} {what}{}", if count == 1 { "" } else { "s" });
        let mut line = format!(
            "{table}: erased {} at version {version}: {} in {}, {}; the store's files were rewritten",
            n(r.keys, "key"),
            n(r.events, "event"),
            n(r.commits_rewritten, "commit"),
            n(r.source_rows, "source row")
        );
        if !r.also_read_by.is_empty() {
            line.push_str(&format!(
                ". Not followed, and may still hold the keys' data: {}",
                r.also_read_by.join("; ")
            ));
        }
        Ok(Output::Done(line))
    }
}
