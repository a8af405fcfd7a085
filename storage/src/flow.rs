//! Flow definitions (docs/SEMANTICS.md §1): the typed builder, its validation, and the resolved form the engine
//! runs on.

use std::collections::BTreeSet;

use arrow::datatypes::Schema;
use serde::{Deserialize, Serialize};

use crate::error::FlowError;
use crate::value::ColumnType;

/// Name of the business-time start column.
pub const START_AT: &str = "__START_AT";
/// Name of the business-time end column.
pub const END_AT: &str = "__END_AT";
/// Name of the system-time start column.
pub const SYSTEM_START_AT: &str = "__SYSTEM_START_AT";
/// Name of the system-time end column.
pub const SYSTEM_END_AT: &str = "__SYSTEM_END_AT";
/// Default tombstone GC threshold: 2 days, as `pipelines.cdc.tombstoneGCThresholdInSeconds`.
pub const DEFAULT_TOMBSTONE_GC_SECONDS: u64 = 172_800;

/// The shape of a target table (`STORED AS ...`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
pub enum StoredAs {
    /// `SCD TYPE 1`: one row per key.
    #[default]
    Scd1,
    /// `SCD TYPE 2`: history on business time.
    Scd2,
    /// `BITEMPORAL`: history on business and system time.
    Bitemporal,
}

impl std::fmt::Display for StoredAs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StoredAs::Scd1 => "SCD TYPE 1",
            StoredAs::Scd2 => "SCD TYPE 2",
            StoredAs::Bitemporal => "BITEMPORAL",
        })
    }
}

/// A set of columns: all, only some (`(a, b)`), or all but some (`* EXCEPT (a, b)`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum ColumnSelection {
    /// Every column.
    #[default]
    All,
    /// Just these.
    Only(Vec<String>),
    /// Every column but these.
    AllExcept(Vec<String>),
}

impl ColumnSelection {
    /// `(a, b, ...)`
    pub fn only<I: IntoIterator<Item = S>, S: Into<String>>(cols: I) -> Self {
        ColumnSelection::Only(cols.into_iter().map(Into::into).collect())
    }
    /// `* EXCEPT (a, b, ...)`
    pub fn all_except<I: IntoIterator<Item = S>, S: Into<String>>(cols: I) -> Self {
        ColumnSelection::AllExcept(cols.into_iter().map(Into::into).collect())
    }

    /// Resolves against `universe` (in its order); `clause` names the clause in errors.
    fn resolve(&self, universe: &[String], clause: &'static str) -> Result<Vec<bool>, FlowError> {
        let check = |cols: &[String]| -> Result<BTreeSet<usize>, FlowError> {
            let mut set = BTreeSet::new();
            for c in cols {
                let i = universe.iter().position(|u| u == c).ok_or_else(|| {
                    FlowError::UnknownColumn {
                        clause,
                        column: c.clone(),
                    }
                })?;
                if !set.insert(i) {
                    return Err(FlowError::DuplicateColumn {
                        clause,
                        column: c.clone(),
                    });
                }
            }
            Ok(set)
        };
        Ok(match self {
            ColumnSelection::All => vec![true; universe.len()],
            ColumnSelection::Only(cols) => {
                let s = check(cols)?;
                (0..universe.len()).map(|i| s.contains(&i)).collect()
            }
            ColumnSelection::AllExcept(cols) => {
                let s = check(cols)?;
                (0..universe.len()).map(|i| !s.contains(&i)).collect()
            }
        })
    }
}

/// A condition that classifies an event (`APPLY AS DELETE WHEN`, `APPLY AS TRUNCATE WHEN`).
///
/// Conditions are stored with the flow, so they are data, not closures: `Equals` is evaluated by the
/// engine itself; `Expr` holds an expression (SQL, in the SQL layer) evaluated by the
/// [`ConditionEvaluator`](crate::ConditionEvaluator) registered on the store.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Condition {
    /// `column = 'value'`, comparing the column's value as a string; NULL is false.
    Equals {
        /// The source column.
        column: String,
        /// The literal.
        value: String,
    },
    /// An expression evaluated by the registered evaluator.
    Expr(String),
}

impl Condition {
    /// `column = 'value'`.
    pub fn equals(column: impl Into<String>, value: impl Into<String>) -> Self {
        Condition::Equals {
            column: column.into(),
            value: value.into(),
        }
    }
}

/// A source column: name and type.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceColumn {
    /// Name.
    pub name: String,
    /// Type.
    pub ty: ColumnType,
}

