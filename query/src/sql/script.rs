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
        let rest = if k == self.statements {
            format!("statement {k} is not")
        } else {
            format!("statements {k}..{} are not", self.statements)
        };
        write!(f, "\n{done}; {rest}")
    }
}

impl std::error::Error for ScriptError {}
