//! Tests of the cold page: rows, events and versions sharing values, damage, and a proptest of
//! what a page reads back.

use super::super::cold_batch::ColdBatch;
use super::*;
use std::sync::Arc;

fn row(values: &Row, start: u8) -> StoredRow {
    StoredRow {
        key: Bytes::from(&b"k"[..]),
        values: values.clone(),
        start: Some(Bytes::from(&[start][..])),
        end: None,
        sys_start: None,
        sys_end: None,
        added: 1,
        retired: None,
    }
}

/// A page of `rows` (ids 0, 1, …), without events or versions.
fn page_of_rows(types: &[ColumnType], rows: &[StoredRow]) -> Vec<u8> {
    let rows = rows.iter().enumerate().map(|(i, r)| (i as RowId, r));
    encode_cold(
        types,
        Effort::Quick,
        std::iter::empty(),
        std::iter::empty(),
        rows,
    )
    .unwrap()
    .0
}

#[test]
fn rows_that_share_values_store_them_once_and_read_back_sharing_them() {
    let types = [ColumnType::Int64, ColumnType::Utf8];
    let a: Row = vec![Value::Int(7), Value::from("seven")].into();
    let b: Row = vec![Value::Int(8), Value::Null].into();
    // A row written again with other bounds shares the first one's values; a row with
    // equal values of its own allocation keeps its own entry.
    let a_again: Row = vec![Value::Int(7), Value::from("seven")].into();
    let rows = [row(&a, 1), row(&b, 2), row(&a, 3), row(&a_again, 4)];
    let page = page_of_rows(&types, &rows);
    let block = decode_cold_rows(&page).unwrap();
    assert_eq!(block.value_of, [0, 1, 0, 2]);
    let key = Bytes::from(&b"k"[..]);
    let back = block.rows(&key, types.len()).unwrap();
    let values: Vec<&[Value]> = back.iter().map(|(_, r)| &r.values[..]).collect();
    assert_eq!(values, [&a[..], &b[..], &a[..], &a[..]]);
    assert!(Arc::ptr_eq(&back[0].1.values, &back[2].1.values));
    assert!(!Arc::ptr_eq(&back[0].1.values, &back[3].1.values));
    let starts: Vec<u8> = back
        .iter()
        .map(|(_, r)| r.start.as_ref().unwrap()[0])
        .collect();
    assert_eq!(starts, [1, 2, 3, 4]);
    // Read one row at a time, as a scan does.
    let batch = ColdBatch::new(key, types.len(), vec![Arc::new(block)]).unwrap();
    let mut out = Vec::new();
    batch.values(2, &mut out).unwrap();
    assert_eq!(out, a.to_vec());
}

fn event(values: &Row) -> Event {
    Event {
        kind: EventKind::Upsert,
        values: values.clone(),
        update: None,
        origin: Origin::Feed,
    }
}

/// The history of `page` as stored, accessed.
fn history(page: &[u8]) -> rkyv::util::AlignedVec {
    let parts = split_page(page).unwrap();
    assert_eq!(parts.values, HistoryValues::Shared);
    decompress(parts.history).unwrap()
}

