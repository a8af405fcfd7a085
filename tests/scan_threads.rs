//! A scan of a table that is not in memory reads its spans of keys on worker threads
//! (docs/ARCHITECTURE.md, `query/src/scan/workers.rs`). Whatever the number of workers, the
//! batch size and the selection, it returns the same rows in the same order as a scan on the
//! scan's own thread; a scan dropped half read lets the store go on; a table that comes into
//! memory under a scan is read on to its end as it was when the scan began.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use asof::{
    ColumnSelection, Condition, FlowSpec, Increments, ScanRequest, ScanThreads, Store,
    StoreOptions, StoredAs, TimeSelection,
};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, false),
        Field::new("b", DataType::Int64, false),
        Field::new("s", DataType::Int64, false),
        Field::new("op", DataType::Utf8, false),
        Field::new("v", DataType::Int64, true),
        Field::new("w", DataType::Utf8, true),
    ]))
}

fn open(dir: &std::path::Path, create: Option<StoredAs>) -> Store {
    // Every increment reads only its keys: commits under a scan leave the table out of memory.
    let options = StoreOptions {
        hot_events_per_key: 2,
        increments: Increments::ReadKeys,
        ..Default::default()
    };
    let store = Store::open_with(dir, options).unwrap();
    if let Some(mode) = create {
        let mut f = FlowSpec::builder("f", "t", &schema())
            .keys(["k"])
            .sequence_by(["b"])
            .delete_when(Condition::equals("op", "D"))
            .columns(ColumnSelection::all_except(["b", "s", "op"]))
            .stored_as(mode);
        if mode == StoredAs::Bitemporal {
            f = f.system_sequence_by("s");
        }
        store.create_flow(f.build().unwrap()).unwrap();
    }
    store
}

/// `n` events over `keys` keys, some late on both timelines, a few deletes.
fn batch(n: i64, keys: i64, seed: u64) -> RecordBatch {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let (mut k, mut b, mut s, mut op, mut v, mut w) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    for i in 0..n {
        k.push(rng.gen_range(0..keys));
        b.push(if rng.gen_bool(0.1) {
            i - rng.gen_range(1..50)
        } else {
            i
        });
        s.push(if rng.gen_bool(0.05) {
            i - rng.gen_range(1..30)
        } else {
            i
        });
        op.push(if rng.gen_bool(0.03) { "D" } else { "U" });
        v.push(rng.gen_bool(0.9).then(|| rng.gen_range(0..1000)));
        w.push(
            rng.gen_bool(0.8)
                .then(|| format!("w{}", rng.gen_range(0..50))),
        );
    }
    let cols: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(k)),
        Arc::new(Int64Array::from(b)),
        Arc::new(Int64Array::from(s)),
        Arc::new(StringArray::from(op)),
        Arc::new(Int64Array::from(v)),
        Arc::new(StringArray::from(w)),
    ];
    RecordBatch::try_new(schema(), cols).unwrap()
}

/// A closed store of `mode` holding `n` events over `keys` keys, committed 200 at a time.
fn closed_store(mode: StoredAs, n: i64, keys: i64, seed: u64) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), Some(mode));
    let all = batch(n, keys, seed);
    let mut at = 0;
    while at < all.num_rows() {
        let len = 200.min(all.num_rows() - at);
        store.apply("f", &all.slice(at, len)).unwrap();
        at += len;
    }
    dir
}

/// The rows of `b`, each as its cells joined.
fn rows_of(b: &RecordBatch) -> Vec<String> {
    let cells: Vec<_> = (0..b.num_columns())
        .map(|c| arrow::compute::cast(b.column(c), &DataType::Utf8).unwrap())
        .collect();
    (0..b.num_rows())
        .map(|r| {
            let row: Vec<&str> = cells
                .iter()
                .map(|a| {
                    let a = a.as_any().downcast_ref::<StringArray>().unwrap();
                    if a.is_null(r) {
                        "∅"
                    } else {
                        a.value(r)
                    }
                })
                .collect();
            row.join("|")
        })
        .collect()
}

