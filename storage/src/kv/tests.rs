//! Tests of the key-value layer's read cache as the layers above use it.

use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;

/// A decoder that counts its calls: the value's length and first byte.
fn counted(calls: &AtomicUsize) -> impl Fn(&[u8]) -> Result<((usize, u8), u64)> + '_ {
    move |v| {
        calls.fetch_add(1, Ordering::Relaxed);
        Ok(((v.len(), v[0]), v.len() as u64))
    }
}

fn put(kv: &SledKv, key: &[u8], value: Vec<u8>) {
    let mut b = WriteBatch::default();
    b.put(key.to_vec(), value);
    kv.write(b).unwrap();
}

/// A value of the log is kept on its second read, then shared; a small value (in sled) is
/// decoded at every read; a key written again, deleted, or purged reads as it is now, never as
/// kept.
#[test]
fn a_decoded_value_is_kept_by_its_record_and_never_outlives_its_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let kv = SledKv::open(dir.path(), 1 << 20)
        .unwrap()
        .with_read_cache(1 << 20);
    let calls = AtomicUsize::new(0);
    let read = |key: &[u8]| get_decoded(&kv, key, counted(&calls)).unwrap();
    put(&kv, b"big", vec![1; 1000]);
    put(&kv, b"small", vec![2; 10]);
    let first = read(b"big").unwrap();
    assert_eq!(kv.decoded.weight(), 0, "read once: not kept");
    let second = read(b"big").unwrap();
    let third = read(b"big").unwrap();
    assert_eq!(*first, (1000, 1));
    assert!(!Arc::ptr_eq(&first, &second));
    assert!(Arc::ptr_eq(&second, &third));
    assert_eq!(calls.load(Ordering::Relaxed), 2);
    for _ in 0..3 {
        assert_eq!(*read(b"small").unwrap(), (10, 2));
    }
    assert_eq!(calls.load(Ordering::Relaxed), 5);
    assert_eq!(kv.decoded.weight(), 1000);

    put(&kv, b"big", vec![3; 2000]);
    assert_eq!(*read(b"big").unwrap(), (2000, 3));
    assert_eq!(*read(b"big").unwrap(), (2000, 3));
    assert_eq!(calls.load(Ordering::Relaxed), 7);
    let mut b = WriteBatch::default();
    b.delete(b"big".to_vec());
    kv.write(b).unwrap();
    assert_eq!(read(b"big"), None);

    put(&kv, b"other", vec![4; 500]);
    assert_eq!(*read(b"other").unwrap(), (500, 4));
    assert_eq!(*read(b"other").unwrap(), (500, 4));
    kv.purge().unwrap();
    assert_eq!(kv.decoded.weight(), 0);
    // The purge forgot what was read once too: kept on the second read after it, not the first.
    assert_eq!(*read(b"other").unwrap(), (500, 4));
    assert_eq!(kv.decoded.weight(), 0);
    assert_eq!(*read(b"other").unwrap(), (500, 4));
    assert_eq!(kv.decoded.weight(), 500);
    assert_eq!(calls.load(Ordering::Relaxed), 11);
}

/// The doorkeeper remembers a bounded number of values read once: past it, it forgets them all,
/// and a value is then kept only when read twice since.
#[test]
fn values_read_once_are_remembered_up_to_a_bound_then_forgotten() {
    let dir = tempfile::tempdir().unwrap();
    // Sized for 16 entries: it remembers 64 values read once.
    let kv = SledKv::open(dir.path(), 1 << 20)
        .unwrap()
        .with_read_cache(64 << 10);
    let calls = AtomicUsize::new(0);
    let read = |key: &[u8]| get_decoded(&kv, key, counted(&calls)).unwrap();
    let key = |i: usize| format!("k{i:03}").into_bytes();
    for i in 0..66 {
        put(&kv, &key(i), vec![i as u8; 600]);
    }
    for i in 0..64 {
        read(&key(i));
    }
    assert_eq!(kv.decoded.weight(), 0);
    // Value 0 read again: remembered, kept (and no longer remembered as read once).
    read(&key(0));
    assert_eq!(kv.decoded.weight(), 600);
    // 1..=64 fill the bound; 65 finds it full: everything read once is forgotten.
    read(&key(64));
    read(&key(65));
    read(&key(1));
    assert_eq!(kv.decoded.weight(), 600, "1 was forgotten: read once again");
    read(&key(65));
    assert_eq!(kv.decoded.weight(), 1200, "65 was remembered");
    assert_eq!(calls.load(Ordering::Relaxed), 69);
}

