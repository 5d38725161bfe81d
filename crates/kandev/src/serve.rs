//! `kandev serve`: opens the database, seeds a first run, and serves the API.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Parser;
use kandev_engine::{AgentCommand, Engine, EngineConfig, Launcher, LocalLauncher, RunnerLauncher};
use kandev_server::{AppState, ServerConfig};
use kandev_store::{Location, Retention, Store};
use tokio_util::sync::CancellationToken;

use crate::runner::RunnerMode;

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
    /// Database to use instead of <home>/kandev.db: a SQLite file path, sqlite:// URL, or
    /// postgres://user:password@host:port/database (a team server; one Kandev per database).
    #[arg(long, env = "KANDEV_DATABASE_URL")]
    pub database_url: Option<String>,
    /// Extra browser origin allowed to use the API (repeatable), e.g. a UI dev server, or the
    /// https:// address of a TLS proxy in front of a loopback server (its host name is then
    /// answered too).
    #[arg(long = "allowed-origin")]
    pub allowed_origins: Vec<String>,
    /// Mark the login cookies `Secure`: set it when browsers reach the server over HTTPS
    /// through a TLS proxy (they then never send the cookies over plain HTTP).
    #[arg(long, env = "KANDEV_COOKIE_SECURE")]
    pub cookie_secure: bool,
    /// The address people open Kandev at, when it is not the one it listens on (a TLS proxy:
    /// `https://kandev.example.com`): webhook notifications link to tasks there.
    #[arg(long, env = "KANDEV_PUBLIC_URL", value_parser = parse_public_url)]
    pub public_url: Option<String>,
    /// Sign in through an authenticating proxy (oauth2-proxy and the like): the header that
    /// carries the signed-in user's name, e.g. X-Forwarded-User. Needs --trusted-proxy.
    #[arg(long, env = "KANDEV_PROXY_USER_HEADER")]
    pub proxy_user_header: Option<String>,
    /// The proxy's address or range (repeatable, e.g. 127.0.0.1 or 10.0.0.0/8): the user
    /// header is accepted only from these; from any other address a request carrying it is
    /// refused.
    #[arg(long = "trusted-proxy", env = "KANDEV_TRUSTED_PROXY", value_delimiter = ',')]
    pub trusted_proxies: Vec<String>,
    /// What a name the proxy sends that Kandev does not know yet becomes: `viewer` (a new
    /// user, a viewer of the --proxy-join workspaces) or `refuse`.
    #[arg(long, env = "KANDEV_PROXY_NEW_USERS", default_value = "viewer", value_parser = ["viewer", "refuse"])]
    pub proxy_new_users: String,
    /// A workspace (by name) that users made on their first proxy sign-in join as viewers
    /// (repeatable).
    #[arg(long = "proxy-join")]
    pub proxy_join: Vec<String>,
    /// How long the audit log (Settings → Activity) keeps an entry, e.g. 365d or 90d.
    #[arg(long, env = "KANDEV_AUDIT_RETENTION", default_value = "365d", value_parser = parse_duration)]
    pub audit_retention: std::time::Duration,
    /// How long a repository's setup script may run before it is killed and the start fails.
    #[arg(long, env = "KANDEV_SETUP_TIMEOUT", default_value = "30m", value_parser = parse_duration)]
    pub setup_timeout: Duration,
    /// How long an agent may sit idle before it is stopped (the next message resumes it);
    /// 0 never stops it.
    #[arg(
        long,
        env = "KANDEV_AGENT_IDLE_TIMEOUT",
        default_value = "30m",
        value_parser = parse_duration
    )]
    pub agent_idle_timeout: Duration,
    /// How long a turn's agent may be quiet before a stall notice (a turn with no output at
    /// all by then is ended, rule 40).
    #[arg(
        long,
        env = "KANDEV_AGENT_STALL_AFTER",
        default_value = "5m",
        value_parser = parse_duration
    )]
    pub agent_stall_after: Duration,
    /// Ports dev servers get in `PORT`, as `first-last`.
    #[arg(
        long,
        env = "KANDEV_DEV_SERVER_PORTS",
        default_value = "41000-41999",
        value_parser = parse_port_range
    )]
    pub dev_server_ports: std::ops::RangeInclusive<u16>,
    /// How often the forge is asked about each open pull request (its state moves tasks
    /// with `on_pr_merged` / `on_pr_closed`); 0 never polls (`task.pr.get` still refreshes).
    #[arg(
        long,
        env = "KANDEV_PR_POLL_INTERVAL",
        default_value = "60s",
        value_parser = parse_duration
    )]
    pub pr_poll_interval: Duration,
    /// How often every enabled issues source is polled for new issues; 0 never polls
    /// (webhooks and "Poll now" still take issues in).
    #[arg(
        long,
        env = "KANDEV_INTAKE_POLL_INTERVAL",
        default_value = "120s",
        value_parser = parse_duration
    )]
    pub intake_poll_interval: Duration,
    /// How many of a session's newest turns keep their checkpoints (the worktree before and
    /// after each turn, for "Revert to before this turn"); 0 takes no checkpoints.
    #[arg(long, env = "KANDEV_CHECKPOINT_TURNS", default_value_t = 100)]
    pub checkpoint_turns: usize,
    /// Checkpoints older than this are collected (e.g. 30d); 0 keeps them regardless of age.
    #[arg(long, env = "KANDEV_CHECKPOINT_AGE", default_value = "30d", value_parser = parse_duration)]
    pub checkpoint_age: Duration,
    /// Most open connections (default 512, or half the open-file limit when that is lower).
    /// At the cap the oldest idle one is closed; when all are busy a new one gets 503.
    #[arg(long, env = "KANDEV_MAX_CONNECTIONS")]
    pub max_connections: Option<usize>,
    /// How long a client may take to send a request's headers, then its body (also closes
    /// idle keep-alive connections), e.g. 10s.
    #[arg(long, env = "KANDEV_READ_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    pub read_timeout: Duration,
    /// A connection whose client reads nothing of what it is sent for this long is closed.
    #[arg(long, env = "KANDEV_WRITE_TIMEOUT", default_value = "30s", value_parser = parse_duration)]
    pub write_timeout: Duration,
    /// Events older than this are pruned from the event log (e.g. 7d, 12h).
    #[arg(long, env = "KANDEV_EVENT_RETENTION", default_value = "7d", value_parser = parse_duration)]
    pub event_retention: Duration,
    /// Most events kept in the event log; the oldest are pruned first.
    #[arg(long, env = "KANDEV_EVENT_MAX_ROWS", default_value_t = 1_000_000)]
    pub event_max_rows: u64,
    /// How often the event log is pruned.
    #[arg(
        long,
        env = "KANDEV_EVENT_PRUNE_INTERVAL",
        default_value = "60s",
        value_parser = parse_duration
    )]
    pub event_prune_interval: Duration,
    /// Where agents run: `local`, a runner process that outlives the server (on
    /// <home>/runner.sock, started when none listens), or `none`, as children of the server.
    #[arg(long, env = "KANDEV_RUNNER", value_enum, default_value = "local")]
    pub runner: RunnerMode,
    /// Let notification channels reach addresses that are not public: loopback, private
    /// networks, link-local (cloud metadata services). Off: such targets are refused, also
    /// when a host name resolves to one at send time, and no proxy is used.
    #[arg(long, env = "KANDEV_ALLOW_PRIVATE_NOTIFICATION_TARGETS")]
    pub allow_private_notification_targets: bool,
    /// Most bytes of attachments the home keeps (e.g. 1GiB, 500MiB): an upload past it is
    /// refused. Uploads no message names are removed after a day.
    #[arg(
        long,
        env = "KANDEV_ATTACHMENT_QUOTA",
        default_value = "1GiB",
        value_parser = parse_size
    )]
    pub attachment_quota: u64,
    /// With `--runner local`: how long a runner keeps the agents while no server is connected.
    #[arg(long, env = "KANDEV_RUNNER_GRACE", default_value = "10m", value_parser = parse_duration)]
    pub runner_grace: Duration,
}

