//! A page's row block as it is stored (format 9): the same columns as [`RowBlock`], with each
//! column of numbers as narrow as its values allow. Row ids are stored as steps from the one
//! before, commits as offsets from the least, the entries of bounds and values in one byte when a
//! block has fewer than 255 of them (it has at most a few hundred), and bounds of one length
//! without offsets; integer value columns as offsets from the least, string columns as lengths.
//! Bytes of rows are what a scan reads and decompresses; with the histories in zstd, the 10M-event
//! workload's pages went from 1,657 to 1,082 MiB (PERFORMANCE.md, session 31).
//!
//! A stored block is read into a [`RowBlock`] (plain vectors): the readers index it as before.

use rkyv::rancor;

use super::columns::{ColumnData, VarBytes};
use crate::error::{corrupt, Result};

/// Target row versions of one key, in columns, as readers index them (`super::cold_page`):
/// what [`unpack`] gives.
#[derive(Debug, Default)]
pub(crate) struct RowBlock {
    pub(super) ids: Vec<u32>,
    /// The distinct bounds of the block's rows (encoded sequences), each once: a version's end is
    /// the next one's start, and the rows a commit retires and writes again share theirs.
    pub(super) bounds: VarBytes,
    /// Per row, four entries of `bounds`: its start, end, system start and system end
    /// (`u32::MAX`: it has none).
    pub(super) bound_of: Vec<u32>,
    pub(super) added: Vec<u64>,
    /// `u64::MAX`: not retired.
    pub(super) retired: Vec<u64>,
    /// Per row, which entry of `columns` holds its values: rows that show the same values (a
    /// version retired and written again with a new end, which every late or out-of-order event
    /// makes) share one.
    pub(super) value_of: Vec<u32>,
    /// The distinct values of the rows, an entry per [`RowBlock::value_of`] number.
    pub(super) columns: Vec<ColumnData>,
    /// Whether `bounds` are strictly ascending (`cmp_encoded` order), as a reader found them
    /// (`RowBlock::note_bounds_in_order`): pages written since the writer sorts them
    /// (`RowBlock::sort_bounds`) hold them so, older ones in the order their rows first show
    /// them.
    pub(super) bounds_sorted: bool,
}

/// A column of unsigned numbers, each `Option<u64>`, in the narrowest width that holds them: the
/// width's greatest value stands for `None`.
#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize, Debug, PartialEq)]
pub(super) enum Numbers {
    U8(Vec<u8>),
    U16(Vec<u16>),
    U32(Vec<u32>),
    U64(Vec<u64>),
}

impl RowBlock {
    /// The bytes it holds in memory (what a cache of decoded pages weighs it at).
    pub(crate) fn heap_bytes(&self) -> usize {
        fn of<T>(v: &Vec<T>) -> usize {
            v.capacity() * std::mem::size_of::<T>()
        }
        std::mem::size_of::<RowBlock>()
            + of(&self.ids)
            + self.bounds.heap_bytes()
            + of(&self.bound_of)
            + of(&self.added)
            + of(&self.retired)
            + of(&self.value_of)
            + of(&self.columns)
            + self
                .columns
                .iter()
                .map(ColumnData::heap_bytes)
                .sum::<usize>()
    }
}

impl Numbers {
    /// `values` in the narrowest width whose greatest value none of them reaches. A value of
    /// `u64::MAX` reads back as `None` (no caller stores one: see [`PackedRows`]).
    pub(super) fn pack(values: impl Iterator<Item = Option<u64>> + Clone) -> Numbers {
        let max = values.clone().flatten().max().unwrap_or(0);
        fn narrow<T: TryFrom<u64> + Copy>(
            values: impl Iterator<Item = Option<u64>>,
            none: T,
        ) -> Vec<T> {
            values
                .map(|v| v.and_then(|v| T::try_from(v).ok()).unwrap_or(none))
                .collect()
        }
        if max < u8::MAX as u64 {
            Numbers::U8(narrow(values, u8::MAX))
        } else if max < u16::MAX as u64 {
            Numbers::U16(narrow(values, u16::MAX))
        } else if max < u32::MAX as u64 {
            Numbers::U32(narrow(values, u32::MAX))
        } else {
            Numbers::U64(narrow(values, u64::MAX))
        }
    }
}

impl ArchivedNumbers {
    pub(super) fn len(&self) -> usize {
        match self {
            ArchivedNumbers::U8(v) => v.len(),
            ArchivedNumbers::U16(v) => v.len(),
            ArchivedNumbers::U32(v) => v.len(),
            ArchivedNumbers::U64(v) => v.len(),
        }
    }

