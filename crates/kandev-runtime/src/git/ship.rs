//! Shipping a task branch: where it stands against its base (ahead/behind, dirty files,
//! conflicts computed without touching any worktree), rebase, merge into the base branch,
//! push, and the worktree chores around it (copying ignored files in, listing branches).
//!
//! Invariants:
//! - Nothing here fetches or pushes unless its name says so ([`fetch_base`], [`push`]).
//! - [`status`] and [`merge_into_base`]'s conflict check use `git merge-tree --write-tree`,
//!   which writes objects only: no worktree, index or ref changes.
//! - [`rebase`] leaves the branch exactly as it was when it cannot finish (it aborts).
//! - [`merge_into_base`] never leaves a half-merge: the result commit is built as an object
//!   first; then either the base ref moves by compare-and-set (base not checked out), or the
//!   clean checkout of the base fast-forwards to it (`merge --ff-only`).
//! - [`push`] never forces, except `--force-with-lease` against the remote-tracking ref the
//!   caller last saw.

use std::path::{Component, Path, PathBuf};

use super::GitError;
use super::cmd::Git;
use super::commit::{FALLBACK_USER_EMAIL, FALLBACK_USER_NAME};
use super::worktree::{list_worktrees, open_repo, open_worktree, resolve_base_ref};

/// How many paths a refusal lists at most.
const MAX_LISTED: usize = 200;

/// Uncommitted work in a worktree.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Dirty {
    /// Tracked files changed or staged.
    pub uncommitted: Vec<String>,
    /// Files git does not track and does not ignore.
    pub untracked: Vec<String>,
}

impl Dirty {
    pub fn is_clean(&self) -> bool {
        self.uncommitted.is_empty() && self.untracked.is_empty()
    }

    /// Every path, uncommitted first.
    pub fn paths(&self) -> Vec<String> {
        self.uncommitted.iter().chain(&self.untracked).cloned().collect()
    }
}

/// Where the task branch stands against the remote it was pushed to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upstream {
    pub remote: String,
    /// The remote-tracking ref's commit (`refs/remotes/<remote>/<branch>`).
    pub pushed_head: String,
    /// Commits on the task branch not pushed.
    pub ahead: u32,
    /// Commits on the remote branch not in the task branch.
    pub behind: u32,
}

/// A task branch against its base, as of now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BranchStatus {
    pub branch: String,
    pub head: String,
    /// The base branch's current tip.
    pub base_tip: String,
    /// Commits on the task branch not on the base.
    pub ahead: u32,
    /// Commits on the base not on the task branch.
    pub behind: u32,
    pub dirty: Dirty,
    /// Files that would conflict when the task branch is merged into the base tip.
    pub conflicts_with_base: Vec<String>,
    /// `None` when the branch has no remote-tracking ref at `origin`.
    pub upstream: Option<Upstream>,
}

/// How [`merge_into_base`] lands the task branch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MergeStrategy {
    /// A merge commit with both parents.
    Merge,
    /// One commit with the task's changes on top of the base.
    Squash,
    /// The base moves to the task branch's head; only when the base is its ancestor.
    FastForward,
}

/// The commits and files of a worktree that are not clean, from `git status`.
pub async fn dirty_files(worktree: &Path) -> Result<Dirty, GitError> {
    let worktree = open_worktree(worktree).await?;
    let output = Git::new(&worktree)
        .args(["status", "--porcelain=v1", "-z", "--untracked-files=all"])
        .run()
        .await?;
    let mut dirty = Dirty::default();
    let mut fields = output.stdout.split(|&b| b == 0).filter(|f| !f.is_empty());
    while let Some(entry) = fields.next() {
        if entry.len() < 4 {
            continue;
        }
        let path = String::from_utf8_lossy(&entry[3..]).into_owned();
        if entry.starts_with(b"??") {
            dirty.untracked.push(path);
        } else {
            dirty.uncommitted.push(path);
        }
        if matches!(entry.first(), Some(b'R' | b'C')) {
            fields.next();
        }
    }
    Ok(dirty)
}

