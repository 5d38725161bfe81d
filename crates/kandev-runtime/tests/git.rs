//! Integration tests of the git worktree layer against real repositories in temp dirs.

#![allow(clippy::disallowed_methods, reason = "tests spawn tasks and start processes freely")]

use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use kandev_runtime::git::{
    ChangeStatus, EntryKind, FileChange, GitError, LineKind, OnExistingBranch, WorktreeSpec,
    branch_name, changes, commit_all, create_task_dir, create_worktree, default_branch, is_dirty,
    read_file, remove_worktree, run_setup_script, run_setup_script_streaming, short_id, tree,
};
use kandev_testkit::git::{git, init};
use tempfile::TempDir;

/// Upper bound for anything that should happen promptly.
const DEADLINE: Duration = Duration::from_secs(10);

/// A temp dir holding `repo/` (an initialised repository with a local identity) and room for
/// worktrees under `home/`.
struct Fixture {
    tmp: TempDir,
}

impl Fixture {
    /// A repository with one commit on `main`: README.md, src/lib.txt, delete-me.txt and a
    /// .gitignore ignoring `*.log`.
    fn new() -> Self {
        let fixture = Self::empty();
        let repo = fixture.repo();
        write(&repo.join("README.md"), "hello\n");
        write(&repo.join("src/lib.txt"), "one\ntwo\nthree\n");
        write(&repo.join("delete-me.txt"), "bye\n");
        write(&repo.join(".gitignore"), "*.log\n");
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "-q", "-m", "initial"]);
        fixture
    }

    /// A repository without any commit.
    fn empty() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        init(&tmp.path().join("repo"));
        Self { tmp }
    }

    fn repo(&self) -> PathBuf {
        self.tmp.path().join("repo")
    }

    fn home(&self) -> PathBuf {
        self.tmp.path().join("home")
    }

    fn spec(&self, branch: &str) -> WorktreeSpec {
        WorktreeSpec {
            repo_path: self.repo(),
            base_branch: "main".to_owned(),
            branch: branch.to_owned(),
            existing: OnExistingBranch::Reuse,
            worktree_path: self
                .home()
                .join("worktrees")
                .join(branch.replace('/', "-"))
                .join("repo"),
        }
    }

    fn branches(&self) -> String {
        git(&self.repo(), &["branch", "--list", "--format=%(refname:short)"])
    }

    fn worktree_count(&self) -> usize {
        git(&self.repo(), &["worktree", "list", "--porcelain"])
            .lines()
            .filter(|l| l.starts_with("worktree "))
            .count()
    }
}

fn write(path: &Path, content: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

fn find<'a>(files: &'a [FileChange], path: &str) -> &'a FileChange {
    files.iter().find(|f| f.path == path).unwrap_or_else(|| panic!("{path} not in {files:#?}"))
}

#[tokio::test]
async fn two_worktrees_on_one_repo_are_isolated() {
    let fx = Fixture::new();
    let main_sha = git(&fx.repo(), &["rev-parse", "HEAD"]);
    let (spec_a, spec_b) = (fx.spec("kandev/a-1"), fx.spec("kandev/b-2"));
    let (a, b) = tokio::join!(create_worktree(&spec_a), create_worktree(&spec_b));
    let (a, b) = (a.unwrap(), b.unwrap());

    assert_eq!(a.base_commit, main_sha);
    assert_eq!(b.base_commit, main_sha);
    assert_eq!(a.path, std::fs::canonicalize(&spec_a.worktree_path).unwrap());
    assert_eq!(git(&a.path, &["rev-parse", "--abbrev-ref", "HEAD"]), "kandev/a-1");
    assert_eq!(git(&b.path, &["rev-parse", "--abbrev-ref", "HEAD"]), "kandev/b-2");

    write(&a.path.join("only-in-a.txt"), "a\n");
    write(&a.path.join("src/lib.txt"), "changed in a\n");
    assert!(!b.path.join("only-in-a.txt").exists());
    assert_eq!(std::fs::read_to_string(b.path.join("src/lib.txt")).unwrap(), "one\ntwo\nthree\n");
    assert!(!fx.repo().join("only-in-a.txt").exists());
    assert_eq!(git(&fx.repo(), &["status", "--porcelain"]), "", "main checkout untouched");
    assert_eq!(git(&fx.repo(), &["rev-parse", "--abbrev-ref", "HEAD"]), "main");
    assert_eq!(is_dirty(&a.path).await.unwrap(), 2);
    assert_eq!(is_dirty(&b.path).await.unwrap(), 0);
}

