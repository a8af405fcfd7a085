//! Keys in sled, large values beside it: how a batch is split between sled and the value log
//! (`kv/values.rs`), how a value is read back, and how a segment that is mostly dead is
//! compacted. sled holds each key with either its value (under
//! [`SEPARATE_AT`](crate::format::value_log::SEPARATE_AT) bytes) or a pointer to its record in
//! the log (FORMAT.md §5.3).
//!
//! Every function here runs with writes serialised by the caller ([`super::SledKv`] holds its
//! manifest's lock): a compaction decides which records are live and moves them without another
//! write in between.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::values::{Found, Part, ValueLog};
use crate::error::{corrupt, Error, Result};
use crate::format::value_log::{
    counts, end, inline, parse_counts, parse_end, parse_segment_key, pointer, record_len,
    segment_key, stored, Stored, END_KEY, LAYOUT, LAYOUT_KEY, OWN_PREFIX, SEGMENT_PREFIX,
    SEPARATE_AT,
};

/// One key's operation: `Some(value)` puts, `None` deletes.
pub(super) type Op = (Vec<u8>, Option<Vec<u8>>);

/// Whether `key` is one of the key-value layer's own records, which no scan returns.
pub(super) fn is_own(key: &[u8]) -> bool {
    key.first() == Some(&OWN_PREFIX)
}

/// Opens the value log of the store in `dir` whose sled database is `db`. A new (empty) database
/// is marked as one whose values are kept this way ([`LAYOUT_KEY`]); one with data and without
/// the mark holds its values in sled (sled's files from before the value log beside a `values/`
/// folder), and is refused rather than read wrong.
pub(super) fn open_log(dir: &std::path::Path, db: &sled::Db) -> Result<ValueLog> {
    if db.get(LAYOUT_KEY)?.is_none() {
        if db.first()?.is_some() {
            return Err(Error::Corrupt(format!(
                "the store in {} has a `values/` folder, and sled's files are of a store written before the value log",
                dir.display()
            )));
        }
        db.insert(LAYOUT_KEY, LAYOUT)?;
        db.flush()?;
    }
    let end = db.get(END_KEY)?.map(|v| parse_end(&v)).transpose()?;
    let live: BTreeSet<u32> = segments(db)?.into_iter().collect();
    ValueLog::open(dir, end, &live)
}

/// Makes the empty log of a new store (a purge's copy) start at segment `first`.
pub(super) fn start_at(db: &sled::Db, log: &ValueLog, first: u32) -> Result<()> {
    db.insert(END_KEY, end(first, 0))?;
    db.flush()?;
    log.start_at(first)
}

/// The segments the tree has counts for: those holding records it may point to.
pub(super) fn segments(db: &sled::Db) -> Result<Vec<u32>> {
    let mut out = Vec::new();
    for k in db.scan_prefix(SEGMENT_PREFIX).keys() {
        out.extend(parse_segment_key(&k?));
    }
    Ok(out)
}

/// Each segment the tree has counts for, with the part of its bytes that is dead.
pub(super) fn dead_fractions(db: &sled::Db) -> Result<Vec<(u32, f64)>> {
    let mut out = Vec::new();
    for segment in segments(db)? {
        if let Some(v) = db.get(segment_key(segment))? {
            let (written, dead) = parse_counts(&v)?;
            out.push((segment, dead as f64 / written.max(1) as f64));
        }
    }
    Ok(out)
}

/// The value sled holds as `held` for `key`: inline, or read from the log (`None` when the log
/// no longer has it where the pointer says: see [`Found::Moved`]).
pub(super) fn value(log: &ValueLog, key: &[u8], held: &[u8]) -> Result<Option<Vec<u8>>> {
    Ok(value_part(log, key, held, Part::Whole)?.map(|(v, _)| v))
}

/// [`value`], only `part` of it, with the length of the whole value.
pub(super) fn value_part(
    log: &ValueLog,
    key: &[u8],
    held: &[u8],
    part: Part,
) -> Result<Option<(Vec<u8>, u64)>> {
    match (stored(held)?, part) {
        (Stored::Inline(v), Part::Whole) => Ok(Some((v.to_vec(), v.len() as u64))),
        (Stored::Inline(v), Part::Leading(n)) => Ok(Some((
            v[..v.len().min(n as usize)].to_vec(),
            v.len() as u64,
        ))),
        (Stored::Logged(p), part) => match log.read_part(p, key, part)? {
            Found::Value(v) => Ok(Some((v, u64::from(p.len)))),
            Found::Moved => Ok(None),
        },
    }
}

