//! [`Bytes`]: an encoded key, sequence or bound, shared between events, timelines and rows
//! without copying, and ordered as its bytes are without a call to `memcmp` for the nine-byte
//! values of the usual types ([`crate::keycodec::cmp_encoded`]); [`Encoded`], the same bytes
//! borrowed, which a map of them is searched by the same way (`map.range::<Encoded, _>(..)`,
//! `map.get(Encoded::new(b))`; a search by `&[u8]` finds the same, comparing with `memcmp`).
//!
//! The maps a commit folds its events into are keyed by these: the table's keys, each key's
//! events by sequence, its timeline by business start. Compared as `Arc<[u8]>` they called
//! `memcmp` for every step of every search, a third of a large load's commit thread and a fifth
//! of the Rust API's ingest (docs/PERFORMANCE.md, session 42).

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::Arc;

use ref_cast::RefCast;

use crate::keycodec::{cmp_encoded, eq_encoded};

/// Shared encoded bytes, ordered and compared as `[u8]` is (so that a map of them can be searched
/// by a `&[u8]`), the first eight bytes at once.
#[derive(Clone, Default)]
pub(crate) struct Bytes(Arc<[u8]>);

impl Bytes {
    /// Whether `a` and `b` are one allocation.
    pub fn ptr_eq(a: &Bytes, b: &Bytes) -> bool {
        Arc::ptr_eq(&a.0, &b.0)
    }
}

impl Deref for Bytes {
    type Target = [u8];

    #[inline]
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl AsRef<[u8]> for Bytes {
    #[inline]
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl Borrow<[u8]> for Bytes {
    #[inline]
    fn borrow(&self) -> &[u8] {
        &self.0
    }
}

impl Borrow<Encoded> for Bytes {
    #[inline]
    fn borrow(&self) -> &Encoded {
        Encoded::new(&self.0)
    }
}

/// Encoded bytes borrowed, ordered as [`Bytes`] is: what a map of [`Bytes`] is searched by.
#[derive(RefCast, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub(crate) struct Encoded([u8]);

impl Encoded {
    /// `b` as encoded bytes.
    #[inline]
    pub fn new(b: &[u8]) -> &Encoded {
        Encoded::ref_cast(b)
    }
}

impl PartialOrd for Encoded {
    #[inline]
    fn partial_cmp(&self, other: &Encoded) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Encoded {
    #[inline]
    fn cmp(&self, other: &Encoded) -> Ordering {
        cmp_encoded(&self.0, &other.0)
    }
}

impl PartialEq for Bytes {
    #[inline]
    fn eq(&self, other: &Bytes) -> bool {
        Bytes::ptr_eq(self, other) || eq_encoded(&self.0, &other.0)
    }
}

impl Eq for Bytes {}

impl PartialOrd for Bytes {
    #[inline]
    fn partial_cmp(&self, other: &Bytes) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Bytes {
    #[inline]
    fn cmp(&self, other: &Bytes) -> Ordering {
        cmp_encoded(&self.0, &other.0)
    }
}

impl Hash for Bytes {
    /// As `[u8]` hashes, so that a set of them can be searched by a `&[u8]`.
    fn hash<H: Hasher>(&self, state: &mut H) {
        (*self.0).hash(state)
    }
}

impl fmt::Debug for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        (*self.0).fmt(f)
    }
}

impl From<&[u8]> for Bytes {
    fn from(b: &[u8]) -> Bytes {
        Bytes(b.into())
    }
}

impl From<Vec<u8>> for Bytes {
    fn from(b: Vec<u8>) -> Bytes {
        Bytes(b.into())
    }
}

impl From<Box<[u8]>> for Bytes {
    fn from(b: Box<[u8]>) -> Bytes {
        Bytes(b.into())
    }
}

impl From<Arc<[u8]>> for Bytes {
    fn from(b: Arc<[u8]>) -> Bytes {
        Bytes(b)
    }
}

impl From<Bytes> for Arc<[u8]> {
    fn from(b: Bytes) -> Arc<[u8]> {
        b.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;
    use std::ops::Bound;

    proptest! {
        /// A map keyed by them holds its keys in the order of their bytes, and finds each by its
        /// bytes alone.
        #[test]
        fn a_map_of_them_orders_and_finds_keys_as_one_of_byte_vectors_does(
            head in proptest::collection::vec(proptest::sample::select(vec![0u8, 1, 0x7f, 0x80, 0xff]), 8),
            tails in proptest::collection::vec(
                (any::<bool>(), proptest::collection::vec(proptest::sample::select(vec![0u8, 1, 0x7f, 0x80, 0xff]), 0..11)),
                0..40,
            ),
        ) {
            // Half of them share their first eight bytes, as encoded values of one type often
            // do, so that their tails decide.
            let keys: Vec<Vec<u8>> = tails
                .into_iter()
                .map(|(shared, t)| if shared { [&head[..], &t[..3.min(t.len())]].concat() } else { t })
                .collect();
            let ours: BTreeMap<Bytes, usize> =
                keys.iter().enumerate().map(|(i, k)| (Bytes::from(&k[..]), i)).collect();
            let theirs: BTreeMap<Vec<u8>, usize> =
                keys.iter().enumerate().map(|(i, k)| (k.clone(), i)).collect();
            prop_assert!(ours.iter().map(|(k, v)| (&k[..], *v)).eq(theirs.iter().map(|(k, v)| (&k[..], *v))));
            // A range by the borrowed form holds what one by byte slices holds.
            for k in &keys {
                let upto = (Bound::Unbounded, Bound::Included(Encoded::new(k)));
                let ours = ours.range::<Encoded, _>(upto).map(|(_, v)| *v);
                let upto = (Bound::Unbounded, Bound::Included(&k[..]));
                prop_assert!(ours.eq(theirs.range::<[u8], _>(upto).map(|(_, v)| *v)));
            }
            for k in &keys {
                prop_assert_eq!(ours.get(&k[..]), theirs.get(k));
                prop_assert_eq!(ours.get(Encoded::new(k)), theirs.get(k));
                prop_assert_eq!(ours.get(&Bytes::from(&k[..])), theirs.get(k));
            }
        }
    }
}