    /// Calls `f` with each number in order (`None` where the width's greatest value stands):
    /// one loop per width.
    #[inline]
    pub(super) fn each(&self, mut f: impl FnMut(Option<u64>)) {
        match self {
            ArchivedNumbers::U8(v) => {
                (v.iter()).for_each(|&x| f((x != u8::MAX).then_some(x as u64)))
            }
            ArchivedNumbers::U16(v) => (v.iter())
                .map(|x| x.to_native())
                .for_each(|x| f((x != u16::MAX).then_some(x as u64))),
            ArchivedNumbers::U32(v) => (v.iter())
                .map(|x| x.to_native())
                .for_each(|x| f((x != u32::MAX).then_some(x as u64))),
            ArchivedNumbers::U64(v) => (v.iter())
                .map(|x| x.to_native())
                .for_each(|x| f((x != u64::MAX).then_some(x))),
        }
    }

    /// `f` of each number (`None` where the width's greatest value stands), collected: one
    /// loop per width, no call through a pointer per number.
    pub(super) fn collect<T>(&self, mut f: impl FnMut(Option<u64>) -> T) -> Vec<T> {
        match self {
            ArchivedNumbers::U8(v) => v
                .iter()
                .map(|&x| f((x != u8::MAX).then_some(x as u64)))
                .collect(),
            ArchivedNumbers::U16(v) => (v.iter())
                .map(|x| x.to_native())
                .map(|x| f((x != u16::MAX).then_some(x as u64)))
                .collect(),
            ArchivedNumbers::U32(v) => (v.iter())
                .map(|x| x.to_native())
                .map(|x| f((x != u32::MAX).then_some(x as u64)))
                .collect(),
            ArchivedNumbers::U64(v) => (v.iter())
                .map(|x| x.to_native())
                .map(|x| f((x != u64::MAX).then_some(x)))
                .collect(),
        }
    }
}

/// Byte strings (a row block's distinct bounds; an event block's keys and sequences, format 12):
/// without offsets when they all have one length (an encoded timestamp or integer sequence
/// always has 9 bytes, an encoded integer key too).
#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize, Debug)]
pub(super) enum ByteStrings {
    Fixed { width: u32, data: Vec<u8> },
    Varied(VarBytes),
}

impl ByteStrings {
    pub(super) fn pack(strings: VarBytes) -> ByteStrings {
        let lens = (strings.offsets.windows(2)).map(|w| w[1].wrapping_sub(w[0]));
        match lens.clone().next() {
            Some(width) if width > 0 && lens.clone().all(|l| l == width) => ByteStrings::Fixed {
                width,
                data: strings.data,
            },
            _ => ByteStrings::Varied(strings),
        }
    }
}

impl ArchivedByteStrings {
    pub(super) fn unpack(&self) -> Result<VarBytes> {
        Ok(match self {
            ArchivedByteStrings::Fixed { width, data } => {
                let width = width.to_native();
                if width == 0 || data.len() % width as usize != 0 || data.len() > u32::MAX as usize
                {
                    return Err(corrupt("a block's byte strings are cut short"));
                }
                VarBytes {
                    offsets: (0..=data.len() as u32).step_by(width as usize).collect(),
                    data: data.to_vec(),
                }
            }
            ArchivedByteStrings::Varied(v) => rkyv::deserialize::<VarBytes, rancor::Error>(v)
                .map_err(|e| corrupt(format!("a block fails validation: {e}")))?,
        })
    }
}

/// Which entries of a column are not NULL: all of them, or a byte each (0 = NULL) as
/// [`ColumnData`] holds them.
#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize, Debug)]
pub(super) enum Valid {
    All,
    Each(Vec<u8>),
}

impl Valid {
    fn pack(valid: Vec<u8>) -> Valid {
        if valid.iter().all(|&v| v == 1) {
            Valid::All
        } else {
            Valid::Each(valid)
        }
    }
}

impl ArchivedValid {
    /// The bytes of `n` entries.
    fn unpack(&self, n: usize) -> Vec<u8> {
        match self {
            ArchivedValid::All => vec![1; n],
            ArchivedValid::Each(v) => v.to_vec(),
        }
    }
}