/// Every parameter of an AUTO CDC flow (docs/SEMANTICS.md §1), unvalidated. Build one with [`FlowSpec::builder`];
/// [`FlowBuilder::build`] validates it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowSpec {
    /// Flow name.
    pub name: String,
    /// Target table name.
    pub target: String,
    /// The source's columns.
    pub source: Vec<SourceColumn>,
    /// `KEYS (...)`.
    pub keys: Vec<String>,
    /// `SEQUENCE BY col` (one entry) or `SEQUENCE BY STRUCT(c1, c2, ...)`.
    pub sequence_by: Vec<String>,
    /// `SYSTEM SEQUENCE BY col`.
    pub system_sequence_by: Option<String>,
    /// `STORED AS ...`.
    pub stored_as: StoredAs,
    /// `APPLY AS DELETE WHEN ...`.
    pub delete_when: Option<Condition>,
    /// `APPLY AS TRUNCATE WHEN ...`.
    pub truncate_when: Option<Condition>,
    /// `IGNORE NULL UPDATES [ON ...]`.
    pub ignore_null_updates: Option<ColumnSelection>,
    /// `COLUMNS ...`.
    pub columns: ColumnSelection,
    /// `TRACK HISTORY ON ...`.
    pub track_history: Option<ColumnSelection>,
    /// `COLUMNS TO UPDATE col`.
    pub columns_to_update: Option<String>,
    /// `pipelines.cdc.tombstoneGCThresholdInSeconds`.
    pub tombstone_gc_threshold_secs: u64,
    /// The source table the flow reads (`FROM stream(t)`), for [`crate::Store::refresh`].
    #[serde(default)]
    pub source_table: Option<String>,
    /// `AUTO CDC ONCE`: [`crate::Store::refresh`] runs the flow until it has written one commit,
    /// and after that only on a full refresh.
    #[serde(default)]
    pub once: bool,
    /// `CREATE FLOW f COMMENT '...'`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// `FROM stream(t) WITH (skipChangeCommits = true)`: rows that DML statements on the source
    /// removed or appended are not the flow's concern (docs/SEMANTICS.md §2.6).
    #[serde(default, skip_serializing_if = "ChangeCommits::is_read")]
    pub change_commits: ChangeCommits,
}

impl FlowSpec {
    /// Starts a flow `name` into `target` over a source with `schema`.
    pub fn builder(
        name: impl Into<String>,
        target: impl Into<String>,
        schema: &Schema,
    ) -> FlowBuilder {
        let source = schema
            .fields()
            .iter()
            .map(|f| (f.name().clone(), f.data_type().clone()))
            .collect();
        FlowBuilder {
            spec: FlowSpec {
                name: name.into(),
                target: target.into(),
                source: Vec::new(),
                keys: Vec::new(),
                sequence_by: Vec::new(),
                system_sequence_by: None,
                stored_as: StoredAs::Scd1,
                delete_when: None,
                truncate_when: None,
                ignore_null_updates: None,
                columns: ColumnSelection::All,
                track_history: None,
                columns_to_update: None,
                tombstone_gc_threshold_secs: DEFAULT_TOMBSTONE_GC_SECONDS,
                source_table: None,
                once: false,
                comment: None,
                change_commits: Default::default(),
            },
            arrow_source: source,
        }
    }
}

/// Builds a [`FlowSpec`] and validates it into a [`Flow`].
#[derive(Clone, Debug)]
pub struct FlowBuilder {
    spec: FlowSpec,
    arrow_source: Vec<(String, arrow::datatypes::DataType)>,
}

fn strings<I: IntoIterator<Item = S>, S: Into<String>>(i: I) -> Vec<String> {
    i.into_iter().map(Into::into).collect()
}

