//! The stored form of a commit's events: a columnar block, archived with rkyv and validated
//! (bytecheck) when read, then compressed with LZ4.
//!
//! Events are the durable log of a table: the in-memory state (timelines, row versions with the
//! commits that wrote and retired them) is a deterministic function of the commits' events, and is
//! rebuilt by replaying them on open. A block holds the events of one commit in columns: encoded
//! keys, sequences and system sequences, a flag byte, and one typed column per output column, so
//! that an event costs tens of bytes on disk, not hundreds. Blocks are cut near
//! [`TARGET_BLOCK_BYTES`] of raw data, well under sled's 128 KiB large-value threshold.

use rkyv::rancor;
use rkyv::util::AlignedVec;

use crate::engine::cold::ColdRows;
use crate::engine::fold::{Bytes, Event, EventKind, RowId};
use crate::engine::{Incoming, StoredRow};
use crate::error::{corrupt, Result};
use crate::lz4;
use crate::value::{ColumnType, Row, Value};

/// About how many raw bytes one block holds before a new one is started.
pub(crate) const TARGET_BLOCK_BYTES: usize = 32 * 1024;

/// First byte of a stored block: the block format.
const BLOCK_LZ4_RKYV: u8 = 1;

/// Variable-length byte strings: `data[offsets[i]..offsets[i + 1]]`.
#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize, Debug, Default)]
pub(crate) struct VarBytes {
    pub offsets: Vec<u32>,
    pub data: Vec<u8>,
}

impl VarBytes {
    fn push(&mut self, b: &[u8]) {
        if self.offsets.is_empty() {
            self.offsets.push(0);
        }
        self.data.extend_from_slice(b);
        self.offsets.push(self.data.len() as u32);
    }
    fn get(&self, i: usize) -> Result<&[u8]> {
        let (a, b) = (self.offsets.get(i), self.offsets.get(i + 1));
        match (a, b) {
            (Some(&a), Some(&b)) if a <= b && (b as usize) <= self.data.len() => {
                Ok(&self.data[a as usize..b as usize])
            }
            _ => Err(corrupt("byte column offsets out of range")),
        }
    }
}

/// One output column of a block. `valid` has one byte per event (0 = NULL).
#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize, Debug)]
pub(crate) enum ColumnData {
    Bool {
        valid: Vec<u8>,
        values: Vec<u8>,
    },
    Int {
        valid: Vec<u8>,
        values: Vec<i64>,
    },
    UInt {
        valid: Vec<u8>,
        values: Vec<u64>,
    },
    Float {
        valid: Vec<u8>,
        values: Vec<f64>,
    },
    Decimal {
        valid: Vec<u8>,
        values: Vec<i128>,
    },
    Str {
        valid: Vec<u8>,
        values: VarBytes,
    },
    Bin {
        valid: Vec<u8>,
        values: VarBytes,
    },
    /// Lists of strings: event `i` has items `items[lists[i]..lists[i + 1]]`.
    List {
        valid: Vec<u8>,
        lists: Vec<u32>,
        item_valid: Vec<u8>,
        items: VarBytes,
    },
}

/// The events of (part of) one commit, in columns.
#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize, Debug, Default)]
pub(crate) struct EventBlock {
    pub keys: VarBytes,
    pub seqs: VarBytes,
    pub syss: VarBytes,
    /// Bit 0: delete. Bit 1: has a COLUMNS TO UPDATE list.
    pub flags: Vec<u8>,
    /// COLUMNS TO UPDATE lists of the events that have one, in order: `update[update_offsets[j]..]`.
    pub update_offsets: Vec<u32>,
    pub update: Vec<u32>,
    pub columns: Vec<ColumnData>,
    /// Truncate sequences (SCD1).
    pub truncates: Vec<Vec<u8>>,
}

