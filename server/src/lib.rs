//! asof over Arrow Flight SQL (`asof serve`): many clients, one store, every statement `asof sql`
//! takes (queries, AUTO CDC DDL, REFRESH, DML, temporal clauses), prepared statements with
//! parameters, results streamed as Arrow batches. docs/SERVER.md says what a client sees.
//!
//! - `options.rs`: what to listen on, the token, TLS, and the rule that binds them.
//! - `auth.rs`: the bearer token every call carries (or the handshake that hands it out).
//! - `sessions.rs`: SQL sessions, run on blocking threads, one statement each at a time.
//! - `params.rs`: a prepared statement's parameters written into its text as literals.
//! - `results.rs`: results a `GetFlightInfo` ran, held until their `DoGet`.
//! - `status.rs`: asof's errors as Flight status codes, with the CLI's messages.
//! - `service.rs`: the Flight SQL service itself.
//! - `serve.rs`: the listener, its TLS and a clean shutdown.

mod auth;
mod options;
mod params;
mod results;
mod serve;
mod service;
mod sessions;
mod status;

pub use options::{ServeError, ServeOptions, TlsFiles};
pub use serve::serve;
