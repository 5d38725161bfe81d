//! P7 (issue 20): P1's flood with the agents behind the local runner against without it, in
//! one run: both throughputs and their ratio.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Result;
use serde_json::json;

use super::flood::streamed_turn;
use super::shared::live_sessions;
use crate::harness::{self, Server, agents_of, percentile};
use crate::{Ctx, Report};

/// One side of P7 (and P8): a server, its live sessions, and what its floods measured.
pub(super) struct Side {
    label: &'static str,
    home: PathBuf,
    server: Server,
    sessions: Vec<String>,
    /// Per session, the text the first subscriber saw, turn after turn.
    told: HashMap<String, String>,
    pub(super) throughputs: Vec<f64>,
    pub(super) latencies: Vec<f64>,
    pub(super) lost_or_dup: usize,
}

impl Side {
    async fn start(ctx: &Ctx, label: &'static str, runner: &[&str], n: usize) -> Result<Side> {
        let home = ctx.home(&format!("p7-{label}"))?;
        let server = harness::start(&ctx.kandev, &home, runner)?;
        let (workflow, _) = server.board("P7").await?;
        let sessions = live_sessions(&server, &workflow, n).await?;
        Ok(Side::with(label, home, server, sessions))
    }

    /// A side of a server started elsewhere, with its live sessions.
    pub(super) fn with(
        label: &'static str,
        home: PathBuf,
        server: Server,
        sessions: Vec<String>,
    ) -> Side {
        Side {
            label,
            home,
            server,
            sessions,
            told: HashMap::new(),
            throughputs: vec![],
            latencies: vec![],
            lost_or_dup: 0,
        }
    }

    /// One flood turn on every session; its throughput and checks are kept.
    pub(super) async fn flood(
        &mut self,
        report: &mut Report,
        script: &str,
        chunks: u64,
        bytes: usize,
    ) -> Result<()> {
        let turn = streamed_turn(&self.server, &self.sessions, script, chunks, bytes).await?;
        let label = self.label;
        report.failures.extend(turn.failures.iter().map(|f| format!("{label}: {f}")));
        self.lost_or_dup += turn.lost_or_dup;
        let total = (self.sessions.len() as u64 * chunks * bytes as u64) as f64;
        self.throughputs.push(total / (turn.end - turn.started).as_secs_f64());
        self.latencies.extend(turn.latencies);
        for (session, seen) in turn.per_session {
            report.check(
                seen.windows(2).all(|w| w[0] == w[1]),
                format!("{label}: session {session}: its two subscribers saw different text"),
            );
            let first = seen.into_iter().next().unwrap_or_default();
            self.told.entry(session).or_default().push_str(&first);
        }
        Ok(())
    }

    /// The stored transcripts against what the subscribers saw, then a graceful stop (for the
    /// runner side: its agents and the runner must be gone after it).
    pub(super) async fn finish(self, report: &mut Report) -> Result<f64> {
        let label = self.label;
        for session in &self.sessions {
            let stored: String = self
                .server
                .messages(session)
                .await?
                .iter()
                .filter(|m| m["kind"] == "agent")
                .filter_map(|m| m["content"].as_str())
                .collect();
            report.check(
                self.told.get(session).is_some_and(|t| *t == stored),
                format!("{label}: session {session}: the stored transcript differs from what a subscriber saw"),
            );
        }
        let mut server = self.server;
        std::process::Command::new("kill").arg("-TERM").arg(server.pid().to_string()).status()?;
        server.child.wait()?;
        let left = harness::wait_no_agents(&self.home, Duration::from_secs(20)).await;
        report.check(
            left.is_empty(),
            format!("{label}: orphan agents {left:?} after a graceful stop"),
        );
        let socket = self.home.join("runner.sock");
        let started = Instant::now();
        while socket.exists() && started.elapsed() < Duration::from_secs(20) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        report.check(
            !socket.exists(),
            format!("{label}: the runner did not end after a graceful stop"),
        );
        Ok(median(&self.throughputs))
    }
}

pub(super) fn median(sample: &[f64]) -> f64 {
    let mut sorted = sample.to_vec();
    percentile(&mut sorted, 50.0)
}

/// P7 (issue 20): P1's flood with the agents behind the local runner against the same flood
/// with the agents as the server's children, in one run. Two servers side by side (`--runner
/// none` and `--runner local`), the same number of live sessions each; the flood turns
/// alternate between them (none, local, none, local, ...) so a change of the shared machine's
/// load hits both; the ratio is of the medians. The correctness checks are P1's: every
/// subscriber sees every chunk once and in order, the stored transcripts equal what was seen;
/// and after a graceful stop no agent and no runner is left.
pub async fn p7(ctx: &Ctx) -> Result<Report> {
    let (sessions_n, chunks, bytes, rounds) =
        if ctx.quick { (3, 200, 100, 1) } else { (50, 2000, 100, 3) };
    let mut report = Report::new(
        "P7",
        json!({"sessions": sessions_n, "chunks": chunks, "chunk_bytes": bytes,
               "subscribers_per_session": 2, "rounds": rounds}),
    );
    let script = format!("#!mock\nstream {chunks} {bytes} stamp");
    let mut direct = Side::start(ctx, "none", &["--runner", "none"], sessions_n).await?;
    let mut runner =
        Side::start(ctx, "local", &["--runner", "local", "--runner-grace", "10s"], sessions_n)
            .await?;
    let kept = agents_of(&runner.home).len();
    report.check(kept == sessions_n, format!("local: {kept} of {sessions_n} agents are up"));
    for _ in 0..rounds {
        direct.flood(&mut report, &script, chunks, bytes).await?;
        runner.flood(&mut report, &script, chunks, bytes).await?;
    }
    let (direct_all, runner_all) = (direct.throughputs.clone(), runner.throughputs.clone());
    let (mut direct_lat, mut runner_lat) =
        (std::mem::take(&mut direct.latencies), std::mem::take(&mut runner.latencies));
    report.figure(
        "subscribers_with_lost_or_duplicated_chunks",
        direct.lost_or_dup + runner.lost_or_dup,
    );
    let p1 = direct.finish(&mut report).await?;
    let p7 = runner.finish(&mut report).await?;
    let ratio = if p1 > 0.0 { p7 / p1 } else { 0.0 };
    report.figure("p1_throughput_bytes_per_s", p1.round());
    report.figure("p7_throughput_bytes_per_s", p7.round());
    report.figure("ratio", (ratio * 1e4).round() / 1e4);
    report
        .figure("p1_rounds_bytes_per_s", direct_all.iter().map(|t| t.round()).collect::<Vec<_>>());
    report
        .figure("p7_rounds_bytes_per_s", runner_all.iter().map(|t| t.round()).collect::<Vec<_>>());
    report.figure("p1_write_to_receive_p99_ms", percentile(&mut direct_lat, 99.0));
    report.figure("p7_write_to_receive_p99_ms", percentile(&mut runner_lat, 99.0));
    report.figure("target_ratio", 0.8);
    report.figure("ratio_met", ratio >= 0.8);
    if ctx.quick {
        report.notes.push("quick: correctness only; the ratio is not checked at this size".into());
    } else {
        report.check(ratio >= 0.8, format!("P7 is {ratio:.3} of P1's throughput, below 0.80"));
    }
    Ok(report)
}
