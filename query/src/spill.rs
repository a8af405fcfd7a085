//! Sorting more records than a memory budget holds: records are gathered until they reach the
//! budget, sorted, and written to a temporary file as one run; the runs are then merged, each
//! read a buffer at a time. What a sort holds in memory is the budget plus one record and one
//! read buffer per run, whatever the number of records.
//!
//! A record is a sort key (compared as bytes) and a payload. Callers encode their keys so that
//! byte order is the order they want (Arrow's row format does).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, Write};

use crate::error::{QueryError, Result};

/// One record: sorted by `key`, ties in the order they were pushed.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Record {
    pub key: Vec<u8>,
    pub payload: Vec<u8>,
}

impl Record {
    fn bytes(&self) -> usize {
        self.key.len() + self.payload.len() + std::mem::size_of::<Record>()
    }
}

/// An external sort ([`Sorter::push`], then [`Sorter::finish`]).
pub(crate) struct Sorter {
    budget: usize,
    held: Vec<(Record, u64)>,
    held_bytes: usize,
    runs: Vec<File>,
    pushed: u64,
}

fn io(e: std::io::Error) -> QueryError {
    QueryError::Invalid(format!("sorting through a temporary file: {e}"))
}

impl Sorter {
    /// A sort that holds at most about `budget` bytes of records in memory.
    pub(crate) fn new(budget: usize) -> Sorter {
        Sorter {
            budget: budget.max(1),
            held: Vec::new(),
            held_bytes: 0,
            runs: Vec::new(),
            pushed: 0,
        }
    }

    pub(crate) fn push(&mut self, r: Record) -> Result<()> {
        self.held_bytes += r.bytes();
        self.held.push((r, self.pushed));
        self.pushed += 1;
        if self.held_bytes >= self.budget {
            self.spill()?;
        }
        Ok(())
    }

    /// How many runs went to temporary files so far.
    #[cfg(test)]
    pub(crate) fn runs(&self) -> usize {
        self.runs.len()
    }

    fn spill(&mut self) -> Result<()> {
        self.sort_held();
        let mut file = tempfile::tempfile().map_err(io)?;
        {
            let mut w = BufWriter::new(&mut file);
            for (r, seq) in self.held.drain(..) {
                write_record(&mut w, &r, seq).map_err(io)?;
            }
            w.flush().map_err(io)?;
        }
        file.rewind().map_err(io)?;
        self.runs.push(file);
        self.held_bytes = 0;
        Ok(())
    }

    fn sort_held(&mut self) {
        self.held
            .sort_unstable_by(|(a, x), (b, y)| a.key.cmp(&b.key).then(x.cmp(y)));
    }

    /// The records in order.
    pub(crate) fn finish(mut self) -> Result<Sorted> {
        self.sort_held();
        let mut heads = BinaryHeap::new();
        let mut readers = Vec::with_capacity(self.runs.len());
        for (i, f) in self.runs.into_iter().enumerate() {
            let mut r = BufReader::with_capacity(64 * 1024, f);
            if let Some((rec, seq)) = read_record(&mut r)? {
                heads.push(Reverse(Head { rec, seq, run: i }));
            }
            readers.push(r);
        }
        let memory = std::mem::take(&mut self.held);
        if !memory.is_empty() || readers.is_empty() {
            let run = readers.len();
            let mut it = memory.into_iter();
            if let Some((rec, seq)) = it.next() {
                heads.push(Reverse(Head { rec, seq, run }));
            }
            return Ok(Sorted {
                heads,
                readers,
                memory: Some(it),
            });
        }
        Ok(Sorted {
            heads,
            readers,
            memory: None,
        })
    }
}

fn write_record(w: &mut impl Write, r: &Record, seq: u64) -> std::io::Result<()> {
    w.write_all(&(r.key.len() as u32).to_le_bytes())?;
    w.write_all(&r.key)?;
    w.write_all(&(r.payload.len() as u32).to_le_bytes())?;
    w.write_all(&r.payload)?;
    w.write_all(&seq.to_le_bytes())
}

fn read_record(r: &mut impl Read) -> Result<Option<(Record, u64)>> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(io(e)),
    }
    let mut key = vec![0u8; u32::from_le_bytes(len) as usize];
    r.read_exact(&mut key).map_err(io)?;
    r.read_exact(&mut len).map_err(io)?;
    let mut payload = vec![0u8; u32::from_le_bytes(len) as usize];
    r.read_exact(&mut payload).map_err(io)?;
    let mut seq = [0u8; 8];
    r.read_exact(&mut seq).map_err(io)?;
    Ok(Some((Record { key, payload }, u64::from_le_bytes(seq))))
}

/// The head record of one run in the merge.
#[derive(PartialEq, Eq)]
struct Head {
    rec: Record,
    seq: u64,
    run: usize,
}

impl Ord for Head {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.rec.key.cmp(&o.rec.key).then(self.seq.cmp(&o.seq))
    }
}

impl PartialOrd for Head {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}

/// The merge of a sort's runs ([`Sorter::finish`]): its records in order.
pub(crate) struct Sorted {
    heads: BinaryHeap<Reverse<Head>>,
    readers: Vec<BufReader<File>>,
    /// The records still in memory (the last run, index `readers.len()`), sorted.
    memory: Option<std::vec::IntoIter<(Record, u64)>>,
}

impl Iterator for Sorted {
    type Item = Result<Record>;

    fn next(&mut self) -> Option<Result<Record>> {
        let Reverse(head) = self.heads.pop()?;
        let next = match self.readers.get_mut(head.run) {
            Some(r) => match read_record(r) {
                Ok(n) => n,
                Err(e) => return Some(Err(e)),
            },
            None => self.memory.as_mut().and_then(Iterator::next),
        };
        if let Some((rec, seq)) = next {
            self.heads.push(Reverse(Head {
                rec,
                seq,
                run: head.run,
            }));
        }
        Some(Ok(head.rec))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Whatever the budget (one record per run to everything in memory), the records come
        /// out sorted by key, equal keys in the order they were pushed.
        #[test]
        fn any_budget_gives_the_records_sorted_stably(
            records in proptest::collection::vec((proptest::collection::vec(0u8..4, 0..3), any::<u16>()), 0..200),
            budget in 1usize..4096,
        ) {
            let mut s = Sorter::new(budget);
            for (k, p) in &records {
                s.push(Record { key: k.clone(), payload: p.to_le_bytes().to_vec() }).unwrap();
            }
            let got: Vec<Record> = s.finish().unwrap().collect::<Result<_>>().unwrap();
            let mut want: Vec<Record> = records
                .iter()
                .map(|(k, p)| Record { key: k.clone(), payload: p.to_le_bytes().to_vec() })
                .collect();
            want.sort_by(|a, b| a.key.cmp(&b.key));
            prop_assert_eq!(got, want);
        }
    }

    #[test]
    fn a_small_budget_spills_runs_to_files() {
        let mut s = Sorter::new(200);
        for i in 0..100u32 {
            s.push(Record {
                key: (100 - i).to_be_bytes().to_vec(),
                payload: vec![],
            })
            .unwrap();
        }
        assert!(s.runs() >= 10, "{} runs", s.runs());
        let keys: Vec<u32> = s
            .finish()
            .unwrap()
            .map(|r| u32::from_be_bytes(r.unwrap().key.try_into().unwrap()))
            .collect();
        assert_eq!(keys, (1..=100).collect::<Vec<_>>());
    }
}
