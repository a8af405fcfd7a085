//! The value log's files: `values/NNNNNNNN.vlog` beside sled's, append-only segments of records
//! (`format/value_log.rs`). This module reads and appends bytes; which records are live, and the
//! counts that say when a segment is worth compacting, are in sled (`kv/separated.rs`).
//!
//! A batch's records are appended at the segment's end with positioned writes of a few MiB and
//! synced before sled's batch that points at them is applied; sled then records the new end. A crash in
//! between leaves bytes past the recorded end, which [`ValueLog::open`] cuts off.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use crate::error::{Error, Result};
use crate::format::value_log::{
    check_record, put_record, record_header, record_key, Pointer, RECORD_HEADER,
};

/// The folder of the value log in a store's folder.
pub(super) const DIR: &str = "values";

/// A segment takes appends until it holds this many bytes; the next batch starts a new one. A
/// segment is the unit of compaction: one is rewritten whole once half of it is dead.
pub(super) const SEGMENT_BYTES: u64 = 32 << 20;

fn io(path: &Path, e: std::io::Error) -> Error {
    Error::Io(format!("{}: {e}", path.display()))
}

fn file_name(segment: u32) -> String {
    format!("{segment:08}.vlog")
}

fn segment_of(name: &str) -> Option<u32> {
    name.strip_suffix(".vlog")?.parse().ok()
}

/// Syncs a folder, so that a file made or removed in it stays so after a power loss.
pub(super) fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io(dir, e))
}

/// A segment file, and how many of its bytes a read may reach (its length, known without asking
/// the file on each read).
struct Segment {
    file: File,
    len: std::sync::atomic::AtomicU64,
}

impl Segment {
    fn new(file: File, len: u64) -> Arc<Segment> {
        Arc::new(Segment {
            file,
            len: len.into(),
        })
    }

    fn len(&self) -> u64 {
        self.len.load(std::sync::atomic::Ordering::Acquire)
    }

    fn set_len(&self, len: u64) {
        self.len.store(len, std::sync::atomic::Ordering::Release);
    }
}

/// The segment files of an open store.
pub(super) struct ValueLog {
    dir: PathBuf,
    files: RwLock<BTreeMap<u32, Arc<Segment>>>,
    /// The segment appends go to and its durable end.
    end: Mutex<(u32, u64)>,
    /// The segments sled had counts for when the log was opened ([`ValueLog::tidy`]).
    live: std::collections::BTreeSet<u32>,
    /// [`SEGMENT_BYTES`] (tests set less).
    segment_bytes: u64,
}

/// What a read of a value takes of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Part {
    /// All of it, its record checked against its checksum.
    Whole,
    /// Its first bytes, up to this many (a value whose leading part carries a checksum of its
    /// own): the rest is not read.
    Leading(u32),
}

/// What a read found where a pointer said.
pub(super) enum Found {
    Value(Vec<u8>),
    /// Not there: the segment was compacted away, or the files were swapped, since the pointer
    /// was read. Reading the pointer again finds where it went.
    Moved,
}

/// How many bytes of records an [`Appending`] gathers before it writes them: a batch of many
/// large values (a checkpoint's key heads) goes to the file as it is built, and is never held
/// twice, once in the batch and once as one buffer of records (133 MB at the checkpoint of a
/// 10M-event ingest, docs/PERFORMANCE.md).
const WRITE_AT: usize = 4 << 20;

/// Records on their way into the log, one batch's: written (not synced) as they fill
/// [`WRITE_AT`] bytes, the rest and the sync by [`ValueLog::append`]. Nothing reads past the end
/// sled records, so records written by a batch that fails are never read, and the next open cuts
/// them off.
pub(super) struct Appending<'a> {
    log: &'a ValueLog,
    segment: u32,
    start: u64,
    /// Bytes of records written to the file so far.
    written: u64,
    /// The segment's file, once something was written.
    file: Option<Arc<Segment>>,
    buf: Vec<u8>,
    /// Whether [`ValueLog::append`] made the records durable; if not, dropping it cuts the
    /// segment back to where the batch started.
    appended: bool,
}