fn new_column(ty: &ColumnType) -> ColumnData {
    match ty {
        ColumnType::Boolean => ColumnData::Bool {
            valid: vec![],
            values: vec![],
        },
        ColumnType::UInt8 | ColumnType::UInt16 | ColumnType::UInt32 | ColumnType::UInt64 => {
            ColumnData::UInt {
                valid: vec![],
                values: vec![],
            }
        }
        ColumnType::Float32 | ColumnType::Float64 => ColumnData::Float {
            valid: vec![],
            values: vec![],
        },
        ColumnType::Decimal128 { .. } => ColumnData::Decimal {
            valid: vec![],
            values: vec![],
        },
        ColumnType::Utf8 => ColumnData::Str {
            valid: vec![],
            values: VarBytes::default(),
        },
        ColumnType::Binary => ColumnData::Bin {
            valid: vec![],
            values: VarBytes::default(),
        },
        ColumnType::ListUtf8 => ColumnData::List {
            valid: vec![],
            lists: vec![0],
            item_valid: vec![],
            items: VarBytes::default(),
        },
        _ => ColumnData::Int {
            valid: vec![],
            values: vec![],
        },
    }
}

impl ColumnData {
    /// Appends `v`; returns its raw size.
    fn push(&mut self, v: &Value) -> usize {
        match (self, v) {
            (ColumnData::Bool { valid, values }, v) => {
                valid.push(!v.is_null() as u8);
                values.push(matches!(v, Value::Bool(true)) as u8);
                2
            }
            (ColumnData::Int { valid, values }, v) => {
                valid.push(!v.is_null() as u8);
                values.push(if let Value::Int(i) = v { *i } else { 0 });
                9
            }
            (ColumnData::UInt { valid, values }, v) => {
                valid.push(!v.is_null() as u8);
                values.push(if let Value::UInt(i) = v { *i } else { 0 });
                9
            }
            (ColumnData::Float { valid, values }, v) => {
                valid.push(!v.is_null() as u8);
                values.push(if let Value::Float(f) = v { *f } else { 0.0 });
                9
            }
            (ColumnData::Decimal { valid, values }, v) => {
                valid.push(!v.is_null() as u8);
                values.push(if let Value::Decimal(d) = v { *d } else { 0 });
                17
            }
            (ColumnData::Str { valid, values }, v) => {
                valid.push(!v.is_null() as u8);
                let s = if let Value::Str(s) = v {
                    s.as_bytes()
                } else {
                    &[]
                };
                values.push(s);
                5 + s.len()
            }
            (ColumnData::Bin { valid, values }, v) => {
                valid.push(!v.is_null() as u8);
                let s = if let Value::Bytes(s) = v { &s[..] } else { &[] };
                values.push(s);
                5 + s.len()
            }
            (
                ColumnData::List {
                    valid,
                    lists,
                    item_valid,
                    items,
                },
                v,
            ) => {
                valid.push(!v.is_null() as u8);
                let mut n = 5;
                if let Value::List(l) = v {
                    for it in l.iter() {
                        item_valid.push(it.is_some() as u8);
                        let s = it.as_deref().unwrap_or("");
                        items.push(s.as_bytes());
                        n += 5 + s.len();
                    }
                }
                lists.push(item_valid.len() as u32);
                n
            }
        }
    }

