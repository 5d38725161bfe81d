//! Kandev's HTTP + WebSocket API: one action table served at `POST /api/v1/<action>` and over
//! `GET /ws`, live notifications with replay, and the security checks of api.md.

#![cfg_attr(
    test,
    allow(
        clippy::disallowed_methods,
        reason = "unit tests spawn tasks and start processes freely"
    )
)]

mod access;
mod accounts;
mod board_cache;
mod bootstrap;
mod conn;
mod dispatch;
mod error;
mod handlers;
mod hooks;
mod http;
mod mcp;
mod outbox;
mod roles;
mod routes;
mod security;
mod state;
mod ui;
mod visibility;
mod ws;
mod ws_terminals;

use std::time::Duration;

use axum::Router;
use axum::routing::{get, post};
use kandev_store::{Retention, Store};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use accounts::{Identity, TOKEN_PREFIX, hash_password, new_secret, secret_hash};
pub use bootstrap::first_run;
pub use dispatch::dispatch;
pub use error::ApiError;
pub use security::check_bind;
pub use state::{AppState, ProxyAuth, ServerConfig};

/// The access rule of MCP tool `name` (the action it is), `None` for no such tool: the
/// table-driven role test checks every listed tool has one (issue 49).
#[doc(hidden)]
pub fn mcp_tool_access(name: &str) -> Option<kandev_api_types::access::Access> {
    mcp::tool_access(name)
}

/// Where the MCP server answers.
pub const MCP_PATH: &str = "/mcp";

/// The server's version, reported by the health endpoint.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The router with every route and the security layer.
pub fn router(state: AppState) -> Router {
    let mcp = mcp::service(state.clone(), state.closing().clone());
    let mcp_auth = axum::middleware::from_fn_with_state(state.clone(), mcp::authenticate);
    Router::new()
        .route(MCP_PATH, axum::routing::any_service(mcp).layer(mcp_auth))
        .route("/api/v1/health", get(http::health))
        .route("/api/v1/attachment.upload", post(http::upload))
        .route("/api/v1/attachment/{id}", get(http::attachment))
        .route("/api/v1/{action}", post(http::action))
        .route("/ws", get(ws::upgrade))
        .route(
            "/hooks/{id}",
            post(hooks::receive).layer(axum::extract::DefaultBodyLimit::max(hooks::MAX_HOOK_BYTES)),
        )
        .route(security::LOGIN_PATH, get(ui::login_page).post(ui::login))
        .route(security::LOGOUT_PATH, post(ui::logout))
        .fallback(ui::fallback)
        .method_not_allowed_fallback(http::wrong_method)
        .layer(axum::middleware::from_fn_with_state(state.clone(), security::guard))
        .with_state(state)
}

/// `/mcp` alone, with its token check and the security layer: what a task container's MCP
/// relay reaches (never the rest of the API, which a local request may use without a token).
fn mcp_router(state: AppState) -> Router {
    let mcp = mcp::service(state.clone(), state.closing().clone());
    let mcp_auth = axum::middleware::from_fn_with_state(state.clone(), mcp::authenticate);
    Router::new()
        .route(MCP_PATH, axum::routing::any_service(mcp).layer(mcp_auth))
        .layer(axum::middleware::from_fn_with_state(state.clone(), security::guard))
        .with_state(state)
}

/// `host:port` of `addr` as a client on this machine reaches it: loopback for an address
/// that means every interface.
fn reachable(addr: std::net::SocketAddr) -> String {
    let host = match addr.ip() {
        ip if ip.is_unspecified() && ip.is_ipv6() => "[::1]".to_owned(),
        ip if ip.is_unspecified() => "127.0.0.1".to_owned(),
        std::net::IpAddr::V6(ip) => format!("[{ip}]"),
        ip => ip.to_string(),
    };
    format!("{host}:{}", addr.port())
}