/// Applies `ops` (the last of a key's wins) atomically and durably: the large values appended to
/// the log and synced, then one sled batch with their pointers, the small values, the log's new
/// end and the counts of the segments it touched, then sled flushed. The counts of the segments
/// in `retire` (being compacted) are removed instead. Returns the segments that gained dead
/// bytes.
pub(super) fn apply(
    db: &sled::Db,
    log: &ValueLog,
    ops: Vec<Op>,
    retire: &[u32],
) -> Result<Vec<u32>> {
    apply_streamed(db, log, &mut std::iter::empty(), ops, retire)
}

/// [`apply`], with the puts `more` yields applied first, in the same sled batch: their values go
/// to the log as they come (written a few MiB at a time) and are never held together. Their keys
/// must be in no op of `ops`.
pub(super) fn apply_streamed(
    db: &sled::Db,
    log: &ValueLog,
    more: &mut dyn Iterator<Item = Result<(Vec<u8>, Vec<u8>)>>,
    ops: Vec<Op>,
    retire: &[u32],
) -> Result<Vec<u32>> {
    let mut last: HashMap<&[u8], usize> = HashMap::with_capacity(ops.len());
    for (i, (k, _)) in ops.iter().enumerate() {
        last.insert(k, i);
    }
    let keep: Vec<bool> = (0..ops.len())
        .map(|i| last.get(ops[i].0.as_slice()) == Some(&i))
        .collect();
    drop(last);
    // (written, dead) bytes each touched segment gains.
    let mut gained: BTreeMap<u32, (u64, u64)> = BTreeMap::new();
    let mut appending = log.begin()?;
    let mut batch = sled::Batch::default();
    let streamed = more.map(|pair| pair.map(|(k, v)| ((k, Some(v)), true)));
    let listed = ops.into_iter().zip(keep).map(Ok);
    for op in streamed.chain(listed) {
        let ((k, v), keep) = op?;
        if !keep {
            continue;
        }
        if let Some(old) = db.get(&k)? {
            if let Stored::Logged(p) = stored(&old)? {
                if !retire.contains(&p.segment) {
                    gained.entry(p.segment).or_default().1 += record_len(k.len(), p.len as usize);
                }
            }
        }
        match v {
            Some(v) if v.len() >= SEPARATE_AT => {
                let p = appending.push(&k, &v)?;
                gained.entry(p.segment).or_default().0 += record_len(k.len(), v.len());
                batch.insert(k, pointer(p));
            }
            Some(v) => batch.insert(k, inline(&v)),
            None => batch.remove(k),
        }
    }
    if appending.bytes() > 0 {
        let (segment, offset) = log.append(appending)?;
        batch.insert(END_KEY, end(segment, offset));
    }
    let mut dead = Vec::new();
    for (&segment, &(written, died)) in &gained {
        let key = segment_key(segment);
        let (w, d) = match db.get(&key)? {
            Some(v) => parse_counts(&v)?,
            None => (0, 0),
        };
        let (Some(w), Some(d)) = (w.checked_add(written), d.checked_add(died)) else {
            return Err(corrupt("a value log segment's counts are damaged"));
        };
        batch.insert(key, counts(w, d));
        if died > 0 {
            dead.push(segment);
        }
    }
    for &segment in retire {
        batch.remove(segment_key(segment));
    }
    db.apply_batch(batch)?;
    db.flush()?;
    Ok(dead)
}

/// Bytes of live records a compaction moves per batch.
const MOVE_BATCH: usize = 8 << 20;

/// How dead a segment must be for a compaction to rewrite it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Dead {
    /// Half or more: what a write compacts before its own batch (each live byte is moved at
    /// most about once for each byte written).
    Half,
    /// A quarter or more: what a store closed in order compacts, so that the files at rest hold
    /// at most a third more than their live records.
    Quarter,
}