#[test]
fn branch_names_follow_the_template_and_are_valid_refs() {
    let id = "0194f3a2-7b1c-7000-8000-000000000000";
    let short = short_id(id);
    assert_eq!(
        branch_name("", "Fix the login bug", id),
        format!("kandev/fix-the-login-bug-{short}")
    );
    assert_eq!(
        branch_name("kandev/{task-slug}-{short-id}", "Add OAuth (GitHub) support!", id),
        format!("kandev/add-oauth-github-support-{short}")
    );
    assert_eq!(branch_name("tasks/{short-id}", "whatever", id), format!("tasks/{short}"));
    let long = branch_name("", &"very long title ".repeat(10), id);
    let slug = long.strip_prefix("kandev/").unwrap().strip_suffix(&format!("-{short}")).unwrap();
    assert!(slug.len() <= 40, "{slug}");

    let dir = tempfile::tempdir().unwrap();
    for (template, title) in [
        ("", "..weird.lock"),
        ("{task-slug}.lock", "x"),
        (" spaced ~ name/{task-slug}", "héllo wörld"),
        ("-x/.y/@{{short-id}}", "t"),
        ("a//b/", ""),
    ] {
        let name = branch_name(template, title, id);
        git(dir.path(), &["check-ref-format", "--branch", &name]);
    }
}

#[tokio::test]
async fn setup_script_output_is_captured() {
    let fx = Fixture::new();
    let wt = create_worktree(&fx.spec("kandev/setup")).await.unwrap();
    let out = run_setup_script(
        &wt.path,
        "echo to-stdout; echo to-stderr >&2; pwd; touch made-by-setup",
        DEADLINE,
    )
    .await
    .unwrap();
    assert_eq!(out.exit_code, 0);
    assert!(out.output.contains("to-stdout\n"), "{}", out.output);
    assert!(out.output.contains("to-stderr\n"), "{}", out.output);
    assert!(out.output.contains(wt.path.to_str().unwrap()), "runs in the worktree: {}", out.output);
    assert!(wt.path.join("made-by-setup").exists());
}

#[tokio::test]
async fn setup_script_output_streams_while_it_runs() {
    let fx = Fixture::new();
    let wt = create_worktree(&fx.spec("kandev/setup-streams")).await.unwrap();
    let (live, mut seen) = tokio::sync::mpsc::channel(16);
    let script = "echo first; while [ ! -f go ]; do sleep 0.02; done; echo second";
    let run = tokio::spawn({
        let path = wt.path.clone();
        async move { run_setup_script_streaming(&path, script, DEADLINE, Some(live)).await }
    });
    let first = tokio::time::timeout(DEADLINE, seen.recv()).await.unwrap().unwrap();
    assert_eq!(first, "first\n", "sent before the script ends");
    assert!(!run.is_finished());
    std::fs::write(wt.path.join("go"), "").unwrap();
    let out = run.await.unwrap().unwrap();
    assert_eq!(out.output, "first\nsecond\n");
    let mut rest = String::new();
    while let Some(chunk) = seen.recv().await {
        rest.push_str(&chunk);
    }
    assert_eq!(rest, "second\n");
}

#[tokio::test]
async fn failing_setup_script_reports_exit_code_and_last_lines() {
    let fx = Fixture::new();
    let wt = create_worktree(&fx.spec("kandev/setup-fails")).await.unwrap();
    let script =
        "i=1; while [ $i -le 30 ]; do echo line$i; i=$((i+1)); done; echo oops >&2; exit 3";
    let err = run_setup_script(&wt.path, script, DEADLINE).await.unwrap_err();
    let GitError::SetupFailed { exit_code, output_tail } = &err else { panic!("{err:?}") };
    assert_eq!(*exit_code, Some(3));
    let lines: Vec<&str> = output_tail.lines().collect();
    assert_eq!(lines.len(), 20, "{output_tail}");
    assert_eq!(lines.first(), Some(&"line12"));
    assert_eq!(lines.last(), Some(&"oops"));
    let message = err.to_string();
    assert!(message.contains("exit code 3"), "{message}");
    assert!(message.contains("line30\noops"), "{message}");
    assert!(!message.contains("line11\n"), "{message}");
}

#[tokio::test]
async fn setup_script_timeout_kills_its_process_group() {
    let fx = Fixture::new();
    let wt = create_worktree(&fx.spec("kandev/setup-hangs")).await.unwrap();
    let started = Instant::now();
    let script = "sleep 300 & echo $! > bg.pid; echo started; wait";
    let err = run_setup_script(&wt.path, script, Duration::from_millis(500)).await.unwrap_err();
    assert!(started.elapsed() < DEADLINE);
    let GitError::SetupTimedOut { output_tail, .. } = &err else { panic!("{err:?}") };
    assert!(output_tail.contains("started"), "{output_tail}");
    assert!(err.to_string().contains("did not finish"), "{err}");

    let pid: i32 = std::fs::read_to_string(wt.path.join("bg.pid")).unwrap().trim().parse().unwrap();
    let deadline = Instant::now() + DEADLINE;
    while !process_gone(pid) {
        assert!(Instant::now() < deadline, "background process {pid} survived the timeout");
        tokio::task::yield_now().await;
    }
}

