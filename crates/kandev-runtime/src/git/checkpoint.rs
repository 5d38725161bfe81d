//! Checkpoints of a worktree's files: a snapshot taken before a turn is a commit under
//! `refs/kandev/checkpoints/<session>/<turn>`, and the worktree can be compared with it or made
//! equal to it again.
//!
//! Invariants:
//! - The user's index, `HEAD`, branches, their reflogs and the stash are never written. Every
//!   command that needs an index gets a temporary one of its own (`GIT_INDEX_FILE`, a file
//!   `kandev-checkpoint-<pid>-<n>.index` in the worktree's git dir, deleted when done), so a
//!   change the user staged stays staged exactly as it was.
//! - The state recorded is the worktree as `git add -A` sees it on top of the user's index:
//!   tracked files with their changes, untracked files, not ignored ones. The user's index is
//!   copied into the temporary one (with its modification time, so git's "racily clean"
//!   check works as on the real one) only so that git need not hash unchanged files again;
//!   `add -A` then makes the copy equal to the worktree.
//! - A checkpoint is a commit whose parent is `HEAD` (none while `HEAD` is unborn), made with
//!   the user's identity or, where git finds none, `Kandev <kandev@localhost>` via `-c`;
//!   never signed (signing could prompt). Its ref gets no reflog.
//! - [`restore`] rewrites and deletes only the paths git lists as different, writes files
//!   with `git checkout-index` from a temporary index and deletes through directories opened
//!   one by one without following symlinks; ignored files are left alone.
//! - Every path list from git is read NUL-separated, and every list is bounded by
//!   [`MAX_LIST_BYTES`]: a longer one is an error, never a silently shortened list.
//!
//! Limits: submodules and embedded repositories (gitlinks) are neither recorded in content
//! nor restored; files the user marked `skip-worktree` or `assume-unchanged` count as
//! unchanged. A directory left empty by [`restore`] is removed, even one that was empty
//! (and so not part of any checkpoint) before. Large untracked files that are not ignored
//! are stored in the object database by every snapshot that sees them changed.

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;

use super::GitError;
use super::cmd::Git;
use super::commit::{FALLBACK_USER_EMAIL, FALLBACK_USER_NAME};
use super::worktree::{open_worktree, resolve_commit};
use crate::confine::Root;

/// Where every checkpoint ref lives: `<CHECKPOINT_REFS>/<session>/<turn>`.
pub const CHECKPOINT_REFS: &str = "refs/kandev/checkpoints";

/// Longest session or turn id a checkpoint ref accepts (a ref component is a file name).
pub const MAX_CHECKPOINT_ID: usize = 128;

/// Most bytes of a path list (a diff, the refs of a session) read from git.
const MAX_LIST_BYTES: usize = 64 * 1024 * 1024;

/// The message of every checkpoint commit.
const MESSAGE: &str = "kandev checkpoint";

/// A recorded state of a worktree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// The checkpoint commit (full id).
    pub commit: String,
    /// Its tree: the worktree's files.
    pub tree: String,
    /// Whether the commit was made now (`false`: the state equalled the previous checkpoint's,
    /// whose commit the reference now names).
    pub new: bool,
}

/// One turn of a session as [`collect`] orders and ages its checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckpointTurn<'a> {
    /// The turn id of the checkpoint ref.
    pub turn: &'a str,
    /// When the checkpoint before the turn was taken.
    pub taken_at: SystemTime,
}

/// What [`collect`] keeps of a session's checkpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// At most this many: those of the newest turns.
    pub keep: usize,
    /// None taken longer ago than this before `now` (`None`: no age limit).
    pub max_age: Option<Duration>,
    /// The time ages are measured at.
    pub now: SystemTime,
}

