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
    /// How long the agents are kept while no server is connected; then they are killed and
    /// the runner ends.
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    pub grace: Duration,
    /// Most bytes of an agent's unacknowledged output kept while no server is connected;
    /// past it the agent's output is not read (it waits), never dropped.
    #[arg(long, default_value_t = runner::DEFAULT_BUFFER_LIMIT)]
    pub buffer_limit: usize,
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
    let listener = runner::bind(&args.socket)
        .await
        .with_context(|| format!("cannot listen on {}", args.socket.display()))?;
    let config = RunnerConfig { grace: args.grace, buffer_limit: args.buffer_limit };
    tracing::info!(socket = %args.socket.display(), ?config, "runner listening");
    runner::serve_unix(listener, Runner::new(config)).await?;
    tracing::info!("runner ended");
    Ok(())
}

/// Connects to the local runner of `home` (starting it when none listens), with the
/// executions it still holds.
pub async fn connect_local(
    home: &Path,
    grace: Duration,
) -> Result<(RunnerClient, Vec<runner::ExecutionInfo>)> {
    let exe = std::env::current_exe().context("cannot find the kandev binary to run the runner")?;
    let socket = runner::socket_path(home);
    let args = vec![
        "runner".to_owned(),
        "--socket".to_owned(),
        socket.display().to_string(),
        "--grace".to_owned(),
        format!("{}ms", grace.as_millis()),
    ];
    let stream = runner::connect_or_start(&socket, &exe, &args, &home.join("runner.log"))
        .await
        .map_err(anyhow::Error::msg)?;
    let (client, executions) = RunnerClient::connect(stream)
        .await
        .with_context(|| format!("cannot use the runner on {}", socket.display()))?;
    Ok((client, executions))
}
