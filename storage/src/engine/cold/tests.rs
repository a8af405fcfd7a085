//! Tests of pages pending and stored, read one at a time and together.

use super::*;
use crate::format::zone::ZoneBuilder;

struct NoPages;
impl PageSource for NoPages {
    fn page(&self, _: &[u8], _: u32) -> Result<Option<Vec<u8>>> {
        Ok(None)
    }
    fn page_rows(&self, _: &[u8], _: &PageEntry) -> Result<Option<Arc<RowBlock>>> {
        Ok(None)
    }
    fn listed(&self, _: &[u8]) -> Result<Option<Vec<PageEntry>>> {
        Ok(None)
    }
    fn directories(&self, _: u64) -> Result<Vec<crate::format::derived::RowDir>> {
        Ok(Vec::new())
    }
}

/// Pages written are handed to the store once, in key and page order, and pages freed once,
/// as deletions; a page the store does not have is reported as missing, never read as empty.
#[test]
fn pending_pages_are_taken_once_and_a_missing_page_is_an_error() {
    let mut pages = Pages::new(Some(Arc::new(NoPages)));
    let a: Bytes = Bytes::from(&b"a"[..]);
    let b: Bytes = Bytes::from(&b"b"[..]);
    let page = |b: u8, n: usize| (vec![b; n], ZoneBuilder::default().finish());
    let pa = pages.put(&a, 0, page(1, 10), 4).unwrap();
    let pb = pages.put(&b, 0, page(2, 20), 4).unwrap();
    let pa1 = pages.put(&a, 1, page(3, 30), 4).unwrap();
    assert_eq!(&pages.get(&a, &pa1).unwrap()[..], &[3; 30][..]);
    pages.free(&a, &pa);
    let mut stats = ColdStats::default();
    pages.add_stats(&mut stats);
    assert_eq!(stats.page_bytes, 50);
    let taken = |w: Vec<PageWrite>| -> Vec<_> {
        w.into_iter()
            .map(|((k, no), v)| (k.to_vec(), no, v.map(|v| v.len())))
            .collect()
    };
    assert_eq!(
        taken(pages.take_pending()),
        vec![
            (b"a".to_vec(), 0, Some(10)),
            (b"a".to_vec(), 1, Some(30)),
            (b"b".to_vec(), 0, Some(20)),
        ]
    );
    assert_eq!(taken(pages.take_freed()), vec![(b"a".to_vec(), 0, None)]);
    assert!(pages.take_pending().is_empty() && pages.take_freed().is_empty());
    let err = pages.get(&b, &pb).unwrap_err().to_string();
    assert!(err.contains("page 0 is missing"), "{err}");
}