/// The ref a session's checkpoint before turn `turn` lives at:
/// `refs/kandev/checkpoints/<session>/<turn>`. Both ids must be 1 to [`MAX_CHECKPOINT_ID`]
/// characters of `A-Z a-z 0-9 _ -`; anything else is [`GitError::Forbidden`].
pub fn checkpoint_ref(session: &str, turn: &str) -> Result<String, GitError> {
    let reference = format!("{CHECKPOINT_REFS}/{session}/{turn}");
    check_id(&reference, "session", session)?;
    check_id(&reference, "turn", turn)?;
    Ok(reference)
}

/// Records the worktree's state now (tracked changes and untracked files, not ignored ones)
/// as a commit whose parent is `HEAD`, under `reference` (a [`checkpoint_ref`]; any other ref
/// is [`GitError::Forbidden`]). When the state's tree equals the tree of `previous` (the last
/// checkpoint's commit, if any), no commit is made and `reference` names `previous`.
///
/// Errors: [`GitError::UnknownCommit`] for a `previous` the repository does not have.
pub async fn snapshot(
    worktree: &Path,
    reference: &str,
    previous: Option<&str>,
) -> Result<Snapshot, GitError> {
    parse_checkpoint_ref(reference)?;
    let worktree = open_worktree(worktree).await?;
    let dirs = GitDirs::of(&worktree).await?;
    let head = head_commit(&worktree).await?;
    let tree = current_tree(&worktree, &dirs, head.as_deref()).await?;
    let reused = match previous {
        Some(previous) => {
            let previous = resolve_commit(&worktree, previous).await?;
            (tree_of(&worktree, &previous).await? == tree).then_some(previous)
        }
        None => None,
    };
    let (commit, new) = match reused {
        Some(previous) => (previous, false),
        None => {
            let mut git =
                identified(&worktree).await?.args(["commit-tree", "--no-gpg-sign", "-m", MESSAGE]);
            if let Some(head) = &head {
                git = git.args(["-p", head]);
            }
            (git.arg(&tree).text().await?, true)
        }
    };
    Git::new(&worktree)
        .config("core.logAllRefUpdates=false")
        .args(["update-ref", "-m", MESSAGE, reference, &commit])
        .run()
        .await?;
    tracing::debug!(worktree = %worktree.display(), reference, %commit, new, "checkpoint taken");
    Ok(Snapshot { commit, tree, new })
}

/// The paths whose content (or mode) differs between the worktree now and `commit`'s tree,
/// tracked and untracked, not ignored, sorted: exactly what [`restore`] would change.
pub async fn changed_since(worktree: &Path, commit: &str) -> Result<Vec<String>, GitError> {
    let worktree = open_worktree(worktree).await?;
    let (_, changes) = differences(&worktree, commit).await?;
    Ok(sorted_names(changes.iter().map(|c| c.path.as_slice())))
}

/// Makes the worktree's files equal `commit`'s tree byte for byte, modes included: changed
/// files are rewritten, files added since are deleted (and directories left empty by that),
/// files deleted since come back. Ignored files, the user's index (staged changes) and `HEAD`
/// are left as they are. Returns the paths it changed, sorted.
///
/// Deletions come first, then rewrites. Errors: [`GitError::UnknownCommit`];
/// [`GitError::Forbidden`] when a path to delete is reached through something other than
/// directories, or became a directory (the worktree changed meanwhile): the restore stops
/// there, with the deletions before it done and nothing rewritten yet.
pub async fn restore(worktree: &Path, commit: &str) -> Result<Vec<String>, GitError> {
    let worktree = open_worktree(worktree).await?;
    let (target, changes) = differences(&worktree, commit).await?;
    let (removed, written): (Vec<Change>, Vec<Change>) =
        changes.into_iter().partition(|c| c.in_target.is_none());
    let paths = sorted_names(removed.iter().chain(&written).map(|c| c.path.as_slice()));

    let root = worktree.clone();
    let removed: Vec<Vec<u8>> = removed.into_iter().map(|c| c.path).collect();
    tokio::task::spawn_blocking(move || remove_paths(&root, &removed))
        .await
        .map_err(|e| GitError::io("deleting files failed", io::Error::other(e)))??;

    if !written.is_empty() {
        let index = TempIndex::create(&target.dirs.git_dir).await?;
        index.git(&worktree).args(["read-tree", &target.tree]).run().await?;
        let mut list = Vec::new();
        for change in &written {
            list.extend_from_slice(&change.path);
            list.push(0);
        }
        index
            .git(&worktree)
            .args(["checkout-index", "--force", "-z", "--stdin"])
            .stdin_bytes(list)
            .run()
            .await?;
    }
    let changed = paths.len();
    let commit = &target.commit;
    tracing::debug!(worktree = %worktree.display(), %commit, changed, "checkpoint restored");
    Ok(paths)
}

