//! Integration tests of local process supervision, driving real `sh` processes.

use std::time::{Duration, Instant};

use kandev_runtime::{
    AgentProcess, AgentStdio, ExitInfo, ProcessSpec, RuntimeError, group_alive, kill_group, spawn,
};
use kandev_testkit::eventually_within;
use nix::errno::Errno;
use nix::sys::signal::kill;
use nix::unistd::{Pid, getpgid};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::ChildStdout;
use tokio::time::timeout;

/// Upper bound for anything that should happen promptly.
const DEADLINE: Duration = Duration::from_secs(10);

fn sh(script: &str) -> ProcessSpec {
    ProcessSpec::new("sh", std::env::temp_dir()).args(["-c", script])
}

fn start(spec: ProcessSpec) -> (AgentProcess, AgentStdio) {
    let mut process = spawn(spec).expect("spawn sh");
    let stdio = process.take_stdio().expect("stdio present");
    (process, stdio)
}

async fn next_line(lines: &mut Lines<BufReader<ChildStdout>>) -> String {
    timeout(DEADLINE, lines.next_line())
        .await
        .expect("a line within the deadline")
        .expect("read stdout")
        .expect("stdout not closed")
}

/// A process is gone once `kill(pid, 0)` fails with `ESRCH`. A zombie has already been
/// killed and only waits for its (new) parent to reap it, so it counts as gone too; the
/// reaping of orphans is up to init and not under the test's control.
fn pid_gone(pid: i32) -> bool {
    match kill(Pid::from_raw(pid), None) {
        Err(Errno::ESRCH) => true,
        _ => std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|stat| {
                let after_comm = stat.rsplit_once(')')?.1.trim_start().to_owned();
                after_comm.chars().next()
            })
            .is_some_and(|state| state == 'Z' || state == 'X'),
    }
}

/// The group `pgid` has no running member: it is empty, or only zombies (orphans waiting
/// for init to reap them) are left.
fn group_gone(pgid: i32) -> bool {
    if !group_alive(pgid) {
        return true;
    }
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| {
                    let fields: Vec<String> =
                        stat.rsplit_once(')')?.1.split_whitespace().map(str::to_owned).collect();
                    // After the command: state, ppid, pgrp.
                    Some(fields.get(2)?.parse::<i32>().ok()? == pgid)
                })
                .unwrap_or(false)
        })
        .all(pid_gone)
}

#[tokio::test]
async fn stdin_and_stdout_are_piped() {
    let (process, AgentStdio { mut stdin, stdout }) = start(ProcessSpec::new("cat", "/"));
    let mut lines = BufReader::new(stdout).lines();

    stdin.write_all(b"hello agent\n").await.unwrap();
    stdin.flush().await.unwrap();
    assert_eq!(next_line(&mut lines).await, "hello agent");

    drop(stdin);
    let exit = timeout(DEADLINE, process.wait()).await.unwrap();
    assert_eq!(exit, ExitInfo::Exited { code: 0 });
    assert!(exit.success());
}

