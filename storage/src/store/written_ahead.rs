//! The event blocks a commit applied in parts writes ahead of its record (`store/flow_commit.rs`),
//! kept as they are written, in key order, in a temporary file: the commit's digest
//! (`store/chain.rs`) is computed from them at the end without reading them back from sled.
//! Reading them back pulled every block of the commit into sled's page cache, which kept them:
//! 294 MB of the 679 MB heap peak of a 3M-event load (docs/PERFORMANCE.md).
//!
//! The file holds each pair as its key's length (`u32` LE), its value's length (`u32` LE), the
//! key and the value.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};

use crate::error::{Error, Result};
use crate::kv::WriteBatch;

fn io(e: std::io::Error) -> Error {
    Error::Io(format!(
        "temporary file of a large commit's event blocks: {e}"
    ))
}

/// The pairs written ahead so far ([`WrittenAhead::add`]), then read back
/// ([`WrittenAhead::pairs`]).
#[derive(Default)]
pub(super) struct WrittenAhead {
    /// Made at the first pair.
    file: Option<BufWriter<File>>,
    /// The last key added: each must follow it.
    last: Option<Vec<u8>>,
}

impl WrittenAhead {
    /// Adds the puts of `b`, whose keys must follow every key added before, in order.
    pub(super) fn add(&mut self, b: &WriteBatch) -> Result<()> {
        for (k, v) in &b.ops {
            let Some(v) = v else {
                return Err(Error::Io(
                    "a large commit's event blocks include a delete".into(),
                ));
            };
            if self.last.as_ref().is_some_and(|last| last >= k) {
                return Err(Error::Io(
                    "a large commit's event blocks were written out of key order".into(),
                ));
            }
            if self.file.is_none() {
                self.file = Some(BufWriter::new(tempfile::tempfile().map_err(io)?));
            }
            let f = self.file.as_mut().expect("just made");
            let len = |n: usize| {
                u32::try_from(n)
                    .map(u32::to_le_bytes)
                    .map_err(|_| Error::Io("an event block over 4 GiB".into()))
            };
            f.write_all(&len(k.len())?).map_err(io)?;
            f.write_all(&len(v.len())?).map_err(io)?;
            f.write_all(k).map_err(io)?;
            f.write_all(v).map_err(io)?;
            self.last = Some(k.clone());
        }
        Ok(())
    }

    /// Every pair added, in the order added (key order).
    pub(super) fn pairs(self) -> Result<Pairs> {
        let reader = match self.file {
            None => None,
            Some(f) => {
                let mut f = f.into_inner().map_err(|e| io(e.into_error()))?;
                f.seek(SeekFrom::Start(0)).map_err(io)?;
                Some(BufReader::new(f))
            }
        };
        Ok(Pairs { reader })
    }
}

/// The pairs of a [`WrittenAhead`], read back one at a time.
pub(super) struct Pairs {
    reader: Option<BufReader<File>>,
}

impl Pairs {
    fn read(r: &mut BufReader<File>) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let mut lens = [0u8; 8];
        match r.read_exact(&mut lens[..1]) {
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
            other => other.map_err(io)?,
        }
        r.read_exact(&mut lens[1..]).map_err(io)?;
        let len = |b: &[u8]| u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize;
        let (mut k, mut v) = (vec![0; len(&lens[..4])], vec![0; len(&lens[4..])]);
        r.read_exact(&mut k).map_err(io)?;
        r.read_exact(&mut v).map_err(io)?;
        Ok(Some((k, v)))
    }
}

impl Iterator for Pairs {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        let r = self.reader.as_mut()?;
        let next = Pairs::read(r).transpose();
        if !matches!(next, Some(Ok(_))) {
            self.reader = None;
        }
        next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(pairs: &[(&[u8], &[u8])]) -> WriteBatch {
        let mut b = WriteBatch::default();
        for (k, v) in pairs {
            b.put(k.to_vec(), v.to_vec());
        }
        b
    }

    #[test]
    fn pairs_come_back_in_the_order_added_and_out_of_order_is_refused() {
        let mut w = WrittenAhead::default();
        w.add(&batch(&[(b"a1", b""), (b"a2", &[7; 70_000])]))
            .unwrap();
        w.add(&WriteBatch::default()).unwrap();
        w.add(&batch(&[(b"b", b"x")])).unwrap();
        let got: Vec<_> = w.pairs().unwrap().map(Result::unwrap).collect();
        let want: Vec<(Vec<u8>, Vec<u8>)> = vec![
            (b"a1".to_vec(), Vec::new()),
            (b"a2".to_vec(), vec![7; 70_000]),
            (b"b".to_vec(), b"x".to_vec()),
        ];
        assert_eq!(got, want);
        assert_eq!(WrittenAhead::default().pairs().unwrap().count(), 0);

        let mut w = WrittenAhead::default();
        w.add(&batch(&[(b"b", b"")])).unwrap();
        let err = w.add(&batch(&[(b"a", b"")])).unwrap_err();
        assert!(err.to_string().contains("out of key order"), "{err}");
        let mut deletes = WriteBatch::default();
        deletes.delete(b"c".to_vec());
        assert!(WrittenAhead::default().add(&deletes).is_err());
    }
}