/// The connection cap. By default at most half of the open-file limit, so connections cannot
/// take the descriptors the database, agents and git need (past the limit `accept` fails with
/// EMFILE and the database with "unable to open"). A cap given explicitly is kept, with a
/// warning when it leaves less than that room.
fn connection_cap(given: Option<usize>) -> usize {
    const DEFAULT: usize = 512;
    let limit = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        .ok()
        .map(|(soft, _)| soft);
    let half = limit.map(|soft| usize::try_from(soft / 2).unwrap_or(usize::MAX).max(1));
    match (given, half) {
        (Some(cap), Some(half)) if cap > half => {
            tracing::warn!(
                max_connections = cap,
                open_file_limit = limit,
                "--max-connections is over half the open-file limit: connections may take the \
                 descriptors the database and agents need; raise the limit with `ulimit -n`"
            );
            cap.max(1)
        }
        (Some(cap), _) => cap.max(1),
        (None, Some(half)) => DEFAULT.min(half),
        (None, None) => DEFAULT,
    }
}

/// A duration such as `500ms`, `10s`, `5m`, `12h` or `7d`; a bare number is seconds.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let wrong = || {
        format!(
            "{text:?} is not a duration; write e.g. 500ms, 10s, 5m, 12h or 7d (a bare number is seconds)"
        )
    };
    let n: u64 = number.parse().map_err(|_| wrong())?;
    let millis = match unit.trim() {
        "ms" => Some(n),
        "s" | "" => n.checked_mul(1000),
        "m" => n.checked_mul(60_000),
        "h" => n.checked_mul(3_600_000),
        "d" => n.checked_mul(86_400_000),
        _ => None,
    };
    millis.map(Duration::from_millis).ok_or_else(wrong)
}

