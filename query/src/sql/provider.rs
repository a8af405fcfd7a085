//! DataFusion glue: target tables as table providers (their scans run in the store, with key
//! equality and the temporal selections pushed down), and SQL conditions for flows.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, SchemaRef};
use asof_storage::{SourceRead, SourceRows, Store, Value};
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::stats::Precision;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{ScalarValue, Statistics};
use datafusion::datasource::TableType;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::{BinaryExpr, Expr, Operator, TableProviderFilterPushDown};
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::StatisticsArgs;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
};

use crate::arrow_conv::table_arrow_schema;
use crate::error::Result;
use crate::scan::{scan, KeySelection, ScanRequest, TimeSelection};

/// The column that carries each row's position while a DML statement or a replace flow runs
/// ([`Positions::Shown`]).
pub(crate) const POSITION: &str = "__asof_position";

/// Whether a scan of a source table gives each row's position (in [`POSITION`], after the
/// table's columns): what a DML statement or a replace flow names the rows it removes by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Positions {
    Hidden,
    Shown,
}

/// A source table: its rows are read from the store only when a query scans it, so that
/// registering every table for a statement costs nothing.
#[derive(Debug)]
pub(crate) struct SourceProvider {
    store: StoreHandle,
    name: String,
    /// The table's columns, then [`POSITION`] if the positions are shown.
    schema: SchemaRef,
    /// The version a receipt or a statement pinned the source at; `None`: as it is now.
    version: Option<u64>,
    positions: Positions,
}

/// The store, without its `Debug` (which it does not have).
struct StoreHandle(Store);

impl std::fmt::Debug for StoreHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Store")
    }
}

impl SourceProvider {
    pub fn new(store: Store, name: &str, version: Option<u64>) -> Result<Self> {
        Self::with(store, name, version, Positions::Hidden)
    }

    /// The source table `name`, as of `version` if given, each row with its position or not.
    pub fn with(
        store: Store,
        name: &str,
        version: Option<u64>,
        positions: Positions,
    ) -> Result<Self> {
        let schema = store.source_schema(name)?;
        let schema = match positions {
            Positions::Hidden => schema,
            Positions::Shown => with_position_column(&schema),
        };
        Ok(SourceProvider {
            schema,
            store: StoreHandle(store),
            name: name.to_string(),
            version,
            positions,
        })
    }

    /// The source table's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

#[async_trait::async_trait]
impl TableProvider for SourceProvider {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> datafusion::error::Result<Arc<dyn ExecutionPlan>> {
        // The read starts when the plan runs, pinned to the receipt's version if there is one.
        let store = self.store.0.clone();
        let name = self.name.clone();
        let read = match self.version {
            Some(v) => SourceRead::AsOf(v),
            None => SourceRead::Now,
        };
        // Columns added between planning and the read come at the end: the plan's are the first.
        let (positions, out) = (self.positions, self.schema.clone());
        let width = match positions {
            Positions::Hidden => out.fields().len(),
            Positions::Shown => out.fields().len() - 1,
        };
        let open = move || {
            let mut rows = store.source_rows(&name, read).map_err(store_external)?;
            let planned = move |b: RecordBatch| match b.num_columns() > width {
                true => Ok(b.project(&(0..width).collect::<Vec<_>>())?),
                false => Ok(b),
            };
            let batches: Batches = match positions {
                Positions::Hidden => {
                    Box::new(rows.map(move |b| b.map_err(store_external).and_then(planned)))
                }
                Positions::Shown => {
                    let out = out.clone();
                    Box::new(std::iter::from_fn(move || {
                        let p = rows.next_positioned().map_err(store_external).transpose()?;
                        Some(p.and_then(|p| {
                            let mut cols = planned(p.rows)?.columns().to_vec();
                            cols.push(Arc::new(arrow::array::UInt64Array::from(p.positions)));
                            Ok(RecordBatch::try_new(out.clone(), cols)?)
                        }))
                    }))
                }
            };
            Ok(batches)
        };
        let _ = (state, filters, limit);
        Ok(Arc::new(StreamExec::new(
            &self.name,
            self.schema.clone(),
            projection.cloned(),
            Box::new(open),
        )?))
    }
}

/// `schema` with [`POSITION`] after its columns.
pub(crate) fn with_position_column(schema: &SchemaRef) -> SchemaRef {
    let fields = (schema.fields().iter().cloned())
        .chain([Arc::new(arrow::datatypes::Field::new(
            POSITION,
            DataType::UInt64,
            false,
        ))])
        .collect::<Vec<_>>();
    Arc::new(arrow::datatypes::Schema::new(fields))
}

/// Batches a plan streams.
pub(crate) type Batches = Box<dyn Iterator<Item = datafusion::error::Result<RecordBatch>> + Send>;

/// Opens what a plan streams, when it runs.
pub(crate) type OpenBatches = Box<dyn Fn() -> datafusion::error::Result<Batches> + Send + Sync>;

/// The physical plan of a scan that streams batches read from the store (a source table's rows
/// a few stored chunks at a time, a change feed a window of commits at a time), projected, never
/// holding the whole in memory (filters and limits run above it).
pub(crate) struct StreamExec {
    /// What the plan is called (`SourceScanExec`, `StoreScanExec`, ...).
    label: &'static str,
    /// The table it reads.
    name: String,
    /// What EXPLAIN shows after the table (a target scan's request).
    detail: String,
    projection: Option<Vec<usize>>,
    schema: SchemaRef,
    open: OpenBatches,
    /// Counts the rows it returns, if set.
    counted: Option<Arc<AtomicU64>>,
    /// How many rows it returns, when that is known before it runs: its statistics say so, and
    /// DataFusion answers `count(*)` from them without running it (`AggregateStatistics`).
    rows: Option<u64>,
    properties: Arc<PlanProperties>,
}

impl StreamExec {
    /// A scan of `name` (whose schema is `schema`) that streams the batches `open` opens.
    pub(crate) fn new(
        name: &str,
        schema: SchemaRef,
        projection: Option<Vec<usize>>,
        open: OpenBatches,
    ) -> datafusion::error::Result<Self> {
        Self::labelled(
            "SourceScanExec",
            name,
            String::new(),
            schema,
            projection,
            open,
        )
    }

