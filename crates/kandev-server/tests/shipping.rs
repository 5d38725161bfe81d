//! Issue 16: shipping a task's work over the API, with real git (a bare repository on disk as
//! `origin`, a clone of it as the registered repository) and a fake forge on loopback:
//! base branches, copied files, cleanup scripts, unarchive, git status, rebase, merge, push,
//! pull requests and review comments.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use common::{TestServer, of_kind, step_id};
use kandev_testkit::git::git;
use serde_json::{Value, json};

/// A local identity for a clone (the fixtures' own).
fn identity(repo: &Path) {
    git(repo, &["config", "user.name", kandev_testkit::git::NAME]);
    git(repo, &["config", "user.email", kandev_testkit::git::EMAIL]);
}

fn commit_file(repo: &Path, path: &str, content: &str, message: &str) -> String {
    kandev_testkit::git::commit(repo, &[(path, content)], message)
}

/// A bare `origin` at `<tmp>/acme/widget.git` with `main` (README.md, a `.gitignore` for
/// `.env` and `local.cfg`), and `clone`, the registered repository, on `main` with an
/// ignored `.env` and `local.cfg` in its checkout.
struct Remote {
    tmp: tempfile::TempDir,
    origin: PathBuf,
    clone: PathBuf,
}

impl Remote {
    fn new() -> Remote {
        let tmp = tempfile::tempdir().unwrap();
        let origin = tmp.path().join("acme/widget.git");
        std::fs::create_dir_all(&origin).unwrap();
        git(&origin, &["init", "-q", "--bare", "-b", "main"]);
        let seed = tmp.path().join("seed");
        git(tmp.path(), &["clone", "-q", origin.to_str().unwrap(), "seed"]);
        identity(&seed);
        git(&seed, &["checkout", "-q", "-b", "main"]);
        std::fs::write(seed.join(".gitignore"), ".env\nlocal.cfg\n").unwrap();
        commit_file(&seed, "README.md", "line one\nline two\n", "initial");
        git(&seed, &["push", "-q", "origin", "main"]);
        git(tmp.path(), &["clone", "-q", origin.to_str().unwrap(), "clone"]);
        let clone = tmp.path().join("clone");
        identity(&clone);
        std::fs::write(clone.join(".env"), "SECRET=from-main-checkout\n").unwrap();
        std::fs::write(clone.join("local.cfg"), "ignored copy\n").unwrap();
        Remote { tmp, origin, clone }
    }

    /// Another developer's clone, for moving `origin` behind the task's back.
    fn other(&self, name: &str) -> PathBuf {
        git(self.tmp.path(), &["clone", "-q", self.origin.to_str().unwrap(), name]);
        let path = self.tmp.path().join(name);
        identity(&path);
        path
    }

    fn origin_ref(&self, branch: &str) -> Option<String> {
        let output = Command::new("git")
            .args(["rev-parse", "--verify", "--quiet", &format!("refs/heads/{branch}")])
            .current_dir(&self.origin)
            .output()
            .unwrap();
        output.status.success().then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
    }
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

    /// A board imported from a workflow document (its first step must be `Backlog`).
    async fn imported(server: &'a TestServer, yaml: &str) -> Board<'a> {
        let workspaces = server.call("workspace.list", json!({})).await;
        let workspace_id = workspaces["workspaces"][0]["id"].as_str().unwrap().to_owned();
        let imported = server
            .call("workflow.import", json!({"workspace_id": workspace_id, "yaml": yaml}))
            .await;
        let workflow = imported["workflows"][0].clone();
        Board { server, workspace_id, workflow }
    }

    /// A WebSocket subscribed to the board's workspace topic.
    async fn watch(&self) -> common::Ws {
        let mut ws = self.server.ws().await;
        let topic = format!("workspace:{}", self.workspace_id);
        ws.call("subscribe", json!({"topics": [topic]})).await;
        ws
    }

    fn step(&self, name: &str) -> String {
        step_id(&self.workflow, name)
    }

    async fn step_of(&self, task: &str) -> String {
        let got = self.server.call("task.get", json!({"id": task})).await;
        got["task"]["step_id"].as_str().unwrap().to_owned()
    }

    async fn repository(&self, path: &Path, extra: Value) -> String {
        let mut body = json!({"workspace_id": self.workspace_id, "local_path": path});
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        let created = self.server.call("repository.create", body).await;
        created["repository"]["id"].as_str().unwrap().to_owned()
    }

    /// A task in Backlog on `repositories` (`[{id, base_branch}]`).
    async fn task(&self, title: &str, repositories: Value) -> String {
        let backlog = step_id(&self.workflow, "Backlog");
        let created = self
            .server
            .call(
                "task.create",
                json!({"workflow_id": self.workflow["id"], "title": title, "step_id": backlog,
                       "repositories": repositories}),
            )
            .await;
        created["task"]["id"].as_str().unwrap().to_owned()
    }

    /// Launches a session and waits for its agent; returns (session id, worktree).
    async fn started(&self, task_id: &str) -> (String, PathBuf) {
        let session =
            self.server.call("session.launch", json!({"task_id": task_id})).await["session"]
                .clone();
        let id = session["id"].as_str().unwrap().to_owned();
        self.server.wait_state(&id, "WAITING_FOR_INPUT").await;
        (id, PathBuf::from(session["cwd"].as_str().unwrap()))
    }
}

fn strings(value: &Value) -> Vec<String> {
    value.as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_owned()).collect()
}