#[test]
fn events_and_versions_take_the_values_of_the_rows_that_show_them_and_read_back_sharing_them() {
    let types = [ColumnType::Int64, ColumnType::Utf8];
    let a: Row = vec![Value::Int(7), Value::from("seven")].into();
    let b: Row = vec![Value::Int(8), Value::Null].into();
    // An event no row shows (its version was replaced), with values of its own.
    let c: Row = vec![Value::Int(9), Value::from("nine")].into();
    let (ea, eb, ec) = (event(&a), event(&b), event(&c));
    let events = [
        (&[1u8][..], &[1u8][..], &ea),
        (&[2], &[2], &eb),
        (&[3], &[3], &ec),
    ];
    let versions = [
        (&[1u8][..], &a, Some(&[2u8][..]), Some(0)),
        (&[2], &b, None, Some(1)),
    ];
    let rows = [row(&a, 1), row(&b, 2)];
    let (page, _) = encode_cold(
        &types,
        Effort::Quick,
        events.into_iter(),
        versions.into_iter(),
        rows.iter().enumerate().map(|(i, r)| (i as RowId, r)),
    )
    .unwrap();
    let raw = history(&page);
    let stored = rkyv::access::<ArchivedSharedHistory, rancor::Error>(&raw).unwrap();
    assert_eq!(stored.row_entries, 2);
    // a, b, then c (its own entry 0, numbered after the rows' two), then a and b again.
    assert_eq!(stored.value_of.collect(|e| e), [0, 1, 2, 0, 1].map(Some));
    let (evs, vers) = (
        stored.events.unpack().unwrap(),
        stored.versions.unpack().unwrap(),
    );
    assert!(evs.columns.is_empty() && vers.columns.is_empty());
    let own = rkyv::deserialize::<Vec<ColumnData>, rancor::Error>(&stored.own).unwrap();
    assert_eq!(own.len(), 2);
    assert_eq!(own[0].get(0).unwrap(), Value::Int(9));
    assert!(
        own.iter().all(|c| c.get(1).is_err()),
        "one entry of its own"
    );

    let key = Bytes::from(&b"k"[..]);
    let (evs, vers, back) = decode_cold(&page, &key, 2, Events::Decode).unwrap();
    let values: Vec<&[Value]> = evs.iter().map(|e| &e.event.values[..]).collect();
    assert_eq!(values, [&a[..], &b[..], &c[..]]);
    assert_eq!(vers.len(), 2);
    assert_eq!(
        (&vers[0].1[..], vers[0].2.as_deref()),
        (&a[..], Some(&[2u8][..]))
    );
    assert_eq!(
        (&vers[1].1[..], vers[1].2.as_deref(), vers[1].3),
        (&b[..], None, Some(1))
    );
    // One `Row` per entry, as when they were written: a page frozen again after a thaw
    // finds them shared.
    assert!(Arc::ptr_eq(&evs[0].event.values, &back[0].1.values));
    assert!(Arc::ptr_eq(&vers[0].1, &back[0].1.values));
    assert!(Arc::ptr_eq(&evs[1].event.values, &vers[1].1));
    // The history alone reads the same.
    let (evs2, vers2) = decode_cold_history(&page, 2, Events::Decode).unwrap();
    assert_eq!(evs2.len(), 3);
    assert_eq!(&evs2[2].event.values[..], &c[..]);
    assert_eq!(
        vers2.iter().map(|v| v.3).collect::<Vec<_>>(),
        [Some(0), Some(1)]
    );
}

#[test]
fn a_history_whose_values_are_out_of_range_is_damage_not_a_panic() {
    let types = [ColumnType::Int64];
    let a: Row = vec![Value::Int(1)].into();
    let ea = event(&a);
    let (page, _) = encode_cold(
        &types,
        Effort::Quick,
        [(&[1u8][..], &[1u8][..], &ea)].into_iter(),
        std::iter::empty(),
        [(0, &row(&a, 1))].into_iter(),
    )
    .unwrap();
    let raw = history(&page);
    let stored = rkyv::access::<ArchivedSharedHistory, rancor::Error>(&raw).unwrap();
    let mut history: SharedHistory =
        rkyv::deserialize::<SharedHistory, rancor::Error>(stored).unwrap();
    let key = Bytes::from(&b"k"[..]);
    // Values past the own entries (one past, or far past: nothing is allocated for it), more
    // entries than events, another width, more row entries than rows.
    for (value_of, own_columns, row_entries) in [
        (vec![Some(1)], 1, 1),
        (vec![Some(u64::MAX - 1)], 1, 1),
        (vec![Some(0), Some(0)], 1, 1),
        (vec![Some(0)], 2, 1),
        (vec![Some(0)], 1, 2),
    ] {
        history.value_of = Numbers::pack(value_of.into_iter());
        history.row_entries = row_entries;
        history.own = (0..own_columns)
            .map(|_| new_column(&ColumnType::Int64))
            .collect();
        let mut bad = page[..cold_page_head(&page)].to_vec();
        bad.extend(
            compress(
                &rkyv::to_bytes::<rancor::Error>(&history).unwrap(),
                HISTORY_CODEC,
            )
            .unwrap(),
        );
        let e = decode_cold(&bad, &key, 1, Events::Decode).unwrap_err();
        assert!(e.to_string().contains("the store is corrupt"), "{e}");
    }
}

