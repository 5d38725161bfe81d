//! `kandev-bench`: the benchmark scenarios (P1-P5, P7-P9) and the fault harness (R1, R2, R4, R5, R6, R8) of
//! the targets. Each starts the real `kandev serve` on a temp home with real mock-agent
//! processes, drives it only through the public API, verifies every result, and prints one
//! JSON line. The process exits non-zero when a scenario fails.

mod clients;
#[path = "../../kandev-testkit/src/container.rs"]
#[expect(dead_code, reason = "the tests' helper; P8 needs only the test image")]
mod container;
mod faults;
mod harness;
mod perf;
/// The SSH executor tests' real OpenSSH server on loopback (one definition for both).
#[path = "../../kandev-testkit/src/sshd.rs"]
mod sshd;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use serde_json::{Value, json};

#[derive(Parser)]
#[command(name = "kandev-bench", version, about)]
struct Cli {
    #[command(subcommand)]
    scenario: Scenario,
    /// Small sizes (for CI); without it, the full sizes of the targets.
    #[arg(long, global = true)]
    quick: bool,
    /// The kandev binary to benchmark. Default: `kandev` next to this executable.
    #[arg(long, global = true)]
    kandev: Option<PathBuf>,
    /// Run the server on this (empty) database instead of a SQLite file in its home, e.g. a
    /// postgres:// URL (`scripts/bench-pg` makes one per scenario). P1, P2, P3, P5, P9 and R1,
    /// one at a time (P6 in docs/performance.md).
    #[arg(long, global = true)]
    database_url: Option<String>,
    /// P9 only: run this many minutes instead of the full 30 (the restart in the middle).
    #[arg(long, global = true)]
    minutes: Option<u64>,
    /// P9 only: write its timeline here (`p9-<engine>.csv` and `.svg`) instead of the
    /// bench's temp dir, e.g. `docs/perf`.
    #[arg(long, global = true)]
    out: Option<PathBuf>,
}

#[derive(Subcommand, Clone, Copy, PartialEq, Eq)]
enum Scenario {
    /// Streaming: concurrent sessions, 2 subscribers each, against the raw pipe limit.
    P1,
    /// Idle scale: many live agents, WS clients, RSS and a prompt round trip.
    P2,
    /// Board: many tasks and messages; task.list and message.list latency.
    P3,
    /// Startup on the P3 database: process start to healthy, idle RSS.
    P4,
    /// Lifecycle churn: prompt / cancel / reset / resume cycles; no leaked process.
    P5,
    /// P1's flood with the agents behind the local runner against without it, same run:
    /// both throughputs and their ratio (target >= 0.80; issue 20).
    P7,
    /// P1's flood with the agents in containers (Podman) against on the host, same run:
    /// both throughputs and their ratio (target >= 0.80; issue 42).
    P8,
    /// A team's day, compressed: 30 minutes of mixed load (clients that reconnect, agents
    /// streaming in bursts, task creations, moves, searches) with a kill -9 and restart in
    /// the middle; nothing told is missing; health, memory and throughput over time (issue 53).
    P9,
    /// kill -9 the server mid-stream, restart, check nothing told is lost.
    R1,
    /// kill -9 a server with the local runner during streaming turns, restart: the turns
    /// complete without session/load, every chunk once, no orphan (issue 20).
    R6,
    /// R6 with the agents on an SSH executor (a real sshd on loopback; issue 39).
    R6Ssh,
    /// Agent faults end in their specified state within their bound.
    R2,
    /// Hostile input over HTTP and WS: only structured errors, server alive.
    R4,
    /// Security: bind, token, origin, path traversal, secrets in logs.
    R5,
    /// Slow and idle clients: stalled subscribers and half-open connections during a stream.
    R8,
    /// Every scenario above, in order.
    All,
}

/// One scenario's result line.
pub struct Report {
    pub scenario: &'static str,
    pub params: Value,
    pub figures: Value,
    /// Failed checks; empty means pass.
    pub failures: Vec<String>,
    pub notes: Vec<String>,
}

impl Report {
    pub fn new(scenario: &'static str, params: Value) -> Self {
        Report { scenario, params, figures: json!({}), failures: vec![], notes: vec![] }
    }

    pub fn check(&mut self, ok: bool, what: impl Into<String>) {
        if !ok {
            self.failures.push(what.into());
        }
    }

    pub fn figure(&mut self, name: &str, value: impl Into<Value>) {
        self.figures[name] = value.into();
    }

    fn line(&self) -> Value {
        let mut line = json!({
            "scenario": self.scenario,
            "params": self.params,
            "figures": self.figures,
            "pass": self.failures.is_empty(),
        });
        if !self.failures.is_empty() {
            line["failures"] = json!(self.failures);
        }
        if !self.notes.is_empty() {
            line["notes"] = json!(self.notes);
        }
        line
    }
}

/// What every scenario gets.
pub struct Ctx {
    pub kandev: PathBuf,
    pub quick: bool,
    /// `--database-url`, for the scenarios that support it.
    pub database_url: Option<String>,
    pub tmp: tempfile::TempDir,
}

