//! A script's failure: which statement, on which line, and what was committed before it.

use crate::error::QueryError;

/// A script stopped at a statement that failed: which one, and what was committed before it.
#[derive(Debug)]
pub struct ScriptError {
    /// The failed statement's number, from 1.
    pub statement: usize,
    /// The line it starts on, from 1.
    pub line: u64,
    /// How many statements the script has.
    pub statements: usize,
    /// Why it failed.
    pub error: Box<QueryError>,
    /// Whether the failed statement is one commit or several (docs/SEMANTICS.md §2.3).
    pub steps: Steps,
}

/// How a statement commits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Steps {
    /// In one commit, or not at all.
    One,
    /// In several atomic steps (a refresh of several flows or of new files, a flow added to an
    /// existing table, new expectations and a refresh): a failure keeps the steps before it.
    Several,
}

impl std::fmt::Display for ScriptError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let k = self.statement;
        if self.statements == 1 {
            return write!(f, "{}", self.error);
        }
        write!(
            f,
            "statement {k} (line {}) failed: {}",
            self.line, self.error
        )?;
        let done = match k {
            1 => "nothing before it ran".to_string(),
            2 => "statement 1 is committed".to_string(),
            _ => format!("statements 1..{} are committed", k - 1),
        };
        let rest = match (self.steps, k == self.statements) {
            (Steps::One, true) => format!("statement {k} is not"),
            (Steps::One, false) => format!("statements {k}..{} are not", self.statements),
            (Steps::Several, last) => format!(
                "statement {k} keeps the steps it committed before it failed (see DESCRIBE HISTORY){}",
                match self.statements - k {
                    _ if last => String::new(),
                    1 => format!("; statement {} is not", self.statements),
                    _ => format!("; statements {}..{} are not", k + 1, self.statements),
                }
            ),
        };
        write!(f, "\n{done}; {rest}")
    }
}

impl std::error::Error for ScriptError {}
