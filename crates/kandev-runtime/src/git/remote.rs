//! What the SSH executor needs of git beyond a task's worktree (issue 20): a bare repository
//! on the build host that worktrees are made from, pushing the base branch into it from the
//! server's repository, and fetching the task branch back from it, both with git's own ssh
//! transport (the build host never needs to reach the repository's origin).

use std::path::Path;

use super::GitError;
use super::cmd::Git;
use super::ship::commit_of;
use super::worktree::{list_worktrees, open_repo};

/// Where [`fetch_over_ssh`] fetches a task branch to, per branch (forced): the server's own
/// refs, never shown as branches.
pub const INCOMING_PREFIX: &str = "refs/kandev/incoming/";

/// Where [`take_fetched`] records what it last made the branch of the same name, per task
/// branch.
pub const FETCHED_PREFIX: &str = "refs/kandev/fetched/";

/// Makes `path` a bare repository unless it already is one (missing parents are created).
pub async fn init_bare(path: &Path) -> Result<(), GitError> {
    if path.join("HEAD").is_file() {
        return Ok(());
    }
    std::fs::create_dir_all(path)
        .map_err(|e| GitError::io(format!("failed to create `{}`", path.display()), e))?;
    Git::new(path).args(["init", "--quiet", "--bare"]).run().await?;
    Ok(())
}

/// The full name of the branch `branch` of `repo`, found as `create_worktree` finds a base
/// branch (`refs/heads/<b>`, `refs/remotes/<b>`, `refs/remotes/origin/<b>`), or `None`.
pub async fn full_ref_name(repo: &Path, branch: &str) -> Result<Option<String>, GitError> {
    let repo = open_repo(repo).await?;
    for candidate in [
        format!("refs/heads/{branch}"),
        format!("refs/remotes/{branch}"),
        format!("refs/remotes/origin/{branch}"),
    ] {
        let found = Git::new(&repo)
            .args(["rev-parse", "--verify", "--quiet", "--end-of-options"])
            .arg(format!("{candidate}^{{commit}}"))
            .output()
            .await?;
        if found.success() {
            return Ok(Some(candidate));
        }
    }
    Ok(None)
}

/// `git push --force <url> <ref>:<ref>` for each of `refs`, over ssh with `ssh_command` as
/// `GIT_SSH_COMMAND` (the executor's options: batch mode, its key and known_hosts only).
/// Forced: the build host's copies of base branches follow the server's repository.
pub async fn push_over_ssh(
    repo: &Path,
    url: &str,
    refs: &[String],
    ssh_command: &str,
) -> Result<(), GitError> {
    let repo = open_repo(repo).await?;
    // The user's git config must not sign the push or push submodules along.
    let mut push = Git::new(&repo)
        .env("GIT_SSH_COMMAND", ssh_command)
        .config("push.gpgSign=false")
        .args(["push", "--quiet", "--force", "--no-verify", "--no-recurse-submodules", url]);
    for name in refs {
        push = push.arg(format!("{name}:{name}"));
    }
    push.run().await?;
    Ok(())
}

/// Fetches the task branch `branch` of the build host's repository at `url` into
/// `refs/kandev/incoming/<branch>` of `repo` (forced: the build host's branch is the truth),
/// over ssh with `ssh_command` as [`push_over_ssh`]. No branch of `repo` changes (git status
/// reads the fetched ref; [`take_fetched`] makes it the branch). Returns its head.
pub async fn fetch_over_ssh(
    repo: &Path,
    url: &str,
    branch: &str,
    ssh_command: &str,
) -> Result<String, GitError> {
    let repo = open_repo(repo).await?;
    let incoming = format!("{INCOMING_PREFIX}{branch}");
    Git::new(&repo)
        .env("GIT_SSH_COMMAND", ssh_command)
        .args([
            "fetch",
            "--quiet",
            "--no-tags",
            "--no-write-fetch-head",
            "--no-recurse-submodules",
            "--end-of-options",
            url,
        ])
        .arg(format!("+refs/heads/{branch}:{incoming}"))
        .run()
        .await?;
    match commit_of(&repo, &incoming).await? {
        Some(head) => Ok(head),
        None => Err(GitError::BaseBranchMissing { branch: branch.to_owned() }),
    }
}

/// Makes the branch `branch` of `repo` what [`fetch_over_ssh`] fetched last, so it can be
/// shipped from there (merged, pushed). Returns its head.
///
/// By compare-and-set, only when the branch does not exist, is an ancestor of the fetched
/// head, or is exactly what an earlier call made it (recorded in
/// `refs/kandev/fetched/<branch>`: the task branch was rebased on the build host). Refused,
/// changing nothing ([`GitError::BranchNotUpdated`]): a branch of that name with other
/// commits (someone's own, or commits made here on the task branch), or one checked out in
/// a worktree of `repo` that would have to move (its files would no longer match).
pub async fn take_fetched(repo: &Path, branch: &str) -> Result<String, GitError> {
    let repo = open_repo(repo).await?;
    let incoming = format!("{INCOMING_PREFIX}{branch}");
    let brought = format!("{FETCHED_PREFIX}{branch}");
    let heads = format!("refs/heads/{branch}");
    let last = commit_of(&repo, &brought).await?;
    let Some(fetched) = commit_of(&repo, &incoming).await? else {
        return Err(GitError::BaseBranchMissing { branch: branch.to_owned() });
    };
    let refused = |why: &str| GitError::BranchNotUpdated {
        branch: branch.to_owned(),
        path: repo.clone(),
        why: why.to_owned(),
    };
    let current = commit_of(&repo, &heads).await?;
    let expected = match &current {
        Some(current) if *current == fetched => String::from(current),
        Some(current) => {
            let fast_forward = Git::new(&repo)
                .args(["merge-base", "--is-ancestor", current, &fetched])
                .output()
                .await?
                .success();
            if !fast_forward && last.as_ref() != Some(current) {
                return Err(refused(
                    "that repository has a branch of the same name with commits the task \
                     branch does not have; rename or delete that branch there, then try again",
                ));
            }
            let checked_out = list_worktrees(&repo)
                .await?
                .into_iter()
                .any(|wt| wt.branch.as_deref() == Some(branch));
            if checked_out {
                return Err(refused(
                    "the branch is checked out there; switch that checkout to another branch, \
                     then try again",
                ));
            }
            current.clone()
        }
        // Must not exist: a branch made meanwhile is not overwritten.
        None => String::new(),
    };
    if current.as_ref() != Some(&fetched) {
        Git::new(&repo)
            .args(["update-ref", "-m", "kandev: task branch from the build host", &heads, &fetched])
            .arg(expected)
            .run()
            .await?;
    }
    Git::new(&repo).args(["update-ref", &brought, &fetched]).run().await?;
    Ok(fetched)
}
