//! The derived records of a target table (docs/FORMAT.md §9): what a query or a commit reads,
//! persisted so that nothing is replayed. A key's head (`K`) holds its hot state and the directory
//! of its frozen pages (`P`, each a cold page: [`super::cold_page`]); a commit's row directory
//! (`X`) says which rows it wrote (by key) and retired; the summary (`G`) says at which commit all
//! of them are current.

use rkyv::rancor;
use roaring::RoaringBitmap;
use serde::{Deserialize, Serialize};

use super::archive::{compress, decompress, with_decompressed, Codec};
use super::lz4::Effort;
use super::page_list::{ListBoxes, PageEntry, PageList};
use crate::error::{corrupt, Result};

/// What a key has frozen (see `engine::cold`).
#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize, Debug, Clone, PartialEq, Eq)]
pub(crate) struct FrozenHead {
    pub pages: Vec<PageEntry>,
    pub hot_from: Vec<u8>,
    pub sys: Option<Vec<u8>>,
    pub events: u64,
}

/// A key's head, but for its hot part (a cold page that follows it in the record).
#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize, Debug, Clone, PartialEq, Eq)]
pub(crate) struct HeadMeta {
    /// The key's number, which its rows carry in the row directories.
    pub no: u32,
    pub max_sys: Option<Vec<u8>>,
    pub deleted_since: Option<i64>,
    pub frozen: Option<FrozenHead>,
    /// The number the key's next page gets: numbers are never reused, so a page a thaw freed
    /// can stay until the next checkpoint deletes it.
    pub next_page: u32,
}

/// Set in a `K` record's first word when a page list in chunks ([`super::page_list`]) follows
/// the meta (format 10): the meta then lists no page itself.
const LISTED_APART: u32 = 1 << 31;

/// Set in a `K` record's first word when the zone map of the hot part's rows follows the meta
/// and the page list (format 11): a scan whose filter the zone rules out leaves the hot rows
/// undecoded, as it leaves a page unread. Heads of format 10 have none.
const HOT_ZONE: u32 = 1 << 30;

/// The bits of a `K` record's first word that hold the meta's length.
const META_LEN: u32 = HOT_ZONE - 1;

/// A `K` record: the length of the archived meta (u32 LE) and flags in its top bits, the meta,
/// then for a key of more than [`super::page_list::CHUNK`] pages ([`LISTED_APART`]) the length of
/// its page list (u32 LE) and the list (the meta then lists no page), then the length of the hot
/// rows' zone map (u32 LE) and the zone as an archive block, checksummed ([`HOT_ZONE`], always
/// written), then the hot part.
pub(crate) fn encode_head(meta: &HeadMeta, hot_zone: &[u8], hot: &[u8]) -> Result<Vec<u8>> {
    let archived = |meta: &HeadMeta| {
        let m = rkyv::to_bytes::<rancor::Error>(meta)
            .map_err(|e| corrupt(format!("cannot encode a key head: {e}")))?;
        compress(&m, Codec::Fast(Effort::Quick))
    };
    let (m, list) = match &meta.frozen {
        Some(f) if f.pages.len() > super::page_list::CHUNK => {
            let list = super::page_list::encode_list(&f.pages)?;
            let unlisted = HeadMeta {
                frozen: Some(FrozenHead {
                    pages: Vec::new(),
                    hot_from: f.hot_from.clone(),
                    sys: f.sys.clone(),
                    events: f.events,
                }),
                max_sys: meta.max_sys.clone(),
                ..*meta
            };
            (archived(&unlisted)?, Some(list))
        }
        _ => (archived(meta)?, None),
    };
    let len = u32::try_from(m.len())
        .ok()
        .filter(|&n| n <= META_LEN)
        .ok_or_else(|| corrupt("a key head's meta is too long"))?;
    let list_len = list.as_ref().map_or(0, |l| 4 + l.len());
    let zone = compress(hot_zone, Codec::Fast(Effort::Quick))?;
    let mut out = Vec::with_capacity(4 + m.len() + list_len + 4 + zone.len() + hot.len());
    let flags = HOT_ZONE | if list.is_some() { LISTED_APART } else { 0 };
    out.extend_from_slice(&(len | flags).to_le_bytes());
    out.extend_from_slice(&m);
    for part in list.as_deref().into_iter().chain([&zone[..]]) {
        let n = u32::try_from(part.len()).map_err(corrupt)?;
        out.extend_from_slice(&n.to_le_bytes());
        out.extend_from_slice(part);
    }
    out.extend_from_slice(hot);
    Ok(out)
}

