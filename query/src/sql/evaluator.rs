//! Flow conditions (`APPLY AS DELETE WHEN ...`) and generated columns' expressions evaluated as
//! SQL with DataFusion, vectorised over each batch, each expression planned once per schema.

use std::sync::{Arc, Mutex, PoisonError};

use arrow::array::{Array, AsArray, BooleanArray, RecordBatch};
use arrow::datatypes::{DataType, SchemaRef};
use asof_storage::ConditionEvaluator;
use datafusion::common::tree_node::TreeNode;
use datafusion::common::DFSchema;
use datafusion::logical_expr::{Expr, Volatility};
use datafusion::physical_expr::PhysicalExpr;

/// How many planned expressions an evaluator keeps (a store's flows and generated columns are
/// a handful; the oldest goes first).
const PLANS_KEPT: usize = 32;

/// Evaluates flow conditions and generated columns' expressions with DataFusion. An expression
/// is parsed and planned for the first batch of each schema and the plan kept (planning made a
/// whole DataFusion session per batch: 13% of the CPU of reading a large source into events;
/// docs/PERFORMANCE.md, session 48). An expression that calls a function whose result can
/// change between calls (`random()`, `now()`) is planned again for each batch.
#[derive(Default)]
pub struct DataFusionEvaluator {
    plans: Mutex<Vec<Plan>>,
}

/// An expression planned for batches of one schema.
struct Plan {
    expr: String,
    schema: SchemaRef,
    physical: Arc<dyn PhysicalExpr>,
}

impl DataFusionEvaluator {
    /// `expr` planned for batches of `schema`: the kept plan, else a new one (kept unless it
    /// calls a function that is not immutable).
    fn plan(&self, expr: &str, schema: &SchemaRef) -> Result<Arc<dyn PhysicalExpr>, String> {
        let kept =
            |p: &&Plan| p.expr == expr && (Arc::ptr_eq(&p.schema, schema) || p.schema == *schema);
        if let Some(p) = self.plans().iter().find(kept) {
            return Ok(p.physical.clone());
        }
        let ctx = super::context::new_context(super::options::SessionOptions::DEFAULT_QUERY_MEMORY)
            .map_err(|e| e.to_string())?;
        let df_schema = DFSchema::try_from(schema.as_ref().clone()).map_err(|e| e.to_string())?;
        let e = ctx
            .parse_sql_expr(expr, &df_schema)
            .map_err(|e| e.to_string())?;
        let immutable = !e
            .exists(|e| Ok(changes_between_calls(e)))
            .map_err(|e| e.to_string())?;
        let physical = ctx
            .create_physical_expr(e, &df_schema)
            .map_err(|e| e.to_string())?;
        if immutable {
            let mut plans = self.plans();
            if plans.len() >= PLANS_KEPT {
                plans.remove(0);
            }
            plans.push(Plan {
                expr: expr.to_string(),
                schema: schema.clone(),
                physical: physical.clone(),
            });
        }
        Ok(physical)
    }

    fn plans(&self) -> std::sync::MutexGuard<'_, Vec<Plan>> {
        // A plan is pushed whole or not at all: a panic elsewhere leaves the list usable.
        self.plans.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Whether `e` is a call whose result may differ between two calls with the same arguments.
fn changes_between_calls(e: &Expr) -> bool {
    match e {
        Expr::ScalarFunction(f) => f.func.signature().volatility != Volatility::Immutable,
        Expr::ScalarVariable(..) | Expr::Placeholder(_) => true,
        _ => false,
    }
}

impl ConditionEvaluator for DataFusionEvaluator {
    fn evaluate(
        &self,
        expr: &str,
        batch: &RecordBatch,
    ) -> std::result::Result<BooleanArray, String> {
        let v = self.value(expr, batch)?;
        if v.data_type() != &DataType::Boolean {
            return Err(format!(
                "the condition gives {}, not a boolean",
                v.data_type()
            ));
        }
        Ok(v.as_boolean().clone())
    }

    fn value(
        &self,
        expr: &str,
        batch: &RecordBatch,
    ) -> std::result::Result<arrow::array::ArrayRef, String> {
        self.plan(expr, &batch.schema())?
            .evaluate(batch)
            .map_err(|e| e.to_string())?
            .into_array(batch.num_rows())
            .map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Float64Array, Int64Array};
    use arrow::datatypes::{Field, Schema};

    fn batch(values: &[i64]) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Int64, false)]));
        RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(values.to_vec()))]).unwrap()
    }

    #[test]
    fn a_condition_planned_once_gives_each_batch_its_own_answer() {
        let ev = DataFusionEvaluator::default();
        let a = ev.evaluate("x > 2", &batch(&[1, 3, 5])).unwrap();
        let b = ev.evaluate("x > 2", &batch(&[4, 0])).unwrap();
        assert_eq!(a, BooleanArray::from(vec![false, true, true]));
        assert_eq!(b, BooleanArray::from(vec![true, false]));
        assert_eq!(ev.plans().len(), 1);
    }

    #[test]
    fn the_same_expression_over_another_schema_is_planned_for_it() {
        let ev = DataFusionEvaluator::default();
        ev.evaluate("x > 2", &batch(&[3])).unwrap();
        let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Float64, false)]));
        let floats =
            RecordBatch::try_new(schema, vec![Arc::new(Float64Array::from(vec![2.5, 1.0]))])
                .unwrap();
        let v = ev.evaluate("x > 2", &floats).unwrap();
        assert_eq!(v, BooleanArray::from(vec![true, false]));
        assert_eq!(ev.plans().len(), 2);
    }

    #[test]
    fn an_expression_with_a_volatile_function_is_not_kept() {
        let ev = DataFusionEvaluator::default();
        let v = ev.value("random() < 2", &batch(&[1, 2])).unwrap();
        assert_eq!(v.len(), 2);
        assert!(ev.plans().is_empty());
    }

    #[test]
    fn a_condition_that_is_not_a_boolean_is_refused() {
        let ev = DataFusionEvaluator::default();
        let e = ev.evaluate("x + 1", &batch(&[1])).unwrap_err();
        assert_eq!(e, "the condition gives Int64, not a boolean");
    }
}
