//! Issue 6: a git worktree per task and repository, branch template, setup script, and the
//! file and git actions (`task.changes`, `task.tree`, `task.file.read`, `task.commit`), over
//! the API with the mock agent and real git repositories in temp dirs.

mod common;

use std::path::{Path, PathBuf};

use common::{TestServer, of_kind, step_id};
use kandev_testkit::git::{git, init};
use serde_json::{Value, json};

/// A repository on `main` with a local identity; `commit` adds README.md in a first commit.
fn repository(commit: bool) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    init(&repo);
    if commit {
        kandev_testkit::git::commit(&repo, &[("README.md", "hello\n")], "initial");
    }
    (tmp, repo)
}

/// The local branches of a repository.
fn branches(repo: &Path) -> Vec<String> {
    let listed = git(repo, &["for-each-ref", "--format=%(refname:short)", "refs/heads"]);
    listed.lines().map(str::to_owned).collect()
}

struct Board<'a> {
    server: &'a TestServer,
    workspace_id: String,
    workflow: Value,
}

impl<'a> Board<'a> {
    async fn new(server: &'a TestServer) -> Board<'a> {
        let (workspace_id, workflow) = server.kanban().await;
        Board { server, workspace_id, workflow }
    }

    /// Registers a repository; `extra` adds fields such as `setup_script`.
    async fn repository(&self, path: &Path, extra: Value) -> String {
        let mut body = json!({"workspace_id": self.workspace_id, "local_path": path});
        if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
            body.extend(extra.clone());
        }
        let created = self.server.call("repository.create", body).await;
        created["repository"]["id"].as_str().unwrap().to_owned()
    }

    /// A task in Backlog (nothing starts by itself).
    async fn task(&self, title: &str, repository_ids: &[&str]) -> String {
        let backlog = step_id(&self.workflow, "Backlog");
        let created = self
            .server
            .call(
                "task.create",
                json!({"workflow_id": self.workflow["id"], "title": title, "step_id": backlog,
                       "repository_ids": repository_ids}),
            )
            .await;
        created["task"]["id"].as_str().unwrap().to_owned()
    }

    /// Launches a session; returns it as the launch answered.
    async fn launch(&self, task_id: &str) -> Value {
        self.server.call("session.launch", json!({"task_id": task_id})).await["session"].clone()
    }

    /// Launches a session and waits until its agent is ready; returns (session id, cwd).
    async fn started(&self, task_id: &str) -> (String, PathBuf) {
        let session = self.launch(task_id).await;
        assert_ne!(session["state"], "FAILED", "{session}");
        let id = session["id"].as_str().unwrap().to_owned();
        self.server.wait_state(&id, "WAITING_FOR_INPUT").await;
        (id, PathBuf::from(session["cwd"].as_str().unwrap()))
    }
}

/// `{short-id}` of a task, computed independently of the runtime: FNV-1a 64 of the whole id,
/// folded to 32 bits, as eight hex digits.
fn short_id(id: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in id.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{:08x}", (hash ^ (hash >> 32)) as u32)
}

fn worktrees_root(server: &TestServer) -> PathBuf {
    server.dir.path().join("worktrees")
}

fn paths(list: &Value) -> Vec<String> {
    list.as_array().unwrap().iter().map(|e| e["path"].as_str().unwrap().to_owned()).collect()
}

#[tokio::test]
async fn i6_two_tasks_work_in_separate_worktrees_and_branches() {
    let server = TestServer::start().await;
    let board = Board::new(&server).await;
    let (_tmp, repo) = repository(true);
    let repo_id =
        board.repository(&repo, json!({"setup_script": "echo preparing the worktree"})).await;
    let task_a = board.task("Add feature A", &[&repo_id]).await;
    let task_b = board.task("Add feature B", &[&repo_id]).await;
    let ((session_a, cwd_a), (session_b, cwd_b)) =
        tokio::join!(board.started(&task_a), board.started(&task_b));

    let root = worktrees_root(&server).canonicalize().unwrap();
    assert!(cwd_a.starts_with(&root) && cwd_b.starts_with(&root), "{cwd_a:?} {cwd_b:?}");
    assert_ne!(cwd_a, cwd_b);
    let (messages_a, _) = tokio::join!(
        server.turn(&session_a, "#!mock\nwrite a.txt from task a"),
        server.turn(&session_b, "#!mock\nwrite b.txt from task b"),
    );

    assert_eq!(std::fs::read_to_string(cwd_a.join("a.txt")).unwrap(), "from task a");
    assert_eq!(std::fs::read_to_string(cwd_b.join("b.txt")).unwrap(), "from task b");
    assert!(!cwd_a.join("b.txt").exists(), "task A does not see task B's file");
    assert!(!cwd_b.join("a.txt").exists(), "task B does not see task A's file");
    let branch_a = git(&cwd_a, &["rev-parse", "--abbrev-ref", "HEAD"]);
    let branch_b = git(&cwd_b, &["rev-parse", "--abbrev-ref", "HEAD"]);
    assert!(branch_a.starts_with("kandev/add-feature-a-"), "{branch_a}");
    assert!(branch_b.starts_with("kandev/add-feature-b-"), "{branch_b}");
    assert_eq!(branch_a, format!("kandev/add-feature-a-{}", short_id(&task_a)));

    assert!(!repo.join("a.txt").exists() && !repo.join("b.txt").exists());
    assert_eq!(git(&repo, &["status", "--porcelain", "--untracked-files=all"]), "");
    assert_eq!(git(&repo, &["rev-parse", "--abbrev-ref", "HEAD"]), "main");

    let status: Vec<&str> =
        of_kind(&messages_a, "status").iter().map(|m| m["content"].as_str().unwrap()).collect();
    assert!(status.iter().any(|s| s.contains("created worktree") && s.contains(&branch_a)));
    assert!(
        status.iter().any(|s| s.contains("setup script") && s.contains("preparing the worktree")),
        "the setup script's output is in the transcript: {status:?}"
    );

    // A later session of the same task reuses its worktree.
    let again = board.launch(&task_a).await;
    assert_eq!(again["cwd"], cwd_a.display().to_string());
    server.wait_state(again["id"].as_str().unwrap(), "WAITING_FOR_INPUT").await;
    assert!(cwd_a.join("a.txt").exists(), "the reused worktree keeps the earlier work");
}