#[tokio::test]
async fn i16_a1_base_branch_copy_files_cleanup_and_unarchive() {
    let remote = Remote::new();
    // `feature` reaches origin after the clone was made: the task's start must fetch it.
    let dev = remote.other("dev");
    git(&dev, &["checkout", "-q", "-b", "feature"]);
    let feature_tip = commit_file(&dev, "feature.txt", "feature work\n", "feature");
    // On `feature`, local.cfg is tracked: copying the ignored one must not overwrite it.
    std::fs::write(dev.join(".gitignore"), ".env\n").unwrap();
    let feature_tip2 = commit_file(&dev, "local.cfg", "tracked on feature\n", "track local.cfg");
    assert_ne!(feature_tip, feature_tip2);
    git(&dev, &["push", "-q", "origin", "feature"]);

    let server = TestServer::start().await;
    let board = Board::new(&server).await;
    let marker = remote.tmp.path().join("cleaned.txt");
    let repo_id = board
        .repository(
            &remote.clone,
            json!({
                "copy_files": [".env", "local.cfg"],
                "cleanup_script": format!("pwd > '{}'", marker.display()),
            }),
        )
        .await;
    let branches = server.call("repository.branches", json!({"id": repo_id})).await;
    assert!(strings(&branches["branches"]).contains(&"main".to_owned()), "{branches}");

    let task = board
        .task("Build on feature", json!([{"id": repo_id, "base_branch": "origin/feature"}]))
        .await;
    let (_session, worktree) = board.started(&task).await;

    assert_eq!(git(&worktree, &["rev-parse", "HEAD"]), feature_tip2, "starts at origin/feature");
    assert_eq!(std::fs::read_to_string(worktree.join("feature.txt")).unwrap(), "feature work\n");
    assert_eq!(
        std::fs::read_to_string(worktree.join(".env")).unwrap(),
        "SECRET=from-main-checkout\n",
        "the ignored .env is copied"
    );
    assert_eq!(
        std::fs::read_to_string(worktree.join("local.cfg")).unwrap(),
        "tracked on feature\n",
        "a tracked file is never overwritten"
    );
    let status = server.call("task.git_status", json!({"task_id": task})).await;
    assert_eq!(status["repositories"][0]["base_branch"], "origin/feature", "{status}");
    std::fs::write(worktree.join("big.bin"), vec![7u8; 100_000]).unwrap();
    let usage = server.call("repository.usage", json!({"id": repo_id})).await;
    assert_eq!(usage["worktrees"][0]["task_id"], task.as_str(), "{usage}");
    let bytes = usage["worktrees"][0]["bytes"].as_u64().unwrap();
    assert!((100_000..200_000).contains(&bytes), "{usage}");
    assert_eq!(usage["total_bytes"].as_u64(), Some(bytes));
    std::fs::remove_file(worktree.join("big.bin")).unwrap();

    let archived = server.call("task.archive", json!({"id": task})).await;
    assert!(archived["task"]["archived_at"].is_string(), "{archived}");
    assert!(!worktree.exists(), "the worktree is removed");
    let cleaned = std::fs::read_to_string(&marker).expect("the cleanup script ran");
    assert_eq!(Path::new(cleaned.trim()), worktree, "it ran in the worktree");

    let list = server.call("task.list", json!({"workflow_id": board.workflow["id"]})).await;
    assert!(list["tasks"].as_array().unwrap().iter().all(|t| t["id"] != task.as_str()));
    let back = server.call("task.unarchive", json!({"id": task})).await;
    assert!(back["task"]["archived_at"].is_null(), "{back}");
    let list = server.call("task.list", json!({"workflow_id": board.workflow["id"]})).await;
    assert!(list["tasks"].as_array().unwrap().iter().any(|t| t["id"] == task.as_str()));
}

#[tokio::test]
async fn i16_a1_bad_copy_files_patterns_are_refused() {
    let remote = Remote::new();
    let server = TestServer::start().await;
    let (workspace_id, _) = server.kanban().await;
    for bad in ["../secret", "/etc/passwd", ":(top)x", ".git/config", ""] {
        let (status, body) = server
            .post(
                "repository.create",
                json!({"workspace_id": workspace_id, "local_path": remote.clone, "copy_files": [bad]}),
            )
            .await;
        assert_eq!(status, 422, "{bad:?}: {body}");
        assert_eq!(body["details"]["field"], "copy_files", "{body}");
    }
}

#[tokio::test]
async fn i16_a2_git_status_and_rebase() {
    let remote = Remote::new();
    let server = TestServer::start().await;
    let board = Board::new(&server).await;
    let repo_id = board.repository(&remote.clone, json!({})).await;
    let task = board.task("Rebase me", json!([{"id": repo_id}])).await;
    let (_session, worktree) = board.started(&task).await;

    commit_file(&worktree, "task.txt", "task work\n", "task work");
    let base_tip = commit_file(&remote.clone, "base.txt", "base moved\n", "base moves");
    let status = server.call("task.git_status", json!({"task_id": task})).await;
    let repo = &status["repositories"][0];
    assert_eq!((repo["ahead"].as_u64(), repo["behind"].as_u64()), (Some(1), Some(1)), "{status}");
    assert_eq!(repo["base_tip"], base_tip.as_str());
    assert_eq!(repo["conflicts_with_base"], json!([]));
    assert_eq!(repo["dirty"]["uncommitted"], 0);

    // Clean case.
    let rebased = server.call("task.rebase", json!({"task_id": task})).await;
    let repo = &rebased["repositories"][0];
    assert_eq!((repo["ahead"].as_u64(), repo["behind"].as_u64()), (Some(1), Some(0)), "{rebased}");
    assert!(worktree.join("base.txt").exists());

    // A conflict after the base moves: reported by git_status without touching the worktree.
    commit_file(&worktree, "README.md", "line one\ntask's line two\n", "task edits readme");
    commit_file(&remote.clone, "README.md", "line one\nbase's line two\n", "base edits readme");
    let head_before = git(&worktree, &["rev-parse", "HEAD"]);
    let status = server.call("task.git_status", json!({"task_id": task})).await;
    assert_eq!(status["repositories"][0]["conflicts_with_base"], json!(["README.md"]), "{status}");
    assert_eq!(git(&worktree, &["status", "--porcelain"]), "", "status touched nothing");

    let (code, body) = server.post("task.rebase", json!({"task_id": task})).await;
    assert_eq!(code, 409, "{body}");
    assert_eq!(body["code"], "CONFLICT");
    assert_eq!(body["details"]["conflicts"], json!(["README.md"]), "{body}");
    assert!(body["message"].as_str().unwrap().contains("README.md"), "{body}");
    assert_eq!(git(&worktree, &["rev-parse", "HEAD"]), head_before, "the branch is unchanged");
    assert_eq!(git(&worktree, &["status", "--porcelain"]), "", "no rebase left behind");
    let gitdir = PathBuf::from(git(&worktree, &["rev-parse", "--absolute-git-dir"]));
    assert!(!gitdir.join("rebase-merge").exists() && !gitdir.join("rebase-apply").exists());

    // A dirty worktree is refused with its files listed.
    std::fs::write(worktree.join("scratch.txt"), "wip").unwrap();
    let (code, body) = server.post("task.rebase", json!({"task_id": task})).await;
    assert_eq!(code, 409, "{body}");
    assert_eq!(body["details"]["dirty"], json!(["scratch.txt"]), "{body}");
}

