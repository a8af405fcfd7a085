//! [`Bytes`]: an encoded key, sequence or bound, held in place when short (the nine-byte values
//! of the usual types: no allocation per event or row version for them) and shared between
//! events, timelines and rows when long, and ordered as its bytes are without a call to `memcmp`
//! for the usual types ([`crate::keycodec::cmp_encoded`]); [`Encoded`], the same bytes
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

use ref_cast::RefCast;
use triomphe::ThinArc;

use crate::keycodec::{cmp_encoded, eq_encoded};

/// Encoded bytes, ordered and compared as `[u8]` is (so that a map of them can be searched by a
/// `&[u8]`), the first eight bytes at once. Up to [`INLINE`] bytes (every encoded value of a
/// fixed-width type, and short strings) are held in place: no allocation to make, share or free.
/// Longer ones are shared, behind a pointer of one word. Either way a value takes 16 bytes, as
/// the `Arc<[u8]>` it replaces did, and an absent one (`Option<Bytes>`) no more.
#[derive(Clone)]
pub(crate) struct Bytes(Repr);

/// Bytes held in place, at most: what fits beside the length and the tag in the 16 bytes the
/// shared variant (a tag and a pointer) takes anyway.
const INLINE: usize = 14;

#[derive(Clone)]
enum Repr {
    Inline {
        len: u8,
        bytes: [u8; INLINE],
    },
    /// A thin pointer to a count, a length and the bytes, in one allocation.
    Shared(ThinArc<(), u8>),
}

impl Bytes {
    #[inline]
    fn inline(b: &[u8]) -> Option<Bytes> {
        let mut bytes = [0u8; INLINE];
        bytes.get_mut(..b.len())?.copy_from_slice(b);
        Some(Bytes(Repr::Inline {
            len: b.len() as u8,
            bytes,
        }))
    }

    #[inline]
    fn as_slice(&self) -> &[u8] {
        match &self.0 {
            Repr::Inline { len, bytes } => &bytes[..*len as usize],
            Repr::Shared(b) => &b.slice,
        }
    }

    fn shared(b: &[u8]) -> Bytes {
        Bytes(Repr::Shared(ThinArc::from_header_and_slice((), b)))
    }

    /// Whether `a` and `b` are one shared allocation.
    #[inline]
    fn shared_eq(a: &Bytes, b: &Bytes) -> bool {
        match (&a.0, &b.0) {
            (Repr::Shared(a), Repr::Shared(b)) => std::ptr::eq(a.ptr(), b.ptr()),
            _ => false,
        }
    }
}

impl Default for Bytes {
    fn default() -> Bytes {
        Bytes(Repr::Inline {
            len: 0,
            bytes: [0; INLINE],
        })
    }
}

impl Deref for Bytes {
    type Target = [u8];

    #[inline]
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl AsRef<[u8]> for Bytes {
    #[inline]
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl Borrow<[u8]> for Bytes {
    #[inline]
    fn borrow(&self) -> &[u8] {
        self.as_slice()
    }
}

impl Borrow<Encoded> for Bytes {
    #[inline]
    fn borrow(&self) -> &Encoded {
        Encoded::new(self.as_slice())
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
        Bytes::shared_eq(self, other) || eq_encoded(self, other)
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
        cmp_encoded(self, other)
    }
}

impl Hash for Bytes {
    /// As `[u8]` hashes, so that a set of them can be searched by a `&[u8]`.
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_slice().hash(state)
    }
}

impl fmt::Debug for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.as_slice().fmt(f)
    }
}

impl From<&[u8]> for Bytes {
    #[inline]
    fn from(b: &[u8]) -> Bytes {
        Bytes::inline(b).unwrap_or_else(|| Bytes::shared(b))
    }
}

impl From<Vec<u8>> for Bytes {
    fn from(b: Vec<u8>) -> Bytes {
        Bytes::from(&b[..])
    }
}

impl From<Box<[u8]>> for Bytes {
    fn from(b: Box<[u8]>) -> Bytes {
        Bytes::from(&b[..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;
    use std::ops::Bound;

    #[test]
    fn bytes_take_the_room_of_a_shared_slice_and_an_absent_one_no_more() {
        assert_eq!(std::mem::size_of::<Bytes>(), 16);
        assert_eq!(std::mem::size_of::<Option<Bytes>>(), 16);
    }

    #[test]
    fn bytes_up_to_the_inline_length_are_held_in_place_and_longer_ones_shared() {
        let short = Bytes::from(&[7u8; INLINE][..]);
        assert!(matches!(short.0, Repr::Inline { len, .. } if len as usize == INLINE));
        let long = Bytes::from(vec![7u8; INLINE + 1]);
        assert!(matches!(long.0, Repr::Shared(_)));
        let copy = long.clone();
        assert!(Bytes::shared_eq(&long, &copy));
        assert_eq!(&copy[..], &[7u8; INLINE + 1][..]);
        assert!(Bytes::default().is_empty());
    }

    proptest! {
        /// A map keyed by them holds its keys in the order of their bytes, and finds each by its
        /// bytes alone.
        #[test]
        fn a_map_of_them_orders_and_finds_keys_as_one_of_byte_vectors_does(
            head in proptest::collection::vec(proptest::sample::select(vec![0u8, 1, 0x7f, 0x80, 0xff]), 8),
            tails in proptest::collection::vec(
                (any::<bool>(), proptest::collection::vec(proptest::sample::select(vec![0u8, 1, 0x7f, 0x80, 0xff]), 0..30)),
                0..40,
            ),
        ) {
            // Half of them share their first eight bytes, as encoded values of one type often
            // do, so that their tails decide; some are held in place, some longer ones shared.
            let keys: Vec<Vec<u8>> = tails
                .into_iter()
                .map(|(shared, t)| if shared { [&head[..], &t[..]].concat() } else { t })
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
                let b = Bytes::from(&k[..]);
                prop_assert_eq!(&b[..], &k[..]);
                prop_assert_eq!(ours.get(&k[..]), theirs.get(k));
                prop_assert_eq!(ours.get(Encoded::new(k)), theirs.get(k));
                prop_assert_eq!(ours.get(&b), theirs.get(k));
            }
        }
    }
}