    fn get(&self, i: usize) -> Result<Value> {
        let valid = |v: &Vec<u8>| {
            v.get(i)
                .copied()
                .ok_or_else(|| corrupt("column shorter than the block"))
        };
        let at = |n: usize| {
            if i < n {
                Ok(())
            } else {
                Err(corrupt("column shorter than the block"))
            }
        };
        Ok(match self {
            ColumnData::Bool { valid: va, values } => {
                at(values.len())?;
                if valid(va)? == 0 {
                    Value::Null
                } else {
                    Value::Bool(values[i] != 0)
                }
            }
            ColumnData::Int { valid: va, values } => {
                at(values.len())?;
                if valid(va)? == 0 {
                    Value::Null
                } else {
                    Value::Int(values[i])
                }
            }
            ColumnData::UInt { valid: va, values } => {
                at(values.len())?;
                if valid(va)? == 0 {
                    Value::Null
                } else {
                    Value::UInt(values[i])
                }
            }
            ColumnData::Float { valid: va, values } => {
                at(values.len())?;
                if valid(va)? == 0 {
                    Value::Null
                } else {
                    Value::Float(values[i])
                }
            }
            ColumnData::Decimal { valid: va, values } => {
                at(values.len())?;
                if valid(va)? == 0 {
                    Value::Null
                } else {
                    Value::Decimal(values[i])
                }
            }
            ColumnData::Str { valid: va, values } => {
                if valid(va)? == 0 {
                    Value::Null
                } else {
                    let s = std::str::from_utf8(values.get(i)?)
                        .map_err(|_| corrupt("invalid utf-8 in a stored string"))?;
                    Value::Str(s.into())
                }
            }
            ColumnData::Bin { valid: va, values } => {
                if valid(va)? == 0 {
                    Value::Null
                } else {
                    Value::Bytes(values.get(i)?.into())
                }
            }
            ColumnData::List {
                valid: va,
                lists,
                item_valid,
                items,
            } => {
                if valid(va)? == 0 {
                    Value::Null
                } else {
                    let (a, b) = match (lists.get(i), lists.get(i + 1)) {
                        (Some(&a), Some(&b)) if a <= b => (a as usize, b as usize),
                        _ => return Err(corrupt("list offsets out of range")),
                    };
                    let mut out = Vec::with_capacity(b - a);
                    for j in a..b {
                        if *item_valid
                            .get(j)
                            .ok_or_else(|| corrupt("list items out of range"))?
                            == 0
                        {
                            out.push(None);
                        } else {
                            let s = std::str::from_utf8(items.get(j)?)
                                .map_err(|_| corrupt("invalid utf-8 in a stored list"))?;
                            out.push(Some(s.into()));
                        }
                    }
                    Value::List(out.into())
                }
            }
        })
    }
}

/// Cuts a commit's logged events into blocks; the truncates go into the first.
pub(crate) fn event_blocks(
    events: &[Incoming],
    truncates: &[Bytes],
    types: &[ColumnType],
) -> Vec<EventBlock> {
    let empty = || EventBlock::empty(types);
    let mut blocks = vec![EventBlock {
        truncates: truncates.iter().map(|b| b.to_vec()).collect(),
        ..empty()
    }];
    let mut size = 0;
    for e in events {
        if size > TARGET_BLOCK_BYTES {
            blocks.push(empty());
            size = 0;
        }
        let b = blocks.last_mut().expect("one block");
        size += b.push(&e.key, &e.seq, &e.sys, &e.event, 0);
    }
    blocks
}

impl EventBlock {
    fn empty(types: &[ColumnType]) -> EventBlock {
        EventBlock {
            columns: types.iter().map(new_column).collect(),
            ..Default::default()
        }
    }

    /// Appends one event (`extra` is or-ed into its flags); returns its raw size.
    fn push(&mut self, key: &[u8], seq: &[u8], sys: &[u8], event: &Event, extra: u8) -> usize {
        self.keys.push(key);
        self.seqs.push(seq);
        self.syss.push(sys);
        let mut flags = (event.kind == EventKind::Delete) as u8 | extra;
        if let Some(u) = &event.update {
            flags |= 2;
            if self.update_offsets.is_empty() {
                self.update_offsets.push(0);
            }
            self.update.extend_from_slice(u);
            self.update_offsets.push(self.update.len() as u32);
        }
        self.flags.push(flags);
        let mut size = key.len() + seq.len() + sys.len() + 13;
        for (c, v) in self.columns.iter_mut().zip(event.values.iter()) {
            size += c.push(v);
        }
        size
    }