impl Drop for Appending<'_> {
    fn drop(&mut self) {
        // A batch that failed (or was given up) after some of its records were written: they go
        // (best effort). Nothing points at them, and the next open cuts the log back to its
        // recorded end in any case; left, they would lie in a segment's middle once later
        // batches fill it, where a compaction reading the segment takes them for damage.
        if let (false, Some(seg)) = (self.appended, &self.file) {
            let _ = seg.file.set_len(self.start);
        }
    }
}

impl Appending<'_> {
    /// Adds the record of `key` and `value` and returns where it will be.
    pub fn push(&mut self, key: &[u8], value: &[u8]) -> Result<Pointer> {
        let offset = self.start + self.bytes();
        put_record(&mut self.buf, key, value);
        if self.buf.len() >= WRITE_AT {
            self.write()?;
        }
        Ok(Pointer {
            segment: self.segment,
            offset,
            len: value.len() as u32,
        })
    }

    /// Bytes of the records added.
    pub fn bytes(&self) -> u64 {
        self.written + self.buf.len() as u64
    }

    /// Writes the records gathered at their place in the segment, whose file is made if it is
    /// new. On an error, dropping the batch cuts off what it wrote.
    fn write(&mut self) -> Result<()> {
        let seg = match &self.file {
            Some(seg) => seg.clone(),
            None => {
                let seg = self.log.segment_file(self.segment)?;
                self.file = Some(seg.clone());
                seg
            }
        };
        if let Err(e) = seg.file.write_all_at(&self.buf, self.start + self.written) {
            return Err(io(&self.log.dir.join(file_name(self.segment)), e));
        }
        self.written += self.buf.len() as u64;
        self.buf.clear();
        Ok(())
    }
}

impl ValueLog {
    /// Makes the folder of a new store's log, durably, before sled's files exist.
    pub fn create(store: &Path) -> Result<()> {
        let dir = store.join(DIR);
        std::fs::create_dir_all(&dir).map_err(|e| io(&dir, e))?;
        sync_dir(store)
    }

    /// Opens the log in `store` whose durable end sled records as `end` (none: nothing was ever
    /// appended) and whose segments with records sled may point to are `live`. Checks, and
    /// changes nothing: every live segment must be there, none past the end, and the end's
    /// segment must reach the end. What lies past the end (a batch sled never applied) and
    /// segments sled has no counts for (compacted, their removal cut short) are removed by
    /// [`ValueLog::tidy`], once the store's manifest was checked too: a store whose sled lost
    /// acknowledged writes is reported before a byte of its log is touched.
    pub fn open(
        store: &Path,
        end: Option<(u32, u64)>,
        live: &std::collections::BTreeSet<u32>,
    ) -> Result<ValueLog> {
        let dir = store.join(DIR);
        let end = end.unwrap_or((0, 0));
        let mut files = BTreeMap::new();
        for entry in std::fs::read_dir(&dir).map_err(|e| io(&dir, e))? {
            let entry = entry.map_err(|e| io(&dir, e))?;
            let path = entry.path();
            let Some(segment) = segment_of(&entry.file_name().to_string_lossy()) else {
                continue;
            };
            let f = OpenOptions::new()
                .read(true)
                .write(true)
                .open(&path)
                .map_err(|e| io(&path, e))?;
            let len = f.metadata().map_err(|e| io(&path, e))?.len();
            if segment == end.0 && len < end.1 {
                return Err(Error::Corrupt(format!(
                    "the value log segment {} holds {len} bytes, and the store's records reach byte {}: it was truncated",
                    path.display(),
                    end.1
                )));
            }
            files.insert(segment, Segment::new(f, len));
        }
        if let Some(missing) = live.iter().find(|s| !files.contains_key(s)) {
            return Err(Error::Corrupt(format!(
                "the value log segment {} is missing",
                dir.join(file_name(*missing)).display()
            )));
        }
        if let Some(past) = live.iter().find(|s| **s > end.0) {
            return Err(Error::Corrupt(format!(
                "the store's records count on value log segment {past}, past the log's end in segment {}",
                end.0
            )));
        }
        Ok(ValueLog {
            dir,
            files: RwLock::new(files),
            end: Mutex::new(end),
            live: live.clone(),
            segment_bytes: SEGMENT_BYTES,
        })
    }

