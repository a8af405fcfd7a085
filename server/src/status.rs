//! asof's errors as Flight status codes. The message is the one `asof sql` prints.

use asof_query::QueryError;
use asof_storage::Error;
use tonic::{Code, Status};

/// The status a client gets for `e`.
pub(crate) fn status(e: &QueryError) -> Status {
    let code = match e {
        QueryError::Invalid(_) | QueryError::Arrow(_) => Code::InvalidArgument,
        QueryError::Storage(e) => storage_code(e),
        _ => Code::Internal,
    };
    Status::new(code, e.to_string())
}

fn storage_code(e: &Error) -> Code {
    match e {
        Error::NotFound { .. } | Error::NoSuchVersion { .. } | Error::VersionVacuumed { .. } => {
            Code::NotFound
        }
        Error::AlreadyExists { .. } => Code::AlreadyExists,
        // The statement may succeed later, as it is or after another one.
        Error::ChangedMeanwhile { .. }
        | Error::SourceChangedMeanwhile { .. }
        | Error::FlowRanMeanwhile { .. }
        | Error::ScanInterrupted(_) => Code::Aborted,
        Error::FlowStopped(_) | Error::VersionPinned { .. } | Error::RetentionTooShort { .. } => {
            Code::FailedPrecondition
        }
        Error::InUse { .. } => Code::Unavailable,
        Error::Corrupt(_) | Error::ManifestLost { .. } => Code::DataLoss,
        Error::Poisoned(_) | Error::Io(_) | Error::RetentionFailed { .. } => Code::Internal,
        Error::FormatVersion { .. } => Code::FailedPrecondition,
        _ => Code::InvalidArgument,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_table_is_not_found_with_the_cli_message() {
        let e = QueryError::Storage(Error::NotFound {
            kind: "table",
            name: "t".into(),
        });
        let s = status(&e);
        assert_eq!(
            (s.code(), s.message()),
            (Code::NotFound, e.to_string().as_str())
        );
    }

    #[test]
    fn a_bad_query_is_an_invalid_argument() {
        let s = status(&QueryError::Invalid("no such column `x`".into()));
        assert_eq!(s.code(), Code::InvalidArgument);
        assert!(s.message().contains("no such column `x`"));
    }
}
