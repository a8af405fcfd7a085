//! What a session refuses before DataFusion runs a statement: DML that would report an effect it
//! did not have, DDL that lasts only for the session, transactions, and (with
//! [`ExternalAccess::Denied`]) files and settings.

use super::context::df;
use super::parse::Stmt;
use super::{ExternalAccess, SqlSession};
use crate::error::{QueryError, Result};

impl SqlSession {
    /// Plans a statement for DataFusion, refusing what it would do but asof must not: DML that
    /// would report rows changed while nothing durable changes, DDL that lasts only for the
    /// session, transactions asof does not have, and (with [`ExternalAccess::Denied`]) files and
    /// settings.
    pub(super) fn plan(&mut self, stmt: &Stmt) -> Result<datafusion::dataframe::DataFrame> {
        let sql = self.rewrite(stmt)?;
        let state = self.ctx.state();
        let plan = self
            .runtime
            .block_on(state.create_logical_plan(&sql))
            .map_err(df)?;
        self.check_effect(stmt, &plan)?;
        self.runtime
            .block_on(self.ctx.execute_logical_plan(plan))
            .map_err(df)
    }

    /// Checks every node of the plan: `EXPLAIN ANALYZE` runs what it explains, and `PREPARE`
    /// holds what `EXECUTE` runs.
    fn check_effect(
        &self,
        stmt: &Stmt,
        plan: &datafusion::logical_expr::LogicalPlan,
    ) -> Result<()> {
        use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
        let what = stmt.head(2).join(" ");
        let mut found = Ok(());
        plan.apply(|node| {
            Ok(match self.check_node(&what, node) {
                Ok(()) => TreeNodeRecursion::Continue,
                Err(e) => {
                    found = Err(e);
                    TreeNodeRecursion::Stop
                }
            })
        })
        .map_err(df)?;
        found
    }

    fn check_node(&self, what: &str, plan: &datafusion::logical_expr::LogicalPlan) -> Result<()> {
        use datafusion::logical_expr::{DdlStatement, LogicalPlan, Statement};
        let what = what.to_string();
        let denied = self.options.external_access == ExternalAccess::Denied;
        let external = |what: &str| {
            QueryError::Invalid(format!(
                "`{what}` is refused: this session does not allow access to files or settings outside the store (ExternalAccess::Denied)"
            ))
        };
        match plan {
            LogicalPlan::Dml(d) => Err(QueryError::Invalid(format!(
                "`{what}` on `{}` is not supported: asof does not run INSERT, UPDATE, DELETE or MERGE on this table; nothing was changed",
                d.table_name
            ))),
            LogicalPlan::Ddl(DdlStatement::CreateExternalTable(_)) if denied => {
                Err(external(&what))
            }
            LogicalPlan::Ddl(DdlStatement::CreateExternalTable(_)) => Ok(()),
            LogicalPlan::Ddl(_) => Err(QueryError::Invalid(format!(
                "`{what}` is not supported: it would not be stored with the database; nothing was changed"
            ))),
            LogicalPlan::Statement(
                Statement::TransactionStart(_) | Statement::TransactionEnd(_),
            ) => Err(QueryError::Invalid(format!(
                "`{what}` is not supported: each statement is its own atomic commit, and asof has no transactions across statements"
            ))),
            LogicalPlan::Statement(Statement::SetVariable(_) | Statement::ResetVariable(_))
                if denied =>
            {
                Err(external(&what))
            }
            LogicalPlan::Copy(_) if denied => Err(external(&what)),
            // What a prepared statement runs was checked when it was prepared, but not against
            // this session's access.
            LogicalPlan::Statement(Statement::Execute(_)) if denied => Err(external(&what)),
            _ => Ok(()),
        }
    }

    /// Whether this session may read files (`read_files`).
    pub(super) fn files_allowed(&self) -> Result<()> {
        if self.options.external_access == ExternalAccess::Denied {
            return Err(QueryError::Invalid(
                "`read_files` is refused: this session does not allow access to files outside the store (ExternalAccess::Denied)".into(),
            ));
        }
        Ok(())
    }
}
