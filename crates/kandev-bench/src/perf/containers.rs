//! P8 (issue 42): P1's flood with the agents in containers (a container executor, Podman)
//! against the same flood with them on the server's host, in one run: both throughputs and
//! their ratio (target ≥ 0.80).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Result, anyhow};
use serde_json::json;

use super::runner::Side;
use crate::container::Podman;
use crate::harness::{self, Server, percentile, str_of};
use crate::{Ctx, Report};

/// The workspace (for `scripts/containers.conf`) and the tests' container store under its
/// `target/`, shared with the container tests: the image is built once for both.
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Podman with the project's configuration, and the test image for `kandev` (built without a
/// registry, or reused).
async fn podman_and_image(kandev: &Path) -> Result<(Podman, String)> {
    let kandev = kandev.to_path_buf();
    tokio::task::spawn_blocking(move || {
        let workspace = workspace();
        let podman = Podman::new(&workspace, &workspace.join("target/containers"));
        let image = podman.test_image(&kandev);
        (podman, image)
    })
    .await
    .map_err(|e| anyhow!("Podman or its test image is not usable here: {e}"))
}

/// A server with `n` live sessions of tasks of one repository; the repository uses a
/// container executor of `image` when it is given.
async fn side(
    ctx: &Ctx,
    label: &'static str,
    env: &[(&str, &str)],
    container: Option<&str>,
    n: usize,
) -> Result<(Side, tempfile::TempDir)> {
    let home = ctx.home(label)?;
    let server = harness::start_env(&ctx.kandev, &home, &[], env)?;
    let repo = harness::git_repo()?;
    let repository = repository(&server, repo.path(), container).await?;
    let (workflow, _) = server.board("P8").await?;
    let mut sessions = vec![];
    for i in 0..n {
        let title = format!("p8 {i}");
        let session = server.new_session_on(&workflow, &title, Some(&repository)).await?;
        server.wait_state(&session, &["WAITING_FOR_INPUT"], Duration::from_secs(120)).await?;
        sessions.push(session);
    }
    Ok((Side::with(label, home, server, sessions), repo))
}

/// Registers `repo`; with `image`, on a container executor with no network.
async fn repository(server: &Server, repo: &Path, image: Option<&str>) -> Result<String> {
    let workspaces = server.call("workspace.list", json!({})).await?;
    let workspace = &workspaces["workspaces"][0]["id"];
    let created = server
        .call("repository.create", json!({"workspace_id": workspace, "local_path": repo}))
        .await?;
    let repository = str_of(&created["repository"]["id"])?;
    if let Some(image) = image {
        let executor = server
            .call(
                "executor.create",
                json!({"name": "p8", "kind": "container", "container": {"image": image}}),
            )
            .await?;
        server
            .call(
                "repository.executor.set",
                json!({"repository_id": repository, "executor_id": executor["executor"]["id"]}),
            )
            .await?;
    }
    Ok(repository)
}

/// P8 (issue 42): two servers side by side, the same number of live sessions each, each
/// session a task of a repository; on one the repository uses a container executor (each
/// task's agent in its own Podman container, network none, reached by `podman exec -i …
/// kandev runner --stdio`), on the other the agents run on the host (the local runner). The
/// flood turns alternate between them; the ratio is of the medians. The correctness checks
/// are P1's. The containers are removed at the end.
pub async fn p8(ctx: &Ctx) -> Result<Report> {
    let (sessions_n, chunks, bytes, rounds) =
        if ctx.quick { (3, 200, 100, 1) } else { (50, 2000, 100, 3) };
    let mut report = Report::new(
        "P8",
        json!({"sessions": sessions_n, "chunks": chunks, "chunk_bytes": bytes,
               "subscribers_per_session": 2, "rounds": rounds, "engine": "podman"}),
    );
    let (podman, image) = podman_and_image(&ctx.kandev).await?;
    let env: Vec<(&str, String)> =
        podman.env().iter().map(|(k, v)| (*k, v.display().to_string())).collect();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let script = format!("#!mock\nstream {chunks} {bytes} stamp");
    let (mut host, _host_repo) = side(ctx, "p8-host", &env, None, sessions_n).await?;
    let made = side(ctx, "p8-containers", &env, Some(&image), sessions_n).await;
    let containers_home = ctx.tmp.path().join("p8-containers");
    let result = async {
        let (mut boxed, _boxed_repo) = made?;
        for _ in 0..rounds {
            host.flood(&mut report, &script, chunks, bytes).await?;
            boxed.flood(&mut report, &script, chunks, bytes).await?;
        }
        let (host_all, boxed_all) = (host.throughputs.clone(), boxed.throughputs.clone());
        let (mut host_lat, mut boxed_lat) =
            (std::mem::take(&mut host.latencies), std::mem::take(&mut boxed.latencies));
        report.figure(
            "subscribers_with_lost_or_duplicated_chunks",
            host.lost_or_dup + boxed.lost_or_dup,
        );
        let p1 = host.finish(&mut report).await?;
        let p8 = boxed.finish(&mut report).await?;
        let ratio = if p1 > 0.0 { p8 / p1 } else { 0.0 };
        report.figure("p1_throughput_bytes_per_s", p1.round());
        report.figure("p8_throughput_bytes_per_s", p8.round());
        report.figure("ratio", (ratio * 1e4).round() / 1e4);
        report.figure(
            "p1_rounds_bytes_per_s",
            host_all.iter().map(|t| t.round()).collect::<Vec<_>>(),
        );
        report.figure(
            "p8_rounds_bytes_per_s",
            boxed_all.iter().map(|t| t.round()).collect::<Vec<_>>(),
        );
        report.figure("p1_write_to_receive_p99_ms", percentile(&mut host_lat, 99.0));
        report.figure("p8_write_to_receive_p99_ms", percentile(&mut boxed_lat, 99.0));
        report.figure("target_ratio", 0.8);
        report.figure("ratio_met", ratio >= 0.8);
        if ctx.quick {
            report
                .notes
                .push("quick: correctness only; the ratio is not checked at this size".into());
        } else {
            report.check(ratio >= 0.8, format!("P8 is {ratio:.3} of P1's throughput, below 0.80"));
        }
        anyhow::Ok(())
    }
    .await;
    remove_containers(&podman, &containers_home).await;
    result?;
    Ok(report)
}

/// Removes the containers the server of `home` made (its tasks outlive the run).
async fn remove_containers(podman: &Podman, home: &Path) {
    let filter = format!("label=dev.kandev.home={}", home.display());
    let mut list = podman.command();
    list.args(["ps", "-aq", "--filter", &filter]);
    let Ok(found) = tokio::task::block_in_place(|| list.output()) else { return };
    let ids: Vec<String> =
        String::from_utf8_lossy(&found.stdout).lines().map(str::to_owned).collect();
    if ids.is_empty() {
        return;
    }
    let mut remove = podman.command();
    remove.args(["rm", "--force", "--time", "0"]).args(&ids);
    let _ = tokio::task::block_in_place(|| remove.output());
}