/// The task branch of `worktree` against `base_branch` (a local branch, `origin/x`, or a
/// branch known only as `origin/x`). Reads refs only: nothing is fetched.
pub async fn status(worktree: &Path, base_branch: &str) -> Result<BranchStatus, GitError> {
    let worktree = open_worktree(worktree).await?;
    let branch = current_branch(&worktree).await?;
    let head = Git::new(&worktree).args(["rev-parse", "HEAD"]).text().await?;
    let mut status = status_of(&worktree, branch, head, base_branch).await?;
    status.dirty = dirty_files(&worktree).await?;
    Ok(status)
}

/// The task branch `branch`, whose head is the ref `head_ref` of the repository `repo`
/// (the SSH executor's, fetched: `refs/kandev/incoming/<branch>`), against `base_branch`, as
/// [`status`] reads a worktree's: `dirty` is empty (the caller knows where the branch's
/// checkout is; the SSH executor's is on its build host). Reads refs only.
pub async fn branch_status(
    repo: &Path,
    branch: &str,
    head_ref: &str,
    base_branch: &str,
) -> Result<BranchStatus, GitError> {
    let repo = open_repo(repo).await?;
    let Some(head) = commit_of(&repo, head_ref).await? else {
        return Err(GitError::BaseBranchMissing { branch: branch.to_owned() });
    };
    status_of(&repo, branch.to_owned(), head, base_branch).await
}

async fn status_of(
    dir: &Path,
    branch: String,
    head: String,
    base_branch: &str,
) -> Result<BranchStatus, GitError> {
    let base_tip = resolve_base_ref(dir, base_branch).await?;
    let (behind, ahead) = left_right(dir, &base_tip, &head).await?;
    let conflicts_with_base = match merge_tree(dir, &base_tip, &head).await? {
        MergeTree::Clean(_) => vec![],
        MergeTree::Conflicts(paths) => paths,
    };
    let upstream = upstream(dir, "origin", &branch, &head).await?;
    let dirty = Dirty::default();
    Ok(BranchStatus { branch, head, base_tip, ahead, behind, dirty, conflicts_with_base, upstream })
}

async fn upstream(
    worktree: &Path,
    remote: &str,
    branch: &str,
    head: &str,
) -> Result<Option<Upstream>, GitError> {
    let tracking = format!("refs/remotes/{remote}/{branch}");
    let output = Git::new(worktree)
        .args(["rev-parse", "--verify", "--quiet", "--end-of-options"])
        .arg(format!("{tracking}^{{commit}}"))
        .output()
        .await?;
    if !output.success() {
        return Ok(None);
    }
    let pushed_head = output.text();
    let (behind, ahead) = left_right(worktree, &pushed_head, head).await?;
    Ok(Some(Upstream { remote: remote.to_owned(), pushed_head, ahead, behind }))
}

/// `(only in a, only in b)` commit counts.
async fn left_right(repo: &Path, a: &str, b: &str) -> Result<(u32, u32), GitError> {
    let counts = Git::new(repo)
        .args(["rev-list", "--left-right", "--count", &format!("{a}...{b}"), "--"])
        .text()
        .await?;
    let mut parts = counts.split_whitespace().map(|n| n.parse::<u32>().unwrap_or(0));
    Ok((parts.next().unwrap_or(0), parts.next().unwrap_or(0)))
}

async fn current_branch(worktree: &Path) -> Result<String, GitError> {
    let head =
        Git::new(worktree).args(["symbolic-ref", "--quiet", "--short", "HEAD"]).output().await?;
    if !head.success() {
        return Err(GitError::DetachedHead { path: worktree.to_path_buf() });
    }
    Ok(head.text())
}

/// What merging two commits would give.
enum MergeTree {
    /// The merged tree's id.
    Clean(String),
    /// The paths that conflict.
    Conflicts(Vec<String>),
}

/// Merges `ours` and `theirs` in memory (`git merge-tree --write-tree`): objects only, no
/// worktree, index or ref is touched.
async fn merge_tree(repo: &Path, ours: &str, theirs: &str) -> Result<MergeTree, GitError> {
    let command = Git::new(repo).args([
        "merge-tree",
        "--write-tree",
        "--name-only",
        "--no-messages",
        "-z",
        ours,
        theirs,
    ]);
    let output = command.output().await?;
    let mut fields = output.stdout.split(|&b| b == 0).filter(|f| !f.is_empty());
    let tree = fields.next().map(|t| String::from_utf8_lossy(t).trim().to_owned());
    match (output.status.code(), tree) {
        (Some(0), Some(tree)) => Ok(MergeTree::Clean(tree)),
        (Some(1), _) => {
            let mut paths: Vec<String> =
                fields.map(|p| String::from_utf8_lossy(p).into_owned()).collect();
            paths.dedup();
            paths.truncate(MAX_LISTED);
            Ok(MergeTree::Conflicts(paths))
        }
        _ => Err(command.failed(&output)),
    }
}