/// A value column of a row block as stored: 64-bit integers (and dates and timestamps) as
/// offsets from the least, strings (and nested values' JSON text) as lengths and bytes, any other
/// column as an event block stores it.
#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize, Debug)]
pub(super) enum PackedColumn {
    Int {
        valid: Valid,
        least: i64,
        /// Per entry, its value less `least` (a NULL's slot holds 0, as in [`ColumnData`]).
        offsets: Numbers,
    },
    Str {
        valid: Valid,
        lengths: Numbers,
        data: Vec<u8>,
    },
    Plain(ColumnData),
}

impl PackedColumn {
    pub(super) fn pack(column: ColumnData) -> PackedColumn {
        match column {
            ColumnData::Int { valid, values } => {
                let least = values.iter().copied().min().unwrap_or(0);
                let offset = |v: i64| v.wrapping_sub(least) as u64;
                // An offset of `u64::MAX` (the whole range of i64) would read as `None`.
                if values.iter().any(|&v| offset(v) == u64::MAX) {
                    return PackedColumn::Plain(ColumnData::Int { valid, values });
                }
                PackedColumn::Int {
                    valid: Valid::pack(valid),
                    least,
                    offsets: Numbers::pack(values.iter().map(|&v| Some(offset(v)))),
                }
            }
            ColumnData::Str { valid, values } if values.offsets.first() == Some(&0) => {
                let lengths = values.offsets.windows(2).map(|w| w[1].checked_sub(w[0]));
                if lengths.clone().any(|l| l.is_none()) {
                    return PackedColumn::Plain(ColumnData::Str { valid, values });
                }
                PackedColumn::Str {
                    valid: Valid::pack(valid),
                    lengths: Numbers::pack(lengths.map(|l| l.map(u64::from))),
                    data: values.data,
                }
            }
            other => PackedColumn::Plain(other),
        }
    }
}

impl ArchivedPackedColumn {
    pub(super) fn unpack(&self) -> Result<ColumnData> {
        Ok(match self {
            ArchivedPackedColumn::Int {
                valid,
                least,
                offsets,
            } => {
                let least = least.to_native();
                let values = offsets.collect(|o| least.wrapping_add(o.unwrap_or(0) as i64));
                ColumnData::Int {
                    valid: valid.unpack(values.len()),
                    values,
                }
            }
            ArchivedPackedColumn::Str {
                valid,
                lengths,
                data,
            } => {
                let mut end = 0u64;
                let mut offsets = vec![0u32];
                offsets.extend(lengths.collect(|l| {
                    end = end.saturating_add(l.unwrap_or(u64::MAX));
                    end.min(u32::MAX as u64 + 1) as u32
                }));
                if end != data.len() as u64 {
                    return Err(corrupt("a cold row block's strings are cut short"));
                }
                ColumnData::Str {
                    valid: valid.unpack(offsets.len() - 1),
                    values: VarBytes {
                        offsets,
                        data: data.to_vec(),
                    },
                }
            }
            ArchivedPackedColumn::Plain(c) => rkyv::deserialize::<ColumnData, rancor::Error>(c)
                .map_err(|e| corrupt(format!("cold page fails validation: {e}")))?,
        })
    }
}

/// A [`RowBlock`] as stored: see the module's comment, and FORMAT.md §6 for the bytes.
#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize, Debug)]
pub(super) struct PackedRows {
    /// The first row's id.
    first_id: u32,
    /// Per row, its id less the one before (wrapping; the first row's step is 0).
    id_steps: Numbers,
    bounds: ByteStrings,
    /// Four per row, as in [`RowBlock`] (`None`: no bound).
    bound_of: Numbers,
    /// The least commit that wrote a row; `added` holds each row's commit less it.
    added_from: u64,
    added: Numbers,
    /// The least commit that retired a row; `retired` holds each row's commit less it (`None`:
    /// not retired).
    retired_from: u64,
    retired: Numbers,
    value_of: Numbers,
    columns: Vec<PackedColumn>,
}

