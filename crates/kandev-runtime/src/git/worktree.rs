//! Creating and removing a task's git worktree, plus the repository checks that come first.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use super::GitError;
use super::branch::is_valid_branch_name;
use super::cmd::{Git, ensure_dir};
use super::layout::{create_parents, remove_created_parents};

/// What to create: a worktree of `repo_path` at `worktree_path` on `branch`, which starts
/// at `base_branch`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WorktreeSpec {
    pub repo_path: PathBuf,
    /// A local branch, a remote-tracking branch (`origin/main`), or a branch that exists
    /// only as `origin/<name>`.
    pub base_branch: String,
    pub branch: String,
    /// What happens when `branch` already exists.
    pub existing: OnExistingBranch,
    /// Must not exist yet; missing parents are created.
    pub worktree_path: PathBuf,
}

/// What [`create_worktree`] does when the branch it is asked for already exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnExistingBranch {
    /// Check it out again, with its commits: the caller knows it is the task's own branch,
    /// kept when the task's earlier worktree was removed.
    Reuse,
    /// Never reuse it (it may be another task's, with its commits): use the first name of
    /// `<branch>-2`, `<branch>-3`, ... up to [`MAX_BRANCH_SUFFIX`] that does not exist, and
    /// create it at the base branch. Races with a concurrent creator are retried.
    PickAnother,
}

/// Git's worktree administration (`worktree add`, `remove`, `prune`) is not safe against
/// itself in one repository: an `add` reads the administrative folders of the others, and one
/// being made by a concurrent `add` fails it (`fatal: failed to read
/// .git/worktrees/<name>/commondir`), while a `prune` may delete one being made. So they take
/// turns per repository, in this process (`worktrees.rs`
/// `i12_f6_same_title_tasks_created_together_all_get_worktrees`, which failed about one run
/// in four on a loaded machine before).
async fn administer(repo: &Path) -> tokio::sync::OwnedMutexGuard<()> {
    type Locks = Mutex<HashMap<PathBuf, Arc<tokio::sync::Mutex<()>>>>;
    static LOCKS: OnceLock<Locks> = OnceLock::new();
    let lock = {
        let mut locks = LOCKS
            .get_or_init(Locks::default)
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        locks.entry(repo.to_path_buf()).or_default().clone()
    };
    lock.lock_owned().await
}

/// The highest suffix [`OnExistingBranch::PickAnother`] tries before giving up with
/// [`GitError::NoFreeBranchName`].
pub const MAX_BRANCH_SUFFIX: usize = 100;

/// A created worktree.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Worktree {
    /// Canonical absolute path.
    pub path: PathBuf,
    pub branch: String,
    /// Full sha the task branch started from; [`changes`](super::changes) diffs against it.
    pub base_commit: String,
}