/// Rebases the worktree's branch onto the current tip of `base_branch`.
///
/// Refuses a dirty worktree ([`GitError::DirtyFiles`]). When a commit does not apply, the
/// rebase is aborted, the branch is left exactly where it was, and
/// [`GitError::RebaseConflicts`] lists the files. Returns the new head.
pub async fn rebase(worktree: &Path, base_branch: &str) -> Result<String, GitError> {
    let worktree = open_worktree(worktree).await?;
    current_branch(&worktree).await?;
    let dirty = dirty_files(&worktree).await?;
    if !dirty.is_clean() {
        return Err(GitError::DirtyFiles { path: worktree, files: listed(dirty.paths()) });
    }
    let base_tip = resolve_base_ref(&worktree, base_branch).await?;
    let before = Git::new(&worktree).args(["rev-parse", "HEAD"]).text().await?;
    let command = with_identity(Git::new(&worktree), &worktree)
        .await?
        .config("core.editor=true")
        .args(["rebase", "--no-autostash", "--end-of-options", &base_tip]);
    let output = command.output().await?;
    if output.success() {
        return Git::new(&worktree).args(["rev-parse", "HEAD"]).text().await;
    }
    let conflicted =
        Git::new(&worktree).args(["diff", "--name-only", "-z", "--diff-filter=U"]).output().await?;
    let files: Vec<String> = conflicted
        .stdout
        .split(|&b| b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect();
    let aborted = Git::new(&worktree).args(["rebase", "--abort"]).output().await?;
    let after = Git::new(&worktree).args(["rev-parse", "HEAD"]).text().await?;
    if !aborted.success() || after != before {
        tracing::warn!(worktree = %worktree.display(), stderr = %aborted.stderr, "aborting a rebase failed");
        return Err(command.failed(&output));
    }
    if files.is_empty() {
        return Err(command.failed(&output));
    }
    Err(GitError::RebaseConflicts { base: base_branch.to_owned(), files: listed(files) })
}

/// Merges `branch` into the local branch `base_branch` of `repo_path` with `strategy`.
///
/// Refuses, changing nothing: a base that is not a local branch, conflicts
/// ([`GitError::MergeConflicts`]), a fast-forward that is impossible
/// ([`GitError::NotFastForward`]), a base checked out in a worktree with uncommitted or
/// untracked files ([`GitError::DirtyFiles`], listing them).
pub async fn merge_into_base(
    repo_path: &Path,
    base_branch: &str,
    branch: &str,
    strategy: MergeStrategy,
    message: &str,
) -> Result<Landed, GitError> {
    let repo = open_repo(repo_path).await?;
    let base_ref = format!("refs/heads/{base_branch}");
    let Some(base_tip) = commit_of(&repo, &base_ref).await? else {
        return Err(GitError::BaseNotLocal { branch: base_branch.to_owned() });
    };
    let Some(head) = commit_of(&repo, &format!("refs/heads/{branch}")).await? else {
        return Err(GitError::BaseBranchMissing { branch: branch.to_owned() });
    };
    let checkout = list_worktrees(&repo)
        .await?
        .into_iter()
        .find(|wt| wt.branch.as_deref() == Some(base_branch))
        .map(|wt| wt.path);
    if let Some(checkout) = &checkout {
        let dirty = dirty_files(checkout).await?;
        if !dirty.is_clean() {
            return Err(GitError::DirtyFiles {
                path: checkout.clone(),
                files: listed(dirty.paths()),
            });
        }
    }
    let is_ancestor = Git::new(&repo)
        .args(["merge-base", "--is-ancestor", &base_tip, &head])
        .output()
        .await?
        .success();
    let new_tip = match strategy {
        MergeStrategy::FastForward if !is_ancestor => {
            return Err(GitError::NotFastForward { base: base_branch.to_owned() });
        }
        MergeStrategy::FastForward => head.clone(),
        MergeStrategy::Merge | MergeStrategy::Squash => {
            let tree = match merge_tree(&repo, &base_tip, &head).await? {
                MergeTree::Clean(tree) => tree,
                MergeTree::Conflicts(files) => {
                    return Err(GitError::MergeConflicts { base: base_branch.to_owned(), files });
                }
            };
            let mut commit = with_identity(Git::new(&repo), &repo).await?.args([
                "commit-tree",
                &tree,
                "-p",
                &base_tip,
            ]);
            if strategy == MergeStrategy::Merge {
                commit = commit.args(["-p", &head]);
            }
            commit.args(["-m", message]).text().await?
        }
    };
    match checkout {
        // A clean checkout fast-forwards to the prepared commit: its files follow the ref.
        Some(checkout) => {
            Git::new(&checkout)
                .args(["merge", "--ff-only", "--quiet", "--end-of-options", &new_tip])
                .run()
                .await?;
        }
        // Compare-and-set: a base moved meanwhile is not overwritten.
        None => {
            Git::new(&repo)
                .args([
                    "update-ref",
                    "-m",
                    "kandev: merge task branch",
                    &base_ref,
                    &new_tip,
                    &base_tip,
                ])
                .run()
                .await?;
        }
    }
    tracing::debug!(base = base_branch, branch, commit = %new_tip, "merged task branch");
    Ok(Landed { commit: new_tip, head })
}

/// What [`merge_into_base`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Landed {
    /// The base branch's new commit.
    pub commit: String,
    /// The task branch's head that was merged.
    pub head: String,
}