/// What a scan reads: `(key, Some(first byte) if kept, whether it may be kept)`; each value
/// read is kept as its first byte when it may be.
fn scan_kept(kv: &SledKv) -> Vec<(Vec<u8>, Option<u8>, bool)> {
    let kind = TypeId::of::<u8>();
    kv.scan_prefix_from_kept(b"k", b"k", kind, Keeping::Admitted)
        .map(|r| match r.unwrap() {
            (k, Scanned::Kept(v)) => (k, Some(*downcast::<u8>(v).unwrap()), false),
            (k, Scanned::Read(v, at)) => {
                if let Some(at) = at {
                    kv.keep_decoded(at, kind, Arc::new(v[0]), v.len() as u64);
                }
                (k, None, at.is_some())
            }
        })
        .collect()
}

/// A scan finds kept what an earlier scan decoded of the log's values, and reads the rest;
/// a value written again is read again, and what a scan read before a purge is not kept
/// after it (the purge cleared the cache, so erased values leave memory).
#[test]
fn a_scan_finds_what_an_earlier_scan_kept_and_never_keeps_across_a_purge() {
    let dir = tempfile::tempdir().unwrap();
    let kv = SledKv::open(dir.path(), 1 << 20)
        .unwrap()
        .with_read_cache(1 << 20);
    put(&kv, b"k1", vec![1; 1000]);
    put(&kv, b"k2", vec![2; 10]);
    put(&kv, b"k3", vec![3; 1000]);
    let (k1, k2, k3) = (b"k1".to_vec(), b"k2".to_vec(), b"k3".to_vec());
    // A scan that keeps nothing is offered no place, and its reads do not count.
    for _ in 0..2 {
        let read = kv.scan_prefix_from_kept(b"k", b"k", TypeId::of::<u8>(), Keeping::Nothing);
        assert!(read
            .map(Result::unwrap)
            .all(|(_, v)| matches!(v, Scanned::Read(_, None))));
    }
    // The first scan's values are read once: not offered a place; the second's are, and kept.
    // (k2 is held in sled itself: never kept.)
    let first = vec![
        (k1.clone(), None, false),
        (k2.clone(), None, false),
        (k3.clone(), None, false),
    ];
    assert_eq!(scan_kept(&kv), first);
    assert_eq!(kv.decoded.weight(), 0);
    let second = vec![
        (k1.clone(), None, true),
        (k2.clone(), None, false),
        (k3.clone(), None, true),
    ];
    assert_eq!(scan_kept(&kv), second);
    assert_eq!(kv.decoded.weight(), 2000);
    assert_eq!(
        scan_kept(&kv),
        vec![
            (k1.clone(), Some(1), false),
            (k2.clone(), None, false),
            (k3.clone(), Some(3), false)
        ]
    );
    put(&kv, b"k3", vec![4; 1000]);
    assert_eq!(scan_kept(&kv)[2], (k3.clone(), None, false));
    assert_eq!(scan_kept(&kv)[2], (k3.clone(), None, true));
    assert_eq!(scan_kept(&kv)[2], (k3.clone(), Some(4), false));

    // Read (the second time) before the purge, offered after it: not kept.
    let u16_scan = || kv.scan_prefix_from_kept(b"k", b"k", TypeId::of::<u16>(), Keeping::Admitted);
    assert_eq!(u16_scan().count(), 3);
    let mut read = u16_scan();
    let Some(Ok((_, Scanned::Read(_, Some(at))))) = read.next() else {
        panic!("k1 read from the log a second time");
    };
    drop(read);
    kv.purge().unwrap();
    kv.keep_decoded(at, TypeId::of::<u16>(), Arc::new(7u16), 1000);
    assert_eq!(kv.decoded.weight(), 0);
    // The purge forgot what was read once, too.
    assert_eq!(scan_kept(&kv)[0], (k1.clone(), None, false));
    assert_eq!(scan_kept(&kv)[0], (k1, None, true));
}

/// Without a read cache every read decodes.
#[test]
fn with_no_read_cache_every_read_decodes() {
    let dir = tempfile::tempdir().unwrap();
    let kv = SledKv::open(dir.path(), 1 << 20).unwrap();
    let calls = AtomicUsize::new(0);
    put(&kv, b"big", vec![1; 1000]);
    for _ in 0..3 {
        let v = get_decoded(&kv, b"big", counted(&calls)).unwrap();
        assert_eq!(*v.unwrap(), (1000, 1));
    }
    assert_eq!(calls.load(Ordering::Relaxed), 3);
}