/// `block` packed and archived (not compressed).
pub(super) fn pack(block: RowBlock) -> Result<rkyv::util::AlignedVec> {
    let first_id = block.ids.first().copied().unwrap_or(0);
    let steps = (block.ids.iter()).scan(first_id, |prev, &id| {
        Some(Some(id.wrapping_sub(std::mem::replace(prev, id)) as u64))
    });
    let entry = |e: u32| (e != u32::MAX).then_some(e as u64);
    let added_from = block.added.iter().copied().min().unwrap_or(0);
    let retired = |r: u64| (r != u64::MAX).then_some(r);
    let retired_from = block
        .retired
        .iter()
        .copied()
        .filter_map(retired)
        .min()
        .unwrap_or(0);
    let packed = PackedRows {
        first_id,
        id_steps: Numbers::pack(steps),
        bounds: ByteStrings::pack(block.bounds),
        bound_of: Numbers::pack(block.bound_of.iter().map(|&e| entry(e))),
        added_from,
        // Offsets from the least are never `u64::MAX`: the least one would have to be 0 and
        // the greatest `u64::MAX`, the retired rows' mark, which no commit is.
        added: Numbers::pack(block.added.iter().map(|&a| Some(a - added_from))),
        retired_from,
        retired: Numbers::pack(
            block
                .retired
                .iter()
                .map(|&r| Some(retired(r)? - retired_from)),
        ),
        value_of: Numbers::pack(block.value_of.iter().map(|&e| entry(e))),
        columns: block.columns.into_iter().map(PackedColumn::pack).collect(),
    };
    rkyv::to_bytes::<rancor::Error>(&packed)
        .map_err(|e| corrupt(format!("cannot encode cold page: {e}")))
}

