//! The on-disk format, bytes only: the key layout, event blocks, cold pages and the compression of
//! stored values. Nothing here knows the engine: it encodes the plain records of `crate::record`. See docs/FORMAT.md.

mod archive;
pub(crate) use archive::Codec;
pub(crate) use lz4::Effort;
pub(crate) mod cold_batch;
pub(crate) mod cold_page;
mod columns;
pub(crate) mod derived;
pub(crate) mod event_block;
pub(crate) mod keys;
pub(crate) mod lz4;
pub(crate) mod packed_events;
mod packed_rows;
pub(crate) mod page_boxes;
pub(crate) mod page_list;
pub(crate) mod ranked;
pub(crate) mod source_cells;
pub(crate) mod value_log;
pub(crate) mod zone;
mod zstd;
