//! A task's worktrees on another host (issue 20, SSH executor). Where a worktree lives is a
//! [`Site`]: this host, or a build host reached through its runner connection. On a build host every
//! git and file operation of [`crate::git`] runs there as a whole, by the remote copy of this
//! very binary (`kandev remote-op '<json>'`, [`serve`]), which the executor installed: the
//! same code, the same confinement rules and bounds, with the values sent back as JSON. Not
//! each git command over the link: diffs read untracked files, reads go through
//! [`crate::confine`], both on the host's own file system.
//!
//! The request goes on the operation's stdin, closed after it (input is exactly-once across
//! connection drops, protocol 2; not in argv, where `ps` shows it and an argument is bounded
//! to 128 KiB); the answer is one JSON object on stdout, `{"ok": value}` or `{"err": {kind,
//! message}}`, read whole across connection drops like any runner output.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use kandev_domain::files::{
    ChangeStatus, DiffLine, EntryKind, FileChange, FileContent, Hunk, LineKind, TreeEntry,
};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::ExitInfo;
use crate::git::{self, CommitInfo, GitError, OnExistingBranch, Worktree, WorktreeSpec};
use crate::runner::RunnerClient;
use crate::runner::SpawnSpec;

/// How long an operation waits for the link to be live (it may be reconnecting with back-off
/// for minutes) before it fails with "try again in a minute".
const LIVE_WAIT: Duration = Duration::from_secs(20);

/// The most bytes an answer may have (diffs are bounded far below by `MAX_DIFF_BYTES`).
const MAX_ANSWER_BYTES: usize = 512 * 1024 * 1024;

/// What a failure on the build host means, so the engine reports it as it would locally.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RemoteErrorKind {
    Forbidden,
    NotFound,
    Conflict,
    NothingToCommit,
    RepositoryMissing,
    Validation,
    Unavailable,
}

impl RemoteErrorKind {
    fn of(err: &GitError) -> Self {
        match err {
            GitError::Remote { kind, .. } => *kind,
            GitError::Forbidden { .. } => Self::Forbidden,
            GitError::NotFound { .. } => Self::NotFound,
            GitError::Dirty { .. }
            | GitError::BranchInUse { .. }
            | GitError::WorktreeExists { .. }
            | GitError::DetachedHead { .. }
            | GitError::DirtyFiles { .. }
            | GitError::RebaseConflicts { .. } => Self::Conflict,
            GitError::NothingToCommit { .. } => Self::NothingToCommit,
            GitError::RepositoryMissing { .. } | GitError::NotARepository { .. } => {
                Self::RepositoryMissing
            }
            GitError::Git { .. } | GitError::Timeout { .. } | GitError::Io { .. } => {
                Self::Unavailable
            }
            _ => Self::Validation,
        }
    }
}

/// One operation on the build host.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum RemoteOp {
    /// [`git::init_bare`].
    InitBare { path: PathBuf },
    /// [`git::create_worktree`]; `reuse`: [`OnExistingBranch::Reuse`].
    CreateWorktree {
        repo: PathBuf,
        base_branch: String,
        branch: String,
        reuse: bool,
        path: PathBuf,
    },
    /// [`git::remove_worktree`].
    RemoveWorktree { repo: PathBuf, path: PathBuf, force: bool },
    /// Whether anything exists at `path` (not following a last symlink).
    Exists { path: PathBuf },
    /// Removes the directory `path` if it is empty (a task's folder of worktrees).
    RemoveEmptyDir { path: PathBuf },
    /// [`git::is_dirty`].
    IsDirty { path: PathBuf },
    /// [`git::changes`].
    Changes { path: PathBuf, base_commit: String },
    /// [`git::commit_all`].
    Commit { path: PathBuf, message: String },
    /// [`git::tree`].
    Tree { path: PathBuf },
    /// [`git::read_file`].
    ReadFile { path: PathBuf, relative: String, max_bytes: usize },
    /// [`git::write_attachment_copy`]; `data` is the content in base64.
    WriteAttachment { path: PathBuf, file: String, data: String },
    /// [`git::run_setup_script`] (a repository's cleanup script) in `path`, killed after
    /// `timeout_ms`.
    RunScript { path: PathBuf, script: String, timeout_ms: u64 },
    /// [`git::dirty_files`] (a task's git status and its pull request's check).
    DirtyFiles { path: PathBuf },
    /// [`git::rebase`] onto the build host's copy of the base branch; answers the new head.
    Rebase { path: PathBuf, base_branch: String },
}

