//! The snapshots of a snapshot folder (`AUTO CDC FROM SNAPSHOT read_files('folder', ...)`): each
//! file directly in the folder is one snapshot, named by its file name; each subfolder is one
//! snapshot, named by the subfolder, made of every file under it. A subfolder is taken once it
//! holds a `_SUCCESS` file (what Spark and Hadoop jobs write when they have written every other
//! file), and whole: all its files in one refresh. A file arriving later in a subfolder taken
//! already joins its snapshot, which the next refresh applies again (a correction of that
//! snapshot, as a late snapshot corrects history).

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

/// The file a subfolder snapshot is complete with.
pub const DONE_MARKER: &str = "_SUCCESS";

/// The subfolder of `root` that `file` lies in (at any depth), if it is not directly in `root`.
fn subfolder(root: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(root).ok()?;
    let mut parts = rel.components();
    let first = parts.next()?;
    parts.next()?;
    match first {
        Component::Normal(name) => Some(name.to_string_lossy().into_owned()),
        _ => None,
    }
}

/// The snapshot `file` of folder `root` belongs to: its subfolder's name, or its own path under
/// `root`.
pub fn snapshot_name(root: &Path, file: &Path) -> String {
    subfolder(root, file).unwrap_or_else(|| {
        file.strip_prefix(root)
            .unwrap_or(file)
            .display()
            .to_string()
    })
}

/// Of the `new` files of snapshot folder `root`, those to take now: the folder's own files, and
/// the files of each subfolder that holds [`DONE_MARKER`].
pub fn ready(root: &Path, new: Vec<PathBuf>) -> Vec<PathBuf> {
    new.into_iter()
        .filter(|file| {
            subfolder(root, file).is_none_or(|sub| root.join(sub).join(DONE_MARKER).exists())
        })
        .collect()
}

/// `settled` (the files of `wanted` that are not being written) without the subfolders some of
/// whose files were left for later: a subfolder's snapshot is taken whole or not at all.
pub fn whole(root: &Path, settled: Vec<PathBuf>, wanted: &[PathBuf]) -> Vec<PathBuf> {
    let kept: BTreeSet<&PathBuf> = settled.iter().collect();
    let partial: BTreeSet<String> = wanted
        .iter()
        .filter(|f| !kept.contains(f))
        .filter_map(|f| subfolder(root, f))
        .collect();
    settled
        .into_iter()
        .filter(|f| subfolder(root, f).is_none_or(|s| !partial.contains(&s)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_in_a_subfolder_are_one_snapshot_named_by_it() {
        let root = Path::new("/snaps");
        assert_eq!(
            snapshot_name(root, Path::new("/snaps/2025-01.csv")),
            "2025-01.csv"
        );
        assert_eq!(
            snapshot_name(root, Path::new("/snaps/2025-02/part-1.csv")),
            "2025-02"
        );
        assert_eq!(
            snapshot_name(root, Path::new("/snaps/2025-02/a/b.csv")),
            "2025-02"
        );
    }

    #[test]
    fn a_subfolder_with_a_file_left_for_later_waits_whole() {
        let root = Path::new("/snaps");
        let wanted: Vec<PathBuf> = [
            "/snaps/a/1.csv",
            "/snaps/a/2.csv",
            "/snaps/b/1.csv",
            "/snaps/c.csv",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        let settled = vec![wanted[0].clone(), wanted[2].clone(), wanted[3].clone()];
        assert_eq!(
            whole(root, settled, &wanted),
            vec![
                PathBuf::from("/snaps/b/1.csv"),
                PathBuf::from("/snaps/c.csv")
            ]
        );
    }
}
