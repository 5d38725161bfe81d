//! Issue 20, SSH executor: what a task's agent on a build host gets besides its turns — the
//! files attached to a prompt, and the repository's cleanup script when the task is archived.
//! A real OpenSSH server (kandev_testkit::sshd) and the real `kandev serve`, started where the
//! build host's remote home is hidden from it (`Kandev::start_hiding`): like a server on
//! another machine, it can reach the build host's files only through the SSH link.

use serde_json::{Value, json};

mod support;

use kandev_testkit::sshd::Sshd;
use support::{KANDEV, Server, agent_text, call, messages, turn_done};

/// A server (hiding the remote home), a build host, and a task whose one repository
/// (`project`) uses the SSH executor; its session is launched and its first turn (`hello`)
/// done, so its worktree is there.
struct Setup {
    _sshd: Sshd,
    _home: tempfile::TempDir,
    remote: tempfile::TempDir,
    _repo: tempfile::TempDir,
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
    let server = KANDEV.start_hiding(home.path(), remote.path());
    let kandev_testkit::remote_task::RemoteTask { repository, task, session } =
        kandev_testkit::remote_task::launch(&server, &sshd, remote.path(), repo.path()).await;
    let setup =
        Setup { _sshd: sshd, _home: home, remote, _repo: repo, server, repository, task, session };
    call(&setup.server, "message.add", json!({"session_id": setup.session, "content": "hello"}))
        .await;
    turn_done(&setup.server, &setup.session, 1).await;
    setup
}

/// Review finding (defect 15): a file attached to a prompt that the agent gets as a link
/// (binary, not an image) was copied on the server's host and linked as `file://`, which an
/// agent on a build host cannot open. The copy is written on the build host through the
/// link, in the remote worktree's `.kandev/attachments/`, and the agent there reads it.
#[tokio::test]
async fn i20_d15_an_attachment_linked_to_a_remote_agent_is_a_file_on_the_build_host() {
    let setup = setup().await;
    let (server, remote) = (&setup.server, setup.remote.path());
    // Binary (a NUL byte), not an image: the mock agent, which takes images and embedded
    // text, gets it as a resource_link. Large enough to take several runner frames.
    let mut bytes = b"\0KANDEV-ATTACHED".to_vec();
    bytes.extend((0..300_000u32).map(|i| (i % 251) as u8));
    let uploaded = reqwest::Client::new()
        .post(format!("{}/api/v1/attachment.upload", server.url))
        .query(&[("name", "data.bin")])
        .header("content-type", "application/octet-stream")
        .header("x-kandev-upload", "1")
        .body(bytes.clone())
        .send()
        .await
        .unwrap();
    assert!(uploaded.status().is_success(), "{}", uploaded.status());
    let attachment = uploaded.json::<Value>().await.unwrap()["attachment"].clone();
    let id = attachment["id"].as_str().unwrap().to_owned();
    let sent = call(
        server,
        "message.add",
        json!({"session_id": setup.session, "content": "look", "attachments": [attachment]}),
    )
    .await;
    assert_eq!(sent["status"], "sent", "{sent}");
    turn_done(&setup.server, &setup.session, 2).await;

    let worktree =
        remote.canonicalize().unwrap().join("worktrees").join(&setup.task).join("project");
    let copy = worktree.join(format!(".kandev/attachments/{}-data.bin", &id[..12]));
    let text = agent_text(&messages(server, &setup.session).await);
    let uri = format!("file://{}", copy.display());
    assert!(text.contains(&format!("received resource_link {uri}\n")), "{text}");
    assert!(
        text.contains(&format!(
            "read {} bytes from {uri}, starting 004b414e4445562d4154544143484544",
            bytes.len()
        )),
        "the agent on the build host reads the whole file: {text}"
    );
    assert_eq!(std::fs::read(&copy).unwrap(), bytes, "the copy is on the build host");
    let ignore = std::fs::read_to_string(worktree.join(".kandev/.gitignore")).unwrap();
    assert_eq!(ignore, "*\n", "the copies stay out of git there");
    let changes = call(server, "task.changes", json!({"task_id": setup.task})).await;
    assert_eq!(changes["files"], json!([]), "nothing to commit: {changes}");
    drop(setup);
}