/// Creates a git worktree for a task.
///
/// Checks first, in this order, and creates nothing when a check fails: the repository path
/// exists ([`GitError::RepositoryMissing`]) and is a repository's top level
/// ([`GitError::NotARepository`]), it has a commit ([`GitError::NoCommits`]), the base branch
/// exists ([`GitError::BaseBranchMissing`]), the branch name is valid, the worktree path is
/// free. A new branch is created at the base branch's commit. If the branch already exists,
/// `spec.existing` decides: [`OnExistingBranch::Reuse`] checks it out again (a task whose
/// worktree was removed keeps its branch) and `base_commit` is its merge base with the base
/// branch; [`OnExistingBranch::PickAnother`] creates the first free `<branch>-<n>` instead,
/// so another task's branch and commits are never taken over. The returned
/// [`Worktree::branch`] is the branch actually checked out.
///
/// The worktree directory is created here (atomically, so a concurrent call for the same
/// path gets [`GitError::WorktreeExists`]). If `git worktree add` then fails (for example a
/// failing `post-checkout` hook), that directory, its registration, the branch (only if it
/// was created by this call and still points at the base commit) and any parent directories
/// created here are removed again.
pub async fn create_worktree(spec: &WorktreeSpec) -> Result<Worktree, GitError> {
    let repo = open_repo(&spec.repo_path).await?;
    ensure_has_commits(&repo).await?;
    let base_sha = resolve_base_branch(&repo, &spec.base_branch).await?;
    if !is_valid_branch_name(&spec.branch) {
        return Err(GitError::InvalidBranchName { branch: spec.branch.clone() });
    }
    let path = std::path::absolute(&spec.worktree_path).map_err(|e| {
        GitError::io(format!("failed to make `{}` absolute", spec.worktree_path.display()), e)
    })?;
    match std::fs::symlink_metadata(&path) {
        Ok(_) => return Err(GitError::WorktreeExists { path }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(GitError::io(format!("failed to inspect `{}`", path.display()), e)),
    }
    let mut existing_branch = None;
    if spec.existing == OnExistingBranch::Reuse {
        existing_branch = resolve_commit_of(&repo, &format!("refs/heads/{}", spec.branch)).await?;
        if existing_branch.is_some() {
            let checked_out = list_worktrees(&repo)
                .await?
                .into_iter()
                .find(|wt| wt.branch.as_deref() == Some(spec.branch.as_str()));
            if let Some(wt) = checked_out {
                return Err(GitError::BranchInUse { branch: spec.branch.clone(), path: wt.path });
            }
        }
    }

    let created_parents = create_parents(&path)?;
    let mut suffix = 1;
    loop {
        let branch = match suffix {
            1 => spec.branch.clone(),
            n => format!("{}-{n}", spec.branch),
        };
        if existing_branch.is_none()
            && resolve_commit_of(&repo, &format!("refs/heads/{branch}")).await?.is_some()
        {
            // Only reached with `PickAnother`: someone's branch, never ours to take.
            suffix += 1;
            if suffix > MAX_BRANCH_SUFFIX {
                if let Some(topmost) = &created_parents {
                    remove_created_parents(&path, topmost);
                }
                return Err(GitError::NoFreeBranchName {
                    branch: spec.branch.clone(),
                    last: MAX_BRANCH_SUFFIX,
                });
            }
            continue;
        }
        // Created here, atomically, so a concurrent creator cannot have its directory
        // removed by this call's cleanup; git accepts an existing empty directory.
        if let Err(e) = std::fs::create_dir(&path) {
            if let Some(topmost) = &created_parents {
                remove_created_parents(&path, topmost);
            }
            return Err(match e.kind() {
                io::ErrorKind::AlreadyExists => GitError::WorktreeExists { path },
                _ => GitError::io(format!("failed to create `{}`", path.display()), e),
            });
        }
        let add = match existing_branch {
            None => Git::new(&repo)
                .args(["worktree", "add", "--quiet", "-b", branch.as_str()])
                .arg(&path)
                .arg(&base_sha),
            // A short branch name checks the branch out; a full ref name would detach.
            Some(_) => Git::new(&repo).args(["worktree", "add", "--quiet"]).arg(&path).arg(&branch),
        };
        let added = async {
            {
                let _turn = administer(&repo).await;
                add.run().await?;
            }
            let base_commit = match existing_branch {
                None => base_sha.clone(),
                Some(_) => merge_base(&repo, &base_sha, &branch).await?.unwrap_or(base_sha.clone()),
            };
            let canonical = tokio::fs::canonicalize(&path)
                .await
                .map_err(|e| GitError::io(format!("failed to resolve `{}`", path.display()), e))?;
            Ok::<_, GitError>(Worktree { path: canonical, branch: branch.clone(), base_commit })
        }
        .await;

        let error = match added {
            Ok(worktree) => {
                tracing::debug!(path = %worktree.path.display(), branch = %worktree.branch, "created worktree");
                return Ok(worktree);
            }
            Err(error) => error,
        };
        // Not when git refused because the branch appeared meanwhile: it is someone else's.
        let branch_preexisted =
            matches!(&error, GitError::Git { stderr, .. } if stderr.contains("already exists"));
        let created_branch =
            (existing_branch.is_none() && !branch_preexisted).then_some(branch.as_str());
        let retry = branch_preexisted
            && spec.existing == OnExistingBranch::PickAnother
            && suffix < MAX_BRANCH_SUFFIX;
        let parents = if retry { None } else { created_parents.as_deref() };
        undo_create(&repo, &path, created_branch, &base_sha, parents).await;
        if !retry {
            return Err(error);
        }
        suffix += 1;
    }
}

/// Removes what a failed [`create_worktree`] left behind. Failures are logged only: the
/// original error is the one worth reporting.
async fn undo_create(
    repo: &Path,
    path: &Path,
    created_branch: Option<&str>,
    base_sha: &str,
    topmost: Option<&Path>,
) {
    if std::fs::symlink_metadata(path).is_ok()
        && let Err(e) = tokio::fs::remove_dir_all(path).await
    {
        tracing::warn!(path = %path.display(), error = %e, "removing a half-created worktree failed");
    }
    let pruned = {
        let _turn = administer(repo).await;
        Git::new(repo).args(["worktree", "prune"]).run().await
    };
    if let Err(e) = pruned {
        tracing::warn!(error = %e, "pruning worktrees failed");
    }
    if let Some(branch) = created_branch {
        // Deletes the branch only while it still points at the base commit.
        let deleted = Git::new(repo)
            .args(["update-ref", "-d", &format!("refs/heads/{branch}"), base_sha])
            .run()
            .await;
        if let Err(e) = deleted {
            tracing::warn!(branch, error = %e, "deleting a half-created branch failed");
        }
    }
    if let Some(topmost) = topmost {
        remove_created_parents(path, topmost);
    }
}

/// Removes a task's worktree; the branch is kept and worktree metadata is pruned.
///
/// Refuses with [`GitError::Dirty`] when the worktree has uncommitted or untracked files,
/// unless `force`. Refuses paths that are not linked worktrees of `repo_path` (the main
/// checkout in particular). A worktree directory that is already gone only prunes.
pub async fn remove_worktree(
    repo_path: &Path,
    worktree: &Path,
    force: bool,
) -> Result<(), GitError> {
    let repo = open_repo(repo_path).await?;
    let path = std::path::absolute(worktree).map_err(|e| {
        GitError::io(format!("failed to make `{}` absolute", worktree.display()), e)
    })?;
    let canonical = match tokio::fs::canonicalize(&path).await {
        Ok(canonical) => canonical,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let _turn = administer(&repo).await;
            Git::new(&repo).args(["worktree", "prune"]).run().await?;
            return Ok(());
        }
        Err(e) => return Err(GitError::io(format!("failed to resolve `{}`", path.display()), e)),
    };
    let mut linked = list_worktrees(&repo).await?.into_iter().skip(1);
    if !linked.any(|wt| wt.path == canonical) {
        return Err(GitError::NotAWorktree { path: canonical, repo });
    }
    if !force {
        let files = is_dirty(&canonical).await?;
        if files > 0 {
            return Err(GitError::Dirty { path: canonical, files });
        }
    }
    let mut remove = Git::new(&repo).args(["worktree", "remove"]);
    if force {
        remove = remove.arg("--force");
    }
    let remove = remove.arg(&canonical);
    let turn = administer(&repo).await;
    let output = remove.output().await?;
    if !output.success() {
        // Something changed since the check; report it the same way.
        if !force {
            let files = is_dirty(&canonical).await?;
            if files > 0 {
                return Err(GitError::Dirty { path: canonical, files });
            }
        }
        return Err(remove.failed(&output));
    }
    Git::new(&repo).args(["worktree", "prune"]).run().await?;
    drop(turn);
    tracing::debug!(path = %canonical.display(), "removed worktree");
    Ok(())
}

