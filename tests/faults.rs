//! Misuse and damage: damaged files, an unknown format version, a second process, an I/O failure
//! in the middle of a commit. Each gives a clear error, never a panic or a silently wrong table.

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use asof::{Error, KvStore, SledKv, Store, WriteBatch};
use common::{data_dir, read_csv, string_batch};

/// A store with the reference case applied in four commits; returns its rows.
fn build(dir: &std::path::Path) -> Vec<common::model::MRow> {
    let store = Store::open(dir).unwrap();
    store
        .create_flow(common::seed_flow_builder("f", "t").build().unwrap())
        .unwrap();
    let (header, events) = read_csv(&data_dir().join("seed_bitemporal/events.csv"));
    for e in &events {
        store
            .apply("f", &string_batch(&header, std::slice::from_ref(e)))
            .unwrap();
    }
    common::engine_rows(&store, "t")
}

/// Opening must not panic; it either fails with an error or gives a store whose table reads
/// consistently (sled may recover a damaged log to an earlier consistent state, as after a crash).
fn open_damaged(dir: &std::path::Path, good: &[common::model::MRow]) -> Result<usize, Error> {
    let r = std::panic::catch_unwind(|| match Store::open(dir) {
        Err(e) => Err(e),
        Ok(store) => {
            let n = match store.history("t") {
                Ok(h) => h.len(),
                Err(e) => return Err(e),
            };
            let rows = common::engine_rows(&store, "t");
            // Opened: then nothing may be missing (acknowledged commits lost in silence would
            // be a wrong table).
            assert_eq!(n, 5, "opened with acknowledged commits missing");
            assert_eq!(rows, good, "all commits there, so the table must be exact");
            Ok(n)
        }
    });
    r.unwrap_or_else(|_| panic!("opening a damaged store panicked"))
}

fn files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        if e.path().is_file() {
            out.push(e.path());
        }
    }
    out.sort();
    out
}

#[test]
fn truncated_and_overwritten_files_give_an_error_or_a_consistent_store() {
    for damage in ["truncate", "garbage", "zero"] {
        for victim in 0..3 {
            let dir = tempfile::tempdir().unwrap();
            let good = build(dir.path());
            let fs = files(dir.path());
            let Some(f) = fs.get(victim) else { continue };
            let len = std::fs::metadata(f).unwrap().len();
            match damage {
                "truncate" => {
                    std::fs::OpenOptions::new()
                        .write(true)
                        .open(f)
                        .unwrap()
                        .set_len(len / 2)
                        .unwrap();
                }
                _ => {
                    let mut bytes = std::fs::read(f).unwrap();
                    let from = bytes.len() / 3;
                    let to = (from + 4096).min(bytes.len());
                    for (i, b) in bytes[from..to].iter_mut().enumerate() {
                        *b = if damage == "zero" {
                            0
                        } else {
                            (i * 7919 % 251) as u8
                        };
                    }
                    std::fs::write(f, bytes).unwrap();
                }
            }
            match open_damaged(dir.path(), &good) {
                Ok(n) => println!("{damage} {}: opened with {n} commits", f.display()),
                Err(e) => {
                    let msg = e.to_string();
                    println!("{damage} {}: {msg}", f.display());
                    assert!(!msg.is_empty());
                }
            }
        }
    }
}

#[test]
fn an_unknown_format_version_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    {
        let kv = SledKv::open(dir.path(), 1 << 20).unwrap();
        let mut b = WriteBatch::default();
        b.put(b"M format".to_vec(), 99u32.to_be_bytes().to_vec());
        kv.write(b).unwrap();
    }
    let e = Store::open(dir.path()).err().expect("refused");
    assert!(
        matches!(
            e,
            Error::FormatVersion {
                found: 99,
                supported
            } if supported == asof::FORMAT_VERSION
        ),
        "{e}"
    );
    assert!(e.to_string().contains("format version 99"), "{e}");
}

