//! Expectations: data-quality rules on the rows a flow reads, as Databricks declares them on a
//! streaming table: `CONSTRAINT name EXPECT (condition) [ON VIOLATION DROP ROW | FAIL UPDATE]`.
//!
//! They are checked on each batch of source rows before the flow turns it into events. A row
//! violates an expectation when its condition is false or NULL. A violation is counted (the
//! default, as Databricks' "warn"), drops the row, or fails the whole refresh with nothing
//! applied. Dropped rows never become events, so the log, and every replay of it, are as if the
//! source never had them: expectations change what a refresh reads, not how a table is rebuilt.

use std::sync::Arc;

use arrow::array::{Array, BooleanArray, RecordBatch};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::ingest::ConditionEvaluator;

/// One expectation of a table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Expectation {
    /// Its name (`CONSTRAINT name`).
    pub name: String,
    /// A SQL boolean expression over the source row's columns.
    pub condition: String,
    /// What a violation does.
    pub on_violation: OnViolation,
}

/// What a row that violates an [`Expectation`] does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum OnViolation {
    /// It is applied, and counted in the commit's parameters.
    Warn,
    /// It is left out, and counted (`num_dropped_rows`).
    DropRow,
    /// The refresh fails, naming the expectation and the number of rows; nothing is applied.
    FailUpdate,
}

impl std::fmt::Display for OnViolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            OnViolation::Warn => "warn",
            OnViolation::DropRow => "drop row",
            OnViolation::FailUpdate => "fail update",
        })
    }
}

/// How many rows violated each expectation of a batch, by name.
pub(crate) type Violations = Vec<(String, OnViolation, u64)>;

/// What [`check`] found in a batch.
pub(crate) struct Checked {
    /// The rows to apply.
    pub rows: RecordBatch,
    /// How many rows violated each expectation.
    pub violations: Violations,
    /// How many rows were left out (a row that violates two `DROP ROW` expectations counts once).
    pub dropped: u64,
}

/// Checks `batch` against `expectations`.
pub(crate) fn check(
    table: &str,
    expectations: &[Expectation],
    batch: &RecordBatch,
    evaluator: Option<&Arc<dyn ConditionEvaluator>>,
) -> Result<Checked> {
    if expectations.is_empty() {
        return Ok(Checked {
            rows: batch.clone(),
            violations: Vec::new(),
            dropped: 0,
        });
    }
    let n = batch.num_rows();
    let mut keep = vec![true; n];
    let mut counts = Vec::new();
    for e in expectations {
        let pass = evaluate(table, e, batch, evaluator)?;
        let failed: Vec<usize> = (0..n)
            .filter(|&i| !(pass.is_valid(i) && pass.value(i)))
            .collect();
        if e.on_violation == OnViolation::FailUpdate && !failed.is_empty() {
            return Err(Error::ExpectationFailed {
                table: table.to_string(),
                expectation: e.name.clone(),
                condition: e.condition.clone(),
                rows: failed.len() as u64,
            });
        }
        if e.on_violation == OnViolation::DropRow {
            for &i in &failed {
                keep[i] = false;
            }
        }
        counts.push((e.name.clone(), e.on_violation, failed.len() as u64));
    }
    let kept = arrow::compute::filter_record_batch(batch, &BooleanArray::from(keep))
        .map_err(|e| Error::InvalidQuery(e.to_string()))?;
    Ok(Checked {
        dropped: (n - kept.num_rows()) as u64,
        rows: kept,
        violations: counts,
    })
}

/// Checks that `expectation` can be evaluated on rows of `schema` (its columns exist, it is a
/// boolean), so that a mistake is refused when it is declared, not at the next refresh.
pub(crate) fn validate(
    table: &str,
    expectation: &Expectation,
    schema: &arrow::datatypes::SchemaRef,
    evaluator: Option<&Arc<dyn ConditionEvaluator>>,
) -> Result<()> {
    evaluate(
        table,
        expectation,
        &RecordBatch::new_empty(schema.clone()),
        evaluator,
    )
    .map(|_| ())
}

fn evaluate(
    table: &str,
    e: &Expectation,
    batch: &RecordBatch,
    evaluator: Option<&Arc<dyn ConditionEvaluator>>,
) -> Result<BooleanArray> {
    let invalid = |problem: String| Error::InvalidExpectation {
        table: table.to_string(),
        expectation: e.name.clone(),
        problem,
    };
    let ev = evaluator
        .ok_or_else(|| invalid("no condition evaluator is registered to evaluate it".into()))?;
    let mask = ev
        .evaluate(&e.condition, batch)
        .map_err(|m| invalid(format!("`{}`: {m}", e.condition)))?;
    if mask.len() != batch.num_rows() {
        return Err(invalid(
            "the condition did not give one value per row".into(),
        ));
    }
    Ok(mask)
}
