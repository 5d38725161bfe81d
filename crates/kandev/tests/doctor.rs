//! Issue 43, acceptance 4: `kandev doctor` exits 0 on a healthy home, and on each broken case
//! (no git, an agent a profile uses is missing, a full disk, an unwritable home, a database of
//! a newer Kandev) exits non-zero naming the fix.

#![allow(clippy::disallowed_methods, reason = "tests start processes freely")]

use std::path::Path;
use std::process::{Command, Output};

use kandev_store::{Dialect, Location, fixture};
use serde_json::json;
use support::{KANDEV, call};

mod support;

/// A port nothing listens on.
fn free_addr() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

fn doctor(home: &Path, extra: &[&str]) -> Output {
    doctor_with(KANDEV.command(), home, extra)
}

fn doctor_with(mut command: Command, home: &Path, extra: &[&str]) -> Output {
    command
        .arg("doctor")
        .arg("--home")
        .arg(home)
        .args(["--addr", &free_addr()])
        .args(extra)
        .env_remove("KANDEV_DATABASE_URL")
        .output()
        .unwrap()
}

fn said(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// A home a server made (its database, the default profiles), the server stopped.
fn made_home() -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    KANDEV.start(home.path()).terminate();
    home
}

#[tokio::test]
async fn i43_a4_doctor_on_a_healthy_home_exits_0_and_beside_its_running_server_too() {
    let home = made_home();
    let out = doctor(home.path(), &["--min-free-mib", "1"]);
    let text = said(&out);
    assert!(out.status.success(), "{text}");
    for check in [
        "ok      git: git version",
        "ok      database: schema",
        "ok      database integrity: ok",
        "ok      port:",
    ] {
        assert!(text.contains(check), "no `{check}` in: {text}");
    }
    assert!(text.contains("No problem found."), "{text}");

    let server = KANDEV.start(home.path());
    let out = KANDEV
        .command()
        .args(["doctor", "--min-free-mib", "1", "--home"])
        .arg(home.path())
        .args(["--addr", &server.addr()])
        .output()
        .unwrap();
    let text = said(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("a Kandev server (0."), "its port is the running server's: {text}");
    server.terminate();
}

#[tokio::test]
async fn i43_a4_without_git_doctor_says_to_install_it() {
    let home = made_home();
    let mut command = KANDEV.command();
    command.env("PATH", "/nonexistent");
    let out = doctor_with(command, home.path(), &["--min-free-mib", "1"]);
    assert!(!out.status.success());
    let text = said(&out);
    assert!(text.contains("PROBLEM git: git is not found on PATH: install it"), "{text}");
}

#[tokio::test]
async fn i43_a4_an_agent_a_profile_uses_that_is_missing_is_named_with_its_install_line() {
    let home = tempfile::tempdir().unwrap();
    let server = KANDEV.start(home.path());
    let profile =
        json!({"name": "Claude here", "kind": "claude", "command": "kandev-no-such-agent"});
    call(&server, "agent.profile.create", profile).await;
    server.terminate();
    let out = doctor(home.path(), &["--min-free-mib", "1"]);
    assert!(!out.status.success());
    let text = said(&out);
    assert!(
        text.contains(
            "PROBLEM agent claude: kandev-no-such-agent (profile \"Claude here\") is not \
             installed: install it in Settings → Agent profiles, or run `npm install -g \
             @agentclientprotocol/claude-agent-acp`"
        ),
        "{text}"
    );
}

/// `kandev doctor` in a user and mount namespace of its own where `home` is `mount` (a
/// tmpfs or a read-only bind mount made by `setup`, a shell line run first).
fn doctor_in_namespace(home: &Path, setup: &str) -> Output {
    let script = format!(
        "set -e; {setup}; exec \"$0\" doctor --home \"$1\" --addr \"$2\" --min-free-mib \"$3\""
    );
    Command::new("unshare")
        .args(["--map-root-user", "--mount", "sh", "-c", &script])
        .arg(KANDEV.path())
        .arg(home)
        .arg(free_addr())
        .arg("16")
        .output()
        .expect("unshare (util-linux) runs")
}

#[test]
fn i43_a4_a_full_disk_is_a_problem_that_says_to_free_space() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    // A 32 MiB file system, filled up.
    let setup = format!(
        "mount -t tmpfs -o size=32m tmpfs '{h}'; dd if=/dev/zero of='{h}/fill' bs=1M 2>/dev/null || true",
        h = home.display()
    );
    let out = doctor_in_namespace(&home, &setup);
    assert!(!out.status.success(), "{}", said(&out));
    let text = said(&out);
    assert!(text.contains("PROBLEM disk: only 0 MiB free where the home is"), "{text}");
    assert!(text.contains("free some space"), "{text}");
}

#[test]
fn i43_a4_an_unwritable_home_is_a_problem_that_says_how_to_fix_it() {
    let home = made_home();
    let h = home.path().display();
    let setup = format!("mount --bind '{h}' '{h}'; mount -o remount,bind,ro '{h}'");
    let out = doctor_in_namespace(home.path(), &setup);
    assert!(!out.status.success(), "{}", said(&out));
    let text = said(&out);
    assert!(text.contains(&format!("PROBLEM home: cannot write in {h}")), "{text}");
    assert!(text.contains("chmod 700"), "{text}");
}

#[tokio::test]
async fn i43_a4_a_database_of_a_newer_kandev_is_a_problem_naming_both_versions() {
    let home = tempfile::tempdir().unwrap();
    let location = Location::File(home.path().join("kandev.db"));
    let versions = fixture::versions(Dialect::Sqlite).await.unwrap();
    fixture::create(&location, *versions.last().unwrap()).await.unwrap();
    // Opened once by this kandev (records its version), then as a newer one left it.
    KANDEV.start(home.path()).terminate();
    fixture::as_if_newer(&location, "99.1.0").await.unwrap();
    let out = doctor(home.path(), &["--min-free-mib", "1"]);
    assert!(!out.status.success());
    let text = said(&out);
    let this = env!("CARGO_PKG_VERSION");
    assert!(
        text.contains(&format!(
            "PROBLEM database: this database was last used by kandev 99.1.0, newer than this \
             kandev {this}"
        )) && text.contains("run kandev 99.1.0 or newer"),
        "{text}"
    );
}