/// Serves on an already-bound listener until `shutdown` is cancelled, and prunes the event
/// log and polls the forge for open pull requests meanwhile. Taking a listener lets tests bind port 0.
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let config = state.config().clone();
    if let Ok(addr) = listener.local_addr() {
        state.set_listening(addr);
        // Links in notifications: the public URL, else this address (loopback when the
        // server listens on every interface).
        let web =
            config.public_url.clone().unwrap_or_else(|| format!("http://{}", reachable(addr)));
        state.engine().set_web_url(Some(web));
    }
    let limits = conn::Limits {
        max_connections: config.max_connections,
        read_timeout: config.read_timeout,
        write_timeout: config.write_timeout,
        send_buffer_bytes: config.send_buffer_bytes,
    };
    let tasks = state.tasks().clone();
    tasks.spawn(prune_log(
        state.store().clone(),
        (config.retention, config.audit_retention),
        config.prune_interval,
        shutdown.clone(),
    ));
    tasks.spawn(checkpoint_wal(
        state.store().clone(),
        config.checkpoint_interval,
        shutdown.clone(),
    ));
    if state.store().dialect() == kandev_store::Dialect::Postgres {
        tasks.spawn(refresh_statistics(state.store().clone(), STATISTICS_EVERY, shutdown.clone()));
    }
    tasks.spawn(state.engine().deliver_notifications(shutdown.clone()));
    // Old uploads no message or queued prompt names are removed (issue 38, item 5).
    tasks.spawn(state.engine().sweep_attachments(shutdown.clone()));
    // WebSockets whose access ended (a removed user, a changed password) are closed.
    tasks.spawn(access::watch(
        state.store().clone(),
        state.live().clone(),
        access::RECHECK,
        shutdown.clone(),
    ));
    tasks.spawn(ws::fan_out(state.store().subscribe(), state.routes().clone(), shutdown.clone()));
    // Open pull requests are polled while the server serves (their merge moves tasks).
    tasks.spawn(state.engine().clone().poll_pull_requests(shutdown.clone()));
    // Issues sources are polled, and schedules fire, while the server serves (issue 47).
    tasks.spawn(state.engine().clone().poll_intake(shutdown.clone()));
    tasks.spawn(state.engine().clone().run_schedules(shutdown.clone()));
    // Open WebSockets would keep a graceful shutdown waiting: close them first.
    let closing = state.closing().clone();
    let stop = shutdown.clone();
    tasks.spawn(async move {
        stop.cancelled().await;
        closing.cancel();
    });
    // Agents started from now on reach the MCP server on this address (loopback when the
    // server listens on every interface).
    if config.mcp_for_agents
        && let Ok(addr) = listener.local_addr()
    {
        state.engine().set_mcp_url(Some(format!("http://{}{MCP_PATH}", reachable(addr))));
        // Task containers' MCP relays lead here: `/mcp` alone, with its token check.
        match TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0)).await {
            Ok(mcp_only) => {
                if let Ok(target) = mcp_only.local_addr() {
                    state.engine().set_mcp_relay_target(Some(target));
                }
                tasks.spawn(conn::serve(
                    mcp_only,
                    mcp_router(state.clone()),
                    limits,
                    shutdown.clone(),
                ));
            }
            Err(err) => tracing::warn!(error = %err, "no MCP listener for task containers"),
        }
    }
    let served = conn::serve(listener, router(state), limits, shutdown).await;
    // The pruner and the fan-out stop on `shutdown`; WebSocket requests in flight finish.
    tasks.close();
    tasks.wait().await;
    served
}

/// Checkpoints the SQLite write-ahead log at its first tick and then every `every` that saw a
/// commit, until `shutdown`, so the single writer never stops to do it (issue 15: a
/// checkpoint run by the writer held every streamed write behind it; P1's paced write -> receive p99 fell from 140-200 ms to
/// 57-115 ms without them, docs/performance.md). A checkpoint that fails is retried at the
/// next tick; past `WRITER_CHECKPOINT_PAGES` the writer checkpoints by itself anyway.
async fn checkpoint_wal(store: Store, every: Duration, shutdown: CancellationToken) {
    let mut ticks = Paced::new(every, &shutdown);
    // `None` until the first complete checkpoint: what was committed before the loop started
    // (the boot's writes) is in the log too.
    let mut checkpointed_at = None;
    while ticks.next().await {
        let commits = store.commits();
        if checkpointed_at == Some(commits) {
            continue;
        }
        match store.checkpoint().await {
            // Frames a reader still needed are copied at a later tick, commits or not.
            Ok(Some(done)) if done.backfilled == done.wal_frames => checkpointed_at = Some(commits),
            Ok(Some(_)) => {}
            Ok(None) => return, // nothing to checkpoint on this engine
            Err(err) => {
                tracing::warn!(error = %err, "checkpointing the database failed; will retry")
            }
        }
    }
}

/// The pace of a maintenance loop: a tick at once and then every `every` (one that comes
/// late is delayed, not doubled), until `shutdown`.
struct Paced {
    ticks: tokio::time::Interval,
    shutdown: CancellationToken,
}