#[test]
fn a_row_whose_values_entry_is_out_of_range_is_damage() {
    let types = [ColumnType::Int64];
    let a: Row = vec![Value::Int(1)].into();
    let rows = [row(&a, 1), row(&a, 2)];
    let page = page_of_rows(&types, &rows);
    let mut block = decode_cold_rows(&page).unwrap();
    let key = Bytes::from(&b"k"[..]);
    for bad in [1, 2, u32::MAX] {
        block.value_of[1] = bad;
        let e = block.rows(&key, 1).unwrap_err();
        assert!(e.to_string().contains("the store is corrupt"), "{bad}: {e}");
    }
}

#[test]
fn bounds_rows_share_are_stored_once_and_read_back_in_place() {
    let types = [ColumnType::Int64];
    let a: Row = vec![Value::Int(1)].into();
    let b = |x: u8| Some(Bytes::from(&[x][..]));
    // Version [1, 2) retired at system time 9 and written again; then [2, ...).
    let mut rows = [row(&a, 1), row(&a, 1), row(&a, 2)];
    rows[0].end = b(2);
    rows[0].sys_end = b(9);
    rows[1].end = b(2);
    rows[1].sys_start = b(9);
    rows[2].sys_start = b(9);
    let page = page_of_rows(&types, &rows);
    let block = decode_cold_rows(&page).unwrap();
    assert_eq!(block.bounds.data, [1, 2, 9]);
    let none = NO_BOUND;
    assert_eq!(
        block.bound_of,
        [0, 1, none, 2, 0, 1, 2, none, 1, none, 2, none]
    );
    let key = Bytes::from(&b"k"[..]);
    let back: Vec<StoredRow> = block
        .rows(&key, 1)
        .unwrap()
        .into_iter()
        .map(|(_, r)| r)
        .collect();
    for (got, want) in back.iter().zip(&rows) {
        let bounds = |r: &StoredRow| [&r.start, &r.end, &r.sys_start, &r.sys_end].map(Clone::clone);
        assert_eq!(bounds(got), bounds(want));
    }
    let batch = ColdBatch::new(key, 1, vec![Arc::new(block)]).unwrap();
    assert_eq!(
        batch.at(1).bounds,
        [Some(&[1][..]), Some(&[2][..]), Some(&[9][..]), None]
    );
}

#[test]
fn a_row_whose_bound_is_out_of_range_is_damage() {
    let types = [ColumnType::Int64];
    let a: Row = vec![Value::Int(1)].into();
    let rows = [row(&a, 1), row(&a, 2)];
    let page = page_of_rows(&types, &rows);
    let mut block = decode_cold_rows(&page).unwrap();
    block.bound_of[4] = 2;
    let key = Bytes::from(&b"k"[..]);
    let e = block.rows(&key, 1).unwrap_err();
    assert!(e.to_string().contains("bounds are out of range"), "{e}");
    // Stored so, it is refused as it is decoded, before any batch reads it.
    let stored = compress(
        &packed_rows::pack(block).unwrap(),
        Codec::Fast(Effort::Quick),
    )
    .unwrap();
    let e = decode_row_part(&stored).unwrap_err();
    assert!(e.to_string().contains("bounds are out of range"), "{e}");
}

mod shared_values {
    use super::*;
    use proptest::prelude::*;
    use std::sync::Arc;