#[test]
fn a_damaged_event_block_is_reported_as_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    {
        let kv = SledKv::open(dir.path(), 1 << 20).unwrap();
        let blocks: Vec<_> = kv.scan_prefix(b"E").map(|r| r.unwrap()).collect();
        assert!(!blocks.is_empty());
        let (k, mut v) = blocks[1].clone();
        let mid = v.len() / 2;
        v[mid] ^= 0x5a;
        v.truncate(v.len() - 3);
        let mut b = WriteBatch::default();
        b.put(k, v);
        // Without its summary the table's derived records are not current: it must be replayed.
        b.delete(b"G\0\0\0\0".to_vec());
        kv.write(b).unwrap();
    }
    // Opening reads the catalog only; the damage is found, and named, when the table is first
    // replayed. The store stays usable (the table stays unreadable, every time).
    let store = Store::open(dir.path()).unwrap();
    for _ in 0..2 {
        let e = store.read("t", |r| r.live_rows()).unwrap_err();
        assert!(
            matches!(&e, Error::Corrupt(m) if m.starts_with("table `t`: ")),
            "{e}"
        );
    }
    assert!(store.tables().unwrap().contains(&"t".to_string()));
    drop(store);
    // Opened eagerly, the store refuses to open.
    let options = asof::StoreOptions {
        open: asof::OpenMode::Eager,
        ..Default::default()
    };
    let e = Store::open_with(dir.path(), options)
        .err()
        .expect("refused");
    assert!(matches!(e, Error::Corrupt(_)), "{e}");
}

#[test]
fn a_second_process_gets_a_clear_in_use_error() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    let store = Store::open(dir.path()).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_asof"))
        .arg("--db")
        .arg(dir.path())
        .args(["tables"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("in use by process {}", std::process::id())),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    drop(store);
}

/// sled behind a switch that makes the next write fail.
struct FailingKv {
    inner: SledKv,
    /// Fails the write this many writes from now (1: the next), then works again; 0: never.
    fail_in: Arc<AtomicUsize>,
}

impl KvStore for FailingKv {
    fn get(&self, k: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        self.inner.get(k)
    }
    fn scan_prefix<'a>(
        &'a self,
        prefix: &[u8],
    ) -> Box<dyn Iterator<Item = Result<asof::KvPair, Error>> + 'a> {
        self.inner.scan_prefix(prefix)
    }
    fn write(&self, batch: WriteBatch) -> Result<(), Error> {
        let left = self
            .fail_in
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .unwrap_or(0);
        if left == 1 {
            return Err(Error::Io("injected failure: disk full".into()));
        }
        self.inner.write(batch)
    }
}

/// A store at `dir` whose writes fail when told: the write `n` writes after `fail` is set to
/// `n` fails once.
fn failing_store(dir: &std::path::Path, options: asof::StoreOptions) -> (Store, Arc<AtomicUsize>) {
    let fail = Arc::new(AtomicUsize::new(0));
    let kv = FailingKv {
        inner: SledKv::open(dir, 1 << 20).unwrap(),
        fail_in: fail.clone(),
    };
    (Store::with_kv_options(Box::new(kv), options).unwrap(), fail)
}

#[test]
fn after_an_io_failure_on_commit_the_store_refuses_writes_until_reopened() {
    let dir = tempfile::tempdir().unwrap();
    let (header, events) = read_csv(&data_dir().join("seed_bitemporal/events.csv"));
    {
        let (store, fail) = failing_store(dir.path(), asof::StoreOptions::default());
        store
            .create_flow(common::seed_flow_builder("f", "t").build().unwrap())
            .unwrap();
        store
            .apply("f", &string_batch(&header, &events[..2]))
            .unwrap();
        fail.store(1, Ordering::SeqCst);
        let e = store
            .apply("f", &string_batch(&header, &events[2..3]))
            .unwrap_err();
        assert!(e.to_string().contains("disk full"), "{e}");
        // The failure is gone, but the store stays refused: memory may be ahead of disk.
        let e = store
            .apply("f", &string_batch(&header, &events[3..]))
            .unwrap_err();
        assert!(matches!(e, Error::Poisoned(_)), "{e}");
        assert!(e.to_string().contains("reopen"), "{e}");
        assert!(matches!(
            store.create_source("s", &arrow::datatypes::Schema::empty()),
            Err(Error::Poisoned(_))
        ));
    }
    // Reopened: the table is the one of the commits that were acknowledged, and writes work.
    let store = Store::open(dir.path()).unwrap();
    assert_eq!(store.history("t").unwrap().len(), 2);
    let (_, exp) = read_csv(&data_dir().join("seed_bitemporal/expected_after_2.csv"));
    assert_eq!(common::table_strings(&store, "t").1, common::sorted(exp));
    store
        .apply("f", &string_batch(&header, &events[2..]))
        .unwrap();
    let (_, exp) = read_csv(&data_dir().join("seed_bitemporal/expected_after_4.csv"));
    assert_eq!(common::table_strings(&store, "t").1, common::sorted(exp));
}