/// A value a compaction moves to another segment is read from there: the entry of its old
/// record is never handed out for it.
#[test]
fn a_value_moved_by_a_compaction_is_read_where_it_is_now() {
    let dir = tempfile::tempdir().unwrap();
    // Large enough that a shard of the cache takes a value of 12 MiB.
    let kv = SledKv::open(dir.path(), 1 << 20)
        .unwrap()
        .with_read_cache(1 << 30);
    let calls = AtomicUsize::new(0);
    // Segment 0 holds all three (a segment takes appends until one ends past 32 MiB).
    for (k, b) in [(b"a", 1), (b"b", 2), (b"c", 3)] {
        put(&kv, k, mib(12, b));
    }
    // Read twice: kept under its record in segment 0.
    for _ in 0..2 {
        assert_eq!(
            *get_decoded(&kv, b"c", counted(&calls)).unwrap().unwrap(),
            (12 << 20, 3)
        );
    }
    assert_eq!(kv.decoded.weight(), 12 << 20);
    let before = kv.db().unwrap().get(b"c").unwrap().unwrap();
    // Two of its three values written again: it is more than half dead, and the next write
    // moves `c` out of it.
    put(&kv, b"a", mib(1, 4));
    put(&kv, b"b", mib(1, 5));
    put(&kv, b"d", mib(1, 6));
    let after = kv.db().unwrap().get(b"c").unwrap().unwrap();
    assert_ne!(before, after, "the compaction moved c");
    assert_eq!(
        *get_decoded(&kv, b"c", counted(&calls)).unwrap().unwrap(),
        (12 << 20, 3)
    );
    assert_eq!(calls.load(Ordering::Relaxed), 3);
}

/// Several keys read in one pass answer as a get of each: values in sled and in the log, keys
/// missing before, between and after those held, pairs between them not asked for, and keys
/// out of order (read one by one).
#[test]
fn keys_read_in_one_pass_answer_as_a_get_of_each() {
    let dir = tempfile::tempdir().unwrap();
    let kv = SledKv::open(dir.path(), 1 << 20).unwrap();
    for i in [2u8, 3, 5, 6, 8] {
        let len = if i % 2 == 0 { 1000 } else { 10 };
        put(&kv, &[b'p', i], vec![i; len]);
    }
    put(&kv, b"q", vec![9; 1000]);
    let get_each = |keys: &[Vec<u8>]| -> Vec<Option<Vec<u8>>> {
        keys.iter().map(|k| kv.get(k).unwrap()).collect()
    };
    let k = |i: u8| vec![b'p', i];
    for keys in [
        vec![k(1), k(2), k(3), k(4), k(6), k(9)],
        vec![k(2), k(5), k(8)],
        vec![k(0), k(1)],
        vec![k(3), k(8), b"q".to_vec(), b"r".to_vec()],
        vec![k(8), k(2), k(5)],
        vec![],
    ] {
        let many = kv.get_many(&keys).unwrap();
        assert_eq!(many, get_each(&keys), "{keys:?}");
    }
    assert_eq!(
        kv.get_many(&[k(2), k(4), k(6)]).unwrap(),
        vec![Some(vec![2; 1000]), None, Some(vec![6; 1000])]
    );
}

/// The leading parts of values read in one pass are the values cut, in sled or in the log, a
/// part longer than its value being the whole value; keys out of order are read one by one.
#[test]
fn leading_parts_read_in_one_pass_are_the_values_cut() {
    let dir = tempfile::tempdir().unwrap();
    let kv = SledKv::open(dir.path(), 1 << 20).unwrap();
    let value = |i: u8| -> Vec<u8> {
        (0..if i.is_multiple_of(2) { 1000 } else { 10 })
            .map(|j| i ^ j as u8)
            .collect()
    };
    for i in [2u8, 3, 5, 6, 8] {
        put(&kv, &[b'p', i], value(i));
    }
    let k = |i: u8| vec![b'p', i];
    for (keys, leading) in [
        (vec![k(2), k(3), k(4), k(6)], vec![100, 4, 7, 2000]),
        (vec![k(2), k(5), k(8)], vec![0, 10, 999]),
        (vec![k(8), k(2), k(5)], vec![1, 1000, 3]),
    ] {
        let cut: Vec<Option<Leading>> = (keys.iter().zip(&leading))
            .map(|(key, &n)| {
                let v = kv.get(key).unwrap()?;
                Some((v[..v.len().min(n as usize)].to_vec(), v.len() as u64))
            })
            .collect();
        assert_eq!(
            kv.get_many_leading(&keys, &leading).unwrap(),
            cut,
            "{keys:?}"
        );
    }
}

/// A read of a value's leading part checks the record's key and lengths, not its checksum, which
/// covers the whole record: a byte changed past the part is found by a read of the whole value
/// only (a page's row part, what such reads are for, carries a checksum of its own).
#[test]
fn a_leading_part_is_read_without_the_checksum_of_the_whole_record() {
    let dir = tempfile::tempdir().unwrap();
    let kv = SledKv::open(dir.path(), 1 << 20).unwrap();
    let v: Vec<u8> = (0..1000).map(|i| i as u8).collect();
    put(&kv, b"k", v.clone());
    let held = kv.db().unwrap().get(b"k").unwrap().unwrap();
    let Stored::Logged(p) = stored(&held).unwrap() else {
        panic!("a value of 1000 bytes is in the log");
    };
    let last = p.offset + crate::format::value_log::record_len(1, p.len as usize) - 1;
    let path = kv.values().unwrap().path(p.segment);
    let file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&file, &[v[999] ^ 0xff], last).unwrap();
    drop(file);
    assert_eq!(
        kv.get_many_leading(&[b"k".to_vec()], &[100]).unwrap(),
        vec![Some((v[..100].to_vec(), 1000))]
    );
    assert!(matches!(kv.get(b"k"), Err(Error::Corrupt(_))));
}