#[tokio::test]
async fn env_is_inherited_or_cleared() {
    let (process, AgentStdio { stdout, .. }) =
        start(sh(r#"echo "$KANDEV_TEST_VAR|${HOME:+home-set}""#).env("KANDEV_TEST_VAR", "value"));
    let mut lines = BufReader::new(stdout).lines();
    assert_eq!(next_line(&mut lines).await, "value|home-set");
    timeout(DEADLINE, process.wait()).await.unwrap();

    // With a cleared environment only the given variables exist (sh is found by its path).
    let spec = ProcessSpec::new("/bin/sh", "/")
        .args(["-c", r#"echo "$KANDEV_TEST_VAR|${HOME:-no-home}""#])
        .env("KANDEV_TEST_VAR", "only")
        .clear_env();
    let (process, AgentStdio { stdout, .. }) = start(spec);
    let mut lines = BufReader::new(stdout).lines();
    assert_eq!(next_line(&mut lines).await, "only|no-home");
    timeout(DEADLINE, process.wait()).await.unwrap();
}

#[tokio::test]
async fn runs_in_its_own_process_group() {
    let (process, _stdio) = start(sh("sleep 1000"));
    assert_eq!(process.pgid(), process.pid());
    assert_eq!(getpgid(Some(Pid::from_raw(process.pid()))).unwrap().as_raw(), process.pid());
    assert_ne!(process.pgid(), nix::unistd::getpgrp().as_raw());
    process.stop(Duration::from_millis(200)).await;
}

#[tokio::test]
async fn stderr_ring_keeps_only_the_tail() {
    let script = r#"i=0; while [ $i -lt 5000 ]; do echo "line $i" >&2; i=$((i+1)); done"#;
    let (process, _stdio) = start(sh(script).stderr_limit(1024));

    timeout(DEADLINE, process.wait()).await.unwrap();
    timeout(DEADLINE, process.stderr_finished()).await.unwrap();

    let tail = process.stderr_tail();
    assert!(tail.len() <= 1024, "tail has {} bytes", tail.len());
    assert!(tail.len() > 900, "tail has only {} bytes", tail.len());
    assert!(tail.ends_with("line 4998\nline 4999\n"), "tail: {tail:?}");
    assert!(tail.starts_with("line "), "tail starts mid-line: {tail:?}");
    assert!(!tail.contains("line 0\n"));
}

#[tokio::test]
async fn stderr_ring_default_limit_is_64_kib() {
    // About 150 KiB of stderr.
    let script =
        r#"i=0; while [ $i -lt 10000 ]; do echo "stderr line number $i" >&2; i=$((i+1)); done"#;
    let (process, _stdio) = start(sh(script));

    timeout(DEADLINE, process.wait()).await.unwrap();
    timeout(DEADLINE, process.stderr_finished()).await.unwrap();

    let tail = process.stderr_tail();
    assert!(tail.len() <= 64 * 1024);
    assert!(tail.len() > 60 * 1024);
    assert!(tail.ends_with("stderr line number 9999\n"));
}

#[tokio::test]
async fn missing_program_is_a_readable_not_found_error() {
    let err = spawn(ProcessSpec::new("kandev-no-such-agent-xyz", "/")).unwrap_err();
    assert!(
        matches!(err, RuntimeError::NotFound { ref program } if program == "kandev-no-such-agent-xyz")
    );
    assert_eq!(
        err.to_string(),
        "agent command `kandev-no-such-agent-xyz` was not found; install it or fix the profile's command"
    );
}

#[tokio::test]
async fn missing_cwd_is_reported_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    let err = spawn(ProcessSpec::new("sh", &missing)).unwrap_err();
    assert!(matches!(err, RuntimeError::CwdNotFound { ref cwd } if *cwd == missing));
    assert_eq!(
        err.to_string(),
        format!("working directory `{}` does not exist", missing.display())
    );

    let file = dir.path().join("file");
    std::fs::write(&file, b"").unwrap();
    let err = spawn(ProcessSpec::new("sh", &file)).unwrap_err();
    assert!(matches!(err, RuntimeError::CwdNotADirectory { .. }));
}

#[tokio::test]
async fn non_executable_program_is_permission_denied() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("agent");
    std::fs::write(&script, b"#!/bin/sh\n").unwrap();
    let err = spawn(ProcessSpec::new(&script, dir.path())).unwrap_err();
    assert!(matches!(err, RuntimeError::PermissionDenied { .. }), "got {err:?}");
}

#[tokio::test]
async fn exit_code_is_recorded() {
    let (process, _stdio) = start(sh("exit 3"));
    let exit = timeout(DEADLINE, process.wait()).await.unwrap();
    assert_eq!(exit, ExitInfo::Exited { code: 3 });
    assert_eq!(exit.to_string(), "exited with code 3");
    assert_eq!(process.try_exit_status(), Some(exit));
}

#[tokio::test]
async fn exit_signal_is_recorded() {
    let (process, _stdio) = start(sh("kill -9 $$"));
    let exit = timeout(DEADLINE, process.wait()).await.unwrap();
    assert_eq!(exit, ExitInfo::Signaled { signal: 9 });
    assert_eq!(exit.to_string(), "killed by signal 9");
}

#[tokio::test]
async fn try_exit_status_is_none_while_running() {
    let (process, _stdio) = start(sh("sleep 1000"));
    assert_eq!(process.try_exit_status(), None);
    let exit = process.stop(Duration::from_secs(5)).await;
    assert_eq!(exit, ExitInfo::Signaled { signal: 15 });
    assert_eq!(process.try_exit_status(), Some(exit));
}

#[tokio::test]
async fn l16_stop_escalates_to_kill_when_term_is_ignored() {
    let (process, AgentStdio { stdout, .. }) = start(sh("trap '' TERM; echo ready; sleep 1000"));
    let mut lines = BufReader::new(stdout).lines();
    assert_eq!(next_line(&mut lines).await, "ready");

    let grace = Duration::from_millis(200);
    let started = Instant::now();
    let exit = timeout(DEADLINE, process.stop(grace)).await.unwrap();
    let took = started.elapsed();

    assert_eq!(exit, ExitInfo::Signaled { signal: 9 });
    assert!(took >= grace, "killed before the grace ran out ({took:?})");
    assert!(took < grace + Duration::from_secs(3), "stop took {took:?}");
    eventually_within(DEADLINE, "the group is gone", async || group_gone(process.pgid())).await;
}

#[tokio::test]
async fn l16_stop_kills_a_grandchild() {
    let (process, AgentStdio { stdout, .. }) = start(sh("sleep 1000 & echo $!; wait"));
    let mut lines = BufReader::new(stdout).lines();
    let grandchild: i32 = next_line(&mut lines).await.parse().unwrap();
    assert!(!pid_gone(grandchild));

    let exit = timeout(DEADLINE, process.stop(Duration::from_secs(5))).await.unwrap();
    assert_eq!(exit, ExitInfo::Signaled { signal: 15 });
    // Not eventually: a signal is delivered asynchronously, and stop returns only once the
    // whole group is gone (a flaky `session_stop_leaves_no_agent_process_behind` under load).
    assert!(pid_gone(grandchild), "the grandchild is gone when stop returns");
    assert!(group_gone(process.pgid()), "the group is gone when stop returns");
}

#[tokio::test]
async fn l16_stop_kills_a_grandchild_that_outlives_the_leader() {
    // The grandchild ignores TERM; the leader dies of it at once. The grandchild prints its
    // pid only after installing the trap, so TERM cannot arrive earlier.
    let script = r#"sh -c 'trap "" TERM; echo $$; exec sleep 1000' & wait"#;
    let (process, AgentStdio { stdout, .. }) = start(sh(script));
    let mut lines = BufReader::new(stdout).lines();
    let grandchild: i32 = next_line(&mut lines).await.parse().unwrap();

    let started = Instant::now();
    let exit = timeout(DEADLINE, process.stop(Duration::from_secs(30))).await.unwrap();
    assert_eq!(exit, ExitInfo::Signaled { signal: 15 });
    // The leader exited on TERM, so stop must not have waited for the grace to run out.
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(pid_gone(grandchild), "the grandchild is gone when stop returns");
}

#[tokio::test]
async fn stop_after_exit_returns_the_recorded_status() {
    let (process, _stdio) = start(sh("exit 7"));
    timeout(DEADLINE, process.wait()).await.unwrap();
    let exit = timeout(DEADLINE, process.stop(Duration::from_millis(200))).await.unwrap();
    assert_eq!(exit, ExitInfo::Exited { code: 7 });
}

#[tokio::test]
async fn drop_kills_the_group() {
    let (process, AgentStdio { stdout, .. }) = start(sh("sleep 1000 & echo $!; wait"));
    let mut lines = BufReader::new(stdout).lines();
    let grandchild: i32 = next_line(&mut lines).await.parse().unwrap();
    let leader = process.pid();

    drop(process);

    eventually_within(DEADLINE, "the grandchild is gone", async || pid_gone(grandchild)).await;
    eventually_within(DEADLINE, "the leader is gone", async || pid_gone(leader)).await;
    eventually_within(DEADLINE, "the group is gone", async || group_gone(leader)).await;
}

#[tokio::test]
async fn group_alive_and_kill_group_handle_a_recorded_pgid() {
    let (process, AgentStdio { stdout, .. }) = start(sh("sleep 1000 & echo $!; wait"));
    let mut lines = BufReader::new(stdout).lines();
    let grandchild: i32 = next_line(&mut lines).await.parse().unwrap();
    let pgid = process.pgid();
    assert!(group_alive(pgid));
    assert!(!group_gone(pgid));

    kill_group(pgid).unwrap();
    let exit = timeout(DEADLINE, process.wait()).await.unwrap();
    assert_eq!(exit, ExitInfo::Signaled { signal: 9 });
    eventually_within(DEADLINE, "the grandchild is gone", async || pid_gone(grandchild)).await;
    eventually_within(DEADLINE, "the group is gone", async || group_gone(pgid)).await;

    // A group whose only member was reaped by us is reported dead by `group_alive` itself.
    let (process, _stdio) = start(sh("exec sleep 1000"));
    let pgid = process.pgid();
    assert!(group_alive(pgid));
    kill_group(pgid).unwrap();
    assert_eq!(timeout(DEADLINE, process.wait()).await.unwrap(), ExitInfo::Signaled { signal: 9 });
    assert!(!group_alive(pgid));

    // Killing a group that no longer exists is not an error.
    kill_group(pgid).unwrap();
}

#[test]
fn group_helpers_refuse_dangerous_pgids() {
    for pgid in [0, 1, -1] {
        assert!(!group_alive(pgid));
        let err = kill_group(pgid).unwrap_err();
        assert!(matches!(err, RuntimeError::ForbiddenProcessGroup { .. }));
    }
    let own = nix::unistd::getpgrp().as_raw();
    assert!(matches!(kill_group(own), Err(RuntimeError::ForbiddenProcessGroup { .. })));
}

#[test]
fn agent_process_can_be_shared_across_tasks() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<AgentProcess>();
}

/// Issue 12, finding 5: an agent that prints its environment to stderr does not get the
/// spec's env values into the tail Kandev shows, and `Debug` of a spec hides them.
#[tokio::test]
async fn i12_f5_stderr_tail_and_debug_never_show_env_values() {
    let secret = "sk-kandev-test-7f3a9c1e5b2d4f60";
    let spec = sh(r#"echo "starting with OPENAI_API_KEY=$OPENAI_API_KEY" >&2; env >&2"#)
        .env("OPENAI_API_KEY", secret)
        .env("SHORT", "abc");
    let shown = format!("{spec:?}");
    assert!(shown.contains("OPENAI_API_KEY") && !shown.contains(secret), "{shown}");
    let (process, _stdio) = start(spec);
    timeout(DEADLINE, process.wait()).await.unwrap();
    timeout(DEADLINE, process.stderr_finished()).await.unwrap();
    let tail = process.stderr_tail();
    assert!(tail.contains("starting with OPENAI_API_KEY=[redacted]"), "{tail}");
    assert!(!tail.contains(secret) && !tail.contains("7f3a9c1e"), "{tail}");
    assert!(tail.contains("SHORT=abc"), "values under 4 characters are left alone: {tail}");
}