    /// A page's contents as the engine holds them: events, versions and rows whose values are
    /// drawn from a pool of allocations (so some share one, as an event, its version and its row
    /// do), or made apart.
    #[derive(Debug)]
    struct Contents {
        events: Vec<(Vec<u8>, Vec<u8>, Event)>,
        versions: Vec<Version>,
        rows: Vec<(RowId, StoredRow)>,
    }

    /// A timeline version: start, values, end, row.
    type Version = (Vec<u8>, Row, Option<Vec<u8>>, Option<RowId>);

    fn contents() -> impl Strategy<Value = Contents> {
        let values = (any::<i64>(), prop::option::of("[a-c]{0,3}")).prop_map(|(i, s)| -> Row {
            vec![Value::Int(i), s.map_or(Value::Null, Value::from)].into()
        });
        (
            prop::collection::vec(values, 1..6),
            0usize..20,
            0usize..20,
            0usize..30,
        )
            .prop_flat_map(|(pool, n_events, n_versions, n_rows)| {
                // An index into the pool, or past it: values of its own allocation.
                let pick = 0..pool.len() + 2;
                (
                    Just(pool),
                    prop::collection::vec((pick.clone(), any::<u16>(), any::<bool>()), n_events),
                    prop::collection::vec((pick.clone(), any::<u16>(), any::<bool>()), n_versions),
                    prop::collection::vec((pick, any::<u16>(), any::<bool>()), n_rows),
                )
            })
            .prop_map(|(pool, events, versions, rows)| {
                let take = |i: usize, seed: u16| -> Row {
                    pool.get(i)
                        .cloned()
                        .unwrap_or_else(|| vec![Value::Int(seed as i64), Value::Null].into())
                };
                let seq = |s: u16| s.to_be_bytes().to_vec();
                Contents {
                    events: (events.iter())
                        .map(|&(i, s, del)| {
                            let event = Event {
                                kind: if del {
                                    EventKind::Delete
                                } else {
                                    EventKind::Upsert
                                },
                                values: take(i, s),
                                update: None,
                                origin: Origin::Feed,
                            };
                            (seq(s), seq(s.wrapping_add(1)), event)
                        })
                        .collect(),
                    versions: (versions.iter().enumerate())
                        .map(|(n, &(i, s, open))| {
                            let end = (!open).then(|| seq(s.wrapping_add(7)));
                            (seq(s), take(i, s), end, (n % 3 != 0).then_some(n as RowId))
                        })
                        .collect(),
                    rows: (rows.iter().enumerate())
                        .map(|(n, &(i, s, retired))| {
                            let row = StoredRow {
                                key: Bytes::from(&b"k"[..]),
                                values: take(i, s),
                                start: Some(seq(s).into()),
                                end: None,
                                sys_start: Some(seq(s.wrapping_add(3)).into()),
                                sys_end: None,
                                added: n as u64 + 1,
                                retired: retired.then_some(n as u64 + 5),
                            };
                            (n as RowId, row)
                        })
                        .collect(),
                }
            })
    }

    /// `c` as a page, its rows compressed as a freeze compresses them (HC, with the state each
    /// thread keeps: a page frozen again is the same bytes only if no block depends on the last).
    fn encode(types: &[ColumnType], c: &Contents) -> Vec<u8> {
        encode_cold(
            types,
            Effort::Thorough,
            c.events.iter().map(|(s, y, e)| (&s[..], &y[..], e)),
            c.versions
                .iter()
                .map(|(s, v, e, r)| (&s[..], v, e.as_deref(), *r)),
            c.rows.iter().map(|(id, r)| (*id, r)),
        )
        .unwrap()
        .0
    }

    /// Every values allocation of `c`, in order: events, versions, rows.
    fn allocations(c: &Contents) -> Vec<&Row> {
        (c.events.iter().map(|e| &e.2.values))
            .chain(c.versions.iter().map(|v| &v.1))
            .chain(c.rows.iter().map(|r| &r.1.values))
            .collect()
    }