#[tokio::test]
async fn i6_changes_show_the_agent_files_and_commit_lands_on_the_task_branch() {
    let server = TestServer::start().await;
    let board = Board::new(&server).await;
    let (_tmp, repo) = repository(true);
    let repo_id = board.repository(&repo, json!({})).await;
    let task = board.task("Write notes", &[&repo_id]).await;
    let (session, cwd) = board.started(&task).await;
    server
        .turn(
            &session,
            "#!mock\nwrite notes/todo.txt first line\\nsecond line\nwrite README.md hi\\n",
        )
        .await;

    let changes = server.call("task.changes", json!({"task_id": task})).await;
    assert_eq!(paths(&changes["files"]), ["README.md", "notes/todo.txt"]);
    let readme = &changes["files"][0];
    assert_eq!(
        (readme["status"].as_str(), readme["additions"].as_u64()),
        (Some("modified"), Some(1))
    );
    let lines: Vec<(&str, &str)> = readme["hunks"][0]["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| (l["kind"].as_str().unwrap(), l["text"].as_str().unwrap()))
        .collect();
    assert_eq!(lines, [("removed", "hello"), ("added", "hi")]);
    let notes = &changes["files"][1];
    assert_eq!(notes["status"], "untracked");
    assert_eq!(notes["repository_id"], repo_id.as_str());
    assert_eq!(notes["hunks"][0]["lines"][1]["text"], "second line");
    let worktree = &changes["worktrees"][0];
    assert_eq!(worktree["path"], cwd.display().to_string());
    assert_eq!(worktree["base_commit"], git(&repo, &["rev-parse", "main"]));
    let branch = worktree["branch"].as_str().unwrap().to_owned();

    let committed =
        server.call("task.commit", json!({"task_id": task, "message": "Add notes"})).await;
    let commit = &committed["commit"];
    assert_eq!(commit["summary"], "Add notes");
    assert_eq!(commit["files_changed"], 2);
    assert_eq!(commit["branch"], branch.as_str());
    assert_eq!(
        git(&cwd, &["log", "-1", "--format=%H %s"]),
        format!("{} Add notes", commit["sha"].as_str().unwrap())
    );
    assert_eq!(git(&repo, &["log", "-1", "--format=%s", &branch]), "Add notes");
    assert_eq!(git(&repo, &["log", "-1", "--format=%s", "main"]), "initial", "main is untouched");
    assert_eq!(git(&cwd, &["status", "--porcelain"]), "");

    // Committed work still shows against the base commit.
    let after = server.call("task.changes", json!({"task_id": task})).await;
    assert_eq!(after["files"][1]["status"], "added");
    let (status, body) =
        server.post("task.commit", json!({"task_id": task, "message": "again"})).await;
    assert_eq!((status, body["code"].as_str()), (422, Some("VALIDATION_ERROR")));
    assert!(body["message"].as_str().unwrap().contains("nothing to commit"), "{body}");
}

#[tokio::test]
async fn i6_a_failing_setup_script_fails_the_start_with_its_exit_code_and_output() {
    let server = TestServer::start().await;
    let board = Board::new(&server).await;
    let (_tmp, repo) = repository(true);
    let script = "echo installing dependencies\necho 'npm ERR! missing package.json' >&2\nexit 7";
    let repo_id = board.repository(&repo, json!({"setup_script": script})).await;
    let task = board.task("Set up", &[&repo_id]).await;

    let launched = board.launch(&task).await;
    assert_eq!(launched["state"], "STARTING", "the setup runs in the session's start");
    let session = server.wait_state(launched["id"].as_str().unwrap(), "FAILED").await;
    let error = &session["last_error"];
    assert_eq!(error["code"], "setup_script_failed");
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("exit code 7"), "{message}");
    assert!(message.contains("installing dependencies"), "{message}");
    assert!(message.contains("npm ERR! missing package.json"), "{message}");
    assert_eq!(error["details"]["exit_code"], 7);
    let id = session["id"].as_str().unwrap();
    let stored = server.call("session.get", json!({"id": id})).await;
    assert_eq!(stored["session"]["state"], "FAILED");
    let messages = server.messages(id).await;
    assert!(of_kind(&messages, "error")[0]["content"].as_str().unwrap().contains("exit code 7"));
    assert!(of_kind(&messages, "agent").is_empty(), "no agent ran");
    let card = server.call("task.get", json!({"id": task})).await;
    assert_eq!(card["task"]["state"], "FAILED");

    // Fixed, the next launch reuses the worktree and runs the script again.
    server.call("repository.update", json!({"id": repo_id, "setup_script": "echo fixed"})).await;
    let retry = board.launch(&task).await;
    assert_eq!(retry["cwd"], session["cwd"]);
    server.wait_state(retry["id"].as_str().unwrap(), "WAITING_FOR_INPUT").await;
}

