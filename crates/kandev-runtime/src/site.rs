//! Where a task's worktrees live (SSH executor): a [`Site`] is this host, or a build host
//! reached through its runner connection ([`RunnerClient`]). On a build host every git and file operation of
//! [`crate::git`] runs there as a whole, by the remote copy of this very binary
//! (`kandev remote-op`, [`crate::runner::ops::serve`]), which the executor installed: the
//! same code, the same confinement rules and bounds, with the values sent back as JSON. Not
//! each git command over the link: diffs read untracked files, reads go through
//! [`crate::confine`], both on the host's own file system. The operations are the table of
//! [`crate::runner::ops`]; [`RemoteSite::call`] runs any of them.
//!
//! The request goes on the operation's stdin, closed after it (input is exactly-once across
//! connection drops, protocol 2; not in argv, where `ps` shows it and an argument is bounded
//! to 128 KiB); the answer is one JSON object on stdout, read whole across connection drops
//! like any runner output.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use kandev_domain::files::{FileChange, FileContent, TreeEntry};
use serde_json::value::RawValue;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::ExitInfo;
use crate::agent_install::{AgentPackage, Installed};
use crate::git::{self, CommitInfo, GitError, Worktree, WorktreeSpec};
use crate::runner::RunnerClient;
use crate::runner::SpawnSpec;
use crate::runner::ops::{self, Op, Reply};

pub use crate::runner::ops::RemoteErrorKind;

/// How long an operation waits for the link to be live (it may be reconnecting with back-off
/// for minutes) before it fails with "try again in a minute".
const LIVE_WAIT: Duration = Duration::from_secs(20);

/// The most bytes an answer may have (diffs are bounded far below by `MAX_DIFF_BYTES`).
const MAX_ANSWER_BYTES: usize = 512 * 1024 * 1024;

/// How much longer than the operation's own bound the server waits for its answer.
const MARGIN: Duration = Duration::from_secs(60);

/// How long an agent's install on a build host may take, answer included (npm's own
/// timeout there is ten minutes).
const INSTALL_BOUND: Duration = Duration::from_secs(660);

/// Where a task's worktree lives.
#[derive(Clone)]
pub enum Site {
    /// This host: [`crate::git`] directly.
    Local,
    /// A build host.
    Remote(RemoteSite),
}

/// A build host reached through an executor's link.
#[derive(Clone)]
pub struct RemoteSite {
    link: RunnerClient,
    /// The remote `kandev` (`<remote_home>/bin/kandev`).
    kandev: String,
    /// The remote home (the operations' working directory).
    home: PathBuf,
    /// The executor's name, for messages.
    name: String,
    /// [`LIVE_WAIT`] (shorter in tests).
    live_wait: Duration,
}

/// Numbers the operations of this server, so their runner names never collide.
static NEXT_OP: AtomicU64 = AtomicU64::new(1);

impl RemoteSite {
    pub fn new(link: RunnerClient, remote_home: &str, name: &str) -> Self {
        Self {
            link,
            kandev: format!("{remote_home}/bin/kandev"),
            home: PathBuf::from(remote_home),
            name: name.to_owned(),
            live_wait: LIVE_WAIT,
        }
    }

    /// How long an operation waits for a live connection (tests).
    pub fn with_live_wait(mut self, wait: Duration) -> Self {
        self.live_wait = wait;
        self
    }

