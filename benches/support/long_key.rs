//! One key with a long history, for the benches of a single key (`lookup`, `late`).

use std::sync::Arc;

use crate::workload;
use arrow::array::{
    ArrayRef, BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray,
    TimestampMicrosecondArray,
};
use asof::{Store, StoredAs};
use rand::{Rng, SeedableRng};

/// Upserts of key 1 at these business and system times, with these `v0` values.
pub fn upserts(business: Vec<i64>, system: Vec<i64>, v0: Vec<i64>) -> RecordBatch {
    let n = business.len();
    let cols: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(vec![1i64; n])),
        Arc::new(TimestampMicrosecondArray::from(business)),
        Arc::new(TimestampMicrosecondArray::from(system)),
        Arc::new(StringArray::from(vec!["U"; n])),
        Arc::new(Int64Array::from(v0)),
        Arc::new(Float64Array::from(vec![1.0; n])),
        Arc::new(StringArray::from(vec!["x"; n])),
        Arc::new(Int64Array::from(vec![1i64; n])),
        Arc::new(StringArray::from(vec!["y"; n])),
        Arc::new(BooleanArray::from(vec![true; n])),
    ];
    RecordBatch::try_new(workload::schema(), cols).unwrap()
}

/// One key with `versions` versions (in-order events, a tenth of them late on business time by
/// half a step), the version `j` at business time `j × STEP_US`, known from system time
/// `j × STEP_US`; committed 10,000 events at a time.
pub fn long_key_store(versions: usize) -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = workload::open(dir.path());
    store
        .create_flow(workload::flow(StoredAs::Bitemporal))
        .unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let per_batch = 10_000;
    let mut i = 0;
    while i < versions {
        let n = per_batch.min(versions - i);
        let t: Vec<i64> = (i..i + n).map(|j| j as i64 * workload::STEP_US).collect();
        let late: Vec<i64> = t
            .iter()
            .map(|&t| {
                if rng.gen_bool(0.1) {
                    t - workload::STEP_US / 2
                } else {
                    t
                }
            })
            .collect();
        let v0 = (i..i + n).map(|j| j as i64).collect();
        store.apply("bench_cdc", &upserts(late, t, v0)).unwrap();
        i += n;
    }
    (dir, store)
}
