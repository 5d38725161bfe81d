//! Issue 16: the git side of shipping on real repositories in temp dirs, for what the API
//! tests do not reach: merging into a base branch that is checked out nowhere (the ref moves
//! by compare-and-set, no checkout is touched) and copying files never through a symlink.

use std::os::unix::fs::symlink;
use std::path::Path;

use kandev_runtime::git::{GitError, MergeStrategy, copy_ignored_files, merge_into_base, status};
use kandev_testkit::git::{git, init};

fn commit(repo: &Path, path: &str, content: &str) -> String {
    kandev_testkit::git::commit(repo, &[(path, content)], path)
}

/// A repository on `work` (so `main` is checked out nowhere) with `task` branched off `main`.
fn repository() -> (tempfile::TempDir, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    init(&repo);
    commit(&repo, "README.md", "a\nb\n");
    git(&repo, &["checkout", "-q", "-b", "task"]);
    commit(&repo, "task.txt", "task\n");
    git(&repo, &["checkout", "-q", "-b", "work", "main"]);
    (tmp, repo)
}

#[tokio::test]
async fn i16_a3_a_base_checked_out_nowhere_moves_by_ref_and_conflicts_change_nothing() {
    let (_tmp, repo) = repository();
    let main_before = git(&repo, &["rev-parse", "main"]);
    let landed =
        merge_into_base(&repo, "main", "task", MergeStrategy::Merge, "land").await.unwrap();
    assert_eq!(landed.head, git(&repo, &["rev-parse", "task"]));
    let merged = landed.commit;
    assert_eq!(git(&repo, &["rev-parse", "main"]), merged);
    assert_eq!(git(&repo, &["rev-parse", &format!("{merged}^1")]), main_before);
    assert_eq!(
        git(&repo, &["rev-parse", &format!("{merged}^2")]),
        git(&repo, &["rev-parse", "task"])
    );
    assert_eq!(git(&repo, &["status", "--porcelain"]), "", "the checkout of `work` is untouched");
    assert!(!repo.join("task.txt").exists(), "`work` does not get the file");

    // A conflicting change on both sides: refused, listing the file; `main` stays.
    git(&repo, &["checkout", "-q", "task"]);
    commit(&repo, "README.md", "a\ntask\n");
    git(&repo, &["checkout", "-q", "work"]);
    git(&repo, &["branch", "-f", "main-side", "main"]);
    git(&repo, &["checkout", "-q", "main-side"]);
    let side = commit(&repo, "README.md", "a\nbase\n");
    git(&repo, &["checkout", "-q", "work"]);
    git(&repo, &["update-ref", "refs/heads/main", &side]);
    let err =
        merge_into_base(&repo, "main", "task", MergeStrategy::Squash, "land").await.unwrap_err();
    match err {
        GitError::MergeConflicts { files, .. } => assert_eq!(files, ["README.md"]),
        other => panic!("expected conflicts, got {other}"),
    }
    assert_eq!(git(&repo, &["rev-parse", "main"]), side);
    assert!(matches!(
        merge_into_base(&repo, "origin/main", "task", MergeStrategy::Merge, "x").await,
        Err(GitError::BaseNotLocal { .. })
    ));
}

#[tokio::test]
async fn i16_a2_status_counts_ahead_behind_and_lists_conflicts() {
    let (_tmp, repo) = repository();
    git(&repo, &["checkout", "-q", "task"]);
    let s = status(&repo, "main").await.unwrap();
    assert_eq!((s.ahead, s.behind), (1, 0));
    assert!(s.conflicts_with_base.is_empty() && s.dirty.is_clean() && s.upstream.is_none());
    std::fs::write(repo.join("new.txt"), "x").unwrap();
    let s = status(&repo, "main").await.unwrap();
    assert_eq!(s.dirty.untracked, ["new.txt"]);
}

#[tokio::test]
async fn i16_a1_copied_files_never_go_through_a_symlinked_folder() {
    let (tmp, repo) = repository();
    std::fs::write(repo.join(".gitignore"), "conf/\n.env\n").unwrap();
    std::fs::create_dir(repo.join("conf")).unwrap();
    std::fs::write(repo.join("conf/local.cfg"), "secret").unwrap();
    std::fs::write(repo.join(".env"), "A=1").unwrap();
    let worktree = tmp.path().join("wt");
    git(&repo, &["worktree", "add", "-q", worktree.to_str().unwrap(), "task"]);
    let outside = tmp.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    symlink(&outside, worktree.join("conf")).unwrap();
    let globs = vec!["conf/*".to_owned(), ".env".to_owned()];
    let copied = copy_ignored_files(&repo, &worktree, &globs).await.unwrap();
    assert_eq!(copied, [".env"]);
    assert!(!outside.join("local.cfg").exists(), "nothing written through the link");
    // A second run copies nothing: existing files are never overwritten.
    std::fs::write(worktree.join(".env"), "mine").unwrap();
    assert!(copy_ignored_files(&repo, &worktree, &globs).await.unwrap().is_empty());
    assert_eq!(std::fs::read_to_string(worktree.join(".env")).unwrap(), "mine");
}