/// A `K` record taken apart: its meta, its page list if kept apart (not decoded), the zone map
/// of its hot rows (format 11), its hot part.
struct SplitHead<'a> {
    meta: HeadMeta,
    list: Option<&'a [u8]>,
    hot_zone: Option<Vec<u8>>,
    hot: &'a [u8],
}

fn split_head(bytes: &[u8]) -> Result<SplitHead<'_>> {
    let word = bytes
        .get(..4)
        .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
        .ok_or_else(|| corrupt("key head too short"))?;
    let n = (word & META_LEN) as usize;
    let rest = &bytes[4..];
    if n > rest.len() {
        return Err(corrupt("key head shorter than its meta"));
    }
    let (m, mut rest) = rest.split_at(n);
    let meta = with_decompressed(m, |raw| {
        rkyv::from_bytes::<HeadMeta, rancor::Error>(raw)
            .map_err(|e| corrupt(format!("key head fails validation: {e}")))
    })?;
    let mut list = None;
    if word & LISTED_APART != 0 {
        if meta.frozen.as_ref().is_none_or(|f| !f.pages.is_empty()) {
            return Err(corrupt("key head lists its pages twice"));
        }
        let (l, after) = super::cold_page::split_prefixed(rest, "key head", "its page list")?;
        (list, rest) = (Some(l), after);
    }
    let mut hot_zone = None;
    if word & HOT_ZONE != 0 {
        let (z, after) = super::cold_page::split_prefixed(rest, "key head", "its hot zone")?;
        (hot_zone, rest) = (Some(with_decompressed(z, |raw| Ok(raw.to_vec()))?), after);
    }
    Ok(SplitHead {
        meta,
        list,
        hot_zone,
        hot: rest,
    })
}

/// The meta (listing every page) and the hot part of a `K` record.
pub(crate) fn decode_head(bytes: &[u8]) -> Result<(HeadMeta, &[u8])> {
    let SplitHead {
        mut meta,
        list,
        hot,
        ..
    } = split_head(bytes)?;
    if let (Some(list), Some(f)) = (list, &mut meta.frozen) {
        f.pages = super::page_list::decode_list(list, ListBoxes::Skip)?.entries()?;
    }
    Ok((meta, hot))
}

/// Checks that the boxes a `K` record's page list stores, if any, are those its pages' zones
/// make (`asof verify`).
pub(crate) fn check_list_boxes(bytes: &[u8]) -> Result<()> {
    match split_head(bytes)?.list {
        Some(list) => super::page_list::check_boxes(list),
        None => Ok(()),
    }
}

/// A `K` record as a key read to be read takes it ([`decode_head_listed`]).
pub(crate) struct ListedHead<'a> {
    pub meta: HeadMeta,
    /// The page list in chunks if the key has one (its chunks still compressed: the meta then
    /// lists no page).
    pub list: Option<PageList>,
    /// The zone map of the hot part's rows (`None`: a head of format 9 or 10, which has none).
    pub hot_zone: Option<Vec<u8>>,
    pub hot: &'a [u8],
}

/// A `K` record for a key read to be read, whose lookups and scans decompress only the chunks
/// of its page list, and decode only the hot rows, that their zones may need (or, with `boxes`,
/// whose scans of the latest version choose pages by their boxes).
pub(crate) fn decode_head_listed(bytes: &[u8], boxes: ListBoxes) -> Result<ListedHead<'_>> {
    let SplitHead {
        meta,
        list,
        hot_zone,
        hot,
    } = split_head(bytes)?;
    let list = (list.map(|l| super::page_list::decode_list(l, boxes))).transpose()?;
    Ok(ListedHead {
        meta,
        list,
        hot_zone,
        hot,
    })
}

/// An `X` record: the rows commit `version` wrote (ids `first..first + key_of.len()`, with the
/// number of each one's key) and the rows it retired.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RowDir {
    pub first: u32,
    pub key_of: Vec<u32>,
    pub retired: RoaringBitmap,
}

#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
struct RowDirRecord {
    first: u32,
    key_of: Vec<u32>,
    /// The retired ids, in roaring's portable serialization.
    retired: Vec<u8>,
}