/// The versions of the records tagged `tag` (event blocks `E`, row directories `X`: tag, table
/// id, version, part) in the store at `dir`.
fn versions_tagged(dir: &std::path::Path, tag: u8) -> Vec<u64> {
    let kv = SledKv::open(dir, 1 << 20).unwrap();
    let mut versions: Vec<u64> = kv
        .scan_prefix(&[tag])
        .map(|p| u64::from_be_bytes(p.unwrap().0[5..13].try_into().unwrap()))
        .collect();
    versions.dedup();
    versions
}

/// A failing store at `dir` that applies every commit of more than one row in parts, written
/// ahead of its record, with the seed flow `f` into `t` and a first commit of `events`.
fn parted_store(
    dir: &std::path::Path,
    header: &[String],
    events: &[Vec<Option<String>>],
) -> (Store, Arc<AtomicUsize>, asof::CommitInfo) {
    let options = asof::StoreOptions {
        commit_part_rows: 1,
        ..Default::default()
    };
    let (store, fail) = failing_store(dir, options);
    store
        .create_flow(common::seed_flow_builder("f", "t").build().unwrap())
        .unwrap();
    let c = store.apply("f", &string_batch(header, events)).unwrap();
    (store, fail, c)
}

#[test]
fn a_commit_in_parts_stopped_between_its_batches_leaves_nothing_after_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let (header, events) = read_csv(&data_dir().join("seed_bitemporal/events.csv"));
    {
        let (store, fail, c) = parted_store(dir.path(), &header, &events[..2]);
        assert!(c.parameters.contains_key("parts"), "{:?}", c.parameters);
        // The table's summary is deleted, the first part's event blocks, row directory and heads
        // are written; the second part's event blocks fail (the sixth write).
        fail.store(6, Ordering::SeqCst);
        let e = store
            .apply("f", &string_batch(&header, &events[2..]))
            .unwrap_err();
        assert!(e.to_string().contains("disk full"), "{e}");
    }
    for tag in [b'E', b'X'] {
        assert_eq!(
            versions_tagged(dir.path(), tag),
            [1, 2],
            "the part was written ahead: {}",
            tag as char
        );
    }
    // Reopened: the blocks and directories no record claims are gone (a directory left would
    // be read as a part of the next commit 2), the table is as acknowledged, and the log
    // replays to the derived records.
    {
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.history("t").unwrap().len(), 2);
        let (_, exp) = read_csv(&data_dir().join("seed_bitemporal/expected_after_2.csv"));
        assert_eq!(common::table_strings(&store, "t").1, common::sorted(exp));
        assert!(store.verify().unwrap().ok());
    }
    for tag in [b'E', b'X'] {
        assert_eq!(versions_tagged(dir.path(), tag), [1]);
    }
    let store = Store::open(dir.path()).unwrap();
    store
        .apply("f", &string_batch(&header, &events[2..]))
        .unwrap();
    let (_, exp) = read_csv(&data_dir().join("seed_bitemporal/expected_after_4.csv"));
    assert_eq!(common::table_strings(&store, "t").1, common::sorted(exp));
    assert!(store.verify().unwrap().ok());
}

/// A commit applied in parts writes its parts' blocks and row directories, then deletes the
/// table's summary, writes its keys' heads in batches of their own, and writes its record with
/// the summary. Stopped at any of those writes, a reopen gives the table as acknowledged before
/// it (rebuilt from the log when the stop left no summary), and the commit applies again.
#[test]
fn a_commit_in_parts_stopped_at_any_of_its_writes_leaves_the_table_as_acknowledged() {
    let (header, events) = read_csv(&data_dir().join("seed_bitemporal/events.csv"));
    let (_, after_2) = read_csv(&data_dir().join("seed_bitemporal/expected_after_2.csv"));
    let (_, after_4) = read_csv(&data_dir().join("seed_bitemporal/expected_after_4.csv"));
    let mut stops = Vec::new();
    for n in 1.. {
        let dir = tempfile::tempdir().unwrap();
        {
            let (store, fail, _) = parted_store(dir.path(), &header, &events[..2]);
            fail.store(n, Ordering::SeqCst);
            match store.apply("f", &string_batch(&header, &events[2..])) {
                Ok(_) => break,
                Err(e) => assert!(e.to_string().contains("disk full"), "write {n}: {e}"),
            }
        }
        // Whether the stop fell after the summary was deleted (the table's one summary, `G`).
        stops.push(keys_tagged(dir.path(), b'G'));
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.history("t").unwrap().len(), 2, "write {n}");
        assert_eq!(
            common::table_strings(&store, "t").1,
            common::sorted(after_2.clone()),
            "write {n}"
        );
        assert!(store.verify().unwrap().ok(), "write {n}");
        store
            .apply("f", &string_batch(&header, &events[2..]))
            .unwrap();
        assert_eq!(
            common::table_strings(&store, "t").1,
            common::sorted(after_4.clone()),
            "write {n}"
        );
    }
    // Its parts (two writes each), then the summary's deletion and the heads: some stops fell
    // before the summary was deleted, some after.
    assert!(stops.len() >= 5, "{stops:?}");
    assert!(stops.contains(&1) && stops.contains(&0), "{stops:?}");
}