impl FlowBuilder {
    /// `KEYS (...)`.
    pub fn keys<I: IntoIterator<Item = S>, S: Into<String>>(mut self, keys: I) -> Self {
        self.spec.keys = strings(keys);
        self
    }
    /// `SEQUENCE BY col`, or `SEQUENCE BY STRUCT(...)` with several columns.
    pub fn sequence_by<I: IntoIterator<Item = S>, S: Into<String>>(mut self, cols: I) -> Self {
        self.spec.sequence_by = strings(cols);
        self
    }
    /// `SYSTEM SEQUENCE BY col`.
    pub fn system_sequence_by(mut self, col: impl Into<String>) -> Self {
        self.spec.system_sequence_by = Some(col.into());
        self
    }
    /// `STORED AS ...`.
    pub fn stored_as(mut self, mode: StoredAs) -> Self {
        self.spec.stored_as = mode;
        self
    }
    /// `APPLY AS DELETE WHEN ...`.
    pub fn delete_when(mut self, c: Condition) -> Self {
        self.spec.delete_when = Some(c);
        self
    }
    /// `APPLY AS TRUNCATE WHEN ...`.
    pub fn truncate_when(mut self, c: Condition) -> Self {
        self.spec.truncate_when = Some(c);
        self
    }
    /// `IGNORE NULL UPDATES` (`All`) or `IGNORE NULL UPDATES ON ...`.
    pub fn ignore_null_updates(mut self, on: ColumnSelection) -> Self {
        self.spec.ignore_null_updates = Some(on);
        self
    }
    /// `COLUMNS ...`.
    pub fn columns(mut self, cols: ColumnSelection) -> Self {
        self.spec.columns = cols;
        self
    }
    /// `TRACK HISTORY ON ...`.
    pub fn track_history(mut self, cols: ColumnSelection) -> Self {
        self.spec.track_history = Some(cols);
        self
    }
    /// `COLUMNS TO UPDATE col`.
    pub fn columns_to_update(mut self, col: impl Into<String>) -> Self {
        self.spec.columns_to_update = Some(col.into());
        self
    }
    /// The source table the flow reads from (for [`crate::Store::refresh`]).
    pub fn source_table(mut self, table: impl Into<String>) -> Self {
        self.spec.source_table = Some(table.into());
        self
    }
    /// `CREATE FLOW f COMMENT '...'`: see [`FlowSpec::comment`].
    pub fn comment(mut self, comment: Option<String>) -> Self {
        self.spec.comment = comment;
        self
    }
    /// `AUTO CDC ONCE`: see [`FlowSpec::once`].
    pub fn once(mut self, once: bool) -> Self {
        self.spec.once = once;
        self
    }
    /// What the flow does with DML statements on its source: see [`FlowSpec::change_commits`].
    pub fn change_commits(mut self, c: ChangeCommits) -> Self {
        self.spec.change_commits = c;
        self
    }
    /// The tombstone GC threshold in seconds.
    pub fn tombstone_gc_threshold_secs(mut self, secs: u64) -> Self {
        self.spec.tombstone_gc_threshold_secs = secs;
        self
    }
    /// Validates the definition.
    pub fn build(mut self) -> Result<Flow, FlowError> {
        let mut source = Vec::with_capacity(self.arrow_source.len());
        for (name, dt) in &self.arrow_source {
            let ty = ColumnType::from_arrow(dt).ok_or_else(|| FlowError::UnsupportedType {
                column: name.clone(),
                ty: dt.to_string(),
            })?;
            source.push(SourceColumn {
                name: name.clone(),
                ty,
            });
        }
        self.spec.source = source;
        Flow::new(self.spec)
    }
}

/// A validated flow, resolved to column positions. Created by [`FlowBuilder::build`] or
/// [`Flow::new`].
#[derive(Clone, Debug)]
pub struct Flow {
    pub(crate) spec: FlowSpec,
    /// Output columns: positions in the source.
    pub(crate) output_src: Vec<usize>,
    /// Key columns: positions among the output columns.
    pub(crate) key_out: Vec<usize>,
    /// Sequence columns: positions in the source.
    pub(crate) seq_src: Vec<usize>,
    /// System sequence column: position in the source.
    pub(crate) sys_src: Option<usize>,
    /// COLUMNS TO UPDATE column: position in the source.
    pub(crate) ctu_src: Option<usize>,
    /// Per output column: does a change of it open a new version?
    pub(crate) tracked: Vec<bool>,
    /// Per output column: is a NULL in an upsert ignored?
    pub(crate) ignore_null: Vec<bool>,
}

fn reserved(name: &str) -> bool {
    [START_AT, END_AT, SYSTEM_START_AT, SYSTEM_END_AT]
        .iter()
        .any(|r| r.eq_ignore_ascii_case(name))
}

fn valid_name(name: &str) -> bool {
    !name.trim().is_empty() && !name.chars().any(char::is_control)
}