#[tokio::test]
async fn a_dropped_setup_script_has_its_process_group_killed() {
    let fx = Fixture::new();
    let wt = create_worktree(&fx.spec("kandev/setup-dropped")).await.unwrap();
    let (live, mut seen) = tokio::sync::mpsc::channel(16);
    let script = "sleep 300 & echo $! > bg.pid; echo started; wait";
    let run = tokio::spawn({
        let path = wt.path.clone();
        async move { run_setup_script_streaming(&path, script, DEADLINE, Some(live)).await }
    });
    let first = tokio::time::timeout(DEADLINE, seen.recv()).await.unwrap().unwrap();
    assert_eq!(first, "started\n");
    run.abort();
    assert!(run.await.unwrap_err().is_cancelled());

    let pid: i32 = std::fs::read_to_string(wt.path.join("bg.pid")).unwrap().trim().parse().unwrap();
    let deadline = Instant::now() + DEADLINE;
    while !process_gone(pid) {
        assert!(Instant::now() < deadline, "background process {pid} survived the drop");
        tokio::task::yield_now().await;
    }
}

#[tokio::test]
async fn a_successful_setup_script_may_leave_background_processes_running() {
    let fx = Fixture::new();
    let wt = create_worktree(&fx.spec("kandev/setup-background")).await.unwrap();
    let script = "sleep 300 > /dev/null 2>&1 & echo $! > bg.pid; echo $$ > group.pid";
    run_setup_script(&wt.path, script, DEADLINE).await.unwrap();
    let read = |name: &str| -> i32 {
        std::fs::read_to_string(wt.path.join(name)).unwrap().trim().parse().unwrap()
    };
    let (pid, pgid) = (read("bg.pid"), read("group.pid"));
    assert!(!process_gone(pid), "the script's background process was killed");
    kandev_runtime::kill_group(pgid).unwrap();
    let deadline = Instant::now() + DEADLINE;
    while !process_gone(pid) {
        assert!(Instant::now() < deadline, "background process {pid} survived kill_group");
        tokio::task::yield_now().await;
    }
}

/// The process no longer runs: it does not exist, or it is a zombie waiting to be reaped.
fn process_gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next())
            .is_some_and(|state| state == 'Z' || state == 'X'),
    }
}

#[tokio::test]
async fn changes_lists_added_modified_deleted_renamed_and_untracked_files() {
    let fx = Fixture::new();
    let wt = create_worktree(&fx.spec("kandev/changes")).await.unwrap();
    let p = &wt.path;
    write(&p.join("src/lib.txt"), "one\nTWO\nthree\n");
    std::fs::remove_file(p.join("delete-me.txt")).unwrap();
    write(&p.join("staged.txt"), "staged\n");
    git(p, &["add", "staged.txt"]);
    git(p, &["mv", "README.md", "READ ME.md"]);
    write(&p.join("notes/todo.txt"), "first\nsecond");
    write(&p.join("debug.log"), "ignored\n");
    std::fs::write(p.join("blob.bin"), b"\0\x01\x02").unwrap();

    let files = changes(p, &wt.base_commit).await.unwrap();
    let paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(
        paths,
        ["READ ME.md", "blob.bin", "delete-me.txt", "notes/todo.txt", "src/lib.txt", "staged.txt"],
        "sorted, ignored file left out"
    );

    let modified = find(&files, "src/lib.txt");
    assert_eq!(modified.status, ChangeStatus::Modified);
    assert_eq!((modified.additions, modified.deletions), (1, 1));
    assert_eq!(modified.hunks.len(), 1);
    let hunk = &modified.hunks[0];
    assert_eq!((hunk.old_start, hunk.old_lines, hunk.new_start, hunk.new_lines), (1, 3, 1, 3));
    let lines: Vec<(LineKind, &str)> =
        hunk.lines.iter().map(|l| (l.kind, l.text.as_str())).collect();
    assert_eq!(
        lines,
        [
            (LineKind::Context, "one"),
            (LineKind::Removed, "two"),
            (LineKind::Added, "TWO"),
            (LineKind::Context, "three")
        ]
    );

    let deleted = find(&files, "delete-me.txt");
    assert_eq!(deleted.status, ChangeStatus::Deleted);
    assert_eq!(deleted.deletions, 1);
    assert_eq!(deleted.hunks[0].lines[0].kind, LineKind::Removed);

    let added = find(&files, "staged.txt");
    assert_eq!(added.status, ChangeStatus::Added);
    assert_eq!(added.hunks[0].lines[0].text, "staged");

    let renamed = find(&files, "READ ME.md");
    assert_eq!(renamed.status, ChangeStatus::Renamed);
    assert_eq!(renamed.old_path.as_deref(), Some("README.md"));

    let untracked = find(&files, "notes/todo.txt");
    assert_eq!(untracked.status, ChangeStatus::Untracked);
    assert_eq!(untracked.additions, 2);
    assert_eq!(untracked.hunks[0].header, "@@ -0,0 +1,2 @@");
    let texts: Vec<&str> = untracked.hunks[0].lines.iter().map(|l| l.text.as_str()).collect();
    assert_eq!(texts, ["first", "second"]);
    assert!(untracked.hunks[0].lines.iter().all(|l| l.kind == LineKind::Added));

    let binary = find(&files, "blob.bin");
    assert!(binary.binary && binary.hunks.is_empty());
    assert!(files.iter().all(|f| !f.truncated));

    // Nothing was staged by looking: the untracked file is still untracked.
    assert_eq!(git(p, &["status", "--porcelain", "--", "notes"]), "?? notes/");
}

