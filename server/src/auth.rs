//! The bearer token: every call carries `authorization: Bearer <token>`, or `Basic` with the
//! token as its password (what a handshake with a user name and password sends, and answers
//! with the bearer header). Without a token configured, every call is let in (loopback only:
//! `ServeOptions::check`).

use base64::Engine;
use tonic::metadata::MetadataMap;
use tonic::{Request, Status};

/// The header that carries the credentials.
pub(crate) const AUTHORIZATION: &str = "authorization";

/// Who may call.
#[derive(Clone)]
pub(crate) struct Auth {
    token: Option<String>,
}

impl Auth {
    pub(crate) fn new(token: Option<String>) -> Auth {
        Auth { token }
    }

    /// The bearer header to hand a client after a handshake, if a token is required.
    pub(crate) fn bearer(&self) -> Option<String> {
        self.token.as_ref().map(|t| format!("Bearer {t}"))
    }

    /// Lets `request` in if it carries the token (an interceptor of every call).
    #[allow(clippy::result_large_err)] // tonic's interceptors return a `Status`.
    pub(crate) fn check(&self, request: Request<()>) -> Result<Request<()>, Status> {
        match &self.token {
            None => Ok(request),
            Some(token) if carries(request.metadata(), token) => Ok(request),
            Some(_) => Err(Status::unauthenticated(
                "asof serve needs the bearer token: send `authorization: Bearer <token>` (in ADBC, the option adbc.flight.sql.authorization_header), or a user name and the token as password",
            )),
        }
    }
}

/// Whether `metadata` carries `token`, as a bearer token or as a Basic password.
fn carries(metadata: &MetadataMap, token: &str) -> bool {
    let Some(value) = metadata.get(AUTHORIZATION).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    if let Some(t) = value.strip_prefix("Bearer ") {
        return same(t.trim().as_bytes(), token.as_bytes());
    }
    let Some(basic) = value.strip_prefix("Basic ") else {
        return false;
    };
    let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(basic.trim()) else {
        return false;
    };
    match decoded.iter().position(|&b| b == b':') {
        Some(i) => same(&decoded[i + 1..], token.as_bytes()),
        None => false,
    }
}

/// Compares without stopping at the first byte that differs, so that timing does not tell how
/// much of a guess was right.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(header: Option<&str>) -> Request<()> {
        let mut r = Request::new(());
        if let Some(h) = header {
            r.metadata_mut().insert(AUTHORIZATION, h.parse().unwrap());
        }
        r
    }

    #[test]
    fn the_token_lets_in_as_bearer_or_basic_password_and_nothing_else_does() {
        let auth = Auth::new(Some("s3cret".into()));
        let basic = base64::engine::general_purpose::STANDARD.encode("anyone:s3cret");
        assert!(auth.check(with(Some("Bearer s3cret"))).is_ok());
        assert!(auth.check(with(Some(&format!("Basic {basic}")))).is_ok());
        let wrong = base64::engine::general_purpose::STANDARD.encode("anyone:s3cre");
        for bad in [
            None,
            Some("Bearer s3cre"),
            Some("Bearer s3cret2"),
            Some("bearer s3cret"),
            Some("Basic !!!"),
            Some(&*format!("Basic {wrong}")),
        ] {
            let e = auth.check(with(bad)).unwrap_err();
            assert_eq!(e.code(), tonic::Code::Unauthenticated, "{bad:?}");
        }
    }

    #[test]
    fn without_a_token_every_call_is_let_in() {
        assert!(Auth::new(None).check(with(None)).is_ok());
    }
}