/// Pushes the worktree's branch to `remote` as the branch of the same name and sets it as
/// upstream. Never forces, except with `force_with_lease` (`--force-with-lease` against the
/// remote-tracking ref: a remote that moved since we last saw it is still refused). Returns
/// the pushed head.
pub async fn push(
    worktree: &Path,
    remote: &str,
    force_with_lease: bool,
) -> Result<String, GitError> {
    let worktree = open_worktree(worktree).await?;
    let branch = current_branch(&worktree).await?;
    remote_url(&worktree, remote).await?;
    let head = Git::new(&worktree).args(["rev-parse", "HEAD"]).text().await?;
    push_ref(&worktree, branch, head, remote, force_with_lease).await
}

/// [`push`] of the local branch `branch` of the repository `repo`, without a worktree (the
/// SSH executor's task branch, fetched into the server's repository). Returns the pushed
/// head.
pub async fn push_branch(
    repo: &Path,
    branch: &str,
    remote: &str,
    force_with_lease: bool,
) -> Result<String, GitError> {
    let repo = open_repo(repo).await?;
    remote_url(&repo, remote).await?;
    let Some(head) = commit_of(&repo, &format!("refs/heads/{branch}")).await? else {
        return Err(GitError::BaseBranchMissing { branch: branch.to_owned() });
    };
    push_ref(&repo, branch.to_owned(), head, remote, force_with_lease).await
}

async fn push_ref(
    worktree: &Path,
    branch: String,
    head: String,
    remote: &str,
    force_with_lease: bool,
) -> Result<String, GitError> {
    let refspec = format!("refs/heads/{branch}:refs/heads/{branch}");
    let mut command = Git::new(worktree).args(["push", "--porcelain", "--set-upstream"]);
    if force_with_lease {
        command = command.arg("--force-with-lease");
    }
    let command = command.args(["--", remote, &refspec]);
    let output = command.output().await?;
    if output.success() {
        return Ok(head);
    }
    let said = format!("{}\n{}", String::from_utf8_lossy(&output.stdout), output.stderr);
    if said.contains("non-fast-forward")
        || said.contains("fetch first")
        || said.contains("stale info")
    {
        return Err(GitError::PushRejected { remote: remote.to_owned(), branch });
    }
    let lower = said.to_lowercase();
    if ["authentication failed", "could not read username", "permission denied", "403"]
        .iter()
        .any(|s| lower.contains(s))
    {
        return Err(GitError::PushAuth { remote: remote.to_owned() });
    }
    Err(command.failed(&output))
}