#[tokio::test]
async fn commit_all_commits_on_the_task_branch_and_changes_stay_relative_to_base() {
    let fx = Fixture::new();
    let main_sha = git(&fx.repo(), &["rev-parse", "main"]);
    let wt = create_worktree(&fx.spec("kandev/commit")).await.unwrap();
    write(&wt.path.join("feature.txt"), "feature\n");
    write(&wt.path.join("src/lib.txt"), "one\n");

    let info = commit_all(&wt.path, "Add feature\n\nwith a body").await.unwrap();
    assert_eq!(info.summary, "Add feature");
    assert_eq!(info.files_changed, 2);
    assert_eq!(info.sha, git(&wt.path, &["rev-parse", "kandev/commit"]));
    assert_eq!(
        git(&wt.path, &["log", "-1", "--format=%s|%an|%ae"]),
        "Add feature|Test User|test@example.com"
    );
    assert_eq!(git(&wt.path, &["rev-parse", "--abbrev-ref", "HEAD"]), "kandev/commit");
    assert_eq!(git(&fx.repo(), &["rev-parse", "main"]), main_sha, "base branch did not move");
    assert_eq!(is_dirty(&wt.path).await.unwrap(), 0);

    // `changes` is against the base commit: committed work is still listed.
    let files = changes(&wt.path, &wt.base_commit).await.unwrap();
    let feature = find(&files, "feature.txt");
    assert_eq!(feature.status, ChangeStatus::Added);
    assert_eq!(find(&files, "src/lib.txt").deletions, 2);

    let err = commit_all(&wt.path, "again").await.unwrap_err();
    assert!(matches!(err, GitError::NothingToCommit { .. }), "{err:?}");
    assert!(err.to_string().contains("nothing to commit"), "{err}");
    assert!(matches!(commit_all(&wt.path, "  \n").await, Err(GitError::EmptyCommitMessage)));
}

#[tokio::test]
async fn commit_without_any_identity_falls_back_to_kandev() {
    let fx = Fixture::new();
    let wt = create_worktree(&fx.spec("kandev/identity")).await.unwrap();
    git(&fx.repo(), &["config", "--unset", "user.name"]);
    git(&fx.repo(), &["config", "--unset", "user.email"]);
    // If the machine has a global identity, that one must be used instead.
    let global = |key: &str| {
        let out = Command::new("git")
            .args(["config", "--get", key])
            .current_dir(&wt.path)
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    };
    let name =
        Some(global("user.name")).filter(|n| !n.is_empty()).unwrap_or_else(|| "Kandev".into());
    let email = Some(global("user.email"))
        .filter(|e| !e.is_empty())
        .unwrap_or_else(|| "kandev@localhost".into());

    write(&wt.path.join("x.txt"), "x\n");
    commit_all(&wt.path, "by kandev").await.unwrap();
    assert_eq!(git(&wt.path, &["log", "-1", "--format=%an <%ae>"]), format!("{name} <{email}>"));
    let local = Command::new("git")
        .args(["config", "--local", "--get-regexp", "^user\\."])
        .current_dir(fx.repo())
        .output()
        .unwrap();
    assert!(local.stdout.is_empty(), "no identity written to the repository's config");
}

