//! `DESCRIBE [TABLE] [EXTENDED] t` of a target or source table, as Databricks shows it: one row per
//! column (`col_name`, `data_type`, `comment`), then with `EXTENDED` a `# Detailed Table
//! Information` section: the table's kind, comment, storage mode, keys, sequence columns, each
//! flow's definition, clustering, properties, versions and row counts.

use std::sync::Arc;

use arrow::array::{RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use asof_storage::{ColumnSelection, Condition, FlowSpec, Store, StoredAs};

use super::statement::{Detail, CLUSTER_BY_PROPERTY, COMMENT_PROPERTY, PARTITIONED_BY_PROPERTY};
use crate::arrow_conv::table_arrow_schema;
use crate::error::Result;

/// The rows of `DESCRIBE` of `table`, a target (`Ok(None)` if it is not a target or a source).
pub(super) fn describe(
    store: &Store,
    table: &str,
    detail: Detail,
) -> Result<Option<(SchemaRef, RecordBatch)>> {
    let mut rows: Vec<[String; 3]> = Vec::new();
    let target = store.tables()?.iter().any(|t| t == table);
    let source = !target && store.sources()?.iter().any(|t| t == table);
    if !target && !source {
        return Ok(None);
    }
    let schema = if target {
        table_arrow_schema(&store.schema(table)?)
    } else {
        store.source_schema(table)?
    };
    for f in schema.fields() {
        rows.push([f.name().clone(), data_type(f.data_type()), String::new()]);
    }
    if detail == Detail::Extended {
        rows.push(Default::default());
        rows.push(["# Detailed Table Information".into(), "".into(), "".into()]);
        let mut row = |k: &str, v: String| rows.push([k.to_string(), v, String::new()]);
        row("Name", table.to_string());
        if target {
            row("Type", "STREAMING TABLE".into());
            let properties = store.properties(table)?;
            if let Some(c) = properties.get(COMMENT_PROPERTY) {
                row("Comment", c.clone());
            }
            let s = store.schema(table)?;
            row("Stored as", s.mode.to_string());
            let key_names: Vec<&str> = s
                .key_columns
                .iter()
                .map(|&i| s.columns[i].0.as_str())
                .collect();
            row("Keys", key_names.join(", "));
            for f in store.flows(table)? {
                row("Flow", flow_sql(&f));
            }
            let history = store.history(table)?;
            let last_refresh = history
                .iter()
                .rev()
                .find(|c| c.operation.starts_with("FLOW"))
                .map(|c| c.timestamp_us);
            let when = |us: i64| {
                arrow::temporal_conversions::timestamp_us_to_datetime(us)
                    .map(|t| t.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string())
                    .unwrap_or_default()
            };
            if let Some(last) = last_refresh {
                row("Last refresh", when(last));
            }
            if let Some(s) = properties
                .get(crate::SCHEDULE_PROPERTY)
                .filter(|s| !s.is_empty())
            {
                row("Schedule", s.clone());
                match (crate::Schedule::from_property(s), last_refresh) {
                    (Some(crate::Schedule::Every(every)), Some(last)) => {
                        let next = last.saturating_add(every.as_micros() as i64);
                        row("Next refresh", when(next));
                    }
                    (Some(crate::Schedule::Cron { expr, time_zone }), _) => {
                        let next = crate::CronSchedule::new(&expr, time_zone.as_deref())
                            .ok()
                            .and_then(|c| c.next_after(chrono::Utc::now()));
                        if let Some(next) = next {
                            row("Next refresh", when(next.timestamp_micros()));
                        }
                    }
                    _ => {}
                }
            }
            if let Some(c) = properties.get(CLUSTER_BY_PROPERTY) {
                row("Clustering Columns", c.clone());
            }
            if let Some(c) = properties.get(PARTITIONED_BY_PROPERTY) {
                row("Partition Columns", c.clone());
            }
            let shown: Vec<String> = properties
                .iter()
                .filter(|(k, _)| k.as_str() != COMMENT_PROPERTY)
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            row("Table Properties", format!("[{}]", shown.join(",")));
            if let (Some(first), Some(last)) = (history.first(), history.last()) {
                row("Versions", format!("{} to {}", first.version, last.version));
            }
            let (live, versions) = store.read(table, |r| (r.live_rows(), r.row_versions()))?;
            row(
                "Statistics",
                format!("{live} current row versions, {versions} in all"),
            );
        } else {
            row("Type", "TABLE".into());
            for f in store.append_flows(table)? {
                row("Flow", super::append_text::append_flow_sql(table, &f));
            }
            let history = store.source_history(table)?;
            if let Some(last) = history.last() {
                row("Versions", format!("up to {}", last.version));
            }
        }
    }
    let out: SchemaRef = Arc::new(Schema::new(vec![
        Field::new("col_name", DataType::Utf8, false),
        Field::new("data_type", DataType::Utf8, false),
        Field::new("comment", DataType::Utf8, false),
    ]));
    let col = |i: usize| Arc::new(StringArray::from_iter_values(rows.iter().map(|r| &r[i]))) as _;
    let batch = RecordBatch::try_new(out.clone(), vec![col(0), col(1), col(2)])?;
    Ok(Some((out, batch)))
}

/// A column type as Databricks names it.
fn data_type(t: &DataType) -> String {
    match t {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => "string".into(),
        DataType::Int64 => "bigint".into(),
        DataType::Int32 => "int".into(),
        DataType::Int16 => "smallint".into(),
        DataType::Int8 => "tinyint".into(),
        DataType::Float64 => "double".into(),
        DataType::Float32 => "float".into(),
        DataType::Boolean => "boolean".into(),
        DataType::Date32 => "date".into(),
        DataType::Timestamp(_, Some(_)) => "timestamp".into(),
        DataType::Timestamp(_, None) => "timestamp_ntz".into(),
        DataType::Decimal128(p, s) => format!("decimal({p},{s})"),
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => "binary".into(),
        DataType::List(f) | DataType::LargeList(f) => {
            format!("array<{}>", data_type(f.data_type()))
        }
        DataType::Struct(fs) => format!(
            "struct<{}>",
            fs.iter()
                .map(|f| format!("{}:{}", f.name(), data_type(f.data_type())))
                .collect::<Vec<_>>()
                .join(",")
        ),
        DataType::Map(entries, _) => match entries.data_type() {
            DataType::Struct(kv) if kv.len() == 2 => format!(
                "map<{},{}>",
                data_type(kv[0].data_type()),
                data_type(kv[1].data_type())
            ),
            other => other.to_string().to_lowercase(),
        },
        other => other.to_string().to_lowercase(),
    }
}

/// The flow's definition, as the SQL that creates it.
pub(crate) fn flow_sql(f: &FlowSpec) -> String {
    let cols = |c: &ColumnSelection| match c {
        ColumnSelection::All => "*".to_string(),
        ColumnSelection::Only(v) => format!("({})", v.join(", ")),
        ColumnSelection::AllExcept(v) => format!("* EXCEPT ({})", v.join(", ")),
    };
    let cond = |c: &Condition| match c {
        Condition::Equals { column, value } => {
            format!("{column} = '{}'", value.replace('\'', "''"))
        }
        Condition::Expr(e) => e.clone(),
    };
    let mut s = format!("CREATE FLOW {}", f.name);
    if let Some(c) = &f.comment {
        s += &format!(" COMMENT '{}'", c.replace('\'', "''"));
    }
    s += &format!(
        " AS AUTO CDC{} INTO {}",
        if f.once { " ONCE" } else { "" },
        f.target
    );
    if let Some(src) = &f.source_table {
        s += &format!(" FROM stream({src})");
        if f.change_commits == asof_storage::ChangeCommits::Skip {
            s += " WITH (skipChangeCommits = true)";
        }
    }
    s += &format!(" KEYS ({})", f.keys.join(", "));
    match &f.ignore_null_updates {
        Some(ColumnSelection::All) => s += " IGNORE NULL UPDATES",
        Some(c) => s += &format!(" IGNORE NULL UPDATES ON {}", cols(c)),
        None => {}
    }
    if let Some(c) = &f.delete_when {
        s += &format!(" APPLY AS DELETE WHEN {}", cond(c));
    }
    if let Some(c) = &f.truncate_when {
        s += &format!(" APPLY AS TRUNCATE WHEN {}", cond(c));
    }
    s += &match f.sequence_by.as_slice() {
        [one] => format!(" SEQUENCE BY {one}"),
        many => format!(" SEQUENCE BY STRUCT({})", many.join(", ")),
    };
    if let Some(c) = &f.system_sequence_by {
        s += &format!(" SYSTEM SEQUENCE BY {c}");
    }
    if let Some(c) = &f.columns_to_update {
        s += &format!(" COLUMNS TO UPDATE {c}");
    }
    if f.columns != ColumnSelection::All {
        s += &format!(" COLUMNS {}", cols(&f.columns));
    }
    s += &format!(" STORED AS {}", f.stored_as);
    if let (StoredAs::Scd2 | StoredAs::Bitemporal, Some(c)) = (f.stored_as, &f.track_history) {
        s += &format!(" TRACK HISTORY ON {}", cols(c));
    }
    s
}