/// The URL of `remote`, or [`GitError::NoRemote`].
pub async fn remote_url(repo: &Path, remote: &str) -> Result<String, GitError> {
    let output = Git::new(repo).args(["remote", "get-url", "--", remote]).output().await?;
    if output.success() && !output.text().is_empty() {
        Ok(output.text())
    } else {
        Err(GitError::NoRemote { remote: remote.to_owned() })
    }
}

/// Fetches `base_branch` when it names a branch of a configured remote (`origin/feature`),
/// so a task starts from the remote's current tip. A local branch is left alone.
pub async fn fetch_base(repo_path: &Path, base_branch: &str) -> Result<(), GitError> {
    let repo = open_repo(repo_path).await?;
    let Some((remote, branch)) = base_branch.split_once('/') else { return Ok(()) };
    let remotes = Git::new(&repo).args(["remote"]).text().await?;
    if !remotes.lines().any(|r| r == remote) {
        return Ok(());
    }
    if commit_of(&repo, &format!("refs/heads/{base_branch}")).await?.is_some() {
        return Ok(()); // a local branch that happens to contain a slash
    }
    let refspec = format!("+refs/heads/{branch}:refs/remotes/{remote}/{branch}");
    Git::new(&repo).args(["fetch", "--quiet", "--no-tags", "--", remote, &refspec]).run().await?;
    Ok(())
}

/// Local branches, then remote-tracking branches (`origin/x`), without symbolic refs such as
/// `origin/HEAD`.
pub async fn branches(repo_path: &Path) -> Result<Vec<String>, GitError> {
    let repo = open_repo(repo_path).await?;
    let listed = Git::new(&repo)
        .args([
            "for-each-ref",
            "--format=%(refname:short)%00%(symref)",
            "refs/heads",
            "refs/remotes",
        ])
        .text()
        .await?;
    Ok(listed
        .lines()
        .filter_map(|line| {
            let (name, symref) = line.split_once('\0').unwrap_or((line, ""));
            (symref.is_empty() && !name.is_empty()).then(|| name.to_owned())
        })
        .collect())
}

/// Copies the files of the main checkout `repo_path` that match `globs` and that git ignores
/// into `worktree` (same relative path). Never overwrites: a destination that exists (a
/// tracked file of the task branch included) is skipped. Only regular files are copied (no
/// symlinks), and never through a symlinked folder of the worktree. Returns what was copied.
///
/// Globs are git pathspec globs relative to the repository (`.env`, `.env.*`,
/// `config/local.*`); the caller has refused absolute ones, `..` and pathspec magic.
pub async fn copy_ignored_files(
    repo_path: &Path,
    worktree: &Path,
    globs: &[String],
) -> Result<Vec<String>, GitError> {
    if globs.is_empty() {
        return Ok(vec![]);
    }
    let repo = open_repo(repo_path).await?;
    let worktree = open_worktree(worktree).await?;
    let listed = Git::new(&repo)
        .args(["ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--"])
        .args(globs.iter().map(|g| format!(":(glob){g}")))
        .run()
        .await?;
    let mut copied = vec![];
    for raw in listed.stdout.split(|&b| b == 0).filter(|p| !p.is_empty()) {
        let relative = String::from_utf8_lossy(raw).into_owned();
        let rel = Path::new(&relative);
        if !rel.components().all(|c| matches!(c, Component::Normal(_))) {
            continue;
        }
        let source = repo.join(rel);
        match tokio::fs::symlink_metadata(&source).await {
            Ok(meta) if meta.is_file() => {}
            _ => continue,
        }
        let target = worktree.join(rel);
        if tokio::fs::symlink_metadata(&target).await.is_ok()
            || !inside_without_links(&worktree, rel).await
        {
            continue;
        }
        if let Some(parent) = target.parent() {
            tokio::fs::create_dir_all(parent)
                .await
                .map_err(|e| GitError::io(format!("failed to create `{}`", parent.display()), e))?;
        }
        // `create_new`: a file that appeared meanwhile is not overwritten.
        let data = tokio::fs::read(&source)
            .await
            .map_err(|e| GitError::io(format!("failed to read `{}`", source.display()), e))?;
        let written =
            tokio::fs::OpenOptions::new().write(true).create_new(true).open(&target).await;
        match written {
            Ok(mut file) => {
                use tokio::io::AsyncWriteExt;
                file.write_all(&data).await.map_err(|e| {
                    GitError::io(format!("failed to write `{}`", target.display()), e)
                })?;
                copied.push(relative);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                return Err(GitError::io(format!("failed to write `{}`", target.display()), e));
            }
        }
    }
    Ok(copied)
}