impl Flow {
    /// Validates `spec` against the rules of docs/SEMANTICS.md §1.
    pub fn new(spec: FlowSpec) -> Result<Flow, FlowError> {
        for n in [&spec.name, &spec.target] {
            if !valid_name(n) {
                return Err(FlowError::InvalidName(n.clone()));
            }
        }
        let names: Vec<String> = spec.source.iter().map(|c| c.name.clone()).collect();
        let find = |clause: &'static str, col: &str| {
            names
                .iter()
                .position(|n| n == col)
                .ok_or_else(|| FlowError::UnknownColumn {
                    clause,
                    column: col.to_string(),
                })
        };
        if spec.keys.is_empty() {
            return Err(FlowError::MissingKeys);
        }
        if spec.sequence_by.is_empty() {
            return Err(FlowError::MissingSequence);
        }
        let mode = spec.stored_as;
        if spec.system_sequence_by.is_some() && mode != StoredAs::Bitemporal {
            return Err(FlowError::SystemSequenceRequiresBitemporal);
        }
        if spec.truncate_when.is_some() && mode != StoredAs::Scd1 {
            return Err(FlowError::TruncateRequiresScd1);
        }
        if spec.track_history.is_some() && mode == StoredAs::Scd1 {
            return Err(FlowError::TrackHistoryRequiresHistory);
        }
        if spec.columns_to_update.is_some() && spec.ignore_null_updates.is_some() {
            return Err(FlowError::IgnoreNullUpdatesWithColumnsToUpdate);
        }
        if spec.columns_to_update.is_some() && mode == StoredAs::Bitemporal {
            return Err(FlowError::ColumnsToUpdateWithBitemporal);
        }

        let in_output = spec.columns.resolve(&names, "COLUMNS")?;
        let output_src: Vec<usize> = (0..names.len()).filter(|&i| in_output[i]).collect();
        if output_src.is_empty() {
            return Err(FlowError::NoOutputColumns);
        }
        let out_names: Vec<String> = output_src.iter().map(|&i| names[i].clone()).collect();
        for n in &out_names {
            if reserved(n) {
                return Err(FlowError::ReservedColumnName(n.clone()));
            }
        }

        let mut key_out = Vec::new();
        for k in &spec.keys {
            let src = find("KEYS", k)?;
            let out = output_src
                .iter()
                .position(|&i| i == src)
                .ok_or_else(|| FlowError::KeyNotInOutput(k.clone()))?;
            if key_out.contains(&out) {
                return Err(FlowError::DuplicateColumn {
                    clause: "KEYS",
                    column: k.clone(),
                });
            }
            let ty = &spec.source[src].ty;
            if !ty.is_keyable() {
                return Err(FlowError::UnsupportedKeyType {
                    column: k.clone(),
                    ty: ty.to_string(),
                });
            }
            key_out.push(out);
        }

        let mut seq_src = Vec::new();
        for s in &spec.sequence_by {
            let i = find("SEQUENCE BY", s)?;
            if seq_src.contains(&i) {
                return Err(FlowError::DuplicateColumn {
                    clause: "SEQUENCE BY",
                    column: s.clone(),
                });
            }
            let ty = &spec.source[i].ty;
            if !ty.is_orderable() {
                return Err(FlowError::UnorderableType {
                    clause: "SEQUENCE BY",
                    column: s.clone(),
                    ty: ty.to_string(),
                });
            }
            seq_src.push(i);
        }
        let sys_src = match &spec.system_sequence_by {
            Some(s) => {
                let i = find("SYSTEM SEQUENCE BY", s)?;
                let ty = &spec.source[i].ty;
                if !ty.is_orderable() {
                    return Err(FlowError::UnorderableType {
                        clause: "SYSTEM SEQUENCE BY",
                        column: s.clone(),
                        ty: ty.to_string(),
                    });
                }
                Some(i)
            }
            None => None,
        };
        let ctu_src = match &spec.columns_to_update {
            Some(c) => {
                let i = find("COLUMNS TO UPDATE", c)?;
                if spec.source[i].ty != ColumnType::ListUtf8 {
                    return Err(FlowError::ColumnsToUpdateType {
                        column: c.clone(),
                        ty: spec.source[i].ty.to_string(),
                    });
                }
                Some(i)
            }
            None => None,
        };
        for (clause, cond) in [
            ("APPLY AS DELETE WHEN", &spec.delete_when),
            ("APPLY AS TRUNCATE WHEN", &spec.truncate_when),
        ] {
            if let Some(Condition::Equals { column, .. }) = cond {
                find(clause, column)?;
            }
        }

