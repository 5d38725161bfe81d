//! Issue 19: a user's shell in a PTY ([`kandev_runtime::pty`]): it runs in the given
//! directory, its output is replayed from any offset, resizes reach it, and a kill ends its
//! whole session, background jobs included.

use std::time::Duration;

use kandev_runtime::confine::Root;
use kandev_runtime::pty::{PtyShell, ShellSpec, spawn_shell};
use kandev_runtime::session_members;
use kandev_testkit::eventually_within;

fn spec(cols: u16, rows: u16) -> ShellSpec {
    ShellSpec {
        program: "sh".into(),
        args: vec![],
        env: vec![("GREETING".into(), "hello".into())],
        cols,
        rows,
    }
}

/// Everything the shell printed so far.
fn screen(shell: &PtyShell) -> String {
    let mut text = Vec::new();
    let mut offset = 0;
    loop {
        let chunk = shell.read_since(offset);
        if chunk.data.is_empty() {
            return String::from_utf8_lossy(&text).into_owned();
        }
        text.extend_from_slice(&chunk.data);
        offset = chunk.next;
    }
}

/// Waits (bounded) until the output contains `needle`.
async fn wait_for(shell: &PtyShell, needle: &str) -> String {
    let mut changes = shell.changes();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let text = screen(shell);
        if text.contains(needle) {
            return text;
        }
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let changed = tokio::time::timeout(left, changes.changed()).await;
        assert!(matches!(changed, Ok(Ok(()))), "never printed {needle:?}; printed: {text}");
    }
}

#[tokio::test]
async fn i19_a2_a_shell_runs_in_its_directory_with_its_size_and_is_killed_with_its_jobs() {
    let dir = tempfile::tempdir().unwrap();
    let root = Root::open(dir.path()).unwrap();
    let shell = spawn_shell(&spec(100, 30), &root).unwrap();
    shell.write(b"echo \"at:$PWD:$GREETING\"\n".to_vec()).await.unwrap();
    wait_for(&shell, &format!("at:{}:hello", dir.path().display())).await;
    shell.write(b"stty size\n".to_vec()).await.unwrap();
    wait_for(&shell, "30 100").await;
    shell.resize(120, 40).await.unwrap();
    shell.write(b"stty size\n".to_vec()).await.unwrap();
    wait_for(&shell, "40 120").await;

    // A job in the background, in a group of its own under job control or not.
    shell.write(b"set -m; sleep 600 & echo \"jo\"\"b:$!\"\n".to_vec()).await.unwrap();
    // The echoed command line reads `jo""b`: only the output says `job:`.
    let text = wait_for(&shell, "job:").await;
    let job: i32 = text
        .rsplit("job:")
        .next()
        .and_then(|rest| rest.lines().next())
        .and_then(|pid| pid.trim().parse().ok())
        .expect("the job's pid");
    let sid = shell.pid();
    assert!(session_members(sid).iter().any(|(pid, _)| *pid == job), "the job is in the session");
    shell.kill().await;
    assert!(session_members(sid).is_empty(), "nothing of the shell's session is left");
    let mut changes = shell.changes();
    tokio::time::timeout(Duration::from_secs(10), async {
        while shell.exit().is_none() {
            changes.changed().await.unwrap();
        }
    })
    .await
    .expect("the exit is told");
    let exit = shell.exit().unwrap();
    assert_eq!((exit.exit_code, exit.signal.as_deref()), (None, Some("SIGKILL")));
}

#[tokio::test]
async fn i19_a2_a_dropped_shell_leaves_no_process() {
    let dir = tempfile::tempdir().unwrap();
    let root = Root::open(dir.path()).unwrap();
    let shell = spawn_shell(&spec(80, 24), &root).unwrap();
    shell.write(b"sleep 600 &\necho started\n".to_vec()).await.unwrap();
    wait_for(&shell, "started").await;
    let sid = shell.pid();
    drop(shell);
    // The shell's session is processes this test does not own: their ends announce nothing.
    let what = "the session to end with its owner";
    eventually_within(Duration::from_secs(5), what, async || session_members(sid).is_empty()).await;
}