/// Keys of the store at `dir` with tag `tag` (the first byte of a key).
fn keys_tagged(dir: &std::path::Path, tag: u8) -> usize {
    let kv = SledKv::open(dir, 1 << 20).unwrap();
    kv.scan_prefix(&[tag]).count()
}

#[test]
fn pages_a_checkpoint_freed_are_deleted_by_the_next_open_when_their_deletion_failed() {
    use arrow::array::Int64Array;
    use arrow::datatypes::{DataType, Field, Schema};
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, false),
        Field::new("seq", DataType::Int64, false),
        Field::new("v", DataType::Int64, false),
    ]));
    let batch = |seqs: &[i64]| {
        let n = seqs.len();
        arrow::record_batch::RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int64Array::from(vec![1; n])),
                Arc::new(Int64Array::from(seqs.to_vec())),
                Arc::new(Int64Array::from(
                    seqs.iter().map(|s| s * 10).collect::<Vec<_>>(),
                )),
            ],
        )
        .unwrap()
    };
    let flow = asof::FlowSpec::builder("f", "t", &schema)
        .keys(["k"])
        .sequence_by(["seq"])
        .stored_as(asof::StoredAs::Scd2)
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let rows = {
        // A tail of one event and a checkpoint with every commit: the key's history freezes
        // into pages, and a late event thaws it, so the checkpoint frees its pages.
        let options = asof::StoreOptions {
            hot_events_per_key: 1,
            checkpoints: asof::Checkpoints {
                every_events: 1,
                ..Default::default()
            },
            ..Default::default()
        };
        let (store, fail) = failing_store(dir.path(), options);
        store.create_flow(flow).unwrap();
        store
            .apply("f", &batch(&(10..30).collect::<Vec<_>>()))
            .unwrap();
        assert!(frozen_keys(&store) > 0, "the key's history is frozen");
        // The commit's batch is written; the first deletion of its freed pages fails.
        fail.store(2, Ordering::SeqCst);
        store.apply("f", &batch(&[5])).unwrap();
        common::engine_rows(&store, "t")
    };
    assert_eq!(
        keys_tagged(dir.path(), b'F'),
        1,
        "the freed pages are still listed"
    );
    {
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(common::engine_rows(&store, "t"), rows);
        assert!(store.verify().unwrap().ok());
    }
    assert_eq!(keys_tagged(dir.path(), b'F'), 0, "the open deleted them");
}

/// Keys of the store's table `t` with frozen history, as its cold statistics count them.
fn frozen_keys(store: &Store) -> u64 {
    store.read("t", |r| r.cold_stats().frozen_keys).unwrap()
}

/// Rows of `n` 4 KiB values that do not compress (a xorshift stream from `seed`), numbered from
/// `first`: 24 MiB of chunks for 6,000 rows, over the 16 MiB a source write holds in memory.
fn incompressible_rows(first: i64, n: usize, seed: u64) -> arrow::record_batch::RecordBatch {
    use arrow::array::{BinaryArray, Int64Array};
    use arrow::datatypes::{DataType, Field, Schema};
    let mut x = seed | 1;
    let values: Vec<Vec<u8>> = (0..n)
        .map(|_| {
            (0..4096 / 8)
                .flat_map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x.to_le_bytes()
                })
                .collect()
        })
        .collect();
    let schema = Arc::new(Schema::new(vec![
        Field::new("n", DataType::Int64, false),
        Field::new("blob", DataType::Binary, false),
    ]));
    arrow::record_batch::RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from_iter_values(first..first + n as i64)),
            Arc::new(BinaryArray::from_iter_values(values.iter())),
        ],
    )
    .unwrap()
}