    /// [`StreamExec::new`], called `label` in plans, with `detail` after the table.
    fn labelled(
        label: &'static str,
        name: &str,
        detail: String,
        schema: SchemaRef,
        projection: Option<Vec<usize>>,
        open: OpenBatches,
    ) -> datafusion::error::Result<Self> {
        let schema = match &projection {
            Some(p) => Arc::new(schema.project(p)?),
            None => schema,
        };
        let properties = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(schema.clone()),
            Partitioning::UnknownPartitioning(1),
            EmissionType::Incremental,
            Boundedness::Bounded,
        ));
        Ok(StreamExec {
            label,
            name: name.to_string(),
            detail,
            projection,
            schema,
            open,
            counted: None,
            rows: None,
            properties,
        })
    }
}

impl std::fmt::Debug for StreamExec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct(self.label)
            .field("table", &self.name)
            .finish()
    }
}

impl DisplayAs for StreamExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match t {
            DisplayFormatType::TreeRender => write!(f, "table={}", self.name),
            _ => write!(f, "{}: table={}{}", self.label, self.name, self.detail),
        }
    }
}

impl ExecutionPlan for StreamExec {
    fn name(&self) -> &str {
        self.label
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> datafusion::error::Result<TreeNodeRecursion>,
    ) -> datafusion::error::Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(
        self: Arc<Self>,
        _children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> datafusion::error::Result<Arc<dyn ExecutionPlan>> {
        Ok(self)
    }

    fn statistics_from_inputs(
        &self,
        _inputs: &[Arc<Statistics>],
        _args: &StatisticsArgs,
    ) -> datafusion::error::Result<Arc<Statistics>> {
        let unknown = Statistics::new_unknown(&self.schema);
        Ok(Arc::new(match self.rows.map(usize::try_from) {
            Some(Ok(n)) => unknown.with_num_rows(Precision::Exact(n)),
            _ => unknown,
        }))
    }

    fn execute(
        &self,
        _partition: usize,
        _context: Arc<TaskContext>,
    ) -> datafusion::error::Result<SendableRecordBatchStream> {
        let rows = (self.open)()?;
        let projection = self.projection.clone();
        let counted = self.counted.clone();
        let batches = rows.map(move |b| {
            let b = b?;
            if let Some(c) = &counted {
                c.fetch_add(b.num_rows() as u64, Ordering::Relaxed);
            }
            match &projection {
                Some(p) => Ok(b.project(p)?),
                None => Ok(b),
            }
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            self.schema.clone(),
            futures::stream::iter(batches),
        )))
    }
}

fn store_external(e: asof_storage::Error) -> datafusion::error::DataFusionError {
    datafusion::error::DataFusionError::External(Box::new(e))
}