    pub fn link(&self) -> &RunnerClient {
        &self.link
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    fn failed(&self, message: String) -> GitError {
        GitError::Remote {
            kind: RemoteErrorKind::Unavailable,
            message: format!("on the SSH executor {}: {message}", self.name),
        }
    }

    /// Runs `op` on the build host and returns its answer: after waiting at most
    /// [`LIVE_WAIT`] for a live connection, and bounded as a whole by git's own timeout plus a
    /// margin (the task lock may be held meanwhile).
    pub async fn call<O: Op>(&self, op: O) -> Result<O::Answer, GitError> {
        self.call_within(op, git::GIT_TIMEOUT + MARGIN).await
    }

    /// [`Self::call`] bounded by `bound` instead (an operation with its own, longer timeout
    /// there, such as a script).
    async fn call_within<O: Op>(&self, op: O, bound: Duration) -> Result<O::Answer, GitError> {
        let request = ops::encode(&op)
            .map_err(|e| self.failed(format!("cannot encode the operation: {e}")))?;
        if !self.link.live_within(self.live_wait).await {
            return Err(GitError::Remote {
                kind: RemoteErrorKind::Unavailable,
                message: format!(
                    "the SSH executor {} is reconnecting; try again in a minute",
                    self.name
                ),
            });
        }
        let answer = match tokio::time::timeout(bound, self.run(request)).await {
            Ok(answer) => answer?,
            Err(_) => {
                return Err(self.failed(format!(
                    "the operation did not finish within {} s; try again",
                    bound.as_secs()
                )));
            }
        };
        serde_json::from_str(answer.get())
            .map_err(|e| self.failed(format!("the answer is not readable: {e}")))
    }

    /// Runs `kandev remote-op` on the build host with `request` on its stdin; its answer's
    /// value, still encoded, or the failure it answered.
    async fn run(&self, request: String) -> Result<Box<RawValue>, GitError> {
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        let exec = format!(
            "op-{}-{stamp}-{}",
            std::process::id(),
            NEXT_OP.fetch_add(1, Ordering::Relaxed)
        );
        let spec = SpawnSpec {
            program: self.kandev.clone(),
            args: vec!["remote-op".into()],
            env: vec![],
            cwd: self.home.clone(),
            secrets: vec![],
            pty: None,
            scrollback: 0,
        };
        let mut execution =
            self.link.spawn(&exec, spec).await.map_err(|e| self.failed(e.to_string()))?;
        let mut stdin = std::mem::replace(&mut execution.stdin, tokio::io::duplex(1).0);
        // Written while the answer is read (a request larger than the pipes would otherwise
        // wait for a reader that waits for it).
        let write = async move {
            let written = stdin.write_all(request.as_bytes()).await;
            let _ = stdin.shutdown().await;
            drop(stdin);
            written
        };
        let mut out = Vec::new();
        let mut answer = (&mut execution.stdout).take(MAX_ANSWER_BYTES as u64);
        let (written, read) = tokio::join!(write, answer.read_to_end(&mut out));
        if let Err(e) = written {
            return Err(self.failed(format!("sending the operation failed: {e}")));
        }
        let exit = execution.control.wait().await;
        if let Err(e) = read {
            return Err(self.failed(format!("reading the answer failed: {e}")));
        }
        match serde_json::from_slice(&out) {
            Ok(Reply::Ok(value)) => Ok(value),
            Ok(Reply::Err { kind, message }) => Err(GitError::Remote { kind, message }),
            Err(_) => {
                let why = match exit {
                    ExitInfo::Exited { code: 0 } => "it answered nothing readable".to_owned(),
                    other => format!("it ended with {other:?}"),
                };
                let stderr = execution.control.stderr_tail();
                Err(self.failed(format!("`kandev remote-op` failed: {why}; {}", stderr.trim())))
            }
        }
    }
}

impl RemoteSite {
    /// Where Kandev's agent installs are on the build host: `<remote home>/agents`.
    pub fn agents_root(&self) -> PathBuf {
        self.home.join("agents")
    }

    /// Installs an agent's version on the build host (npm may take minutes there).
    pub async fn install_agent(
        &self,
        agent: &AgentPackage,
        version: &str,
    ) -> Result<Installed, GitError> {
        let op = ops::InstallAgent {
            root: self.agents_root(),
            agent: agent.clone(),
            version: version.to_owned(),
            npm_env: crate::agent_install::npm_settings(),
        };
        self.call_within(op, INSTALL_BOUND).await
    }

    /// The agent's versions installed on the build host, newest first.
    pub async fn installed_agents(&self, agent: &AgentPackage) -> Result<Vec<String>, GitError> {
        self.call(ops::InstalledAgents { root: self.agents_root(), agent: agent.clone() }).await
    }

    /// Removes an agent's version from the build host.
    pub async fn uninstall_agent(
        &self,
        agent: &AgentPackage,
        version: &str,
    ) -> Result<(), GitError> {
        let op = ops::UninstallAgent {
            root: self.agents_root(),
            agent: agent.clone(),
            version: version.to_owned(),
        };
        self.call(op).await
    }
}

impl Site {
    pub fn is_remote(&self) -> bool {
        matches!(self, Site::Remote(_))
    }

    /// [`git::init_bare`].
    pub async fn init_bare(&self, path: &Path) -> Result<(), GitError> {
        match self {
            Site::Local => git::init_bare(path).await,
            Site::Remote(r) => r.call(ops::InitBare { path: path.to_owned() }).await,
        }
    }

    /// Whether anything exists at `path` (not following a last symlink).
    pub async fn exists(&self, path: &Path) -> Result<bool, GitError> {
        let op = ops::Exists { path: path.to_owned() };
        match self {
            Site::Local => op.run().await,
            Site::Remote(r) => r.call(op).await,
        }
    }