/// Deletes checkpoint refs of `session`, and returns how many. `turns` are the session's
/// turns, oldest first (their order decides which are newest; ref names alone cannot). Kept
/// are the checkpoints of the newest `retention.keep` turns among those not taken longer than
/// `retention.max_age` before `retention.now`; deleted are all others, including those of
/// turns not in `turns` (so an empty `turns` deletes the whole session's). The commits become
/// unreachable and are left to `git gc`.
///
/// The refs are deleted in one transaction, each only if it still names the commit it named
/// when listed: a ref moved meanwhile fails the call and nothing is deleted.
pub async fn collect(
    worktree: &Path,
    session: &str,
    turns: &[CheckpointTurn<'_>],
    retention: Retention,
) -> Result<usize, GitError> {
    let prefix = format!("{CHECKPOINT_REFS}/{session}/");
    check_id(&prefix, "session", session)?;
    for turn in turns {
        check_id(&format!("{prefix}{}", turn.turn), "turn", turn.turn)?;
    }
    let worktree = open_worktree(worktree).await?;
    let listing = bounded(
        Git::new(&worktree)
            .args(["for-each-ref", "--format=%(objectname) %(refname)"])
            .arg(&prefix),
    )
    .await?;
    let listing = String::from_utf8_lossy(&listing.stdout);
    let existing: Vec<(&str, &str)> = listing
        .lines()
        .filter_map(|line| line.split_once(' '))
        .filter(|(_, name)| name.strip_prefix(&prefix).is_some_and(is_valid_id))
        .collect();
    let doomed = doomed(&existing, &prefix, turns, retention);
    if doomed.is_empty() {
        return Ok(0);
    }
    let mut commands = String::new();
    for (commit, name) in &doomed {
        commands.push_str(&format!("delete {name} {commit}\n"));
    }
    Git::new(&worktree).args(["update-ref", "--stdin"]).stdin_bytes(commands).run().await?;
    let deleted = doomed.len();
    tracing::debug!(worktree = %worktree.display(), session, deleted, "checkpoints collected");
    Ok(deleted)
}

/// Of the `(commit, ref)` pairs of one session, those [`collect`] deletes.
fn doomed<'r>(
    existing: &[(&'r str, &'r str)],
    prefix: &str,
    turns: &[CheckpointTurn<'_>],
    retention: Retention,
) -> Vec<(&'r str, &'r str)> {
    // A turn listed twice counts where it was listed last.
    let positions: HashMap<&str, (usize, SystemTime)> =
        turns.iter().enumerate().map(|(index, t)| (t.turn, (index, t.taken_at))).collect();
    let young = |taken_at: SystemTime| match retention.max_age {
        None => true,
        Some(max_age) => retention.now.duration_since(taken_at).unwrap_or_default() <= max_age,
    };
    let mut candidates: Vec<(usize, &str)> = existing
        .iter()
        .filter_map(|(_, name)| {
            let (index, taken_at) = positions.get(name.strip_prefix(prefix)?)?;
            young(*taken_at).then_some((*index, *name))
        })
        .collect();
    candidates.sort_unstable();
    let kept: HashSet<&str> = candidates[candidates.len().saturating_sub(retention.keep)..]
        .iter()
        .map(|(_, name)| *name)
        .collect();
    existing.iter().filter(|(_, name)| !kept.contains(name)).copied().collect()
}

/// The commit a restore or comparison aims at, its tree, and the worktree's git dirs.
struct Target {
    commit: String,
    tree: String,
    dirs: GitDirs,
}

/// One path that differs between a target tree and the worktree.
#[derive(Debug, PartialEq, Eq)]
struct Change {
    path: Vec<u8>,
    /// Its mode in the target; `None`: the target does not have it.
    in_target: Option<String>,
}

/// The target named by `commit` and how the worktree differs from it (gitlinks left out).
async fn differences(worktree: &Path, commit: &str) -> Result<(Target, Vec<Change>), GitError> {
    let commit = resolve_commit(worktree, commit).await?;
    let tree = tree_of(worktree, &commit).await?;
    let dirs = GitDirs::of(worktree).await?;
    let head = head_commit(worktree).await?;
    let current = current_tree(worktree, &dirs, head.as_deref()).await?;
    let changes = if current == tree {
        Vec::new()
    } else {
        let diff = bounded(Git::new(worktree).args([
            "diff-tree",
            "-r",
            "-z",
            "--no-renames",
            "--raw",
            &tree,
            &current,
        ]))
        .await?;
        parse_raw(&diff.stdout)
    };
    Ok((Target { commit, tree, dirs }, changes))
}

/// Parses `git diff-tree -r -z --no-renames --raw <target> <current>`: a record
/// `:<mode> <mode> <id> <id> <status>` and a path, each NUL-terminated. Gitlinks (mode
/// `160000` on either side) are left out.
fn parse_raw(bytes: &[u8]) -> Vec<Change> {
    let mut fields = bytes.split(|&b| b == 0);
    let mut changes = Vec::new();
    while let (Some(meta), Some(path)) = (fields.next(), fields.next()) {
        let Some(meta) = meta.strip_prefix(b":") else { break };
        let meta = String::from_utf8_lossy(meta);
        let mut parts = meta.split(' ');
        let (Some(target_mode), Some(current_mode)) = (parts.next(), parts.next()) else { break };
        if target_mode == "160000" || current_mode == "160000" || path.is_empty() {
            continue;
        }
        let in_target = (target_mode != "000000").then(|| target_mode.to_owned());
        changes.push(Change { path: path.to_vec(), in_target });
    }
    changes
}

/// The worktree's git dir and the user's index file.
struct GitDirs {
    git_dir: PathBuf,
    index: PathBuf,
}

impl GitDirs {
    async fn of(worktree: &Path) -> Result<Self, GitError> {
        let git =
            Git::new(worktree).args(["rev-parse", "--absolute-git-dir", "--git-path", "index"]);
        let text = git.text().await?;
        let mut lines = text.lines();
        let (Some(git_dir), Some(index)) = (lines.next(), lines.next()) else {
            return Err(GitError::Git {
                command: git.describe(),
                stderr: format!("unexpected output: {text}"),
            });
        };
        Ok(Self { git_dir: PathBuf::from(git_dir), index: worktree.join(index) })
    }
}

/// A temporary index file in the git dir, deleted (with a lock git left) when dropped.
struct TempIndex {
    path: PathBuf,
}

impl TempIndex {
    async fn create(git_dir: &Path) -> Result<Self, GitError> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let name = format!("kandev-checkpoint-{}-{n}.index", std::process::id());
        let index = Self { path: git_dir.join(name) };
        // A file of the same name left by a killed process of the same pid.
        for stale in [index.path.clone(), index.lock_path()] {
            match tokio::fs::remove_file(&stale).await {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(GitError::io(format!("failed to remove `{}`", stale.display()), e));
                }
            }
        }
        Ok(index)
    }

    fn lock_path(&self) -> PathBuf {
        let mut lock = self.path.clone().into_os_string();
        lock.push(".lock");
        PathBuf::from(lock)
    }

    /// `git` in `worktree` on this index, with the index features that would write files
    /// besides it (a split index) or hide entries from `checkout-index` (a sparse index) off.
    fn git(&self, worktree: &Path) -> Git {
        Git::new(worktree)
            .config("core.splitIndex=false")
            .config("index.sparse=false")
            .config("core.fsmonitor=false")
            .env("GIT_INDEX_FILE", &self.path)
    }
}