/// Number of changed, staged and untracked (not ignored) files in the worktree; 0 means
/// clean.
pub async fn is_dirty(worktree: &Path) -> Result<usize, GitError> {
    let worktree = open_worktree(worktree).await?;
    let output = Git::new(&worktree)
        .args(["status", "--porcelain=v1", "-z", "--untracked-files=all"])
        .run()
        .await?;
    let mut count = 0;
    let mut fields = output.stdout.split(|&b| b == 0).filter(|f| !f.is_empty());
    while let Some(entry) = fields.next() {
        count += 1;
        // A rename or copy is followed by its source path.
        if matches!(entry.first(), Some(b'R' | b'C')) {
            fields.next();
        }
    }
    Ok(count)
}

/// The repository's default branch: `origin/HEAD`'s branch if known, else a local `main`
/// or `master`, else the checked-out branch, else the first local branch.
pub async fn default_branch(repo_path: &Path) -> Result<String, GitError> {
    let repo = open_repo(repo_path).await?;
    ensure_has_commits(&repo).await?;
    let origin_head = Git::new(&repo)
        .args(["symbolic-ref", "--quiet", "refs/remotes/origin/HEAD"])
        .output()
        .await?;
    if origin_head.success()
        && let Some(name) = origin_head.text().strip_prefix("refs/remotes/origin/")
        && !name.is_empty()
    {
        return Ok(name.to_owned());
    }
    for candidate in ["main", "master"] {
        if resolve_commit_of(&repo, &format!("refs/heads/{candidate}")).await?.is_some() {
            return Ok(candidate.to_owned());
        }
    }
    let head = Git::new(&repo).args(["symbolic-ref", "--quiet", "HEAD"]).output().await?;
    if head.success()
        && let Some(name) = head.text().strip_prefix("refs/heads/")
        && resolve_commit_of(&repo, &format!("refs/heads/{name}")).await?.is_some()
    {
        return Ok(name.to_owned());
    }
    let first = Git::new(&repo)
        .args(["for-each-ref", "--count=1", "--format=%(refname:strip=2)", "refs/heads"])
        .text()
        .await?;
    if first.is_empty() { Err(GitError::NoCommits { path: repo }) } else { Ok(first) }
}

