//! The read side: a table pinned at a version, its scans, point lookups and change feed.

use std::borrow::Cow;
use std::ops::Bound;
use std::sync::Arc;

use super::cold_reader::ColdReader;
use super::commit::{format_us, CommitInfo};
use super::row_view::{EachRow, RowSink, RowView, StoredRows, TemporalBound};
use super::time_filter::TimeFilter;
use super::{in_table, Store, Table};
use crate::engine::changes::{commit_changes, Listing};
use crate::engine::cold::ColdStats;
use crate::engine::fold::{Bytes, RowId};
use crate::engine::lookup::PointIndex;
use crate::engine::{Caching, StoredRow, TableState};
use crate::error::{corrupt, Error, Result};
use crate::flow::{StoredAs, TableSchema};
use crate::format::cold_batch::{BlockRows, ColdBatch};
use crate::format::page_boxes::{BoxTest, PageTest, Scale};
use crate::format::zone::{Extents, PageZone};

pub use crate::engine::changes::ChangeType;

impl Store {
    /// The version of `table` current at `timestamp_us` (µs since the epoch, UTC): the last commit
    /// at or before it (`TIMESTAMP AS OF`).
    pub fn version_at(&self, table: &str, timestamp_us: i64) -> Result<u64> {
        let g = self.read_inner()?;
        let t = g.table(table)?;
        let i = t
            .commits
            .partition_point(|c| c.timestamp_us <= timestamp_us);
        if i == 0 {
            let first = &t.commits[0];
            return Err(Error::InvalidQuery(format!(
                "`{table}` has no version at that time: its {} commit {} is at {}",
                if first.version == 0 {
                    "first"
                } else {
                    "oldest kept"
                },
                first.version,
                format_us(first.timestamp_us)
            )));
        }
        Ok(t.commits[i - 1].version)
    }
}

/// What a scan reads: a table version, a key range (encoded keys), and time filters.
#[derive(Clone, Debug)]
pub struct ScanSpec {
    /// Read the table as of this commit (default: the latest).
    pub version: Option<u64>,
    /// Lower bound on the encoded key.
    pub key_lo: Bound<Vec<u8>>,
    /// Upper bound on the encoded key.
    pub key_hi: Bound<Vec<u8>>,
    /// Selection on `__START_AT`/`__END_AT`.
    pub business: TimeFilter,
    /// Selection on `__SYSTEM_START_AT`/`__SYSTEM_END_AT`.
    pub system: TimeFilter,
    /// Whether the rows' values are read.
    pub values: Values,
}

impl ScanSpec {
    /// Whether the scan keeps what it decodes in the store's read cache, when `latest` is the
    /// table's latest version: reads that pick rows by time (as of a point, over a span) or
    /// read a past version keep them, for reports and services repeat them; a scan of every
    /// row of the current table passes, so that a `count(*)` neither grows the process nor
    /// pushes out what those reads keep.
    pub fn caching(&self, latest: u64) -> Caching {
        let current = self.version.is_none_or(|v| v == latest);
        match (&self.business, &self.system, current) {
            (TimeFilter::All, TimeFilter::All, true) => Caching::Pass,
            _ => Caching::Keep,
        }
    }
}

/// Whether a scan reads its rows' values ([`ScanSpec::values`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Values {
    /// Every row carries its values.
    #[default]
    All,
    /// Rows carry their key and temporal bounds only (`RowView::values` may be empty): what a
    /// count, or a read of the temporal columns, needs. Frozen rows then cost no value decoding.
    Skip,
}

impl Default for ScanSpec {
    fn default() -> Self {
        ScanSpec {
            version: None,
            key_lo: Bound::Unbounded,
            key_hi: Bound::Unbounded,
            business: TimeFilter::All,
            system: TimeFilter::All,
            values: Values::All,
        }
    }
}