impl Drop for TempIndex {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        let _ = std::fs::remove_file(self.lock_path());
    }
}

/// The tree of the worktree's files now, written to the object database.
async fn current_tree(
    worktree: &Path,
    dirs: &GitDirs,
    head: Option<&str>,
) -> Result<String, GitError> {
    let index = TempIndex::create(&dirs.git_dir).await?;
    let (from, to) = (dirs.index.clone(), index.path.clone());
    let copied = tokio::task::spawn_blocking(move || copy_index(&from, &to))
        .await
        .map_err(|e| GitError::io("copying the index failed", io::Error::other(e)))?
        .map_err(|e| GitError::io(format!("failed to copy `{}`", dirs.index.display()), e))?;
    if !copied && let Some(head) = head {
        index.git(worktree).args(["read-tree", head]).run().await?;
    }
    index.git(worktree).args(["add", "-A"]).run().await?;
    index.git(worktree).arg("write-tree").text().await
}

/// Copies the index `from` to `to` with its modification time; `false` when there is none.
fn copy_index(from: &Path, to: &Path) -> io::Result<bool> {
    let mut source = match File::open(from) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    // The time of the file read, not of one that replaced it meanwhile.
    let modified = source.metadata()?.modified()?;
    let mut copy = File::create_new(to)?;
    io::copy(&mut source, &mut copy)?;
    copy.set_modified(modified)?;
    Ok(true)
}