/// Stored pages of key `a`, made by `bytes` from their numbers. The source lists the reads it was
/// asked for, whole pages or row parts, each a read of several pages at once.
struct Stored {
    bytes: fn(u32) -> Option<Vec<u8>>,
    reads: std::sync::Mutex<Vec<(&'static str, Vec<u32>)>>,
}
impl Stored {
    fn new(bytes: fn(u32) -> Option<Vec<u8>>) -> Stored {
        Stored {
            bytes,
            reads: Default::default(),
        }
    }
    fn reads(&self) -> Vec<(&'static str, Vec<u32>)> {
        self.reads.lock().unwrap().clone()
    }
}
impl PageSource for Stored {
    fn page(&self, _: &[u8], no: u32) -> Result<Option<Vec<u8>>> {
        Ok(self.pages(b"a", &[no])?.pop().flatten())
    }
    fn pages(&self, _: &[u8], nos: &[u32]) -> Result<Vec<Option<Vec<u8>>>> {
        self.reads.lock().unwrap().push(("whole", nos.to_vec()));
        Ok(nos.iter().map(|&no| (self.bytes)(no)).collect())
    }
    fn row_parts(&self, _: &[u8], entries: &[&PageEntry]) -> Result<Vec<Option<RowPart>>> {
        let nos: Vec<u32> = entries.iter().map(|e| e.no).collect();
        self.reads.lock().unwrap().push(("rows", nos));
        Ok((entries.iter())
            .map(|e| {
                let mut page = (self.bytes)(e.no)?;
                let len = page.len() as u64;
                page.truncate(e.head as usize);
                Some((page, len))
            })
            .collect())
    }
    fn page_rows(&self, _: &[u8], _: &PageEntry) -> Result<Option<Arc<RowBlock>>> {
        Ok(None)
    }
    fn listed(&self, _: &[u8]) -> Result<Option<Vec<PageEntry>>> {
        Ok(None)
    }
    fn directories(&self, _: u64) -> Result<Vec<crate::format::derived::RowDir>> {
        Ok(Vec::new())
    }
}

/// A key's pages read together come in page order, those pending from memory and the stored
/// ones in one read of the source; a stored page that is missing, or not as long as its entry
/// says, is an error naming it.
#[test]
fn pages_read_together_mix_pending_and_stored_in_one_read() {
    // Pages 0 and 1, ten bytes of their number each.
    let source = Arc::new(Stored::new(|no| (no < 2).then(|| vec![no as u8; 10])));
    let mut pages = Pages::new(Some(source.clone()));
    let a: Bytes = Bytes::from(&b"a"[..]);
    let entry = |no: u32, len: u32| PageEntry {
        no,
        len,
        head: 0,
        zone: ZoneBuilder::default().finish(),
    };
    let p2 = pages
        .put(&a, 2, (vec![2; 10], ZoneBuilder::default().finish()), 0)
        .unwrap();
    let (p0, p1) = (entry(0, 10), entry(1, 10));
    let got = pages.get_all(&a, &[&p0, &p1, &p2]).unwrap();
    let got: Vec<Vec<u8>> = got.iter().map(|p| p.to_vec()).collect();
    assert_eq!(got, vec![vec![0; 10], vec![1; 10], vec![2; 10]]);
    assert_eq!(source.reads(), vec![("whole", vec![0, 1])]);
    let err = pages.get_all(&a, &[&p0, &entry(3, 10)]).unwrap_err();
    assert!(err.to_string().contains("page 3 is missing"), "{err}");
    assert!(pages.get_all(&a, &[&entry(1, 11)]).is_err());
}

/// Page `no` of 12 bytes whose row part is a 3-byte block: page 0's a block with a CRC of its own
/// (format byte 2), page 1's one whose format byte says it has none (1).
fn parted(no: u32) -> Option<Vec<u8>> {
    let mut page = 3u32.to_le_bytes().to_vec();
    page.extend_from_slice(&[2 - no as u8, 7, no as u8]);
    page.extend_from_slice(&[9; 5]);
    Some(page)
}

/// A key's pages read for their rows take only the row parts of the stored ones, in one read,
/// and cut a pending one; a row part whose block has no CRC of its own is read again whole (the
/// record's checksum covers it then); a part, or a page, of another length than its entry says
/// is an error.
#[test]
fn row_parts_are_read_alone_unless_their_block_has_no_checksum() {
    let source = Arc::new(Stored::new(parted));
    let mut pages = Pages::new(Some(source.clone()));
    let a: Bytes = Bytes::from(&b"a"[..]);
    let entry = |no: u32, head: u32| PageEntry {
        no,
        len: 12,
        head,
        zone: ZoneBuilder::default().finish(),
    };
    let pending = parted(0).unwrap();
    let p2 = pages
        .put(&a, 2, (pending.clone(), ZoneBuilder::default().finish()), 7)
        .unwrap();
    let (p0, p1) = (entry(0, 7), entry(1, 7));
    let got = pages
        .read_all(&a, &[&p0, &p1, &p2], PagePart::Rows)
        .unwrap();
    let got: Vec<Vec<u8>> = got.iter().map(|p| p.to_vec()).collect();
    let part = |no: u32| parted(no).unwrap()[..7].to_vec();
    assert_eq!(got, vec![part(0), part(1), pending[..7].to_vec()]);
    assert_eq!(
        source.reads(),
        vec![("rows", vec![0, 1]), ("whole", vec![1])]
    );
    let err = pages
        .read_all(&a, &[&entry(0, 13)], PagePart::Rows)
        .unwrap_err();
    // A row part said to be longer than the page is shorter than its entry says.
    assert!(
        err.to_string().contains("row versions have 12 bytes"),
        "{err}"
    );
    let long = PageEntry {
        len: 13,
        ..entry(0, 7)
    };
    let err = pages.read_all(&a, &[&long], PagePart::Rows).unwrap_err();
    assert!(
        err.to_string()
            .contains("page 0 has 12 bytes, its head says 13"),
        "{err}"
    );
}