#[tokio::test]
async fn i6_archive_keeps_a_dirty_worktree_and_says_why_force_removes_it_branch_remains() {
    let server = TestServer::start().await;
    let board = Board::new(&server).await;
    let (_tmp, repo) = repository(true);
    let repo_id = board.repository(&repo, json!({})).await;
    let task = board.task("Dirty work", &[&repo_id]).await;
    let (session, cwd) = board.started(&task).await;
    server.turn(&session, "#!mock\nwrite wip.txt not committed").await;
    let branch = git(&cwd, &["rev-parse", "--abbrev-ref", "HEAD"]);

    let archived = server.call("task.archive", json!({"id": task})).await;
    assert!(archived["task"]["archived_at"].is_string(), "{archived}");
    assert_eq!(archived["worktrees_removed"], json!([]));
    let kept = &archived["worktrees_kept"][0];
    assert_eq!(kept["path"], cwd.display().to_string());
    assert!(kept["reason"].as_str().unwrap().contains("uncommitted"), "{kept}");
    assert!(cwd.join("wip.txt").exists(), "the worktree is kept");

    let forced = server.call("task.archive", json!({"id": task, "force": true})).await;
    assert_eq!(forced["worktrees_removed"], json!([cwd.display().to_string()]));
    assert_eq!(forced["worktrees_kept"], json!([]));
    assert!(!cwd.exists(), "the worktree is removed");
    assert!(branches(&repo).contains(&branch), "the branch remains");
    assert_eq!(git(&repo, &["worktree", "list", "--porcelain"]).matches("worktree ").count(), 1);
    let (status, _) = server.post("task.changes", json!({"task_id": task})).await;
    assert_eq!(status, 409, "no worktree any more");

    // A clean worktree goes without force.
    let clean = board.task("Clean work", &[&repo_id]).await;
    let (_, clean_cwd) = board.started(&clean).await;
    let archived = server.call("task.archive", json!({"id": clean})).await;
    assert_eq!(archived["worktrees_removed"], json!([clean_cwd.display().to_string()]));
    assert!(!clean_cwd.exists());
}

