//! Integration tests of worktree checkpoints (issue 48) against real repositories.

#![allow(clippy::disallowed_methods, reason = "tests start git processes freely")]

use std::io::Write;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime};

use kandev_runtime::git::{
    CheckpointTurn, GitError, Retention, changed_since, checkpoint_ref, collect, restore, snapshot,
};
use kandev_testkit::git::{git, init};
use tempfile::TempDir;

/// A repository with one commit on `main` and a linked worktree on branch `task` (a task's
/// worktree, whose git dir is `.git/worktrees/task`).
struct Fixture {
    tmp: TempDir,
}

impl Fixture {
    fn new(files: &[(&str, &str)]) -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let fixture = Self { tmp };
        let repo = fixture.repo();
        init(&repo);
        for (path, content) in files {
            write(&repo.join(path), content);
        }
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "-q", "-m", "initial"]);
        let worktree = fixture.worktree();
        git(&repo, &["worktree", "add", "-q", "-b", "task", worktree.to_str().unwrap()]);
        fixture
    }

    fn repo(&self) -> PathBuf {
        self.tmp.path().join("repo")
    }

    fn worktree(&self) -> PathBuf {
        self.tmp.path().join("task")
    }
}

fn write(path: &Path, content: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o111 != 0
}

/// Runs `git args` in `dir` with `input` on stdin.
fn git_with_stdin(dir: &Path, args: &[&str], input: &[u8]) {
    let mut child =
        Command::new("git").arg("-C").arg(dir).args(args).stdin(Stdio::piped()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    assert!(child.wait().unwrap().success(), "git {args:?}");
}

/// Every file (path, mode, content) of `commit`'s tree.
fn tree_files(dir: &Path, commit: &str) -> Vec<(String, String, Vec<u8>)> {
    let listing = git(dir, &["ls-tree", "-r", "-z", commit]);
    listing
        .split('\0')
        .filter(|l| !l.is_empty())
        .map(|line| {
            let (meta, path) = line.split_once('\t').unwrap();
            let mut meta = meta.split(' ');
            let mode = meta.next().unwrap().to_owned();
            let blob = meta.nth(1).unwrap();
            let output = Command::new("git")
                .arg("-C")
                .arg(dir)
                .args(["cat-file", "blob", blob])
                .output()
                .unwrap();
            (path.to_owned(), mode, output.stdout)
        })
        .collect()
}

/// What a test checks stays as the user left it: the index (entries and `diff --cached`),
/// `HEAD`, the branch's reflog and the stash.
#[derive(Debug, PartialEq, Eq)]
struct UserState {
    index: String,
    staged: String,
    head: String,
    reflog: String,
    stash: String,
}

fn user_state(dir: &Path) -> UserState {
    UserState {
        index: git(dir, &["ls-files", "-s"]),
        staged: git(dir, &["diff", "--cached"]),
        head: git(dir, &["rev-parse", "HEAD"]),
        reflog: git(dir, &["reflog", "show", "--format=%H %gs", "task"]),
        stash: git(dir, &["stash", "list"]),
    }
}

fn leftovers(git_dir: &Path) -> Vec<String> {
    std::fs::read_dir(git_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("kandev-checkpoint"))
        .collect()
}

#[tokio::test]
async fn i48_1_restore_undoes_a_turn_and_keeps_the_users_index_head_and_ignored_files() {
    let fx = Fixture::new(&[
        ("README.md", "hello\n"),
        ("src/lib.txt", "one\ntwo\n"),
        ("delete-me.txt", "bye\n"),
        ("staged.txt", "committed\n"),
        ("run.sh", "#!/bin/sh\n"),
        (".gitignore", "*.log\n"),
    ]);
    let wt = fx.worktree();
    std::fs::set_permissions(wt.join("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    // The user's own work before the turn: a staged change edited again after staging, an
    // untracked file and an ignored one.
    write(&wt.join("staged.txt"), "staged\n");
    git(&wt, &["add", "staged.txt", "run.sh"]);
    write(&wt.join("staged.txt"), "staged, then edited\n");
    write(&wt.join("notes.txt"), "my notes\n");
    write(&wt.join("old.log"), "old log\n");
    let before = user_state(&wt);
    assert!(before.staged.contains("+staged"), "{}", before.staged);

    let reference = checkpoint_ref("s1", "t1").unwrap();
    let taken = snapshot(&wt, &reference, None).await.unwrap();
    assert!(taken.new);
    assert_eq!(git(&wt, &["rev-parse", &reference]), taken.commit);
    assert_eq!(git(&wt, &["rev-parse", &format!("{}^{{tree}}", taken.commit)]), taken.tree);
    assert_eq!(git(&wt, &["rev-parse", &format!("{}^", taken.commit)]), before.head);
    assert_eq!(git(&wt, &["log", "-1", "--format=%s", &taken.commit]), "kandev checkpoint");
    let recorded: Vec<String> = tree_files(&wt, &taken.commit).into_iter().map(|f| f.0).collect();
    assert_eq!(
        recorded,
        [
            ".gitignore",
            "README.md",
            "delete-me.txt",
            "notes.txt",
            "run.sh",
            "src/lib.txt",
            "staged.txt"
        ]
    );
    assert_eq!(user_state(&wt), before, "a snapshot changes nothing of the user's");
    assert!(
        Command::new("git")
            .arg("-C")
            .arg(&wt)
            .args(["reflog", "exists", &reference])
            .status()
            .unwrap()
            .code()
            == Some(1),
        "a checkpoint ref has no reflog"
    );

    // The turn.
    write(&wt.join("README.md"), "hello, changed\n");
    write(&wt.join("new.txt"), "new\n");
    write(&wt.join("gen/deep/x.txt"), "generated\n");
    std::fs::remove_file(wt.join("delete-me.txt")).unwrap();
    std::fs::remove_file(wt.join("src/lib.txt")).unwrap();
    std::fs::remove_dir(wt.join("src")).unwrap();
    write(&wt.join("build.log"), "build output\n");
    write(&wt.join("old.log"), "old log, appended by the turn\n");
    write(&wt.join("staged.txt"), "changed by the turn\n");
    std::fs::set_permissions(wt.join("run.sh"), std::fs::Permissions::from_mode(0o644)).unwrap();

    let expected = [
        "README.md",
        "delete-me.txt",
        "gen/deep/x.txt",
        "new.txt",
        "run.sh",
        "src/lib.txt",
        "staged.txt",
    ];
    assert_eq!(changed_since(&wt, &reference).await.unwrap(), expected);
    assert_eq!(restore(&wt, &reference).await.unwrap(), expected);

    for (path, mode, content) in tree_files(&wt, &taken.commit) {
        assert_eq!(std::fs::read(wt.join(&path)).unwrap(), content, "{path}");
        assert_eq!(is_executable(&wt.join(&path)), mode == "100755", "{path} mode {mode}");
    }
    assert_eq!(read(&wt.join("staged.txt")), "staged, then edited\n");
    assert_eq!(read(&wt.join("delete-me.txt")), "bye\n");
    assert!(!wt.join("new.txt").exists());
    assert!(!wt.join("gen").exists(), "directories left empty are removed");
    assert_eq!(read(&wt.join("build.log")), "build output\n", "ignored files are left alone");
    assert_eq!(read(&wt.join("old.log")), "old log, appended by the turn\n");
    assert_eq!(user_state(&wt), before, "the staged change is still staged exactly");
    assert!(changed_since(&wt, &reference).await.unwrap().is_empty());
    assert!(restore(&wt, &reference).await.unwrap().is_empty());
    let again = snapshot(&wt, &checkpoint_ref("s1", "t2").unwrap(), Some(&taken.commit)).await;
    assert_eq!(again.unwrap().commit, taken.commit);
    assert_eq!(leftovers(&fx.repo().join(".git/worktrees/task")), Vec::<String>::new());
    assert_eq!(git(&fx.repo(), &["status", "--porcelain"]), "", "the main checkout is untouched");
}

#[tokio::test]
async fn i48_1_a_snapshot_without_changes_reuses_the_previous_commit() {
    let fx = Fixture::new(&[("a.txt", "a\n")]);
    let wt = fx.worktree();
    write(&wt.join("a.txt"), "edited\n");
    let first = snapshot(&wt, &checkpoint_ref("s", "t1").unwrap(), None).await.unwrap();
    assert!(first.new);

    let second_ref = checkpoint_ref("s", "t2").unwrap();
    let second = snapshot(&wt, &second_ref, Some(&first.commit)).await.unwrap();
    assert_eq!(second.commit, first.commit);
    assert_eq!(second.tree, first.tree);
    assert!(!second.new);
    assert_eq!(git(&wt, &["rev-parse", &second_ref]), first.commit);

    write(&wt.join("b.txt"), "b\n");
    let third = snapshot(&wt, &checkpoint_ref("s", "t3").unwrap(), Some(&second_ref)).await;
    let third = third.unwrap();
    assert!(third.new);
    assert_ne!(third.commit, first.commit);
    assert_eq!(
        git(&wt, &["rev-parse", &format!("{}^", third.commit)]),
        git(&wt, &["rev-parse", "HEAD"])
    );

    let unknown = snapshot(&wt, &checkpoint_ref("s", "t4").unwrap(), Some("deadbeef")).await;
    assert!(matches!(unknown, Err(GitError::UnknownCommit { .. })), "{unknown:?}");
}

#[tokio::test]
async fn i48_1_changed_since_lists_exactly_the_changed_paths() {
    let fx = Fixture::new(&[
        ("a.txt", "a\n"),
        ("b.txt", "b\n"),
        ("c.txt", "c\n"),
        (".gitignore", "out/\n"),
    ]);
    let wt = fx.worktree();
    let taken = snapshot(&wt, &checkpoint_ref("s", "t1").unwrap(), None).await.unwrap();
    assert_eq!(changed_since(&wt, &taken.commit).await.unwrap(), Vec::<String>::new());

    write(&wt.join("b.txt"), "b changed\n");
    std::fs::remove_file(wt.join("c.txt")).unwrap();
    write(&wt.join("d/new.txt"), "new\n");
    write(&wt.join("out/ignored.txt"), "ignored\n");
    write(&wt.join("a.txt"), "a\n"); // rewritten with the same bytes
    assert_eq!(changed_since(&wt, &taken.commit).await.unwrap(), ["b.txt", "c.txt", "d/new.txt"]);
    // Staging changes nothing about the worktree's state.
    git(&wt, &["add", "-A"]);
    assert_eq!(changed_since(&wt, &taken.commit).await.unwrap(), ["b.txt", "c.txt", "d/new.txt"]);
}

#[tokio::test]
async fn i48_1_paths_with_spaces_and_unicode_round_trip() {
    let fx = Fixture::new(&[
        ("dir with space/a file.txt", "spaced\n"),
        ("ünï/ファイル ☃.txt", "unicode\n"),
    ]);
    let wt = fx.worktree();
    write(&wt.join("new dir/naïve café.txt"), "untracked\n");
    let taken = snapshot(&wt, &checkpoint_ref("s", "t1").unwrap(), None).await.unwrap();

    write(&wt.join("dir with space/a file.txt"), "changed\n");
    std::fs::remove_file(wt.join("ünï/ファイル ☃.txt")).unwrap();
    std::fs::remove_file(wt.join("new dir/naïve café.txt")).unwrap();
    write(&wt.join("another one/ü ü.txt"), "added\n");
    let expected = [
        "another one/ü ü.txt",
        "dir with space/a file.txt",
        "new dir/naïve café.txt",
        "ünï/ファイル ☃.txt",
    ];
    assert_eq!(changed_since(&wt, &taken.commit).await.unwrap(), expected);
    assert_eq!(restore(&wt, &taken.commit).await.unwrap(), expected);
    assert_eq!(read(&wt.join("dir with space/a file.txt")), "spaced\n");
    assert_eq!(read(&wt.join("ünï/ファイル ☃.txt")), "unicode\n");
    assert_eq!(read(&wt.join("new dir/naïve café.txt")), "untracked\n");
    assert!(!wt.join("another one").exists());
    assert_eq!(
        git(&wt, &["status", "--porcelain", "-uall"]),
        "?? \"new dir/na\\303\\257ve caf\\303\\251.txt\""
    );
}

#[tokio::test]
async fn i48_1_restore_deletes_symlinks_without_following_them() {
    let fx = Fixture::new(&[("src/lib.txt", "lib\n"), ("keep.txt", "keep\n")]);
    let wt = fx.worktree();
    let outside = fx.tmp.path().join("outside");
    write(&outside.join("lib.txt"), "outside\n");
    write(&outside.join("precious.txt"), "precious\n");
    let taken = snapshot(&wt, &checkpoint_ref("s", "t1").unwrap(), None).await.unwrap();

    // The turn replaces a directory by a symlink leading out, and adds a symlink to a file.
    std::fs::remove_dir_all(wt.join("src")).unwrap();
    symlink(&outside, wt.join("src")).unwrap();
    symlink(outside.join("precious.txt"), wt.join("link.txt")).unwrap();
    assert_eq!(
        changed_since(&wt, &taken.commit).await.unwrap(),
        ["link.txt", "src", "src/lib.txt"]
    );
    restore(&wt, &taken.commit).await.unwrap();

    assert!(!std::fs::symlink_metadata(wt.join("src")).unwrap().is_symlink());
    assert_eq!(read(&wt.join("src/lib.txt")), "lib\n");
    assert!(std::fs::symlink_metadata(wt.join("link.txt")).is_err());
    assert_eq!(read(&outside.join("lib.txt")), "outside\n");
    assert_eq!(read(&outside.join("precious.txt")), "precious\n");
}

#[tokio::test]
async fn i48_1_a_repository_without_commits_gets_a_parentless_checkpoint() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    init(&repo);
    write(&repo.join("a.txt"), "a\n");
    write(&repo.join("staged.txt"), "staged\n");
    git(&repo, &["add", "staged.txt"]);
    let index = git(&repo, &["ls-files", "-s"]);
    let taken = snapshot(&repo, &checkpoint_ref("s", "t1").unwrap(), None).await.unwrap();
    assert!(taken.new);
    assert_eq!(git(&repo, &["rev-list", "--parents", "-n", "1", &taken.commit]), taken.commit);
    let files: Vec<String> = tree_files(&repo, &taken.commit).into_iter().map(|f| f.0).collect();
    assert_eq!(files, ["a.txt", "staged.txt"]);

    write(&repo.join("a.txt"), "changed\n");
    write(&repo.join("b.txt"), "b\n");
    assert_eq!(restore(&repo, &taken.commit).await.unwrap(), ["a.txt", "b.txt"]);
    assert_eq!(read(&repo.join("a.txt")), "a\n");
    assert!(!repo.join("b.txt").exists());
    assert_eq!(git(&repo, &["ls-files", "-s"]), index);
    let head = Command::new("git")
        .arg("-C")
        .arg(&repo)
        .args(["rev-parse", "--verify", "-q", "HEAD"])
        .status()
        .unwrap();
    assert!(!head.success(), "HEAD is still unborn");
}

#[tokio::test]
async fn i48_4_collect_keeps_the_newest_checkpoints_of_a_long_session() {
    let fx = Fixture::new(&[("a.txt", "a\n")]);
    let wt = fx.worktree();
    let taken = snapshot(&wt, &checkpoint_ref("s1", "t0000").unwrap(), None).await.unwrap();
    let other = snapshot(&wt, &checkpoint_ref("s2", "t0000").unwrap(), None).await.unwrap();
    let names: Vec<String> = (0..1000).map(|i| format!("t{i:04}")).collect();
    let mut commands = String::new();
    for name in &names {
        commands.push_str(&format!(
            "update {} {}\n",
            checkpoint_ref("s1", name).unwrap(),
            taken.commit
        ));
    }
    git_with_stdin(&wt, &["update-ref", "--stdin"], commands.as_bytes());
    let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let turns: Vec<CheckpointTurn<'_>> = names
        .iter()
        .enumerate()
        .map(|(i, turn)| CheckpointTurn {
            turn,
            taken_at: start + Duration::from_secs(60 * i as u64),
        })
        .collect();
    let now = start + Duration::from_secs(60 * 1000);
    let refs = |session: &str| -> Vec<String> {
        let listing = git(
            &wt,
            &[
                "for-each-ref",
                "--format=%(refname:lstrip=4)",
                &format!("refs/kandev/checkpoints/{session}/"),
            ],
        );
        listing.lines().map(str::to_owned).collect()
    };
    assert_eq!(refs("s1").len(), 1000);

    let deleted = collect(&wt, "s1", &turns, Retention { keep: 10, max_age: None, now }).await;
    assert_eq!(deleted.unwrap(), 990);
    assert_eq!(refs("s1"), names[990..]);

    // Only the last three were taken within the last five minutes.
    let young = Retention { keep: 10, max_age: Some(Duration::from_secs(60 * 3)), now };
    assert_eq!(collect(&wt, "s1", &turns, young).await.unwrap(), 7);
    assert_eq!(refs("s1"), names[997..]);
    assert_eq!(collect(&wt, "s1", &turns, young).await.unwrap(), 0);

    assert_eq!(
        collect(&wt, "s1", &[], Retention { keep: 10, max_age: None, now }).await.unwrap(),
        3
    );
    assert!(refs("s1").is_empty());
    assert_eq!(refs("s2"), ["t0000"], "another session's checkpoints are not touched");
    assert_eq!(git(&wt, &["rev-parse", "refs/kandev/checkpoints/s2/t0000"]), other.commit);
    assert_eq!(git(&wt, &["cat-file", "-t", &taken.commit]), "commit", "no gc is run");
}

#[tokio::test]
async fn i48_1_invalid_session_and_turn_names_are_refused() {
    let fx = Fixture::new(&[("a.txt", "a\n")]);
    let wt = fx.worktree();
    for (session, turn) in
        [("a/b", "t"), ("s", "../x"), ("s", ""), ("", "t"), ("s", "t x"), ("s", "t.lock")]
    {
        let err = checkpoint_ref(session, turn).unwrap_err();
        assert!(matches!(err, GitError::Forbidden { .. }), "{session:?}/{turn:?}: {err}");
    }
    let main = git(&wt, &["rev-parse", "refs/heads/main"]);
    for reference in [
        "refs/heads/main",
        "HEAD",
        "refs/kandev/checkpoints/s",
        "refs/kandev/checkpoints/s/t/u",
        "refs/kandev/checkpoints/s/t.x",
    ] {
        let err = snapshot(&wt, reference, None).await.unwrap_err();
        assert!(matches!(err, GitError::Forbidden { .. }), "{reference}: {err}");
    }
    assert_eq!(git(&wt, &["rev-parse", "refs/heads/main"]), main);
    assert_eq!(git(&wt, &["for-each-ref", "refs/kandev/"]), "");
    let retention = Retention { keep: 1, max_age: None, now: SystemTime::now() };
    let err = collect(&wt, "s/x", &[], retention).await.unwrap_err();
    assert!(matches!(err, GitError::Forbidden { .. }), "{err}");
    let turns = [CheckpointTurn { turn: "../t", taken_at: SystemTime::now() }];
    let err = collect(&wt, "s", &turns, retention).await.unwrap_err();
    assert!(matches!(err, GitError::Forbidden { .. }), "{err}");
}