    proptest! {
        /// A page reads back what was written, its events, versions and rows sharing values
        /// exactly where they shared them; and a page frozen again from what was read back is
        /// the same bytes (what a thaw followed by a freeze writes).
        #[test]
        fn a_page_reads_back_its_values_shared_as_written_and_freezes_again_the_same(c in contents()) {
            let types = [ColumnType::Int64, ColumnType::Utf8];
            let page = encode(&types, &c);
            let key = Bytes::from(&b"k"[..]);
            let (events, versions, rows) = decode_cold(&page, &key, 2, Events::Decode).unwrap();
            let back = Contents {
                events: (events.into_iter())
                    .map(|e| (e.seq.to_vec(), e.sys.to_vec(), e.event))
                    .collect(),
                versions: (versions.into_iter())
                    .map(|(s, v, e, r)| (s.to_vec(), v, e.map(|e| e.to_vec()), r))
                    .collect(),
                rows,
            };
            prop_assert_eq!(back.events.len(), c.events.len());
            for (a, b) in back.events.iter().zip(&c.events) {
                prop_assert_eq!((&a.0, &a.1, a.2.kind), (&b.0, &b.1, b.2.kind));
            }
            prop_assert_eq!(back.versions.len(), c.versions.len());
            for (a, b) in back.versions.iter().zip(&c.versions) {
                prop_assert_eq!((&a.0, &a.2, a.3), (&b.0, &b.2, b.3));
            }
            prop_assert_eq!(back.rows.len(), c.rows.len());
            for (a, b) in back.rows.iter().zip(&c.rows) {
                prop_assert_eq!(a.0, b.0);
                prop_assert_eq!(&a.1.start, &b.1.start);
                prop_assert_eq!((a.1.added, a.1.retired), (b.1.added, b.1.retired));
            }
            let (was, now) = (allocations(&c), allocations(&back));
            for (i, (a, b)) in was.iter().zip(&now).enumerate() {
                prop_assert_eq!(&a[..], &b[..], "values {}", i);
                for (j, (x, y)) in was.iter().zip(&now).enumerate() {
                    prop_assert_eq!(Arc::ptr_eq(a, x), Arc::ptr_eq(b, y), "{} and {}", i, j);
                }
            }
            prop_assert_eq!(encode(&types, &back), page);
        }
    }
}

/// A page of `rows` with ids `ids`, row `i`'s start, end and system start `[i]`, `[i + 1]`,
/// `[i + 100]` (system end open), retired by commit 5 when `i` is odd.
fn block_of_ids(ids: &[RowId]) -> RowBlock {
    let values: Row = vec![Value::Int(1)].into();
    let rows: Vec<StoredRow> = (0..ids.len() as u8)
        .map(|i| StoredRow {
            end: Some(Bytes::from(&[i + 1][..])),
            sys_start: Some(Bytes::from(&[i + 100][..])),
            retired: (i % 2 == 1).then_some(5),
            ..row(&values, i)
        })
        .collect();
    int_block(ids, &rows)
}

/// The rows of a page of one `Int64` column holding `rows` with ids `ids`, decoded.
fn int_block(ids: &[RowId], rows: &[StoredRow]) -> RowBlock {
    let page = encode_cold(
        &[ColumnType::Int64],
        Effort::Quick,
        std::iter::empty(),
        std::iter::empty(),
        ids.iter().copied().zip(rows),
    )
    .unwrap()
    .0;
    decode_cold_rows(&page).unwrap()
}

