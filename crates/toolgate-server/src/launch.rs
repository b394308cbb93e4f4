//! The launcher: binds the listener, serves the router behind the `Host`
//! guard, and runs the background workers (continuation, timers, retention,
//! receipts, notifications) until shutdown, then signs the receipts' last
//! checkpoint. It stands above everything else in the crate: the state, the
//! router and the workers; none of them imports it.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::serve::ListenerExt;

use crate::api::router;
use crate::app::AppState;
use crate::workers::notifications::Follower;
use crate::workers::{self, continuation, retention, timers};

/// Completes on SIGINT (Ctrl-C) or SIGTERM.
pub async fn shutdown_signal() {
    let interrupt = async {
        if let Err(error) = tokio::signal::ctrl_c().await {
            tracing::error!(%error, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(error) => {
                tracing::error!(%error, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {},
        () = terminate => {},
    }
    tracing::info!("shutting down");
}

/// Serves until `shutdown` completes, then finishes the requests in flight
/// and writes out the prompt trace.
pub async fn serve(state: AppState, shutdown: impl Future<Output = ()> + Send + 'static) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(state.config().addr).await?;
    serve_listener(listener, state, shutdown).await
}

/// [`serve`] on a listener that is already bound (e.g. to `127.0.0.1:0`).
pub async fn serve_listener(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let addr = listener.local_addr()?;
    let hosts = crate::host::HostGuard::new(addr, &state.config().allowed_hosts)
        .map_err(|detail| std::io::Error::new(std::io::ErrorKind::InvalidInput, detail))?;
    tracing::info!(%addr, secret = ?state.config().secret.source(), "toolgate serving on http://{addr}");
    tracing::info!(names = %hosts.describe(), "answering requests for these Host names only");
    // SSE frames are small writes: without TCP_NODELAY, Nagle's algorithm holds each one until the
    // client's delayed ACK (tens of milliseconds per response).
    let listener = listener.tap_io(|tcp| {
        if let Err(error) = tcp.set_nodelay(true) {
            tracing::warn!(%error, "cannot set TCP_NODELAY");
        }
    });
    // The peer's address decides whether a principal header is believed (see `Caller`).
    let app = router(state.clone())
        .layer(axum::middleware::from_fn_with_state(Arc::new(hosts), crate::host::guard))
        .into_make_service_with_connect_info::<SocketAddr>();
    let mut background = spawn_workers(&state);
    if let Some(addr) = state.config().metrics_addr {
        background.push(serve_metrics(addr, state.clone()).await?);
    }
    let served = axum::serve(listener, app).with_graceful_shutdown(shutdown).await;
    for task in background {
        task.abort();
    }
    if let (Some(receipts), Some(ledger)) = (&state.config().receipts, &state.config().ledger) {
        workers::receipts::finish(receipts.as_ref(), ledger.clock.as_ref()).await;
    }
    state.flush_trace();
    // The spans of the last requests: the exporter's thread sends them (it blocks until it answers).
    if crate::telemetry::enabled() && tokio::task::spawn_blocking(crate::telemetry::flush).await.is_err() {
        tracing::warn!("cannot export the last spans");
    }
    served
}

/// Serves `GET /metrics` alone on `addr` (`--metrics-addr`), behind the same
/// `Host` guard as the main listener (a web page cannot read it through a
/// rebound name); stops with the server.
async fn serve_metrics(addr: SocketAddr, state: AppState) -> std::io::Result<tokio::task::JoinHandle<()>> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let hosts = crate::host::HostGuard::new(bound, &state.config().allowed_hosts)
        .map_err(|detail| std::io::Error::new(std::io::ErrorKind::InvalidInput, detail))?;
    tracing::info!(addr = %bound, "metrics for scrapers on http://{bound}/metrics");
    let app = crate::api::metrics::scrape_only(state)
        .layer(axum::middleware::from_fn_with_state(Arc::new(hosts), crate::host::guard))
        .into_make_service_with_connect_info::<SocketAddr>();
    Ok(tokio::spawn(async move {
        if let Err(error) = axum::serve(listener, app).await {
            tracing::error!(%error, "the metrics listener stopped");
        }
    }))
}

/// Starts the background workers (none without a ledger), each on the parts
/// of the state it needs: retention (with `--retain`), the continuation, the
/// timers, and the notifications (with `[[notify]]` channels).
fn spawn_workers(state: &AppState) -> Vec<tokio::task::JoinHandle<()>> {
    let config = state.config();
    let Some(ledger) = &config.ledger else { return Vec::new() };
    let (store, clock) = (Arc::clone(&ledger.store), Arc::clone(&ledger.clock));
    let mut tasks = Vec::new();
    if let Some(retain) = config.retain {
        tasks.push(tokio::spawn(retention::prune_loop(Arc::clone(&store), Arc::clone(&clock), retain)));
    }
    if let Some(receipts) = &config.receipts {
        tasks.push(tokio::spawn(workers::receipts::seal_loop(Arc::clone(receipts), Arc::clone(&clock))));
    }
    tasks.push(tokio::spawn(continuation::continue_due(ledger.clone(), state.run_context().clone())));
    tasks.push(tokio::spawn(timers::fire_due(ledger.clone(), config.groups.clone(), state.signals().clone())));
    if let Some(notifications) = &config.notifications {
        let (groups, links, metrics) = (config.groups.clone(), state.link_signer().clone(), state.metrics().clone());
        let follower = Follower { store, clock, groups, links, metrics };
        tasks.extend(workers::notifications::start(follower, notifications));
    }
    tasks
}