/// Checks that `path` exists and is the top level of a repository (or a bare repository);
/// returns its canonical path.
pub(crate) async fn open_repo(path: &Path) -> Result<PathBuf, GitError> {
    ensure_dir(path, || match std::fs::symlink_metadata(path) {
        Ok(_) => GitError::NotARepository { path: path.to_path_buf() },
        Err(_) => GitError::RepositoryMissing { path: path.to_path_buf() },
    })
    .await?;
    let canonical = canonicalize(path).await?;
    let bare = Git::new(&canonical).args(["rev-parse", "--is-bare-repository"]).output().await?;
    if !bare.success() {
        return Err(not_a_repository_or(path, &bare, "git rev-parse --is-bare-repository"));
    }
    if bare.text() == "true" {
        return Ok(canonical);
    }
    let toplevel = Git::new(&canonical).args(["rev-parse", "--show-toplevel"]).output().await?;
    if !toplevel.success() {
        return Err(not_a_repository_or(path, &toplevel, "git rev-parse --show-toplevel"));
    }
    if canonicalize(Path::new(&toplevel.text())).await? != canonical {
        return Err(GitError::NotARepository { path: path.to_path_buf() });
    }
    Ok(canonical)
}

/// Checks that `path` is the top level of a (main or linked) worktree; returns its
/// canonical path.
pub(crate) async fn open_worktree(path: &Path) -> Result<PathBuf, GitError> {
    ensure_dir(path, || GitError::NotFound { path: path.to_path_buf() }).await?;
    let canonical = canonicalize(path).await?;
    let toplevel = Git::new(&canonical).args(["rev-parse", "--show-toplevel"]).output().await?;
    if !toplevel.success() {
        return Err(not_a_repository_or(path, &toplevel, "git rev-parse --show-toplevel"));
    }
    if canonicalize(Path::new(&toplevel.text())).await? != canonical {
        return Err(GitError::NotARepository { path: path.to_path_buf() });
    }
    Ok(canonical)
}

fn not_a_repository_or(path: &Path, output: &super::cmd::Output, command: &str) -> GitError {
    if output.stderr.contains("not a git repository")
        || output.stderr.contains("must be run in a work tree")
    {
        GitError::NotARepository { path: path.to_path_buf() }
    } else {
        GitError::Git { command: command.to_owned(), stderr: output.stderr.clone() }
    }
}

