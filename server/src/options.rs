//! What `asof serve` listens on and who may call it.

use std::net::SocketAddr;
use std::path::PathBuf;

/// A certificate and its private key, PEM files, to serve TLS.
#[derive(Clone, Debug)]
pub struct TlsFiles {
    /// The certificate (chain).
    pub cert: PathBuf,
    /// Its private key.
    pub key: PathBuf,
}

/// How to serve.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// The address to listen on (default `127.0.0.1:50051`).
    pub listen: SocketAddr,
    /// The bearer token every call must carry; required unless `listen` is a loopback address.
    pub token: Option<String>,
    /// Serve TLS with this certificate.
    pub tls: Option<TlsFiles>,
    /// How many statements run at once (default 8); more wait their turn.
    pub sessions: usize,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            listen: SocketAddr::from(([127, 0, 0, 1], 50051)),
            token: None,
            tls: None,
            sessions: 8,
        }
    }
}

/// Why the server did not start, or stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// Listening beyond this machine without a token would let anyone read and write the store.
    #[error("asof serve listens on {0}, beyond this machine: give a bearer token (--token or ASOF_TOKEN) that clients must send, or listen on 127.0.0.1")]
    TokenRequired(SocketAddr),
    /// An empty token would let in a client that sends an empty one.
    #[error("the bearer token (--token or ASOF_TOKEN) is empty: give one, or leave it out to serve on loopback only")]
    EmptyToken,
    /// A TLS file could not be read.
    #[error("cannot read the TLS file {path}: {problem}")]
    Tls {
        /// The file.
        path: PathBuf,
        /// What failed.
        problem: String,
    },
    /// The listener or the runtime failed.
    #[error("asof serve: {0}")]
    Transport(String),
    /// The store's sessions could not start.
    #[error(transparent)]
    Query(#[from] asof_query::QueryError),
}

impl ServeOptions {
    /// Refuses options that would expose the store: a listener beyond loopback without a token.
    pub fn check(&self) -> Result<(), ServeError> {
        if self.token.as_deref().is_some_and(|t| t.trim().is_empty()) {
            return Err(ServeError::EmptyToken);
        }
        if !self.listen.ip().is_loopback() && self.token.is_none() {
            return Err(ServeError::TokenRequired(self.listen));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(listen: &str, token: Option<&str>) -> Result<(), ServeError> {
        ServeOptions {
            listen: listen.parse().unwrap(),
            token: token.map(String::from),
            ..Default::default()
        }
        .check()
    }

    #[test]
    fn beyond_loopback_a_token_is_required_and_an_empty_one_is_refused() {
        assert!(at("127.0.0.1:1", None).is_ok());
        assert!(at("[::1]:1", None).is_ok());
        for open in [
            "0.0.0.0:1",
            "[::]:1",
            "192.168.1.2:1",
            "[::ffff:127.0.0.1]:1",
        ] {
            assert!(
                matches!(at(open, None), Err(ServeError::TokenRequired(_))),
                "{open}"
            );
        }
        assert!(at("0.0.0.0:1", Some("t")).is_ok());
        for empty in ["", "  "] {
            assert!(matches!(
                at("0.0.0.0:1", Some(empty)),
                Err(ServeError::EmptyToken)
            ));
            assert!(matches!(
                at("127.0.0.1:1", Some(empty)),
                Err(ServeError::EmptyToken)
            ));
        }
    }
}