/// Where a scan stopped; pass it back, with the same [`ScanSpec`], to continue.
#[derive(Clone, Debug, Default)]
pub struct ScanCursor {
    /// Where a key-by-key scan goes on: the key, and the first row id to read in it.
    after: Option<(Vec<u8>, RowId)>,
    next_id: u32,
    /// Whether the scan goes key by key (decided on the first call: a table with frozen rows
    /// is read key by key, so each key's cold pages are decoded once).
    by_key: Option<bool>,
    done: bool,
    /// The row store generation the scan started on (see VACUUM).
    generation: Option<u64>,
    /// The frozen rows of the key the scan stopped in (`after`), as the call that stopped read
    /// them: the next call goes on from them instead of reading the key's pages again (a key
    /// longer than a batch was read once per batch it spans).
    resumed: Option<ResumedKey>,
}

/// The frozen rows of a key a scan stopped in ([`ScanCursor::resumed`]), read from a table state
/// whose split of its rows between memory and pages was `split` ([`TableState::split`]), when the
/// table's last commit was `latest`. A thaw or a freeze since (a commit's, or a statement's that
/// was then refused), or another state (a span's, the table once loaded or read again), may
/// split the key's rows otherwise: then they are read again.
#[derive(Clone)]
struct ResumedKey {
    key: Bytes,
    split: u64,
    latest: u64,
    rows: Arc<ColdBatch>,
}

impl std::fmt::Debug for ResumedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResumedKey")
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl ScanCursor {
    /// A cursor for a scan that starts on the rows of `generation`.
    pub(crate) fn pinned(generation: u64) -> ScanCursor {
        ScanCursor {
            generation: Some(generation),
            ..ScanCursor::default()
        }
    }

    /// Whether the scan has read everything.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// The key a key-by-key scan stopped in, if it stopped inside one.
    pub fn resume_key(&self) -> Option<&[u8]> {
        self.after.as_ref().map(|(k, _)| &k[..])
    }

    /// Readies a scan that has read one span of keys ([`super::Store::read_span`]) to read the
    /// next: where it stopped is forgotten, what it checks (the table's generation) is kept.
    pub fn next_span(&mut self) {
        self.after = None;
        self.next_id = 0;
        self.done = false;
    }
}

/// How many commits the change feed reads with one [`ColdReader`]: each key's pages that hold
/// their rows are read once for all of them.
const CHANGE_WINDOW: u64 = 8;

/// A read view of one table, valid inside [`Store::read`] (or [`Store::read_key`]: then only the
/// one key is there, see `ReadScope`).
pub struct TableReader<'a> {
    pub(super) table: &'a Table,
    pub(super) state: &'a TableState,
    pub(super) scope: ReadScope,
}

/// Which table, and which generation of its rows, a reader reads ([`TableReader::generation`]):
/// two reads with the same one read the same rows for the same commits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableGeneration {
    id: u32,
    generation: u64,
}

/// The version a scan reads: the latest (`current`: rows not retired), or `version`.
#[derive(Clone, Copy, Debug)]
struct ReadAt {
    current: bool,
    version: u64,
}

/// Whether a row written by commit `added` and retired by `retired`, whose bounds are
/// `bound(..)`, is one `spec` returns at `at` (what the scan asks of each row: [`version_matches`],
/// then [`bounds_match`], which reads the bounds only if the first matched).
#[inline]
fn row_matches<'b>(
    spec: &ScanSpec,
    at: ReadAt,
    (added, retired): (u64, Option<u64>),
    bound: impl Fn(TemporalBound) -> Option<&'b [u8]>,
) -> bool {
    version_matches(at, added, retired) && bounds_match(spec, bound)
}

/// Whether a row written by commit `added` and retired by `retired` is one of version `at`.
#[inline]
fn version_matches(at: ReadAt, added: u64, retired: Option<u64>) -> bool {
    if at.current {
        retired.is_none()
    } else {
        added <= at.version && retired.is_none_or(|r| r > at.version)
    }
}

/// Whether a row whose bounds are `bound(..)` is in `spec`'s times: system time first (most of a
/// key's rows are versions other system times believed), business time only if that matched,
/// and a timeline's bounds read only if the scan selects on it (a frozen row's are read in place).
#[inline]
fn bounds_match<'b>(spec: &ScanSpec, bound: impl Fn(TemporalBound) -> Option<&'b [u8]>) -> bool {
    let on = |filter: &TimeFilter, start, end| {
        matches!(filter, TimeFilter::All) || filter.matches(bound(start), bound(end))
    };
    on(
        &spec.system,
        TemporalBound::SystemStart,
        TemporalBound::SystemEnd,
    ) && on(&spec.business, TemporalBound::Start, TemporalBound::End)
}

