//! Issue 19: commands run with their output kept ([`kandev_runtime::terminal`]): merged
//! output, exit codes and signals, a bounded tail, confined working directories, and a kill
//! that leaves nothing of the group.

use std::os::unix::fs::symlink;

use kandev_runtime::confine::{PathError, Root};
use kandev_runtime::terminal::{CommandSpec, run_command};

fn sh(line: &str, limit: usize) -> CommandSpec {
    CommandSpec {
        program: "sh".into(),
        args: vec!["-c".into(), line.into()],
        env: vec![("GREETING".into(), "hello".into())],
        output_limit: limit,
    }
}

#[tokio::test]
async fn i19_a1_output_of_both_streams_and_the_exit_code_are_kept() {
    let dir = tempfile::tempdir().unwrap();
    let root = Root::open(dir.path()).unwrap();
    let terminal =
        run_command(&sh("echo $GREETING; echo oops >&2; echo \"$PWD\"; exit 3", 1024), &root)
            .unwrap();
    let exit = terminal.wait().await;
    assert_eq!((exit.exit_code, exit.signal), (Some(3), None));
    let output = terminal.output();
    assert_eq!(output.output, format!("hello\noops\n{}\n", dir.path().display()));
    assert!(!output.truncated);
}

#[tokio::test]
async fn i19_a1_a_kill_ends_the_whole_group_and_reports_the_signal() {
    let dir = tempfile::tempdir().unwrap();
    let root = Root::open(dir.path()).unwrap();
    let terminal = run_command(&sh("sleep 600 & sleep 600; echo never", 1024), &root).unwrap();
    terminal.kill().await;
    let exit = terminal.wait().await;
    assert_eq!((exit.exit_code, exit.signal.as_deref()), (None, Some("SIGKILL")));
    assert_eq!(live_members(terminal.pid()), Vec::<i32>::new(), "no process of the group is left");
}

#[tokio::test]
async fn i19_a1_the_working_directory_is_the_opened_directory_even_through_an_inside_link() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("real")).unwrap();
    symlink("real", dir.path().join("alias")).unwrap();
    let outside = tempfile::tempdir().unwrap();
    symlink(outside.path(), dir.path().join("escape")).unwrap();
    let root = Root::open(dir.path()).unwrap();
    let alias = root.subdir(&root.agent_path("alias").unwrap()).unwrap();
    let terminal = run_command(&sh("touch made-here; pwd -P", 1024), &alias).unwrap();
    terminal.wait().await;
    assert!(dir.path().join("real/made-here").exists(), "ran in the directory the link names");
    let escape = root.subdir(&root.agent_path("escape").unwrap());
    assert!(matches!(escape, Err(PathError::Forbidden { .. })), "{escape:?}");
}

/// Live (non-zombie) processes of the group `pgid`.
fn live_members(pgid: i32) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let Some((_, rest)) = stat.rsplit_once(')') else { return false };
            let mut fields = rest.split_whitespace();
            let state = fields.next();
            let pgrp = fields.nth(1).and_then(|p| p.parse::<i32>().ok());
            pgrp == Some(pgid) && state != Some("Z") && state != Some("X")
        })
        .collect()
}
