//! Entry points for fuzzing the decoders of stored data (shared by `fuzz/` and `tests/fuzz.rs`).
//! Each takes arbitrary bytes and must return an error, never panic, on anything it did not write.

use crate::error::Result;
use crate::format::page_boxes::BoxTest;

/// Decodes an event block (rkyv validated with bytecheck, then LZ4 or zstd) and its events, as opening a
/// store does. Returns the number of events.
pub fn decode_event_block(data: &[u8], width: usize) -> Result<usize> {
    let b = crate::format::packed_events::decode_block(data)?;
    Ok(b.events(width)?.len())
}

/// Decodes a source table chunk (LZ4, then Arrow IPC). Returns the number of rows.
pub fn decode_source_chunk(data: &[u8]) -> Result<usize> {
    Ok(crate::source::SourceTable::decode_chunk(data)?
        .iter()
        .map(|b| b.num_rows())
        .sum())
}

/// Decodes a key head (`K`): its meta, its page list whole and, if kept apart in chunks, chunk
/// by chunk and by its boxes, as a commit and a read of the key do, and its boxes against its zones,
/// as `asof verify` does. Returns the number of pages it lists.
pub fn decode_key_head(data: &[u8]) -> Result<usize> {
    let (meta, _) = crate::format::derived::decode_head(data)?;
    let head = crate::format::derived::decode_head_listed(
        data,
        crate::format::page_list::ListBoxes::Make,
    )?;
    if let Some(list) = head.list {
        let _ = list.heap_bytes();
        list.entries_where(|z| z.live().next().is_some())?;
        if let Some(boxes) = list.live() {
            let all = crate::format::ranked::RankedFilter::ALL;
            let _ = boxes.pages_where(&BoxTest::new(all, all)).count();
        }
        let _ = list.heap_bytes();
    }
    crate::format::derived::check_list_boxes(data)?;
    if let Some(z) = &head.hot_zone {
        let _ = crate::format::zone::PageZone::new(z).all().count();
    }
    Ok(meta.frozen.map_or(0, |f| f.pages.len()))
}

/// Decodes a cold page (`P`, or a key head's hot part) whole, its rows, events and timeline
/// versions, as a thaw does, for a table `width` columns wide. Returns the number of rows,
/// events and versions.
pub fn decode_cold_page(data: &[u8], width: usize) -> Result<usize> {
    use crate::format::cold_page::{decode_cold, Events};
    let key = crate::record::Bytes::from(&b"k"[..]);
    let (events, versions, rows) = decode_cold(data, &key, width, Events::Decode)?;
    Ok(events.len() + versions.len() + rows.len())
}