impl Paced {
    fn new(every: Duration, shutdown: &CancellationToken) -> Paced {
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Paced { ticks, shutdown: shutdown.clone() }
    }

    /// Waits for the next tick: false once the server shuts down.
    async fn next(&mut self) -> bool {
        tokio::select! {
            _ = self.shutdown.cancelled() => false,
            _ = self.ticks.tick() => true,
        }
    }
}

/// How often the server looks whether PostgreSQL's statistics of the searched tables are out
/// of date (a cheap read of its counters).
const STATISTICS_EVERY: Duration = Duration::from_secs(2);

/// On PostgreSQL, analyzes the searched tables once a tenth of them changed, every `every`,
/// until `shutdown` (`Store::refresh_statistics`: autovacuum looks only every minute, and a
/// search planned without statistics read every match of a common word).
async fn refresh_statistics(store: Store, every: Duration, shutdown: CancellationToken) {
    let mut ticks = Paced::new(every, &shutdown);
    while ticks.next().await {
        match store.refresh_statistics().await {
            Ok(analyzed) if !analyzed.is_empty() => {
                tracing::debug!(?analyzed, "refreshed the planner's statistics");
            }
            Ok(_) => {}
            Err(err) => {
                tracing::warn!(error = %err, "analyzing the searched tables failed; will retry")
            }
        }
    }
}

/// Rule 47: prunes the event log now and every `every`, until `shutdown`, and the audit log
/// of what is older than its retention. Each batch is a short transaction of its own, so
/// writers never wait for a whole pass.
async fn prune_log(
    store: Store,
    (retention, audit_retention): (Retention, Duration),
    every: Duration,
    shutdown: CancellationToken,
) {
    let mut ticks = Paced::new(every, &shutdown);
    while ticks.next().await {
        // Dropping a pass mid-batch rolls that batch back.
        let pruned = tokio::select! {
            _ = shutdown.cancelled() => return,
            pruned = store.prune_events(retention) => pruned,
        };
        match pruned {
            Ok(pruned) if pruned.rows > 0 => {
                tracing::info!(
                    rows = pruned.rows,
                    through_seq = pruned.through_seq,
                    "pruned the event log"
                );
            }
            Ok(_) => {}
            Err(err) => tracing::warn!(error = %err, "pruning the event log failed; will retry"),
        }
        let kept_for = i64::try_from(audit_retention.as_millis()).unwrap_or(i64::MAX);
        let before = kandev_domain::Timestamp(store.now().millis().saturating_sub(kept_for));
        let pruned = tokio::select! {
            _ = shutdown.cancelled() => return,
            pruned = store.prune_audit(before) => pruned,
        };
        match pruned {
            Ok(0) => {}
            Ok(rows) => tracing::info!(rows, "pruned the audit log"),
            Err(err) => tracing::warn!(error = %err, "pruning the audit log failed; will retry"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kandev_store::Location;

    const WAIT: Duration = Duration::from_secs(10);

    fn file_len(path: &std::path::Path) -> u64 {
        std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
    }

    /// Issue 15: commits reach the database file by the server's checkpoint loop, not by the
    /// writer (which leaves the log alone below `WRITER_CHECKPOINT_PAGES`), also those made
    /// before the loop started (the boot's: they used to wait for the next commit), and the
    /// loop ends on shutdown.
    #[tokio::test]
    async fn i15_the_checkpoint_loop_copies_commits_made_before_it_started_into_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kandev.db");
        let store = Store::open(Location::File(path.clone())).await.unwrap();
        let before = file_len(&path);
        for i in 0..20 {
            let mut tx = store.begin_write().await.unwrap();
            tx.insert_workspace(&format!("w{i} {}", "x".repeat(32 * 1024))).await.unwrap();
            tx.commit().await.unwrap();
        }
        assert_eq!(file_len(&path), before, "the writer left the 640 KB in the log");

        let shutdown = CancellationToken::new();
        let looping =
            tokio::spawn(checkpoint_wal(store.clone(), Duration::from_millis(5), shutdown.clone()));
        let copied = tokio::time::timeout(WAIT, async {
            // A file's size has no event to wait for: look again at each tick of the loop.
            while file_len(&path) < before + 640 * 1024 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await;
        assert!(copied.is_ok(), "the file holds {} bytes, was {before}", file_len(&path));

        shutdown.cancel();
        tokio::time::timeout(WAIT, looping).await.expect("the loop ends on shutdown").unwrap();
        store.close().await;
    }
}