    /// Removes the directory `path` if it is empty; whether it was removed.
    pub async fn remove_empty_dir(&self, path: &Path) -> Result<bool, GitError> {
        let op = ops::RemoveEmptyDir { path: path.to_owned() };
        match self {
            Site::Local => op.run().await,
            Site::Remote(r) => r.call(op).await,
        }
    }

    /// [`git::create_worktree`].
    pub async fn create_worktree(&self, spec: &WorktreeSpec) -> Result<Worktree, GitError> {
        match self {
            Site::Local => git::create_worktree(spec).await,
            Site::Remote(r) => r.call(ops::CreateWorktree { spec: spec.clone() }).await,
        }
    }

    /// [`git::remove_worktree`].
    pub async fn remove_worktree(
        &self,
        repo: &Path,
        path: &Path,
        force: bool,
    ) -> Result<(), GitError> {
        match self {
            Site::Local => git::remove_worktree(repo, path, force).await,
            Site::Remote(r) => {
                r.call(ops::RemoveWorktree { repo: repo.to_owned(), path: path.to_owned(), force })
                    .await
            }
        }
    }

    /// [`git::is_dirty`].
    pub async fn is_dirty(&self, path: &Path) -> Result<usize, GitError> {
        match self {
            Site::Local => git::is_dirty(path).await,
            Site::Remote(r) => r.call(ops::IsDirty { path: path.to_owned() }).await,
        }
    }

    /// [`git::changes`].
    pub async fn changes(
        &self,
        path: &Path,
        base_commit: &str,
    ) -> Result<Vec<FileChange>, GitError> {
        match self {
            Site::Local => git::changes(path, base_commit).await,
            Site::Remote(r) => {
                let op =
                    ops::Changes { path: path.to_owned(), base_commit: base_commit.to_owned() };
                r.call(op).await
            }
        }
    }

    /// [`git::review_base`].
    pub async fn review_base(
        &self,
        path: &Path,
        base_commit: &str,
        base_branch: &str,
    ) -> Result<String, GitError> {
        match self {
            Site::Local => git::review_base(path, base_commit, base_branch).await,
            Site::Remote(r) => {
                let op = ops::ReviewBase {
                    path: path.to_owned(),
                    base_commit: base_commit.to_owned(),
                    base_branch: base_branch.to_owned(),
                };
                r.call(op).await
            }
        }
    }

    /// [`git::commit_all`].
    pub async fn commit_all(&self, path: &Path, message: &str) -> Result<CommitInfo, GitError> {
        match self {
            Site::Local => git::commit_all(path, message).await,
            Site::Remote(r) => {
                r.call(ops::Commit { path: path.to_owned(), message: message.to_owned() }).await
            }
        }
    }

    /// [`git::dirty_files`].
    pub async fn dirty_files(&self, path: &Path) -> Result<git::Dirty, GitError> {
        match self {
            Site::Local => git::dirty_files(path).await,
            Site::Remote(r) => r.call(ops::DirtyFiles { path: path.to_owned() }).await,
        }
    }

    /// [`git::rebase`] in the worktree `path` onto `base_branch` as that host's repository
    /// has it. On a build host a refusal keeps its message (the files it lists) but not
    /// the files as a list.
    pub async fn rebase(&self, path: &Path, base_branch: &str) -> Result<String, GitError> {
        match self {
            Site::Local => git::rebase(path, base_branch).await,
            Site::Remote(r) => {
                let op = ops::Rebase { path: path.to_owned(), base_branch: base_branch.to_owned() };
                r.call(op).await
            }
        }
    }

    /// [`git::branch_commits`].
    pub async fn branch_commits(
        &self,
        path: &Path,
        base: &str,
    ) -> Result<Vec<git::BranchCommit>, GitError> {
        match self {
            Site::Local => git::branch_commits(path, base).await,
            Site::Remote(r) => {
                r.call(ops::BranchCommits { path: path.to_owned(), base: base.to_owned() }).await
            }
        }
    }

    /// [`git::commit_changes`].
    pub async fn commit_changes(
        &self,
        path: &Path,
        sha: &str,
    ) -> Result<Vec<FileChange>, GitError> {
        match self {
            Site::Local => git::commit_changes(path, sha).await,
            Site::Remote(r) => {
                r.call(ops::CommitChanges { path: path.to_owned(), sha: sha.to_owned() }).await
            }
        }
    }

    /// [`git::index_state`].
    pub async fn index_state(&self, path: &Path) -> Result<git::IndexState, GitError> {
        match self {
            Site::Local => git::index_state(path).await,
            Site::Remote(r) => r.call(ops::Index { path: path.to_owned() }).await,
        }
    }