    /// Cuts the end's segment back to the end and removes the segments past it and those sled
    /// has no counts for (see [`ValueLog::open`]). Run once, after the open's checks.
    pub fn tidy(&self) -> Result<()> {
        let end = *self.end.lock().map_err(|_| poisoned())?;
        let mut files = self.files.write().map_err(|_| poisoned())?;
        let mut removed = false;
        let segments: Vec<u32> = files.keys().copied().collect();
        for segment in segments {
            let path = self.dir.join(file_name(segment));
            if segment > end.0 || (segment < end.0 && !self.live.contains(&segment)) {
                files.remove(&segment);
                std::fs::remove_file(&path).map_err(|e| io(&path, e))?;
                removed = true;
            } else if segment == end.0 && files[&segment].len() > end.1 {
                let seg = &files[&segment];
                seg.file
                    .set_len(end.1)
                    .and_then(|_| seg.file.sync_all())
                    .map_err(|e| io(&path, e))?;
                seg.set_len(end.1);
            }
        }
        if removed {
            sync_dir(&self.dir)?;
        }
        Ok(())
    }

    /// The same, starting a new segment past `bytes` (tests).
    #[cfg(test)]
    pub fn with_segment_bytes(mut self, bytes: u64) -> Self {
        self.segment_bytes = bytes;
        self
    }

    /// The file of a segment (tests).
    #[cfg(test)]
    pub fn path(&self, segment: u32) -> PathBuf {
        self.dir.join(file_name(segment))
    }