#[tokio::test]
async fn remove_refuses_a_dirty_worktree_unless_forced_and_keeps_the_branch() {
    let fx = Fixture::new();
    let wt = create_worktree(&fx.spec("kandev/remove")).await.unwrap();
    write(&wt.path.join("new.txt"), "new\n");
    write(&wt.path.join("README.md"), "edited\n");

    let err = remove_worktree(&fx.repo(), &wt.path, false).await.unwrap_err();
    let GitError::Dirty { files, .. } = &err else { panic!("{err:?}") };
    assert_eq!(*files, 2);
    let message = err.to_string();
    assert!(
        message.contains("2 uncommitted or untracked")
            && message.contains("remove the worktree anyway"),
        "{message}"
    );
    assert!(wt.path.join("new.txt").exists(), "nothing was removed");

    remove_worktree(&fx.repo(), &wt.path, true).await.unwrap();
    assert!(!wt.path.exists());
    assert_eq!(fx.worktree_count(), 1);
    assert!(fx.branches().lines().any(|b| b == "kandev/remove"), "branch kept: {}", fx.branches());

    // Removing again is a no-op; the main checkout is never a task worktree.
    remove_worktree(&fx.repo(), &wt.path, false).await.unwrap();
    let err = remove_worktree(&fx.repo(), &fx.repo(), true).await.unwrap_err();
    assert!(matches!(err, GitError::NotAWorktree { .. }), "{err:?}");
    assert!(fx.repo().join("README.md").exists());
}

#[tokio::test]
async fn a_clean_worktree_is_removed_without_force() {
    let fx = Fixture::new();
    let wt = create_worktree(&fx.spec("kandev/clean")).await.unwrap();
    remove_worktree(&fx.repo(), &wt.path, false).await.unwrap();
    assert!(!wt.path.exists());
    assert!(fx.branches().lines().any(|b| b == "kandev/clean"));
}

#[tokio::test]
async fn a_kept_branch_is_checked_out_again_with_its_work() {
    let fx = Fixture::new();
    let spec = fx.spec("kandev/again");
    let first = create_worktree(&spec).await.unwrap();
    write(&first.path.join("work.txt"), "work\n");
    commit_all(&first.path, "work").await.unwrap();
    remove_worktree(&fx.repo(), &first.path, false).await.unwrap();

    // main moves on meanwhile; the base stays where the task branch forked.
    write(&fx.repo().join("later.txt"), "later\n");
    git(&fx.repo(), &["add", "-A"]);
    git(&fx.repo(), &["commit", "-q", "-m", "later"]);

    let second = create_worktree(&spec).await.unwrap();
    assert_eq!(second.base_commit, first.base_commit);
    assert!(second.path.join("work.txt").exists());
    let files = changes(&second.path, &second.base_commit).await.unwrap();
    assert_eq!(files.iter().map(|f| f.path.as_str()).collect::<Vec<_>>(), ["work.txt"]);

    // Checked out once already: a second worktree on it is refused.
    let mut other = fx.spec("kandev/again");
    other.worktree_path = fx.home().join("elsewhere");
    let err = create_worktree(&other).await.unwrap_err();
    assert!(matches!(err, GitError::BranchInUse { .. }), "{err:?}");
    assert!(!other.worktree_path.exists());
}

#[tokio::test]
async fn read_file_reads_text_and_reports_binary_truncation_and_errors() {
    let fx = Fixture::new();
    let wt = create_worktree(&fx.spec("kandev/read")).await.unwrap();
    write(&wt.path.join("big.txt"), "0123456789");
    std::fs::write(wt.path.join("bin.dat"), b"ab\0cd").unwrap();
    symlink(fx.repo().join("README.md"), wt.path.join("to-main")).unwrap();

    let file = read_file(&wt.path, "./src/lib.txt", 1024).await.unwrap();
    assert_eq!(file.path, "src/lib.txt");
    assert_eq!(file.content, "one\ntwo\nthree\n");
    assert_eq!((file.binary, file.truncated, file.size), (false, false, 14));

    let big = read_file(&wt.path, "big.txt", 4).await.unwrap();
    assert_eq!((big.content.as_str(), big.truncated, big.size), ("0123", true, 10));

    let bin = read_file(&wt.path, "bin.dat", 1024).await.unwrap();
    assert!(bin.binary && bin.content.is_empty());

    assert!(matches!(read_file(&wt.path, "src", 10).await, Err(GitError::NotAFile { .. })));
    assert!(matches!(read_file(&wt.path, "missing.txt", 10).await, Err(GitError::NotFound { .. })));
    assert!(matches!(read_file(&wt.path, "to-main", 10).await, Err(GitError::Forbidden { .. })));
    assert!(matches!(
        read_file(&wt.path, "../repo/README.md", 10).await,
        Err(GitError::Forbidden { .. })
    ));
}

