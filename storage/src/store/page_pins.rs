//! Pages a scan may still read. A scan of a table not in memory reads its keys' heads a span at
//! a time ([`super::KeySpan`]) and their pages later, without holding the store's lock between
//! the two; a commit in between may thaw those keys, and its checkpoint free the pages the
//! span's heads list. Each span holds a [`PagePin`] of its table; a checkpoint that frees pages
//! while a pin is held leaves them listed in the table's `F` record (with those freed before and
//! not deleted yet), for the first checkpoint that finds no pin held, or the next open, to
//! delete (`pages::write_checkpoint`).

use std::sync::Arc;

/// The pins of one table's pages.
#[derive(Default)]
pub(super) struct PagePins(Arc<()>);

/// Held by a span of keys, from the read of its heads until it is dropped.
#[derive(Clone)]
pub(crate) struct PagePin {
    _held: Arc<()>,
}

/// Whether the pages a checkpoint frees may be deleted now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Readers {
    /// No span holds a pin: they are deleted after it.
    None,
    /// A span holds one: they stay listed until a checkpoint finds none.
    Pinned,
}

impl PagePins {
    /// A pin for a span whose heads are read now.
    pub fn pin(&self) -> PagePin {
        PagePin {
            _held: self.0.clone(),
        }
    }

    /// Whether a span holds a pin.
    pub fn readers(&self) -> Readers {
        match Arc::strong_count(&self.0) {
            1 => Readers::None,
            _ => Readers::Pinned,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_are_held_until_the_last_is_dropped() {
        let pins = PagePins::default();
        assert_eq!(pins.readers(), Readers::None);
        let a = pins.pin();
        let b = a.clone();
        assert_eq!(pins.readers(), Readers::Pinned);
        drop(a);
        assert_eq!(pins.readers(), Readers::Pinned);
        drop(b);
        assert_eq!(pins.readers(), Readers::None);
    }
}