/// The numbers and a digest of the values of every row of source `s`, in order.
fn source_contents(store: &Store, s: &str) -> (Vec<i64>, u64) {
    use arrow::array::{Array, BinaryArray, Int64Array};
    use std::hash::{Hash, Hasher};
    let mut numbers = Vec::new();
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for b in store.source_rows(s, asof::SourceRead::Now).unwrap() {
        let b = b.unwrap();
        let n = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
        let v = b.column(1).as_any().downcast_ref::<BinaryArray>().unwrap();
        numbers.extend(n.values().iter().copied());
        for i in 0..v.len() {
            v.value(i).hash(&mut h);
        }
    }
    (numbers, h.finish())
}

/// A statement's source rows over 16 MiB are written ahead of its commit record, in batches of
/// their own (`store/sources.rs`, `write_ahead`). Stopped at any of those writes, a reopen gives
/// the source as acknowledged, its chunks past it deleted, and the write applies again.
#[test]
fn a_large_append_stopped_at_any_of_its_writes_leaves_the_source_as_acknowledged() {
    let small = incompressible_rows(0, 10, 1);
    let large = incompressible_rows(10, 6_000, 2);
    let mut stops = 0;
    for n in 1.. {
        let dir = tempfile::tempdir().unwrap();
        let before = {
            let store = Store::open(dir.path()).unwrap();
            store.create_source("s", &small.schema()).unwrap();
            store.append("s", &small).unwrap();
            source_contents(&store, "s")
        };
        let chunks = keys_tagged(dir.path(), b'A');
        {
            let (store, fail) = failing_store(dir.path(), asof::StoreOptions::default());
            fail.store(n, Ordering::SeqCst);
            let mut w = store.begin_append("s").unwrap();
            w.push(&large).unwrap();
            match store.commit_write(w, None) {
                Ok(rows) => {
                    assert_eq!(rows, 6_010);
                    assert!(n > 2, "the rows took more than one write");
                    let all = source_contents(&store, "s").0;
                    assert_eq!(all, (0..6_010).collect::<Vec<_>>());
                    assert_eq!(store.source_history("s").unwrap().len(), 3);
                    assert!(store.verify().unwrap().ok());
                    break;
                }
                Err(e) => assert!(e.to_string().contains("disk full"), "write {n}: {e}"),
            }
            stops += 1;
            // What was written ahead stays until the store is reopened, which it must be.
            assert!(matches!(store.append("s", &small), Err(Error::Poisoned(_))));
        }
        {
            let store = Store::open(dir.path()).unwrap();
            assert_eq!(source_contents(&store, "s"), before, "write {n}");
            assert_eq!(store.source_history("s").unwrap().len(), 2, "write {n}");
            assert!(store.verify().unwrap().ok(), "write {n}");
        }
        assert_eq!(keys_tagged(dir.path(), b'A'), chunks, "write {n}");
        let store = Store::open(dir.path()).unwrap();
        let mut w = store.begin_append("s").unwrap();
        w.push(&large).unwrap();
        assert_eq!(store.commit_write(w, None).unwrap(), 6_010);
        let all = source_contents(&store, "s").0;
        assert_eq!(all, (0..6_010).collect::<Vec<_>>(), "write {n}");
    }
    assert_eq!(stops, 2, "one batch ahead of the one with the record");
}

/// A `CREATE TABLE ... AS SELECT` whose rows were written ahead and that stopped before its
/// record leaves no table and no chunk after a reopen, and the table can be created again.
#[test]
fn a_large_create_table_as_select_stopped_before_its_record_leaves_nothing() {
    let large = incompressible_rows(0, 6_000, 3);
    let dir = tempfile::tempdir().unwrap();
    {
        let (store, fail) = failing_store(dir.path(), asof::StoreOptions::default());
        // The last write, with the record, fails: the one ahead of it is there.
        fail.store(2, Ordering::SeqCst);
        let mut w = store
            .begin_create_source("s", &large.schema(), None)
            .unwrap();
        w.push(&large).unwrap();
        let e = store.commit_write(w, None).unwrap_err();
        assert!(e.to_string().contains("disk full"), "{e}");
    }
    assert!(
        keys_tagged(dir.path(), b'A') > 0,
        "the first batch was written"
    );
    {
        let store = Store::open(dir.path()).unwrap();
        assert!(store.source_rows("s", asof::SourceRead::Now).is_err());
    }
    assert_eq!(
        keys_tagged(dir.path(), b'A'),
        0,
        "the open deleted its chunks"
    );
    let store = Store::open(dir.path()).unwrap();
    let mut w = store
        .begin_create_source("s", &large.schema(), None)
        .unwrap();
    w.push(&large).unwrap();
    assert_eq!(store.commit_write(w, None).unwrap(), 6_000);
    let all = source_contents(&store, "s").0;
    assert_eq!(all, (0..6_000).collect::<Vec<_>>());
    assert!(store.verify().unwrap().ok());
}

