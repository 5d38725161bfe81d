//! Kandev's HTTP + WebSocket API: one action table served at `POST /api/v1/<action>` and over
//! `GET /ws`, live notifications with replay, and the security checks of api.md.

mod bootstrap;
mod dispatch;
mod error;
mod handlers;
mod http;
mod security;
mod state;
mod ui;
mod ws;

use std::net::SocketAddr;

use axum::Router;
use axum::routing::{get, post};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use bootstrap::first_run;
pub use dispatch::dispatch;
pub use error::ApiError;
pub use security::check_bind;
pub use state::{AppState, ServerConfig};

/// The server's version, reported by the health endpoint.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The router with every route and the security layer.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/api/v1/health", get(http::health))
        .route("/api/v1/{action}", post(http::action))
        .route("/ws", get(ws::upgrade))
        .route(security::LOGIN_PATH, get(ui::login_page).post(ui::login))
        .fallback(ui::fallback)
        .method_not_allowed_fallback(http::wrong_method)
        .layer(axum::middleware::from_fn_with_state(state.clone(), security::guard))
        .with_state(state)
}

/// Serves on an already-bound listener until `shutdown` is cancelled. Taking a listener lets
/// tests bind port 0.
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let closing = state.closing().clone();
    let app = router(state).into_make_service_with_connect_info::<SocketAddr>();
    // Open WebSockets would keep a graceful shutdown waiting: close them first.
    let stop = async move {
        shutdown.cancelled().await;
        closing.cancel();
    };
    axum::serve(listener, app).with_graceful_shutdown(stop).await
}