/// The rows of a scan, in the order it returned them, each as its cells joined; and its batches'
/// sizes.
fn rows_in_order(store: &Store, req: &ScanRequest) -> (Vec<String>, Vec<usize>) {
    let (mut rows, mut sizes) = (Vec::new(), Vec::new());
    for b in asof::scan(store, "t", req).unwrap() {
        let b = b.unwrap();
        sizes.push(b.num_rows());
        rows.extend(rows_of(&b));
    }
    (rows, sizes)
}

fn is_span_by_span(store: &Store) -> bool {
    use std::ops::Bound::Unbounded;
    store
        .key_span("t", (Unbounded, Unbounded), 1, asof::Caching::Pass)
        .unwrap()
        .is_some()
}

#[test]
fn scans_on_worker_threads_return_the_rows_of_one_thread_in_its_order() {
    let dir = closed_store(StoredAs::Bitemporal, 6000, 700, 1);
    let store = open(dir.path(), None);
    let selections = [
        (TimeSelection::All, TimeSelection::All, None),
        (TimeSelection::as_of(3000), TimeSelection::as_of(4000), None),
        (TimeSelection::from_to(100, 900), TimeSelection::All, None),
        (
            TimeSelection::All,
            TimeSelection::All,
            Some(vec!["v".to_string()]),
        ),
        (TimeSelection::as_of(5000), TimeSelection::All, Some(vec![])),
    ];
    for (business, system, projection) in selections {
        for batch_size in [1, 7, 100, 8192] {
            let req = |threads| ScanRequest {
                business: business.clone(),
                system: system.clone(),
                projection: projection.clone(),
                batch_size,
                threads,
                ..Default::default()
            };
            let (want, _) = rows_in_order(&store, &req(ScanThreads::One));
            assert!(want.len() > 100, "{business:?} {system:?}: {}", want.len());
            for workers in [1, 2, 3] {
                let (got, sizes) = rows_in_order(&store, &req(ScanThreads::Workers(workers)));
                assert_eq!(
                    got.len(),
                    want.len(),
                    "{workers} workers, batch {batch_size}"
                );
                assert!(
                    got == want,
                    "{workers} workers, batch {batch_size}: another order"
                );
                assert!(
                    sizes.iter().all(|&n| (1..=batch_size).contains(&n)),
                    "{sizes:?}"
                );
            }
        }
    }
    assert!(is_span_by_span(&store), "the scans never loaded the table");
}

#[test]
fn a_scan_on_worker_threads_dropped_half_read_leaves_the_store_usable() {
    let dir = closed_store(StoredAs::Scd2, 3000, 400, 2);
    let store = open(dir.path(), None);
    let one = ScanRequest {
        threads: ScanThreads::One,
        ..Default::default()
    };
    let (before, _) = rows_in_order(&store, &one);
    let req = ScanRequest {
        batch_size: 5,
        threads: ScanThreads::Workers(2),
        ..Default::default()
    };
    let mut scan = asof::scan(&store, "t", &req).unwrap();
    assert_eq!(scan.next().unwrap().unwrap().num_rows(), 5);
    drop(scan);
    store.apply("f", &batch(50, 400, 3)).unwrap();
    drop(store);
    // Nothing of the scan holds the store open.
    let store = open(dir.path(), None);
    let (rows, _) = rows_in_order(&store, &ScanRequest::default());
    assert!(rows.len() > before.len(), "{} {}", rows.len(), before.len());
    assert!(rows == rows_in_order(&store, &one).0);
}

/// A closed bitemporal store of 4,000 events over 600 keys (events of `seed`), opened again; a
/// request for batches of 16 on two workers; and the rows it selects read on one thread.
fn reopened_with_rows_of_one_thread(
    seed: u64,
) -> (tempfile::TempDir, Store, ScanRequest, Vec<String>) {
    let dir = closed_store(StoredAs::Bitemporal, 4000, 600, seed);
    let store = open(dir.path(), None);
    let req = ScanRequest {
        batch_size: 16,
        threads: ScanThreads::Workers(2),
        ..Default::default()
    };
    let one = ScanRequest {
        threads: ScanThreads::One,
        ..req.clone()
    };
    let (rows, _) = rows_in_order(&store, &one);
    (dir, store, req, rows)
}

