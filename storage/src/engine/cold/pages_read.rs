//! The row blocks of a key's last pages that reads which keep what they decode were handed,
//! remembered by the key's frozen state ([`super::Frozen`]) by page number and held weakly: a read
//! of the same page again (an as-of snapshot repeated, a report run twice) finds it without
//! asking the key-value layer where the page lies. That question, a get from sled per page before
//! the read cache is asked, took 15% of a warm as-of snapshot's samples at 10M events
//! (docs/PERFORMANCE.md, session 54).
//!
//! Held weakly: the key keeps no page in memory. A page is found here only while something else
//! holds its block: the read cache, or a reader still using it (such a read does not reach the
//! cache, whose doorkeeper then does not count it). A page let go of is read through the cache
//! again. A page number names the same bytes for as long as a key's frozen state lists it (pages
//! are written once, numbered up, and deleted only once no stored head lists them), and every
//! copy of that state shares one `PagesRead`, so what one read remembers serves the next.

use std::sync::{Arc, Mutex, PoisonError, Weak};

use crate::format::cold_page::RowBlock;

/// How many pages a key remembers: a few, since a read at one point reads only the pages whose
/// zone maps may hold it.
const REMEMBERS: usize = 4;

/// A page remembered: its number, and its row block as long as the read cache holds it.
type Remembered = (u32, Weak<RowBlock>);

/// A key's pages read through the read cache, most recent last.
#[derive(Clone, Default)]
pub(crate) struct PagesRead(Arc<Mutex<Vec<Remembered>>>);

impl PagesRead {
    /// The row block of page `no`, if a read remembered it and the read cache still holds it.
    pub fn get(&self, no: u32) -> Option<Arc<RowBlock>> {
        let read = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        read.iter()
            .rev()
            .find(|(n, _)| *n == no)
            .and_then(|(_, w)| w.upgrade())
    }

    /// Remembers `rows` as the row block of page `no`, letting go of what the read cache let go
    /// of, then of the oldest if it remembers [`REMEMBERS`] pages.
    pub fn remember(&self, no: u32, rows: &Arc<RowBlock>) {
        let mut read = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        read.retain(|(n, w)| *n != no && w.strong_count() > 0);
        if read.len() == REMEMBERS {
            read.remove(0);
        }
        read.push((no, Arc::downgrade(rows)));
    }

    /// The bytes it may hold beyond itself: a remembered page the read cache let go of keeps
    /// the block's own allocation (not its columns) until it is let go of here.
    pub fn heap_bytes() -> usize {
        REMEMBERS
            * (std::mem::size_of::<Remembered>()
                + std::mem::size_of::<RowBlock>()
                + 2 * std::mem::size_of::<usize>())
            + std::mem::size_of::<Mutex<Vec<Remembered>>>()
            + 2 * std::mem::size_of::<usize>()
    }
}

/// Remembered pages are a cache: two frozen states that list the same pages are equal whatever
/// each remembers.
impl PartialEq for PagesRead {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for PagesRead {}

impl std::fmt::Debug for PagesRead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PagesRead").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_is_found_while_the_read_cache_holds_it_and_not_after() {
        let read = PagesRead::default();
        let held = Arc::new(RowBlock::default());
        read.remember(7, &held);
        assert!(read.get(7).is_some_and(|r| Arc::ptr_eq(&r, &held)));
        assert!(read.get(8).is_none());
        // A copy of the key's state shares what was remembered.
        assert!(read.clone().get(7).is_some());
        drop(held);
        assert!(read.get(7).is_none());
    }

    #[test]
    fn it_remembers_the_last_few_pages_and_lets_go_of_dead_ones_first() {
        let read = PagesRead::default();
        let blocks: Vec<Arc<RowBlock>> = (0..6).map(|_| Arc::new(RowBlock::default())).collect();
        for (no, b) in blocks.iter().enumerate().take(REMEMBERS) {
            read.remember(no as u32, b);
        }
        // The oldest goes when a fifth comes.
        read.remember(4, &blocks[4]);
        assert!(read.get(0).is_none());
        assert!((1..=4).all(|no| read.get(no).is_some()));
        // A page the cache let go of makes room before a live one does.
        let gone = Arc::new(RowBlock::default());
        read.remember(9, &gone);
        assert!(read.get(1).is_none() && read.get(9).is_some());
        drop(gone);
        read.remember(5, &blocks[5]);
        assert!((2..=5).all(|no| read.get(no).is_some()));
        assert_eq!(read.0.lock().unwrap().len(), REMEMBERS);
    }
}
