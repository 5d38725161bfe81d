//! Issue 20 acceptance 3: a task whose repository uses an SSH executor (a real OpenSSH
//! server, kandev_testkit::sshd; the "build host" is this machine with a temp remote home) runs a
//! whole session through the real `kandev serve`: the worktree is made on the build host, the
//! mock agent runs there (the remote copy of the binary) under the SSH connection, writes a
//! file, and the diff and commit actions act on the remote worktree; archiving removes it.
//! R7 at session level: the SSH connection dropped five times during a streaming turn loses
//! and duplicates nothing in the transcript.

#![allow(clippy::disallowed_methods, reason = "tests spawn tasks and start processes freely")]

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use kandev_mock_agent::script::stream_chunk_text;
use kandev_mock_agent::{CallKind, Counters};
use serde_json::{Value, json};

mod support;

use kandev_testkit::git::git;
use kandev_testkit::sshd::Sshd;
use support::{
    DEADLINE, KANDEV, Server, Watch, agent_text, call, eventually, messages, process_argvs,
    state as session_state, try_call, turn_done,
};

/// The `ssh` client processes carrying the link to the runner of `remote_home`.
fn ssh_clients(remote_home: &Path) -> Vec<u32> {
    let socket = format!("runner --stdio --socket '{}/runner.sock'", remote_home.display());
    process_argvs(&socket)
        .into_iter()
        .filter(|(_, argv)| argv.first().is_some_and(|a| a == "ssh"))
        .map(|(pid, _)| pid)
        .collect()
}

/// A server, a build host, and a task whose one repository (a local git repository with a
/// commit on `main`) uses the SSH executor; its session is launched.
struct Setup {
    sshd: Sshd,
    home: tempfile::TempDir,
    remote: tempfile::TempDir,
    repo: tempfile::TempDir,
    server: Server,
    repository: Value,
    task: String,
    session: String,
}

async fn setup() -> Setup {
    let sshd = Sshd::start();
    let home = tempfile::tempdir().unwrap();
    let remote = tempfile::tempdir().unwrap();
    let repo = kandev_testkit::remote_task::project_repo();
    let server = KANDEV.start(home.path());
    let kandev_testkit::remote_task::RemoteTask { repository, task, session } =
        kandev_testkit::remote_task::launch(&server, &sshd, remote.path(), repo.path()).await;
    Setup { sshd, home, remote, repo, server, repository, task, session }
}