/// A size such as `1GiB`, `500MiB`, `64KiB` (`G`, `M`, `K` the same) or a bare number of
/// bytes; more than 0.
pub(crate) fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let wrong = || {
        format!(
            "{text:?} is not a size; write e.g. 1GiB, 500MiB, 2GB or 64KiB (a bare number is bytes)"
        )
    };
    let n: u64 = number.parse().map_err(|_| wrong())?;
    // Binary units (KiB, MiB, ...) and, as written on disks, decimal ones (KB, MB, ...).
    let unit: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        _ => return Err(wrong()),
    };
    match n.checked_mul(unit) {
        Some(0) => Err(format!("{text:?}: the size must be more than 0")),
        Some(bytes) => Ok(bytes),
        None => Err(wrong()),
    }
}

/// `first-last` (inclusive), e.g. `41000-41999`.
fn parse_port_range(text: &str) -> Result<std::ops::RangeInclusive<u16>, String> {
    let wrong =
        || format!("`{text}` is not a port range; write it as first-last, e.g. 41000-41999");
    let (first, last) = text.split_once('-').ok_or_else(wrong)?;
    let first: u16 = first.trim().parse().map_err(|_| wrong())?;
    let last: u16 = last.trim().parse().map_err(|_| wrong())?;
    if first == 0 || first > last {
        return Err(wrong());
    }
    Ok(first..=last)
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
    // Agents without MCP over http get this very binary's `mcp-bridge`.
    config.mcp_bridge =
        Some(AgentCommand { program: exe.display().to_string(), args: vec![], flags: vec![] });
    config.setup_timeout = args.setup_timeout;
    config.idle_timeout = args.agent_idle_timeout;
    if args.agent_stall_after.is_zero() {
        anyhow::bail!("--agent-stall-after must be more than 0; e.g. 5m");
    }
    config.stall_after = args.agent_stall_after;
    config.dev_server_ports = args.dev_server_ports.clone();
    config.pr_poll_interval = args.pr_poll_interval;
    config.intake_poll_interval = args.intake_poll_interval;
    config.checkpoint_turns = args.checkpoint_turns;
    config.checkpoint_age = args.checkpoint_age;
    config.allow_private_notification_targets = args.allow_private_notification_targets;
    config.attachments.quota = args.attachment_quota;
    // The key secrets are sealed with: from the environment when given (never a flag, which
    // `ps` would show), else <home>/secret.key.
    if let Ok(text) = std::env::var(kandev_engine::secrets::KEY_ENV) {
        let key = kandev_engine::secrets::SecretKey::parse(&text)
            .map_err(|e| anyhow::anyhow!("{}: {e}", kandev_engine::secrets::KEY_ENV))?;
        config.secret_key = Some(key);
    }
    Ok(config)
}

fn home_dir(args: &ServeArgs) -> Result<PathBuf> {
    home_or_default(args.home.as_ref())
}

/// `--home`, or `~/.kandev`.
pub(crate) fn home_or_default(home: Option<&PathBuf>) -> Result<PathBuf> {
    if let Some(home) = home {
        return Ok(home.clone());
    }
    let user_home = std::env::var_os("HOME").context("HOME is not set; pass --home <dir>")?;
    Ok(PathBuf::from(user_home).join(".kandev"))
}