/// Appends to `kept` the positions of the rows of a block that [`row_matches`]: with its bounds
/// in order, each time of `spec` placed among them once ([`TimeFilter::ranked`]) and each row's
/// bounds compared by their entry numbers; else each bound compared as bytes.
fn frozen_rows_matching(spec: &ScanSpec, at: ReadAt, rows: BlockRows<'_>, kept: &mut Vec<u32>) {
    let positions = 0..rows.len() as u32;
    if !rows.bounds_in_order() {
        kept.extend(positions.filter(|&i| {
            let r = rows.row(i as usize);
            row_matches(spec, at, r.commits(), |w| r.bound(w))
        }));
        return;
    }
    let below = |t: &[u8], or_equal: bool| rows.bounds_below(t, or_equal);
    let (system, business) = (spec.system.ranked(&below), spec.business.ranked(&below));
    // A plain loop: through `extend` of a `filter`, the test was a call per row.
    for i in positions {
        let r = rows.row(i as usize);
        let (added, retired) = r.commits();
        if version_matches(at, added, retired)
            && system.matches(
                r.entry(TemporalBound::SystemStart),
                r.entry(TemporalBound::SystemEnd),
            )
            && business.matches(r.entry(TemporalBound::Start), r.entry(TemporalBound::End))
        {
            kept.push(i);
        }
    }
}

/// Hands the frozen rows at positions `run` of `cold` to `sink` together, and empties `run`.
fn hand_over(sink: &mut impl RowSink, cold: &ColdBatch, run: &mut Vec<usize>, values: Values) {
    if !run.is_empty() {
        let rows = match values {
            Values::All => StoredRows::with_values(cold.select(run).with_values()),
            Values::Skip => StoredRows::bounds_only(cold.select(run)),
        };
        sink.stored_rows(&rows);
        run.clear();
    }
}

/// Whether a page with zone map `z` may hold a row that [`row_matches`]: if this says no, none
/// does (the property test below), and the scan does not read the page.
fn page_may_match(spec: &ScanSpec, at: ReadAt, z: PageZone<'_>) -> bool {
    let may_match =
        |x: Extents<'_>| spec.business.may_match(x.business) && spec.system.may_match(x.system);
    match at.current {
        true => z.live().any(may_match),
        false => z.added() <= at.version && z.retired() > at.version && z.all().any(may_match),
    }
}

/// The pages a scan reads: those [`page_may_match`] accepts; of a long page list, in a scan of
/// the latest version (which reads live rows only), those with a box of live rows its times
/// may hold ([`TimeFilter::scaled`]), which has every page the zones accept.
struct ScanPages<'a> {
    spec: &'a ScanSpec,
    at: ReadAt,
}

impl PageTest for ScanPages<'_> {
    fn zone(&self, z: PageZone<'_>) -> bool {
        page_may_match(self.spec, self.at, z)
    }

    fn live_boxes(&self, [business, system]: [&Scale; 2]) -> Option<BoxTest> {
        (self.at.current).then(|| {
            BoxTest::new(
                self.spec.business.scaled(&|t| business.of(t)),
                self.spec.system.scaled(&|t| system.of(t)),
            )
        })
    }
}

/// What a [`TableReader`] sees.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ReadScope {
    /// The whole table.
    Table,
    /// Some keys (one, or a span of them), read from their heads and pages: scans and lookups of
    /// those keys read them as the table does; counts cover those keys only; the change feed is
    /// refused.
    Keys,
    /// A span of keys read for a scan (their row versions only): scans read them as the table
    /// does; lookups are refused; the change feed reads a commit's changes to them
    /// (`span_changes`) and nothing else.
    Rows,
}

