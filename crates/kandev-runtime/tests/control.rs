//! Issue 44 item 4: git control of a worktree on real repositories — the branch's commits and
//! each one's diff, staging, unstaging and discarding a file or one hunk, committing what is
//! staged, amending, and a hunk chosen from a diff that changed since being refused.

use kandev_domain::ship::diff_hash;
use kandev_runtime::git::{
    GitError, HunkRef, IndexAction, amend, branch_commits, change_index, commit_changes,
    commit_staged, index_state,
};
use kandev_testkit::git::{commit, git, init};

/// Twenty lines, so a change at each end makes two hunks.
fn lines(first: &str, last: &str) -> String {
    let mut text = format!("{first}\n");
    for n in 2..20 {
        text.push_str(&format!("line {n}\n"));
    }
    text.push_str(&format!("{last}\n"));
    text
}

/// A repository whose `main` holds `a.txt`; the worktree is on `task`, one commit ahead.
fn repository() -> (tempfile::TempDir, std::path::PathBuf, String) {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    init(&repo);
    let base = commit(&repo, &[("a.txt", &lines("top", "bottom"))], "base");
    git(&repo, &["checkout", "-q", "-b", "task"]);
    commit(&repo, &[("b.txt", "task\n")], "add b");
    (tmp, repo, base)
}

fn staged_paths(state: &kandev_runtime::git::IndexState) -> Vec<&str> {
    state.staged.iter().map(|f| f.path.as_str()).collect()
}

fn hunk_of(files: &[kandev_domain::files::FileChange], path: &str, index: usize) -> HunkRef {
    let file = files.iter().find(|f| f.path == path).unwrap();
    HunkRef { index, diff_hash: diff_hash(file) }
}

#[tokio::test]
async fn i44_4_commits_and_their_diffs() {
    let (_tmp, repo, base) = repository();
    commit(&repo, &[("c.txt", "c\n")], "add c");
    let commits = branch_commits(&repo, &base).await.unwrap();
    let summaries: Vec<&str> = commits.iter().map(|c| c.summary.as_str()).collect();
    assert_eq!(summaries, ["add c", "add b"], "newest first, the base's own not listed");
    let diff = commit_changes(&repo, &commits[1].sha).await.unwrap();
    assert_eq!(diff.len(), 1);
    assert_eq!(diff[0].path, "b.txt");
    assert_eq!(diff[0].hunks[0].lines[0].text, "task");
    // The root commit's diff is against nothing.
    let root = commit_changes(&repo, &base).await.unwrap();
    assert_eq!(root[0].path, "a.txt");
    assert!(matches!(
        commit_changes(&repo, "--output=/tmp/x").await,
        Err(GitError::UnknownCommit { .. })
    ));
}

#[tokio::test]
async fn i44_4_stage_unstage_and_discard_one_hunk_or_a_whole_file() {
    let (_tmp, repo, _) = repository();
    std::fs::write(repo.join("a.txt"), lines("TOP", "BOTTOM")).unwrap();
    std::fs::write(repo.join("new.txt"), "new\n").unwrap();
    let state = index_state(&repo).await.unwrap();
    assert!(state.staged.is_empty());
    let a = state.unstaged.iter().find(|f| f.path == "a.txt").unwrap();
    assert_eq!(a.hunks.len(), 2, "{a:?}");

    // Stage the second hunk only: the index has BOTTOM, the worktree still TOP unstaged.
    let hunk = hunk_of(&state.unstaged, "a.txt", 1);
    change_index(&repo, IndexAction::Stage, "a.txt", Some(&hunk)).await.unwrap();
    let staged = git(&repo, &["diff", "--cached"]);
    assert!(staged.contains("+BOTTOM") && !staged.contains("+TOP"), "{staged}");
    // The same hunk again: the diff it came from is gone.
    let err = change_index(&repo, IndexAction::Stage, "a.txt", Some(&hunk)).await.unwrap_err();
    assert!(matches!(err, GitError::DiffChanged { .. }), "{err}");

    // Unstage it again, by hunk, from the staged diff.
    let state = index_state(&repo).await.unwrap();
    let hunk = hunk_of(&state.staged, "a.txt", 0);
    change_index(&repo, IndexAction::Unstage, "a.txt", Some(&hunk)).await.unwrap();
    assert_eq!(git(&repo, &["diff", "--cached"]), "");

    // Discard the first hunk: TOP goes back to top, BOTTOM stays.
    let state = index_state(&repo).await.unwrap();
    let hunk = hunk_of(&state.unstaged, "a.txt", 0);
    change_index(&repo, IndexAction::Discard, "a.txt", Some(&hunk)).await.unwrap();
    assert_eq!(std::fs::read_to_string(repo.join("a.txt")).unwrap(), lines("top", "BOTTOM"));

    // Whole files: stage the untracked file, unstage it, discard it (it is deleted).
    change_index(&repo, IndexAction::Stage, "new.txt", None).await.unwrap();
    assert_eq!(staged_paths(&index_state(&repo).await.unwrap()), ["new.txt"]);
    change_index(&repo, IndexAction::Unstage, "new.txt", None).await.unwrap();
    assert!(index_state(&repo).await.unwrap().staged.is_empty());
    change_index(&repo, IndexAction::Discard, "new.txt", None).await.unwrap();
    assert!(!repo.join("new.txt").exists());
    // Paths leaving the worktree are refused.
    let err = change_index(&repo, IndexAction::Discard, "../x", None).await.unwrap_err();
    assert!(matches!(err, GitError::Forbidden { .. }), "{err}");
}

#[tokio::test]
async fn i44_4_commit_what_is_staged_then_amend() {
    let (_tmp, repo, base) = repository();
    std::fs::write(repo.join("one.txt"), "1\n").unwrap();
    std::fs::write(repo.join("two.txt"), "2\n").unwrap();
    change_index(&repo, IndexAction::Stage, "one.txt", None).await.unwrap();
    let made = commit_staged(&repo, "only one").await.unwrap();
    assert_eq!(made.files_changed, 1);
    assert!(repo.join("two.txt").exists());
    assert_eq!(git(&repo, &["status", "--porcelain"]), "?? two.txt", "two.txt left out");

    change_index(&repo, IndexAction::Stage, "two.txt", None).await.unwrap();
    let amended = amend(&repo, &base, Some("one and two")).await.unwrap();
    assert_eq!(amended.summary, "one and two");
    assert_eq!(amended.files_changed, 2);
    assert_eq!(git(&repo, &["rev-list", "--count", &format!("{base}..HEAD")]), "2");
    let kept = amend(&repo, &base, None).await.unwrap();
    assert_eq!(kept.summary, "one and two", "no message keeps the message");

    // Nothing of the task's to amend: refused.
    let head = git(&repo, &["rev-parse", "HEAD"]);
    let err = amend(&repo, &head, None).await.unwrap_err();
    assert!(matches!(err, GitError::NothingToAmend { .. }), "{err}");
    let err = commit_staged(&repo, "nothing").await.unwrap_err();
    assert!(matches!(err, GitError::NothingToCommit { .. }), "{err}");
}