    /// The events of the block; `width` is the table's number of output columns.
    pub fn events(&self, width: usize) -> Result<Vec<Incoming>> {
        if self.columns.len() != width {
            return Err(corrupt(format!(
                "block has {} columns, the table {width}",
                self.columns.len()
            )));
        }
        let n = self.flags.len();
        let mut out = Vec::with_capacity(n);
        let mut upd = 0usize;
        for i in 0..n {
            let values: Vec<Value> = self
                .columns
                .iter()
                .map(|c| c.get(i))
                .collect::<Result<_>>()?;
            let update = if self.flags[i] & 2 != 0 {
                let (a, b) = match (
                    self.update_offsets.get(upd),
                    self.update_offsets.get(upd + 1),
                ) {
                    (Some(&a), Some(&b)) if a <= b && (b as usize) <= self.update.len() => {
                        (a as usize, b as usize)
                    }
                    _ => return Err(corrupt("update lists out of range")),
                };
                upd += 1;
                let cols = &self.update[a..b];
                if cols.iter().any(|&c| c as usize >= width) {
                    return Err(corrupt("event updates a column the table does not have"));
                }
                Some(cols.into())
            } else {
                None
            };
            out.push(Incoming {
                key: self.keys.get(i)?.into(),
                seq: self.seqs.get(i)?.into(),
                sys: self.syss.get(i)?.into(),
                event: Event {
                    kind: if self.flags[i] & 1 != 0 {
                        EventKind::Delete
                    } else {
                        EventKind::Upsert
                    },
                    values: values.into(),
                    update,
                },
            });
        }
        Ok(out)
    }
}

/// Serialises and compresses a block.
pub(crate) fn encode_block(b: &EventBlock) -> Result<Vec<u8>> {
    let raw = rkyv::to_bytes::<rancor::Error>(b)
        .map_err(|e| corrupt(format!("cannot encode block: {e}")))?;
    compress(&raw)
}

/// Decompresses and validates a stored block.
pub(crate) fn decode_block(bytes: &[u8]) -> Result<EventBlock> {
    let al = decompress(bytes)?;
    rkyv::from_bytes::<EventBlock, rancor::Error>(&al)
        .map_err(|e| corrupt(format!("block fails validation: {e}")))
}

fn compress(raw: &[u8]) -> Result<Vec<u8>> {
    let mut out = vec![BLOCK_LZ4_RKYV];
    out.extend_from_slice(&lz4::compress(raw)?);
    Ok(out)
}

/// The archived bytes of a block written by [`compress`], aligned for rkyv. Its length is the
/// one the block records (see [`lz4`]); no ratio is assumed.
fn decompress(bytes: &[u8]) -> Result<AlignedVec<16>> {
    let (&format, body) = bytes.split_first().ok_or_else(|| corrupt("empty block"))?;
    if format != BLOCK_LZ4_RKYV {
        return Err(corrupt(format!("unknown block format {format}")));
    }
    // Straight into the aligned buffer: no second copy.
    let mut al = AlignedVec::<16>::new();
    lz4::decompress_into(body, &mut al)?;
    Ok(al)
}

/// Flag of a timeline version in a [`ColdPage`] whose business end is open.
const OPEN_END: u8 = 4;

/// The frozen part of one key's state (see `engine::cold`), but for its row versions: its
/// events, and its timeline versions as pseudo-events (sequence = start, system sequence = end)
/// with the rows that show them.
///
/// A cold page is the key's [`RowBlock`] and its `ColdHistory`, each archived and compressed on
/// its own, after the length of the first (`u32`, little-endian): a scan reads only the rows.
#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize, Debug, Default)]
pub(crate) struct ColdHistory {
    events: EventBlock,
    versions: EventBlock,
    /// Per version, the row that shows it (`u32::MAX`: none).
    version_rows: Vec<u32>,
}

/// How many leading bytes of a cold page hold its row versions (the length and the row part).
pub(crate) fn cold_page_head(page: &[u8]) -> usize {
    page.get(..4).map_or(0, |b| {
        4 + u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize
    })
}

/// The two parts of a cold page (or of its head, whose history part is empty): row versions,
/// history.
fn split_page(bytes: &[u8]) -> Result<(&[u8], &[u8])> {
    let n = bytes
        .get(..4)
        .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize)
        .ok_or_else(|| corrupt("cold page too short"))?;
    let rest = &bytes[4..];
    if n > rest.len() {
        return Err(corrupt("cold page shorter than its row part"));
    }
    Ok(rest.split_at(n))
}

/// Target row versions of one key, in columns.
#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize, Debug, Default)]
pub(crate) struct RowBlock {
    ids: Vec<u32>,
    /// Per row, bit `i` set when bound `i` (start, end, system start, system end) is present.
    present: Vec<u8>,
    starts: VarBytes,
    ends: VarBytes,
    sys_starts: VarBytes,
    sys_ends: VarBytes,
    added: Vec<u64>,
    /// `u64::MAX`: not retired.
    retired: Vec<u64>,
    columns: Vec<ColumnData>,
}

