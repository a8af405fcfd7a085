//! The workload of the core-engine issue: N events over K keys, 6 value columns, 10% late on
//! business time, 1% late on system time, 1% deletes, a commit every 10,000 events.
#![allow(dead_code)] // each bench uses a part of it

use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray,
    TimestampMicrosecondArray,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use asof::{ColumnSelection, Condition, Flow, FlowSpec, StoredAs};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

pub const STEP_US: i64 = 1_000;

pub fn schema() -> SchemaRef {
    let ts = DataType::Timestamp(TimeUnit::Microsecond, None);
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("business_time", ts.clone(), false),
        Field::new("system_time", ts, false),
        Field::new("op", DataType::Utf8, false),
        Field::new("v0", DataType::Int64, true),
        Field::new("v1", DataType::Float64, true),
        Field::new("v2", DataType::Utf8, true),
        Field::new("v3", DataType::Int64, true),
        Field::new("v4", DataType::Utf8, true),
        Field::new("v5", DataType::Boolean, true),
    ]))
}

pub fn flow(mode: StoredAs) -> Flow {
    let mut f = FlowSpec::builder("bench_cdc", "bench", &schema())
        .keys(["id"])
        .sequence_by(["business_time"])
        .delete_when(Condition::equals("op", "D"))
        .stored_as(mode);
    f = if mode == StoredAs::Bitemporal {
        f.system_sequence_by("system_time")
            .columns(ColumnSelection::all_except([
                "business_time",
                "system_time",
                "op",
            ]))
    } else {
        f.columns(ColumnSelection::all_except([
            "business_time",
            "system_time",
            "op",
        ]))
    };
    f.build().expect("valid flow")
}

/// The number of events of the workload: `ASOF_BENCH_EVENTS`, 1M by default.
pub fn events() -> usize {
    std::env::var("ASOF_BENCH_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000)
}

/// Opens a store at `path` with the default options, but for `hot_events_per_key`, which
/// `ASOF_BENCH_HOT_EVENTS` sets when given (a huge value keeps all history in memory, for an A/B
/// against freezing).
pub fn open(path: &std::path::Path) -> asof::Store {
    let mut options = asof::StoreOptions::default();
    if let Some(n) = std::env::var("ASOF_BENCH_HOT_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        options.hot_events_per_key = n;
    }
    asof::Store::open_with(path, options).expect("store opens")
}

/// Sets up the process's memory as the `asof` binary does ([`asof::tune_process_memory`]).
#[allow(dead_code)]
pub fn tune_allocator() {
    asof::tune_process_memory().expect("transparent huge pages off");
}

/// The events as batches of `batch` rows.
#[allow(dead_code)]
pub fn batches(events: usize, keys: i64, batch: usize, seed: u64) -> Vec<RecordBatch> {
    batch_iter(events, keys, batch, seed).collect()
}

/// The same batches, made one at a time (for workloads too big to hold).
pub fn batch_iter(
    events: usize,
    keys: i64,
    batch: usize,
    seed: u64,
) -> impl Iterator<Item = RecordBatch> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut i = 0usize;
    std::iter::from_fn(move || {
        if i >= events {
            return None;
        }
        let n = batch.min(events - i);
        let (mut id, mut bt, mut st, mut op) = (
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
        );
        let (mut v0, mut v1, mut v2, mut v3, mut v4, mut v5) = (
            Vec::new(),
            Vec::new(),
            Vec::new(),
            Vec::new(),
            Vec::new(),
            Vec::new(),
        );
        for j in 0..n {
            let t = (i + j) as i64 * STEP_US;
            id.push(rng.gen_range(0..keys));
            let late_b = rng.gen_bool(0.10);
            bt.push(if late_b {
                t - rng.gen_range(1..(keys * 3).max(2)) * STEP_US
            } else {
                t
            });
            let late_s = rng.gen_bool(0.01);
            st.push(if late_s {
                t - rng.gen_range(1..(keys * 3).max(2)) * STEP_US
            } else {
                t
            });
            op.push(if rng.gen_bool(0.01) { "D" } else { "U" });
            v0.push(rng.gen_range(0..1_000_000i64));
            v1.push(rng.gen::<f64>());
            v2.push(format!("s{}", rng.gen_range(0..1000)));
            v3.push(rng.gen_range(0..100i64));
            v4.push(["red", "green", "blue", "amber"][rng.gen_range(0..4)]);
            v5.push(rng.gen_bool(0.5));
        }
        let cols: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(id)),
            Arc::new(TimestampMicrosecondArray::from(bt)),
            Arc::new(TimestampMicrosecondArray::from(st)),
            Arc::new(StringArray::from(op)),
            Arc::new(Int64Array::from(v0)),
            Arc::new(Float64Array::from(v1)),
            Arc::new(StringArray::from(v2)),
            Arc::new(Int64Array::from(v3)),
            Arc::new(StringArray::from(v4)),
            Arc::new(BooleanArray::from(v5)),
        ];
        i += n;
        Some(RecordBatch::try_new(schema(), cols).expect("batch"))
    })
}