/// Issue 12, finding 4: a hard link to an outside file (untracked, or in place of a tracked
/// file) shows no content in `changes`, is not read, and is not committed.
#[tokio::test]
async fn i12_f4_changes_and_commit_never_reveal_a_hard_linked_outside_file() {
    let fx = Fixture::new();
    let wt = create_worktree(&fx.spec("kandev/hardlink")).await.unwrap();
    let secret = fx.tmp.path().join("secret.txt");
    write(&secret, "top secret from outside\n");
    std::fs::hard_link(&secret, wt.path.join("leak.txt")).unwrap();
    std::fs::remove_file(wt.path.join("src/lib.txt")).unwrap();
    std::fs::hard_link(&secret, wt.path.join("src/lib.txt")).unwrap();
    write(&wt.path.join("fine.txt"), "fine\n");

    let files = changes(&wt.path, &wt.base_commit).await.unwrap();
    assert!(!format!("{files:?}").contains("top secret"), "{files:?}");
    for path in ["leak.txt", "src/lib.txt"] {
        let file = find(&files, path);
        assert!(file.hunks.is_empty() && file.truncated, "{path}: {file:?}");
    }
    assert_eq!(find(&files, "fine.txt").hunks[0].lines[0].text, "fine");
    let read = read_file(&wt.path, "leak.txt", 1024).await;
    assert!(matches!(read, Err(GitError::Forbidden { .. })), "{read:?}");

    let head = git(&wt.path, &["rev-parse", "HEAD"]);
    let err = commit_all(&wt.path, "leak").await.unwrap_err();
    assert!(matches!(&err, GitError::Forbidden { .. }), "{err:?}");
    assert!(err.to_string().contains("hard link"), "{err}");
    assert_eq!(git(&wt.path, &["rev-parse", "HEAD"]), head, "nothing was committed");
    let staged = git(&wt.path, &["diff", "--cached", "--name-only"]);
    assert!(!staged.contains("leak.txt") && !staged.contains("src/lib.txt"), "{staged}");
}

#[tokio::test]
async fn tree_lists_tracked_and_untracked_files_but_not_ignored_ones() {
    let fx = Fixture::new();
    let wt = create_worktree(&fx.spec("kandev/tree")).await.unwrap();
    write(&wt.path.join("notes/a.txt"), "abc");
    write(&wt.path.join("debug.log"), "ignored");
    std::fs::remove_file(wt.path.join("delete-me.txt")).unwrap();
    symlink("README.md", wt.path.join("link")).unwrap();

    let entries = tree(&wt.path).await.unwrap();
    let listed: Vec<(&str, EntryKind)> =
        entries.iter().map(|e| (e.path.as_str(), e.kind)).collect();
    assert_eq!(
        listed,
        [
            (".gitignore", EntryKind::File),
            ("README.md", EntryKind::File),
            ("link", EntryKind::Symlink),
            ("notes", EntryKind::Dir),
            ("notes/a.txt", EntryKind::File),
            ("src", EntryKind::Dir),
            ("src/lib.txt", EntryKind::File),
        ]
    );
    assert_eq!(entries.iter().find(|e| e.path == "notes/a.txt").unwrap().size, 3);
}

#[tokio::test]
async fn a_repository_path_that_is_gone_creates_nothing() {
    let fx = Fixture::new();
    let mut spec = fx.spec("kandev/gone");
    spec.repo_path = fx.tmp.path().join("no-such-repo");
    let err = create_worktree(&spec).await.unwrap_err();
    assert!(matches!(err, GitError::RepositoryMissing { .. }), "{err:?}");
    assert!(err.to_string().contains("does not exist"), "{err}");
    assert!(!fx.home().exists(), "not even parent directories");
}

#[tokio::test]
async fn a_missing_base_branch_creates_nothing() {
    let fx = Fixture::new();
    let mut spec = fx.spec("kandev/no-base");
    spec.base_branch = "develop".to_owned();
    let err = create_worktree(&spec).await.unwrap_err();
    assert!(
        matches!(&err, GitError::BaseBranchMissing { branch } if branch == "develop"),
        "{err:?}"
    );
    assert!(err.to_string().contains("`develop` does not exist"), "{err}");
    assert!(!fx.home().exists());
    assert_eq!(fx.branches(), "main");
    assert_eq!(fx.worktree_count(), 1);

    spec.base_branch = "main~1".to_owned();
    assert!(matches!(create_worktree(&spec).await, Err(GitError::BaseBranchMissing { .. })));
}

#[tokio::test]
async fn a_repository_without_commits_creates_nothing() {
    let fx = Fixture::empty();
    let err = create_worktree(&fx.spec("kandev/empty")).await.unwrap_err();
    assert!(matches!(err, GitError::NoCommits { .. }), "{err:?}");
    assert!(err.to_string().contains("initial commit"), "{err}");
    assert!(!fx.home().exists());
    assert_eq!(fx.branches(), "");
    assert!(matches!(default_branch(&fx.repo()).await, Err(GitError::NoCommits { .. })));
}