impl Dead {
    fn reached(self, written: u64, dead: u64) -> bool {
        match self {
            Dead::Half => dead >= written.div_ceil(2),
            Dead::Quarter => dead >= written.div_ceil(4),
        }
    }
}

/// Compacts each of `segments` (other than the one appends go to) that is `enough` dead: its
/// live records appended again, sled pointed at them, and the segment removed.
pub(super) fn compact_if_dead(
    db: &sled::Db,
    log: &ValueLog,
    segments: &[u32],
    enough: Dead,
) -> Result<()> {
    let current = log.current()?;
    for &segment in segments.iter().filter(|s| **s != current) {
        let Some(v) = db.get(segment_key(segment))? else {
            continue;
        };
        let (written, dead) = parse_counts(&v)?;
        if !enough.reached(written, dead) {
            continue;
        }
        // The live records move in batches of about `MOVE_BATCH` bytes; the segment's counts
        // go with the last, so that a crash between leaves the segment counted (its moved
        // records dead), never removed while records in it are still pointed at.
        let mut live: Vec<Op> = Vec::new();
        let mut bytes = 0usize;
        // An error of a move is the write's, not damage of the segment.
        let mut moving: Result<()> = Ok(());
        let read = log.for_each_record(segment, |offset, key, value| {
            let here = match db.get(key)? {
                Some(held) => match stored(&held)? {
                    Stored::Logged(p) => p.segment == segment && p.offset == offset,
                    Stored::Inline(_) => false,
                },
                None => false,
            };
            if here {
                live.push((key.to_vec(), Some(value.to_vec())));
                bytes += key.len() + value.len();
                if bytes >= MOVE_BATCH {
                    if let Err(e) = apply(db, log, std::mem::take(&mut live), &[]) {
                        moving = Err(e);
                        return Err(Error::Io("a compaction's move failed".into()));
                    }
                    bytes = 0;
                }
            }
            Ok(())
        });
        moving?;
        match read {
            Ok(()) => {}
            // A damaged record: the segment stays as it is (a read of a value in the damaged
            // part fails as damage), and writes go on.
            Err(Error::Corrupt(_)) => continue,
            Err(e) => return Err(e),
        }
        apply(db, log, live, &[segment])?;
        log.remove(segment)?;
    }
    Ok(())
}