/// One read of the store (a source table's rows, pinned when the read was opened; a change
/// feed) as a table that a query scans once, streaming; it counts the rows it gave.
pub(crate) struct RowsTable {
    name: String,
    schema: SchemaRef,
    rows: Rows,
    counted: Arc<AtomicU64>,
}

/// What a [`RowsTable`] reads.
enum Rows {
    /// One read, scanned once.
    Once(Arc<Mutex<Option<Batches>>>),
    /// A read opened again by each scan (it reads the same rows every time).
    Each(Arc<OpenBatches>),
}

impl std::fmt::Debug for RowsTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RowsTable").field("of", &self.name).finish()
    }
}

impl RowsTable {
    /// The rows of `rows`, a read of source `name`.
    pub(crate) fn new(name: &str, rows: SourceRows) -> RowsTable {
        let schema = rows.schema();
        let batches = Box::new(rows.map(|b| b.map_err(store_external)));
        RowsTable::of_batches(name, schema, batches)
    }

    /// The batches `batches` (of schema `schema`), read from `name`.
    pub(crate) fn of_batches(name: &str, schema: SchemaRef, batches: Batches) -> RowsTable {
        RowsTable {
            name: name.to_string(),
            schema,
            rows: Rows::Once(Arc::new(Mutex::new(Some(batches)))),
            counted: Arc::default(),
        }
    }

    /// The batches `open` opens (of schema `schema`, the same each time), read from `name`:
    /// a query may scan it more than once.
    pub(crate) fn reopened(name: &str, schema: SchemaRef, open: OpenBatches) -> RowsTable {
        RowsTable {
            name: name.to_string(),
            schema,
            rows: Rows::Each(Arc::new(open)),
            counted: Arc::default(),
        }
    }

    /// How many rows the scan has given so far.
    pub(crate) fn counted(&self) -> Arc<AtomicU64> {
        self.counted.clone()
    }
}

#[async_trait::async_trait]
impl TableProvider for RowsTable {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Temporary
    }

    async fn scan(
        &self,
        _state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> datafusion::error::Result<Arc<dyn ExecutionPlan>> {
        let open: OpenBatches = match &self.rows {
            Rows::Once(rows) => {
                let rows = rows.clone();
                let name = self.name.clone();
                Box::new(move || {
                    let taken = rows.lock().map(|mut r| r.take()).ok().flatten();
                    taken.ok_or_else(|| {
                        datafusion::error::DataFusionError::Execution(format!(
                            "the rows read from `{name}` for this statement were scanned already"
                        ))
                    })
                })
            }
            Rows::Each(open) => {
                let open = open.clone();
                Box::new(move || open())
            }
        };
        let mut exec = StreamExec::new(&self.name, self.schema.clone(), projection.cloned(), open)?;
        exec.counted = Some(self.counted.clone());
        Ok(Arc::new(exec))
    }
}

/// A target table seen through a business and a system selection.
pub(crate) struct TargetTable {
    store: Store,
    table: String,
    schema: SchemaRef,
    key_column: Option<String>,
    business: TimeSelection,
    system: TimeSelection,
    /// `VERSION AS OF` / `TIMESTAMP AS OF`: the commit to read; `None` = latest.
    version: Option<u64>,
}

impl std::fmt::Debug for TargetTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TargetTable")
            .field("table", &self.table)
            .field("business", &self.business)
            .field("system", &self.system)
            .field("version", &self.version)
            .finish()
    }
}

impl TargetTable {
    /// The table's name.
    pub fn table(&self) -> &str {
        &self.table
    }

    pub fn new(
        store: Store,
        table: &str,
        business: TimeSelection,
        system: TimeSelection,
        version: Option<u64>,
    ) -> Result<Self> {
        let schema = store.schema(table)?;
        let key_column = match schema.key_columns.as_slice() {
            [k] => Some(schema.columns[*k].0.clone()),
            _ => None,
        };
        Ok(TargetTable {
            schema: table_arrow_schema(&schema),
            store,
            table: table.to_string(),
            key_column,
            business,
            system,
            version,
        })
    }

    /// How many rows a scan with `filters` returns, when the store knows it without reading
    /// them: a scan of the version the statement pinned, without time travel or filters, returns
    /// the rows of the table's latest version ([`Store::live_rows`]), if that is the version.
    fn rows_known(&self, filters: &[Expr]) -> Result<Option<u64>> {
        let whole = matches!(
            (&self.business, &self.system, filters),
            (TimeSelection::All, TimeSelection::All, [])
        );
        if !whole {
            return Ok(None);
        }
        let live = self.store.live_rows(&self.table)?;
        Ok(live
            .filter(|l| self.version == Some(l.version))
            .map(|l| l.rows))
    }