#[tokio::test]
async fn a_folder_that_is_not_a_repository_root_is_refused() {
    let fx = Fixture::new();
    let mut spec = fx.spec("kandev/not-repo");
    spec.repo_path = fx.repo().join("src");
    let err = create_worktree(&spec).await.unwrap_err();
    assert!(matches!(err, GitError::NotARepository { .. }), "{err:?}");

    let plain = tempfile::tempdir().unwrap();
    spec.repo_path = plain.path().to_path_buf();
    let err = create_worktree(&spec).await.unwrap_err();
    assert!(matches!(err, GitError::NotARepository { .. }), "{err:?}");
    assert!(!fx.home().exists());
    assert_eq!(fx.branches(), "main");
}

#[tokio::test]
async fn an_existing_worktree_path_or_bad_branch_name_creates_nothing() {
    let fx = Fixture::new();
    let spec = fx.spec("kandev/exists");
    std::fs::create_dir_all(&spec.worktree_path).unwrap();
    write(&spec.worktree_path.join("keep.txt"), "mine\n");
    let err = create_worktree(&spec).await.unwrap_err();
    assert!(matches!(err, GitError::WorktreeExists { .. }), "{err:?}");
    assert!(spec.worktree_path.join("keep.txt").exists(), "existing content untouched");

    let bad = fx.spec("bad..name");
    let err = create_worktree(&bad).await.unwrap_err();
    assert!(matches!(err, GitError::InvalidBranchName { .. }), "{err:?}");
    assert_eq!(fx.branches(), "main");
}

#[tokio::test]
async fn a_failing_worktree_add_is_undone() {
    let fx = Fixture::new();
    let hook = fx.repo().join(".git/hooks/post-checkout");
    write(&hook, "#!/bin/sh\necho hook refused >&2\nexit 1\n");
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();

    let spec = fx.spec("kandev/hook");
    let err = create_worktree(&spec).await.unwrap_err();
    assert!(
        matches!(&err, GitError::Git { stderr, .. } if stderr.contains("hook refused")),
        "{err:?}"
    );
    assert!(!spec.worktree_path.exists(), "no stray worktree directory");
    assert!(!fx.home().exists(), "created parent directories removed");
    assert_eq!(fx.branches(), "main", "no stray branch");
    assert_eq!(fx.worktree_count(), 1, "no stray registration");
}

#[tokio::test]
async fn default_branch_prefers_main_then_the_checked_out_branch() {
    let fx = Fixture::new();
    git(&fx.repo(), &["checkout", "-q", "-b", "feature"]);
    assert_eq!(default_branch(&fx.repo()).await.unwrap(), "main");

    let trunk = Fixture::empty();
    git(&trunk.repo(), &["checkout", "-q", "-b", "trunk"]);
    write(&trunk.repo().join("a.txt"), "a\n");
    git(&trunk.repo(), &["add", "-A"]);
    git(&trunk.repo(), &["commit", "-q", "-m", "a"]);
    assert_eq!(default_branch(&trunk.repo()).await.unwrap(), "trunk");

    let missing = fx.tmp.path().join("nope");
    assert!(matches!(default_branch(&missing).await, Err(GitError::RepositoryMissing { .. })));
}

#[tokio::test]
async fn tasks_without_a_repository_get_a_plain_directory() {
    let home = tempfile::tempdir().unwrap();
    let dir = create_task_dir(home.path(), "0194f3a2-7b1c").await.unwrap();
    assert_eq!(dir, home.path().join("tasks/0194f3a2-7b1c"));
    assert!(dir.is_dir());
    let escaped = create_task_dir(home.path(), "../../x").await.unwrap();
    assert!(escaped.starts_with(home.path().join("tasks")), "{}", escaped.display());
}

#[tokio::test]
async fn concurrent_creates_of_one_worktree_leave_the_winner_intact() {
    let fx = Fixture::new();
    let spec = fx.spec("kandev/race");
    let (first, second) = tokio::join!(create_worktree(&spec), create_worktree(&spec));
    let (winner, loser) = match (first, second) {
        (Ok(w), Err(e)) | (Err(e), Ok(w)) => (w, e),
        other => panic!("exactly one create must win: {other:?}"),
    };
    assert!(
        matches!(loser, GitError::WorktreeExists { .. } | GitError::BranchInUse { .. }),
        "{loser:?}"
    );
    assert!(winner.path.join("README.md").exists(), "the winner's checkout was not cleaned up");
    assert_eq!(git(&winner.path, &["rev-parse", "--abbrev-ref", "HEAD"]), "kandev/race");
    assert_eq!(fx.worktree_count(), 2);
}