impl TableReader<'_> {
    /// The table's shape.
    pub fn schema(&self) -> &TableSchema {
        &self.state.schema
    }

    /// The latest commit version.
    pub fn latest_version(&self) -> u64 {
        self.table.commits.last().expect("a commit").version
    }

    /// The oldest version that can be read: 0, or where the last VACUUM cut the history.
    pub fn oldest_version(&self) -> u64 {
        self.table.commits[0].version
    }

    /// The commit record of `version`, if kept.
    pub fn commit(&self, version: u64) -> Option<&CommitInfo> {
        let i = self
            .table
            .commits
            .binary_search_by_key(&version, |c| c.version)
            .ok()?;
        Some(&self.table.commits[i])
    }

    /// Checks that `version` can be read.
    fn check_version(&self, version: u64) -> Result<()> {
        let latest = self.latest_version();
        if version > latest {
            return Err(Error::NoSuchVersion {
                table: self.table.name.clone(),
                version,
                latest,
            });
        }
        let oldest = self.oldest_version();
        if version < oldest {
            return Err(Error::VersionVacuumed {
                table: self.table.name.clone(),
                version,
                oldest,
            });
        }
        Ok(())
    }

    /// The change data feed of commits `from..=to` (docs/SEMANTICS.md §7): calls `f` with each commit's
    /// changed rows, in commit order. Within a commit, a retired row and a written row with the
    /// same row identity (the keys; plus `coalesce(__START_AT, __END_AT)` for SCD2; plus
    /// `__SYSTEM_START_AT` for BITEMPORAL) are an update (pre-image, then post-image) unless they
    /// are equal, which is no change; other retired rows are deletes, other written rows inserts.
    /// `from` must be after the oldest version kept: that commit holds the compacted history.
    pub fn changes(
        &self,
        from: u64,
        to: u64,
        mut f: impl FnMut(u64, ChangeType, RowView<'_>),
    ) -> Result<()> {
        self.check_changes(from, to)?;
        let mut cold = ColdReader::new(&self.table.name, self.state);
        for v in from..=to {
            // A window of commits reads only the pages that hold rows they wrote or retired,
            // each once.
            if (v - from).is_multiple_of(CHANGE_WINDOW) {
                let last = (v + CHANGE_WINDOW - 1).min(to);
                cold = ColdReader::of_commits(&self.table.name, self.state, v, last);
            }
            self.list_commit(v, &cold, |_| true, |_| true, &mut f)?;
        }
        Ok(())
    }

    /// Calls `f` with the changes of commit `v` among the rows it retired and wrote whose key
    /// `ours` takes (by number), those `listed` keeps, in the commit's order; frozen rows, and
    /// the keys of rows, are read through `cold`.
    pub(super) fn list_commit(
        &self,
        v: u64,
        cold: &ColdReader<'_>,
        ours: impl Fn(u32) -> bool,
        listed: impl Fn(ChangeType) -> bool,
        f: &mut impl FnMut(u64, ChangeType, RowView<'_>),
    ) -> Result<()> {
        let rows = &self.state.rows;
        let row = |id: RowId| -> Result<Cow<'_, StoredRow>> {
            match rows.get(id) {
                Some(r) => Ok(Cow::Borrowed(r)),
                None => cold.row(id),
            }
        };
        // Frozen rows are read a key at a time (the cold reader keeps a few keys' rows): the
        // retired rows in key order read each key's pages once, not once per row.
        let mut retired: Vec<(u32, RowId)> = Vec::new();
        let retired_by = (self.state.retired_by(v)).map_err(|e| in_table(&self.table.name, e))?;
        for id in retired_by.iter().flat_map(|r| r.iter()) {
            let no = cold.key_of(id)?;
            if ours(no) {
                retired.push((no, id));
            }
        }
        retired.sort_unstable();
        let retired = retired.into_iter().map(|(_, id)| id);
        let mut written = Vec::new();
        for id in rows.first_added(v)..rows.first_added(v + 1) {
            if ours(cold.key_of(id)?) {
                written.push(id);
            }
        }
        let mode = self.state.schema.mode;
        for (t, id) in commit_changes(mode, v, retired, written, row, Listing::Ordered)? {
            if listed(t) {
                let r = row(id)?;
                f(v, t, RowView::of(&r));
            }
        }
        Ok(())
    }

    /// Refuses a change feed of `from..=to` that cannot be read: reversed, past the latest
    /// commit, from a vacuumed one, or of a reader of some keys only.
    pub(super) fn check_changes(&self, from: u64, to: u64) -> Result<()> {
        if self.scope != ReadScope::Table {
            return Err(Error::InvalidQuery(
                "the change feed reads the whole table, not some of its keys".into(),
            ));
        }
        self.check_change_range(from, to)
    }

    /// Refuses a change feed of `from..=to` that cannot be read: reversed, past the latest
    /// commit, or from a vacuumed one.
    pub fn check_change_range(&self, from: u64, to: u64) -> Result<()> {
        if from > to {
            return Err(Error::InvalidQuery(format!(
                "the change feed from version {from} to {to}: the start is after the end"
            )));
        }
        self.check_version(to)?;
        self.check_version(from)?;
        let oldest = self.oldest_version();
        if from <= oldest && oldest > 0 {
            return Err(Error::VersionVacuumed {
                table: self.table.name.clone(),
                version: from,
                oldest: oldest + 1,
            });
        }
        Ok(())
    }

    /// The table and the generation of its rows: it changes when ERASE, VACUUM or a widening
    /// rewrites them, or when the table was dropped and made again under its name.
    pub fn generation(&self) -> TableGeneration {
        TableGeneration {
            id: self.table.id,
            generation: self.table.generation,
        }
    }

    /// The commit log.
    pub fn history(&self) -> &[CommitInfo] {
        &self.table.commits
    }

    /// Number of row versions held (current, retired, and closed on system time), which time
    /// travel and the change feed read.
    pub fn row_versions(&self) -> u64 {
        self.state.rows.len() as u64
    }

    /// Number of rows in the current table.
    pub fn live_rows(&self) -> u64 {
        self.state.rows.live.len()
    }

    /// How much of the table's event history is frozen in pages, and how much is in
    /// memory (see [`StoreOptions::hot_events_per_key`]).
    pub fn cold_stats(&self) -> ColdStats {
        self.state.cold_stats()
    }

    /// Calls `f` on up to `max_rows` rows that `spec` selects, in key order, continuing from
    /// `cursor`. Sets `cursor.is_done()` when nothing is left.
    pub fn scan(
        &self,
        spec: &ScanSpec,
        cursor: &mut ScanCursor,
        max_rows: usize,
        f: impl FnMut(RowView<'_>),
    ) -> Result<()> {
        self.scan_into(spec, cursor, max_rows, &mut EachRow(f))
    }

    /// [`TableReader::scan`] into `sink`, which takes the rows each key's pages give together
    /// ([`RowSink::stored_rows`]).
    pub fn scan_into(
        &self,
        spec: &ScanSpec,
        cursor: &mut ScanCursor,
        max_rows: usize,
        sink: &mut impl RowSink,
    ) -> Result<()> {
        let latest = self.latest_version();
        let version = spec.version.unwrap_or(latest);
        self.check_version(version)?;
        match cursor.generation {
            None => cursor.generation = Some(self.table.generation),
            Some(g) if g != self.table.generation => {
                return Err(Error::ScanInterrupted(self.table.name.clone()))
            }
            Some(_) => {}
        }
        let current = version == latest;
        let lo: Bound<&[u8]> = match (&cursor.after, &spec.key_lo) {
            (Some((k, _)), _) => Bound::Included(&k[..]),
            (None, Bound::Included(k)) => Bound::Included(&k[..]),
            (None, Bound::Excluded(k)) => Bound::Excluded(&k[..]),
            (None, Bound::Unbounded) => Bound::Unbounded,
        };
        let hi: Bound<&[u8]> = match &spec.key_hi {
            Bound::Included(k) => Bound::Included(&k[..]),
            Bound::Excluded(k) => Bound::Excluded(&k[..]),
            Bound::Unbounded => Bound::Unbounded,
        };
        if let (Bound::Included(l) | Bound::Excluded(l), Bound::Included(h) | Bound::Excluded(h)) =
            (lo, hi)
        {
            if l > h {
                cursor.done = true;
                return Ok(());
            }
        }
        let rows = &self.state.rows;
        let at = ReadAt { current, version };
        let matches = |row: &StoredRow| {
            let v = RowView::of(row);
            version_matches(at, row.added, row.retired) && bounds_match(spec, |w| v.bound(w))
        };
        // A frozen page is read only if one of its rows may match (its zone map). A scan that
        // picks rows by time keeps the pages it decodes for the next such read.
        let pages = ScanPages { spec, at };
        let frozen_matches =
            |rows: BlockRows<'_>, kept: &mut Vec<u32>| frozen_rows_matching(spec, at, rows, kept);
        let caching = spec.caching(latest);
        let mut n = 0;
        let unbounded = matches!(
            (&spec.key_lo, &spec.key_hi),
            (Bound::Unbounded, Bound::Unbounded)
        );
        let by_key = *cursor
            .by_key
            .get_or_insert(!unbounded || rows.any_cold() || self.scope != ReadScope::Table);
        if !by_key {
            // No key range and nothing frozen when the scan began: read the row store in storage
            // order, sequentially. (Rows frozen since are read back from their keys' pages.)
            let cold = ColdReader::new(&self.table.name, self.state);
            let mut id = cursor.next_id;
            let len = rows.len();
            while (id as usize) < len {
                if n == max_rows {
                    cursor.next_id = id;
                    return Ok(());
                }
                rows.prefetch_ahead(id as usize, |p| (p < len).then_some(p as RowId));
                let row = match rows.get(id) {
                    Some(row) => Cow::Borrowed(row),
                    None => cold.row(id)?,
                };
                if matches(&row) {
                    sink.row(RowView::of(&row));
                    n += 1;
                }
                id += 1;
            }
            cursor.done = true;
            return Ok(());
        }
        let state = &self.state;
        let resume = cursor.after.as_ref().map_or(0, |(_, r)| *r);
        let values = spec.values;
        // The frozen rows selected since the last row in memory, handed over together.
        let mut run: Vec<usize> = Vec::new();
        for (ki, (k, ks)) in state.key_range(lo, hi).enumerate() {
            // A key's rows in id order: those in memory merged with its frozen ones.
            let from = if ki == 0 { resume } else { 0 };
            // Only the frozen rows the scan returns are indexed: each checked where it lies,
            // its commits first, its bounds only if it is of the version read. The key this scan
            // stopped in goes on from the rows read then, unless a page was frozen or thawed, or
            // a commit came, since ([`ResumedKey`]).
            let cold = match cursor.resumed.take() {
                Some(r)
                    if ki == 0 && r.key == *k && (r.split, r.latest) == (state.split(), latest) =>
                {
                    r.rows
                }
                _ => Arc::new(
                    state
                        .cold_batch(k, ks, (&pages, frozen_matches), caching)
                        .map_err(|e| in_table(&self.table.name, e))?,
                ),
            };
            let mut h = ks.rows.partition_point(|&r| r < from);
            let mut c = cold.first_at_or_after(from);
            loop {
                let (hot, frozen) = (ks.rows.get(h).copied(), cold.id_at(c));
                let Some(id) = hot.into_iter().chain(frozen).min() else {
                    break;
                };
                if n == max_rows {
                    hand_over(sink, &cold, &mut run, values);
                    cursor.after = Some((k.to_vec(), id));
                    cursor.resumed = Some(ResumedKey {
                        key: k.clone(),
                        split: state.split(),
                        latest,
                        rows: cold,
                    });
                    return Ok(());
                }
                if hot == Some(id) {
                    hand_over(sink, &cold, &mut run, values);
                    rows.prefetch_ahead(h, |p| ks.rows.get(p).copied());
                    h += 1;
                    let row = rows
                        .get(id)
                        .ok_or_else(|| corrupt(format!("row {id} of a key is missing")))?;
                    if matches(row) {
                        sink.row(RowView::of(row));
                        n += 1;
                    }
                    continue;
                }
                // Every frozen row of `cold` is one the scan returns (`frozen_matches`); its values
                // are read as the run is handed over.
                run.push(c);
                n += 1;
                c += 1;
            }
            hand_over(sink, &cold, &mut run, values);
        }
        cursor.done = true;
        Ok(())
    }

    /// Calls `f` on the current row of `key` (encoded) at business time `business` and system
    /// time `system` (encoded; `None` = now), if there is one. SCD1 tables ignore both times.
    pub fn lookup<R>(
        &self,
        key: &[u8],
        business: Option<&[u8]>,
        system: Option<&[u8]>,
        f: impl FnOnce(RowView<'_>) -> R,
    ) -> Result<Option<R>> {
        if self.scope == ReadScope::Rows {
            return Err(Error::InvalidQuery(
                "a span of keys read for a scan answers scans, not lookups".into(),
            ));
        }
        let state = &self.state;
        let Some((k, ks)) = state.keys.get_key_value(key) else {
            return Ok(None);
        };
        let rows = &state.rows;
        let mode = state.schema.mode;
        if mode == StoredAs::Scd1 {
            // The open version is in the hot part, and so is its row.
            let cur = ks.timeline.values().next_back().and_then(|v| v.row);
            return Ok(cur.and_then(|r| rows.get(r)).map(|r| f(RowView::of(r))));
        }
        let b =
            business.ok_or_else(|| Error::InvalidQuery("a business time is required".into()))?;
        let now = match (mode, system) {
            (StoredAs::Bitemporal, Some(s)) => ks.max_sys.as_deref().is_none_or(|m| s >= m),
            _ => true,
        };
        // The timeline answers "now" without an index, unless part of it is frozen.
        if now && ks.lookup.get().is_none() && ks.frozen.is_none() {
            let hit = ks
                .timeline
                .range::<[u8], _>((Bound::Unbounded, Bound::Included(b)))
                .next_back()
                .filter(|(_, v)| v.end.as_deref().is_none_or(|e| b < e))
                .and_then(|(_, v)| v.row);
            return Ok(hit.map(|r| f(RowView::of(&rows[r]))));
        }
        let index = match ks.lookup.get() {
            Some(index) => index,
            // A key read alone: its first lookup is a scan of the key at the point, which reads
            // only the pages whose zone maps may hold it; a second one builds the index.
            None if self.scope == ReadScope::Keys
                && !state
                    .probed
                    .swap(true, std::sync::atomic::Ordering::Relaxed) =>
            {
                return self.lookup_by_scan(key, b, system.filter(|_| !now), ks, f);
            }
            None => {
                // Built from every live row of the key; the frozen ones are read back once and
                // kept by the index.
                let cold = state
                    .cold_rows(k, ks)
                    .map_err(|e| in_table(&self.table.name, e))?;
                let live = (cold.iter().map(|(r, row)| (*r, row)))
                    .chain(ks.rows.iter().filter_map(|&r| Some((r, rows.get(r)?))))
                    .filter(|(_, row)| row.retired.is_none());
                let mut index = PointIndex::build(live);
                index.cold = cold.into_iter().collect();
                // Another reader may have built it meanwhile; either copy is the same.
                let _ = ks.lookup.set(Box::new(index));
                ks.lookup.get().expect("just set")
            }
        };
        let hit = match system {
            Some(s) if !now => index.find(b, s),
            _ => index.find_now(b),
        };
        Ok(hit
            .and_then(|r| index.row(rows, r))
            .map(|r| f(RowView::of(r))))
    }

    /// [`TableReader::lookup`] of `key` by a scan of it at business time `b` and system time
    /// `system` (`None`: now), reading only the frozen pages whose zone maps may hold the row.
    fn lookup_by_scan<R>(
        &self,
        key: &[u8],
        b: &[u8],
        system: Option<&[u8]>,
        ks: &crate::engine::KeyState,
        f: impl FnOnce(RowView<'_>) -> R,
    ) -> Result<Option<R>> {
        // Now: the rows still believed, whose system end is open; every closed end is at or
        // before the key's latest system time, so as of that time they are the ones.
        let system = match (system, &ks.max_sys) {
            (Some(s), _) => TimeFilter::AsOf(s.to_vec()),
            (None, Some(m)) => TimeFilter::AsOf(m.to_vec()),
            (None, None) => TimeFilter::All,
        };
        let spec = ScanSpec {
            version: None,
            key_lo: Bound::Included(key.to_vec()),
            key_hi: Bound::Included(key.to_vec()),
            business: TimeFilter::AsOf(b.to_vec()),
            system,
            values: Values::All,
        };
        let (mut f, mut out) = (Some(f), None);
        let mut cursor = ScanCursor::default();
        while !cursor.is_done() {
            self.scan(&spec, &mut cursor, 64, |row| {
                if let Some(f) = f.take() {
                    out = Some(f(row));
                }
            })?;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests;