/// Issue 44 item 2: after a rebase (and when the base branch moves on), the changes compare
/// with the merge base of the task branch and the base branch as it is now: the base's own
/// commits are not the task's, and `task.changes` names that base.
#[tokio::test]
async fn i44_2_after_a_rebase_the_changes_compare_with_the_current_base() {
    let remote = Remote::new();
    let server = TestServer::start().await;
    let board = Board::new(&server).await;
    let repo_id = board.repository(&remote.clone, json!({})).await;
    let task = board.task("Review base", json!([{"id": repo_id}])).await;
    let (_session, worktree) = board.started(&task).await;
    let paths = |changes: &serde_json::Value| -> Vec<String> {
        changes["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["path"].as_str().unwrap().to_owned())
            .collect()
    };

    commit_file(&worktree, "task.txt", "task work\n", "task work");
    let base_tip = commit_file(&remote.clone, "base.txt", "base moved\n", "base moves");
    // The base moved on: the task's changes are still only its own.
    let changes = server.call("task.changes", json!({"task_id": task})).await;
    assert_eq!(paths(&changes), ["task.txt"], "{changes}");

    server.call("task.rebase", json!({"task_id": task})).await;
    assert!(worktree.join("base.txt").exists(), "rebased onto the moved base");
    let changes = server.call("task.changes", json!({"task_id": task})).await;
    assert_eq!(paths(&changes), ["task.txt"], "the base's commit is not the task's: {changes}");
    assert_eq!(changes["worktrees"][0]["base_commit"], base_tip.as_str(), "{changes}");
}

/// Issue 44 item 3: a file marked viewed stays viewed while its diff is unchanged, and is
/// unviewed once the file changes; only a file among the changes can be marked.
#[tokio::test]
async fn i44_3_a_viewed_mark_holds_until_the_file_changes() {
    let remote = Remote::new();
    let server = TestServer::start().await;
    let board = Board::new(&server).await;
    let repo_id = board.repository(&remote.clone, json!({})).await;
    let task = board.task("Viewed marks", json!([{"id": repo_id}])).await;
    let (_session, worktree) = board.started(&task).await;
    std::fs::write(worktree.join("a.txt"), "first\n").unwrap();
    std::fs::write(worktree.join("b.txt"), "other\n").unwrap();
    let viewed = |changes: &serde_json::Value, path: &str| -> bool {
        let files = changes["files"].as_array().unwrap();
        let file = files.iter().find(|f| f["path"] == path).expect("the file is listed");
        file["viewed"].as_bool().unwrap()
    };
    let changes = server.call("task.changes", json!({"task_id": task})).await;
    assert!(!viewed(&changes, "a.txt"));

    let mark = json!({"task_id": task, "repository_id": repo_id, "path": "a.txt", "viewed": true});
    let marked = server.call("task.file.viewed.set", mark.clone()).await;
    assert_eq!(marked["viewed"], true, "{marked}");
    let changes = server.call("task.changes", json!({"task_id": task})).await;
    assert!(viewed(&changes, "a.txt") && !viewed(&changes, "b.txt"), "{changes}");

    // The file changes: no longer viewed; marked again, then unmarked.
    std::fs::write(worktree.join("a.txt"), "first\nsecond\n").unwrap();
    let changes = server.call("task.changes", json!({"task_id": task})).await;
    assert!(!viewed(&changes, "a.txt"), "a changed file is unviewed: {changes}");
    server.call("task.file.viewed.set", mark).await;
    assert!(viewed(&server.call("task.changes", json!({"task_id": task})).await, "a.txt"));
    let unmark =
        json!({"task_id": task, "repository_id": repo_id, "path": "a.txt", "viewed": false});
    server.call("task.file.viewed.set", unmark).await;
    assert!(!viewed(&server.call("task.changes", json!({"task_id": task})).await, "a.txt"));

    // A new file staged (untracked → added) or committed keeps its mark: its diff is the same.
    std::fs::write(worktree.join("new.txt"), "new\n").unwrap();
    let mark_new =
        json!({"task_id": task, "repository_id": repo_id, "path": "new.txt", "viewed": true});
    server.call("task.file.viewed.set", mark_new).await;
    server.call("task.stage", json!({"task_id": task, "path": "new.txt"})).await;
    let changes = server.call("task.changes", json!({"task_id": task})).await;
    assert!(viewed(&changes, "new.txt"), "staging is not a change of the file: {changes}");

    let missing =
        json!({"task_id": task, "repository_id": repo_id, "path": "nope.txt", "viewed": true});
    let (code, body) = server.post("task.file.viewed.set", missing).await;
    assert_eq!(code, 404, "{body}");
    assert!(body["message"].as_str().unwrap().contains("nope.txt is not among"), "{body}");
}

#[tokio::test]
async fn i16_a3_merge_with_each_strategy_and_a_dirty_base_is_refused() {
    let remote = Remote::new();
    let server = TestServer::start().await;
    let board = Board::new(&server).await;
    let repo_id = board.repository(&remote.clone, json!({})).await;

    // A dirty base checkout: refused, listing the file, nothing changed.
    let task = board.task("Dirty base", json!([{"id": repo_id}])).await;
    let (_s, worktree) = board.started(&task).await;
    commit_file(&worktree, "dirty.txt", "x\n", "dirty");
    std::fs::write(remote.clone.join("scratch.txt"), "uncommitted").unwrap();
    let main_before = git(&remote.clone, &["rev-parse", "main"]);
    let (code, body) =
        server.post("task.merge", json!({"task_id": task, "strategy": "merge"})).await;
    assert_eq!(code, 409, "{body}");
    assert_eq!(body["details"]["dirty"], json!(["scratch.txt"]), "{body}");
    assert!(body["message"].as_str().unwrap().contains("scratch.txt"));
    assert_eq!(git(&remote.clone, &["rev-parse", "main"]), main_before, "nothing changed");
    std::fs::remove_file(remote.clone.join("scratch.txt")).unwrap();

    for (strategy, file) in
        [("fast_forward", "ff.txt"), ("merge", "merge.txt"), ("squash", "squash.txt")]
    {
        let task = board.task(&format!("Land with {strategy}"), json!([{"id": repo_id}])).await;
        let (_s, worktree) = board.started(&task).await;
        if strategy == "fast_forward" {
            // Earlier merges moved main: the task starts from it, so it can fast-forward.
            assert_eq!(
                git(&worktree, &["rev-parse", "HEAD"]),
                git(&remote.clone, &["rev-parse", "main"])
            );
        }
        let head = commit_file(&worktree, file, &format!("{strategy}\n"), &format!("add {file}"));
        let merged = server
            .call("task.merge", json!({"task_id": task, "strategy": strategy, "message": format!("land {strategy}")}))
            .await;
        let commit = merged["merged"][0]["commit"].as_str().unwrap().to_owned();
        assert_eq!(git(&remote.clone, &["rev-parse", "main"]), commit, "{strategy}: main moved");
        assert_eq!(
            std::fs::read_to_string(remote.clone.join(file)).unwrap(),
            format!("{strategy}\n"),
            "{strategy}: the checkout of main has the change"
        );
        assert_eq!(
            git(&remote.clone, &["status", "--porcelain"]),
            "",
            "{strategy}: clean checkout"
        );
        let parents = git(&remote.clone, &["rev-list", "--parents", "-n", "1", "main"]);
        let parents = parents.split(' ').count() - 1;
        match strategy {
            "fast_forward" => assert_eq!(commit, head),
            "merge" => assert_eq!(parents, 2, "a merge commit"),
            _ => {
                assert_eq!(parents, 1, "one squashed commit");
                assert_eq!(git(&remote.clone, &["log", "-1", "--format=%s"]), "land squash");
            }
        }
    }

    // A fast-forward that is impossible is refused.
    let task = board.task("Behind", json!([{"id": repo_id}])).await;
    let (_s, worktree) = board.started(&task).await;
    commit_file(&worktree, "behind.txt", "x\n", "behind");
    let main_before = commit_file(&remote.clone, "moved.txt", "x\n", "main moves on");
    let (code, body) =
        server.post("task.merge", json!({"task_id": task, "strategy": "fast_forward"})).await;
    assert_eq!(code, 409, "{body}");
    assert!(body["message"].as_str().unwrap().contains("fast-forward"), "{body}");
    assert_eq!(git(&remote.clone, &["rev-parse", "main"]), main_before);
}

#[tokio::test]
async fn i44_6_a_merged_task_says_merged_until_its_branch_moves() {
    let remote = Remote::new();
    let server = TestServer::start().await;
    let board = Board::new(&server).await;
    let repo_id = board.repository(&remote.clone, json!({})).await;
    let task = board.task("Land me", json!([{"id": repo_id}])).await;
    let (_s, worktree) = board.started(&task).await;
    commit_file(&worktree, "land.txt", "x\n", "add land.txt");
    let merged_now = || async {
        let status = server.call("task.git_status", json!({"task_id": task})).await;
        let card = server.call("task.get", json!({"id": task})).await;
        (status["repositories"][0]["merged"].clone(), card["task"]["git"]["merged"].clone())
    };
    assert_eq!(merged_now().await, (json!(false), json!(false)));

    server.call("task.merge", json!({"task_id": task, "strategy": "squash"})).await;
    assert_eq!(merged_now().await, (json!(true), json!(true)), "merged, on the card too");
    // Uncommitted work left out of the merge: not merged as it is now.
    std::fs::write(worktree.join("left.txt"), "left out\n").unwrap();
    assert_eq!(merged_now().await, (json!(false), json!(false)), "uncommitted work");
    std::fs::remove_file(worktree.join("left.txt")).unwrap();
    assert_eq!(merged_now().await, (json!(true), json!(true)));
    // A new commit on the task branch is not merged.
    commit_file(&worktree, "more.txt", "y\n", "more");
    assert_eq!(merged_now().await, (json!(false), json!(false)));
}

#[tokio::test]
async fn i44_4_git_control_commits_staging_amend_and_a_running_turn_refuses() {
    let remote = Remote::new();
    let server = TestServer::start().await;
    let board = Board::new(&server).await;
    let repo_id = board.repository(&remote.clone, json!({})).await;
    let task = board.task("Control", json!([{"id": repo_id}])).await;
    let (session, worktree) = board.started(&task).await;
    commit_file(&worktree, "one.txt", "1\n", "add one");
    commit_file(&worktree, "two.txt", "2\n", "add two");

    // The branch's own commits, newest first, and one commit's diff.
    let listed = server.call("task.commits", json!({"task_id": task})).await;
    let commits = listed["commits"].as_array().unwrap();
    let summaries: Vec<&str> = commits.iter().map(|c| c["summary"].as_str().unwrap()).collect();
    assert_eq!(summaries, ["add two", "add one"], "{listed}");
    let sha = commits[1]["sha"].as_str().unwrap();
    let diff = server.call("task.commit.diff", json!({"task_id": task, "sha": sha})).await;
    assert_eq!(diff["files"][0]["path"], "one.txt", "{diff}");
    let (code, _) = server.post("task.commit.diff", json!({"task_id": task, "sha": "--all"})).await;
    assert_eq!(code, 422, "a sha is hex");

    // Stage one hunk of a two-hunk change, then commit only what is staged.
    let text: String = (1..=20).map(|n| format!("line {n}\n")).collect();
    commit_file(&worktree, "long.txt", &text, "add long");
    std::fs::write(
        worktree.join("long.txt"),
        text.replace("line 1\n", "LINE 1\n").replace("line 20\n", "LINE 20\n"),
    )
    .unwrap();
    std::fs::write(worktree.join("scratch.txt"), "x\n").unwrap();
    let index = server.call("task.index", json!({"task_id": task})).await;
    let unstaged = &index["repositories"][0]["unstaged"];
    let long = unstaged.as_array().unwrap().iter().find(|f| f["path"] == "long.txt").unwrap();
    assert_eq!(long["hunks"].as_array().unwrap().len(), 2, "{index}");
    let hash = long["diff_hash"].as_str().unwrap().to_owned();
    let staged = server
        .call(
            "task.stage",
            json!({"task_id": task, "path": "long.txt", "hunk": 1, "diff_hash": hash}),
        )
        .await;
    let staged_files = staged["index"]["staged"].as_array().unwrap();
    assert_eq!(staged_files.len(), 1, "{staged}");
    assert_eq!(
        staged_files[0]["hunks"][0]["lines"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|l| l["kind"] == "added")
            .count(),
        1
    );
    // The same hunk from the old diff: refused, nothing applied twice.
    let (code, body) = server
        .post(
            "task.stage",
            json!({"task_id": task, "path": "long.txt", "hunk": 1, "diff_hash": hash}),
        )
        .await;
    assert_eq!(code, 409, "{body}");
    assert!(body["message"].as_str().unwrap().contains("changed since it was shown"), "{body}");
    let committed = server
        .call("task.commit", json!({"task_id": task, "message": "the end", "staged_only": true}))
        .await;
    assert_eq!(committed["commit"]["files_changed"], 1, "{committed}");
    assert!(git(&worktree, &["status", "--porcelain"]).contains("?? scratch.txt"));
    assert!(git(&worktree, &["diff"]).contains("+LINE 1"), "the unstaged hunk is still there");

    // Discard the untracked file, stage the rest and amend the last commit.
    server.call("task.discard", json!({"task_id": task, "path": "scratch.txt"})).await;
    assert!(!worktree.join("scratch.txt").exists());
    server.call("task.stage", json!({"task_id": task, "path": "long.txt"})).await;
    let amended = server.call("task.amend", json!({"task_id": task, "message": "both ends"})).await;
    assert_eq!(amended["commit"]["summary"], "both ends", "{amended}");
    assert_eq!(git(&worktree, &["status", "--porcelain"]), "");
    assert_eq!(git(&worktree, &["log", "-1", "--format=%s"]), "both ends");

    // While a turn runs, what changes the worktree is refused with the reason; reading is not.
    std::fs::write(worktree.join("late.txt"), "x\n").unwrap();
    server.call("message.add", json!({"session_id": session, "content": "#!mock\nhang"})).await;
    server.wait_state(&session, "RUNNING").await;
    for (action, body) in [
        ("task.stage", json!({"task_id": task, "path": "late.txt"})),
        ("task.discard", json!({"task_id": task, "path": "late.txt"})),
        ("task.amend", json!({"task_id": task})),
        ("task.commit", json!({"task_id": task, "message": "x", "staged_only": true})),
    ] {
        let (code, reply) = server.post(action, body).await;
        assert_eq!(code, 409, "{action}: {reply}");
        assert!(reply["message"].as_str().unwrap().contains("a turn is running"), "{reply}");
    }
    server.call("task.index", json!({"task_id": task})).await;
    assert!(worktree.join("late.txt").exists());
    server.call("agent.cancel", json!({"session_id": session})).await;
    server.wait_state(&session, "WAITING_FOR_INPUT").await;
    server.call("task.stage", json!({"task_id": task, "path": "late.txt"})).await;
}

#[tokio::test]
async fn i16_a4_push_and_a_non_fast_forward_is_refused_without_force() {
    let remote = Remote::new();
    let server = TestServer::start().await;
    let board = Board::new(&server).await;
    let repo_id = board.repository(&remote.clone, json!({})).await;
    let task = board.task("Push me", json!([{"id": repo_id}])).await;
    let (_s, worktree) = board.started(&task).await;
    let branch = git(&worktree, &["symbolic-ref", "--short", "HEAD"]);
    assert_eq!(remote.origin_ref(&branch), None, "nothing is pushed without an action");

    let head = commit_file(&worktree, "work.txt", "work\n", "work");
    let pushed = server.call("task.push", json!({"task_id": task})).await;
    assert_eq!(pushed["pushed"][0]["head"], head.as_str(), "{pushed}");
    assert_eq!(remote.origin_ref(&branch).as_deref(), Some(head.as_str()));
    assert_eq!(pushed["repositories"][0]["remote"]["pushed_head"], head.as_str());

    // Someone else pushes to the task branch; our next push is not a fast-forward.
    let other = remote.other("other");
    git(&other, &["checkout", "-q", &branch]);
    let theirs = commit_file(&other, "theirs.txt", "theirs\n", "theirs");
    git(&other, &["push", "-q", "origin", &branch]);
    commit_file(&worktree, "more.txt", "more\n", "more work");
    let (code, body) = server.post("task.push", json!({"task_id": task})).await;
    assert_eq!(code, 409, "{body}");
    assert!(body["message"].as_str().unwrap().contains("non-fast-forward"), "{body}");
    assert_eq!(remote.origin_ref(&branch).as_deref(), Some(theirs.as_str()), "nothing forced");
}

/// What the fake forge saw: method, path, auth header, JSON body.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    auth: Option<String>,
    body: Value,
}

