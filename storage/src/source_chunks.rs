//! The compressed chunks of a [`crate::SourceWrite`], in the order pushed: kept in memory up to
//! [`IN_MEMORY_BYTES`], then moved to an anonymous temporary file, where every later chunk goes
//! as well. An `INSERT ... SELECT` or a `CREATE TABLE ... AS SELECT` of any size so holds a
//! batch at a time and the file, not its rows: one of 10M rows read from Parquet files held its
//! 450 MB of chunks and a copy of them in the commit's batch, and peaked at 1.8 GB
//! (docs/PERFORMANCE.md, session 43). The commit reads them back once, in order.
//!
//! The file holds each chunk as its length (`u32` LE) and its bytes.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};

use crate::error::{Error, Result};

/// Chunks up to this many bytes in all stay in memory: a small statement makes no file.
pub(crate) const IN_MEMORY_BYTES: usize = 16 << 20;

fn io(e: std::io::Error) -> Error {
    Error::Io(format!("temporary file of a statement's source rows: {e}"))
}

/// Where the chunks are.
enum Held {
    Memory(Vec<Vec<u8>>),
    /// In the file, all of them.
    File(BufWriter<File>),
    /// Writing the file failed: the chunks are not all there, and the statement writes nothing.
    Broken(String),
}

/// The chunks pushed so far.
pub(crate) struct Chunks {
    held: Held,
    /// How many.
    count: usize,
    /// Their bytes, in all.
    bytes: u64,
    /// Bytes held in memory before they move to a file (tests use less).
    in_memory: usize,
}

impl Default for Chunks {
    fn default() -> Self {
        Chunks::with_memory(IN_MEMORY_BYTES)
    }
}

impl Chunks {
    /// Chunks that move to a file once they take more than `in_memory` bytes.
    pub(crate) fn with_memory(in_memory: usize) -> Self {
        Chunks {
            held: Held::Memory(Vec::new()),
            count: 0,
            bytes: 0,
            in_memory,
        }
    }

    /// Adds `chunk` after the others. After an error the chunks are broken: every later call
    /// fails, and [`Chunks::read_back`] too.
    pub(crate) fn push(&mut self, chunk: Vec<u8>) -> Result<()> {
        let pushed = self.try_push(chunk);
        if let Err(e) = &pushed {
            self.held = Held::Broken(e.to_string());
        }
        pushed
    }

    fn try_push(&mut self, chunk: Vec<u8>) -> Result<()> {
        let len = u32::try_from(chunk.len())
            .map_err(|_| Error::Io("a source chunk over 4 GiB".into()))?;
        self.count += 1;
        self.bytes += u64::from(len);
        match &mut self.held {
            Held::Memory(v) => {
                v.push(chunk);
                if self.bytes > self.in_memory as u64 {
                    let mut f = BufWriter::new(tempfile::tempfile().map_err(io)?);
                    for c in std::mem::take(v) {
                        write_chunk(&mut f, &c)?;
                    }
                    self.held = Held::File(f);
                }
            }
            Held::File(f) => write_chunk(f, &chunk)?,
            Held::Broken(e) => return Err(Error::Io(e.clone())),
        }
        Ok(())
    }

    /// Whether they were moved to a file: a commit then writes them ahead of its record, in
    /// batches of their own.
    pub(crate) fn in_file(&self) -> bool {
        matches!(self.held, Held::File(_))
    }

    /// Every chunk, in the order pushed.
    pub(crate) fn read_back(self) -> Result<ReadBack> {
        Ok(match self.held {
            Held::Broken(e) => return Err(Error::Io(e)),
            Held::Memory(v) => ReadBack::Memory(v.into_iter()),
            Held::File(f) => {
                let mut f = f.into_inner().map_err(|e| io(e.into_error()))?;
                f.seek(SeekFrom::Start(0)).map_err(io)?;
                ReadBack::File {
                    reader: BufReader::new(f),
                    left: self.count,
                }
            }
        })
    }
}

fn write_chunk(f: &mut BufWriter<File>, chunk: &[u8]) -> Result<()> {
    let len =
        u32::try_from(chunk.len()).map_err(|_| Error::Io("a source chunk over 4 GiB".into()))?;
    f.write_all(&len.to_le_bytes()).map_err(io)?;
    f.write_all(chunk).map_err(io)
}

/// The chunks of a [`Chunks`], read back one at a time.
pub(crate) enum ReadBack {
    Memory(std::vec::IntoIter<Vec<u8>>),
    File {
        reader: BufReader<File>,
        left: usize,
    },
}

impl Iterator for ReadBack {
    type Item = Result<Vec<u8>>;

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            ReadBack::Memory(v) => v.next().map(Ok),
            ReadBack::File { reader, left } => {
                if *left == 0 {
                    return None;
                }
                *left -= 1;
                let mut len = [0u8; 4];
                let read = reader.read_exact(&mut len).and_then(|()| {
                    let mut chunk = vec![0u8; u32::from_le_bytes(len) as usize];
                    reader.read_exact(&mut chunk).map(|()| chunk)
                });
                Some(read.map_err(io))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(i: usize) -> Vec<u8> {
        vec![i as u8; 3 + i % 7]
    }

    #[test]
    fn chunks_read_back_in_the_order_pushed_whether_they_stayed_in_memory_or_not() {
        for in_memory in [0, 10, 1 << 20] {
            let mut c = Chunks::with_memory(in_memory);
            for i in 0..50 {
                c.push(chunk(i)).unwrap();
            }
            assert_eq!(c.in_file(), in_memory < 1 << 20, "in_memory {in_memory}");
            let back: Vec<Vec<u8>> = c.read_back().unwrap().collect::<Result<_>>().unwrap();
            assert_eq!(back, (0..50).map(chunk).collect::<Vec<_>>());
        }
    }

    #[test]
    fn no_chunk_reads_back_nothing() {
        let c = Chunks::with_memory(0);
        assert!(!c.in_file());
        assert_eq!(c.read_back().unwrap().count(), 0);
    }
}