/// Runs `request` (a [`RemoteOp`] as JSON) here and returns the answer line: what
/// `kandev remote-op` prints on the build host.
pub async fn serve(request: &str) -> String {
    let answer = match serde_json::from_str::<RemoteOp>(request) {
        Ok(op) => run_here(op).await,
        Err(e) => Err(GitError::Remote {
            kind: RemoteErrorKind::Validation,
            message: format!(
                "the remote operation is not valid ({e}); the build host runs another kandev \
                 version: check the executor again"
            ),
        }),
    };
    match answer {
        Ok(value) => json!({ "ok": value }).to_string(),
        Err(err) => {
            json!({ "err": { "kind": RemoteErrorKind::of(&err), "message": err.to_string() } })
                .to_string()
        }
    }
}

async fn run_here(op: RemoteOp) -> Result<Value, GitError> {
    let value = match op {
        RemoteOp::InitBare { path } => {
            git::init_bare(&path).await?;
            Value::Null
        }
        RemoteOp::CreateWorktree { repo, base_branch, branch, reuse, path } => {
            let existing =
                if reuse { OnExistingBranch::Reuse } else { OnExistingBranch::PickAnother };
            let spec = WorktreeSpec {
                repo_path: repo,
                base_branch,
                branch,
                existing,
                worktree_path: path,
            };
            let made = git::create_worktree(&spec).await?;
            json!({ "path": made.path, "branch": made.branch, "base_commit": made.base_commit })
        }
        RemoteOp::RemoveWorktree { repo, path, force } => {
            git::remove_worktree(&repo, &path, force).await?;
            Value::Null
        }
        RemoteOp::Exists { path } => json!(tokio::fs::symlink_metadata(&path).await.is_ok()),
        RemoteOp::RemoveEmptyDir { path } => json!(tokio::fs::remove_dir(&path).await.is_ok()),
        RemoteOp::IsDirty { path } => json!(git::is_dirty(&path).await?),
        RemoteOp::Changes { path, base_commit } => {
            let changes = git::changes(&path, &base_commit).await?;
            json!(changes.into_iter().map(WireChange::from).collect::<Vec<_>>())
        }
        RemoteOp::Commit { path, message } => {
            let made = git::commit_all(&path, &message).await?;
            json!({ "sha": made.sha, "summary": made.summary, "files_changed": made.files_changed })
        }
        RemoteOp::Tree { path } => {
            let entries = git::tree(&path).await?;
            json!(entries.into_iter().map(WireEntry::from).collect::<Vec<_>>())
        }
        RemoteOp::ReadFile { path, relative, max_bytes } => {
            let file = git::read_file(&path, &relative, max_bytes).await?;
            json!(WireContent::from(file))
        }
        RemoteOp::WriteAttachment { path, file, data } => {
            use base64::Engine as _;
            let bytes = base64::engine::general_purpose::STANDARD.decode(data).map_err(|e| {
                GitError::Remote {
                    kind: RemoteErrorKind::Validation,
                    message: format!("the attachment's content is not base64: {e}"),
                }
            })?;
            json!(git::write_attachment_copy(&path, &file, bytes).await?)
        }
        RemoteOp::RunScript { path, script, timeout_ms } => {
            let timeout = Duration::from_millis(timeout_ms);
            let ran = git::run_setup_script(&path, &script, timeout).await?;
            json!({ "exit_code": ran.exit_code, "output": ran.output })
        }
        RemoteOp::DirtyFiles { path } => json!(git::dirty_files(&path).await?),
        RemoteOp::Rebase { path, base_branch } => json!(git::rebase(&path, &base_branch).await?),
    };
    Ok(value)
}

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

    /// Runs `op` on the build host and decodes its answer: after waiting at most
    /// [`LIVE_WAIT`] for a live connection, and bounded as a whole by git's own timeout plus a
    /// margin (the task lock may be held meanwhile).
    pub async fn call<T: DeserializeOwned>(&self, op: &RemoteOp) -> Result<T, GitError> {
        self.call_within(op, git::GIT_TIMEOUT + Duration::from_secs(60)).await
    }

    /// [`Self::call`] bounded by `bound` instead (an operation with its own, longer timeout
    /// there, such as a script).
    async fn call_within<T: DeserializeOwned>(
        &self,
        op: &RemoteOp,
        bound: Duration,
    ) -> Result<T, GitError> {
        let request = serde_json::to_string(op)
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
        match tokio::time::timeout(bound, self.run(request)).await {
            Ok(answer) => answer,
            Err(_) => Err(self.failed(format!(
                "the operation did not finish within {} s; try again",
                bound.as_secs()
            ))),
        }
    }

    async fn run<T: DeserializeOwned>(&self, request: String) -> Result<T, GitError> {
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
        };
        let mut execution = self.link.spawn(&exec, spec).await.map_err(|e| self.failed(e))?;
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
        let answer: Answer = match serde_json::from_slice(&out) {
            Ok(answer) => answer,
            Err(_) => {
                let why = match exit {
                    ExitInfo::Exited { code: 0 } => "it answered nothing readable".to_owned(),
                    other => format!("it ended with {other:?}"),
                };
                let stderr = execution.control.stderr_tail();
                return Err(
                    self.failed(format!("`kandev remote-op` failed: {why}; {}", stderr.trim()))
                );
            }
        };
        match answer {
            Answer::Ok(value) => serde_json::from_value(value)
                .map_err(|e| self.failed(format!("the answer is not readable: {e}"))),
            Answer::Err { kind, message } => Err(GitError::Remote { kind, message }),
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum Answer {
    Ok(Value),
    Err { kind: RemoteErrorKind, message: String },
}

#[derive(Deserialize)]
struct WireWorktree {
    path: PathBuf,
    branch: String,
    base_commit: String,
}

#[derive(Deserialize)]
struct WireCommit {
    sha: String,
    summary: String,
    files_changed: usize,
}

impl Site {
    pub fn is_remote(&self) -> bool {
        matches!(self, Site::Remote(_))
    }

    /// [`git::init_bare`].
    pub async fn init_bare(&self, path: &Path) -> Result<(), GitError> {
        match self {
            Site::Local => git::init_bare(path).await,
            Site::Remote(r) => r.call(&RemoteOp::InitBare { path: path.to_owned() }).await,
        }
    }

    pub async fn exists(&self, path: &Path) -> Result<bool, GitError> {
        match self {
            Site::Local => Ok(tokio::fs::symlink_metadata(path).await.is_ok()),
            Site::Remote(r) => r.call(&RemoteOp::Exists { path: path.to_owned() }).await,
        }
    }

    /// Removes the directory `path` if it is empty; whether it was removed.
    pub async fn remove_empty_dir(&self, path: &Path) -> Result<bool, GitError> {
        match self {
            Site::Local => Ok(tokio::fs::remove_dir(path).await.is_ok()),
            Site::Remote(r) => r.call(&RemoteOp::RemoveEmptyDir { path: path.to_owned() }).await,
        }
    }

    pub async fn create_worktree(&self, spec: &WorktreeSpec) -> Result<Worktree, GitError> {
        match self {
            Site::Local => git::create_worktree(spec).await,
            Site::Remote(r) => {
                let op = RemoteOp::CreateWorktree {
                    repo: spec.repo_path.clone(),
                    base_branch: spec.base_branch.clone(),
                    branch: spec.branch.clone(),
                    reuse: spec.existing == OnExistingBranch::Reuse,
                    path: spec.worktree_path.clone(),
                };
                let made: WireWorktree = r.call(&op).await?;
                Ok(Worktree { path: made.path, branch: made.branch, base_commit: made.base_commit })
            }
        }
    }

    pub async fn remove_worktree(
        &self,
        repo: &Path,
        path: &Path,
        force: bool,
    ) -> Result<(), GitError> {
        match self {
            Site::Local => git::remove_worktree(repo, path, force).await,
            Site::Remote(r) => {
                let op = RemoteOp::RemoveWorktree {
                    repo: repo.to_owned(),
                    path: path.to_owned(),
                    force,
                };
                r.call(&op).await
            }
        }
    }

    pub async fn is_dirty(&self, path: &Path) -> Result<usize, GitError> {
        match self {
            Site::Local => git::is_dirty(path).await,
            Site::Remote(r) => r.call(&RemoteOp::IsDirty { path: path.to_owned() }).await,
        }
    }

    pub async fn changes(
        &self,
        path: &Path,
        base_commit: &str,
    ) -> Result<Vec<FileChange>, GitError> {
        match self {
            Site::Local => git::changes(path, base_commit).await,
            Site::Remote(r) => {
                let op = RemoteOp::Changes {
                    path: path.to_owned(),
                    base_commit: base_commit.to_owned(),
                };
                let changes: Vec<WireChange> = r.call(&op).await?;
                Ok(changes.into_iter().map(FileChange::from).collect())
            }
        }
    }

    pub async fn commit_all(&self, path: &Path, message: &str) -> Result<CommitInfo, GitError> {
        match self {
            Site::Local => git::commit_all(path, message).await,
            Site::Remote(r) => {
                let op = RemoteOp::Commit { path: path.to_owned(), message: message.to_owned() };
                let made: WireCommit = r.call(&op).await?;
                Ok(CommitInfo {
                    sha: made.sha,
                    summary: made.summary,
                    files_changed: made.files_changed,
                })
            }
        }
    }

    /// [`git::dirty_files`].
    pub async fn dirty_files(&self, path: &Path) -> Result<git::Dirty, GitError> {
        match self {
            Site::Local => git::dirty_files(path).await,
            Site::Remote(r) => r.call(&RemoteOp::DirtyFiles { path: path.to_owned() }).await,
        }
    }

    /// [`git::rebase`] in the worktree `path` onto `base_branch` as that host's repository
    /// has it. On a build host a refusal keeps its message (the files it lists) but not
    /// the files as a list.
    pub async fn rebase(&self, path: &Path, base_branch: &str) -> Result<String, GitError> {
        match self {
            Site::Local => git::rebase(path, base_branch).await,
            Site::Remote(r) => {
                let op =
                    RemoteOp::Rebase { path: path.to_owned(), base_branch: base_branch.to_owned() };
                r.call(&op).await
            }
        }
    }

    pub async fn tree(&self, path: &Path) -> Result<Vec<TreeEntry>, GitError> {
        match self {
            Site::Local => git::tree(path).await,
            Site::Remote(r) => {
                let entries: Vec<WireEntry> =
                    r.call(&RemoteOp::Tree { path: path.to_owned() }).await?;
                Ok(entries.into_iter().map(TreeEntry::from).collect())
            }
        }
    }

    pub async fn read_file(
        &self,
        path: &Path,
        relative: &str,
        max_bytes: usize,
    ) -> Result<FileContent, GitError> {
        match self {
            Site::Local => git::read_file(path, relative, max_bytes).await,
            Site::Remote(r) => {
                let op = RemoteOp::ReadFile {
                    path: path.to_owned(),
                    relative: relative.to_owned(),
                    max_bytes,
                };
                let file: WireContent = r.call(&op).await?;
                Ok(file.into())
            }
        }
    }
}

impl Site {
    /// [`git::write_attachment_copy`] where `dir` is: on a build host the content goes with
    /// the operation (base64), so the agent there is linked to a file on its own host.
    pub async fn write_attachment_copy(
        &self,
        dir: &Path,
        file: &str,
        bytes: Vec<u8>,
    ) -> Result<PathBuf, GitError> {
        match self {
            Site::Local => git::write_attachment_copy(dir, file, bytes).await,
            Site::Remote(r) => {
                use base64::Engine as _;
                let data = base64::engine::general_purpose::STANDARD.encode(&bytes);
                let op =
                    RemoteOp::WriteAttachment { path: dir.to_owned(), file: file.to_owned(), data };
                r.call(&op).await
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
    ) -> Result<git::SetupOutput, GitError> {
        match self {
            Site::Local => git::run_setup_script(path, script, timeout).await,
            Site::Remote(r) => {
                let op = RemoteOp::RunScript {
                    path: path.to_owned(),
                    script: script.to_owned(),
                    timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
                };
                let ran: WireScript = r.call_within(&op, timeout + Duration::from_secs(60)).await?;
                Ok(git::SetupOutput { exit_code: ran.exit_code, output: ran.output })
            }
        }
    }
}

#[derive(Deserialize)]
struct WireScript {
    exit_code: i32,
    output: String,
}

// The values of `kandev_domain::files` as JSON (the domain crate has no serde).

#[derive(Serialize, Deserialize)]
struct WireChange {
    path: String,
    old_path: Option<String>,
    status: String,
    additions: u32,
    deletions: u32,
    binary: bool,
    truncated: bool,
    hunks: Vec<WireHunk>,
}

#[derive(Serialize, Deserialize)]
struct WireHunk {
    header: String,
    old_start: u32,
    old_lines: u32,
    new_start: u32,
    new_lines: u32,
    /// `(kind, text)`.
    lines: Vec<(String, String)>,
}

impl From<FileChange> for WireChange {
    fn from(c: FileChange) -> Self {
        WireChange {
            path: c.path,
            old_path: c.old_path,
            status: c.status.as_str().to_owned(),
            additions: c.additions,
            deletions: c.deletions,
            binary: c.binary,
            truncated: c.truncated,
            hunks: c
                .hunks
                .into_iter()
                .map(|h| WireHunk {
                    header: h.header,
                    old_start: h.old_start,
                    old_lines: h.old_lines,
                    new_start: h.new_start,
                    new_lines: h.new_lines,
                    lines: h
                        .lines
                        .into_iter()
                        .map(|l| (l.kind.as_str().to_owned(), l.text))
                        .collect(),
                })
                .collect(),
        }
    }
}

impl From<WireChange> for FileChange {
    fn from(c: WireChange) -> Self {
        let status = match c.status.as_str() {
            "added" => ChangeStatus::Added,
            "deleted" => ChangeStatus::Deleted,
            "renamed" => ChangeStatus::Renamed,
            "untracked" => ChangeStatus::Untracked,
            _ => ChangeStatus::Modified,
        };
        FileChange {
            path: c.path,
            old_path: c.old_path,
            status,
            additions: c.additions,
            deletions: c.deletions,
            binary: c.binary,
            truncated: c.truncated,
            hunks: c
                .hunks
                .into_iter()
                .map(|h| Hunk {
                    header: h.header,
                    old_start: h.old_start,
                    old_lines: h.old_lines,
                    new_start: h.new_start,
                    new_lines: h.new_lines,
                    lines: h
                        .lines
                        .into_iter()
                        .map(|(kind, text)| DiffLine {
                            kind: match kind.as_str() {
                                "added" => LineKind::Added,
                                "removed" => LineKind::Removed,
                                _ => LineKind::Context,
                            },
                            text,
                        })
                        .collect(),
                })
                .collect(),
        }
    }
}

#[derive(Serialize, Deserialize)]
struct WireEntry {
    path: String,
    kind: String,
    size: u64,
}

impl From<TreeEntry> for WireEntry {
    fn from(e: TreeEntry) -> Self {
        WireEntry { path: e.path, kind: e.kind.as_str().to_owned(), size: e.size }
    }
}

impl From<WireEntry> for TreeEntry {
    fn from(e: WireEntry) -> Self {
        let kind = match e.kind.as_str() {
            "dir" => EntryKind::Dir,
            "symlink" => EntryKind::Symlink,
            _ => EntryKind::File,
        };
        TreeEntry { path: e.path, kind, size: e.size }
    }
}

#[derive(Serialize, Deserialize)]
struct WireContent {
    path: String,
    content: String,
    binary: bool,
    truncated: bool,
    size: u64,
}

impl From<FileContent> for WireContent {
    fn from(f: FileContent) -> Self {
        WireContent {
            path: f.path,
            content: f.content,
            binary: f.binary,
            truncated: f.truncated,
            size: f.size,
        }
    }
}

impl From<WireContent> for FileContent {
    fn from(f: WireContent) -> Self {
        FileContent {
            path: f.path,
            content: f.content,
            binary: f.binary,
            truncated: f.truncated,
            size: f.size,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every value survives the trip through JSON, and an error keeps its kind.
    #[tokio::test]
    async fn i20_a3_remote_values_and_errors_round_trip() {
        let change = FileChange {
            path: "a.txt".into(),
            old_path: Some("b.txt".into()),
            status: ChangeStatus::Renamed,
            additions: 1,
            deletions: 2,
            binary: false,
            truncated: true,
            hunks: vec![Hunk {
                header: "@@ -1 +1 @@".into(),
                old_start: 1,
                old_lines: 1,
                new_start: 1,
                new_lines: 1,
                lines: vec![
                    DiffLine { kind: LineKind::Removed, text: "x".into() },
                    DiffLine { kind: LineKind::Added, text: "y".into() },
                    DiffLine { kind: LineKind::Context, text: "z".into() },
                ],
            }],
        };
        let wire = serde_json::to_value(WireChange::from(change.clone())).unwrap();
        let back: WireChange = serde_json::from_value(wire).unwrap();
        assert_eq!(FileChange::from(back), change);
        for kind in [EntryKind::File, EntryKind::Dir, EntryKind::Symlink] {
            let entry = TreeEntry { path: "p".into(), kind, size: 3 };
            assert_eq!(TreeEntry::from(WireEntry::from(entry.clone())), entry);
        }
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope");
        let op = RemoteOp::Commit { path: missing, message: "m".into() };
        let answer: Answer =
            serde_json::from_str(&serve(&serde_json::to_string(&op).unwrap()).await).unwrap();
        let Answer::Err { kind, message } = answer else {
            panic!("a commit in a missing folder succeeded")
        };
        assert_eq!(kind, RemoteErrorKind::NotFound, "{message}");
        let answer: Answer = serde_json::from_str(&serve("{\"op\":\"nope\"}").await).unwrap();
        assert!(matches!(answer, Answer::Err { kind: RemoteErrorKind::Validation, .. }));
    }

    async fn answer(op: &RemoteOp) -> Answer {
        serde_json::from_str(&serve(&serde_json::to_string(op).unwrap()).await).unwrap()
    }

    /// The build host's side of an attachment copy: written under `.kandev/attachments` with
    /// its `.gitignore`, through the confinement (a `.kandev` leading out, a name with a
    /// folder and content that is not base64 are refused).
    #[tokio::test]
    async fn i20_d15_an_attachment_copy_is_written_confined_where_the_operation_runs() {
        use base64::Engine as _;
        let dir = tempfile::tempdir().unwrap();
        let data = base64::engine::general_purpose::STANDARD.encode(b"\0bytes");
        let write = |path: &Path, file: &str, data: &str| RemoteOp::WriteAttachment {
            path: path.to_owned(),
            file: file.into(),
            data: data.into(),
        };
        let Answer::Ok(written) = answer(&write(dir.path(), "abc-x.bin", &data)).await else {
            panic!("the copy was not written")
        };
        let copy = dir.path().join(".kandev/attachments/abc-x.bin");
        assert_eq!(written, json!(copy));
        assert_eq!(std::fs::read(&copy).unwrap(), b"\0bytes");
        assert_eq!(std::fs::read_to_string(dir.path().join(".kandev/.gitignore")).unwrap(), "*\n");
        let refused = answer(&write(dir.path(), "../x", &data)).await;
        assert!(matches!(refused, Answer::Err { kind: RemoteErrorKind::Forbidden, .. }));
        let refused = answer(&write(dir.path(), "x", "not base64!")).await;
        assert!(matches!(refused, Answer::Err { kind: RemoteErrorKind::Validation, .. }));
        let outside = tempfile::tempdir().unwrap();
        let other = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), other.path().join(".kandev")).unwrap();
        let refused = answer(&write(other.path(), "x", &data)).await;
        assert!(matches!(refused, Answer::Err { kind: RemoteErrorKind::Forbidden, .. }));
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0, "nothing written out");
    }

    /// The build host's side of a cleanup script: its output and exit code, or the failure
    /// as a setup script's (which the engine words as the cleanup script's).
    #[tokio::test]
    async fn i20_d16_a_script_runs_where_the_operation_runs() {
        let dir = tempfile::tempdir().unwrap();
        let run = |script: &str| RemoteOp::RunScript {
            path: dir.path().to_owned(),
            script: script.into(),
            timeout_ms: 30_000,
        };
        let Answer::Ok(ran) = answer(&run("echo here; pwd")).await else {
            panic!("the script failed")
        };
        let shown = format!("here\n{}\n", dir.path().display());
        assert_eq!(ran, json!({"exit_code": 0, "output": shown}));
        let Answer::Err { message, .. } = answer(&run("echo no; exit 3")).await else {
            panic!("a failing script succeeded")
        };
        assert!(message.contains("exit code 3") && message.contains("no"), "{message}");
    }
}