    /// `key = literal`, the one filter the storage scan takes.
    fn key_value(&self, e: &Expr) -> Option<Value> {
        let Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::Eq,
            right,
        }) = e
        else {
            return None;
        };
        let (col, lit) = match (left.as_ref(), right.as_ref()) {
            (Expr::Column(c), Expr::Literal(v, ..)) | (Expr::Literal(v, ..), Expr::Column(c)) => {
                (c, v)
            }
            _ => return None,
        };
        if Some(&col.name) != self.key_column.as_ref() {
            return None;
        }
        match lit {
            ScalarValue::Utf8(Some(s))
            | ScalarValue::LargeUtf8(Some(s))
            | ScalarValue::Utf8View(Some(s)) => Some(Value::Str(s.as_str().into())),
            ScalarValue::Int64(Some(i)) => Some(Value::Int(*i)),
            ScalarValue::Int32(Some(i)) => Some(Value::Int((*i).into())),
            ScalarValue::Int16(Some(i)) => Some(Value::Int((*i).into())),
            ScalarValue::Int8(Some(i)) => Some(Value::Int((*i).into())),
            _ => None,
        }
    }
}

#[async_trait::async_trait]
impl TableProvider for TargetTable {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> datafusion::error::Result<Vec<TableProviderFilterPushDown>> {
        Ok(filters
            .iter()
            .map(|f| {
                if self.key_value(f).is_some() {
                    TableProviderFilterPushDown::Exact
                } else if super::pushdown::period_bound(&self.schema, f).is_some() {
                    TableProviderFilterPushDown::Inexact
                } else {
                    TableProviderFilterPushDown::Unsupported
                }
            })
            .collect())
    }

    async fn scan(
        &self,
        _state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        _limit: Option<usize>,
    ) -> datafusion::error::Result<Arc<dyn ExecutionPlan>> {
        let keys = match filters.iter().find_map(|f| self.key_value(f)) {
            Some(v) => KeySelection::Eq(vec![v]),
            None => KeySelection::All,
        };
        let names = projection.map(|p| {
            p.iter()
                .map(|&i| self.schema.field(i).name().clone())
                .collect::<Vec<_>>()
        });
        let out = match projection {
            Some(p) => Arc::new(self.schema.project(p)?),
            None => self.schema.clone(),
        };
        let mut req = ScanRequest {
            business: self.business.clone(),
            system: self.system.clone(),
            keys,
            version: self.version,
            projection: names,
            ..Default::default()
        };
        for (timeline, bound) in filters
            .iter()
            .filter_map(|f| super::pushdown::period_bound(&self.schema, f))
        {
            match timeline {
                super::pushdown::Timeline::Business => req.business_bounds.push(bound),
                super::pushdown::Timeline::System => req.system_bounds.push(bound),
            }
        }
        // Planning checks the request (and pins nothing yet); the scan itself starts when the
        // plan runs and streams one batch at a time.
        scan(&self.store, &self.table, &req).map_err(external)?;
        let detail = format!(
            ", keys={:?}, business={:?}, system={:?}, version={:?}, business_bounds={:?}, system_bounds={:?}",
            req.keys, req.business, req.system, req.version, req.business_bounds, req.system_bounds
        );
        let rows = self.rows_known(filters).map_err(external)?;
        let (store, table) = (self.store.clone(), self.table.clone());
        let open: OpenBatches = Box::new(move || {
            let mut scan = scan(&store, &table, &req).map_err(external)?;
            // A scan of every key reports the keys it read, read span by span (the table not in
            // memory), when it is long.
            if let (KeySelection::All, Some(p)) = (&req.keys, store.progress()) {
                let task = format!("scanning {table}");
                scan = scan.with_progress(&p, &task).map_err(external)?;
            }
            Ok(Box::new(scan.map(|b| b.map_err(external))) as Batches)
        });
        let mut exec = StreamExec::labelled("StoreScanExec", &self.table, detail, out, None, open)?;
        exec.rows = rows;
        Ok(Arc::new(exec))
    }
}

fn external(e: crate::error::QueryError) -> datafusion::error::DataFusionError {
    datafusion::error::DataFusionError::External(Box::new(e))
}
