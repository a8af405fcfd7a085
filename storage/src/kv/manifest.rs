//! The manifest beside sled's files (`asof.manifest`, FORMAT.md §5.1): for each table, the highest
//! commit version written and flushed so far, which an open checks the store against
//! ([`super::SledKv`]).

use std::path::Path;

use crate::error::{Error, Result};
use crate::format::keys::FOLLOWED;

/// The manifest of a store: where it lives and the marks it holds.
pub(super) struct Manifest {
    pub(super) path: std::path::PathBuf,
    /// (tag, table id) -> highest version written.
    pub(super) marks: std::sync::Mutex<std::collections::BTreeMap<(u8, u32), u64>>,
}

/// The first line of every manifest written since it became mandatory. Manifests written before
/// have none and are read the same.
const MANIFEST_HEADER: &str = "asof-manifest 1";

/// What [`Manifest::load`] found.
pub(super) enum Loaded {
    /// A manifest, read (it may name no table).
    Read(Manifest),
    /// No file, or an empty one: the marks must be rebuilt (a new store) or the loss reported.
    Lost(Manifest, &'static str),
}

/// What to do with the manifest when a store is opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ManifestCheck {
    /// Check it: every commit it names must be in the store, and a store with commits must have
    /// one. A missing, empty or damaged manifest is reported (`Error::ManifestLost`).
    #[default]
    Verify,
    /// Rebuild it from the commits the store holds, for a store whose manifest was lost, once
    /// the user has confirmed that the files are theirs and complete (`asof repair`). A store
    /// that lost commits as well cannot tell after this.
    Rebuild,
}

impl Manifest {
    pub(super) fn empty(dir: &Path) -> Manifest {
        Manifest {
            path: dir.join("asof.manifest"),
            marks: Default::default(),
        }
    }

    pub(super) fn load(dir: &Path) -> Result<Loaded> {
        let path = dir.join("asof.manifest");
        let mut marks = std::collections::BTreeMap::new();
        let damaged = |detail: String| Error::ManifestLost {
            path: path.display().to_string(),
            problem: format!("damaged ({detail})"),
        };
        match std::fs::read(&path) {
            Ok(bytes) if bytes.is_empty() => {
                return Ok(Loaded::Lost(Manifest::empty(dir), "empty"))
            }
            Ok(bytes) => {
                let text = String::from_utf8(bytes).map_err(|_| damaged("not text".to_string()))?;
                for line in text
                    .lines()
                    .filter(|l| !l.is_empty() && *l != MANIFEST_HEADER)
                {
                    let bad = || damaged(format!("`{line}`"));
                    let mut f = line.split(' ');
                    let (Some(tag), Some(id), Some(v), None) =
                        (f.next(), f.next(), f.next(), f.next())
                    else {
                        return Err(bad());
                    };
                    let tag = match tag.as_bytes() {
                        [t] if FOLLOWED.iter().any(|(c, _)| c == t) => *t,
                        _ => return Err(bad()),
                    };
                    marks.insert(
                        (tag, id.parse().map_err(|_| bad())?),
                        v.parse().map_err(|_| bad())?,
                    );
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Loaded::Lost(Manifest::empty(dir), "missing"))
            }
            Err(e) => return Err(Error::Io(format!("{}: {e}", path.display()))),
        }
        Ok(Loaded::Read(Manifest {
            path,
            marks: std::sync::Mutex::new(marks),
        }))
    }

    /// Replaces the manifest durably: a temporary file, synced, renamed over it, and the folder
    /// synced, so that after a power loss it is the old one or the new one, never empty.
    pub(super) fn save(&self, marks: &std::collections::BTreeMap<(u8, u32), u64>) -> Result<()> {
        use std::io::Write;
        let mut text = format!("{MANIFEST_HEADER}\n");
        for ((tag, id), v) in marks {
            text.push_str(&format!("{} {id} {v}\n", *tag as char));
        }
        let tmp = self.path.with_extension("manifest.tmp");
        let io = |e: std::io::Error| Error::Io(format!("{}: {e}", self.path.display()));
        let mut f = std::fs::File::create(&tmp).map_err(io)?;
        f.write_all(text.as_bytes()).map_err(io)?;
        f.sync_all().map_err(io)?;
        drop(f);
        std::fs::rename(&tmp, &self.path).map_err(io)?;
        if let Some(dir) = self.path.parent() {
            std::fs::File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(io)?;
        }
        Ok(())
    }
}