#[test]
fn a_filtered_batch_of_interleaved_pages_indexes_the_kept_rows_in_id_order() {
    use super::super::cold_batch::TemporalBound;
    // Two pages whose ids interleave, as a key's pages split by business time do.
    let key = Bytes::from(&b"k"[..]);
    let blocks = || {
        [[1, 4, 6, 9], [2, 3, 7, 8]]
            .map(|ids| Arc::new(block_of_ids(&ids)))
            .to_vec()
    };
    let all = ColdBatch::new(key.clone(), 1, blocks()).unwrap();
    let ids = |c: &ColdBatch| (0..).map_while(|p| c.id_at(p)).collect::<Vec<_>>();
    assert_eq!(ids(&all), [1, 2, 3, 4, 6, 7, 8, 9]);
    // Only the rows not retired (each page's first and third).
    let live = ColdBatch::new_where(key, 1, blocks(), |rows, kept| {
        kept.extend((0..rows.len() as u32).filter(|&i| rows.row(i as usize).commits().1.is_none()))
    })
    .unwrap();
    assert_eq!(ids(&live), [1, 2, 6, 7]);
    assert_eq!(live.first_at_or_after(3), 2);
    // The rows taken, their bounds a block at a time as one at a time, for each bound.
    let positions = [0, 1, 3];
    let taken = live.select(&positions);
    for which in TemporalBound::ALL {
        let one_by_one: Vec<_> = (0..positions.len())
            .map(|j| taken.bound(j, which))
            .collect();
        assert_eq!(
            taken.bounds(which).collect::<Vec<_>>(),
            one_by_one,
            "{which:?}"
        );
    }
    let starts: Vec<_> = taken
        .bounds(TemporalBound::Start)
        .map(|s| s.unwrap()[0])
        .collect();
    assert_eq!(starts, [0, 0, 2]);
    assert!(taken.bounds(TemporalBound::SystemEnd).all(|e| e.is_none()));
}

#[test]
fn bounds_read_as_integers_a_block_at_a_time_equal_those_read_a_row_at_a_time() {
    use super::super::cold_batch::TemporalBound;
    let int = |x: i64| {
        let mut out = Vec::new();
        crate::keycodec::encode_value(&Value::Int(x), &ColumnType::Int64, &mut out).unwrap();
        Some(Bytes::from(out))
    };
    let values: Row = vec![Value::Int(1)].into();
    // Two pages: row `i` from `i` to `i + 1` on business time, from `-5 * i` on system time;
    // the last row of each page open on both ends.
    let page = |ids: &[RowId]| {
        let n = ids.len() as i64;
        let rows: Vec<StoredRow> = (0..n)
            .map(|i| {
                let id = i64::from(ids[i as usize]);
                let last = i == n - 1;
                StoredRow {
                    start: int(id),
                    end: if last { None } else { int(id + 1) },
                    sys_start: int(-5 * id),
                    sys_end: if last { None } else { int(i64::MAX) },
                    ..row(&values, 0)
                }
            })
            .collect();
        Arc::new(int_block(ids, &rows))
    };
    let key = Bytes::from(&b"k"[..]);
    let batch = ColdBatch::new(key.clone(), 1, vec![page(&[1, 4, 6]), page(&[2, 3])]).unwrap();
    let positions = [0, 1, 2, 4];
    let taken = batch.select(&positions);
    for which in TemporalBound::ALL {
        let (mut values, mut valid) = (vec![7], vec![true]);
        assert!(
            taken.int_bounds(which, &mut values, &mut valid),
            "{which:?}"
        );
        let one_by_one: Vec<Option<i64>> = (0..positions.len())
            .map(|j| {
                taken
                    .bound(j, which)
                    .map(|b| crate::keycodec::decode_int(b).unwrap())
            })
            .collect();
        let read: Vec<Option<i64>> = (values[1..].iter().zip(&valid[1..]))
            .map(|(&v, &ok)| ok.then_some(v))
            .collect();
        assert_eq!(read, one_by_one, "{which:?}");
        assert_eq!((values[0], valid[0]), (7, true), "what was there stays");
    }
    // Rows 1, 2, 3, 6 (ids in order): 3 and 6 the last of their pages, open.
    let (mut ends, mut valid) = (Vec::new(), Vec::new());
    assert!(taken.int_bounds(TemporalBound::End, &mut ends, &mut valid));
    assert_eq!(valid, [true, true, false, false]);
    assert_eq!(ends[..2], [2, 3]);

    // Bounds that are not one integer each (a sequence of one byte): nothing appended, also
    // when integers come first, in the same block or in the blocks before.
    let other = ColdBatch::new(key.clone(), 1, vec![Arc::new(block_of_ids(&[1, 2]))]).unwrap();
    let mixed = {
        let mut rows: Vec<StoredRow> = (0..3)
            .map(|i| StoredRow {
                start: int(i),
                ..row(&values, 0)
            })
            .collect();
        rows[2].start = Some(Bytes::from(&[9u8][..]));
        Arc::new(int_block(&[20, 21, 22], &rows))
    };
    let after_ints = ColdBatch::new(key, 1, vec![page(&[1, 4]), mixed]).unwrap();
    for (batch, rows) in [(&other, &[0, 1][..]), (&after_ints, &[0, 1, 2, 3, 4][..])] {
        let (mut values, mut valid) = (vec![7], vec![true]);
        let taken = batch.select(rows);
        assert!(!taken.int_bounds(TemporalBound::Start, &mut values, &mut valid));
        assert_eq!((values, valid), (vec![7], vec![true]));
    }
    // The rows before the one that is not, read alone, are integers.
    let (mut values, mut valid) = (Vec::new(), Vec::new());
    let first = [0, 1, 2, 3];
    assert!(after_ints
        .select(&first)
        .int_bounds(TemporalBound::Start, &mut values, &mut valid));
    assert_eq!(values, [1, 4, 0, 1]);
    assert_eq!(valid, [true; 4]);
}

