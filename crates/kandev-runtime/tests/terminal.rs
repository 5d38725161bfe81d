//! Issue 19: commands run with their output kept ([`kandev_runtime::terminal`]): merged
//! output, exit codes and signals, a bounded tail, confined working directories, and a kill
//! that leaves nothing of the group.

use std::os::unix::fs::symlink;

use kandev_runtime::confine::{PathError, Root};
use kandev_runtime::group_has_live_member;
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
    assert!(!group_has_live_member(terminal.pid()), "no process of the group is left");
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
