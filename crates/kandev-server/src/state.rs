//! Shared server state handed to every handler.

use std::sync::Arc;

use kandev_engine::Engine;
use kandev_store::Store;
use tokio_util::sync::CancellationToken;

/// Settings of a running server.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// When set, every request must carry it (header or cookie).
    pub token: Option<String>,
    /// Extra origins allowed to open the WebSocket and post to the API (e.g. a dev server).
    pub allowed_origins: Vec<String>,
    /// Largest request body or WebSocket message accepted, in bytes.
    pub max_request_bytes: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig { token: None, allowed_origins: vec![], max_request_bytes: 4 * 1024 * 1024 }
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
}

impl AppState {
    pub fn new(engine: Engine, config: ServerConfig) -> Self {
        AppState { inner: Arc::new(Inner { engine, config, closing: CancellationToken::new() }) }
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