/// `$KANDEV_HOME` holds the database (with profile secrets), worktrees and agent state: it
/// is created readable by its owner only (0700), and an existing one open to the group or
/// others is tightened.
pub(crate) fn secure_home(home: &std::path::Path) -> Result<()> {
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
    let home = home_dir(&args)?;
    secure_home(&home)?;
    // One server per home and per database, decided before anything reads or changes them
    // (the store, the runner, reconciliation); held until this function returns.
    let location = database_location(&home, args.database_url.as_deref())?;
    let _home_lock = crate::lock::lock_home(&home)?;
    let _database_lock = match &location {
        Location::File(path) => Some(crate::lock::lock_database(path)?),
        Location::Memory | Location::Postgres(_) => None,
    };
    crate::backup::before_upgrade(&home, &location).await?;
    let store = Store::open(location).await.context("cannot open the database")?;
    // Once users exist every request needs a login or a token, as with --token.
    let guarded = match token {
        Some(_) => true,
        None => store.has_users().await.context("cannot read the users")?,
    };
    kandev_server::check_bind(&args.addr, guarded).map_err(anyhow::Error::msg)?;
    kandev_server::first_run(&store).await.context("cannot prepare the database")?;
    let listener = tokio::net::TcpListener::bind(args.addr).await.with_context(|| {
        format!(
            "cannot listen on {}; is another kandev running? pick another with --addr",
            args.addr
        )
    })?;
    // With the local runner, what it kept across the restart: sessions take their executions
    // over in reconciliation (rule 42's re-adopt branch); the rest are killed.
    let mut kept = None;
    let mut runner = None;
    let launcher: Arc<dyn Launcher> = match args.runner {
        RunnerMode::None => Arc::new(LocalLauncher),
        RunnerMode::Local => {
            if args.runner_grace.is_zero() {
                anyhow::bail!("--runner-grace must be more than 0; e.g. 10m");
            }
            // A runner that dies (an OOM kill) is replaced: the connection starts a new one
            // and connects again by itself.
            let (client, leftovers) =
                crate::runner::connect_local(&home, args.runner_grace).await?;
            kept = Some((client.clone(), leftovers));
            let launcher = Arc::new(RunnerLauncher::new(client));
            runner = Some(launcher.clone());
            launcher
        }
    };
    let engine = Engine::new(store.clone(), engine_config(&home, &args)?, launcher);
    engine.open_secrets().await.context("cannot open the secret store")?;
    let interrupted = match kept {
        Some((client, leftovers)) => engine.reconcile_with_runner(&client, leftovers).await,
        None => engine.reconcile().await,
    }
    .context("cannot reconcile sessions from the last run")?;
    if interrupted > 0 {
        tracing::info!(
            interrupted,
            "sessions interrupted by the last shutdown are waiting for input"
        );
    }
    if args.event_prune_interval.is_zero() {
        anyhow::bail!("--event-prune-interval must be more than 0; e.g. 60s");
    }
    let proxy = proxy_auth(&args)?;
    let names: Vec<String> = store.list_workspaces().await?.into_iter().map(|w| w.name).collect();
    for unknown in args.proxy_join.iter().filter(|n| !names.contains(n)) {
        // A workspace made later counts from then on; a misspelled one never would.
        tracing::warn!(workspace = %unknown, "--proxy-join names no workspace (yet); new users join only the ones that exist");
        eprintln!(
            "warning: --proxy-join {unknown:?} names no workspace; workspaces: {}",
            names.join(", ")
        );
    }
    let config = ServerConfig {
        token,
        proxy,
        audit_retention: args.audit_retention,
        allowed_origins: args.allowed_origins,
        cookie_secure: args.cookie_secure,
        public_url: args.public_url,
        max_connections: connection_cap(args.max_connections),
        read_timeout: args.read_timeout,
        write_timeout: args.write_timeout,
        retention: Retention { max_age: args.event_retention, max_rows: args.event_max_rows },
        prune_interval: args.event_prune_interval,
        ..ServerConfig::default()
    };
    let state = AppState::new(engine.clone(), config);
    let shutdown = CancellationToken::new();
    let bound = listener.local_addr().unwrap_or(args.addr);
    println!("Kandev is running at http://{bound}  (data: {})", store.location());
    // The signal listener runs beside the server in this task, not spawned: a signal cancels
    // the token and the server then finishes its graceful stop.
    let serving = kandev_server::serve(listener, state, shutdown.clone());
    tokio::pin!(serving);
    tokio::select! {
        served = &mut serving => served?,
        () = stop_on_signal(shutdown) => serving.await?,
    }
    engine.shutdown().await;
    if let Some(runner) = runner {
        // The acknowledgements of the agents' exits go out: the runner forgets them.
        let closing = runner.client();
        if tokio::time::timeout(Duration::from_secs(5), closing.finish()).await.is_err() {
            tracing::warn!("closing the runner connection took too long; ending without it");
        }
    }
    store.close().await;
    Ok(())
}