/// `n` MiB of byte `b`.
fn mib(n: usize, b: u8) -> Vec<u8> {
    vec![b; n << 20]
}

/// The value log's segment files in the store in `dir`, by name.
fn segment_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir.join(values::DIR))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Five values of 7 MiB (`a` to `e`, segment 0: the fifth ends past 32 MiB), then `a` and `b`
/// written again and `f` (1 MiB each, segment 1): segment 0 is two fifths dead, under the half
/// a write compacts.
fn two_fifths_dead(kv: &SledKv) {
    for (k, b) in [(b"a", 1), (b"b", 2), (b"c", 3), (b"d", 4), (b"e", 5)] {
        put(kv, k, mib(7, b));
    }
    let mut b = WriteBatch::default();
    b.put(b"a".to_vec(), mib(1, 6));
    b.put(b"b".to_vec(), mib(1, 7));
    kv.write(b).unwrap();
    put(kv, b"f", mib(1, 8));
}

/// What the last write left more than half dead is compacted by [`KvStore::reclaim`] (a store
/// closed in order calls it), not left for a next write that may never come.
#[test]
fn a_segment_the_last_write_left_half_dead_is_compacted_by_reclaim() {
    let dir = tempfile::tempdir().unwrap();
    let segment_files = || segment_files(dir.path());
    {
        let kv = SledKv::open(dir.path(), 1 << 20).unwrap();
        // Segment 0 holds all three (a segment takes appends until one ends past 32 MiB).
        for (k, b) in [(b"a", 1), (b"b", 2), (b"c", 3)] {
            put(&kv, k, mib(12, b));
        }
        // Two of them written again, in segment 1: segment 0 is two thirds dead.
        let mut b = WriteBatch::default();
        b.put(b"a".to_vec(), mib(1, 4));
        b.put(b"b".to_vec(), mib(1, 5));
        kv.write(b).unwrap();
        assert_eq!(segment_files(), ["00000000.vlog", "00000001.vlog"]);
        kv.reclaim().unwrap();
        assert_eq!(
            segment_files(),
            ["00000001.vlog"],
            "c moved, segment 0 removed"
        );
        // Nothing left to do: a second call changes nothing.
        kv.reclaim().unwrap();
        assert_eq!(segment_files(), ["00000001.vlog"]);
    }
    let kv = SledKv::open(dir.path(), 1 << 20).unwrap();
    for (k, want) in [(b"a", mib(1, 4)), (b"b", mib(1, 5)), (b"c", mib(12, 3))] {
        assert_eq!(kv.get(k).unwrap(), Some(want));
    }
}

/// A segment that writes left between a quarter and half dead stays so while writes go on (a
/// write compacts only what is half dead), and [`KvStore::reclaim`] compacts it.
#[test]
fn a_segment_less_than_half_dead_stays_until_reclaim_compacts_it() {
    let dir = tempfile::tempdir().unwrap();
    let kv = SledKv::open(dir.path(), 1 << 20).unwrap();
    two_fifths_dead(&kv);
    // The writes after the rewrite (`f`) left it.
    assert_eq!(
        segment_files(dir.path()),
        ["00000000.vlog", "00000001.vlog"]
    );
    kv.reclaim().unwrap();
    assert_eq!(segment_files(dir.path()), ["00000001.vlog"]);
    let want = [
        (b"a", mib(1, 6)),
        (b"b", mib(1, 7)),
        (b"c", mib(7, 3)),
        (b"d", mib(7, 4)),
        (b"e", mib(7, 5)),
        (b"f", mib(1, 8)),
    ];
    for (k, v) in &want {
        assert_eq!(kv.get(*k).unwrap().as_ref(), Some(v));
    }
}

/// A handle that only read leaves the files as it found them, however dead a segment is.
#[test]
fn reclaim_by_a_handle_that_only_read_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    two_fifths_dead(&SledKv::open(dir.path(), 1 << 20).unwrap());
    let kv = SledKv::open(dir.path(), 1 << 20).unwrap();
    assert_eq!(kv.get(b"c").unwrap(), Some(mib(7, 3)));
    kv.reclaim().unwrap();
    assert_eq!(
        segment_files(dir.path()),
        ["00000000.vlog", "00000001.vlog"],
        "a reader compacted nothing"
    );
}
