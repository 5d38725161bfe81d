//! The `kandev` command: runs the server, and talks to a running one for tasks and workflows.

mod backup;
mod bridge;
mod client;
mod db;
mod doctor;
mod lock;
mod runner;
mod serve;
mod service;
mod users;

use clap::{Parser, Subcommand};

/// `kandev --version`: the version and the commit it was built from (`build.rs`).
pub(crate) const VERSION: &str =
    concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("KANDEV_COMMIT"), ")");

/// Kandev: a self-hosted control plane for AI coding agents.
///
/// Run `kandev` (or `kandev serve`) and open the printed address. The other commands talk to
/// a running server over its HTTP API.
#[derive(Parser)]
#[command(name = "kandev", version = VERSION, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
#[allow(clippy::large_enum_variant, reason = "parsed once at startup; boxing buys nothing")]
enum Command {
    /// Run the server (the default when no command is given).
    Serve(serve::ServeArgs),
    /// Create, list and move tasks on a running server.
    Task {
        #[command(flatten)]
        server: client::ServerArgs,
        #[command(subcommand)]
        command: client::TaskCommand,
    },
    /// Run the built-in deterministic mock agent on stdio (ACP). Kandev starts it for the
    /// Mock profile; tests and benchmarks use its scripts and failure flags.
    MockAgent(kandev_mock_agent::MockArgs),
    /// Run a scripted fake of an agent's own terminal UI (a prompt, a working spinner, a
    /// permission question) on this terminal: for tests of terminal-UI sessions, not for people.
    #[command(hide = true)]
    FakeTui(kandev_mock_agent::tui::TuiArgs),
    /// Bridge stdio to Kandev's MCP server (what Kandev hands agents that only take stdio
    /// MCP servers; the token comes in KANDEV_MCP_TOKEN).
    McpBridge(bridge::BridgeArgs),
    /// Own agent processes for a server and outlive it (`serve --runner local` starts it).
    Runner(runner::RunnerArgs),
    /// Wait until stopped (a task container's first process; not for people).
    #[command(hide = true)]
    Idle,
    /// Relay TCP over stdin/stdout (what a server runs in a task's container for Kandev's
    /// MCP server, allowed host ports and dev servers; not for people).
    #[command(hide = true)]
    Tunnel {
        #[command(subcommand)]
        mode: TunnelMode,
    },
    /// Run one git or file operation on a task's worktree here and print the answer as JSON
    /// (what a server runs on an SSH executor's build host; not for people).
    #[command(hide = true)]
    RemoteOp {
        /// The operation, as JSON (read from stdin when not given: what the server does, so
        /// it is neither visible in `ps` nor bounded by the size of an argument).
        request: Option<String>,
    },
    /// Add, list and remove the users who may log in, and set their passwords (on the
    /// database itself; the server may be running).
    User {
        #[command(flatten)]
        db: users::DatabaseArgs,
        #[command(subcommand)]
        command: users::UserCommand,
    },
    /// Run Kandev as a systemd service: `kandev service install` (a user service; --system
    /// for a system one), `status`, `uninstall`.
    Service {
        #[command(subcommand)]
        command: service::ServiceCommand,
    },
    /// Back up the database (as it is at one moment; the server may run) and the attachments
    /// into one .tar.gz: `kandev backup [--to FILE]`.
    Backup(backup::BackupArgs),
    /// Restore a backup into a new, empty home (and an empty PostgreSQL database with
    /// --database-url): `kandev restore FILE --home DIR`.
    Restore(backup::RestoreArgs),
    /// Check what Kandev needs here (git, the home, disk space, the database, the agents the
    /// profiles use, executors' tools, the runner, the port); each problem says what fixes it.
    Doctor(doctor::DoctorArgs),
    /// Move a database: `kandev db copy --from <sqlite file> --to postgres://…`.
    Db {
        #[command(subcommand)]
        command: db::DbCommand,
    },
    /// Export and import workflows as YAML on a running server.
    Workflow {
        #[command(flatten)]
        server: client::ServerArgs,
        #[command(subcommand)]
        command: client::WorkflowCommand,
    },
}

/// `kandev idle`: waits for SIGTERM or SIGINT (what `podman stop` sends).
async fn idle() -> anyhow::Result<()> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    Ok(())
}