/// The commit `HEAD` names; `None` while it is unborn.
async fn head_commit(worktree: &Path) -> Result<Option<String>, GitError> {
    let output = Git::new(worktree)
        .args(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"])
        .output()
        .await?;
    Ok(output.success().then(|| output.text()))
}

async fn tree_of(worktree: &Path, commit: &str) -> Result<String, GitError> {
    Git::new(worktree)
        .args(["rev-parse", "--verify", "--end-of-options"])
        .arg(format!("{commit}^{{tree}}"))
        .text()
        .await
}

/// `git` with the fallback identity filled in where the configuration has none (as
/// `commit.rs` does for the task's own commits).
async fn identified(worktree: &Path) -> Result<Git, GitError> {
    let mut git = Git::new(worktree);
    if !has_config(worktree, "user.name").await? {
        git = git.config(format!("user.name={FALLBACK_USER_NAME}"));
    }
    if !has_config(worktree, "user.email").await? {
        git = git.config(format!("user.email={FALLBACK_USER_EMAIL}"));
    }
    Ok(git)
}

async fn has_config(worktree: &Path, key: &str) -> Result<bool, GitError> {
    let output = Git::new(worktree).args(["config", "--get", key]).output().await?;
    Ok(output.success() && !output.text().trim().is_empty())
}

/// Runs `git` whose stdout must be complete: longer than [`MAX_LIST_BYTES`] is an error.
async fn bounded(git: Git) -> Result<super::cmd::Output, GitError> {
    let git = git.stdout_limit(MAX_LIST_BYTES);
    let output = git.run().await?;
    if output.stdout_truncated {
        return Err(GitError::Git {
            command: git.describe(),
            stderr: format!("its output is longer than {} MiB", MAX_LIST_BYTES / (1024 * 1024)),
        });
    }
    Ok(output)
}

fn sorted_names<'p>(paths: impl Iterator<Item = &'p [u8]>) -> Vec<String> {
    let mut paths: Vec<&[u8]> = paths.collect();
    paths.sort_unstable();
    paths.dedup();
    paths.into_iter().map(|p| String::from_utf8_lossy(p).into_owned()).collect()
}