    /// [`git::change_index`].
    pub async fn change_index(
        &self,
        path: &Path,
        action: git::IndexAction,
        file: &str,
        hunk: Option<&git::HunkRef>,
    ) -> Result<(), GitError> {
        match self {
            Site::Local => git::change_index(path, action, file, hunk).await,
            Site::Remote(r) => {
                let op = ops::ChangeIndex {
                    path: path.to_owned(),
                    action,
                    file: file.to_owned(),
                    hunk: hunk.cloned(),
                };
                r.call(op).await
            }
        }
    }

    /// [`git::commit_staged`].
    pub async fn commit_staged(&self, path: &Path, message: &str) -> Result<CommitInfo, GitError> {
        match self {
            Site::Local => git::commit_staged(path, message).await,
            Site::Remote(r) => {
                let op = ops::CommitStaged { path: path.to_owned(), message: message.to_owned() };
                r.call(op).await
            }
        }
    }

    /// [`git::amend`].
    pub async fn amend(
        &self,
        path: &Path,
        base: &str,
        message: Option<&str>,
    ) -> Result<CommitInfo, GitError> {
        match self {
            Site::Local => git::amend(path, base, message).await,
            Site::Remote(r) => {
                let op = ops::Amend {
                    path: path.to_owned(),
                    base: base.to_owned(),
                    message: message.map(str::to_owned),
                };
                r.call(op).await
            }
        }
    }

    /// [`git::tree`].
    pub async fn tree(&self, path: &Path) -> Result<Vec<TreeEntry>, GitError> {
        match self {
            Site::Local => git::tree(path).await,
            Site::Remote(r) => r.call(ops::Tree { path: path.to_owned() }).await,
        }
    }

    /// [`git::read_file`].
    pub async fn read_file(
        &self,
        path: &Path,
        relative: &str,
        max_bytes: usize,
    ) -> Result<FileContent, GitError> {
        match self {
            Site::Local => git::read_file(path, relative, max_bytes).await,
            Site::Remote(r) => {
                let op = ops::ReadFile {
                    path: path.to_owned(),
                    relative: relative.to_owned(),
                    max_bytes,
                };
                r.call(op).await
            }
        }
    }

    /// [`git::write_attachment_copy`] where `dir` is: on a build host the content goes with
    /// the operation, so the agent there is linked to a file on its own host.
    pub async fn write_attachment_copy(
        &self,
        dir: &Path,
        file: &str,
        bytes: Vec<u8>,
    ) -> Result<PathBuf, GitError> {
        match self {
            Site::Local => git::write_attachment_copy(dir, file, bytes).await,
            Site::Remote(r) => {
                r.call(ops::WriteAttachment { path: dir.to_owned(), file: file.to_owned(), bytes })
                    .await
            }
        }
    }

    /// [`git::run_setup_script`] in `path` where it is: on a build host by its `kandev
    /// remote-op`, which kills the script's process group after `timeout` there (this side
    /// waits a minute longer for the answer).
    pub async fn run_script(
        &self,
        path: &Path,
        script: &str,
        timeout: Duration,
        env: &[(String, String)],
    ) -> Result<git::SetupOutput, GitError> {
        match self {
            Site::Local => git::run_script_through(&[], path, script, timeout, None, env).await,
            Site::Remote(r) => {
                let op = ops::RunScript {
                    path: path.to_owned(),
                    script: script.to_owned(),
                    timeout,
                    env: env.to_vec(),
                };
                r.call_within(op, timeout + MARGIN).await
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::link::LinkState;
    use crate::runner::link::testing::link;
    use crate::runner::{Runner, RunnerConfig};

    /// Finding 3 of the SSH review: a remote operation does not wait for a reconnecting link
    /// for as long as the back-off lasts: it fails soon, saying to try again.
    #[tokio::test]
    async fn i20_d10_a_remote_operation_on_a_reconnecting_link_fails_soon() {
        let runner = Runner::new(RunnerConfig::default());
        let (client, down) = link(&runner).await;
        *down.lock().unwrap() = true;
        client.drop_transport();
        let mut state = client.state();
        state.wait_for(|s| *s == LinkState::Reconnecting).await.unwrap();
        let site = RemoteSite::new(client, "/srv/kandev", "build1")
            .with_live_wait(Duration::from_millis(100));
        let op = ops::Commit { path: "/srv/w".into(), message: "m".into() };
        let failed = tokio::time::timeout(Duration::from_secs(10), site.call(op))
            .await
            .expect("the operation gives up while the link reconnects")
            .unwrap_err();
        assert!(
            failed
                .to_string()
                .contains("the SSH executor build1 is reconnecting; try again in a minute"),
            "{failed}"
        );
        runner.shutdown().await;
    }
}