/// A file's rows loaded under its name (`Store::append_loaded`, what a `read_files` flow does)
/// whose chunks were written ahead and whose record failed: after the reopen the name is not
/// taken (the file would otherwise never be loaded again), and loading it again works.
#[test]
fn a_large_file_stopped_before_its_record_is_not_counted_as_loaded() {
    let large = incompressible_rows(0, 6_000, 4);
    let dir = tempfile::tempdir().unwrap();
    {
        let store = Store::open(dir.path()).unwrap();
        store.create_source("s", &large.schema()).unwrap();
    }
    {
        let (store, fail) = failing_store(dir.path(), asof::StoreOptions::default());
        fail.store(2, Ordering::SeqCst);
        let e = store.append_loaded("s", &large, "big.parquet").unwrap_err();
        assert!(e.to_string().contains("disk full"), "{e}");
    }
    assert_eq!(
        keys_tagged(dir.path(), b'L'),
        0,
        "the name goes with the record"
    );
    let store = Store::open(dir.path()).unwrap();
    assert!(store.source_origin("s").unwrap().1.is_empty());
    assert_eq!(
        store.append_loaded("s", &large, "big.parquet").unwrap(),
        6_000
    );
    assert!(store.source_origin("s").unwrap().1.contains("big.parquet"));
    assert!(store.verify().unwrap().ok());
}

/// A DROP stopped after its first batch (the catalog record goes, and a record that the table is
/// being dropped comes) leaves the table gone: the next open deletes the rest of its records,
/// and a new table of its name starts empty.
#[test]
fn a_drop_stopped_after_its_catalog_record_is_finished_by_the_next_open() {
    let dir = tempfile::tempdir().unwrap();
    let make = "CREATE TABLE ev (id INT, v STRING, seq INT);
        INSERT INTO ev VALUES (1, 'a', 1), (2, 'b', 1);
        CREATE OR REFRESH STREAMING TABLE t FLOW AUTO CDC FROM stream(ev) KEYS (id)
          SEQUENCE BY seq STORED AS SCD TYPE 2";
    asof::SqlSession::new(Store::open(dir.path()).unwrap())
        .unwrap()
        .execute(make)
        .unwrap();
    // The table first (the source feeds it), then the source: their commit records.
    for (name, tag) in [("t", b'C'), ("ev", b'H')] {
        {
            let (store, fail) = failing_store(dir.path(), asof::StoreOptions::default());
            fail.store(2, Ordering::SeqCst);
            let e = store.drop_table(name).unwrap_err();
            assert!(e.to_string().contains("disk full"), "{e}");
            assert!(store.drop_table(name).is_err(), "poisoned until reopened");
        }
        assert_eq!(keys_tagged(dir.path(), b'D'), 1, "{name} is being dropped");
        assert!(
            keys_tagged(dir.path(), tag) > 0,
            "{name}'s commits are still there"
        );
        {
            let store = Store::open(dir.path()).unwrap();
            assert!(!store.tables().unwrap().iter().any(|t| t == name));
            assert!(!store.sources().unwrap().iter().any(|t| t == name));
        }
        assert_eq!(keys_tagged(dir.path(), b'D'), 0, "{name}'s drop finished");
        assert_eq!(keys_tagged(dir.path(), tag), 0, "{name}'s commits are gone");
    }
    for tag in [b'T', b'S', b'E', b'K', b'A'] {
        assert_eq!(
            keys_tagged(dir.path(), tag),
            0,
            "records tagged {}",
            tag as char
        );
    }
    let mut s = asof::SqlSession::new(Store::open(dir.path()).unwrap()).unwrap();
    s.execute(&make.replace("(1, 'a', 1), (2, 'b', 1)", "(3, 'c', 1)"))
        .unwrap();
    assert_eq!(
        common::sorted_sql_rows(&mut s, "SELECT id, v FROM t"),
        [common::cells(&["3", "c"])]
    );
    assert!(s.store().verify().unwrap().ok());
}