fn is_valid_id(id: &str) -> bool {
    (1..=MAX_CHECKPOINT_ID).contains(&id.len())
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn check_id(reference: &str, what: &str, id: &str) -> Result<(), GitError> {
    if is_valid_id(id) {
        return Ok(());
    }
    Err(GitError::Forbidden {
        path: PathBuf::from(reference),
        reason: format!(
            "a checkpoint's {what} id must be 1 to {MAX_CHECKPOINT_ID} letters, digits, `_` or `-`"
        ),
    })
}

/// Checks that `reference` is `refs/kandev/checkpoints/<session>/<turn>` with valid ids.
fn parse_checkpoint_ref(reference: &str) -> Result<(), GitError> {
    let rest = reference.strip_prefix(CHECKPOINT_REFS).and_then(|r| r.strip_prefix('/'));
    let Some((session, turn)) = rest.and_then(|r| r.split_once('/')) else {
        return Err(GitError::Forbidden {
            path: PathBuf::from(reference),
            reason: format!("a checkpoint lives under `{CHECKPOINT_REFS}/<session>/<turn>`"),
        });
    };
    check_id(reference, "session", session)?;
    check_id(reference, "turn", turn)
}

const DIR_FLAGS: OFlags =
    OFlags::RDONLY.union(OFlags::DIRECTORY).union(OFlags::NOFOLLOW).union(OFlags::CLOEXEC);

/// Deletes `paths` (relative, as git lists them) beneath `worktree`, then every directory on
/// their way that is empty afterwards. Directories are opened one by one without following a
/// symlink, and the last component is unlinked (a symlink itself, never its target).
fn remove_paths(worktree: &Path, paths: &[Vec<u8>]) -> Result<(), GitError> {
    let root = Root::open(worktree)?;
    for path in paths {
        remove_path(root.dir_fd(), path)?;
    }
    Ok(())
}

fn remove_path(root: BorrowedFd<'_>, path: &[u8]) -> Result<(), GitError> {
    let shown = String::from_utf8_lossy(path).into_owned();
    let forbidden = |reason: &str| GitError::Forbidden {
        path: PathBuf::from(&shown),
        reason: reason.to_owned(),
    };
    let parts: Vec<&OsStr> = path.split(|&b| b == b'/').map(OsStr::from_bytes).collect();
    if parts
        .iter()
        .any(|p| p.is_empty() || *p == "." || *p == ".." || p.eq_ignore_ascii_case(".git"))
    {
        return Err(forbidden("git listed a path that is not a plain path in the worktree"));
    }
    let Some((name, dirs)) = parts.split_last() else { return Ok(()) };
    let mut opened: Vec<OwnedFd> = Vec::with_capacity(dirs.len());
    for dir in dirs {
        let parent = opened.last().map_or(root, AsFd::as_fd);
        match rustix::fs::openat(parent, *dir, DIR_FLAGS, Mode::empty()) {
            Ok(fd) => opened.push(fd),
            Err(Errno::NOENT) => return Ok(()),
            Err(Errno::LOOP | Errno::NOTDIR | Errno::MLINK) => {
                return Err(forbidden(
                    "a directory on its way became a symlink or a file meanwhile; \
                     the restore stopped here",
                ));
            }
            Err(e) => {
                return Err(GitError::io(
                    format!("failed to open the directory of `{shown}`"),
                    e.into(),
                ));
            }
        }
    }
    let parent = opened.last().map_or(root, AsFd::as_fd);
    match rustix::fs::unlinkat(parent, *name, AtFlags::empty()) {
        Ok(()) | Err(Errno::NOENT) => {}
        Err(Errno::ISDIR) => {
            return Err(forbidden("it became a directory meanwhile; the restore stopped here"));
        }
        Err(e) => return Err(GitError::io(format!("failed to delete `{shown}`"), e.into())),
    }
    // Directories left empty, deepest first; the first one that is not empty ends it.
    while let Some(dir) = opened.pop() {
        drop(dir);
        let parent = opened.last().map_or(root, AsFd::as_fd);
        if rustix::fs::unlinkat(parent, dirs[opened.len()], AtFlags::REMOVEDIR).is_err() {
            break;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoint_refs_take_only_plain_ids() {
        assert_eq!(checkpoint_ref("s-1_A", "t9").unwrap(), "refs/kandev/checkpoints/s-1_A/t9");
        let long = "x".repeat(MAX_CHECKPOINT_ID + 1);
        for (session, turn) in [
            ("", "t"),
            ("s", ""),
            ("a/b", "t"),
            ("s", ".."),
            ("s", "t.lock"),
            ("s p", "t"),
            ("s", "t~1"),
            ("é", "t"),
            ("s", long.as_str()),
        ] {
            let err = checkpoint_ref(session, turn).unwrap_err();
            assert!(matches!(err, GitError::Forbidden { .. }), "{session:?}/{turn:?}: {err}");
        }
        assert!(parse_checkpoint_ref("refs/kandev/checkpoints/s/t").is_ok());
        for reference in [
            "refs/heads/main",
            "HEAD",
            "refs/kandev/checkpoints/s",
            "refs/kandev/checkpoints/s/t/u",
        ] {
            assert!(parse_checkpoint_ref(reference).is_err(), "{reference}");
        }
    }

    #[test]
    fn raw_records_say_which_paths_the_target_has_and_skip_gitlinks() {
        let z = "0".repeat(40);
        let a = "a".repeat(40);
        let raw = format!(
            ":100644 100644 {a} {a} M\0a b.txt\0:000000 100644 {z} {a} A\0new\0\
             :100755 000000 {a} {z} D\0gone\0:160000 160000 {a} {a} M\0sub\0"
        );
        let changes = parse_raw(raw.as_bytes());
        assert_eq!(
            changes,
            vec![
                Change { path: b"a b.txt".to_vec(), in_target: Some("100644".into()) },
                Change { path: b"new".to_vec(), in_target: None },
                Change { path: b"gone".to_vec(), in_target: Some("100755".into()) },
            ]
        );
        assert!(parse_raw(b"").is_empty());
    }

    #[test]
    fn collect_keeps_the_newest_young_turns_and_drops_unknown_ones() {
        let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let at = |minutes: u64| start + Duration::from_secs(60 * minutes);
        let turns = [
            CheckpointTurn { turn: "t1", taken_at: at(0) },
            CheckpointTurn { turn: "t2", taken_at: at(10) },
            CheckpointTurn { turn: "t3", taken_at: at(20) },
            CheckpointTurn { turn: "t4", taken_at: at(30) },
        ];
        let prefix = "refs/kandev/checkpoints/s/";
        // Listed in ref-name order, which is not turn order.
        let existing = [
            ("c", "refs/kandev/checkpoints/s/orphan"),
            ("c", "refs/kandev/checkpoints/s/t1"),
            ("c", "refs/kandev/checkpoints/s/t3"),
            ("c", "refs/kandev/checkpoints/s/t4"),
        ];
        let names = |doomed: Vec<(&str, &str)>| -> Vec<String> {
            doomed.into_iter().map(|(_, n)| n.trim_start_matches(prefix).to_owned()).collect()
        };
        let retention = Retention { keep: 2, max_age: None, now: at(30) };
        assert_eq!(names(doomed(&existing, prefix, &turns, retention)), ["orphan", "t1"]);
        let retention =
            Retention { keep: 10, max_age: Some(Duration::from_secs(60 * 10)), now: at(35) };
        assert_eq!(names(doomed(&existing, prefix, &turns, retention)), ["orphan", "t1", "t3"]);
        let retention = Retention { keep: 0, max_age: None, now: at(35) };
        assert_eq!(doomed(&existing, prefix, &turns, retention).len(), 4);
        let retention = Retention { keep: 10, max_age: None, now: at(35) };
        assert_eq!(names(doomed(&existing, prefix, &[], retention)).len(), 4);
    }
}
