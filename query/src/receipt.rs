//! Report receipts (docs/SEMANTICS.md §12.1): the table versions a query read, its text, and a hash
//! of its result in a canonical encoding, as a token that re-runs the query at those versions and
//! proves the same answer after any number of later corrections; and what checking one found
//! ([`ReceiptCheck`]).
//!
//! The canonical encoding of a result: the schema (each column's name and Arrow type), then the
//! number of rows, then every row's encoding in **sorted** order, so that the order rows arrive in
//! never changes the hash (with or without `ORDER BY`: a report is its set of rows). A row's
//! encoding is its cells in column order, each `0x00` for NULL or `0x01`, its length (u64 LE) and
//! its text as Arrow's display formats it (ISO 8601 timestamps, decimals at their scale).

use std::collections::BTreeMap;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use sha2::{Digest, Sha256};

use crate::error::{QueryError, Result};

/// What a receipt holds.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Receipt {
    /// The query, as it was run.
    pub sql: String,
    /// The version of each target table it read.
    pub tables: BTreeMap<String, u64>,
    /// The version of each source table it read.
    pub sources: BTreeMap<String, u64>,
    /// The number of rows of the result.
    pub rows: u64,
    /// The SHA-256 of the result's canonical encoding, lower-case hex.
    pub hash: String,
    /// The catalog and schema the query's names were read in (`catalog.schema`), when not
    /// `main.default`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// The prefix of a receipt token; the rest is the receipt as JSON, in hex.
const TOKEN_PREFIX: &str = "asof-receipt-1:";

impl Receipt {
    /// The receipt as one token: `asof-receipt-1:` and its JSON in hex (no character a shell or a
    /// CSV file would treat specially).
    pub fn token(&self) -> String {
        let json = serde_json::to_vec(self).expect("a receipt serialises");
        let hex: String = json.iter().map(|b| format!("{b:02x}")).collect();
        format!("{TOKEN_PREFIX}{hex}")
    }

    /// What it read: `t at version 3, s at version 1` (targets, then sources).
    pub fn versions(&self) -> String {
        self.tables
            .iter()
            .chain(&self.sources)
            .map(|(t, v)| format!("{t} at version {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Reads a token written by [`Receipt::token`].
    pub fn parse(token: &str) -> Result<Receipt> {
        let bad = |why: &str| QueryError::Invalid(format!("not a receipt token: {why}"));
        let hex = token
            .trim()
            .strip_prefix(TOKEN_PREFIX)
            .ok_or_else(|| bad("it does not start with `asof-receipt-1:`"))?;
        if hex.len() % 2 != 0 {
            return Err(bad("odd length"));
        }
        let bytes = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16))
            .collect::<std::result::Result<Vec<u8>, _>>()
            .map_err(|_| bad("not hex"))?;
        serde_json::from_slice(&bytes).map_err(|e| bad(&e.to_string()))
    }
}

/// The number of rows of a result and the hash of its canonical encoding (module docs).
pub fn result_hash(schema: &SchemaRef, batches: &[RecordBatch]) -> Result<(u64, String)> {
    let options = FormatOptions::default().with_null("");
    let mut rows: Vec<Vec<u8>> = Vec::new();
    for b in batches {
        let formatters = b
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &options))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        for r in 0..b.num_rows() {
            let mut row = Vec::new();
            for (c, f) in b.columns().iter().zip(&formatters) {
                if c.is_null(r) {
                    row.push(0);
                    continue;
                }
                let text = f.value(r).to_string();
                row.push(1);
                row.extend_from_slice(&(text.len() as u64).to_le_bytes());
                row.extend_from_slice(text.as_bytes());
            }
            rows.push(row);
        }
    }
    rows.sort_unstable();
    let mut h = Sha256::new();
    for f in schema.fields() {
        let part = format!("{}:{}", f.name(), f.data_type());
        h.update((part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    h.update((rows.len() as u64).to_le_bytes());
    for r in &rows {
        h.update((r.len() as u64).to_le_bytes());
        h.update(r);
    }
    let hex = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    Ok((rows.len() as u64, hex))
}

/// What checking a receipt found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReceiptCheck {
    /// The receipt checked.
    pub receipt: Receipt,
    /// The number of rows the query returns now, at the receipt's versions.
    pub rows: u64,
    /// The hash of what it returns now.
    pub hash: String,
    /// The erasures made since the versions the receipt read, in the tables it read (`customers
    /// at version 4: 'GDPR request 42'`): a result that held erased data cannot verify.
    pub erased_since: Vec<String>,
}

impl ReceiptCheck {
    /// Whether the query still returns what the receipt says.
    pub fn matches(&self) -> bool {
        self.rows == self.receipt.rows && self.hash == self.receipt.hash
    }
}
