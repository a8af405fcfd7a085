//! Every rule of docs/SEMANTICS.md §1 refuses a bad flow definition with its own error.

use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema};
use asof::{ColumnSelection, Condition, FlowError, FlowSpec, StoredAs};

fn schema() -> Schema {
    Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("ts", DataType::Int64, false),
        Field::new("sys", DataType::Int64, false),
        Field::new("f", DataType::Float64, true),
        Field::new("v", DataType::Utf8, true),
        Field::new("op", DataType::Utf8, true),
        Field::new(
            "upd",
            DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))),
            true,
        ),
        Field::new("ok", DataType::Boolean, true),
    ])
}

fn base() -> asof::FlowBuilder {
    FlowSpec::builder("f", "t", &schema())
        .keys(["id"])
        .sequence_by(["ts"])
}

fn err(b: asof::FlowBuilder) -> FlowError {
    b.build().expect_err("the flow must be refused")
}

#[test]
fn keys_are_required_and_must_exist_and_be_output_columns() {
    assert_eq!(
        err(FlowSpec::builder("f", "t", &schema()).sequence_by(["ts"])),
        FlowError::MissingKeys
    );
    assert_eq!(
        err(base().keys(["nope"])),
        FlowError::UnknownColumn {
            clause: "KEYS",
            column: "nope".into()
        }
    );
    assert_eq!(
        err(base().columns(ColumnSelection::all_except(["id"]))),
        FlowError::KeyNotInOutput("id".into())
    );
    assert_eq!(
        err(base().keys(["id", "id"])),
        FlowError::DuplicateColumn {
            clause: "KEYS",
            column: "id".into()
        }
    );
    assert!(matches!(
        err(base().keys(["upd"])),
        FlowError::UnsupportedKeyType { .. }
    ));
}

#[test]
fn sequences_are_required_and_orderable() {
    assert_eq!(
        err(FlowSpec::builder("f", "t", &schema()).keys(["id"])),
        FlowError::MissingSequence
    );
    assert!(matches!(
        err(base().sequence_by(["f"])),
        FlowError::UnorderableType {
            clause: "SEQUENCE BY",
            ..
        }
    ));
    assert!(matches!(
        err(base().sequence_by(["ok"])),
        FlowError::UnorderableType {
            clause: "SEQUENCE BY",
            ..
        }
    ));
    assert_eq!(
        err(base().sequence_by(["ts", "missing"])),
        FlowError::UnknownColumn {
            clause: "SEQUENCE BY",
            column: "missing".into()
        }
    );
    assert!(matches!(
        err(base()
            .stored_as(StoredAs::Bitemporal)
            .system_sequence_by("f")),
        FlowError::UnorderableType {
            clause: "SYSTEM SEQUENCE BY",
            ..
        }
    ));
    // STRUCT sequences and every orderable type are accepted.
    base().sequence_by(["ts", "v"]).build().unwrap();
}

#[test]
fn mode_specific_clauses() {
    assert_eq!(
        err(base().system_sequence_by("sys")),
        FlowError::SystemSequenceRequiresBitemporal
    );
    assert_eq!(
        err(base().stored_as(StoredAs::Scd2).system_sequence_by("sys")),
        FlowError::SystemSequenceRequiresBitemporal
    );
    assert_eq!(
        err(base()
            .stored_as(StoredAs::Scd2)
            .truncate_when(Condition::equals("op", "T"))),
        FlowError::TruncateRequiresScd1
    );
    assert_eq!(
        err(base().track_history(ColumnSelection::only(["v"]))),
        FlowError::TrackHistoryRequiresHistory
    );
    assert_eq!(
        err(base()
            .stored_as(StoredAs::Bitemporal)
            .columns_to_update("upd")),
        FlowError::ColumnsToUpdateWithBitemporal
    );
    assert_eq!(
        err(base()
            .ignore_null_updates(ColumnSelection::All)
            .columns_to_update("upd")),
        FlowError::IgnoreNullUpdatesWithColumnsToUpdate
    );
    assert!(matches!(
        err(base().columns_to_update("v")),
        FlowError::ColumnsToUpdateType { .. }
    ));
    base()
        .truncate_when(Condition::equals("op", "T"))
        .build()
        .unwrap();
    base().stored_as(StoredAs::Bitemporal).build().unwrap();
}

#[test]
fn column_lists_must_name_real_output_columns() {
    assert_eq!(
        err(base().columns(ColumnSelection::only(["id", "ts", "zz"]))),
        FlowError::UnknownColumn {
            clause: "COLUMNS",
            column: "zz".into()
        }
    );
    assert_eq!(
        err(base()
            .stored_as(StoredAs::Scd2)
            .columns(ColumnSelection::all_except(["op"]))
            .track_history(ColumnSelection::only(["op"]))),
        FlowError::NotAnOutputColumn {
            clause: "TRACK HISTORY",
            column: "op".into()
        }
    );
    assert_eq!(
        err(base()
            .stored_as(StoredAs::Scd2)
            .track_history(ColumnSelection::all_except(["zz"]))),
        FlowError::UnknownColumn {
            clause: "TRACK HISTORY",
            column: "zz".into()
        }
    );
    assert_eq!(
        err(base().ignore_null_updates(ColumnSelection::only(["zz"]))),
        FlowError::UnknownColumn {
            clause: "IGNORE NULL UPDATES",
            column: "zz".into()
        }
    );
    assert_eq!(
        err(base().delete_when(Condition::equals("zz", "D"))),
        FlowError::UnknownColumn {
            clause: "APPLY AS DELETE WHEN",
            column: "zz".into()
        }
    );
    let reserved = Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("ts", DataType::Int64, false),
        Field::new("__START_AT", DataType::Int64, false),
    ]);
    assert_eq!(
        FlowSpec::builder("f", "t", &reserved)
            .keys(["id"])
            .sequence_by(["ts"])
            .build()
            .unwrap_err(),
        FlowError::ReservedColumnName("__START_AT".into())
    );
    let unsupported = Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("ts", DataType::Int64, false),
        Field::new(
            "d",
            DataType::Duration(arrow::datatypes::TimeUnit::Second),
            true,
        ),
    ]);
    assert!(matches!(
        FlowSpec::builder("f", "t", &unsupported)
            .keys(["id"])
            .sequence_by(["ts"])
            .build()
            .unwrap_err(),
        FlowError::UnsupportedType { .. }
    ));
    assert_eq!(
        err(FlowSpec::builder("", "t", &schema())
            .keys(["id"])
            .sequence_by(["ts"])),
        FlowError::InvalidName("".into())
    );
}

#[test]
fn errors_name_the_rule() {
    let msg = err(base()
        .stored_as(StoredAs::Scd2)
        .truncate_when(Condition::equals("op", "T")))
    .to_string();
    assert!(
        msg.contains("APPLY AS TRUNCATE WHEN") && msg.contains("SCD TYPE 1"),
        "{msg}"
    );
    let msg = err(base().keys(["nope"])).to_string();
    assert!(msg.contains("KEYS") && msg.contains("nope"), "{msg}");
}
