//! A task branch as git status and shipping read it: in its worktree on this host, or, for a
//! worktree on an SSH executor's build host (issue 20), fetched from the build host's bare
//! repository into the server's repository first and read and shipped from there.
//!
//! Invariants:
//! - A remote task branch is fetched with the system `ssh` and the executor's options (as the
//!   push of the base branch that made its worktree), into `refs/kandev/incoming/<branch>`,
//!   which git status reads: a status changes no branch of the server's repository. Ship
//!   actions then make it the server's `refs/heads/<branch>`, only by compare-and-set
//!   (`git::take_fetched`): a branch of that name with other commits is never overwritten.
//! - The build host's worktree itself is only read (its uncommitted files, through
//!   `kandev remote-op`), except by a rebase, which runs there onto the base branch pushed
//!   there first from the server's repository.
//! - Merging and pushing a remote task branch never reach the build host beyond the fetch:
//!   the merge lands in the server's repository, the push goes from it to its `origin`.

use std::path::{Path, PathBuf};

use kandev_domain::executor::SshSettings;
use kandev_runtime::git::{self, BranchStatus, Dirty};
use kandev_runtime::runner::ssh::SshRunner;
use kandev_runtime::site::Site;

use kandev_domain::workspace::Repository;
use kandev_store::WorktreeRecord;

use crate::error::{EngineError, Result};
use crate::workdir::shared::ship_error;

/// One repository of a task that has a live worktree, with what shipping needs.
pub(crate) struct Target {
    pub record: WorktreeRecord,
    pub repository: Repository,
    pub base_branch: String,
    /// Where the worktree is.
    pub place: Place,
}

/// Where a shipping target's worktree is.
pub(crate) enum Place {
    /// On this host: git runs in the worktree.
    Here,
    /// On an SSH executor's build host: its branch is fetched into the server's repository.
    BuildHost { site: Site, settings: Box<SshSettings>, executor: String },
}

impl Target {
    fn worktree(&self) -> &Path {
        Path::new(&self.record.path)
    }

    fn server_repo(&self) -> PathBuf {
        PathBuf::from(&self.repository.local_path)
    }

    /// The ref of the server's repository a remote task branch is fetched to.
    fn incoming(&self) -> String {
        format!("{}{}", git::INCOMING_PREFIX, self.record.branch)
    }

    /// Fetches a remote task branch into the server's repository beside its branches
    /// (nothing for a local one); no branch changes.
    async fn fetch(&self) -> Result<()> {
        let Place::BuildHost { settings, executor, .. } = &self.place else {
            return Ok(());
        };
        // Only its ssh options and URL are used here: no binary is copied.
        let ssh = SshRunner::new((**settings).clone(), PathBuf::new(), std::time::Duration::ZERO);
        let url = ssh.git_url(&self.record.repository_path);
        git::fetch_over_ssh(&self.server_repo(), &url, &self.record.branch, &ssh.git_ssh_command())
            .await
            .map_err(|err| {
                EngineError::Unavailable(format!(
                    "cannot fetch the task branch {} from the SSH executor {executor}: {err}",
                    self.record.branch
                ))
            })?;
        Ok(())
    }

    /// Fetches a remote task branch and makes it the branch of the same name in the server's
    /// repository, to be shipped from there (nothing for a local one).
    pub(crate) async fn bring_back(&self) -> Result<()> {
        if let Place::Here = self.place {
            return Ok(());
        }
        self.fetch().await?;
        git::take_fetched(&self.server_repo(), &self.record.branch).await.map_err(ship_error)?;
        Ok(())
    }

    /// The uncommitted and untracked files of the worktree, wherever it is.
    pub(crate) async fn dirty(&self) -> Result<Dirty> {
        match &self.place {
            Place::Here => git::dirty_files(self.worktree()).await.map_err(ship_error),
            Place::BuildHost { site, .. } => {
                site.dirty_files(self.worktree()).await.map_err(ship_error)
            }
        }
    }

    /// The task branch against the current tip of its base (in the server's repository).
    pub(crate) async fn branch_status(&self) -> Result<BranchStatus> {
        match &self.place {
            Place::Here => {
                git::status(self.worktree(), &self.base_branch).await.map_err(ship_error)
            }
            Place::BuildHost { .. } => {
                self.fetch().await?;
                let repo = self.server_repo();
                let (branch, base) = (&self.record.branch, &self.base_branch);
                let mut status = git::branch_status(&repo, branch, &self.incoming(), base)
                    .await
                    .map_err(ship_error)?;
                status.dirty = self.dirty().await?;
                Ok(status)
            }
        }
    }

    /// The summaries of the task branch's commits not on `base_tip`, oldest first. A remote
    /// branch is read as last fetched.
    pub(crate) async fn commit_summaries(&self, base_tip: &str) -> Result<Vec<String>> {
        match &self.place {
            Place::Here => git::commit_summaries(self.worktree(), base_tip).await,
            Place::BuildHost { .. } => {
                git::branch_commit_summaries(&self.server_repo(), &self.incoming(), base_tip).await
            }
        }
        .map_err(ship_error)
    }

    /// Pushes the task branch to `remote` (from the server's repository for a remote one).
    pub(crate) async fn push(&self, remote: &str, force_with_lease: bool) -> Result<String> {
        match &self.place {
            Place::Here => git::push(self.worktree(), remote, force_with_lease).await,
            Place::BuildHost { .. } => {
                self.bring_back().await?;
                git::push_branch(&self.server_repo(), &self.record.branch, remote, force_with_lease)
                    .await
            }
        }
        .map_err(ship_error)
    }

    /// Rebases the task branch onto the current tip of its base. On a build host: the base
    /// branch is pushed there from the server's repository first (as when the worktree was
    /// made), the rebase runs in the remote worktree, and the rebased branch is fetched back.
    pub(crate) async fn rebase(&self) -> Result<()> {
        match &self.place {
            Place::Here => {
                git::rebase(self.worktree(), &self.base_branch).await.map_err(ship_error)?;
            }
            Place::BuildHost { site, settings, executor } => {
                let bare = Path::new(&self.record.repository_path);
                crate::workdir::prepare::mirror(
                    &self.server_repo(),
                    bare,
                    &self.base_branch,
                    site,
                    settings,
                )
                .await
                .map_err(|message| {
                    EngineError::Unavailable(format!(
                        "cannot copy the base branch {} to the SSH executor {executor}: {message}",
                        self.base_branch
                    ))
                })?;
                site.rebase(self.worktree(), &self.base_branch).await.map_err(ship_error)?;
                self.bring_back().await?;
            }
        }
        Ok(())
    }
}