pub(crate) fn encode_row_dir(d: &RowDir) -> Result<Vec<u8>> {
    let mut retired = Vec::with_capacity(d.retired.serialized_size());
    d.retired
        .serialize_into(&mut retired)
        .map_err(|e| corrupt(format!("cannot encode a row directory: {e}")))?;
    let rec = RowDirRecord {
        first: d.first,
        key_of: d.key_of.clone(),
        retired,
    };
    // zstd: a directory's key numbers are small and repeat, and LZ4 took twice the bytes (the
    // 1M-event workload's: 4.0 against 2.1 MB, session 41); it is read once per whole read of
    // the table.
    compress(
        &rkyv::to_bytes::<rancor::Error>(&rec)
            .map_err(|e| corrupt(format!("cannot encode a row directory: {e}")))?,
        Codec::Small,
    )
}

pub(crate) fn decode_row_dir(bytes: &[u8]) -> Result<RowDir> {
    let rec = rkyv::from_bytes::<RowDirRecord, rancor::Error>(&decompress(bytes)?)
        .map_err(|e| corrupt(format!("row directory fails validation: {e}")))?;
    let retired = RoaringBitmap::deserialize_from(&rec.retired[..])
        .map_err(|e| corrupt(format!("row directory: retired rows: {e}")))?;
    Ok(RowDir {
        first: rec.first,
        key_of: rec.key_of,
        retired,
    })
}

/// The `F` record: pages (key, page number) to delete.
#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
struct FreedRecord {
    keys: Vec<Vec<u8>>,
    pages: Vec<u32>,
}

pub(crate) fn encode_freed(pages: &[(Vec<u8>, u32)]) -> Result<Vec<u8>> {
    let rec = FreedRecord {
        keys: pages.iter().map(|(k, _)| k.clone()).collect(),
        pages: pages.iter().map(|(_, no)| *no).collect(),
    };
    compress(
        &rkyv::to_bytes::<rancor::Error>(&rec)
            .map_err(|e| corrupt(format!("cannot encode freed pages: {e}")))?,
        Codec::Fast(Effort::Quick),
    )
}

pub(crate) fn decode_freed(bytes: &[u8]) -> Result<Vec<(Vec<u8>, u32)>> {
    let rec = rkyv::from_bytes::<FreedRecord, rancor::Error>(&decompress(bytes)?)
        .map_err(|e| corrupt(format!("freed pages fail validation: {e}")))?;
    if rec.keys.len() != rec.pages.len() {
        return Err(corrupt(
            "freed pages: keys and page numbers differ in number",
        ));
    }
    Ok(rec.keys.into_iter().zip(rec.pages).collect())
}

/// The `G` record (JSON): the commit at which the table's `K`, `P` and `X` records are current,
/// and the table-wide state that is not per key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Summary {
    /// The table's last commit when they were written. Any other value means they are not
    /// current (a commit by a build that did not write them, a crash during a rebuild), and the
    /// table is rebuilt from its log.
    pub version: u64,
    /// Row versions (the next row id).
    pub rows: u64,
    /// Keys (heads).
    pub keys: u64,
    /// SCD1 truncate sequences.
    pub truncates: Vec<Vec<u8>>,
    /// Row versions not retired: the rows of the table's latest version, what a scan without
    /// time travel returns (absent from summaries written before it was kept: unknown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live: Option<u64>,
}

pub(crate) fn encode_summary(s: &Summary) -> Result<Vec<u8>> {
    serde_json::to_vec(s).map_err(corrupt)
}

