//! `kandev doctor` (issue 43): checks what Kandev needs on this machine and in its home —
//! git, the home and its free space, the database (schema, integrity, permissions), the
//! agents the profiles use, the container engine and SSH client the executors use, the
//! runner's socket and the server's port — and prints each finding, a problem with the line
//! that fixes it. Exits non-zero when there is a problem. Safe while the server runs.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Result, bail};
use clap::Args;
use kandev_engine::doctor::{self, Finding};
use kandev_store::{Store, schema_state};

#[derive(Args, Debug)]
pub struct DoctorArgs {
    /// The Kandev home to check. Default: $KANDEV_HOME, else ~/.kandev
    #[arg(long, env = "KANDEV_HOME")]
    pub home: Option<PathBuf>,
    /// The database, when not <home>/kandev.db (a postgres:// URL).
    #[arg(long, env = "KANDEV_DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
    /// The address the server listens on (or will).
    #[arg(long, env = "KANDEV_ADDR", default_value = crate::serve::DEFAULT_ADDR)]
    pub addr: SocketAddr,
    /// Less free space where the home is than this many MiB is a problem.
    #[arg(long, default_value_t = doctor::MIN_FREE_BYTES >> 20)]
    pub min_free_mib: u64,
}

pub async fn run(args: DoctorArgs) -> Result<()> {
    let home = crate::serve::home_or_default(args.home.as_ref())?;
    let location = crate::serve::database_location(&home, args.database_url.as_deref())?;
    println!("kandev doctor: kandev {}, home {}", crate::VERSION, home.display());
    let mut found = vec![doctor::git().await];
    found.extend(doctor::home(&home));
    found.push(doctor::disk(&home, args.min_free_mib << 20));
    found.push(doctor::database_schema(&location).await);
    found.extend(doctor::database_file(&location));
    // What the database holds is read only when it has this Kandev's schema (opening it
    // otherwise would migrate it, which only the server does, after a backup).
    let current =
        matches!(schema_state(&location).await, Ok(Some(s)) if !s.newer && !s.upgrade_pending());
    if current && let Ok(store) = Store::open_beside_server(location.clone()).await {
        found.push(doctor::database_integrity(&store).await);
        found.push(doctor::secret_key(&home, &store).await);
        found.extend(doctor::agents(&home, &store).await);
        found.extend(doctor::executors(&store).await);
        store.close().await;
    }
    found.push(doctor::runner(&home).await);
    found.push(port(args.addr).await);
    let problems = print(&found);
    if problems > 0 {
        bail!(
            "{problems} problem{} found: each says what fixes it",
            if problems == 1 { "" } else { "s" }
        );
    }
    println!("No problem found.");
    Ok(())
}

/// Prints the findings; how many are problems.
fn print(found: &[Finding]) -> usize {
    for finding in found {
        let mark = if finding.ok { "ok     " } else { "PROBLEM" };
        println!("{mark} {}: {}", finding.check, finding.detail);
    }
    found.iter().filter(|f| !f.ok).count()
}

/// The server's address is free, or a Kandev server answers there.
async fn port(addr: SocketAddr) -> Finding {
    let taken = match std::net::TcpListener::bind(addr) {
        Ok(_) => {
            return Finding { check: "port".into(), ok: true, detail: format!("{addr} is free") };
        }
        Err(err) => err,
    };
    let health = format!("http://{addr}/api/v1/health");
    let client = reqwest::Client::builder().timeout(Duration::from_secs(3)).build();
    let answered = match client {
        Ok(client) => match client.get(&health).send().await {
            Ok(answer) => answer.json::<serde_json::Value>().await.ok(),
            Err(_) => None,
        },
        Err(_) => None,
    };
    match answered.and_then(|body| body["version"].as_str().map(str::to_owned)) {
        Some(version) => Finding {
            check: "port".into(),
            ok: true,
            detail: format!("a Kandev server ({version}) answers on {addr}"),
        },
        None => Finding {
            check: "port".into(),
            ok: false,
            detail: format!(
                "{addr} is taken by another program ({taken}): stop it, or give Kandev another \
                 address (kandev serve --addr 127.0.0.1:38430)"
            ),
        },
    }
}