        let on_output =
            |sel: &ColumnSelection, clause: &'static str| -> Result<Vec<bool>, FlowError> {
                // Name columns that exist in the source but not in the output precisely.
                let cols = match sel {
                    ColumnSelection::All => &[][..],
                    ColumnSelection::Only(c) | ColumnSelection::AllExcept(c) => c,
                };
                for c in cols {
                    if !out_names.contains(c) {
                        find(clause, c)?;
                        return Err(FlowError::NotAnOutputColumn {
                            clause,
                            column: c.clone(),
                        });
                    }
                }
                sel.resolve(&out_names, clause)
            };
        let tracked = match &spec.track_history {
            Some(sel) => on_output(sel, "TRACK HISTORY")?,
            None => vec![true; out_names.len()],
        };
        let ignore_null = match &spec.ignore_null_updates {
            Some(sel) => on_output(sel, "IGNORE NULL UPDATES")?,
            None => vec![false; out_names.len()],
        };

        Ok(Flow {
            spec,
            output_src,
            key_out,
            seq_src,
            sys_src,
            ctu_src,
            tracked,
            ignore_null,
        })
    }

    /// The definition.
    pub fn spec(&self) -> &FlowSpec {
        &self.spec
    }

    /// The shape of the target table this flow writes.
    pub fn target_schema(&self) -> TableSchema {
        let col = |i: usize| {
            (
                self.spec.source[i].name.clone(),
                self.spec.source[i].ty.clone(),
            )
        };
        TableSchema {
            mode: self.spec.stored_as,
            columns: self.output_src.iter().map(|&i| col(i)).collect(),
            key_columns: self.key_out.clone(),
            sequence: if self.spec.stored_as == StoredAs::Scd1 {
                Vec::new()
            } else {
                self.seq_src.iter().map(|&i| col(i)).collect()
            },
            system_sequence: match (self.spec.stored_as, self.sys_src) {
                (StoredAs::Bitemporal, Some(i)) => Some(self.spec.source[i].ty.clone()),
                (StoredAs::Bitemporal, None) => Some(ColumnType::commit_timestamp()),
                _ => None,
            },
        }
    }

    /// Types of the sequence components (also for SCD1, where they order events).
    pub(crate) fn seq_types(&self) -> Vec<ColumnType> {
        self.seq_src
            .iter()
            .map(|&i| self.spec.source[i].ty.clone())
            .collect()
    }
}

/// The shape of a target table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableSchema {
    /// SCD1, SCD2 or bitemporal.
    pub mode: StoredAs,
    /// Output columns, in order.
    pub columns: Vec<(String, ColumnType)>,
    /// Positions of the key columns among `columns`.
    pub key_columns: Vec<usize>,
    /// The sequence components (name, type): `__START_AT`/`__END_AT` have this type (a struct when
    /// there are several). Empty for SCD1.
    pub sequence: Vec<(String, ColumnType)>,
    /// The type of `__SYSTEM_START_AT`/`__SYSTEM_END_AT`, for bitemporal tables.
    pub system_sequence: Option<ColumnType>,
}

impl TableSchema {
    /// Types of the key columns, in key order.
    pub fn key_types(&self) -> Vec<ColumnType> {
        self.key_columns
            .iter()
            .map(|&i| self.columns[i].1.clone())
            .collect()
    }
    /// Names of the key columns, in key order.
    pub fn key_names(&self) -> Vec<&str> {
        self.key_columns
            .iter()
            .map(|&i| self.columns[i].0.as_str())
            .collect()
    }
    /// Types of the output columns, in order.
    pub(crate) fn column_types(&self) -> Vec<ColumnType> {
        self.columns.iter().map(|(_, t)| t.clone()).collect()
    }
    /// Types of the sequence components.
    pub fn sequence_types(&self) -> Vec<ColumnType> {
        self.sequence.iter().map(|(_, t)| t.clone()).collect()
    }
    /// Index of an output column by name.
    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|(n, _)| n == name)
    }
}

impl Flow {
    /// The Arrow schema of the flow's source rows.
    pub(crate) fn source_schema(&self) -> arrow::datatypes::SchemaRef {
        std::sync::Arc::new(arrow::datatypes::Schema::new(
            self.spec
                .source
                .iter()
                .map(|c| arrow::datatypes::Field::new(&c.name, c.ty.to_arrow(), true))
                .collect::<Vec<_>>(),
        ))
    }
}

/// What a change-feed stream does with the commits that changed or deleted existing rows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum ChangeCommits {
    /// Reads them, as every other commit.
    #[default]
    Read,
    /// Skips them whole (`skipChangeCommits = true`): only commits that only inserted are read.
    Skip,
}

impl ChangeCommits {
    /// Whether this is the default, [`ChangeCommits::Read`].
    pub(crate) fn is_read(&self) -> bool {
        *self == ChangeCommits::Read
    }
}