/// A version of a key's business timeline: start, values, end, row.
pub(crate) type ColdVersion = (Bytes, Row, Option<Bytes>, Option<RowId>);

/// What a cold page holds, decoded: events (with empty keys), versions and rows.
pub(crate) type ColdContents = (Vec<Incoming>, Vec<ColdVersion>, ColdRows);

/// Encodes events `(seq, sys, event)`, timeline versions and row versions of one key as a
/// compressed [`ColdPage`].
pub(crate) fn encode_cold<'a>(
    types: &[ColumnType],
    events: impl Iterator<Item = (&'a [u8], &'a [u8], &'a Event)>,
    versions: impl Iterator<Item = (&'a [u8], &'a Row, Option<&'a [u8]>, Option<RowId>)>,
    rows: impl Iterator<Item = (RowId, &'a StoredRow)>,
) -> Result<Vec<u8>> {
    let mut page = ColdHistory {
        events: EventBlock::empty(types),
        versions: EventBlock::empty(types),
        version_rows: Vec::new(),
    };
    let mut block = RowBlock {
        columns: types.iter().map(new_column).collect(),
        ..Default::default()
    };
    for (seq, sys, ev) in events {
        page.events.push(&[], seq, sys, ev, 0);
    }
    for (start, values, end, row) in versions {
        let ev = Event {
            kind: EventKind::Upsert,
            values: values.clone(),
            update: None,
        };
        let open = if end.is_none() { OPEN_END } else { 0 };
        page.versions
            .push(&[], start, end.unwrap_or_default(), &ev, open);
        page.version_rows.push(row.unwrap_or(u32::MAX));
    }
    let b = &mut block;
    for (id, r) in rows {
        b.ids.push(id);
        let mut present = 0u8;
        for (i, (col, bound)) in [
            (&mut b.starts, &r.start),
            (&mut b.ends, &r.end),
            (&mut b.sys_starts, &r.sys_start),
            (&mut b.sys_ends, &r.sys_end),
        ]
        .into_iter()
        .enumerate()
        {
            present |= u8::from(bound.is_some()) << i;
            col.push(bound.as_deref().unwrap_or_default());
        }
        b.present.push(present);
        b.added.push(r.added);
        b.retired.push(r.retired.unwrap_or(u64::MAX));
        for (c, v) in b.columns.iter_mut().zip(r.values.iter()) {
            c.push(v);
        }
    }
    let encode_err = |e: rancor::Error| corrupt(format!("cannot encode cold page: {e}"));
    let rows = compress(&rkyv::to_bytes::<rancor::Error>(&block).map_err(encode_err)?)?;
    let history = compress(&rkyv::to_bytes::<rancor::Error>(&page).map_err(encode_err)?)?;
    let mut out = Vec::with_capacity(4 + rows.len() + history.len());
    out.extend_from_slice(&(rows.len() as u32).to_le_bytes());
    out.extend_from_slice(&rows);
    out.extend_from_slice(&history);
    Ok(out)
}

/// Decodes a page of `key` written by [`encode_cold`].
pub(crate) fn decode_cold(bytes: &[u8], key: &Bytes, width: usize) -> Result<ColdContents> {
    let (row_part, _) = split_page(bytes)?;
    let (events, versions) = decode_cold_history(bytes, width)?;
    let rows = decode_row_part(row_part)?.rows(key, width)?;
    Ok((events, versions, rows))
}

/// Only the events (with empty keys) and timeline versions of a page written by
/// [`encode_cold`].
pub(crate) fn decode_cold_history(
    bytes: &[u8],
    width: usize,
) -> Result<(Vec<Incoming>, Vec<ColdVersion>)> {
    let (_, history) = split_page(bytes)?;
    let page = rkyv::from_bytes::<ColdHistory, rancor::Error>(&decompress(history)?)
        .map_err(|e| corrupt(format!("cold page fails validation: {e}")))?;
    let events = page.events.events(width)?;
    let versions = page.versions.events(width)?;
    if versions.len() != page.version_rows.len() {
        return Err(corrupt("cold page has versions without rows"));
    }
    let versions = versions
        .into_iter()
        .zip(&page.versions.flags)
        .zip(&page.version_rows)
        .map(|((v, &flags), &row)| {
            let end = (flags & OPEN_END == 0).then_some(v.sys);
            (v.seq, v.event.values, end, (row != u32::MAX).then_some(row))
        })
        .collect();
    Ok((events, versions))
}

/// Only the row versions of a page written by [`encode_cold`], as a block.
pub(crate) fn decode_cold_rows(bytes: &[u8]) -> Result<RowBlock> {
    decode_row_part(split_page(bytes)?.0)
}

fn decode_row_part(rows: &[u8]) -> Result<RowBlock> {
    rkyv::from_bytes::<RowBlock, rancor::Error>(&decompress(rows)?)
        .map_err(|e| corrupt(format!("cold page fails validation: {e}")))
}

/// A key's frozen row versions, decoded for reading: the blocks of its pages as they are (bounds
/// stay bytes), with an index by row id. A row's bounds and commits are read in place; its values
/// are built only when asked for ([`ColdBatch::values`]), so rows a scan filters out cost none.
pub(crate) struct ColdBatch {
    key: Bytes,
    blocks: Vec<RowBlock>,
    /// (row id, block, row in block), sorted by row id.
    index: Vec<(RowId, u32, u32)>,
}

/// One row of a [`ColdBatch`], but for its values: `(key, bounds, added, retired)`.
pub(crate) struct ColdRow<'a> {
    pub key: &'a [u8],
    /// Start, end, system start, system end.
    pub bounds: [Option<&'a [u8]>; 4],
    pub added: u64,
    pub retired: Option<u64>,
}

impl ColdBatch {
    /// Decodes `blocks` of `key`'s pages (see [`decode_cold_rows`]) for a table `width` columns
    /// wide.
    pub fn new(key: Bytes, width: usize, blocks: Vec<RowBlock>) -> Result<ColdBatch> {
        let mut index = Vec::new();
        for (bi, b) in blocks.iter().enumerate() {
            let n = b.ids.len();
            b.check(n, width)?;
            index.extend((0..n).map(|i| (b.ids[i], bi as u32, i as u32)));
        }
        index.sort_unstable_by_key(|e| e.0);
        Ok(ColdBatch { key, blocks, index })
    }

    /// The values of the row at position `pos`, into `out` (cleared first).
    pub fn values(&self, pos: usize, out: &mut Vec<Value>) -> Result<()> {
        let (_, b, i) = self.index[pos];
        out.clear();
        for c in &self.blocks[b as usize].columns {
            out.push(c.get(i as usize)?);
        }
        Ok(())
    }

    /// The position, in id order, of the first row whose id is `id` or more.
    pub fn first_at_or_after(&self, id: RowId) -> usize {
        self.index.partition_point(|e| e.0 < id)
    }

    /// The id of the row at position `pos` (in id order), if there is one.
    pub fn id_at(&self, pos: usize) -> Option<RowId> {
        self.index.get(pos).map(|e| e.0)
    }

    /// The row at position `pos` (in id order); `pos` must be less than the number of rows.
    pub fn at(&self, pos: usize) -> ColdRow<'_> {
        let (_, b, i) = self.index[pos];
        let (b, i) = (&self.blocks[b as usize], i as usize);
        // The block was checked when the batch was made: every slice below is in range.
        fn slice(col: &VarBytes, i: usize) -> &[u8] {
            &col.data[col.offsets[i] as usize..col.offsets[i + 1] as usize]
        }
        let present = b.present[i];
        let bound = |col, bit: u8| (present & (1 << bit) != 0).then(|| slice(col, i));
        let retired = b.retired[i];
        ColdRow {
            key: &self.key,
            bounds: [
                bound(&b.starts, 0),
                bound(&b.ends, 1),
                bound(&b.sys_starts, 2),
                bound(&b.sys_ends, 3),
            ],
            added: b.added[i],
            retired: (retired != u64::MAX).then_some(retired),
        }
    }
}

impl VarBytes {
    /// Whether the column holds `n` well-formed entries (no entries at all when `n` is 0).
    fn holds(&self, n: usize) -> bool {
        let o = &self.offsets;
        (n == 0 && o.len() <= 1 && self.data.is_empty())
            || (o.len() == n + 1
                && o[0] == 0
                && o.windows(2).all(|w| w[0] <= w[1])
                && o[n] as usize <= self.data.len())
    }
}

impl RowBlock {
    /// Checks that every column of the block has `n` entries and well-formed offsets.
    fn check(&self, n: usize, width: usize) -> Result<()> {
        let lens = [self.present.len(), self.added.len(), self.retired.len()];
        let bounds = [&self.starts, &self.ends, &self.sys_starts, &self.sys_ends];
        if self.columns.len() != width
            || lens.iter().any(|&l| l != n)
            || bounds.iter().any(|b| !b.holds(n))
        {
            return Err(corrupt("cold row block columns differ in length"));
        }
        Ok(())
    }

    /// The block's rows as stored rows of `key`.
    pub fn rows(&self, key: &Bytes, width: usize) -> Result<ColdRows> {
        let n = self.ids.len();
        self.check(n, width)?;
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            let bound = |col: &VarBytes, bit: u8| -> Result<Option<Bytes>> {
                if self.present[i] & (1 << bit) == 0 {
                    return Ok(None);
                }
                col.get(i).map(|b| Some(b.into()))
            };
            let values: Vec<Value> = self
                .columns
                .iter()
                .map(|c| c.get(i))
                .collect::<Result<_>>()?;
            let retired = self.retired[i];
            out.push((
                self.ids[i],
                StoredRow {
                    key: key.clone(),
                    values: values.into(),
                    start: bound(&self.starts, 0)?,
                    end: bound(&self.ends, 1)?,
                    sys_start: bound(&self.sys_starts, 2)?,
                    sys_end: bound(&self.sys_ends, 3)?,
                    added: self.added[i],
                    retired: (retired != u64::MAX).then_some(retired),
                },
            ));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_round_trip_and_garbage_is_an_error() {
        let types = vec![
            ColumnType::Int64,
            ColumnType::Utf8,
            ColumnType::ListUtf8,
            ColumnType::Decimal128 {
                precision: 10,
                scale: 2,
            },
        ];
        let ev = |k: u8, del: bool, upd: Option<Vec<u32>>| Incoming {
            key: vec![1, k].into(),
            seq: vec![1, 2, 3].into(),
            sys: Vec::new().into(),
            event: Event {
                kind: if del {
                    EventKind::Delete
                } else {
                    EventKind::Upsert
                },
                values: vec![
                    Value::Int(k as i64),
                    Value::Str("é".into()),
                    Value::List(vec![Some("a".into()), None].into()),
                    Value::Decimal(-5),
                ]
                .into(),
                update: upd.map(Into::into),
            },
        };
        let events = vec![
            ev(1, false, None),
            ev(2, true, Some(vec![0, 2])),
            ev(3, false, Some(vec![])),
        ];
        let blocks = event_blocks(&events, &[vec![9u8].into()], &types);
        let bytes = encode_block(&blocks[0]).unwrap();
        let back = decode_block(&bytes).unwrap();
        let got = back.events(types.len()).unwrap();
        assert_eq!(got.len(), 3);
        for (a, b) in got.iter().zip(&events) {
            assert_eq!(
                (&a.key, &a.seq, a.event.kind, &a.event.update),
                (&b.key, &b.seq, b.event.kind, &b.event.update)
            );
            assert_eq!(a.event.values[..], b.event.values[..]);
        }
        assert_eq!(back.truncates, vec![vec![9u8]]);
        for bad in [
            vec![],
            vec![7u8, 1, 2],
            vec![1u8, 255, 255, 255, 255, 0],
            bytes[..bytes.len() / 2].to_vec(),
        ] {
            assert!(decode_block(&bad).is_err());
        }
    }
}