    fn files(&self) -> Result<std::sync::RwLockReadGuard<'_, BTreeMap<u32, Arc<Segment>>>> {
        self.files
            .read()
            .map_err(|_| Error::Poisoned("value log".into()))
    }

    /// Reads `part` of the value `pointer` names, which must be `key`'s: the whole record checked
    /// against its checksum, or the value's first bytes and the record's header and key (see
    /// [`record_key`]).
    pub fn read_part(&self, pointer: Pointer, key: &[u8], part: Part) -> Result<Found> {
        let Some(seg) = self.files()?.get(&pointer.segment).cloned() else {
            return Ok(Found::Moved);
        };
        let path = || self.dir.join(file_name(pointer.segment));
        // A part that takes the whole value is read, and checked, as the whole value.
        let part = match part {
            Part::Leading(n) if n >= pointer.len => Part::Whole,
            part => part,
        };
        let value = match part {
            Part::Whole => pointer.len,
            Part::Leading(n) => n,
        };
        let want = RECORD_HEADER as u64 + key.len() as u64 + u64::from(value);
        // A damaged pointer must not make the read allocate what the file does not hold.
        if pointer
            .offset
            .checked_add(want)
            .is_none_or(|to| to > seg.len())
        {
            return Ok(Found::Moved);
        }
        let mut bytes = vec![0u8; want as usize];
        match seg.file.read_exact_at(&mut bytes, pointer.offset) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(Found::Moved),
            Err(e) => return Err(io(&path(), e)),
        }
        let found = match part {
            Part::Whole => check_record(&bytes).map(|(k, _)| k),
            Part::Leading(_) => record_key(&bytes, pointer.len as usize),
        };
        if found != Some(key) {
            return Ok(Found::Moved);
        }
        bytes.drain(..RECORD_HEADER + key.len());
        Ok(Found::Value(bytes))
    }

    /// Starts a batch of appends: at the end of the current segment, or in a new one once it
    /// holds [`SEGMENT_BYTES`].
    pub fn begin(&self) -> Result<Appending<'_>> {
        let (mut segment, mut start) = *self.end.lock().map_err(|_| poisoned())?;
        if start >= self.segment_bytes {
            segment += 1;
            start = 0;
        }
        Ok(Appending {
            log: self,
            segment,
            start,
            written: 0,
            file: None,
            buf: Vec::new(),
            appended: false,
        })
    }

    /// Segment `segment`'s file, made (and its folder synced) if it is new.
    fn segment_file(&self, segment: u32) -> Result<Arc<Segment>> {
        if let Some(seg) = self.files()?.get(&segment) {
            return Ok(seg.clone());
        }
        let path = self.dir.join(file_name(segment));
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| io(&path, e))?;
        sync_dir(&self.dir)?;
        let seg = Segment::new(f, 0);
        self.files
            .write()
            .map_err(|_| poisoned())?
            .insert(segment, seg.clone());
        Ok(seg)
    }

    /// Writes the records not written yet and syncs them; returns the new end, which the caller
    /// records in sled with the pointers. Nothing reads them before that.
    pub fn append(&self, mut a: Appending<'_>) -> Result<(u32, u64)> {
        a.write()?;
        let seg = match a.file.clone() {
            Some(seg) => seg,
            None => self.segment_file(a.segment)?,
        };
        if let Err(e) = seg.file.sync_data() {
            // Nothing points past the end: dropping `a` cuts off what it wrote.
            return Err(io(&self.dir.join(file_name(a.segment)), e));
        }
        let end = (a.segment, a.start + a.written);
        *self.end.lock().map_err(|_| poisoned())? = end;
        seg.set_len(end.1);
        a.appended = true;
        Ok(end)
    }

    /// Makes a log with nothing in it start at `segment`.
    pub fn start_at(&self, segment: u32) -> Result<()> {
        *self.end.lock().map_err(|_| poisoned())? = (segment, 0);
        Ok(())
    }

    /// The segment appends go to.
    pub fn current(&self) -> Result<u32> {
        Ok(self.end.lock().map_err(|_| poisoned())?.0)
    }

    /// Hands every record of a segment to `each`, in order: `(offset, key, value)`. A record
    /// that does not check stops it with an error. The segment is read a record at a time, not
    /// whole (a segment a checkpoint's batch filled held 89 MB: docs/PERFORMANCE.md).
    pub fn for_each_record(
        &self,
        segment: u32,
        mut each: impl FnMut(u64, &[u8], &[u8]) -> Result<()>,
    ) -> Result<()> {
        use std::io::Read;
        let path = self.dir.join(file_name(segment));
        let file = File::open(&path).map_err(|e| io(&path, e))?;
        // Up to the segment's durable end: bytes past it are a batch's that never completed.
        let durable = self.files()?.get(&segment).map(|s| s.len());
        let len = file.metadata().map_err(|e| io(&path, e))?.len();
        let len = durable.map_or(len, |d| d.min(len));
        let mut r = std::io::BufReader::with_capacity(1 << 20, file);
        let mut whole = Vec::new();
        let mut at = 0u64;
        while at < len {
            let damaged = || {
                Error::Corrupt(format!(
                    "the value log segment {} is damaged at byte {at}",
                    path.display()
                ))
            };
            let mut h = [0u8; RECORD_HEADER];
            if len - at < RECORD_HEADER as u64 {
                return Err(damaged());
            }
            r.read_exact(&mut h).map_err(|e| io(&path, e))?;
            let (k, v) = record_header(&h);
            let n = (RECORD_HEADER + k + v) as u64;
            if n > len - at {
                return Err(damaged());
            }
            whole.clear();
            whole.extend_from_slice(&h);
            whole.resize(n as usize, 0);
            r.read_exact(&mut whole[RECORD_HEADER..])
                .map_err(|e| io(&path, e))?;
            let (key, value) = check_record(&whole).ok_or_else(damaged)?;
            each(at, key, value)?;
            at += n;
        }
        Ok(())
    }

    /// Removes a segment nothing points into any more.
    pub fn remove(&self, segment: u32) -> Result<()> {
        self.files.write().map_err(|_| poisoned())?.remove(&segment);
        let path = self.dir.join(file_name(segment));
        std::fs::remove_file(&path).map_err(|e| io(&path, e))?;
        sync_dir(&self.dir)
    }
}

fn poisoned() -> Error {
    Error::Poisoned("value log".into())
}
