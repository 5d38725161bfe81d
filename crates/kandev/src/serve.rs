//! `kandev serve`: opens the database, seeds a first run, and serves the API.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Parser;
use kandev_engine::{AgentCommand, Engine, EngineConfig, LocalLauncher};
use kandev_server::{AppState, ServerConfig};
use kandev_store::{Location, Store};
use tokio_util::sync::CancellationToken;

/// Default listen address: loopback only.
pub const DEFAULT_ADDR: &str = "127.0.0.1:38429";

#[derive(Parser, Debug)]
#[command(name = "kandev serve")]
pub struct ServeArgs {
    /// Address to listen on. Anything but loopback requires --token.
    #[arg(long, env = "KANDEV_ADDR", default_value = DEFAULT_ADDR)]
    pub addr: SocketAddr,
    /// Data directory (database, worktrees). Default: ~/.kandev
    #[arg(long, env = "KANDEV_HOME")]
    pub home: Option<PathBuf>,
    /// Access token every request must carry (`Authorization: Bearer <token>`).
    #[arg(long, env = "KANDEV_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Database to use instead of <home>/kandev.db: a SQLite file path or sqlite:// URL.
    #[arg(long, env = "KANDEV_DATABASE_URL")]
    pub database_url: Option<String>,
    /// Extra browser origin allowed to use the API (repeatable), e.g. a UI dev server.
    #[arg(long = "allowed-origin")]
    pub allowed_origins: Vec<String>,
    /// Seconds a repository's setup script may run before it is killed and the start fails.
    #[arg(long, env = "KANDEV_SETUP_TIMEOUT", value_name = "SECONDS", default_value_t = 1800)]
    pub setup_timeout: u64,
    /// Seconds an agent may sit idle before it is stopped (the next message resumes it); 0: never.
    #[arg(long, env = "KANDEV_AGENT_IDLE_TIMEOUT", value_name = "SECONDS", default_value_t = 1800)]
    pub agent_idle_timeout: u64,
}

/// The engine runs the Mock profile as this very binary's `mock-agent` subcommand.
fn engine_config(home: &std::path::Path, args: &ServeArgs) -> Result<EngineConfig> {
    let exe =
        std::env::current_exe().context("cannot find the kandev binary to run the mock agent")?;
    let mock = AgentCommand {
        program: exe.display().to_string(),
        args: vec!["mock-agent".into()],
        flags: vec!["--state-dir".into(), home.join("mock-agent").display().to_string()],
    };
    let mut config = EngineConfig::new(home.to_path_buf(), mock);
    config.setup_timeout = std::time::Duration::from_secs(args.setup_timeout);
    config.idle_timeout = std::time::Duration::from_secs(args.agent_idle_timeout);
    Ok(config)
}

fn home_dir(args: &ServeArgs) -> Result<PathBuf> {
    if let Some(home) = &args.home {
        return Ok(home.clone());
    }
    let user_home = std::env::var_os("HOME").context("HOME is not set; pass --home <dir>")?;
    Ok(PathBuf::from(user_home).join(".kandev"))
}

/// `$KANDEV_HOME` holds the database (with profile secrets), worktrees and agent state: it
/// is created readable by its owner only (0700), and an existing one open to the group or
/// others is tightened.
fn secure_home(home: &std::path::Path) -> Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(home)
        .with_context(|| format!("cannot create the home folder {}", home.display()))?;
    let mode = std::fs::metadata(home)
        .with_context(|| format!("cannot inspect the home folder {}", home.display()))?
        .permissions()
        .mode();
    if mode & 0o077 != 0 {
        std::fs::set_permissions(home, std::fs::Permissions::from_mode(0o700)).with_context(
            || format!("cannot make the home folder {} private (chmod 700)", home.display()),
        )?;
        tracing::info!(home = %home.display(), "made the home folder readable by its owner only");
    }
    Ok(())
}

pub async fn run(args: ServeArgs) -> Result<()> {
    init_tracing();
    let token = args.token.clone().filter(|t| !t.is_empty());
    kandev_server::check_bind(&args.addr, token.as_deref()).map_err(anyhow::Error::msg)?;
    let home = home_dir(&args)?;
    secure_home(&home)?;
    let location = match &args.database_url {
        Some(url) => Location::parse(url)?,
        None => Location::File(home.join("kandev.db")),
    };
    let store = Store::open(location).await.context("cannot open the database")?;
    kandev_server::first_run(&store).await.context("cannot prepare the database")?;
    let listener = tokio::net::TcpListener::bind(args.addr).await.with_context(|| {
        format!(
            "cannot listen on {}; is another kandev running? pick another with --addr",
            args.addr
        )
    })?;
    let engine = Engine::new(store.clone(), engine_config(&home, &args)?, Arc::new(LocalLauncher));
    let interrupted =
        engine.reconcile().await.context("cannot reconcile sessions from the last run")?;
    if interrupted > 0 {
        tracing::info!(
            interrupted,
            "sessions interrupted by the last shutdown are waiting for input"
        );
    }
    let config =
        ServerConfig { token, allowed_origins: args.allowed_origins, ..ServerConfig::default() };
    let state = AppState::new(engine.clone(), config);
    let shutdown = CancellationToken::new();
    tokio::spawn(stop_on_signal(shutdown.clone()));
    let bound = listener.local_addr().unwrap_or(args.addr);
    println!("Kandev is running at http://{bound}  (data: {})", store.location());
    kandev_server::serve(listener, state, shutdown).await?;
    engine.shutdown().await;
    store.close().await;
    Ok(())
}

async fn stop_on_signal(shutdown: CancellationToken) {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(term) => term,
        Err(err) => {
            tracing::warn!(error = %err, "cannot listen for SIGTERM");
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    tracing::info!("shutting down");
    shutdown.cancel();
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,sqlx=warn"));
    let _ =
        tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).try_init();
}