#[tokio::test]
async fn i20_a3_a_task_on_an_ssh_executor_runs_a_whole_session_on_the_build_host() {
    let Setup { sshd, home, remote, repo, server, repository, task, session } = setup().await;
    let worktree = remote.path().join("worktrees").join(&task).join("project");
    let script = "#!mock\nwrite notes.txt written on the build host\\n\nsay wrote it";
    call(&server, "message.add", json!({"session_id": session, "content": script})).await;
    turn_done(&server, &session, 1).await;
    let stored = messages(&server, &session).await;
    assert!(agent_text(&stored).contains("wrote it"), "{stored:#?}");
    assert!(!agent_text(&stored).contains("failed"), "{stored:#?}");

    // The session works in the remote worktree; nothing of the task is on the server's side.
    let got = call(&server, "session.get", json!({"id": session})).await;
    let cwd = got["session"]["cwd"].as_str().unwrap();
    assert_eq!(Path::new(cwd), worktree.canonicalize().unwrap(), "{got}");
    assert_eq!(
        std::fs::read_to_string(worktree.join("notes.txt")).unwrap(),
        "written on the build host\n"
    );
    assert!(!home.path().join("worktrees").join(&task).exists(), "no local worktree");
    assert_eq!(git(repo.path(), &["branch", "--list", "--format=%(refname:short)"]), "main");

    // The agent runs under the SSH connection, as the build host's copy of kandev.
    let remote_kandev = remote.path().join("bin/kandev").canonicalize().unwrap();
    let agents = process_argvs(&format!("{} mock-agent", remote_kandev.display()));
    assert_eq!(agents.len(), 1, "one agent on the build host: {agents:?}");
    let exe = std::fs::read_link(format!("/proc/{}/exe", agents[0].0)).unwrap();
    assert_eq!(exe, remote_kandev, "the agent is the remote copy");
    assert!(!ssh_clients(remote.path()).is_empty(), "the link is an ssh client");

    // The diff shows the file; the commit lands in the remote worktree.
    let changes = call(&server, "task.changes", json!({"task_id": task})).await;
    let files = changes["files"].as_array().unwrap();
    let paths: Vec<&str> = files.iter().map(|f| f["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["notes.txt"], "{changes}");
    assert_eq!(files[0]["status"], "untracked", "{changes}");
    let read = call(&server, "task.file.read", json!({"task_id": task, "path": "notes.txt"})).await;
    assert_eq!(read["content"], "written on the build host\n", "{read}");
    let committed =
        call(&server, "task.commit", json!({"task_id": task, "message": "add the notes"})).await;
    let sha = committed["commits"][0]["sha"].as_str().unwrap().to_owned();
    assert_eq!(git(&worktree, &["log", "-1", "--format=%H %s"]), format!("{sha} add the notes"));
    assert_eq!(git(&worktree, &["status", "--porcelain"]), "", "everything committed");
    let branches = git(repo.path(), &["branch", "--list", "--format=%(refname:short)"]);
    assert_eq!(branches, "main", "no branch of the server's repository changes by itself");
    let changes = call(&server, "task.changes", json!({"task_id": task})).await;
    assert_eq!(changes["files"][0]["status"], "added", "committed work stays visible: {changes}");

    // Issue 20 scope 3, bringing the work back: the git status of the remote worktree
    // fetches the task branch into the server's repository (beside its branches) and reads
    // it there, with the build host's uncommitted files; the card gets it too.
    let branch = git(&worktree, &["rev-parse", "--abbrev-ref", "HEAD"]);
    std::fs::write(
        worktree.join("scratch.txt"),
        "not committed
",
    )
    .unwrap();
    let status = call(&server, "task.git_status", json!({"task_id": task})).await;
    let one = &status["repositories"][0];
    assert_eq!((one["branch"].as_str(), one["head"].as_str()), (Some(&*branch), Some(&*sha)));
    assert_eq!((one["ahead"].as_u64(), one["behind"].as_u64()), (Some(1), Some(0)), "{status}");
    assert_eq!(one["dirty"]["files"], json!(["scratch.txt"]), "{status}");
    assert_eq!(git(repo.path(), &["rev-parse", &format!("refs/kandev/incoming/{branch}")]), sha);
    let branches = git(repo.path(), &["branch", "--list", "--format=%(refname:short)"]);
    assert_eq!(branches, "main", "a status makes no branch");
    let card = call(&server, "task.get", json!({"id": task})).await;
    assert_eq!(card["task"]["git"]["ahead"], 1, "{card}");
    assert_eq!(card["task"]["git"]["dirty"], 1, "{card}");
    std::fs::remove_file(worktree.join("scratch.txt")).unwrap();

    // The base moves on the server: a rebase runs on the build host onto it (pushed there
    // first), and the rebased branch comes back as the branch of the server's repository.
    std::fs::write(repo.path().join("base.txt"), "moved on\n").unwrap();
    git(repo.path(), &["add", "-A"]);
    git(repo.path(), &["commit", "-q", "-m", "the base moved"]);
    let status = call(&server, "task.git_status", json!({"task_id": task})).await;
    assert_eq!(status["repositories"][0]["behind"], 1, "{status}");
    let rebased = call(&server, "task.rebase", json!({"task_id": task})).await;
    let one = &rebased["repositories"][0];
    assert_eq!((one["ahead"].as_u64(), one["behind"].as_u64()), (Some(1), Some(0)), "{rebased}");
    let head = one["head"].as_str().unwrap().to_owned();
    assert_eq!(git(&worktree, &["rev-parse", "HEAD"]), head, "rebased on the build host");
    assert_eq!(std::fs::read_to_string(worktree.join("base.txt")).unwrap(), "moved on\n");
    assert_eq!(git(repo.path(), &["rev-parse", &format!("refs/heads/{branch}")]), head);

    // Pushed from the server's repository to its origin (a local bare repository), and
    // merged into the base there.
    let origin = tempfile::tempdir().unwrap();
    git(origin.path(), &["init", "-q", "--bare"]);
    git(repo.path(), &["remote", "add", "origin", origin.path().to_str().unwrap()]);
    let pushed = call(&server, "task.push", json!({"task_id": task})).await;
    assert_eq!(pushed["pushed"][0]["head"], head.as_str(), "{pushed}");
    assert_eq!(git(origin.path(), &["rev-parse", &format!("refs/heads/{branch}")]), head);
    assert_eq!(pushed["repositories"][0]["remote"]["upstream_ahead"], 0, "{pushed}");
    let merged =
        call(&server, "task.merge", json!({"task_id": task, "strategy": "fast_forward"})).await;
    assert_eq!(merged["merged"][0]["commit"], head.as_str(), "{merged}");
    assert_eq!(git(repo.path(), &["rev-parse", "main"]), head);
    assert_eq!(
        std::fs::read_to_string(repo.path().join("notes.txt")).unwrap(),
        "written on the build host\n",
        "the agent's work is in the server's checkout"
    );

    // The worktree stays where it was made: once the repository runs locally, a new session
    // of the task is refused with what to do, and nothing is made locally.
    call(
        &server,
        "repository.executor.set",
        json!({"repository_id": repository, "executor_id": null}),
    )
    .await;
    let refused = try_call(&server, "session.launch", json!({"task_id": task})).await;
    let Err(support::CallError::Refused { status: 409, body }) = refused else {
        panic!("a launch on the local machine is refused (409): {refused:?}")
    };
    assert!(body.to_string().contains("remove the task's worktrees"), "{body}");
    assert!(!home.path().join("worktrees").join(&task).exists(), "no local worktree");

    // Archiving stops the agent and removes the remote worktree; its branch stays there.
    let archived = call(&server, "task.archive", json!({"id": task})).await;
    assert_eq!(archived["worktrees_kept"], json!([]), "{archived}");
    assert!(!worktree.exists(), "the remote worktree is removed");
    assert!(!worktree.parent().unwrap().exists(), "and the task's folder there");
    let agent = format!("{} mock-agent", remote_kandev.display());
    eventually("the agent to be stopped", async || process_argvs(&agent).is_empty()).await;
    drop(server);
    drop(sshd);
}

#[tokio::test]
async fn i20_a3_r7_the_ssh_connection_dropped_five_times_mid_turn_loses_nothing() {
    const DROPS: usize = 5;
    const CHUNKS: u64 = 600;
    const BYTES: usize = 24;
    let Setup { sshd, home: _home, remote, repo: _repo, server, session, .. } = setup().await;
    let script = format!("#!mock\nstream {CHUNKS} {BYTES} every 20");
    call(&server, "message.add", json!({"session_id": session, "content": script})).await;
    let mut killed = vec![];
    for drop in 0..DROPS {
        // Some text streamed since the last drop, and the turn still runs.
        let want = BYTES * 20 * (drop + 1);
        let (mut text, mut clients) = (0, vec![]);
        let client = kandev_testkit::wait::poll(DEADLINE, async || {
            text = agent_text(&messages(&server, &session).await).len();
            clients =
                ssh_clients(remote.path()).into_iter().filter(|p| !killed.contains(p)).collect();
            (text >= want && clients.len() == 1).then(|| clients[0])
        })
        .await;
        let Some(client) = client else {
            panic!(
                "drop {drop}: {text} bytes, clients {clients:?}, session {}: {:#}\nlog: {}",
                session_state(&server, &session).await,
                Value::Array(messages(&server, &session).await),
                server.log_tail(200)
            );
        };
        assert_eq!(session_state(&server, &session).await, "RUNNING", "drop {drop} is mid-turn");
        let status = Command::new("kill").arg("-KILL").arg(client.to_string()).status().unwrap();
        assert!(status.success());
        killed.push(client);
    }
    turn_done(&server, &session, 1).await;
    let expected: String = (0..CHUNKS).map(|i| stream_chunk_text(i, BYTES)).collect();
    let stored = messages(&server, &session).await;
    assert_eq!(agent_text(&stored), expected, "every chunk once, in order");
    let turns = call(&server, "session.turn.list", json!({"session_id": session})).await;
    let turns = turns["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 1, "one turn");
    assert_eq!(turns[0]["stop_reason"], "end_turn");
    assert_eq!(killed.len(), DROPS);
    drop(server);
    drop(sshd);
}

/// The building blocks under the session test, against the same real sshd: a bare copy of a
/// repository is made on the build host and the base branch pushed into it with git's ssh
/// transport and the executor's options; each worktree operation runs there through the
/// link (also right after the connection dropped), and failures keep their meaning.
#[tokio::test]
async fn i20_a3_worktree_operations_run_on_the_build_host_through_the_link() {
    use kandev_runtime::git::{self, GitError, OnExistingBranch, WorktreeSpec};
    use kandev_runtime::runner::ssh::{Backoff, SshRunner, connect_link};
    use kandev_runtime::site::{RemoteErrorKind, RemoteSite, Site};

    let sshd = Sshd::start();
    let remote = tempfile::tempdir().unwrap();
    let repo = kandev_testkit::git::repo_with(&[("a.txt", "one\n")]);
    let settings = sshd.settings(remote.path());
    let runner = SshRunner::new(settings.clone(), KANDEV.path().into(), Duration::from_secs(60));
    let (link, _) =
        tokio::time::timeout(DEADLINE, connect_link(runner.clone(), Backoff::default()))
            .await
            .unwrap()
            .unwrap();
    let site = Site::Remote(RemoteSite::new(link.clone(), &settings.remote_home, "build1"));

    let bare = remote.path().join("repos/r1.git");
    site.init_bare(&bare).await.unwrap();
    site.init_bare(&bare).await.unwrap(); // again: already one
    let full = git::full_ref_name(repo.path(), "main").await.unwrap().unwrap();
    assert_eq!(full, "refs/heads/main");
    let url = runner.git_url(&bare.display().to_string());
    git::push_over_ssh(repo.path(), &url, &[full], &runner.git_ssh_command()).await.unwrap();
    assert_eq!(git(&bare, &["rev-parse", "main"]), git(repo.path(), &["rev-parse", "main"]));

    let path = remote.path().join("worktrees/t1/project");
    let spec = WorktreeSpec {
        repo_path: bare.clone(),
        base_branch: "main".into(),
        branch: "task-1".into(),
        existing: OnExistingBranch::PickAnother,
        worktree_path: path.clone(),
    };
    let made = site.create_worktree(&spec).await.unwrap();
    assert_eq!(made.path, path.canonicalize().unwrap());
    assert_eq!(made.branch, "task-1");
    assert!(site.exists(&path).await.unwrap());
    assert_eq!(site.is_dirty(&path).await.unwrap(), 0);

    std::fs::write(path.join("a.txt"), "one\ntwo\n").unwrap();
    // The connection drops; the next operation waits for the new one.
    link.drop_transport();
    let changes = site.changes(&path, &made.base_commit).await.unwrap();
    assert_eq!(changes.len(), 1);
    assert_eq!((changes[0].path.as_str(), changes[0].additions), ("a.txt", 1));
    assert_eq!(changes[0].hunks[0].lines.last().unwrap().text, "two");
    assert_eq!(link.connections(), 2, "the operation ran on the reopened connection");
    let tree = site.tree(&path).await.unwrap();
    assert_eq!(tree.iter().map(|e| e.path.as_str()).collect::<Vec<_>>(), ["a.txt"]);
    let read = site.read_file(&path, "a.txt", 1024).await.unwrap();
    assert_eq!(read.content, "one\ntwo\n");

    let refused = site.read_file(&path, "../../../x", 1024).await.unwrap_err();
    assert!(
        matches!(refused, GitError::Remote { kind: RemoteErrorKind::Forbidden, .. }),
        "{refused:?}"
    );
    let missing = site.read_file(&path, "nope.txt", 1024).await.unwrap_err();
    assert!(
        matches!(missing, GitError::Remote { kind: RemoteErrorKind::NotFound, .. }),
        "{missing:?}"
    );

    let commit = site.commit_all(&path, "two lines").await.unwrap();
    assert_eq!(git(&path, &["log", "-1", "--format=%H"]), commit.sha);
    let nothing = site.commit_all(&path, "again").await.unwrap_err();
    assert!(
        matches!(nothing, GitError::Remote { kind: RemoteErrorKind::NothingToCommit, .. }),
        "{nothing:?}"
    );

    // The request goes on stdin: a message larger than one argument may be (128 KiB).
    std::fs::write(path.join("c.txt"), "c\n").unwrap();
    let long = "x".repeat(200 * 1024);
    let commit = site.commit_all(&path, &long).await.unwrap();
    assert_eq!(git(&path, &["log", "-1", "--format=%B"]), long);

    std::fs::write(path.join("b.txt"), "untracked\n").unwrap();
    let kept = site.remove_worktree(&bare, &path, false).await.unwrap_err();
    assert!(matches!(kept, GitError::Remote { kind: RemoteErrorKind::Conflict, .. }), "{kept:?}");
    assert!(kept.to_string().contains("uncommitted or untracked"), "{kept}");
    site.remove_worktree(&bare, &path, true).await.unwrap();
    assert!(!site.exists(&path).await.unwrap());
    assert_eq!(git(&bare, &["rev-parse", "task-1"]), commit.sha, "the branch stays");
}

/// Finding 1 of the SSH review, for an agent no session takes over: the task of a remote
/// agent left by a killed server is deleted while no server runs; the restarted server kills
/// that agent the first time it uses the executor (here: a new task's session), so no agent
/// of the old server keeps working on the build host.
#[tokio::test]
async fn i20_d7_the_remote_agent_of_a_task_deleted_while_the_server_was_down_is_killed() {
    let Setup { sshd, home, remote, repo: _repo, server, session, task, repository, .. } =
        setup().await;
    let script = "#!mock\nstream 3000 24 every 50";
    call(&server, "message.add", json!({"session_id": session, "content": script})).await;
    let remote_kandev = remote.path().canonicalize().unwrap().join("bin/kandev");
    let agent = format!("{} mock-agent", remote_kandev.display());
    eventually("the turn to run on the build host", async || {
        !process_argvs(&agent).is_empty() && session_state(&server, &session).await == "RUNNING"
    })
    .await;
    let old = process_argvs(&agent)[0].0;

    drop(server); // SIGKILL
    {
        let location = kandev_store::Location::File(home.path().join("kandev.db"));
        let store = kandev_store::Store::open(location).await.unwrap();
        let mut tx = store.begin_write().await.unwrap();
        tx.delete_task(&kandev_domain::TaskId::new(task.clone())).await.unwrap();
        tx.commit().await.unwrap();
        store.close().await;
    }
    let server = KANDEV.start(home.path());
    let workspaces = call(&server, "workspace.list", json!({})).await;
    let workspace = &workspaces["workspaces"][0]["id"];
    let workflows = call(&server, "workflow.list", json!({"workspace_id": workspace})).await;
    let board = &workflows["workflows"][0];
    let next = call(
        &server,
        "task.create",
        json!({"workflow_id": board["id"], "title": "next", "step_id": board["steps"][0]["id"],
            "repository_ids": [repository]}),
    )
    .await;
    call(&server, "session.launch", json!({"task_id": next["task"]["id"]})).await;
    let what = format!("the old remote agent {old} to be killed");
    eventually(what, async || process_argvs(&agent).iter().all(|(pid, _)| *pid != old)).await;
    drop(server);
    drop(sshd);
}

/// Issue 39 acceptance 2 (R6 on an SSH executor; lifecycle rule 42's re-adopt branch): a
/// server killed (`kill -9`) while its remote agent streams a turn leaves the agent to the
/// build host's runner; the restarted server takes it over at startup. The turn completes
/// once: every chunk once, in order, in one message, no "interrupted" note, no
/// `session/load`, the prompt sent once, and no second agent beside the old one (no orphan);
/// the same agent answers the next message.
#[tokio::test]
async fn i39_2_r6_kill_9_mid_turn_on_an_ssh_executor_then_the_turn_completes_once() {
    const CHUNKS: u64 = 200;
    const BYTES: usize = 24;
    let Setup { sshd, home, remote, repo: _repo, server, session, .. } = setup().await;
    let script = format!("#!mock\nstream {CHUNKS} {BYTES} every 20");
    call(&server, "message.add", json!({"session_id": session, "content": script})).await;
    let remote_kandev = remote.path().canonicalize().unwrap().join("bin/kandev");
    let agent = format!("{} mock-agent", remote_kandev.display());
    // Streaming on the build host, some of it stored, far from done.
    let mut watch = Watch::sessions(&server, std::slice::from_ref(&session)).await;
    watch
        .until("the turn to stream on the build host", async || {
            agent_text(&messages(&server, &session).await).len() >= BYTES * 20
        })
        .await;
    drop(watch);
    let agents = process_argvs(&agent);
    assert_eq!(agents.len(), 1, "{agents:?}");
    let old = agents[0].0;

    drop(server); // SIGKILL
    let server = KANDEV.start(home.path());
    assert_eq!(session_state(&server, &session).await, "RUNNING", "taken over mid-turn");
    turn_done(&server, &session, 1).await;
    let stored = messages(&server, &session).await;
    let expected: String = (0..CHUNKS).map(|i| stream_chunk_text(i, BYTES)).collect();
    assert_eq!(agent_text(&stored), expected, "every chunk once, in order");
    assert_eq!(stored.iter().filter(|m| m["kind"] == "agent").count(), 1, "one agent message");
    let interrupted = stored.iter().any(|m| {
        m["kind"] == "status" && m["content"].as_str().unwrap_or("").starts_with("interrupted")
    });
    assert!(!interrupted, "no interrupted note: {:#}", Value::Array(stored.clone()));
    let turns = call(&server, "session.turn.list", json!({"session_id": session})).await;
    assert_eq!(turns["turns"].as_array().unwrap().len(), 1);
    assert_eq!(turns["turns"][0]["stop_reason"], "end_turn");
    let counters = Counters::read(&remote.path().join("mock-agent")).unwrap();
    assert_eq!(counters.count(CallKind::Load), 0, "no session/load");
    assert_eq!(counters.count(CallKind::Prompt), 1, "the prompt was sent once");
    let pids: Vec<u32> = process_argvs(&agent).into_iter().map(|(pid, _)| pid).collect();
    assert_eq!(pids, vec![old], "the old agent, and no other");

    call(&server, "message.add", json!({"session_id": session, "content": "are you back"})).await;
    turn_done(&server, &session, 2).await;
    let stored = messages(&server, &session).await;
    assert!(stored.iter().any(|m| m["content"] == "echo: are you back"), "{stored:#?}");
    let pids: Vec<u32> = process_argvs(&agent).into_iter().map(|(pid, _)| pid).collect();
    assert_eq!(pids, vec![old], "the same agent answered");
    drop(server);
    drop(sshd);
}