/// Issue 20 (SSH executor): the task branch of a build host's repository is fetched into the
/// server's repository beside its branches, and becomes the branch of the same name only by
/// compare-and-set: made when
/// missing, moved forward, replaced after a rebase there when it is what the last fetch
/// brought; a branch of that name with other commits, or a checked-out one that would have
/// to move, is refused and left as it was. (The URL is a local path here: the same `git
/// fetch`, without ssh.)
#[tokio::test]
async fn i20_a3_a_fetched_task_branch_never_overwrites_other_commits() {
    use kandev_runtime::git::{INCOMING_PREFIX, fetch_over_ssh, take_fetched};
    let (_host_dir, host) = repository();
    let server_dir = tempfile::tempdir().unwrap();
    let server = server_dir.path().join("server");
    git(server_dir.path(), &["clone", "-q", "--branch", "main", host.to_str().unwrap(), "server"]);
    let url = host.display().to_string();
    let branch_of = |name: &str| git(&server, &["rev-parse", &format!("refs/heads/{name}")]);

    let fetch = |server: std::path::PathBuf, url: String| async move {
        fetch_over_ssh(&server, &url, "task", "ssh").await?;
        take_fetched(&server, "task").await
    };

    // Fetched: no branch changes. Missing: made.
    let first = git(&host, &["rev-parse", "task"]);
    assert_eq!(fetch_over_ssh(&server, &url, "task", "ssh").await.unwrap(), first);
    assert_eq!(git(&server, &["rev-parse", &format!("{INCOMING_PREFIX}task")]), first);
    let listed = git(&server, &["branch", "--list", "--format=%(refname:short)"]);
    assert_eq!(listed, "main", "fetching makes no branch");
    assert_eq!(take_fetched(&server, "task").await.unwrap(), first);
    assert_eq!(branch_of("task"), first);

    // Moved forward on the host: follows.
    git(&host, &["checkout", "-q", "task"]);
    let second = commit(&host, "more.txt", "more\n");
    assert_eq!(fetch(server.clone(), url.clone()).await.unwrap(), second);
    assert_eq!(branch_of("task"), second);

    // Rewritten on the host (a rebase there): replaces what the last fetch brought.
    git(&host, &["commit", "-q", "--amend", "-m", "more, reworded"]);
    let rewritten = git(&host, &["rev-parse", "HEAD"]);
    assert_eq!(fetch(server.clone(), url.clone()).await.unwrap(), rewritten);
    assert_eq!(branch_of("task"), rewritten);

    // A commit made on the server's branch: not the last fetch, not an ancestor: refused.
    git(&server, &["config", "user.name", "T"]);
    git(&server, &["config", "user.email", "t@example.com"]);
    git(&server, &["checkout", "-q", "task"]);
    let local = commit(&server, "local.txt", "made here\n");
    git(&server, &["checkout", "-q", "main"]);
    let again = commit(&host, "third.txt", "third\n");
    let refused = fetch(server.clone(), url.clone()).await.unwrap_err();
    assert!(matches!(refused, GitError::BranchNotUpdated { .. }), "{refused}");
    assert!(refused.to_string().contains("rename or delete that branch"), "{refused}");
    assert_eq!(branch_of("task"), local, "left as it was");

    // Checked out here and behind: moving it would leave its files behind: refused.
    git(&server, &["branch", "-q", "-f", "task", &rewritten]);
    git(&server, &["checkout", "-q", "task"]);
    let refused = fetch(server.clone(), url.clone()).await.unwrap_err();
    assert!(refused.to_string().contains("checked out there"), "{refused}");
    assert_eq!(branch_of("task"), rewritten, "left as it was");
    git(&server, &["checkout", "-q", "main"]);
    assert_eq!(fetch(server.clone(), url.clone()).await.unwrap(), again);
    assert_eq!(branch_of("task"), again);
}
