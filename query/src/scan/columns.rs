//! The columns of the batch a scan builds: a builder per column (`Col`), filled from a row in
//! memory at a time or from a key's rows read from its pages together (`Filling`: the value
//! columns a page block at a time, the bounds a column at a time), and the windows bounds are
//! trimmed to (`ONLY FROM ... TO`: `Clamp`).

use arrow::array::ArrayRef;
use asof_storage::{RowSink, RowView, StoredAs, StoredRows, TableSchema, TemporalBound};

use crate::arrow_conv::{TemporalBuilder, ValueBuilder};
use crate::error::{QueryError, Result};

/// How a bound is trimmed to a window: [`Clamp::start`] or [`Clamp::end`].
type Trim = for<'a> fn(&'a Clamp, Option<&'a [u8]>) -> Option<&'a [u8]>;

/// A window `[from, to)` that returned intervals are trimmed to (encoded bounds).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Clamp {
    pub(super) from: Vec<u8>,
    pub(super) to: Vec<u8>,
}

impl Clamp {
    /// A start trimmed to the window.
    fn start<'a>(&'a self, start: Option<&'a [u8]>) -> Option<&'a [u8]> {
        match start {
            Some(s) if s >= &self.from[..] => Some(s),
            _ => Some(&self.from),
        }
    }
    /// An end (`None`: open) trimmed to the window.
    fn end<'a>(&'a self, end: Option<&'a [u8]>) -> Option<&'a [u8]> {
        match end {
            Some(e) if e <= &self.to[..] => Some(e),
            _ => Some(&self.to),
        }
    }
}

/// A column of the batch a scan builds: a value column (its index among the output columns), or
/// one of the bounds, with the window it is trimmed to.
pub(crate) enum Col {
    Value(usize, ValueBuilder),
    Start(TemporalBuilder, Option<Clamp>),
    End(TemporalBuilder, Option<Clamp>),
    SysStart(TemporalBuilder, Option<Clamp>),
    SysEnd(TemporalBuilder, Option<Clamp>),
}

impl Col {
    /// Appends the row's cell of this column; an error if a page's cell is damaged.
    pub(crate) fn append(&mut self, r: &RowView<'_>) -> Result<()> {
        if let Col::Value(i, b) = self {
            b.append_ref(r.values.get(*i)?);
        } else if let Some(BoundColumn {
            builder,
            which,
            trim,
        }) = self.bound_column()
        {
            let cell = r.bound(which);
            builder.append(trim.map_or(cell, |(c, trim)| trim(c, cell)));
        }
        Ok(())
    }

    /// Appends this column's bound of every one of `rows`, a column at a time (a value column:
    /// nothing).
    fn append_bounds(&mut self, rows: &StoredRows<'_>) {
        let Some(BoundColumn {
            builder,
            which,
            trim,
        }) = self.bound_column()
        else {
            return;
        };
        match trim {
            None => builder.append_stored(rows, which),
            Some((c, trim)) => builder.append_all(rows.bounds(which).map(|x| trim(c, x))),
        }
    }

    /// This column as a bound column (`None`: a value column).
    fn bound_column(&mut self) -> Option<BoundColumn<'_>> {
        let (builder, which, clamp, trim): (_, _, _, Trim) = match self {
            Col::Value(..) => return None,
            Col::Start(b, c) => (b, TemporalBound::Start, c, Clamp::start),
            Col::End(b, c) => (b, TemporalBound::End, c, Clamp::end),
            Col::SysStart(b, c) => (b, TemporalBound::SystemStart, c, Clamp::start),
            Col::SysEnd(b, c) => (b, TemporalBound::SystemEnd, c, Clamp::end),
        };
        Some(BoundColumn {
            builder,
            which,
            trim: clamp.as_ref().map(|c| (c, trim)),
        })
    }

    pub(crate) fn finish(&mut self) -> Result<ArrayRef> {
        Ok(match self {
            Col::Value(_, b) => b.finish()?,
            Col::Start(b, _) | Col::End(b, _) | Col::SysStart(b, _) | Col::SysEnd(b, _) => {
                b.finish()?
            }
        })
    }
}

/// A column of one of the bounds, as a scan fills it: its builder, the bound it shows, and the
/// window it is trimmed to with how (`ONLY FROM ... TO`).
struct BoundColumn<'c> {
    builder: &'c mut TemporalBuilder,
    which: TemporalBound,
    trim: Option<(&'c Clamp, Trim)>,
}

/// The columns of the batch a scan builds, filled by the storage scan: a row in memory at a time,
/// the rows a key's pages give a column at a time where the column's builder allows.
pub(super) struct Filling<'c> {
    pub(super) cols: &'c mut [Col],
    /// Rows in the batch so far.
    pub(super) n: &'c mut usize,
    /// A damaged cell ends the scan with its error (the batch being built is dropped).
    pub(super) failed: Option<QueryError>,
}

impl RowSink for Filling<'_> {
    fn row(&mut self, row: RowView<'_>) {
        *self.n += 1;
        for c in self.cols.iter_mut() {
            if let Err(e) = c.append(&row) {
                self.failed.get_or_insert(e);
            }
        }
    }

    fn stored_rows(&mut self, rows: &StoredRows<'_>) {
        *self.n += rows.len();
        if let Err(e) = append_stored(self.cols, rows) {
            self.failed.get_or_insert(e);
        }
    }
}

/// Appends `rows` to `cols`: each value column a page block at a time where its builder allows
/// ([`StoredRows::append_column`]), else a cell at a time; each bound column in one loop
/// ([`Col::append_bounds`]).
fn append_stored(cols: &mut [Col], rows: &StoredRows<'_>) -> Result<()> {
    let mut bounds = false;
    for c in cols.iter_mut() {
        let Col::Value(i, b) = c else {
            bounds = true;
            continue;
        };
        let done = match b.as_array_builder() {
            Some(out) => rows.append_column(*i, out)?,
            None => false,
        };
        if !done {
            for j in 0..rows.len() {
                b.append_ref(rows.row(j).values.get(*i)?);
            }
        }
    }
    if bounds {
        for c in cols.iter_mut() {
            c.append_bounds(rows);
        }
    }
    Ok(())
}

/// The windows a scan trims business and system intervals to.
#[derive(Clone, Debug, Default)]
pub(crate) struct Clamps {
    pub(super) business: Option<Clamp>,
    pub(super) system: Option<Clamp>,
}

/// Builders for `columns` of a table (output columns, then the temporal ones).
pub(crate) fn make_cols(
    schema: &TableSchema,
    columns: &[usize],
    cap: usize,
    clamps: &Clamps,
) -> Vec<Col> {
    let n_out = schema.columns.len();
    let sys = schema
        .system_sequence
        .clone()
        .map(|t| vec![(String::new(), t)]);
    let seq = &schema.sequence;
    let bt = schema.mode != StoredAs::Scd1;
    columns
        .iter()
        .map(|&c| {
            if c < n_out {
                return Col::Value(c, ValueBuilder::new(&schema.columns[c].1, cap));
            }
            let (b, s) = (clamps.business.clone(), clamps.system.clone());
            match (c - n_out, bt) {
                (0, true) => Col::Start(TemporalBuilder::new(seq, cap), b),
                (1, true) => Col::End(TemporalBuilder::new(seq, cap), b),
                (2, true) | (0, false) => Col::SysStart(
                    TemporalBuilder::new(sys.as_deref().expect("bitemporal"), cap),
                    s,
                ),
                _ => Col::SysEnd(
                    TemporalBuilder::new(sys.as_deref().expect("bitemporal"), cap),
                    s,
                ),
            }
        })
        .collect()
}