/// How `kandev tunnel` relays (kandev_runtime::tunnel).
#[derive(clap::Subcommand, Debug)]
enum TunnelMode {
    /// stdin/stdout are one connection to 127.0.0.1:PORT here.
    Connect {
        #[arg(long)]
        port: u16,
    },
    /// Listen on 127.0.0.1:PORT here; every connection is carried over stdin/stdout.
    Listen {
        #[arg(long)]
        port: u16,
    },
}

async fn tunnel(mode: TunnelMode) -> anyhow::Result<()> {
    use anyhow::Context;
    match mode {
        TunnelMode::Connect { port } => kandev_runtime::tunnel::connect_stdio(port)
            .await
            .with_context(|| format!("relaying 127.0.0.1:{port}")),
        TunnelMode::Listen { port } => {
            let listener = kandev_runtime::tunnel::bind_local(port)
                .await
                .with_context(|| format!("cannot listen on 127.0.0.1:{port}"))?;
            let (stdin, stdout) = (tokio::io::stdin(), tokio::io::stdout());
            kandev_runtime::tunnel::serve_mux(stdin, stdout, Some(listener), None)
                .await
                .context("relaying over stdin/stdout")
        }
    }
}

/// mimalloc instead of glibc's malloc (issue 15): sqlx decodes rows on each SQLite
/// connection's thread and the async workers free them, and glibc serialized those
/// cross-thread frees behind its arena locks; transparent huge pages are off for the
/// process (`no_thp`), so a fresh buffer is not zeroed 2 MiB at a time
/// (docs/architecture.md, "Dependencies and why"). Freed memory goes back to the OS at once
/// (`kandev_alloc::configure`, issue 38 item 4).
#[global_allocator]
static ALLOCATOR: kandev_alloc::MiMalloc = kandev_alloc::MiMalloc;

fn main() -> std::process::ExitCode {
    kandev_alloc::configure();
    let cli = Cli::parse();
    // The mock agent runs on one thread, as a real agent's event loop does: 50 of them on a
    // 2-core machine (the bench) would otherwise each keep a worker per core, and every
    // wake-up of a paced stream would cross threads (issue 15). So does a task container's
    // runner (`runner --one-thread`, issue 42): one per container.
    let runtime = match cli.command {
        Some(Command::MockAgent(_))
        | Some(Command::FakeTui(_))
        | Some(Command::Runner(runner::RunnerArgs { one_thread: true, .. })) => {
            tokio::runtime::Builder::new_current_thread().enable_all().build()
        }
        _ => tokio::runtime::Builder::new_multi_thread().enable_all().build(),
    };
    match runtime {
        Ok(runtime) => runtime.block_on(run(cli)),
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> std::process::ExitCode {
    let result = match cli.command {
        None => serve::run(serve::ServeArgs::parse_from(["kandev"])).await,
        Some(Command::Serve(args)) => serve::run(args).await,
        Some(Command::MockAgent(args)) => {
            // stdout carries the protocol; exit at once so a blocking stdin read cannot stall.
            let code = kandev_mock_agent::run_stdio(args.into()).await;
            std::process::exit(code);
        }
        Some(Command::FakeTui(args)) => {
            // Like the mock agent: exit at once so tokio's blocking stdin read cannot stall.
            let code = kandev_mock_agent::tui::run_terminal(args).await;
            std::process::exit(code);
        }
        Some(Command::McpBridge(args)) => bridge::run(args).await,
        Some(Command::Runner(args)) => runner::run(args).await,
        Some(Command::Tunnel { mode }) => tunnel(mode).await,
        Some(Command::Idle) => idle().await,
        Some(Command::RemoteOp { request }) => {
            let request = match request {
                Some(request) => request,
                None => {
                    let mut request = String::new();
                    let mut stdin = tokio::io::stdin();
                    if let Err(e) =
                        tokio::io::AsyncReadExt::read_to_string(&mut stdin, &mut request).await
                    {
                        eprintln!("cannot read the operation from stdin: {e}");
                        return std::process::ExitCode::FAILURE;
                    }
                    request
                }
            };
            println!("{}", kandev_runtime::runner::ops::serve(&request).await);
            Ok(())
        }
        Some(Command::Task { server, command }) => client::task(server, command).await,
        Some(Command::Workflow { server, command }) => client::workflow(server, command).await,
        Some(Command::User { db, command }) => users::run(db, command).await,
        Some(Command::Db { command }) => db::run(command).await,
        Some(Command::Service { command }) => service::run(command),
        Some(Command::Backup(args)) => backup::backup(args).await,
        Some(Command::Doctor(args)) => doctor::run(args).await,
        Some(Command::Restore(args)) => backup::restore(args).await,
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