#[test]
fn a_table_loaded_under_a_scan_on_worker_threads_is_read_on_as_the_scan_began() {
    let (_dir, store, req, want) = reopened_with_rows_of_one_thread(4);
    let mut scan = asof::scan(&store, "t", &req).unwrap();
    let mut got = rows_of(&scan.next().unwrap().unwrap());
    // A read of the whole table brings it into memory, and a commit follows; the scan is pinned
    // to its version.
    store.read("t", |r| r.live_rows()).unwrap();
    store.apply("f", &batch(300, 600, 5)).unwrap();
    assert!(!is_span_by_span(&store));
    for b in scan {
        got.extend(rows_of(&b.unwrap()));
    }
    got.sort();
    let mut want = want;
    want.sort();
    assert_eq!(got.len(), want.len());
    assert!(
        got == want,
        "the scan read rows of the later commit, or lost some"
    );
}

#[test]
fn a_commit_under_a_scan_on_worker_threads_leaves_the_table_out_of_memory_and_the_scan_as_it_began()
{
    let (dir, store, req, want) = reopened_with_rows_of_one_thread(7);
    let mut scan = asof::scan(&store, "t", &req).unwrap();
    let mut got = rows_of(&scan.next().unwrap().unwrap());
    // Late events on every timeline of most keys: their frozen pages are thawed, and freed by
    // the commit's checkpoint while the scan's workers hold spans that list them.
    for seed in 8..11 {
        store.apply("f", &batch(300, 600, seed)).unwrap();
        assert!(is_span_by_span(&store), "an increment reads only its keys");
    }
    for b in scan {
        got.extend(rows_of(&b.unwrap()));
    }
    assert_eq!(got.len(), want.len());
    assert!(
        got == want,
        "the scan read rows of the later commits, or lost some"
    );
    // The pages the commits freed under the scan were kept for it (it read them), listed in the
    // table's `F` record; the next commit, with no scan under way, deletes them, and the record
    // with the last.
    store.apply("f", &batch(300, 600, 11)).unwrap();
    drop(store);
    let kv = asof::SledKv::open(dir.path(), 1 << 20).unwrap();
    assert_eq!(asof::KvStore::get(&kv, b"F\0\0\0\0").unwrap(), None);
}

#[test]
fn pages_freed_under_a_scan_stay_listed_until_a_commit_after_it() {
    let (dir, store, req, _) = reopened_with_rows_of_one_thread(12);
    let mut scan = asof::scan(&store, "t", &req).unwrap();
    scan.next().unwrap().unwrap();
    store.apply("f", &batch(300, 600, 13)).unwrap();
    drop(scan);
    drop(store);
    let kv = asof::SledKv::open(dir.path(), 1 << 20).unwrap();
    assert!(asof::KvStore::get(&kv, b"F\0\0\0\0").unwrap().is_some());
}

#[test]
fn a_vacuum_under_a_scan_on_worker_threads_interrupts_it_after_the_rows_read_before() {
    let (_dir, store, req, all) = reopened_with_rows_of_one_thread(6);
    let mut scan = asof::scan(&store, "t", &req).unwrap();
    let first = scan.next().unwrap().unwrap();
    store
        .vacuum_with(
            "t",
            std::time::Duration::ZERO,
            asof::RetentionCheck::Disabled,
        )
        .unwrap();
    let rest: Vec<_> = scan.collect();
    // The batches read before the VACUUM (a few queued by each worker), then its error, last.
    let (last, before) = rest.split_last().expect("the scan reported the VACUUM");
    match last {
        Err(asof::QueryError::Storage(asof::Error::ScanInterrupted(t))) => assert_eq!(t, "t"),
        other => panic!("{other:?}"),
    }
    let rows = first.num_rows()
        + before
            .iter()
            .map(|b| b.as_ref().unwrap().num_rows())
            .sum::<usize>();
    assert!(rows < all.len(), "{rows} of {}", all.len());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    /// Any store, any batch size, any number of workers: the rows and their order of a scan on
    /// one thread.
    #[test]
    fn worker_threads_never_change_a_scan(
        n in 50i64..1500,
        keys in 1i64..300,
        seed in 0u64..1000,
        batch_size in 1usize..300,
        workers in 1usize..4,
        scd2 in any::<bool>(),
    ) {
        let mode = if scd2 { StoredAs::Scd2 } else { StoredAs::Bitemporal };
        let dir = closed_store(mode, n, keys, seed);
        let store = open(dir.path(), None);
        let req = |threads| ScanRequest { batch_size, threads, ..Default::default() };
        let (want, _) = rows_in_order(&store, &req(ScanThreads::One));
        let (got, _) = rows_in_order(&store, &req(ScanThreads::Workers(workers)));
        prop_assert_eq!(got, want);
    }
}

