//! Shared server state handed to every handler.

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use kandev_engine::Engine;
use kandev_store::{Retention, Store};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::access::Live;
use crate::accounts::{LoginLimiter, PasswordChecks};
use crate::board_cache::BoardCache;
use crate::routes::Routes;
use crate::security::AuthLimiter;
use crate::ws::Frame;

/// Settings of a running server.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// When set, every request must carry it (header or cookie).
    pub token: Option<String>,
    /// Extra origins allowed to open the WebSocket and post to the API (e.g. a dev server).
    pub allowed_origins: Vec<String>,
    /// Largest request body or WebSocket message accepted, in bytes.
    pub max_request_bytes: usize,
    /// Most open connections (WebSockets included). Past it, the oldest connection that has
    /// no request in flight is closed to make room, or, when every one is busy, the new
    /// connection gets a fast 503.
    pub max_connections: usize,
    /// How long a client may take to send a request's headers, then its body; also how long
    /// an idle keep-alive connection stays open.
    pub read_timeout: Duration,
    /// A connection whose writes make no progress for this long (the client does not read)
    /// is closed; WebSockets included.
    pub write_timeout: Duration,
    /// The kernel's send buffer of each connection (`SO_SNDBUF`): what a client that does not
    /// read can hold in the kernel, on top of its queue below.
    pub send_buffer_bytes: usize,
    /// Bytes of notifications and answers queued per WebSocket before it counts as slow.
    pub ws_queue_bytes: usize,
    /// How long a full WebSocket queue may wait for the client to read before its
    /// notifications are dropped and it is told `resync_required`.
    pub ws_queue_wait: Duration,
    /// How much of the event log is kept (rule 47).
    pub retention: Retention,
    /// How often the event log is pruned.
    pub prune_interval: Duration,
    /// How often the SQLite write-ahead log is checkpointed beside the writer, while there
    /// are commits (`Store::checkpoint`).
    pub checkpoint_interval: Duration,
    /// Whether the login cookies carry `Secure` (the browser reaches the server over HTTPS,
    /// through a TLS proxy).
    pub cookie_secure: bool,
    /// Whether agents get Kandev's MCP server (a session token each) in `mcpServers`.
    pub mcp_for_agents: bool,
    /// Where people open Kandev (behind a proxy: its `https://` address); links in webhook
    /// notifications lead there. `None`: the address the server listens on.
    pub public_url: Option<String>,
    /// Sign-in through a trusted authenticating proxy (issue 49); `None`: off.
    pub proxy: Option<ProxyAuth>,
    /// How long audit log entries are kept (pruned with the event log).
    pub audit_retention: Duration,
}

/// Sign-in through an authenticating proxy (oauth2-proxy and the like): the user named by
/// `header`, accepted only from the `proxies` addresses.
#[derive(Debug, Clone)]
pub struct ProxyAuth {
    pub header: axum::http::HeaderName,
    /// The proxy's addresses: single ones or ranges (`10.0.0.0/8`).
    pub proxies: Vec<ipnet::IpNet>,
    /// Whether a name the server does not know yet becomes a user (else it is refused).
    pub create_users: bool,
    /// Workspaces (by name) a user made on first sign-in joins as a viewer.
    pub join: Vec<String>,
}

impl ProxyAuth {
    /// Proxy sign-in by the header called `header` from `proxies` (addresses, or ranges such
    /// as `10.0.0.0/8`); an error says what is wrong with either.
    pub fn new(
        header: &str,
        proxies: &[String],
        create_users: bool,
        join: Vec<String>,
    ) -> Result<ProxyAuth, String> {
        let header = axum::http::HeaderName::try_from(header.trim())
            .map_err(|_| format!("{header:?} is not a header name"))?;
        let proxies = proxies.iter().map(|p| proxy_range(p)).collect::<Result<_, _>>()?;
        Ok(ProxyAuth { header, proxies, create_users, join })
    }

    /// Whether `client` is one of the proxy's addresses.
    pub fn trusts(&self, client: std::net::IpAddr) -> bool {
        self.proxies.iter().any(|range| range.contains(&client))
    }
}