#[tokio::test]
async fn changes_ignore_settings_that_alter_the_patch_format() {
    let fx = Fixture::new();
    let repo = fx.repo();
    write(&repo.join("blank.txt"), "a\n\nb\n");
    let head = git(&repo, &["rev-parse", "HEAD"]);
    git(&repo, &["update-index", "--add", "--cacheinfo", &format!("160000,{head},sub")]);
    git(&repo, &["add", "blank.txt"]);
    git(&repo, &["commit", "-q", "-m", "blank line and a gitlink"]);
    git(&repo, &["config", "diff.suppressBlankEmpty", "true"]);
    git(&repo, &["config", "diff.submodule", "log"]);
    git(&repo, &["config", "diff.noprefix", "true"]);

    let wt = create_worktree(&fx.spec("kandev/format")).await.unwrap();
    // Point the gitlink elsewhere (staged) and change a file sorted after it.
    git(&wt.path, &["update-index", "--cacheinfo", &format!("160000,{},sub", "1".repeat(40))]);
    write(&wt.path.join("blank.txt"), "a\n\nB\n");
    write(&wt.path.join("z.txt"), "z\n");
    git(&wt.path, &["add", "z.txt"]);

    let files = changes(&wt.path, &wt.base_commit).await.unwrap();
    let blank = find(&files, "blank.txt");
    let lines: Vec<(LineKind, &str)> =
        blank.hunks[0].lines.iter().map(|l| (l.kind, l.text.as_str())).collect();
    assert_eq!(
        lines,
        [
            (LineKind::Context, "a"),
            (LineKind::Context, ""),
            (LineKind::Removed, "b"),
            (LineKind::Added, "B")
        ]
    );
    assert_eq!(find(&files, "sub").status, ChangeStatus::Modified);
    assert_eq!(find(&files, "z.txt").hunks[0].lines[0].text, "z", "sections still line up");
}

/// Issue 12, finding 6: a branch that exists (here: the kept branch of an archived task,
/// with its commit) is never checked out for a new task; the next free suffix is.
#[tokio::test]
async fn i12_f6_an_existing_branch_is_never_taken_over() {
    let fx = Fixture::new();
    let mut old = fx.spec("kandev/fix-login-bug-0194f3a2");
    old.existing = OnExistingBranch::PickAnother;
    let archived = create_worktree(&old).await.unwrap();
    write(&archived.path.join("secret-work.txt"), "old task\n");
    commit_all(&archived.path, "old task's work").await.unwrap();
    remove_worktree(&fx.repo(), &archived.path, false).await.unwrap();
    let main = git(&fx.repo(), &["rev-parse", "main"]);

    let mut new = fx.spec("kandev/fix-login-bug-0194f3a2");
    new.existing = OnExistingBranch::PickAnother;
    new.worktree_path = fx.home().join("new-task/repo");
    let created = create_worktree(&new).await.unwrap();
    assert_eq!(created.branch, "kandev/fix-login-bug-0194f3a2-2");
    assert_eq!(created.base_commit, main);
    assert_eq!(git(&created.path, &["rev-parse", "HEAD"]), main, "starts at the base branch");
    assert!(!created.path.join("secret-work.txt").exists(), "none of the old task's commits");
    assert!(fx.branches().contains("kandev/fix-login-bug-0194f3a2\n"), "the old branch is kept");

    // The task's own branch, asked for with `Reuse`, is checked out again.
    let mut again = fx.spec("kandev/fix-login-bug-0194f3a2");
    again.worktree_path = fx.home().join("old-task-again/repo");
    let resumed = create_worktree(&again).await.unwrap();
    assert_eq!(resumed.branch, "kandev/fix-login-bug-0194f3a2");
    assert!(resumed.path.join("secret-work.txt").exists());
}

/// Issue 12, finding 6: two tasks whose branch names collide, created at the same moment,
/// both get a worktree on a branch of their own.
#[tokio::test]
async fn i12_f6_concurrent_creates_of_one_branch_name_both_succeed() {
    let fx = Fixture::new();
    let spec = |dir: &str| {
        let mut spec = fx.spec("kandev/task-same");
        spec.existing = OnExistingBranch::PickAnother;
        spec.worktree_path = fx.home().join(dir).join("repo");
        spec
    };
    let (a, b) = (spec("a"), spec("b"));
    let (first, second) = tokio::join!(create_worktree(&a), create_worktree(&b));
    let (first, second) = (first.unwrap(), second.unwrap());
    let mut names = [first.branch.clone(), second.branch.clone()];
    names.sort();
    assert_eq!(names, ["kandev/task-same", "kandev/task-same-2"]);
    for wt in [&first, &second] {
        assert_eq!(git(&wt.path, &["rev-parse", "--abbrev-ref", "HEAD"]), wt.branch);
    }
    assert_eq!(fx.worktree_count(), 3);
}