/// sled, counting the frozen pages read for their row versions (what a scan reads of a page).
struct CountingKv {
    inner: asof::SledKv,
    pages: Arc<std::sync::atomic::AtomicUsize>,
}

impl asof::KvStore for CountingKv {
    fn get(&self, k: &[u8]) -> Result<Option<Vec<u8>>, asof::Error> {
        self.inner.get(k)
    }
    fn scan_prefix<'a>(
        &'a self,
        prefix: &[u8],
    ) -> Box<dyn Iterator<Item = Result<asof::KvPair, asof::Error>> + 'a> {
        self.inner.scan_prefix(prefix)
    }
    fn write(&self, batch: asof::WriteBatch) -> Result<(), asof::Error> {
        self.inner.write(batch)
    }
    fn get_many_leading(
        &self,
        keys: &[Vec<u8>],
        leading: &[u32],
    ) -> Result<Vec<Option<(Vec<u8>, u64)>>, asof::Error> {
        let pages = keys.iter().filter(|k| k.first() == Some(&b'P')).count();
        self.pages
            .fetch_add(pages, std::sync::atomic::Ordering::Relaxed);
        self.inner.get_many_leading(keys, leading)
    }
}

/// A key with more row versions than a batch holds is read across several calls of its span's
/// scan: each of its frozen pages is read once all the same, whatever the batch size (the call
/// that goes on in a key takes the rows the one before read).
#[test]
fn a_key_longer_than_a_batch_has_its_pages_read_once_per_scan() {
    let dir = closed_store(StoredAs::Bitemporal, 3000, 4, 3);
    let pages = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let kv = CountingKv {
        inner: asof::SledKv::open(dir.path(), 1 << 20).unwrap(),
        pages: pages.clone(),
    };
    let store = Store::with_kv_options(
        Box::new(kv),
        StoreOptions {
            hot_events_per_key: 2,
            increments: Increments::ReadKeys,
            ..Default::default()
        },
    )
    .unwrap();
    let read = |batch_size, threads| {
        let before = pages.load(std::sync::atomic::Ordering::Relaxed);
        let req = ScanRequest {
            batch_size,
            threads,
            ..Default::default()
        };
        let (rows, sizes) = rows_in_order(&store, &req);
        let read = pages.load(std::sync::atomic::Ordering::Relaxed) - before;
        (rows, sizes.len(), read)
    };
    let (want, batches, once) = read(1_000_000, ScanThreads::One);
    assert_eq!(batches, 1);
    assert!(once > 40, "the keys' history is in pages: {once} read");
    assert!(want.len() > 2000, "{}", want.len());
    for threads in [ScanThreads::One, ScanThreads::Workers(2)] {
        for batch_size in [7, 100] {
            let (rows, batches, pages_read) = read(batch_size, threads);
            assert!(rows == want, "{threads:?}, batch {batch_size}: other rows");
            assert!(batches > 2 * 4, "{batches} batches of {batch_size}");
            assert_eq!(pages_read, once, "{threads:?}, batch {batch_size}");
        }
    }
    assert!(is_span_by_span(&store), "the scans never loaded the table");
}