/// A page stores its bounds in ascending order, whatever order its rows show them in, and reads
/// back the same rows; a block read for a scan notes the order, and a time placed among its
/// bounds counts those below it.
#[test]
fn a_page_stores_its_bounds_in_order_and_reads_back_the_same_rows() {
    let values: Row = vec![Value::Int(1)].into();
    // First shown: 30, 40, 10, 20, 35, 5.
    let rows: Vec<StoredRow> = [(30, Some(40)), (10, Some(20)), (35, None), (5, Some(10))]
        .map(|(s, e)| StoredRow {
            end: e.map(|e: u8| Bytes::from(&[e][..])),
            ..row(&values, s)
        })
        .to_vec();
    let page = page_of_rows(&[ColumnType::Int64], &rows);
    let block = decode_cold_rows(&page).unwrap();
    assert!(block.bounds_sorted);
    let bounds: Vec<&[u8]> = (0..6).map(|e| block.bounds.get(e).unwrap()).collect();
    let ascending: [&[u8]; 6] = [&[5], &[10], &[20], &[30], &[35], &[40]];
    assert_eq!(bounds, ascending);
    let key = Bytes::from(&b"k"[..]);
    let back = block.rows(&key, 1).unwrap();
    let expected: Vec<(RowId, StoredRow)> = rows
        .into_iter()
        .enumerate()
        .map(|(i, r)| (i as RowId, r))
        .collect();
    assert_eq!(back, expected);
    let batch = ColdBatch::new_where(key, 1, vec![Arc::new(block)], |rows, kept| {
        assert!(rows.bounds_in_order());
        assert_eq!(rows.bounds_below(&[20], false), 2);
        assert_eq!(rows.bounds_below(&[20], true), 3);
        assert_eq!(rows.bounds_below(&[0], true), 0);
        assert_eq!(rows.bounds_below(&[99], false), 6);
        // The rows whose start is below 20: the second and the fourth.
        kept.extend((0..rows.len() as u32).filter(|&i| {
            let start = rows
                .row(i as usize)
                .entry(super::super::cold_batch::TemporalBound::Start);
            start.is_some_and(|s| s < 2)
        }));
    })
    .unwrap();
    assert_eq!(
        (0..).map_while(|p| batch.id_at(p)).collect::<Vec<_>>(),
        [1, 3]
    );
}

