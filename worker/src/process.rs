//! Process plumbing both binaries share: binding listeners and shutting down on SIGTERM/SIGINT.

use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

use actix_web::dev::ServerHandle;
use anyhow::Context;

/// Binds a listener, naming the config key in the error.
pub fn bind(addr: SocketAddr, key: &str) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr).with_context(|| format!("{key}: cannot listen on {addr}"))
}

/// Waits for SIGTERM or SIGINT.
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// On a signal: stop accepting and let in-flight requests finish (each server was built with its
/// `shutdown_timeout`). Returns once every server has stopped.
pub async fn stop_on_signal(handles: Vec<ServerHandle>, timeout: Duration) {
    shutdown_signal().await;
    tracing::info!(timeout_secs = timeout.as_secs(), "shutting down: no new connections, finishing in-flight requests");
    for h in &handles {
        h.stop(true).await;
    }
}