pub(crate) fn decode_summary(bytes: &[u8]) -> Result<Summary> {
    serde_json::from_slice(bytes).map_err(|e| corrupt(format!("table summary: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_head_reads_back_with_its_hot_part() {
        let meta = HeadMeta {
            no: 7,
            max_sys: Some(vec![1, 2]),
            deleted_since: Some(-5),
            frozen: Some(FrozenHead {
                pages: vec![PageEntry {
                    no: 3,
                    len: 100,
                    head: 40,
                    zone: {
                        let mut z = crate::format::zone::ZoneBuilder::default();
                        z.add([Some(&[1]), None, None, None], 2, Some(5));
                        z.finish()
                    },
                }],
                hot_from: vec![9],
                sys: None,
                events: 12,
            }),
            next_page: 4,
        };
        let bytes = encode_head(&meta, b"zone", b"hot part").unwrap();
        let (m, hot) = decode_head(&bytes).unwrap();
        assert_eq!(m, meta);
        assert_eq!(hot, b"hot part");
        let listed = decode_head_listed(&bytes, ListBoxes::Make).unwrap();
        assert_eq!(
            (listed.hot_zone.as_deref(), listed.hot),
            (Some(&b"zone"[..]), &b"hot part"[..])
        );
        // A byte of the zone changed: its checksum fails, and the head reads as damaged.
        let mut bad = bytes.clone();
        let at = bad.len() - b"hot part".len() - 3;
        bad[at] ^= 0x01;
        assert!(decode_head_listed(&bad, ListBoxes::Make).is_err());
        assert!(decode_head(&bytes[..3]).is_err());
        assert!(decode_head(&bytes[..10]).is_err());
    }

    /// A head of format 10 (no zone of its hot rows, the flag clear) reads as it did: the
    /// hot part follows the meta, and no zone rules its rows out.
    #[test]
    fn a_head_of_format_10_reads_without_a_hot_zone() {
        let meta = HeadMeta {
            no: 1,
            max_sys: None,
            deleted_since: Some(4),
            frozen: None,
            next_page: 0,
        };
        let m = compress(
            &rkyv::to_bytes::<rancor::Error>(&meta).unwrap(),
            Codec::Fast(Effort::Quick),
        )
        .unwrap();
        let mut bytes = (m.len() as u32).to_le_bytes().to_vec();
        bytes.extend_from_slice(&m);
        bytes.extend_from_slice(b"hot part");
        let listed = decode_head_listed(&bytes, ListBoxes::Make).unwrap();
        assert_eq!(listed.meta, meta);
        assert_eq!((listed.hot_zone, listed.hot), (None, &b"hot part"[..]));
        assert_eq!(decode_head(&bytes).unwrap(), (meta, &b"hot part"[..]));
    }

    /// A key of more pages than a chunk holds has its list apart, in chunks: its head reads
    /// back the same, whole or with the list left in chunks.
    #[test]
    fn a_head_of_many_pages_reads_back_with_its_list_in_chunks() {
        let page = |no: u32| PageEntry {
            no,
            len: 100,
            head: 40,
            zone: {
                let mut z = crate::format::zone::ZoneBuilder::default();
                z.add([Some(&no.to_be_bytes()), None, None, None], 2, None);
                z.finish()
            },
        };
        for n in [0, 1, 16, 17, 64, 65, 1_000] {
            let meta = HeadMeta {
                no: 7,
                max_sys: Some(vec![1, 2]),
                deleted_since: None,
                frozen: Some(FrozenHead {
                    pages: (0..n).map(page).collect(),
                    hot_from: vec![9],
                    sys: Some(vec![3]),
                    events: 12,
                }),
                next_page: n,
            };
            let bytes = encode_head(&meta, b"zone", b"hot part").unwrap();
            let (m, hot) = decode_head(&bytes).unwrap();
            assert_eq!((&m, hot), (&meta, &b"hot part"[..]), "{n} pages");
            let ListedHead {
                meta: m,
                list,
                hot_zone,
                hot,
            } = decode_head_listed(&bytes, ListBoxes::Make).unwrap();
            assert_eq!(
                (hot_zone.as_deref(), hot),
                (Some(&b"zone"[..]), &b"hot part"[..])
            );
            let apart = n as usize > crate::format::page_list::CHUNK;
            assert_eq!(list.is_some(), apart, "{n} pages");
            let listed = match list {
                Some(l) => {
                    assert!(m.frozen.as_ref().unwrap().pages.is_empty());
                    l.entries().unwrap()
                }
                None => m.frozen.clone().unwrap().pages,
            };
            assert_eq!(listed, meta.frozen.as_ref().unwrap().pages);
            for cut in [3, 10, bytes.len() - 9] {
                assert!(
                    decode_head(&bytes[..cut]).is_err(),
                    "{n} pages, cut at {cut}"
                );
            }
        }
    }

    #[test]
    fn a_row_directory_reads_back() {
        let d = RowDir {
            first: 10,
            key_of: vec![0, 5, 5, 2],
            retired: [1u32, 4, 9].into_iter().collect(),
        };
        assert_eq!(decode_row_dir(&encode_row_dir(&d).unwrap()).unwrap(), d);
        assert!(decode_row_dir(b"\x01garbage").is_err());
    }
}