/// A block whose bounds are not in order (a page written before they were stored so) is noted
/// as such: a scan compares its bounds as bytes.
#[test]
fn a_block_whose_bounds_are_out_of_order_is_noted_so() {
    let values: Row = vec![Value::Int(1)].into();
    let rows = [row(&values, 9), row(&values, 2), row(&values, 5)];
    let mut block = decode_cold_rows(&page_of_rows(&[ColumnType::Int64], &rows)).unwrap();
    assert!(block.bounds_sorted);
    // The order of a page written before: reversed, the rows renumbered to match.
    let n = block.ids.len() as u32;
    let reversed: Vec<Vec<u8>> = (0..n as usize)
        .rev()
        .map(|e| block.bounds.get(e).unwrap().to_vec())
        .collect();
    block.bounds = VarBytes::default();
    for b in &reversed {
        block.bounds.push(b);
    }
    for e in block.bound_of.iter_mut().filter(|e| **e != NO_BOUND) {
        *e = n - 1 - *e;
    }
    block.note_bounds_in_order();
    assert!(!block.bounds_sorted);
    let key = Bytes::from(&b"k"[..]);
    assert_eq!(
        block.rows(&key, 1).unwrap(),
        rows.into_iter()
            .enumerate()
            .map(|(i, r)| (i as RowId, r))
            .collect::<Vec<_>>()
    );
    ColdBatch::new_where(key, 1, vec![Arc::new(block)], |rows, _| {
        assert!(!rows.bounds_in_order());
    })
    .unwrap();
}

mod bounds_in_order {
    use super::*;
    use proptest::prelude::*;

    /// `x` encoded as a BIGINT sequence is: nine bytes, eight of them shared by near values.
    fn enc(x: i64) -> Bytes {
        let mut out = Vec::new();
        crate::keycodec::encode_value(&Value::Int(x), &ColumnType::Int64, &mut out).unwrap();
        Bytes::from(&out[..])
    }

    proptest! {
        /// Rows with bounds in any order, near and far apart, signed: the page stores them in
        /// order, its block is noted so, reads back the same rows, and places a time among its
        /// bounds where a count of them does.
        #[test]
        fn a_page_of_any_bounds_stores_them_in_order_and_places_times_among_them(
            rows in prop::collection::vec(
                (-300..300i64, prop::option::of(-300..300i64), prop::option::of(-300..300i64)),
                1..30,
            ),
            times in prop::collection::vec(-310..310i64, 1..8),
        ) {
            let values: Row = vec![Value::Int(1)].into();
            let rows: Vec<StoredRow> = rows
                .iter()
                .map(|&(s, e, sys)| StoredRow {
                    start: Some(enc(s)),
                    end: e.map(enc),
                    sys_start: sys.map(enc),
                    ..row(&values, 0)
                })
                .collect();
            let block = decode_cold_rows(&page_of_rows(&[ColumnType::Int64], &rows)).unwrap();
            prop_assert!(block.bounds_sorted);
            let key = Bytes::from(&b"k"[..]);
            let expected: Vec<(RowId, StoredRow)> =
                rows.iter().cloned().enumerate().map(|(i, r)| (i as RowId, r)).collect();
            prop_assert_eq!(block.rows(&key, 1).unwrap(), expected);
            let distinct: std::collections::BTreeSet<i64> = rows
                .iter()
                .flat_map(|r| [&r.start, &r.end, &r.sys_start])
                .flatten()
                .map(|b| crate::keycodec::decode_int(b).unwrap())
                .collect();
            ColdBatch::new_where(key, 1, vec![Arc::new(block)], |rows, _| {
                for &t in &times {
                    let below = distinct.iter().filter(|&&d| d < t).count() as u32;
                    let at_or_below = distinct.iter().filter(|&&d| d <= t).count() as u32;
                    assert_eq!(rows.bounds_below(&enc(t), false), below, "{t}");
                    assert_eq!(rows.bounds_below(&enc(t), true), at_or_below, "{t}");
                }
            })
            .unwrap();
        }
    }
}
