//! The listener: TLS when given a certificate, the token checked on every call, and a clean stop
//! on Ctrl-C or SIGTERM (the statements running finish, their commits land; none is cut).

use std::future::Future;
use std::net::SocketAddr;

use arrow_flight::flight_service_server::FlightServiceServer;
use asof_storage::Store;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Identity, Server, ServerTlsConfig};

use crate::auth::Auth;
use crate::options::{ServeError, ServeOptions, TlsFiles};
use crate::service::Service;
use crate::sessions::Sessions;

/// Serves `store` over Arrow Flight SQL until Ctrl-C or SIGTERM, then lets the statements
/// running finish and returns. `listening` is told the address once the server accepts calls
/// (with port 0 in the options, the port the system chose).
pub fn serve(
    store: Store,
    options: ServeOptions,
    listening: impl FnOnce(SocketAddr),
) -> Result<(), ServeError> {
    options.check()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| ServeError::Transport(e.to_string()))?;
    runtime.block_on(serve_until(store, options, listening, stop_signal()))
}

/// [`serve`] until `stop` completes.
async fn serve_until(
    store: Store,
    options: ServeOptions,
    listening: impl FnOnce(SocketAddr),
    stop: impl Future<Output = ()>,
) -> Result<(), ServeError> {
    let transport = |e: &dyn std::fmt::Display| ServeError::Transport(e.to_string());
    let listener = tokio::net::TcpListener::bind(options.listen)
        .await
        .map_err(|e| transport(&format!("cannot listen on {}: {e}", options.listen)))?;
    let addr = listener.local_addr().map_err(|e| transport(&e))?;
    let auth = Auth::new(options.token.clone());
    let service = Service::new(Sessions::new(store, options.sessions), auth.clone());
    let service = FlightServiceServer::with_interceptor(service, move |r| auth.check(r));
    let mut builder = Server::builder();
    if let Some(tls) = &options.tls {
        builder = builder
            .tls_config(ServerTlsConfig::new().identity(identity(tls)?))
            .map_err(|e| transport(&e))?;
    }
    listening(addr);
    // Without TCP_NODELAY a small answer waits for the peer's delayed ACK: 40 ms a call.
    builder
        .add_service(service)
        .serve_with_incoming_shutdown(TcpIncoming::from(listener).with_nodelay(Some(true)), stop)
        .await
        .map_err(|e| transport(&e))
}

fn identity(tls: &TlsFiles) -> Result<Identity, ServeError> {
    let read = |path: &std::path::Path| {
        std::fs::read(path).map_err(|e| ServeError::Tls {
            path: path.to_path_buf(),
            problem: e.to_string(),
        })
    };
    Ok(Identity::from_pem(read(&tls.cert)?, read(&tls.key)?))
}

/// Completes on Ctrl-C or SIGTERM.
async fn stop_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
}
