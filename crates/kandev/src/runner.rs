//! `kandev runner` (the process that owns agents for a server and outlives it), and how
//! `serve --runner local` reaches it: a Unix socket under `$KANDEV_HOME`, the runner started
//! detached when none listens.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Parser, ValueEnum};
use kandev_runtime::runner::{self, Runner, RunnerClient, RunnerConfig};

use crate::serve::parse_duration;

#[derive(Parser, Debug)]
#[command(name = "kandev runner")]
pub struct RunnerArgs {
    /// The Unix socket to listen on (`serve --runner local` uses <home>/runner.sock).
    #[arg(long)]
    pub socket: PathBuf,
    /// Speak the protocol on stdin/stdout, relayed to the runner on --socket (started when
    /// none listens): how a server reaches a runner over an SSH channel, so a dropped
    /// connection is only a server-away period for that runner.
    #[arg(long)]
    pub stdio: bool,
    /// Start the runner on --socket, detached, when none listens there, and exit once it
    /// listens: how a server starts the runner of a task container whose socket it then
    /// reaches through a mounted folder.
    #[arg(long, conflicts_with = "stdio")]
    pub start: bool,
    /// How long the agents are kept while no server is connected; then they are killed and
    /// the runner ends.
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    pub grace: Duration,
    /// Most bytes of an agent's unacknowledged output kept while no server is connected;
    /// past it the agent's output is not read (it waits), never dropped.
    #[arg(long, default_value_t = runner::DEFAULT_BUFFER_LIMIT)]
    pub buffer_limit: usize,
    /// Run on one thread: a task container's runner serves one task, and fifty of them on a
    /// small machine each keeping a worker per core would cross threads on every chunk.
    #[arg(long)]
    pub one_thread: bool,
}

/// Where the server's agents run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RunnerMode {
    /// In a local runner that outlives the server (`kandev runner` on <home>/runner.sock).
    Local,
    /// As children of the server.
    None,
}

pub async fn run(args: RunnerArgs) -> Result<()> {
    crate::serve::init_tracing();
    if args.grace.is_zero() {
        anyhow::bail!("--grace must be more than 0; e.g. 10m");
    }
    if args.stdio {
        return relay_stdio(&args).await;
    }
    if args.start {
        return start_detached(&args).await;
    }
    let listener = runner::bind(&args.socket)
        .await
        .with_context(|| format!("cannot listen on {}", args.socket.display()))?;
    let config = RunnerConfig {
        grace: args.grace,
        buffer_limit: args.buffer_limit,
        ..RunnerConfig::default()
    };
    tracing::info!(socket = %args.socket.display(), ?config, "runner listening");
    let runner = Runner::new(config);
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("cannot listen for SIGTERM")?;
    tokio::select! {
        served = runner::serve_unix(listener, runner.clone()) => served?,
        _ = term.recv() => runner.shutdown().await,
        _ = tokio::signal::ctrl_c() => runner.shutdown().await,
    }
    let _ = std::fs::remove_file(&args.socket);
    tracing::info!("runner ended");
    Ok(())
}

/// `--stdio`: relays stdin/stdout to the runner on the socket until either side closes.
async fn relay_stdio(args: &RunnerArgs) -> Result<()> {
    let exe = std::env::current_exe().context("cannot find the kandev binary to run the runner")?;
    let log = args.socket.with_extension("log");
    let mut stream = runner::connect_or_start(&args.socket, &exe, &listen_args(args), &log)
        .await
        .map_err(anyhow::Error::msg)?;
    let mut stdio = tokio::io::join(tokio::io::stdin(), tokio::io::stdout());
    // Either side closing ends the relay; the runner keeps its agents (grace period).
    let _ = tokio::io::copy_bidirectional(&mut stdio, &mut stream).await;
    Ok(())
}

/// `--start`: the runner started on the socket (when none listens); nothing relayed.
async fn start_detached(args: &RunnerArgs) -> Result<()> {
    let exe = std::env::current_exe().context("cannot find the kandev binary to run the runner")?;
    let log = args.socket.with_extension("log");
    runner::connect_or_start(&args.socket, &exe, &listen_args(args), &log)
        .await
        .map_err(anyhow::Error::msg)?;
    Ok(())
}

fn listen_args(args: &RunnerArgs) -> Vec<String> {
    let mut listen = vec![
        "runner".to_owned(),
        "--socket".to_owned(),
        args.socket.display().to_string(),
        "--grace".to_owned(),
        format!("{}ms", args.grace.as_millis()),
        "--buffer-limit".to_owned(),
        args.buffer_limit.to_string(),
    ];
    if args.one_thread {
        listen.push("--one-thread".to_owned());
    }
    listen
}

/// Connects to the local runner of `home` (starting it when none listens), with the
/// executions it still holds. The connection is kept: a runner that died (the OOM killer)
/// is started again and connected to, with back-off, for as long as the server runs.
pub async fn connect_local(
    home: &Path,
    grace: Duration,
) -> Result<(RunnerClient, Vec<runner::ExecutionInfo>)> {
    let exe = std::env::current_exe().context("cannot find the kandev binary to run the runner")?;
    let socket = runner::socket_path(home);
    let args = listen_args(&RunnerArgs {
        socket: socket.clone(),
        stdio: false,
        start: false,
        grace,
        buffer_limit: runner::DEFAULT_BUFFER_LIMIT,
        one_thread: false,
    });
    let transport =
        runner::LocalTransport { socket, program: exe, args, log: home.join("runner.log") };
    RunnerClient::open(transport, runner::Backoff::forever())
        .await
        .map_err(|err| anyhow::Error::msg(err.message))
}