impl Ctx {
    /// The server arguments that choose the database (none: a SQLite file in its home).
    pub fn database_args(&self) -> Vec<&str> {
        match &self.database_url {
            Some(url) => vec!["--database-url", url.as_str()],
            None => vec![],
        }
    }

    /// The engine the server runs on, for the report.
    pub fn engine(&self) -> &'static str {
        match &self.database_url {
            Some(url) if url.starts_with("postgres") => "postgres",
            _ => "sqlite",
        }
    }

    /// A fresh home folder under the bench's temp dir.
    pub fn home(&self, name: &str) -> Result<PathBuf> {
        let path = self.tmp.path().join(name);
        std::fs::create_dir_all(&path)?;
        Ok(path)
    }
}

fn locate_kandev(given: Option<PathBuf>) -> Result<PathBuf> {
    if let Some(path) = given {
        return Ok(path);
    }
    let me = std::env::current_exe().context("cannot find this executable")?;
    let dir = me.parent().map(Path::to_path_buf).unwrap_or_default();
    let candidate = dir.join("kandev");
    anyhow::ensure!(
        candidate.exists(),
        "{} not found: build it first (`cargo build [--release] -p kandev`) or pass --kandev",
        candidate.display()
    );
    Ok(candidate)
}

#[tokio::main]
async fn main() -> Result<()> {
    let cli = Cli::parse();
    anyhow::ensure!(
        cli.database_url.is_none()
            || matches!(
                cli.scenario,
                Scenario::P1
                    | Scenario::P2
                    | Scenario::P3
                    | Scenario::P5
                    | Scenario::P9
                    | Scenario::R1
            ),
        "--database-url is for one of p1, p2, p3, p5, p9 and r1 at a time (each needs an empty database)"
    );
    anyhow::ensure!(
        (cli.minutes.is_none() && cli.out.is_none()) || cli.scenario == Scenario::P9,
        "--minutes and --out are for p9"
    );
    let (minutes, out) = (cli.minutes, cli.out);
    let ctx = Ctx {
        kandev: locate_kandev(cli.kandev)?,
        quick: cli.quick,
        database_url: cli.database_url,
        tmp: tempfile::Builder::new()
            .prefix("kandev-bench-")
            // `KANDEV_BENCH_KEEP=1` keeps the homes (databases, logs) for a look afterwards.
            .disable_cleanup(std::env::var_os("KANDEV_BENCH_KEEP").is_some())
            .tempdir()?,
    };
    if std::env::var_os("KANDEV_BENCH_KEEP").is_some() {
        eprintln!("kept: {}", ctx.tmp.path().display());
    }
    let order = [
        Scenario::P1,
        Scenario::P2,
        Scenario::P3,
        Scenario::P4,
        Scenario::P5,
        Scenario::P7,
        Scenario::P8,
        Scenario::P9,
        Scenario::R1,
        Scenario::R6,
        Scenario::R6Ssh,
        Scenario::R2,
        Scenario::R4,
        Scenario::R5,
        Scenario::R8,
    ];
    let chosen: Vec<Scenario> =
        if cli.scenario == Scenario::All { order.to_vec() } else { vec![cli.scenario] };
    let mut failed = 0;
    let mut board = None; // P3's home, reused by P4
    for scenario in chosen {
        let (name, result) = match scenario {
            Scenario::P1 => ("P1", perf::p1(&ctx).await),
            Scenario::P2 => ("P2", perf::p2(&ctx).await),
            Scenario::P3 => ("P3", perf::p3(&ctx, &mut board).await),
            Scenario::P4 => ("P4", perf::p4(&ctx, &mut board).await),
            Scenario::P5 => ("P5", perf::p5(&ctx).await),
            Scenario::P7 => ("P7", perf::p7(&ctx).await),
            Scenario::P8 => ("P8", perf::p8(&ctx).await),
            Scenario::P9 => ("P9", perf::p9(&ctx, minutes, out.as_deref()).await),
            Scenario::R1 => ("R1", faults::r1(&ctx).await),
            Scenario::R6 => ("R6", faults::r6(&ctx, faults::R6On::LocalRunner).await),
            Scenario::R6Ssh => ("R6-ssh", faults::r6(&ctx, faults::R6On::Ssh).await),
            Scenario::R2 => ("R2", faults::r2(&ctx).await),
            Scenario::R4 => ("R4", faults::r4(&ctx).await),
            Scenario::R5 => ("R5", faults::r5(&ctx).await),
            Scenario::R8 => ("R8", clients::r8(&ctx).await),
            Scenario::All => unreachable!("expanded above"),
        };
        let line = match result {
            Ok(report) => {
                if !report.failures.is_empty() {
                    failed += 1;
                }
                report.line()
            }
            Err(err) => {
                failed += 1;
                json!({"scenario": name, "pass": false, "error": format!("{err:#}")})
            }
        };
        println!("{line}");
    }
    if failed > 0 {
        eprintln!("{failed} scenario(s) failed");
        std::process::exit(1);
    }
    Ok(())
}
