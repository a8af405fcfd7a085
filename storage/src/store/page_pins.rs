//! Pages a scan may still read. A scan of a table not in memory reads its keys' heads a span at
//! a time ([`super::KeySpan`]) and their pages later, without holding the store's lock between
//! the two; a commit in between may thaw those keys, and its checkpoint free the pages the
//! span's heads list. Each span holds a [`PagePin`] stamped with the number of checkpoints its
//! table had written when its heads were read. The pages a checkpoint frees are deleted after it
//! only once no span read before it holds a pin; until then they stay listed in the table's `F`
//! record (`pages::write_checkpoint`), and a later checkpoint, or the next open, deletes them.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// A page of a key: the encoded key and the page number.
pub(super) type FreedPage = (Vec<u8>, u32);

/// The pins of one table's pages, and the pages its checkpoints freed and kept for them.
#[derive(Default)]
pub(super) struct PagePins {
    live: Arc<Mutex<Live>>,
    /// Pages freed and not deleted yet, with the number of the checkpoint that freed them.
    kept: Vec<(u64, Vec<FreedPage>)>,
}

/// What the pins share with the table.
#[derive(Default)]
struct Live {
    /// Checkpoints written since the table was opened.
    checkpoints: u64,
    /// Pins held, by the number of checkpoints written when they were taken.
    pins: BTreeMap<u64, usize>,
}

/// Held by a span of keys, from the read of its heads until it is dropped.
pub(crate) struct PagePin {
    at: u64,
    live: Arc<Mutex<Live>>,
}

/// What a checkpoint does with the pages freed so far.
pub(super) struct Freeing {
    /// Its `F` record lists these: every page freed and not deleted yet.
    pub listed: Vec<FreedPage>,
    /// These are deleted after it (no span that may read them holds a pin) ...
    pub now: Vec<FreedPage>,
    /// ... and then the `F` record lists only these.
    pub kept: Vec<FreedPage>,
    /// `now` by checkpoint, to keep again if their deletion fails.
    groups: Vec<(u64, Vec<FreedPage>)>,
}

fn lock(live: &Mutex<Live>) -> MutexGuard<'_, Live> {
    // A count of pins stays a count of pins whatever panicked while it was held.
    live.lock().unwrap_or_else(|e| e.into_inner())
}

impl PagePins {
    /// A pin for a span whose heads are read now.
    pub fn pin(&self) -> PagePin {
        let mut live = lock(&self.live);
        let at = live.checkpoints;
        *live.pins.entry(at).or_default() += 1;
        PagePin {
            at,
            live: self.live.clone(),
        }
    }

    /// A checkpoint that frees `freed`: which pages its `F` record lists, and which of them are
    /// deleted after it. Pages a checkpoint freed may be deleted once every pin held was taken
    /// after it (a span read since has heads that no longer list them).
    pub fn checkpoint(&mut self, freed: Vec<FreedPage>) -> Freeing {
        let (number, oldest) = {
            let mut live = lock(&self.live);
            live.checkpoints += 1;
            (live.checkpoints, live.pins.keys().next().copied())
        };
        if !freed.is_empty() {
            self.kept.push((number, freed));
        }
        let listed = self.kept.iter().flat_map(|(_, p)| p.clone()).collect();
        let (groups, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.kept)
            .into_iter()
            .partition(|(n, _)| oldest.is_none_or(|o| o >= *n));
        self.kept = kept;
        Freeing {
            listed,
            now: groups.iter().flat_map(|(_, p)| p.clone()).collect(),
            kept: self.kept.iter().flat_map(|(_, p)| p.clone()).collect(),
            groups,
        }
    }

    /// The deletion of `f.now` failed: they stay listed, for the next checkpoint to delete.
    pub fn not_deleted(&mut self, f: Freeing) {
        self.kept.extend(f.groups);
        self.kept.sort_by_key(|(n, _)| *n);
    }

    /// Forgets the pages kept (a rebuild deleted every page of the table).
    pub fn forget_freed(&mut self) {
        self.kept.clear();
    }
}

impl Drop for PagePin {
    fn drop(&mut self) {
        let mut live = lock(&self.live);
        if let Some(n) = live.pins.get_mut(&self.at) {
            *n -= 1;
            if *n == 0 {
                live.pins.remove(&self.at);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(no: u32) -> FreedPage {
        (b"k".to_vec(), no)
    }

    #[test]
    fn pages_freed_with_no_pin_held_are_deleted_after_their_checkpoint() {
        let mut pins = PagePins::default();
        let f = pins.checkpoint(vec![page(0), page(1)]);
        assert_eq!(f.listed, [page(0), page(1)]);
        assert_eq!(f.now, [page(0), page(1)]);
        assert!(f.kept.is_empty());
    }

    #[test]
    fn pages_are_kept_for_the_pins_taken_before_they_were_freed_and_only_those() {
        let mut pins = PagePins::default();
        let early = pins.pin();
        let f = pins.checkpoint(vec![page(0)]);
        assert!(f.now.is_empty());
        assert_eq!(f.kept, [page(0)]);
        // A span read after that checkpoint does not hold back what it freed, nor what the
        // next one frees: only `early` does.
        let late = pins.pin();
        let f = pins.checkpoint(vec![page(1)]);
        assert_eq!(f.listed, [page(0), page(1)]);
        assert!(f.now.is_empty());
        drop(early);
        let f = pins.checkpoint(vec![page(2)]);
        assert_eq!(f.listed, [page(0), page(1), page(2)]);
        assert_eq!(f.now, [page(0)], "page 1 was freed after `late` was read");
        assert_eq!(f.kept, [page(1), page(2)]);
        drop(late);
        let f = pins.checkpoint(Vec::new());
        assert_eq!(f.now, [page(1), page(2)]);
        assert!(f.kept.is_empty());
    }

    #[test]
    fn pages_whose_deletion_failed_are_deleted_by_the_next_checkpoint() {
        let mut pins = PagePins::default();
        let f = pins.checkpoint(vec![page(0)]);
        pins.not_deleted(f);
        let f = pins.checkpoint(vec![page(1)]);
        assert_eq!(f.now, [page(0), page(1)]);
    }
}