#[tokio::test]
async fn i6_delete_refuses_a_dirty_worktree_unless_forced_and_keeps_the_branch() {
    let server = TestServer::start().await;
    let board = Board::new(&server).await;
    let (_tmp, repo) = repository(true);
    let repo_id = board.repository(&repo, json!({})).await;
    let task = board.task("Delete me", &[&repo_id]).await;
    let (session, cwd) = board.started(&task).await;
    server.turn(&session, "#!mock\nwrite wip.txt unsaved").await;
    let branch = git(&cwd, &["rev-parse", "--abbrev-ref", "HEAD"]);

    let (status, body) = server.post("task.delete", json!({"id": task})).await;
    assert_eq!((status, body["code"].as_str()), (409, Some("CONFLICT")), "{body}");
    assert!(body["message"].as_str().unwrap().contains("uncommitted"), "{body}");
    assert_eq!(body["details"]["worktrees"][0]["path"], cwd.display().to_string());
    server.call("task.get", json!({"id": task})).await;
    assert!(cwd.join("wip.txt").exists());

    let deleted = server.call("task.delete", json!({"id": task, "force": true})).await;
    assert_eq!(deleted["deleted"], true);
    assert_eq!(deleted["worktrees_removed"], json!([cwd.display().to_string()]));
    assert!(!cwd.exists());
    assert!(branches(&repo).contains(&branch), "the branch remains");
    let (status, _) = server.post("task.get", json!({"id": task})).await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn i6_file_actions_refuse_paths_leaving_the_worktree() {
    let server = TestServer::start().await;
    let board = Board::new(&server).await;
    let (_tmp, repo) = repository(true);
    let repo_id = board.repository(&repo, json!({})).await;
    let task = board.task("Confined", &[&repo_id]).await;
    let (session, cwd) = board.started(&task).await;
    server.turn(&session, "#!mock\nwrite inside.txt fine").await;
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "top secret").unwrap();
    std::os::unix::fs::symlink(outside.path(), cwd.join("link")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret.txt"), cwd.join("secret-link")).unwrap();

    let read = server.call("task.file.read", json!({"task_id": task, "path": "inside.txt"})).await;
    assert_eq!((read["content"].as_str(), read["size"].as_u64()), (Some("fine"), Some(4)));
    let absolute_inside = cwd.join("inside.txt").display().to_string();
    let refused = [
        "../outside.txt",
        "../../kandev.db",
        "notes/../../x",
        "/etc/passwd",
        absolute_inside.as_str(),
        "link/secret.txt",
        "secret-link",
        ".git/config",
    ];
    for path in refused {
        let (status, body) =
            server.post("task.file.read", json!({"task_id": task, "path": path})).await;
        assert_eq!((status, body["code"].as_str()), (403, Some("FORBIDDEN")), "{path}: {body}");
    }

    let tree = server.call("task.tree", json!({"task_id": task})).await;
    let entries = tree["entries"].as_array().unwrap();
    let link = entries.iter().find(|e| e["path"] == "link").unwrap();
    assert_eq!(link["kind"], "symlink", "symlinks are listed, not followed");
    assert!(entries.iter().all(|e| !e["path"].as_str().unwrap().contains("secret.txt")));
    let changes = server.call("task.changes", json!({"task_id": task})).await;
    assert!(!changes.to_string().contains("top secret"), "{changes}");
}

/// Issue 12, finding 4: an entry swapped between a file and a symlink to an outside file
/// while `task.file.read` runs (on main: 33 and 9 of 3,000 reads returned the outside file).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn i12_f4_file_read_racing_a_symlink_swap_never_returns_outside_content() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

    use futures::StreamExt;

    let server = TestServer::start().await;
    let board = Board::new(&server).await;
    let (_tmp, repo) = repository(true);
    let repo_id = board.repository(&repo, json!({})).await;
    let task = board.task("Race", &[&repo_id]).await;
    let (_session, cwd) = board.started(&task).await;
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret.txt");
    std::fs::write(&secret, "top secret").unwrap();
    std::fs::write(cwd.join("race"), "inside").unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let swaps = Arc::new(AtomicU64::new(0));
    let swapper = {
        let (cwd, stop, swaps) = (cwd.clone(), stop.clone(), swaps.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let _ = std::fs::remove_file(cwd.join("race.link"));
                std::os::unix::fs::symlink(&secret, cwd.join("race.link")).unwrap();
                std::fs::rename(cwd.join("race.link"), cwd.join("race")).unwrap();
                std::fs::write(cwd.join("race.file"), "inside").unwrap();
                std::fs::rename(cwd.join("race.file"), cwd.join("race")).unwrap();
                swaps.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    let reads = futures::stream::iter(0..3_000)
        .map(|_| server.post("task.file.read", json!({"task_id": task, "path": "race"})))
        .buffer_unordered(8)
        .collect::<Vec<(u16, Value)>>()
        .await;
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();

    let leaked = reads.iter().filter(|(_, body)| body.to_string().contains("top secret")).count();
    let inside = reads.iter().filter(|(_, body)| body["content"] == "inside").count();
    let refused = reads.iter().filter(|(status, _)| *status == 403).count();
    assert_eq!(leaked, 0, "{leaked} of 3000 reads returned the outside file");
    assert!(swaps.load(Ordering::Relaxed) > 10, "the entry was swapped meanwhile");
    assert!(inside > 0 && refused > 0, "both states were seen: {inside} inside, {refused} refused");
    for (status, body) in &reads {
        assert!(matches!(status, 200 | 403 | 404), "{status} {body}");
    }
}

/// Issue 12, finding 4: a hard link to an outside file, made in the worktree, is not shown by
/// `task.file.read`, `task.changes` or `task.tree` content, and is not committed.
#[tokio::test]
async fn i12_f4_hard_links_to_outside_files_are_not_revealed() {
    let server = TestServer::start().await;
    let board = Board::new(&server).await;
    let (_tmp, repo) = repository(true);
    let repo_id = board.repository(&repo, json!({})).await;
    let task = board.task("Hard links", &[&repo_id]).await;
    let (_session, cwd) = board.started(&task).await;
    // The same filesystem as the worktree, so the link can be made.
    let secret = server.dir.path().join("outside-secret.txt");
    std::fs::write(&secret, "top secret\n").unwrap();
    std::fs::hard_link(&secret, cwd.join("leak.txt")).unwrap();
    std::fs::remove_file(cwd.join("README.md")).unwrap();
    std::fs::hard_link(&secret, cwd.join("README.md")).unwrap();

    for path in ["leak.txt", "README.md"] {
        let (status, body) =
            server.post("task.file.read", json!({"task_id": task, "path": path})).await;
        assert_eq!((status, body["code"].as_str()), (403, Some("FORBIDDEN")), "{path}: {body}");
        assert!(body["message"].as_str().unwrap().contains("hard link"), "{body}");
    }
    let changes = server.call("task.changes", json!({"task_id": task})).await;
    assert!(!changes.to_string().contains("top secret"), "{changes}");
    let files = changes["files"].as_array().unwrap();
    for path in ["leak.txt", "README.md"] {
        let file = files.iter().find(|f| f["path"] == path).unwrap();
        assert_eq!(
            (file["truncated"].as_bool(), file["hunks"].as_array().map(Vec::len)),
            (Some(true), Some(0)),
            "{file}"
        );
    }
    let (status, body) =
        server.post("task.commit", json!({"task_id": task, "message": "leak"})).await;
    assert_eq!((status, body["code"].as_str()), (403, Some("FORBIDDEN")), "{body}");
    assert_eq!(git(&cwd, &["rev-list", "--count", "HEAD"]), "1", "nothing was committed");
}

#[tokio::test]
async fn i6_unusable_repositories_fail_readably_and_leave_nothing_behind() {
    let server = TestServer::start().await;
    let board = Board::new(&server).await;

    let (gone_tmp, gone) = repository(true);
    let gone_id = board.repository(&gone, json!({})).await;
    std::fs::remove_dir_all(&gone).unwrap();
    let (_base_tmp, no_base) = repository(true);
    let no_base_id = board.repository(&no_base, json!({"default_branch": "release"})).await;
    let (_empty_tmp, empty) = repository(false);
    let empty_id = board.repository(&empty, json!({})).await;

    let cases = [
        (gone_id, "does not exist", None),
        (no_base_id, "base branch `release` does not exist", Some(no_base)),
        (empty_id, "has no commits", Some(empty)),
    ];
    for (repo_id, expected, repo) in cases {
        let task = board.task("Doomed", &[&repo_id]).await;
        let launched = board.launch(&task).await;
        let session = server.wait_state(launched["id"].as_str().unwrap(), "FAILED").await;
        assert_eq!(session["last_error"]["code"], "worktree_failed");
        let message = session["last_error"]["message"].as_str().unwrap();
        assert!(message.contains(expected), "{message}");
        let messages = server.messages(session["id"].as_str().unwrap()).await;
        assert!(of_kind(&messages, "error")[0]["content"].as_str().unwrap().contains(expected));
        assert!(!worktrees_root(&server).join(&task).exists(), "no worktree folder: {message}");
        if let Some(repo) = repo {
            let heads = branches(&repo);
            assert!(heads.iter().all(|b| !b.starts_with("kandev/")), "no branch: {heads:?}");
            let listed = git(&repo, &["worktree", "list", "--porcelain"]);
            assert_eq!(listed.matches("worktree ").count(), 1, "{listed}");
        }
    }
    drop(gone_tmp);
}

#[tokio::test]
async fn i6_a_task_with_two_repositories_works_in_a_folder_of_worktrees() {
    let server = TestServer::start().await;
    let board = Board::new(&server).await;
    let (_web_tmp, web) = repository(true);
    let (_api_tmp, api) = repository(true);
    let web_id = board.repository(&web, json!({"name": "web"})).await;
    let api_id = board.repository(&api, json!({"name": "api"})).await;
    let task = board.task("Full stack", &[&web_id, &api_id]).await;
    let (session, cwd) = board.started(&task).await;
    assert_eq!(cwd.file_name().unwrap().to_str(), Some(task.as_str()));
    assert!(cwd.join("web/README.md").exists() && cwd.join("api/README.md").exists());
    server.turn(&session, "#!mock\nwrite web/page.html <p>hi</p>").await;

    let changes = server.call("task.changes", json!({"task_id": task})).await;
    assert_eq!(paths(&changes["files"]), ["web/page.html"]);
    assert_eq!(changes["files"][0]["repository_id"], web_id.as_str());
    let folders: Vec<&str> = changes["worktrees"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["folder"].as_str().unwrap())
        .collect();
    assert_eq!(folders, ["web", "api"]);
    let tree = server.call("task.tree", json!({"task_id": task})).await;
    let listed = paths(&tree["entries"]);
    for expected in ["api", "api/README.md", "web", "web/README.md", "web/page.html"] {
        assert!(listed.iter().any(|p| p == expected), "{expected} in {listed:?}");
    }
    let read =
        server.call("task.file.read", json!({"task_id": task, "path": "api/README.md"})).await;
    assert_eq!(
        (read["path"].as_str(), read["content"].as_str()),
        (Some("api/README.md"), Some("hello\n"))
    );
    let (status, _) = server
        .post("task.file.read", json!({"task_id": task, "path": "web/../api/README.md"}))
        .await;
    assert_eq!(status, 403);

    let committed = server.call("task.commit", json!({"task_id": task, "message": "Page"})).await;
    let commits = committed["commits"].as_array().unwrap();
    assert_eq!(commits.len(), 1, "only the repository with changes gets a commit");
    assert_eq!(commits[0]["repository_id"], web_id.as_str());
    let branch = commits[0]["branch"].as_str().unwrap();
    assert_eq!(git(&web, &["log", "-1", "--format=%s", branch]), "Page");
}

#[tokio::test]
async fn i6_a_task_without_repository_works_in_its_plain_folder() {
    let server = TestServer::start().await;
    let (task, session) = server.session(None).await;
    let got = server.call("session.get", json!({"id": session})).await;
    let cwd = PathBuf::from(got["session"]["cwd"].as_str().unwrap());
    assert_eq!(cwd, server.dir.path().join("tasks").join(&task));
    server.turn(&session, "#!mock\nwrite notes/plan.txt step one").await;

    let tree = server.call("task.tree", json!({"task_id": task})).await;
    assert_eq!(paths(&tree["entries"]), ["notes", "notes/plan.txt"]);
    let read =
        server.call("task.file.read", json!({"task_id": task, "path": "notes/plan.txt"})).await;
    assert_eq!(read["content"], "step one");
    let (status, body) =
        server.post("task.file.read", json!({"task_id": task, "path": "../../kandev.db"})).await;
    assert_eq!((status, body["code"].as_str()), (403, Some("FORBIDDEN")));
    for (action, payload) in [
        ("task.changes", json!({"task_id": task})),
        ("task.commit", json!({"task_id": task, "message": "x"})),
    ] {
        let (status, body) = server.post(action, payload).await;
        assert_eq!((status, body["code"].as_str()), (422, Some("VALIDATION_ERROR")), "{action}");
        assert!(body["message"].as_str().unwrap().contains("the task has no repository"));
    }
}

/// The branch checked out in a worktree.
fn head_branch(cwd: &Path) -> String {
    git(cwd, &["rev-parse", "--abbrev-ref", "HEAD"])
}

/// Issue 12, finding 6: tasks created together with the same title, and tasks whose titles
/// slug to `task` (Japanese, `..`, `/`), all get worktrees, each on a branch of its own.
#[tokio::test]
async fn i12_f6_same_title_tasks_created_together_all_get_worktrees() {
    let server = TestServer::start().await;
    let board = Board::new(&server).await;
    let (_tmp, repo) = repository(true);
    let repo_id = board.repository(&repo, json!({})).await;
    let titles = ["Fix login bug", "Fix login bug", "ログインのバグを直す", "..", "/"];
    let mut tasks = vec![];
    for title in titles {
        tasks.push(board.task(title, &[&repo_id]).await);
    }
    let started = futures::future::join_all(tasks.iter().map(|t| board.started(t))).await;
    let mut branches: Vec<String> = started.iter().map(|(_, cwd)| head_branch(cwd)).collect();
    assert!(branches[0].starts_with("kandev/fix-login-bug-"), "{branches:?}");
    assert!(branches[2].starts_with("kandev/task-"), "{branches:?}");
    branches.sort();
    branches.dedup();
    assert_eq!(branches.len(), titles.len(), "every task has its own branch: {branches:?}");
}

/// Issue 12, finding 6: a new task whose branch name equals an archived task's kept branch
/// gets a fresh branch (with a suffix) at the base, not the archived task's commits; the
/// archived task, started again, gets its own branch back (with its commits).
#[tokio::test]
async fn i12_f6_an_archived_tasks_kept_branch_is_not_reused() {
    let server = TestServer::start().await;
    let board = Board::new(&server).await;
    let (_tmp, repo) = repository(true);
    // Without {short-id}, equal titles give equal names.
    let repo_id = board.repository(&repo, json!({"branch_template": "kandev/{task-slug}"})).await;
    let old = board.task("Fix login bug", &[&repo_id]).await;
    let (session, cwd) = board.started(&old).await;
    server.turn(&session, "#!mock\nwrite old-work.txt from the old task").await;
    server.call("task.commit", json!({"task_id": old, "message": "old work"})).await;
    assert_eq!(head_branch(&cwd), "kandev/fix-login-bug");
    let archived = server.call("task.archive", json!({"id": old})).await;
    assert_eq!(archived["worktrees_removed"], json!([cwd.display().to_string()]), "{archived}");

    let new = board.task("Fix login bug", &[&repo_id]).await;
    let (_, new_cwd) = board.started(&new).await;
    assert_eq!(head_branch(&new_cwd), "kandev/fix-login-bug-2");
    assert!(!new_cwd.join("old-work.txt").exists(), "the archived task's commit is not inherited");
    assert_eq!(git(&new_cwd, &["rev-parse", "HEAD"]), git(&repo, &["rev-parse", "main"]));
    assert!(
        git(&repo, &["log", "-1", "--format=%s", "kandev/fix-login-bug"]) == "old work",
        "the archived task's branch is kept as it was"
    );

    // The archived task, started again, works on its own branch with its commit.
    let (_, again) = board.started(&old).await;
    assert_eq!(head_branch(&again), "kandev/fix-login-bug");
    assert!(again.join("old-work.txt").exists());
}

/// Issue 12, finding 6: templates are checked like `git check-ref-format --branch` and are
/// never full refs, at repository.create and repository.update.
#[tokio::test]
async fn i12_f6_bad_branch_templates_are_refused() {
    let server = TestServer::start().await;
    let board = Board::new(&server).await;
    let (_tmp, repo) = repository(true);
    for template in [
        "refs/heads/main",
        "refs/heads/{task-slug}",
        "main",
        "kandev/{task-slug}..{short-id}",
        "kandev/{task-slug}.lock",
        "kandev/{task-slug} {short-id}",
        "-{short-id}",
        "kandev/{title}",
    ] {
        let (status, body) = server
            .post(
                "repository.create",
                json!({"workspace_id": board.workspace_id, "local_path": repo,
                       "branch_template": template}),
            )
            .await;
        assert_eq!((status, body["code"].as_str()), (422, Some("VALIDATION_ERROR")), "{template}");
        assert_eq!(body["details"]["field"], "branch_template", "{body}");
    }
    let repo_id = board.repository(&repo, json!({})).await;
    let (status, body) = server
        .post("repository.update", json!({"id": repo_id, "branch_template": "refs/heads/main"}))
        .await;
    assert_eq!((status, body["code"].as_str()), (422, Some("VALIDATION_ERROR")), "{body}");
    let (status, body) = server
        .post("repository.update", json!({"id": repo_id, "default_branch": "refs/heads/main"}))
        .await;
    assert_eq!((status, body["details"]["field"].as_str()), (422, Some("default_branch")));
    let updated = server
        .call("repository.update", json!({"id": repo_id, "branch_template": "work/{short-id}"}))
        .await;
    assert_eq!(updated["repository"]["branch_template"], "work/{short-id}");
}

// ---------------------------------------------------------------- issue 12, finding 7

/// A setup script that announces itself, records each run in `control/runs`, and then
/// blocks until `control/release` exists; its background `sleep` writes `control/bg.pid`
/// (it dies with the script's process group). From the second run on it passes at once.
fn blocking_setup(control: &Path) -> String {
    let c = control.display();
    format!(
        "echo setup-started; echo run >> '{c}/runs'\n\
         if [ \"$(wc -l < '{c}/runs')\" -ge 2 ]; then echo setup-done; exit 0; fi\n\
         sleep 300 & echo $! > '{c}/bg.pid'\n\
         while [ ! -f '{c}/release' ]; do sleep 0.02; done; echo setup-done"
    )
}

fn runs(control: &Path) -> usize {
    std::fs::read_to_string(control.join("runs")).map(|r| r.lines().count()).unwrap_or(0)
}

/// Waits (bounded) until a message of the session contains `needle`, following the
/// session's notifications (streamed appends included).
async fn wait_output(server: &TestServer, session: &str, needle: &str) -> Vec<Value> {
    let mut ws = server.ws().await;
    ws.call("subscribe", json!({"topics": [format!("session:{session}")]})).await;
    loop {
        let messages = server.messages(session).await;
        if messages.iter().any(|m| m["content"].as_str().unwrap_or("").contains(needle)) {
            return messages;
        }
        ws.next().await;
    }
}

/// Waits (bounded) until the process is gone (or a zombie waiting to be reaped): a process
/// this test does not own, whose end announces nothing.
async fn wait_gone(pid: i32) {
    let what = format!("process {pid} to end");
    kandev_testkit::eventually_within(common::WAIT, what, async || {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat.rsplit(')').next().and_then(|rest| rest.split_whitespace().next());
        stat.is_empty() || state == Some("Z")
    })
    .await;
}

/// Sends a request and hangs up without reading the answer (a closed browser tab).
async fn post_and_hang_up(server: &TestServer, action: &str, body: Value) {
    use tokio::io::AsyncWriteExt;
    let body = body.to_string();
    let request = format!(
        "POST /api/v1/{action} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        server.addr,
        body.len()
    );
    let mut stream = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    stream.shutdown().await.unwrap();
    drop(stream);
}

/// `task.create {start_agent: true}` answers at once with the session `STARTING` while the
/// setup script runs in the session's own work; its output shows up as it comes; a client
/// that hangs up does not cancel it; the agent starts when the script ends.
#[tokio::test]
async fn i12_f7_setup_runs_in_the_session_streams_and_outlives_its_client() {
    let server = TestServer::start().await;
    let board = Board::new(&server).await;
    let (_tmp, repo) = repository(true);
    let control = tempfile::tempdir().unwrap();
    let repo_id =
        board.repository(&repo, json!({"setup_script": blocking_setup(control.path())})).await;
    let create = json!({"workflow_id": board.workflow["id"], "title": "Slow setup",
                        "step_id": step_id(&board.workflow, "Backlog"),
                        "repository_ids": [repo_id], "start_agent": true});

    // Hung up on mid-request: the task and its start go on all the same.
    post_and_hang_up(&server, "task.create", create.clone()).await;
    let deadline = std::time::Instant::now() + common::WAIT;
    let session = loop {
        let list = server.call("task.list", json!({"workflow_id": board.workflow["id"]})).await;
        let primary =
            list["tasks"].as_array().unwrap().first().map(|t| t["primary_session_id"].clone());
        if let Some(Value::String(id)) = primary {
            break id;
        }
        assert!(std::time::Instant::now() < deadline, "the task and its session were created");
        tokio::task::yield_now().await;
    };
    let messages = wait_output(&server, &session, "setup-started").await;
    assert_eq!(runs(control.path()), 1);
    let now = server.call("session.get", json!({"id": session})).await;
    assert_eq!(now["session"]["state"], "STARTING", "STARTING while the setup runs (rule 46)");
    assert!(
        !messages.iter().any(|m| m["content"].as_str().unwrap().contains("setup-done")),
        "the output is streamed before the script ends"
    );
    std::fs::write(control.path().join("release"), "").unwrap();
    server.wait_state(&session, "WAITING_FOR_INPUT").await;
    let messages = server.turn(&session, "hello").await;
    assert_eq!(of_kind(&messages, "agent").last().unwrap()["content"], "echo: hello");
    assert!(statuses(&messages).iter().any(|s| s.contains("finished (exit code 0)")));

    // A client that waits gets its answer at once, STARTING, while the script still runs.
    std::fs::remove_file(control.path().join("runs")).unwrap();
    std::fs::remove_file(control.path().join("release")).unwrap();
    let second = json!({"workflow_id": board.workflow["id"], "title": "Another",
                        "step_id": step_id(&board.workflow, "Backlog"),
                        "repository_ids": [repo_id], "start_agent": true});
    let created = tokio::time::timeout(common::WAIT, server.call("task.create", second))
        .await
        .expect("task.create answers without waiting for the setup script");
    assert_eq!(created["session"]["state"], "STARTING");
    let id = created["session"]["id"].as_str().unwrap();
    wait_output(&server, id, "setup-started").await;
    std::fs::write(control.path().join("release"), "").unwrap();
    server.wait_state(id, "WAITING_FOR_INPUT").await;
}

fn statuses(messages: &[Value]) -> Vec<String> {
    of_kind(messages, "status").iter().map(|m| m["content"].as_str().unwrap().to_owned()).collect()
}

/// `session.stop` during the setup script kills its process group and leaves the session
/// resumable; the next start runs the script again.
#[tokio::test]
async fn i12_f7_stop_during_setup_kills_it_and_the_next_start_runs_it_again() {
    let server = TestServer::start().await;
    let board = Board::new(&server).await;
    let (_tmp, repo) = repository(true);
    let control = tempfile::tempdir().unwrap();
    let repo_id =
        board.repository(&repo, json!({"setup_script": blocking_setup(control.path())})).await;
    let task = board.task("Stop me", &[&repo_id]).await;
    let launched = tokio::time::timeout(common::WAIT, board.launch(&task))
        .await
        .expect("the launch answers without waiting for the setup script");
    let session = launched["id"].as_str().unwrap().to_owned();
    let background = kandev_testkit::wait::file_value::<i32>(&control.path().join("bg.pid")).await;

    let stopped = server.call("session.stop", json!({"id": session})).await;
    assert_eq!(stopped["session"]["state"], "WAITING_FOR_INPUT");
    wait_gone(background).await;
    let messages = wait_output(&server, &session, "was stopped").await;
    assert!(of_kind(&messages, "agent").is_empty(), "no agent started");
    assert_eq!(server.counters().count(kandev_mock_agent::CallKind::Initialize), 0);

    let messages = server.turn(&session, "after the stop").await;
    assert_eq!(runs(control.path()), 2, "the next start ran the setup script again");
    assert_eq!(of_kind(&messages, "agent").last().unwrap()["content"], "echo: after the stop");
}

/// An archive while a start prepares the worktree cancels that start instead of waiting for
/// its setup script or removing the worktree under a new agent; a later start makes the
/// worktree again and its agent works in it.
#[tokio::test]
async fn i12_f7_an_archive_racing_a_launch_never_removes_the_new_agents_worktree() {
    let server = TestServer::start().await;
    let board = Board::new(&server).await;
    let (_tmp, repo) = repository(true);
    let control = tempfile::tempdir().unwrap();
    let repo_id =
        board.repository(&repo, json!({"setup_script": blocking_setup(control.path())})).await;
    let task = board.task("Archive me", &[&repo_id]).await;
    let launched = tokio::time::timeout(common::WAIT, board.launch(&task)).await.unwrap();
    let session = launched["id"].as_str().unwrap().to_owned();
    let cwd = PathBuf::from(launched["cwd"].as_str().unwrap());
    let background = kandev_testkit::wait::file_value::<i32>(&control.path().join("bg.pid")).await;

    let archived = tokio::time::timeout(
        common::WAIT,
        server.call("task.archive", json!({"id": task, "force": true})),
    )
    .await
    .expect("the archive does not wait for the setup script");
    assert_eq!(archived["worktrees_removed"], json!([cwd.display().to_string()]));
    wait_gone(background).await;
    assert!(!cwd.exists());
    assert_eq!(server.counters().count(kandev_mock_agent::CallKind::Initialize), 0);

    // The next start prepares the worktree again (and its setup), and the agent works there.
    server.turn(&session, "#!mock\nwrite after.txt made by the new agent").await;
    assert_eq!(
        std::fs::read_to_string(cwd.join("after.txt")).unwrap(),
        "made by the new agent",
        "the new agent's worktree exists"
    );
    assert_eq!(runs(control.path()), 2);
}

/// `session.resume` of a session whose worktree could not be made prepares it again.
#[tokio::test]
async fn i12_f7_resume_prepares_a_working_directory_that_failed_to_be_made() {
    let server = TestServer::start().await;
    let board = Board::new(&server).await;
    let (_tmp, repo) = repository(true);
    let repo_id = board.repository(&repo, json!({"default_branch": "release"})).await;
    let task = board.task("Later", &[&repo_id]).await;
    let launched = board.launch(&task).await;
    let session = launched["id"].as_str().unwrap().to_owned();
    let cwd = PathBuf::from(launched["cwd"].as_str().unwrap());
    let failed = server.wait_state(&session, "FAILED").await;
    assert_eq!(failed["last_error"]["code"], "worktree_failed");
    assert!(!cwd.exists());

    git(&repo, &["branch", "release"]);
    let resumed = server.call("session.resume", json!({"id": session, "mode": "fresh"})).await;
    assert_eq!(resumed["session"]["state"], "STARTING");
    server.wait_state(&session, "WAITING_FOR_INPUT").await;
    assert!(cwd.join("README.md").exists(), "the worktree was made by the resume");
    let messages = server.turn(&session, "#!mock\nwrite here.txt yes").await;
    assert!(statuses(&messages).iter().any(|s| s.contains("created worktree")));
    assert_eq!(std::fs::read_to_string(cwd.join("here.txt")).unwrap(), "yes");
}

/// The setup script's bound is a setting (`kandev serve --setup-timeout`).
#[tokio::test]
async fn i12_f7_the_setup_timeout_is_a_setting() {
    let server = TestServer::start_tuned(Default::default(), tempfile::tempdir().unwrap(), |c| {
        c.setup_timeout = std::time::Duration::from_millis(300);
    })
    .await;
    let board = Board::new(&server).await;
    let (_tmp, repo) = repository(true);
    let repo_id = board.repository(&repo, json!({"setup_script": "echo slow; sleep 30"})).await;
    let task = board.task("Too slow", &[&repo_id]).await;
    let launched = board.launch(&task).await;
    let failed = server.wait_state(launched["id"].as_str().unwrap(), "FAILED").await;
    assert_eq!(failed["last_error"]["code"], "setup_script_failed");
    assert!(
        failed["last_error"]["message"].as_str().unwrap().contains("did not finish"),
        "{failed}"
    );
}
