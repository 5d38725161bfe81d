//! Issue 6: a git worktree per task and repository, and the branch template, over the API with
//! the mock agent and real git repositories in temp dirs: separate worktrees and branches,
//! archive and delete, unusable repositories, several repositories or none, and (issue 12,
//! finding 6) branch names that never collide.
//!
//! The file and git actions are in `worktree_files.rs`, setup scripts in `worktree_setup.rs`.

use crate::common;

use std::path::{Path, PathBuf};

use common::worktrees::{Board, paths, repository};
use common::{TestServer, of_kind};
use kandev_testkit::git::git;
use serde_json::json;

/// The local branches of a repository.
fn branches(repo: &Path) -> Vec<String> {
    let listed = git(repo, &["for-each-ref", "--format=%(refname:short)", "refs/heads"]);
    listed.lines().map(str::to_owned).collect()
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