/// Whether no existing folder on the way from `root` to `relative`'s parent is a symlink.
async fn inside_without_links(root: &Path, relative: &Path) -> bool {
    let mut at = PathBuf::from(root);
    let Some(parent) = relative.parent() else { return true };
    for component in parent.components() {
        at.push(component);
        match tokio::fs::symlink_metadata(&at).await {
            Ok(meta) if meta.file_type().is_symlink() || !meta.is_dir() => return false,
            Ok(_) => {}
            Err(_) => return true, // created by us from here on
        }
    }
    true
}

/// The commit summaries on `branch` that are not on `base_tip`, oldest first (PR bodies).
pub async fn commit_summaries(worktree: &Path, base_tip: &str) -> Result<Vec<String>, GitError> {
    let worktree = open_worktree(worktree).await?;
    summaries(&worktree, "HEAD", base_tip).await
}

/// [`commit_summaries`] of the commit at `head_ref` of the repository `repo`.
pub async fn branch_commit_summaries(
    repo: &Path,
    head_ref: &str,
    base_tip: &str,
) -> Result<Vec<String>, GitError> {
    let repo = open_repo(repo).await?;
    summaries(&repo, head_ref, base_tip).await
}

async fn summaries(dir: &Path, head: &str, base_tip: &str) -> Result<Vec<String>, GitError> {
    let log = Git::new(dir)
        .args(["log", "--reverse", "--format=%s", &format!("{base_tip}..{head}"), "--"])
        .text()
        .await?;
    Ok(log.lines().map(str::to_owned).filter(|l| !l.is_empty()).collect())
}

pub(crate) async fn commit_of(repo: &Path, full_ref: &str) -> Result<Option<String>, GitError> {
    let output = Git::new(repo)
        .args(["rev-parse", "--verify", "--quiet", "--end-of-options"])
        .arg(format!("{full_ref}^{{commit}}"))
        .output()
        .await?;
    Ok(if output.success() { Some(output.text()) } else { None })
}

/// Fills in a missing committer identity the way [`super::commit_all`] does.
async fn with_identity(git: Git, repo: &Path) -> Result<Git, GitError> {
    let mut git = git;
    for (key, fallback) in [("user.name", FALLBACK_USER_NAME), ("user.email", FALLBACK_USER_EMAIL)]
    {
        let output = Git::new(repo).args(["config", "--get", key]).output().await?;
        if !output.success() || output.text().trim().is_empty() {
            git = git.config(format!("{key}={fallback}"));
        }
    }
    Ok(git)
}

fn listed(mut paths: Vec<String>) -> Vec<String> {
    paths.truncate(MAX_LISTED);
    paths
}

/// Most entries [`disk_usage`] counts before it stops (and says so).
pub const MAX_USAGE_ENTRIES: usize = 1_000_000;

/// The bytes of the regular files under `path` (symlinks are not followed, `.git` is
/// skipped, so a worktree's share of the repository's objects is not counted), and whether
/// the count stopped at [`MAX_USAGE_ENTRIES`].
pub async fn disk_usage(path: &Path) -> Result<(u64, bool), GitError> {
    let path = path.to_path_buf();
    let counted = tokio::task::spawn_blocking(move || {
        let root = crate::confine::Root::open(&path)?;
        let (entries, truncated) = root.walk(MAX_USAGE_ENTRIES)?;
        let bytes = entries
            .iter()
            .filter(|e| e.entry.kind == crate::confine::EntryKind::File)
            .map(|e| e.entry.size)
            .sum::<u64>();
        Ok::<_, crate::confine::PathError>((bytes, truncated))
    })
    .await
    .map_err(|e| GitError::io("measuring a worktree failed", std::io::Error::other(e)))?;
    counted.map_err(GitError::from)
}
