//! Positions of source-table rows (counting every row ever written, from 0) as commits record
//! them: sorted lists written as ranges, `3-7,12`.

use crate::commit_info::CommitInfo;
use crate::error::{corrupt, Result};

/// `positions` (sorted) as ranges: `3-7,12`.
pub(crate) fn format_positions(positions: &[u64]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < positions.len() {
        let mut j = i;
        while j + 1 < positions.len() && positions[j + 1] == positions[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            positions[i].to_string()
        } else {
            format!("{}-{}", positions[i], positions[j])
        });
        i = j + 1;
    }
    out.join(",")
}

/// The positions in a ranges list (`3-7,12`) of commit `c`'s parameter `name`.
pub(crate) fn positions_in(c: &CommitInfo, name: &str) -> Result<Vec<u64>> {
    let mut out = Vec::new();
    for (a, b) in runs_in(c, name)? {
        out.extend(a..b);
    }
    Ok(out)
}

/// The ranges of a ranges list (`3-7,12`) of commit `c`'s parameter `name`, as `[a, b)`.
pub(crate) fn runs_in(c: &CommitInfo, name: &str) -> Result<Vec<(u64, u64)>> {
    match c.parameters.get(name) {
        Some(list) => runs(list, &format!("source commit {}: {name}", c.version)),
        None => Ok(Vec::new()),
    }
}

/// The positions in a ranges list (`3-7,12`) written by [`format_positions`]; `what` names the
/// list in an error.
pub(crate) fn parse_positions(list: &str, what: &str) -> Result<Vec<u64>> {
    let mut out = Vec::new();
    for (a, b) in runs(list, what)? {
        out.extend(a..b);
    }
    Ok(out)
}

/// The ranges of a ranges list (`3-7,12`), as `[a, b)`; `what` names the list in an error.
fn runs(list: &str, what: &str) -> Result<Vec<(u64, u64)>> {
    let mut out = Vec::new();
    for part in list.split(',').filter(|p| !p.is_empty()) {
        let bad = || corrupt(format!("{what} `{part}`"));
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let (a, b): (u64, u64) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
        if b < a || b - a > u32::MAX as u64 {
            return Err(bad());
        }
        out.push((a, b.checked_add(1).ok_or_else(bad)?));
    }
    Ok(out)
}