/// Review finding (defect 16): archiving a task whose worktree is on a build host skipped the
/// repository's cleanup script without a word. It runs there (through the runner, in the
/// remote worktree, before the worktree is removed), and its outcome is in the transcript
/// like a local one's.
#[tokio::test]
async fn i20_d16_archiving_runs_the_cleanup_script_on_the_build_host() {
    let setup = setup().await;
    // Written where the hidden server cannot see: only a run on the build host leaves it.
    let marker = setup.remote.path().join("cleaned.txt");
    let script = format!("echo \"cleaned $PWD\" > '{}'; echo bye", marker.display());
    let update = json!({"id": setup.repository, "cleanup_script": script});
    call(&setup.server, "repository.update", update).await;
    let (server, remote) = (&setup.server, setup.remote.path());
    let worktree =
        remote.canonicalize().unwrap().join("worktrees").join(&setup.task).join("project");
    assert!(worktree.is_dir(), "the worktree is on the build host");

    let archived = call(server, "task.archive", json!({"id": setup.task})).await;
    assert_eq!(archived["worktrees_kept"], json!([]), "{archived}");
    assert!(!worktree.exists(), "the remote worktree is removed");
    let cleaned = std::fs::read_to_string(&marker)
        .unwrap_or_else(|e| panic!("the cleanup script did not run on the build host: {e}"));
    assert_eq!(cleaned, format!("cleaned {}\n", worktree.display()));
    let stored = messages(server, &setup.session).await;
    let note = stored
        .iter()
        .find(|m| m["metadata"]["reason"] == "cleanup_script")
        .unwrap_or_else(|| panic!("no note of the cleanup script: {stored:#?}"));
    assert_eq!(note["metadata"]["status"], "finished", "{note}");
    let text = note["content"].as_str().unwrap();
    assert_eq!(text, "cleanup script of project finished (exit code 0):\nbye");
    drop(setup);
}

/// Issue 44 item 4 on an SSH executor: the index, staging, committing what is staged, the
/// branch's commits and one's diff, and amending all run in the remote worktree through the
/// link (the server cannot see the build host's files).
#[tokio::test]
async fn i44_4_git_control_runs_on_the_build_host() {
    let setup = setup().await;
    let (server, task) = (&setup.server, setup.task.as_str());
    let worktree =
        setup.remote.path().canonicalize().unwrap().join("worktrees").join(task).join("project");
    std::fs::write(worktree.join("one.txt"), "one\n").unwrap();
    std::fs::write(worktree.join("two.txt"), "two\n").unwrap();

    let index = call(server, "task.index", json!({"task_id": task})).await;
    let unstaged: Vec<&str> = index["repositories"][0]["unstaged"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(unstaged, ["one.txt", "two.txt"], "{index}");
    let staged = call(server, "task.stage", json!({"task_id": task, "path": "one.txt"})).await;
    assert_eq!(staged["index"]["staged"][0]["path"], "one.txt", "{staged}");
    let made = call(
        server,
        "task.commit",
        json!({"task_id": task, "message": "only one", "staged_only": true}),
    )
    .await;
    assert_eq!(made["commit"]["files_changed"], 1, "{made}");
    let commits = call(server, "task.commits", json!({"task_id": task})).await;
    assert_eq!(commits["commits"][0]["summary"], "only one", "{commits}");
    let sha = commits["commits"][0]["sha"].as_str().unwrap();
    let diff = call(server, "task.commit.diff", json!({"task_id": task, "sha": sha})).await;
    assert_eq!(diff["files"][0]["path"], "one.txt", "{diff}");

    call(server, "task.stage", json!({"task_id": task, "path": "two.txt"})).await;
    let amended =
        call(server, "task.amend", json!({"task_id": task, "message": "one and two"})).await;
    assert_eq!(amended["commit"]["files_changed"], 2, "{amended}");
    let log = kandev_testkit::git::git(&worktree, &["log", "-1", "--format=%s"]);
    assert_eq!(log, "one and two", "amended in the remote worktree");
    drop(setup);
}