async fn canonicalize(path: &Path) -> Result<PathBuf, GitError> {
    tokio::fs::canonicalize(path)
        .await
        .map_err(|e| GitError::io(format!("failed to resolve `{}`", path.display()), e))
}

async fn ensure_has_commits(repo: &Path) -> Result<(), GitError> {
    let any = Git::new(repo).args(["rev-list", "-n", "1", "--all"]).output().await?;
    if any.success() && !any.stdout.iter().all(u8::is_ascii_whitespace) {
        Ok(())
    } else {
        Err(GitError::NoCommits { path: repo.to_path_buf() })
    }
}

/// The commit of a local branch, a remote-tracking branch, or `origin/<branch>`.
pub(crate) async fn resolve_base_ref(repo: &Path, branch: &str) -> Result<String, GitError> {
    resolve_base_branch(repo, branch).await
}

async fn resolve_base_branch(repo: &Path, branch: &str) -> Result<String, GitError> {
    // Validated first, so the name is a plain ref and never a revision expression.
    if is_valid_branch_name(branch) {
        for candidate in [
            format!("refs/heads/{branch}"),
            format!("refs/remotes/{branch}"),
            format!("refs/remotes/origin/{branch}"),
        ] {
            if let Some(sha) = resolve_commit_of(repo, &candidate).await? {
                return Ok(sha);
            }
        }
    }
    Err(GitError::BaseBranchMissing { branch: branch.to_owned() })
}

/// The commit `full_ref` points to, or `None` if it does not exist.
async fn resolve_commit_of(repo: &Path, full_ref: &str) -> Result<Option<String>, GitError> {
    let output = Git::new(repo)
        .args(["rev-parse", "--verify", "--quiet", "--end-of-options"])
        .arg(format!("{full_ref}^{{commit}}"))
        .output()
        .await?;
    Ok(if output.success() { Some(output.text()) } else { None })
}

/// The full sha of `commit` (any revision), or [`GitError::UnknownCommit`].
pub(crate) async fn resolve_commit(repo: &Path, commit: &str) -> Result<String, GitError> {
    resolve_commit_of(repo, commit)
        .await?
        .ok_or_else(|| GitError::UnknownCommit { commit: commit.to_owned() })
}

/// The best common ancestor of `a` and `b`, or `None` when they share no history.
pub(crate) async fn merge_base(repo: &Path, a: &str, b: &str) -> Result<Option<String>, GitError> {
    let output = Git::new(repo).args(["merge-base", "--end-of-options", a, b]).output().await?;
    Ok(if output.success() { Some(output.text()) } else { None })
}

/// One entry of `git worktree list`.
#[derive(Debug)]
pub(crate) struct ListedWorktree {
    /// Canonical path when it still exists, as recorded otherwise.
    pub(crate) path: PathBuf,
    /// Short branch name, if a branch is checked out.
    pub(crate) branch: Option<String>,
}

/// All worktrees of `repo`, the main one first.
pub(crate) async fn list_worktrees(repo: &Path) -> Result<Vec<ListedWorktree>, GitError> {
    let output = Git::new(repo).args(["worktree", "list", "--porcelain", "-z"]).run().await?;
    let mut worktrees = Vec::new();
    let mut current: Option<ListedWorktree> = None;
    for field in output.stdout.split(|&b| b == 0) {
        let field = String::from_utf8_lossy(field);
        if let Some(path) = field.strip_prefix("worktree ") {
            worktrees.extend(current.take());
            let recorded = PathBuf::from(path);
            let path = tokio::fs::canonicalize(&recorded).await.unwrap_or(recorded);
            current = Some(ListedWorktree { path, branch: None });
        } else if let Some(branch) = field.strip_prefix("branch ")
            && let Some(wt) = current.as_mut()
        {
            wt.branch = Some(branch.strip_prefix("refs/heads/").unwrap_or(branch).to_owned());
        }
    }
    worktrees.extend(current);
    Ok(worktrees)
}
