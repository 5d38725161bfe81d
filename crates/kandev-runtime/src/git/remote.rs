//! What the SSH executor needs of git beyond a task's worktree (issue 20): a bare repository
//! on the build host that worktrees are made from, and pushing the base branch into it from
//! the server's repository with git's own ssh transport (the build host never needs to
//! reach the repository's origin).

use std::path::Path;

use super::GitError;
use super::cmd::Git;
use super::worktree::open_repo;

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