/// An address (`127.0.0.1`, `::1`) or a range (`10.0.0.0/8`).
fn proxy_range(text: &str) -> Result<ipnet::IpNet, String> {
    let text = text.trim();
    match text.parse::<std::net::IpAddr>() {
        Ok(address) => Ok(ipnet::IpNet::from(address)),
        Err(_) => text.parse::<ipnet::IpNet>().map_err(|_| {
            format!("{text:?} is not an address or a range; write e.g. 127.0.0.1 or 10.0.0.0/8")
        }),
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            token: None,
            allowed_origins: vec![],
            max_request_bytes: 4 * 1024 * 1024,
            max_connections: 512,
            read_timeout: Duration::from_secs(10),
            write_timeout: Duration::from_secs(30),
            send_buffer_bytes: 256 * 1024,
            ws_queue_bytes: 256 * 1024,
            ws_queue_wait: Duration::from_secs(5),
            retention: Retention::default(),
            prune_interval: Duration::from_secs(60),
            checkpoint_interval: Duration::from_millis(250),
            mcp_for_agents: true,
            cookie_secure: false,
            public_url: None,
            proxy: None,
            audit_retention: Duration::from_secs(365 * 24 * 3600),
        }
    }
}

/// Cheap-to-clone handle to everything a handler needs.
#[derive(Clone)]
pub struct AppState {
    inner: Arc<Inner>,
}

struct Inner {
    engine: Engine,
    config: ServerConfig,
    /// Cancelled when the server shuts down; WebSocket connections close on it.
    closing: CancellationToken,
    /// Failed token checks per client address and overall (`/login` and the API).
    auth_limiter: AuthLimiter,
    /// Wrong passwords per client address and name (`POST /login`).
    login_limiter: LoginLimiter,
    /// Password checks running at once (`POST /login`).
    password_checks: PasswordChecks,
    /// The address `serve` listens on (unknown, as loopback, before it starts).
    listening: OnceLock<SocketAddr>,
    /// Which WebSocket connections follow which topic: `ws::fan_out` serializes each
    /// committed event once and hands it to those only (`routes.rs`).
    routes: Arc<Routes<Frame>>,
    /// The server's own tasks: WebSocket requests (they outlive their connection, rule 33),
    /// the event fan-out and the log pruner. `serve` waits for all of them before it returns.
    tasks: TaskTracker,
    /// The last few `task.list` answers, while no card changed (`board_cache.rs`).
    board_cache: BoardCache,
    /// The WebSockets open with a user's credential, closed when it ends (`access.rs`).
    live: Live,
}

impl AppState {
    pub fn new(engine: Engine, config: ServerConfig) -> Self {
        let inner = Inner {
            engine,
            config,
            closing: CancellationToken::new(),
            auth_limiter: AuthLimiter::default(),
            login_limiter: LoginLimiter::default(),
            password_checks: PasswordChecks::default(),
            listening: OnceLock::new(),
            routes: Arc::default(),
            tasks: TaskTracker::new(),
            board_cache: BoardCache::default(),
            live: Live::default(),
        };
        AppState { inner: Arc::new(inner) }
    }

    pub(crate) fn routes(&self) -> &Arc<Routes<Frame>> {
        &self.inner.routes
    }

    pub(crate) fn live(&self) -> &Live {
        &self.inner.live
    }

    pub(crate) fn board_cache(&self) -> &BoardCache {
        &self.inner.board_cache
    }

    pub(crate) fn tasks(&self) -> &TaskTracker {
        &self.inner.tasks
    }

    pub(crate) fn auth_limiter(&self) -> &AuthLimiter {
        &self.inner.auth_limiter
    }

    pub(crate) fn login_limiter(&self) -> &LoginLimiter {
        &self.inner.login_limiter
    }

    pub(crate) fn password_checks(&self) -> &PasswordChecks {
        &self.inner.password_checks
    }

    pub(crate) fn set_listening(&self, addr: SocketAddr) {
        let _ = self.inner.listening.set(addr);
    }

    /// Whether the server listens on a loopback address only (true before `serve` starts).
    pub(crate) fn listens_on_loopback(&self) -> bool {
        self.inner.listening.get().is_none_or(|addr| addr.ip().is_loopback())
    }

    pub fn closing(&self) -> &CancellationToken {
        &self.inner.closing
    }

    pub fn store(&self) -> &Store {
        self.inner.engine.store()
    }

    pub fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    pub fn config(&self) -> &ServerConfig {
        &self.inner.config
    }
}