/// The database: `--database-url`, or `<home>/kandev.db`.
pub(crate) fn database_location(
    home: &std::path::Path,
    database_url: Option<&str>,
) -> Result<Location> {
    Ok(match database_url {
        Some(url) => Location::parse(url)?,
        None => Location::File(home.join("kandev.db")),
    })
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

pub(crate) fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,sqlx=warn"));
    // Colours only on a terminal: a log file or the journal gets plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .try_init();
}

/// `--public-url`: an `http://` or `https://` address with a host.
fn parse_public_url(text: &str) -> Result<String, String> {
    let url = text.trim().trim_end_matches('/');
    let rest = url.strip_prefix("https://").or_else(|| url.strip_prefix("http://"));
    match rest {
        Some(host) if !host.is_empty() && !url.contains(char::is_whitespace) => Ok(url.to_owned()),
        _ => Err("give the address people open Kandev at, e.g. https://kandev.example.com".into()),
    }
}

/// The proxy sign-in of `--proxy-user-header` and `--trusted-proxy` (both or neither).
fn proxy_auth(args: &ServeArgs) -> anyhow::Result<Option<kandev_server::ProxyAuth>> {
    match (&args.proxy_user_header, args.trusted_proxies.is_empty()) {
        (None, true) => Ok(None),
        (None, false) => {
            anyhow::bail!("--trusted-proxy needs --proxy-user-header (e.g. X-Forwarded-User)")
        }
        (Some(_), true) => anyhow::bail!(
            "--proxy-user-header needs --trusted-proxy <address of the proxy> (e.g. 127.0.0.1)"
        ),
        (Some(header), false) => kandev_server::ProxyAuth::new(
            header,
            &args.trusted_proxies,
            args.proxy_new_users == "viewer",
            args.proxy_join.clone(),
        )
        .map(Some)
        .map_err(|err| anyhow::anyhow!("--proxy-user-header / --trusted-proxy: {err}")),
    }
}

#[cfg(test)]
mod tests {
    use super::{ServeArgs, engine_config, parse_duration, parse_port_range, parse_size};
    use clap::Parser;
    use std::time::Duration;

    #[test]
    fn i38_7_private_notification_targets_need_the_flag() {
        let home = std::path::Path::new("/nonexistent/kandev-home");
        let by_default = ServeArgs::parse_from(["kandev serve"]);
        assert!(!engine_config(home, &by_default).unwrap().allow_private_notification_targets);
        let flag = ["kandev serve", "--allow-private-notification-targets"];
        let allowed = ServeArgs::parse_from(flag);
        assert!(engine_config(home, &allowed).unwrap().allow_private_notification_targets);
    }

    #[test]
    fn i19_a3_dev_server_port_ranges_parse() {
        assert_eq!(parse_port_range("41000-41999"), Ok(41000..=41999));
        assert_eq!(parse_port_range("8080-8080"), Ok(8080..=8080));
        for wrong in ["41000", "2-1", "0-10", "a-b", "1-70000"] {
            assert!(parse_port_range(wrong).is_err(), "{wrong}");
        }
    }

    #[test]
    fn i38_5_attachment_quota_sizes_parse() {
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("500MiB"), Ok(500 << 20));
        assert_eq!(parse_size("64k"), Ok(64 << 10));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert_eq!(parse_size("1000"), Ok(1000), "bytes");
        assert_eq!(parse_size("2GB"), Ok(2_000_000_000), "decimal units");
        assert_eq!(parse_size("500MB"), Ok(500_000_000));
        for wrong in ["0", "0GiB", "1GiBs", "GiB", "-1", "1.5GiB", "99999999999TiB"] {
            assert!(parse_size(wrong).is_err(), "{wrong}");
        }
    }

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("7d"), Ok(Duration::from_secs(7 * 86_400)));
        assert_eq!(parse_duration("1800"), Ok(Duration::from_secs(1800)), "seconds");
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert!(parse_duration("10x").is_err());
        assert!(parse_duration("s").is_err());
        assert!(parse_duration("-1s").is_err());
    }
}