/// Writes `pairs` into a new store's sled database and value log (a purge's or a migration's
/// copy), in batches of about `batch_bytes`.
pub(super) fn fill(
    db: &sled::Db,
    log: &ValueLog,
    pairs: impl Iterator<Item = Result<(Vec<u8>, Vec<u8>)>>,
    batch_bytes: usize,
) -> Result<()> {
    let mut ops: Vec<Op> = Vec::new();
    let mut bytes = 0usize;
    for pair in pairs {
        let (k, v) = pair?;
        bytes += k.len() + v.len();
        ops.push((k, Some(v)));
        if bytes >= batch_bytes {
            apply(db, log, std::mem::take(&mut ops), &[])?;
            bytes = 0;
        }
    }
    apply(db, log, ops, &[])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::value_log::Pointer;

    fn open(dir: &std::path::Path) -> (sled::Db, ValueLog) {
        if !dir.join(super::super::values::DIR).exists() {
            ValueLog::create(dir).unwrap();
        }
        if dir.join("db").exists() {
            super::super::rewrite::wait_released(&dir.join("db")).unwrap();
        }
        let db = sled::Config::new().path(dir).open().unwrap();
        let log = open_log(dir, &db).unwrap().with_segment_bytes(4096);
        log.tidy().unwrap();
        (db, log)
    }

    fn get(db: &sled::Db, log: &ValueLog, k: &[u8]) -> Option<Vec<u8>> {
        let held = db.get(k).unwrap()?;
        value(log, k, &held).unwrap()
    }

    fn put(db: &sled::Db, log: &ValueLog, k: &[u8], v: Vec<u8>) -> Vec<u32> {
        apply(db, log, vec![(k.to_vec(), Some(v))], &[]).unwrap()
    }

    fn segments(dir: &std::path::Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir.join("values"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn small_values_stay_in_sled_and_large_ones_go_to_the_log_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let (db, log) = open(dir.path());
        let small = vec![1u8; SEPARATE_AT - 1];
        let large = vec![2u8; SEPARATE_AT];
        apply(
            &db,
            &log,
            vec![
                (b"a".to_vec(), Some(small.clone())),
                (b"b".to_vec(), Some(large.clone())),
                (b"c".to_vec(), Some(vec![9; 500])),
                (b"c".to_vec(), None),
            ],
            &[],
        )
        .unwrap();
        assert!(matches!(
            stored(&db.get(b"a").unwrap().unwrap()).unwrap(),
            Stored::Inline(_)
        ));
        assert!(matches!(
            stored(&db.get(b"b").unwrap().unwrap()).unwrap(),
            Stored::Logged(Pointer {
                segment: 0,
                offset: 0,
                ..
            })
        ));
        assert_eq!(get(&db, &log, b"a"), Some(small));
        assert_eq!(get(&db, &log, b"b"), Some(large.clone()));
        // The last operation of a key wins, and a put it overrides is never written.
        assert_eq!(db.get(b"c").unwrap(), None);
        drop((db, log));
        let (db, log) = open(dir.path());
        assert_eq!(get(&db, &log, b"b"), Some(large));
    }

    #[test]
    fn a_batch_of_more_records_than_one_write_takes_reads_back_whole_after_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let (db, log) = open(dir.path());
        // Twelve values of 1 MiB: three writes of 4 MiB in one batch, one sync.
        let ops: Vec<_> = (0u8..12)
            .map(|i| (vec![b'v', i], Some(vec![i; 1 << 20])))
            .collect();
        apply(&db, &log, ops, &[]).unwrap();
        for i in 0u8..12 {
            assert_eq!(
                get(&db, &log, &[b'v', i]),
                Some(vec![i; 1 << 20]),
                "value {i}"
            );
        }
        drop((db, log));
        let (db, log) = open(dir.path());
        for i in 0u8..12 {
            assert_eq!(
                get(&db, &log, &[b'v', i]),
                Some(vec![i; 1 << 20]),
                "value {i}"
            );
        }
        let seg = dir.path().join("values").join("00000000.vlog");
        assert_eq!(
            std::fs::metadata(&seg).unwrap().len(),
            12 * (12 + 2 + (1 << 20))
        );
    }

    #[test]
    fn streamed_puts_are_applied_with_the_batch_and_a_stream_that_fails_applies_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let (db, log) = open(dir.path());
        // Eight streamed values of 1 MiB (two writes of the log) and a batch of its own.
        let mut more = (0u8..8).map(|i| Ok((vec![b's', i], vec![i; 1 << 20])));
        let ops = vec![(b"b".to_vec(), Some(vec![9; 1000])), (b"c".to_vec(), None)];
        apply_streamed(&db, &log, &mut more, ops, &[]).unwrap();
        let every_value_reads = |db: &sled::Db, log: &ValueLog| {
            for i in 0u8..8 {
                assert_eq!(get(db, log, &[b's', i]), Some(vec![i; 1 << 20]), "{i}");
            }
            assert_eq!(get(db, log, b"b"), Some(vec![9; 1000]));
        };
        every_value_reads(&db, &log);
        // A stream whose sixth value fails: its first five went to the log, nothing to sled.
        let mut failing = (0u8..8).map(|i| match i {
            5 => Err(corrupt("no sixth value")),
            _ => Ok((vec![b's', i], vec![100 + i; 1 << 20])),
        });
        let ops = vec![(b"b".to_vec(), Some(vec![7; 1000]))];
        assert!(apply_streamed(&db, &log, &mut failing, ops, &[]).is_err());
        // It began a new segment (the first holds 8 MiB, past the 4 KiB of these tests) and
        // wrote 4 MiB of records there; giving the batch up cut them off.
        assert_eq!(std::fs::metadata(log.path(1)).unwrap().len(), 0);
        every_value_reads(&db, &log);
        drop((db, log));
        let (db, log) = open(dir.path());
        every_value_reads(&db, &log);
    }

    #[test]
    fn bytes_appended_by_a_batch_sled_never_applied_are_cut_off_by_the_next_open() {
        let dir = tempfile::tempdir().unwrap();
        let (db, log) = open(dir.path());
        put(&db, &log, b"k", vec![3; 1000]);
        // A batch whose records reached the log but whose sled batch did not (a crash between).
        let mut a = log.begin().unwrap();
        a.push(b"lost", &[4; 1000]).unwrap();
        log.append(a).unwrap();
        drop((db, log));
        let seg = dir.path().join("values").join("00000000.vlog");
        assert_eq!(std::fs::metadata(&seg).unwrap().len(), 2 * 1012 + 1 + 4);
        let (db, log) = open(dir.path());
        assert_eq!(std::fs::metadata(&seg).unwrap().len(), 1012 + 1);
        assert_eq!(get(&db, &log, b"k"), Some(vec![3; 1000]));
        put(&db, &log, b"k2", vec![5; 1000]);
        assert_eq!(get(&db, &log, b"k2"), Some(vec![5; 1000]));
    }

    #[test]
    fn a_segment_is_dead_enough_from_the_fraction_rounded_up() {
        // (written, dead, half reached, quarter reached)
        for (written, dead, half, quarter) in [
            (0, 0, true, true),
            (1, 0, false, false),
            (1, 1, true, true),
            (7, 1, false, false),
            (7, 2, false, true),
            (7, 3, false, true),
            (7, 4, true, true),
            (100, 24, false, false),
            (100, 25, false, true),
            (100, 50, true, true),
            (u64::MAX, u64::MAX / 4 + 1, false, true),
        ] {
            assert_eq!(Dead::Half.reached(written, dead), half, "{written} {dead}");
            assert_eq!(
                Dead::Quarter.reached(written, dead),
                quarter,
                "{written} {dead}"
            );
        }
    }

    #[test]
    fn a_segment_half_dead_is_compacted_and_every_value_still_reads() {
        let dir = tempfile::tempdir().unwrap();
        let (db, log) = open(dir.path());
        // Segments of 4 KiB: about four values of 1,000 bytes each.
        for i in 0u8..12 {
            put(&db, &log, &[b'k', i], vec![i; 1000]);
        }
        assert_eq!(segments(dir.path()).len(), 3);
        // The first segment holds five (appends go on until one ends past 4 KiB): overwriting
        // three of them kills more than half of it.
        let mut dead = Vec::new();
        for i in 0u8..3 {
            dead.extend(put(&db, &log, &[b'k', i], vec![100 + i; 1000]));
        }
        assert_eq!(dead, vec![0, 0, 0]);
        compact_if_dead(&db, &log, &dead, Dead::Half).unwrap();
        assert!(!segments(dir.path()).contains(&"00000000.vlog".to_string()));
        assert_eq!(db.get(segment_key(0)).unwrap(), None);
        let every_value_reads = |db: &sled::Db, log: &ValueLog| {
            for i in 0u8..12 {
                let want = if i < 3 { 100 + i } else { i };
                assert_eq!(get(db, log, &[b'k', i]), Some(vec![want; 1000]), "{i}");
            }
        };
        every_value_reads(&db, &log);
        // And after a reopen.
        drop((db, log));
        let (db, log) = open(dir.path());
        every_value_reads(&db, &log);
    }

    #[test]
    fn a_segment_with_more_live_bytes_than_one_move_batch_is_compacted_in_batches() {
        let dir = tempfile::tempdir().unwrap();
        let (db, log) = open(dir.path());
        // One batch of 24 values of 1 MiB: one segment (a batch never spans two).
        let mib = |i: u8| vec![i; 1 << 20];
        let ops: Vec<_> = (0u8..24).map(|i| (vec![b'k', i], Some(mib(i)))).collect();
        apply(&db, &log, ops, &[]).unwrap();
        // Half of them overwritten: 12 MiB live, two move batches.
        let ops: Vec<_> = (0u8..12)
            .map(|i| (vec![b'k', i], Some(mib(100 + i))))
            .collect();
        let dead = apply(&db, &log, ops, &[]).unwrap();
        assert_eq!(dead, vec![0]);
        compact_if_dead(&db, &log, &dead, Dead::Half).unwrap();
        assert!(!segments(dir.path()).contains(&"00000000.vlog".to_string()));
        let every_value_reads = |db: &sled::Db, log: &ValueLog| {
            for i in 0u8..24 {
                let want = if i < 12 { 100 + i } else { i };
                assert_eq!(get(db, log, &[b'k', i]), Some(mib(want)), "{i}");
            }
        };
        every_value_reads(&db, &log);
        drop((db, log));
        let (db, log) = open(dir.path());
        every_value_reads(&db, &log);
    }

    #[test]
    fn a_segment_left_behind_by_a_compaction_cut_short_is_removed_by_the_next_open() {
        let dir = tempfile::tempdir().unwrap();
        let (db, log) = open(dir.path());
        for i in 0u8..8 {
            put(&db, &log, &[b'k', i], vec![i; 1000]);
        }
        // A compaction whose sled batch was applied, and which stopped before the file went.
        let copy = std::fs::read(log.path(0)).unwrap();
        for i in 0u8..4 {
            put(&db, &log, &[b'k', i], vec![i; 1000]);
        }
        compact_if_dead(&db, &log, &[0], Dead::Half).unwrap();
        std::fs::write(log.path(0), copy).unwrap();
        drop((db, log));
        let (db, log) = open(dir.path());
        assert!(!log.path(0).exists());
        for i in 0u8..8 {
            assert_eq!(get(&db, &log, &[b'k', i]), Some(vec![i; 1000]));
        }
    }

    #[test]
    fn a_log_whose_end_is_behind_its_segments_is_refused_and_left_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let (db, log) = open(dir.path());
        for i in 0u8..8 {
            put(&db, &log, &[b'k', i], vec![i; 1000]);
        }
        // sled gone back to an earlier end (a rollback the manifest reports): nothing is cut.
        db.insert(END_KEY, end(0, 1014)).unwrap();
        db.flush().unwrap();
        let sizes = |d: &std::path::Path| {
            segments(d)
                .iter()
                .map(|n| std::fs::metadata(d.join("values").join(n)).unwrap().len())
                .collect::<Vec<_>>()
        };
        let before = sizes(dir.path());
        assert!(matches!(
            open_log(dir.path(), &db),
            Err(Error::Corrupt(m)) if m.contains("past the log's end")
        ));
        assert_eq!(sizes(dir.path()), before);
    }

    #[test]
    fn a_copy_starting_past_the_old_segments_points_only_into_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let (db, log) = open(dir.path());
        start_at(&db, &log, 7).unwrap();
        put(&db, &log, b"k", vec![1; 1000]);
        assert!(matches!(
            stored(&db.get(b"k").unwrap().unwrap()).unwrap(),
            Stored::Logged(Pointer {
                segment: 7,
                offset: 0,
                ..
            })
        ));
        drop((db, log));
        let (db, log) = open(dir.path());
        assert_eq!(get(&db, &log, b"k"), Some(vec![1; 1000]));
        assert_eq!(segments(dir.path()), ["00000007.vlog"]);
    }

    #[test]
    fn sled_files_with_values_inline_beside_a_value_log_folder_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        {
            let db = sled::Config::new().path(dir.path()).open().unwrap();
            db.insert(b"k", vec![0u8; 10]).unwrap();
            db.flush().unwrap();
        }
        ValueLog::create(dir.path()).unwrap();
        super::super::rewrite::wait_released(&dir.path().join("db")).unwrap();
        let db = sled::Config::new().path(dir.path()).open().unwrap();
        assert!(matches!(open_log(dir.path(), &db), Err(Error::Corrupt(_))));
        assert_eq!(db.get(LAYOUT_KEY).unwrap(), None);
    }

    #[test]
    fn a_damaged_record_reads_as_moved_and_never_as_another_value() {
        let dir = tempfile::tempdir().unwrap();
        let (db, log) = open(dir.path());
        put(&db, &log, b"k", vec![7; 1000]);
        let path = log.path(0);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[500] ^= 1;
        std::fs::write(&path, bytes).unwrap();
        drop((db, log));
        let (db, log) = open(dir.path());
        assert_eq!(get(&db, &log, b"k"), None);
        assert!(log.for_each_record(0, |_, _, _| Ok(())).is_err());
    }
}