/// A copy of the folder `from` (a closed store) at `to`.
fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// An erasure stopped at any of its writes is finished by the next open, or was never begun: the
/// intent first (a stop before it leaves the keys), then the blocks and chunks in batches of 64,
/// then the batch of the `ERASE` commit, then the rebuild. Reopened, the table and its source
/// are those of an erasure never stopped, the chains verify, and no intent is left.
#[test]
fn an_erasure_stopped_at_any_write_is_finished_by_the_next_open() {
    let built = tempfile::tempdir().unwrap();
    {
        let mut s = asof::SqlSession::new(Store::open(built.path()).unwrap()).unwrap();
        // Key 1 in 100 commits and 100 appends: 200 records to rewrite, four batches.
        common::key_in_every_commit(&mut s, 100);
    }
    let queries = ["SELECT * FROM t", "SELECT * FROM src"];
    let read = |dir: &std::path::Path| -> Vec<Vec<Vec<Option<String>>>> {
        let mut s = asof::SqlSession::new(Store::open(dir).unwrap()).unwrap();
        let rows = queries
            .iter()
            .map(|q| common::sorted(common::sql_rows(&mut s, q).1))
            .collect();
        let report = s.store().verify().unwrap();
        assert!(report.ok(), "{report:?}");
        rows
    };
    let before = read(built.path());
    let erase = "ERASE FROM t WHERE id = 1 REASON 'test'";
    let after = {
        let dir = tempfile::tempdir().unwrap();
        copy_dir(built.path(), dir.path());
        asof::SqlSession::new(Store::open(dir.path()).unwrap())
            .unwrap()
            .execute(erase)
            .unwrap();
        read(dir.path())
    };
    assert_ne!(before, after);
    assert!(after[0].iter().all(|r| r[0].as_deref() == Some("2")));
    let mut stopped = 0;
    for n in 1.. {
        let dir = tempfile::tempdir().unwrap();
        copy_dir(built.path(), dir.path());
        let failed = {
            let (store, fail) = failing_store(dir.path(), asof::StoreOptions::default());
            let mut s = asof::SqlSession::new(store).unwrap();
            fail.store(n, Ordering::SeqCst);
            let r = s.execute(erase);
            fail.store(0, Ordering::SeqCst);
            r.is_err()
        };
        let intent_left = keys_tagged(dir.path(), b'Z') == 1;
        // Stopped at its first write, the erasure never began; at its second, its intent is left.
        match n {
            1 => assert!(failed && !intent_left),
            2 => assert!(failed && intent_left),
            _ => {}
        }
        let rows = read(dir.path());
        let expected = if n == 1 { &before } else { &after };
        assert_eq!(&rows, expected, "stopped at write {n}");
        assert_eq!(keys_tagged(dir.path(), b'Z'), 0, "stopped at write {n}");
        if !failed {
            break;
        }
        stopped += 1;
    }
    // The intent, four batches of rewrites, the `ERASE` commit, and the rebuild's writes.
    assert!(stopped >= 6, "{stopped}");

    // An intent planned on other commits than the store has (a binary that knows no intent
    // wrote meanwhile) is not carried out: the open says so.
    let dir = tempfile::tempdir().unwrap();
    copy_dir(built.path(), dir.path());
    {
        let (store, fail) = failing_store(dir.path(), asof::StoreOptions::default());
        fail.store(2, Ordering::SeqCst);
        asof::SqlSession::new(store)
            .unwrap()
            .execute(erase)
            .unwrap_err();
    }
    {
        let kv = SledKv::open(dir.path(), 1 << 20).unwrap();
        let (k, v) = kv.scan_prefix(b"Z").next().unwrap().unwrap();
        let mut intent: serde_json::Value = serde_json::from_slice(&v).unwrap();
        let version = intent["version"].as_u64().unwrap();
        intent["version"] = (version + 1).into();
        let mut b = WriteBatch::default();
        b.put(k, serde_json::to_vec(&intent).unwrap());
        kv.write(b).unwrap();
    }
    let Err(e) = Store::open(dir.path()) else {
        panic!("an intent that does not fit the store was carried out")
    };
    assert!(e.to_string().contains("cannot be finished"), "{e}");
}