/// The block archived by [`pack`] (decompressed), as plain vectors.
pub(super) fn unpack(bytes: &[u8]) -> Result<RowBlock> {
    let bad = |e: rancor::Error| corrupt(format!("cold page fails validation: {e}"));
    let p = rkyv::access::<ArchivedPackedRows, rancor::Error>(bytes).map_err(bad)?;
    let n = p.id_steps.len();
    // Lengths first: nothing is allocated for columns that disagree.
    if [p.added.len(), p.retired.len(), p.value_of.len()] != [n; 3]
        || Some(p.bound_of.len()) != n.checked_mul(4)
    {
        return Err(corrupt("cold row block columns differ in length"));
    }
    let mut id = p.first_id.to_native();
    let ids = p.id_steps.collect(|step| {
        id = id.wrapping_add(step.unwrap_or(0) as u32);
        id
    });
    let bounds = p.bounds.unpack()?;
    // An entry of `u32::MAX` is one no block has: the readers check every entry against the
    // number of bounds or values.
    let entries = |e: &ArchivedNumbers| -> Vec<u32> {
        e.collect(|e| {
            // A stored entry of `u32::MAX` or more is out of range, not absent.
            e.map_or(u32::MAX, |e| {
                u32::try_from(e)
                    .ok()
                    .filter(|&e| e != u32::MAX)
                    .unwrap_or(u32::MAX - 1)
            })
        })
    };
    let (added_from, retired_from) = (p.added_from.to_native(), p.retired_from.to_native());
    // A commit past `u64::MAX` is damage; marked, and refused once the column is read.
    let mut overflow = false;
    let mut commit = |from: u64, c: u64| {
        from.checked_add(c).unwrap_or_else(|| {
            overflow = true;
            0
        })
    };
    let added = p
        .added
        .collect(|a| commit(added_from, a.unwrap_or(u64::MAX)));
    let retired = p
        .retired
        .collect(|r| r.map_or(u64::MAX, |r| commit(retired_from, r)));
    if overflow {
        return Err(corrupt("a cold row's commit is out of range"));
    }
    Ok(RowBlock {
        ids,
        bounds,
        bound_of: entries(&p.bound_of),
        added,
        retired,
        value_of: entries(&p.value_of),
        columns: (p.columns.iter())
            .map(ArchivedPackedColumn::unpack)
            .collect::<Result<_>>()?,
        bounds_sorted: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Blocks of up to 300 rows: ids in any order, bounds of one length or several (up to 700
    /// of them: entries past one byte), commits anywhere below `u64::MAX`, rows not retired.
    fn blocks() -> impl Strategy<Value = RowBlock> {
        (1usize..300, 0usize..700, any::<bool>(), any::<u64>()).prop_flat_map(
            |(n, distinct, fixed, seed)| {
                let bounds_lens = if fixed {
                    Just(vec![9u32; distinct]).boxed()
                } else {
                    prop::collection::vec(0u32..20, distinct).boxed()
                };
                let entry =
                    move |of: usize| prop_oneof![Just(u32::MAX), (0..of.max(1) as u32)].boxed();
                let commit =
                    prop_oneof![0u64..2000, any::<u64>().prop_map(|c| c.min(u64::MAX - 1))];
                (
                    prop::collection::vec(
                        prop_oneof![
                            any::<u32>(),
                            (seed as u32)..(seed as u32).saturating_add(50)
                        ],
                        n,
                    ),
                    bounds_lens,
                    prop::collection::vec(entry(distinct), 4 * n),
                    prop::collection::vec(commit.clone(), n),
                    prop::collection::vec(prop_oneof![Just(u64::MAX), commit], n),
                    prop::collection::vec(entry(n), n),
                )
                    .prop_map(|(ids, lens, bound_of, added, retired, value_of)| {
                        let mut bounds = VarBytes::default();
                        for (i, len) in lens.iter().enumerate() {
                            bounds.push(&vec![i as u8; *len as usize]);
                        }
                        RowBlock {
                            ids,
                            bounds,
                            bound_of,
                            added,
                            retired,
                            value_of,
                            columns: Vec::new(),
                            bounds_sorted: false,
                        }
                    })
            },
        )
    }

    /// Value columns of `n` entries: integers anywhere in i64 or in a narrow range, strings,
    /// floats (stored plain), each with NULLs or without.
    fn columns(n: usize) -> impl Strategy<Value = Vec<ColumnData>> {
        let valid = prop_oneof![Just(vec![1u8; n]), prop::collection::vec(0u8..2, n)];
        let int = (
            valid.clone(),
            prop_oneof![
                prop::collection::vec(any::<i64>(), n),
                prop::collection::vec(-5i64..300, n),
                Just(
                    vec![i64::MIN, i64::MAX]
                        .into_iter()
                        .cycle()
                        .take(n)
                        .collect()
                ),
            ],
        )
            .prop_map(|(valid, values)| ColumnData::Int { valid, values });
        let string =
            (valid.clone(), prop::collection::vec(".{0,300}", n)).prop_map(|(valid, s)| {
                let mut values = VarBytes::default();
                for s in &s {
                    values.push(s.as_bytes());
                }
                ColumnData::Str { valid, values }
            });
        let float = (valid, prop::collection::vec(any::<f64>(), n))
            .prop_map(|(valid, values)| ColumnData::Float { valid, values });
        prop::collection::vec(prop_oneof![int, string, float], 0..4)
    }

    proptest! {
        #[test]
        fn packed_value_columns_read_back_as_they_were(
            columns in (0usize..40).prop_flat_map(columns)
        ) {
            let want = format!("{columns:?}");
            let block = RowBlock { columns, ..Default::default() };
            let back = unpack(&pack(block).unwrap()).unwrap();
            prop_assert_eq!(format!("{:?}", back.columns), want);
        }

        #[test]
        fn a_packed_block_with_bytes_changed_is_an_error_or_reads_never_a_panic(
            block in blocks(),
            at in any::<prop::sample::Index>(),
            to in any::<u8>(),
        ) {
            let mut bytes = pack(block).unwrap();
            let i = at.index(bytes.len());
            bytes[i] = to;
            let _ = unpack(&bytes);
        }

        #[test]
        fn a_packed_block_reads_back_as_it_was(block in blocks()) {
            let want = (
                block.ids.clone(),
                block.bounds.offsets.clone(),
                block.bounds.data.clone(),
                block.bound_of.clone(),
                block.added.clone(),
                block.retired.clone(),
                block.value_of.clone(),
            );
            let back = unpack(&pack(block).unwrap()).unwrap();
            let got = (
                back.ids,
                back.bounds.offsets,
                back.bounds.data,
                back.bound_of,
                back.added,
                back.retired,
                back.value_of,
            );
            prop_assert_eq!(got, want);
        }
    }

    fn numbers(values: &[Option<u64>]) -> Vec<Option<u64>> {
        let packed = Numbers::pack(values.iter().copied());
        let bytes = rkyv::to_bytes::<rancor::Error>(&packed).unwrap();
        let archived = rkyv::access::<ArchivedNumbers, rancor::Error>(&bytes).unwrap();
        archived.collect(|x| x)
    }

    #[test]
    fn numbers_take_the_narrowest_width_that_holds_them_and_read_back() {
        for (values, width) in [
            (vec![Some(0), None, Some(254)], "U8"),
            (vec![Some(255), None], "U16"),
            (vec![Some(65_535), Some(1)], "U32"),
            (vec![Some(u32::MAX as u64), None, Some(0)], "U64"),
            (vec![], "U8"),
            (vec![None, None], "U8"),
        ] {
            let packed = Numbers::pack(values.iter().copied());
            assert!(
                format!("{packed:?}").starts_with(width),
                "{values:?}: {packed:?}"
            );
            assert_eq!(numbers(&values), values);
        }
    }
}