/// A fake GitHub and GitLab on loopback: records every request; answers create, get and
/// commit status like the real APIs do (the fields Kandev reads). `state` is what a get says.
struct FakeForge {
    url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    state: Arc<Mutex<String>>,
    _task: tokio::task::JoinHandle<()>,
}

impl FakeForge {
    async fn start() -> FakeForge {
        let seen = Arc::new(Mutex::new(vec![]));
        let state = Arc::new(Mutex::new("open".to_owned()));
        let (seen2, state2) = (seen.clone(), state.clone());
        let app = axum::Router::new().fallback(
            move |method: axum::http::Method,
                  uri: axum::http::Uri,
                  headers: axum::http::HeaderMap,
                  body: axum::body::Bytes| {
                let (seen, state) = (seen2.clone(), state2.clone());
                async move {
                    let auth = headers
                        .get("authorization")
                        .or_else(|| headers.get("private-token"))
                        .map(|v| v.to_str().unwrap().to_owned());
                    let path = uri.path().to_owned();
                    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    seen.lock().unwrap().push(Seen {
                        method: method.to_string(),
                        path: path.clone(),
                        auth,
                        body: body.clone(),
                    });
                    let state = state.lock().unwrap().clone();
                    let answer = fake_answer(&method, &path, &body, &state);
                    axum::Json(answer)
                }
            },
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        FakeForge { url, seen, state, _task: task }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

fn fake_answer(method: &axum::http::Method, path: &str, body: &Value, state: &str) -> Value {
    let github_pr = |head: &str, base: &str| {
        json!({"number": 7, "html_url": "http://forge.test/acme/widget/pull/7",
               "state": if state == "open" { "open" } else { "closed" },
               "merged": state == "merged",
               "merged_at": if state == "merged" { json!("2026-01-01T00:00:00Z") } else { Value::Null },
               "head": {"ref": head, "sha": "abc123"}, "base": {"ref": base}})
    };
    let gitlab_mr = |source: &str, target: &str| {
        json!({"iid": 3, "web_url": "http://forge.test/acme/widget/-/merge_requests/3",
               "state": if state == "open" { "opened" } else { state },
               "source_branch": source, "target_branch": target,
               "head_pipeline": {"status": "running"}})
    };
    let text = |key: &str| body[key].as_str().unwrap_or_default().to_owned();
    match (method.as_str(), path) {
        ("POST", "/repos/acme/widget/pulls") => github_pr(&text("head"), &text("base")),
        ("GET", "/repos/acme/widget/pulls/7") => github_pr("task", "main"),
        ("GET", p) if p.starts_with("/repos/acme/widget/commits/") => {
            json!({"state": "success", "total_count": 1})
        }
        ("POST", "/api/v4/projects/acme%2Fwidget/merge_requests") => {
            gitlab_mr(&text("source_branch"), &text("target_branch"))
        }
        ("GET", "/api/v4/projects/acme%2Fwidget/merge_requests/3") => gitlab_mr("task", "main"),
        _ => json!({"message": "Not Found"}),
    }
}

/// The forge token comes from the environment variable the repository names. Tests cannot
/// set variables (`unsafe` is forbidden), so they name one cargo sets for every test run.
const TOKEN_ENV: &str = "CARGO_PKG_NAME";

/// Issue 50: the forge token variable a repository names is first a secret of the store
/// (the repository's before the workspace's before the server's), and the forge gets its
/// value; the server's environment does not need the variable.
#[tokio::test]
async fn i50_3_the_forge_token_comes_from_the_secret_store_most_specific_first() {
    let forge = FakeForge::start().await;
    let server = TestServer::start().await;
    let board = Board::new(&server).await;
    let remote = Remote::new();
    let repo_id = board
        .repository(
            &remote.clone,
            json!({"forge_api_base_url": forge.url, "forge_token_env": "I50_FORGE_TOKEN"}),
        )
        .await;
    for (scope, value) in [
        (json!({}), "from-the-server"),
        (json!({"workspace_id": board.workspace_id}), "from-the-workspace"),
        (json!({"workspace_id": board.workspace_id, "repository_id": repo_id}), "from-the-repo"),
    ] {
        let mut body = scope;
        body["name"] = json!("I50_FORGE_TOKEN");
        body["value"] = json!(value);
        let set = server.call("secret.set", body).await;
        assert!(!set.to_string().contains(value), "no answer returns a value: {set}");
    }
    let task = board.task("Ship with a stored token", json!([{"id": repo_id}])).await;
    let (_s, worktree) = board.started(&task).await;
    commit_file(&worktree, "done.txt", "done\n", "done");
    server.call("task.pr.create", json!({"task_id": task})).await;
    let seen = forge.seen();
    let create = seen.iter().find(|s| s.method == "POST").expect("the pull request was created");
    assert_eq!(create.auth.as_deref(), Some("Bearer from-the-repo"), "{seen:?}");
}

#[tokio::test]
async fn i16_a5_pull_requests_on_github_and_gitlab_reach_the_fake_forge() {
    let forge = FakeForge::start().await;
    let token = std::env::var(TOKEN_ENV).unwrap();
    let server = TestServer::start().await;
    let board = Board::new(&server).await;

    for (forge_name, api_base) in
        [("github", forge.url.clone()), ("gitlab", format!("{}/api/v4", forge.url))]
    {
        let remote = Remote::new();
        let repo_id = board
            .repository(
                &remote.clone,
                json!({"forge_api_base_url": api_base, "forge_token_env": TOKEN_ENV}),
            )
            .await;
        let task = board.task(&format!("Ship via {forge_name}"), json!([{"id": repo_id}])).await;
        let (_s, worktree) = board.started(&task).await;
        let branch = git(&worktree, &["symbolic-ref", "--short", "HEAD"]);

        // Uncommitted work is refused with the files listed; nothing reaches the forge.
        std::fs::write(worktree.join("wip.txt"), "wip").unwrap();
        let before = forge.seen().len();
        let (code, body) = server.post("task.pr.create", json!({"task_id": task})).await;
        assert_eq!(code, 409, "{body}");
        assert_eq!(body["details"]["dirty"], json!(["wip.txt"]), "{body}");
        assert_eq!(forge.seen().len(), before);
        commit_file(&worktree, "wip.txt", "done\n", "finish the work");

        let created = server
            .call("task.pr.create", json!({"task_id": task, "body": "the description"}))
            .await;
        let pr = &created["pull_requests"][0];
        assert_eq!(pr["forge"], forge_name, "{created}");
        assert_eq!(pr["state"], "open");
        assert_eq!(
            remote.origin_ref(&branch),
            Some(git(&worktree, &["rev-parse", "HEAD"])),
            "pushed first"
        );

        let seen = forge.seen();
        let creates: Vec<&Seen> = seen[before..].iter().filter(|s| s.method == "POST").collect();
        assert_eq!(creates.len(), 1, "{seen:?}");
        let call = creates[0];
        match forge_name {
            "github" => {
                assert_eq!(call.path, "/repos/acme/widget/pulls");
                assert_eq!(call.auth.as_deref(), Some(format!("Bearer {token}").as_str()));
                assert_eq!(call.body["head"], branch.as_str());
                assert_eq!(call.body["base"], "main");
                assert_eq!(call.body["title"], format!("Ship via {forge_name}"));
                assert_eq!(call.body["body"], "the description");
                assert_eq!(pr["number"], 7);
            }
            _ => {
                assert_eq!(call.path, "/api/v4/projects/acme%2Fwidget/merge_requests");
                assert_eq!(call.auth.as_deref(), Some(token.as_str()));
                assert_eq!(call.body["source_branch"], branch.as_str());
                assert_eq!(call.body["target_branch"], "main");
                assert_eq!(call.body["title"], format!("Ship via {forge_name}"));
                assert_eq!(call.body["description"], "the description");
                assert_eq!(pr["number"], 3);
            }
        }

        // The forge merges it; task.pr.get reflects that, and the card's status shows it.
        *forge.state.lock().unwrap() = "merged".to_owned();
        let got = server.call("task.pr.get", json!({"task_id": task})).await;
        assert_eq!(got["pull_requests"][0]["state"], "merged", "{got}");
        let status = server.call("task.git_status", json!({"task_id": task})).await;
        assert_eq!(status["repositories"][0]["pr"]["state"], "merged", "{status}");
        // Issue 18: the change is a note in the session and a notification record.
        let list = server.call("notification.list", json!({})).await;
        let changed: Vec<&Value> = list["notifications"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|n| n["kind"] == "pr_state_changed" && n["task_id"] == task.as_str())
            .collect();
        assert_eq!(changed.len(), 1, "{list}");
        assert_eq!(changed[0]["data"]["state"], "merged");
        assert!(changed[0]["title"].as_str().unwrap().ends_with("is merged (was open)"));
        *forge.state.lock().unwrap() = "open".to_owned();
    }
    // Every call went to the fake forge, with a token.
    assert!(forge.seen().iter().all(|s| s.auth.as_deref().is_some_and(|a| a.contains(&token))));
}

#[tokio::test]
async fn i16_a6_review_comments_are_stored_and_submitted_as_one_prompt() {
    let remote = Remote::new();
    let server = TestServer::start().await;
    let board = Board::new(&server).await;
    let repo_id = board.repository(&remote.clone, json!({})).await;
    let task = board.task("Review me", json!([{"id": repo_id}])).await;
    let (session, worktree) = board.started(&task).await;
    commit_file(&worktree, "src/lib.rs", "fn a() {}\nfn b() {}\n", "add lib");

    let first = server
        .call(
            "review.comment.add",
            json!({"task_id": task, "path": "src/lib.rs", "line": 2, "side": "new", "text": "rename b"}),
        )
        .await;
    assert_eq!(first["comment"]["quote"], "fn b() {}", "{first}");
    let second = server
        .call(
            "review.comment.add",
            json!({"task_id": task, "path": "README.md", "line": 1, "text": "typo here"}),
        )
        .await;
    let second_id = second["comment"]["id"].as_str().unwrap();
    server.call("review.comment.update", json!({"id": second_id, "text": "fix the typo"})).await;
    let (code, _) = server
        .post(
            "review.comment.add",
            json!({"task_id": task, "path": "../x", "line": 1, "text": "x"}),
        )
        .await;
    assert_eq!(code, 422);

    let listed = server.call("review.comment.list", json!({"task_id": task})).await;
    let comments = listed["comments"].as_array().unwrap();
    assert_eq!(comments.len(), 2, "{listed}");
    assert_eq!(comments[1]["text"], "fix the typo");

    let mut ws = server.ws().await;
    ws.call("subscribe", json!({"topics": [format!("session:{session}")]})).await;
    let submitted = server.call("review.submit", json!({"task_id": task})).await;
    assert_eq!(submitted["comments"].as_array().unwrap().len(), 2, "{submitted}");
    assert_eq!(submitted["queued"], false);
    ws.notification("session.turn.completed").await;
    let messages = server.messages(&session).await;
    let users = of_kind(&messages, "user");
    let prompt = users.last().unwrap()["content"].as_str().unwrap();
    assert!(prompt.contains("src/lib.rs:2\n> fn b() {}\nrename b"), "{prompt}");
    assert!(prompt.contains("README.md:1\n"), "{prompt}");
    assert!(prompt.contains("fix the typo"), "{prompt}");
    let agent = of_kind(&messages, "agent");
    assert_eq!(agent.last().unwrap()["content"], "echo: Please address these review comments:");

    let listed = server.call("review.comment.list", json!({"task_id": task})).await;
    assert!(listed["comments"].as_array().unwrap().iter().all(|c| c["sent_at"].is_string()));
    let (code, body) = server.post("review.submit", json!({"task_id": task})).await;
    assert_eq!(code, 422, "nothing open to send: {body}");
}

#[tokio::test]
async fn i44_1_review_threads_reply_resolve_and_say_when_their_lines_changed() {
    let remote = Remote::new();
    let server = TestServer::start().await;
    let board = Board::new(&server).await;
    let repo_id = board.repository(&remote.clone, json!({})).await;
    let task = board.task("Threads", json!([{"id": repo_id}])).await;
    let (session, worktree) = board.started(&task).await;
    commit_file(&worktree, "src/lib.rs", "fn a() {}\nfn b() {}\n", "add lib");
    let add = |body: Value| server.call("review.comment.add", body);
    let id = |v: &Value| v["comment"]["id"].as_str().unwrap().to_owned();

    let a =
        id(&add(json!({"task_id": task, "path": "src/lib.rs", "line": 1, "text": "doc a"})).await);
    // Thread b is on a range of lines, 1 to 2.
    let b = add(json!({"task_id": task, "path": "src/lib.rs", "start_line": 1, "line": 2, "text": "rename b"})).await;
    assert_eq!(b["comment"]["quote"], "fn a() {}\nfn b() {}", "{b}");
    let b = id(&b);
    let (code, _) = server
        .post(
            "review.comment.add",
            json!({"task_id": task, "path": "src/lib.rs", "start_line": 3, "line": 2, "text": "x"}),
        )
        .await;
    assert_eq!(code, 422, "a range that ends before it starts");
    // A reply lands on its thread's line, whatever the request said.
    let reply = add(json!({"task_id": task, "path": "README.md", "line": 9, "text": "and its callers", "thread_id": b})).await;
    assert_eq!(reply["comment"]["thread_id"], b.as_str(), "{reply}");
    assert_eq!(
        (&reply["comment"]["path"], &reply["comment"]["line"]),
        (&json!("src/lib.rs"), &json!(2))
    );
    assert_eq!(reply["comment"]["start_line"], 1);
    // Replies are to a thread's first comment, and threads are resolved there.
    let (code, _) = server
        .post(
            "review.comment.add",
            json!({"task_id": task, "path": "x", "line": 1, "text": "x", "thread_id": id(&reply)}),
        )
        .await;
    assert_eq!(code, 422);
    let (code, _) =
        server.post("review.thread.resolve", json!({"id": id(&reply), "resolved": true})).await;
    assert_eq!(code, 422);
    let resolved = server.call("review.thread.resolve", json!({"id": a, "resolved": true})).await;
    assert!(resolved["comment"]["resolved_at"].is_string(), "{resolved}");

    // Only the open thread is sent, its first comment then its reply.
    let mut ws = server.ws().await;
    ws.call("subscribe", json!({"topics": [format!("session:{session}")]})).await;
    let submitted = server.call("review.submit", json!({"task_id": task})).await;
    let sent: Vec<&str> = submitted["comments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["text"].as_str().unwrap())
        .collect();
    assert_eq!(sent, ["rename b", "and its callers"], "{submitted}");
    ws.notification("session.turn.completed").await;
    let messages = server.messages(&session).await;
    let prompt = of_kind(&messages, "user").last().unwrap()["content"].as_str().unwrap().to_owned();
    assert!(!prompt.contains("doc a"), "{prompt}");
    assert!(prompt.contains("src/lib.rs:1-2 (a reply in the thread on these lines)\n> fn a() {}\n> fn b() {}\nand its callers"), "{prompt}");

    // After the agent's turn: a reply opens the resolved thread again.
    add(json!({"task_id": task, "path": "src/lib.rs", "line": 1, "text": "still missing", "thread_id": a})).await;
    // The agent changes line 2 only: thread b says its line changed, thread a does not.
    commit_file(&worktree, "src/lib.rs", "fn a() {}\nfn bee() {}\n", "rename b");
    let listed = server.call("review.comment.list", json!({"task_id": task})).await;
    let comments = listed["comments"].as_array().unwrap();
    let of = |id: &str| comments.iter().find(|c| c["id"] == id).unwrap().clone();
    assert!(of(&a)["resolved_at"].is_null(), "{listed}");
    assert_eq!(of(&a)["outdated"], false, "{listed}");
    assert_eq!(of(&b)["outdated"], true, "{listed}");

    // A reply sent in thread b says its lines changed since the quote.
    add(json!({"task_id": task, "path": "x", "line": 1, "text": "look again", "thread_id": b}))
        .await;
    server.call("review.submit", json!({"task_id": task})).await;
    ws.notification("session.turn.completed").await;
    let messages = server.messages(&session).await;
    let prompt = of_kind(&messages, "user").last().unwrap()["content"].as_str().unwrap().to_owned();
    assert!(
        prompt.contains("src/lib.rs:1-2 (a reply in the thread on these lines) (these lines have changed since; quoted as they were)"),
        "{prompt}"
    );
    assert!(
        prompt.contains(
            "src/lib.rs:1 (a reply in the thread on these lines)\n> fn a() {}\nstill missing"
        ),
        "thread a's line did not change: {prompt}"
    );

    // Deleting a thread's first comment deletes the thread.
    server.call("review.comment.delete", json!({"id": b})).await;
    let listed = server.call("review.comment.list", json!({"task_id": task})).await;
    let left: Vec<&str> = listed["comments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["text"].as_str().unwrap())
        .collect();
    assert_eq!(left, ["doc a", "still missing"], "{listed}");
}

/// Waits (bounded) for a notification `action` on `ws` whose payload satisfies `wanted`.
async fn wait_for(ws: &mut common::Ws, action: &str, wanted: impl Fn(&Value) -> bool) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        assert!(std::time::Instant::now() < deadline, "no matching {action} in time");
        let frame = ws.notification(action).await;
        if wanted(&frame["payload"]) {
            return frame["payload"].clone();
        }
    }
}

/// A board whose PR step opens a pull request on entry and follows its state.
const PR_FLOW: &str = "version: 1
kind: kandev-workflow
workflows:
  - name: PR flow
    steps:
      - name: Backlog
      - name: PR
        events:
          on_enter: [{type: create_pull_request}]
          on_pr_merged: [{type: move_to_step, step: Done}]
          on_pr_closed: [{type: move_to_step, step: Backlog}]
      - name: Done
";

#[tokio::test]
async fn i16_a5_the_create_pull_request_action_reaches_the_fake_forge_and_its_state_moves_the_task()
{
    let forge = FakeForge::start().await;
    let token = std::env::var(TOKEN_ENV).unwrap();
    // Polling every 50 ms: the test waits for the moves it causes, never sleeps.
    let server = TestServer::start_tuned(
        kandev_server::ServerConfig::default(),
        tempfile::tempdir().unwrap(),
        |c| c.pr_poll_interval = std::time::Duration::from_millis(50),
    )
    .await;
    let board = Board::imported(&server, PR_FLOW).await;

    for (forge_name, api_base, settles, lands_in) in [
        ("github", forge.url.clone(), "merged", "Done"),
        ("gitlab", format!("{}/api/v4", forge.url), "closed", "Backlog"),
    ] {
        *forge.state.lock().unwrap() = "open".to_owned();
        let remote = Remote::new();
        let repo_id = board
            .repository(
                &remote.clone,
                json!({"forge_api_base_url": api_base, "forge_token_env": TOKEN_ENV}),
            )
            .await;
        let title = format!("Flow via {forge_name}");
        let task = board.task(&title, json!([{"id": repo_id}])).await;
        let (_session, worktree) = board.started(&task).await;
        let branch = git(&worktree, &["symbolic-ref", "--short", "HEAD"]);
        let head = commit_file(&worktree, "feature.txt", "feature\n", "add the feature");
        let before = forge.seen().len();
        assert_eq!(remote.origin_ref(&branch), None, "nothing pushed before the action");

        let mut ws = board.watch().await;
        server.call("task.move", json!({"id": task, "step_id": board.step("PR")})).await;
        // The action ran: the task's published git status carries the pull request.
        let status = wait_for(&mut ws, "task.git_status", |p| {
            p["task_id"] == task.as_str() && p["repositories"][0]["pr"].is_object()
        })
        .await;
        assert_eq!(status["repositories"][0]["pr"]["forge"], forge_name, "{status}");
        assert_eq!(remote.origin_ref(&branch).as_deref(), Some(head.as_str()), "pushed first");
        let seen = forge.seen();
        let creates: Vec<&Seen> = seen[before..].iter().filter(|s| s.method == "POST").collect();
        assert_eq!(creates.len(), 1, "{seen:?}");
        let call = creates[0];
        match forge_name {
            "github" => {
                assert_eq!(call.path, "/repos/acme/widget/pulls");
                assert_eq!(call.auth.as_deref(), Some(format!("Bearer {token}").as_str()));
                assert_eq!(call.body["head"], branch.as_str());
                assert_eq!(call.body["base"], "main");
                assert_eq!(call.body["title"], title.as_str());
                assert!(call.body["body"].as_str().unwrap().contains("add the feature"));
            }
            _ => {
                assert_eq!(call.path, "/api/v4/projects/acme%2Fwidget/merge_requests");
                assert_eq!(call.auth.as_deref(), Some(token.as_str()));
                assert_eq!(call.body["source_branch"], branch.as_str());
                assert_eq!(call.body["target_branch"], "main");
                assert_eq!(call.body["title"], title.as_str());
                assert!(call.body["description"].as_str().unwrap().contains("add the feature"));
            }
        }
        assert_eq!(
            board.step_of(&task).await,
            board.step("PR"),
            "no move before the forge says so"
        );

        // The forge settles the pull request; polling sees it and the step's trigger moves
        // the task, once.
        *forge.state.lock().unwrap() = settles.to_owned();
        let moved = wait_for(&mut ws, "task.moved", |p| p["task"]["id"] == task.as_str()).await;
        assert_eq!(moved["task"]["step_id"], board.step(lands_in).as_str(), "{moved}");
        assert_eq!(moved["trigger"], format!("on_pr_{settles}"));
        let got = server.call("task.pr.get", json!({"task_id": task})).await;
        assert_eq!(got["pull_requests"][0]["state"], settles, "{got}");
        assert_eq!(board.step_of(&task).await, board.step(lands_in), "moved once");
    }
}

/// A board whose steps rebase and push after each turn, then move on.
const TURN_FLOW: &str = "version: 1
kind: kandev-workflow
workflows:
  - name: Turn flow
    steps:
      - name: Backlog
      - name: Work
        events:
          on_turn_complete: [{type: rebase}, {type: push}, {type: move_to_next}]
      - name: Check
        events:
          on_turn_complete: [{type: rebase}, {type: push}, {type: move_to_next}]
      - name: Done
";

#[tokio::test]
async fn i16_a4_ship_actions_after_a_turn_run_in_order_and_a_failure_stores_ship_failed() {
    let remote = Remote::new();
    let server = TestServer::start().await;
    let board = Board::imported(&server, TURN_FLOW).await;
    let repo_id = board.repository(&remote.clone, json!({})).await;
    let task = board.task("Turn flow", json!([{"id": repo_id}])).await;
    let (session, worktree) = board.started(&task).await;
    let branch = git(&worktree, &["symbolic-ref", "--short", "HEAD"]);
    server.call("task.move", json!({"id": task, "step_id": board.step("Work")})).await;

    // A clean case: the base moved, the turn ends, the branch is rebased, pushed, moved on.
    commit_file(&worktree, "README.md", "line one\ntask's line two\n", "task edits readme");
    commit_file(&remote.clone, "base.txt", "base moved\n", "base moves");
    let mut ws = board.watch().await;
    server.turn(&session, "go").await;
    let moved = wait_for(&mut ws, "task.moved", |p| p["task"]["id"] == task.as_str()).await;
    assert_eq!(moved["task"]["step_id"], board.step("Check").as_str(), "{moved}");
    assert!(worktree.join("base.txt").exists(), "rebased onto the moved base");
    let head = git(&worktree, &["rev-parse", "HEAD"]);
    assert_eq!(remote.origin_ref(&branch).as_deref(), Some(head.as_str()), "then pushed");
    let notes = server.messages(&session).await;
    let notes: Vec<&str> =
        of_kind(&notes, "status").iter().map(|m| m["content"].as_str().unwrap()).collect();
    assert!(
        notes.iter().any(|n| n.starts_with("workflow step Work: rebased onto main")),
        "{notes:?}"
    );
    assert!(notes.iter().any(|n| n.starts_with("workflow step Work: pushed kandev/")), "{notes:?}");
    // The card's summary is stored with the published status.
    let card = server.call("task.get", json!({"id": task})).await;
    assert_eq!(
        card["task"]["git"],
        json!({"ahead": 1, "behind": 0, "dirty": 0, "conflicts": 0, "pr_state": null, "merged": false}),
        "{card}"
    );

    // A conflicting base: the rebase fails, so neither the push nor the move runs.
    commit_file(&remote.clone, "README.md", "line one\nbase's line two\n", "base edits readme");
    commit_file(&worktree, "more.txt", "more\n", "more work");
    let head_before = git(&worktree, &["rev-parse", "HEAD"]);
    server.turn(&session, "again").await;
    let failed = server.wait_last_error(&session).await;
    let error = &failed["last_error"];
    assert_eq!(error["code"], "ship_failed", "{failed}");
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("rebase action of step Check failed"), "{message}");
    assert!(message.contains("README.md"), "{message}");
    assert_eq!(git(&worktree, &["rev-parse", "HEAD"]), head_before, "the branch is unchanged");
    assert_eq!(remote.origin_ref(&branch).as_deref(), Some(head.as_str()), "not pushed");
    assert_eq!(board.step_of(&task).await, board.step("Check"), "not moved");
    let errors = server.messages(&session).await;
    assert!(of_kind(&errors, "error").iter().any(|m| m["content"] == error["message"]));
}

/// A board whose Ship step opens a pull request, then starts the agent.
const ENTER_FLOW: &str = "version: 1
kind: kandev-workflow
workflows:
  - name: Enter flow
    steps:
      - name: Backlog
      - name: Ship
        prompt: describe the pull request
        events:
          on_enter: [{type: create_pull_request}, {type: auto_start_agent}]
";

#[tokio::test]
async fn i16_a5_a_refused_pull_request_action_stops_the_rest_of_on_enter_and_reaches_no_forge() {
    let forge = FakeForge::start().await;
    let remote = Remote::new();
    let server = TestServer::start().await;
    let board = Board::imported(&server, ENTER_FLOW).await;
    let repo_id = board
        .repository(
            &remote.clone,
            json!({"forge_api_base_url": forge.url, "forge_token_env": TOKEN_ENV}),
        )
        .await;
    let task = board.task("Refused", json!([{"id": repo_id}])).await;
    let (session, worktree) = board.started(&task).await;
    commit_file(&worktree, "done.txt", "done\n", "done");
    std::fs::write(worktree.join("wip.txt"), "wip").unwrap();

    server.call("task.move", json!({"id": task, "step_id": board.step("Ship")})).await;
    let failed = server.wait_last_error(&session).await;
    let error = &failed["last_error"];
    assert_eq!(error["code"], "ship_failed", "{failed}");
    let details: Value = match &error["details"] {
        Value::String(text) => serde_json::from_str(text).unwrap(),
        other => other.clone(),
    };
    assert_eq!(details["details"]["dirty"], json!(["wip.txt"]), "{details}");
    assert_eq!(details["action"], "create_pull_request");
    assert!(forge.seen().is_empty(), "nothing reached the forge");
    // The actor handles one command at a time: by the time this turn ran, whatever followed
    // the failed action would have run.
    let messages = server.turn(&session, "hello").await;
    let users: Vec<&Value> = of_kind(&messages, "user").iter().map(|m| &m["content"]).collect();
    assert_eq!(users, [&json!("hello")], "auto_start_agent did not run");
}
