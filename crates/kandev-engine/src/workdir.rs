//! Task working directories: a git worktree per repository of a task (made for its first
//! session, reused by later ones, set up by the repository's setup script), a plain folder
//! for a task without a repository, and the file and git actions on them.
//!
//! Layout under `$KANDEV_HOME`: `worktrees/<task>/<repo>` per repository. With one
//! repository the session works in that worktree; with several it works in
//! `worktrees/<task>/`, which holds one folder per repository. A task without a repository
//! works in `tasks/<task>`. File actions take paths relative to that same directory, so
//! with several repositories they start with the repository's folder.
//!
//! Invariants:
//! - Worktrees of a task are created, reused and removed under one lock per task, so two
//!   launches never race for the same directory.
//! - Every path from outside goes through the git layer's confinement (`..`, absolute
//!   paths, `.git` and symlinks leading out are refused with `Forbidden`).
//! - Removing a worktree never deletes its branch; without `force`, a worktree with
//!   uncommitted or untracked files is kept.

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex, Weak};
use std::time::Duration;

use kandev_domain::task::Task;
use kandev_domain::transcript::{MessageKind, Session};
use kandev_domain::workspace::Repository;
use kandev_domain::{RepositoryId, TaskId};
use kandev_runtime::confine::{self, PathError, RelPath};
use kandev_runtime::git::{self, GitError, OnExistingBranch, WorktreeSpec};
use kandev_store::{NewWorktree, StoreError, WorktreeRecord};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::actor::add_message;
use crate::boot::BootFailure;
use crate::{Engine, EngineError, Inner, Result, publish};

/// Most bytes of a file `task.file.read` returns.
pub const MAX_READ_BYTES: usize = 1024 * 1024;

/// Default of how long a repository's setup script may run before it is killed
/// (`EngineConfig::setup_timeout`, `kandev serve --setup-timeout`).
pub const SETUP_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// Most bytes of a setup script's output streamed into its transcript message while it
/// runs; the last lines are shown when it ends either way.
const SETUP_STREAM_LIMIT: usize = 64 * 1024;

/// Most entries listed for the plain folder of a task without a repository.
pub const MAX_PLAIN_ENTRIES: usize = 10_000;

// ---------------------------------------------------------------- what callers get

/// How a file differs from the task's base commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeStatus {
    Added,
    Modified,
    Deleted,
    Renamed,
    Untracked,
}

impl ChangeStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeStatus::Added => "added",
            ChangeStatus::Modified => "modified",
            ChangeStatus::Deleted => "deleted",
            ChangeStatus::Renamed => "renamed",
            ChangeStatus::Untracked => "untracked",
        }
    }
}

/// What a diff line is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineKind {
    Context,
    Added,
    Removed,
}

impl LineKind {
    pub fn as_str(self) -> &'static str {
        match self {
            LineKind::Context => "context",
            LineKind::Added => "added",
            LineKind::Removed => "removed",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiffLine {
    pub kind: LineKind,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hunk {
    pub header: String,
    pub old_start: u32,
    pub old_lines: u32,
    pub new_start: u32,
    pub new_lines: u32,
    pub lines: Vec<DiffLine>,
}

/// One changed file of a task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangedFile {
    /// The repository whose worktree holds the file (`None` once it was unregistered).
    pub repository_id: Option<RepositoryId>,
    /// Relative to the task's working directory (see the module docs).
    pub path: String,
    pub old_path: Option<String>,
    pub status: ChangeStatus,
    pub additions: u32,
    pub deletions: u32,
    pub binary: bool,
    /// Hunks are incomplete because of size limits.
    pub truncated: bool,
    pub hunks: Vec<Hunk>,
}

/// One worktree of a task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskWorktree {
    pub repository_id: Option<RepositoryId>,
    /// The folder its files are under in file actions; `None` with a single repository.
    pub folder: Option<String>,
    /// Absolute path on disk.
    pub path: String,
    pub branch: String,
    pub base_commit: String,
}

/// The changes of a task against its base commits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskChanges {
    pub worktrees: Vec<TaskWorktree>,
    pub files: Vec<ChangedFile>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    File,
    Dir,
    Symlink,
}

impl EntryKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EntryKind::File => "file",
            EntryKind::Dir => "dir",
            EntryKind::Symlink => "symlink",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeEntry {
    /// Relative to the task's working directory, `/`-separated.
    pub path: String,
    pub kind: EntryKind,
    pub size: u64,
}

/// The files of a task's working directory, sorted by path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskTree {
    pub entries: Vec<TreeEntry>,
    /// The listing stopped at [`MAX_PLAIN_ENTRIES`].
    pub truncated: bool,
}

/// A file read from a task's working directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileContent {
    pub path: String,
    /// Empty when `binary`; the first [`MAX_READ_BYTES`] when `truncated`.
    pub content: String,
    pub binary: bool,
    pub truncated: bool,
    pub size: u64,
}

/// A commit made on a task branch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitMade {
    pub repository_id: Option<RepositoryId>,
    pub branch: String,
    pub sha: String,
    pub summary: String,
    pub files_changed: usize,
}

/// A worktree that was not removed, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptWorktree {
    pub repository_id: Option<RepositoryId>,
    pub path: String,
    pub reason: String,
}

/// What removing a task's worktrees did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorktreeRemoval {
    /// Paths of the removed worktrees (their branches are kept).
    pub removed: Vec<String>,
    pub kept: Vec<KeptWorktree>,
}

// ---------------------------------------------------------------- the engine's actions

impl Engine {
    /// Everything in the task's worktrees that differs from their base commits: commits on
    /// the task branch, staged, unstaged and untracked files.
    pub async fn task_changes(&self, task_id: &TaskId) -> Result<TaskChanges> {
        let worktrees = match root(&self.inner, task_id).await? {
            Root::Plain(_) => {
                return Err(EngineError::Validation(
                    "the task has no repository; add one to the task to track changes".into(),
                ));
            }
            Root::Worktrees { worktrees, .. } => worktrees,
        };
        let mut files = vec![];
        for mounted in &worktrees {
            let changes =
                git::changes(Path::new(&mounted.record.path), &mounted.record.base_commit)
                    .await
                    .map_err(git_error)?;
            files.extend(changes.into_iter().map(|c| changed_file(mounted, c)));
        }
        Ok(TaskChanges { worktrees: worktrees.iter().map(Mounted::info).collect(), files })
    }

    /// The files of the task's working directory.
    pub async fn task_tree(&self, task_id: &TaskId) -> Result<TaskTree> {
        match root(&self.inner, task_id).await? {
            Root::Plain(dir) => tokio::task::spawn_blocking(move || walk_plain(&dir))
                .await
                .map_err(|e| EngineError::Unavailable(format!("listing the files failed: {e}")))?
                .map_err(|e| EngineError::Unavailable(format!("cannot list the task folder: {e}"))),
            Root::Worktrees { worktrees, .. } => {
                let mut entries = vec![];
                for mounted in &worktrees {
                    let listed =
                        git::tree(Path::new(&mounted.record.path)).await.map_err(git_error)?;
                    if let Some(folder) = &mounted.folder {
                        entries.push(TreeEntry {
                            path: folder.clone(),
                            kind: EntryKind::Dir,
                            size: 0,
                        });
                    }
                    entries.extend(listed.into_iter().map(|e| TreeEntry {
                        path: mounted.prefixed(&e.path),
                        kind: entry_kind(e.kind),
                        size: e.size,
                    }));
                }
                entries.sort_by(|a, b| a.path.cmp(&b.path));
                Ok(TaskTree { entries, truncated: false })
            }
        }
    }

    /// Reads one file of the task's working directory (at most [`MAX_READ_BYTES`]).
    pub async fn task_file_read(&self, task_id: &TaskId, path: &str) -> Result<FileContent> {
        let (dir, relative, folder) = match root(&self.inner, task_id).await? {
            Root::Plain(dir) => (dir, path.to_owned(), None),
            Root::Worktrees { dir: None, mut worktrees } => {
                let mounted = worktrees.remove(0);
                (PathBuf::from(mounted.record.path), path.to_owned(), None)
            }
            Root::Worktrees { dir: Some(_), worktrees } => {
                // `..`, absolute paths and `.git` first; the read itself is confined.
                RelPath::parse(path).map_err(|e| git_error(e.into()))?;
                let parts: Vec<&str> =
                    path.split('/').filter(|p| !p.is_empty() && *p != ".").collect();
                let folders: Vec<&str> =
                    worktrees.iter().filter_map(|m| m.folder.as_deref()).collect();
                let Some((first, rest)) = parts.split_first() else {
                    return Err(EngineError::Validation(format!(
                        "give the path of a file; paths start with a repository folder: {}",
                        folders.join(", ")
                    )));
                };
                let Some(mounted) = worktrees.iter().find(|m| m.folder.as_deref() == Some(first))
                else {
                    return Err(EngineError::NotFound(format!(
                        "`{path}` does not exist; paths start with a repository folder: {}",
                        folders.join(", ")
                    )));
                };
                if rest.is_empty() {
                    return Err(EngineError::Validation(format!(
                        "`{path}` is a directory; give the path of a file"
                    )));
                }
                (PathBuf::from(&mounted.record.path), rest.join("/"), mounted.folder.clone())
            }
        };
        let file = git::read_file(&dir, &relative, MAX_READ_BYTES).await.map_err(git_error)?;
        let path = match folder {
            Some(folder) => format!("{folder}/{}", file.path),
            None => file.path,
        };
        Ok(FileContent {
            path,
            content: file.content,
            binary: file.binary,
            truncated: file.truncated,
            size: file.size,
        })
    }

    /// Stages everything in each of the task's worktrees and commits it on the task branch;
    /// worktrees without changes are skipped.
    pub async fn task_commit(&self, task_id: &TaskId, message: &str) -> Result<Vec<CommitMade>> {
        if message.trim().is_empty() {
            return Err(git_error(GitError::EmptyCommitMessage));
        }
        let worktrees = match root(&self.inner, task_id).await? {
            Root::Plain(_) => {
                return Err(EngineError::Validation(
                    "the task has no repository; add one to the task to commit its work".into(),
                ));
            }
            Root::Worktrees { worktrees, .. } => worktrees,
        };
        let mut made = vec![];
        for mounted in &worktrees {
            match git::commit_all(Path::new(&mounted.record.path), message).await {
                Ok(commit) => made.push(CommitMade {
                    repository_id: mounted.record.repository_id.clone(),
                    branch: mounted.record.branch.clone(),
                    sha: commit.sha,
                    summary: commit.summary,
                    files_changed: commit.files_changed,
                }),
                Err(GitError::NothingToCommit { .. }) => {}
                Err(err) => return Err(git_error(err)),
            }
        }
        if made.is_empty() {
            return Err(EngineError::Validation(
                "nothing to commit; the task's worktree has no changes".into(),
            ));
        }
        Ok(made)
    }

    /// The task's live worktrees that have uncommitted or untracked files (or cannot be
    /// checked), with the reason.
    pub async fn dirty_task_worktrees(&self, task_id: &TaskId) -> Result<Vec<KeptWorktree>> {
        let mut dirty = vec![];
        for record in self.inner.store.live_worktrees(task_id).await? {
            if !exists(&record.path).await {
                continue;
            }
            let reason = match git::is_dirty(Path::new(&record.path)).await {
                Ok(0) => continue,
                Ok(files) => {
                    GitError::Dirty { path: PathBuf::from(&record.path), files }.to_string()
                }
                Err(err) => err.to_string(),
            };
            dirty.push(KeptWorktree {
                repository_id: record.repository_id.clone(),
                path: record.path.clone(),
                reason,
            });
        }
        Ok(dirty)
    }

    /// Stops the task's running agents, then removes its worktrees; a worktree with
    /// uncommitted or untracked files is kept (with the reason) unless `force`. Branches are
    /// always kept.
    pub async fn remove_task_worktrees(
        &self,
        task_id: &TaskId,
        force: bool,
    ) -> Result<WorktreeRemoval> {
        let home = &self.inner.config.home;
        // A start in progress holds the task's lock while it prepares the worktree (a setup
        // script may run for minutes): stop it first, which cancels it and frees the lock.
        // A start accepted meanwhile waits for the lock and is stopped under it; one after
        // the removal makes the worktree again. No agent ever starts in a removed worktree.
        self.stop_task_sessions(task_id).await?;
        let _guard = lock_task(home, task_id).await;
        self.stop_task_sessions(task_id).await?;
        let mut removal = WorktreeRemoval::default();
        for record in self.inner.store.live_worktrees(task_id).await? {
            let removed = git::remove_worktree(
                Path::new(&record.repository_path),
                Path::new(&record.path),
                force,
            )
            .await;
            let gone = match removed {
                Ok(()) => true,
                // The repository is gone, and so is the worktree: nothing is left to remove.
                Err(GitError::RepositoryMissing { .. } | GitError::NotARepository { .. })
                    if !exists(&record.path).await =>
                {
                    true
                }
                Err(err) => {
                    removal.kept.push(KeptWorktree {
                        repository_id: record.repository_id.clone(),
                        path: record.path.clone(),
                        reason: err.to_string(),
                    });
                    false
                }
            };
            if gone {
                let mut tx = self.inner.store.begin_write().await?;
                tx.mark_worktree_removed(&record.id).await?;
                tx.commit().await?;
                removal.removed.push(record.path);
            }
        }
        // The task's folder goes too once it is empty.
        if let Ok(dir) = task_worktrees_dir(home, task_id) {
            let _ = tokio::fs::remove_dir(&dir).await;
        }
        Ok(removal)
    }

    /// Stops every session of the task whose actor is running (an agent may be live).
    async fn stop_task_sessions(&self, task_id: &TaskId) -> Result<()> {
        for session in self.inner.store.list_sessions(task_id).await? {
            let running = crate::lock(&self.inner.sessions)
                .get(&session.id)
                .is_some_and(|tx| !tx.is_closed());
            if running {
                match self.stop(&session.id).await {
                    Ok(()) | Err(EngineError::NotFound(_)) => {}
                    Err(err) => return Err(err),
                }
            }
        }
        Ok(())
    }
}

// ---------------------------------------------------------------- preparing a session

/// Where a new session of a task will work, decided before its row is written.
pub(crate) struct Plan {
    cwd: PathBuf,
    repositories: Vec<Planned>,
}

struct Planned {
    repository: Repository,
    /// The live worktree recorded for this task and repository, if any.
    existing: Option<WorktreeRecord>,
    path: PathBuf,
}

impl Plan {
    pub fn cwd(&self) -> &Path {
        &self.cwd
    }
}

/// Decides the session's working directory. A task without a repository gets its plain
/// folder (created here); worktrees are only planned, [`prepare`] makes them.
pub(crate) async fn plan(inner: &Inner, task: &Task) -> Result<Plan> {
    let home = &inner.config.home;
    if task.repository_ids.is_empty() {
        let cwd = git::create_task_dir(home, task.id.as_str())
            .await
            .map_err(|e| EngineError::Unavailable(format!("cannot create the task folder: {e}")))?;
        return Ok(Plan { cwd, repositories: vec![] });
    }
    let live = inner.store.live_worktrees(&task.id).await?;
    let mut used: HashSet<OsString> =
        live.iter().filter_map(|w| Path::new(&w.path).file_name().map(OsString::from)).collect();
    let mut repositories = vec![];
    for id in &task.repository_ids {
        let repository = inner.store.get_repository(id).await.map_err(|e| match e {
            StoreError::NotFound { .. } => EngineError::Validation(format!(
                "repository {id} of the task no longer exists; update the task's repositories"
            )),
            other => other.into(),
        })?;
        let existing = live.iter().find(|w| w.repository_id.as_ref() == Some(id)).cloned();
        let path = match &existing {
            Some(record) => PathBuf::from(&record.path),
            None => {
                let path = new_worktree_path(home, task, &repository, &used)?;
                used.extend(path.file_name().map(OsString::from));
                path
            }
        };
        repositories.push(Planned { repository, existing, path });
    }
    let cwd = match repositories.as_slice() {
        [only] => only.path.clone(),
        _ => task_worktrees_dir(home, &task.id)?,
    };
    Ok(Plan { cwd, repositories })
}

/// Prepares the working directory a session's agent is about to start in: the task's
/// worktrees are made (or reused, or made again when they vanished) and setup scripts that
/// have not succeeded yet run, their output streamed into the transcript. It runs inside the
/// session's start (a child future of its actor), under the task's lock, so `session.stop`
/// cancels it (killing a setup script's process group), a client going away does not, and
/// an archive waits for it or cancels it instead of removing a worktree under a new agent.
/// `first` (the session's first start) announces a reused worktree. A failure the user must
/// fix (a repository that is gone, a missing base branch, no commits, a failing setup
/// script) is a [`BootFailure`] with a readable message; worktrees of other repositories
/// that were prepared stay, recorded, for the next start.
pub(crate) async fn prepare_for_start(
    inner: &Inner,
    session: &Session,
    first: bool,
    cancel: &CancellationToken,
) -> std::result::Result<(), BootFailure> {
    let stopped = || BootFailure::new("cancelled", "the start was cancelled");
    let unusable = |err: EngineError| {
        BootFailure::new("worktree_failed", format!("cannot prepare the working directory: {err}"))
    };
    let _lock = tokio::select! {
        _ = cancel.cancelled() => return Err(stopped()),
        lock = lock_task(&inner.config.home, &session.task_id) => lock,
    };
    let task = inner.store.get_task(&session.task_id).await.map_err(|e| unusable(e.into()))?;
    let plan = plan(inner, &task).await.map_err(unusable)?;
    let cwd = plan.cwd().display().to_string();
    if cwd != session.cwd {
        return Err(BootFailure::new(
            "worktree_failed",
            format!(
                "the task's working directory is now {cwd}, not {}; start a new session for it",
                session.cwd
            ),
        ));
    }
    for planned in plan.repositories {
        if cancel.is_cancelled() {
            return Err(stopped());
        }
        match prepare_repository(inner, &task, session, planned, first, cancel).await {
            Ok(Ok(())) => {}
            Ok(Err(failure)) => return Err(failure.into_boot()),
            Err(err) => return Err(unusable(err)),
        }
    }
    Ok(())
}

/// Why a session could not start, for its `last_error`.
struct Failure {
    code: &'static str,
    message: String,
    details: serde_json::Value,
}

impl Failure {
    fn into_boot(self) -> BootFailure {
        let mut failure = BootFailure::new(self.code, self.message);
        if let serde_json::Value::Object(details) = self.details {
            failure.details = details;
        }
        failure
    }
}

async fn prepare_repository(
    inner: &Inner,
    task: &Task,
    session: &Session,
    planned: Planned,
    first: bool,
    cancel: &CancellationToken,
) -> Result<std::result::Result<(), Failure>> {
    let Planned { repository, existing, path } = planned;
    let record = match existing {
        Some(record) if exists(&record.path).await => {
            if first {
                let text = format!(
                    "working in the task's worktree {} on branch {}",
                    record.path, record.branch
                );
                let metadata = json!({
                    "reason": "worktree_reused",
                    "repository_id": repository.id.to_string(),
                    "path": record.path,
                    "branch": record.branch,
                });
                status(inner, session, &text, metadata).await?;
            }
            record
        }
        stale => {
            if let Some(stale) = stale {
                // Its directory was deleted behind our back: forget it (this also prunes
                // git's registration, so the branch can be checked out again).
                let pruned = git::remove_worktree(
                    Path::new(&stale.repository_path),
                    Path::new(&stale.path),
                    false,
                )
                .await;
                if let Err(err) = pruned {
                    tracing::warn!(path = %stale.path, error = %err, "pruning a vanished worktree failed");
                }
                let mut tx = inner.store.begin_write().await?;
                tx.mark_worktree_removed(&stale.id).await?;
                tx.commit().await?;
            }
            match create(inner, task, session, &repository, path).await? {
                Ok(record) => record,
                Err(failure) => return Ok(Err(failure)),
            }
        }
    };
    if record.setup_done {
        return Ok(Ok(()));
    }
    if repository.setup_script.trim().is_empty() {
        let mut tx = inner.store.begin_write().await?;
        tx.mark_worktree_setup_done(&record.id).await?;
        tx.commit().await?;
        return Ok(Ok(()));
    }
    run_setup(inner, session, &repository, &record, cancel).await
}

/// Runs a repository's setup script in its worktree, streaming its output into one
/// transcript message that ends up saying how the script ended.
async fn run_setup(
    inner: &Inner,
    session: &Session,
    repository: &Repository,
    record: &WorktreeRecord,
    cancel: &CancellationToken,
) -> Result<std::result::Result<(), Failure>> {
    let name = &repository.name;
    let metadata = |outcome: &str, exit_code: Option<i32>| {
        json!({
            "reason": "setup_script",
            "repository_id": repository.id.to_string(),
            "status": outcome,
            "exit_code": exit_code,
        })
    };
    let mut tx = inner.store.begin_write().await?;
    let running = format!("setup script of {name} running:\n");
    let message = add_message(
        &mut tx,
        session,
        None,
        MessageKind::Status,
        &running,
        metadata("running", None),
    )
    .await?;
    tx.commit().await?;
    let (live, chunks) = tokio::sync::mpsc::channel(64);
    let timeout = inner.config.setup_timeout;
    let script = &repository.setup_script;
    let run = git::run_setup_script_streaming(Path::new(&record.path), script, timeout, Some(live));
    let ran = tokio::select! {
        // Dropping the script's future kills its process group.
        _ = cancel.cancelled() => None,
        (ran, streamed) = async { tokio::join!(run, stream_output(inner, session, &message, chunks)) } => {
            if let Err(err) = streamed {
                tracing::warn!(error = %err, "streaming the setup script's output failed");
            }
            Some(ran)
        }
    };
    let (text, outcome, result) = match ran {
        None => (
            format!("setup script of {name} was stopped; it runs again at the next start"),
            metadata("stopped", None),
            Err(Failure {
                code: "cancelled",
                message: "the start was cancelled".into(),
                details: json!({}),
            }),
        ),
        Some(Ok(output)) => {
            let shown = output.output.trim_end();
            let text = if shown.is_empty() {
                format!("setup script of {name} finished (exit code 0, no output)")
            } else {
                format!("setup script of {name} finished (exit code 0):\n{shown}")
            };
            (text, metadata("finished", Some(output.exit_code)), Ok(()))
        }
        Some(Err(err)) => {
            let (exit_code, output) = match &err {
                GitError::SetupFailed { exit_code, output_tail } => {
                    (*exit_code, output_tail.clone())
                }
                GitError::SetupTimedOut { output_tail, .. } => (None, output_tail.clone()),
                _ => (None, String::new()),
            };
            let failure = Failure {
                code: "setup_script_failed",
                message: format!("repository {name}: {err}"),
                details: json!({
                    "repository_id": repository.id.to_string(),
                    "exit_code": exit_code,
                    "output": output,
                    "worktree": record.path,
                }),
            };
            let text = format!("setup script of {name} failed: {err}");
            (text, metadata("failed", exit_code), Err(failure))
        }
    };
    let mut tx = inner.store.begin_write().await?;
    if result.is_ok() {
        tx.mark_worktree_setup_done(&record.id).await?;
    }
    let message = tx.set_message(&message.id, Some(&text), &outcome.to_string()).await?;
    publish::message_changed(&mut tx, session, &message).await?;
    tx.commit().await?;
    Ok(result)
}

/// Appends what a running setup script writes to its transcript message, in batches, up to
/// [`SETUP_STREAM_LIMIT`] bytes.
async fn stream_output(
    inner: &Inner,
    session: &Session,
    message: &kandev_domain::transcript::Message,
    mut chunks: tokio::sync::mpsc::Receiver<String>,
) -> Result<()> {
    let mut streamed = 0;
    while let Some(first) = chunks.recv().await {
        let mut batch = first;
        while let Ok(more) = chunks.try_recv() {
            batch.push_str(&more);
        }
        if streamed >= SETUP_STREAM_LIMIT {
            continue; // keep draining so the script is never held up
        }
        streamed += batch.len();
        if streamed >= SETUP_STREAM_LIMIT {
            batch.push_str("\n[more output; its last lines are shown when the script ends]");
        }
        let mut tx = inner.store.begin_write().await?;
        let updated = tx.append_message(&message.id, &batch).await?;
        publish::message_appended(&mut tx, session, &updated, &batch).await?;
        tx.commit().await?;
    }
    Ok(())
}

/// The branch a new worktree of the task starts from. The task's own branch (from its
/// earlier worktree of this repository, removed since: the branch was kept) is checked out
/// again with its commits; otherwise a name from the repository's template, on which
/// `create_worktree` never takes over an existing branch (another task's, perhaps archived,
/// with its commits) but picks a free `-<n>` suffix.
async fn task_branch(
    inner: &Inner,
    task: &Task,
    repository: &Repository,
) -> Result<(String, OnExistingBranch)> {
    if let Some(own) = inner.store.last_worktree_branch(&task.id, &repository.id).await? {
        return Ok((own, OnExistingBranch::Reuse));
    }
    let name = git::branch_name(&repository.branch_template, &task.title, task.id.as_str());
    Ok((name, OnExistingBranch::PickAnother))
}

/// Creates and records a new worktree of `repository` for the task.
async fn create(
    inner: &Inner,
    task: &Task,
    session: &Session,
    repository: &Repository,
    path: PathBuf,
) -> Result<std::result::Result<WorktreeRecord, Failure>> {
    let (branch, existing) = task_branch(inner, task, repository).await?;
    let spec = WorktreeSpec {
        repo_path: PathBuf::from(&repository.local_path),
        base_branch: repository.default_branch.clone(),
        branch,
        existing,
        worktree_path: path,
    };
    let worktree = match git::create_worktree(&spec).await {
        Ok(worktree) => worktree,
        Err(err) => {
            return Ok(Err(Failure {
                code: "worktree_failed",
                message: format!(
                    "cannot create a worktree of repository {}: {err}",
                    repository.name
                ),
                details: json!({
                    "repository_id": repository.id.to_string(),
                    "repository_path": repository.local_path,
                    "base_branch": repository.default_branch,
                    "branch": spec.branch,
                }),
            }));
        }
    };
    let path = worktree.path.display().to_string();
    let new = NewWorktree {
        task_id: task.id.clone(),
        repository_id: repository.id.clone(),
        repository_path: repository.local_path.clone(),
        path: path.clone(),
        branch: worktree.branch.clone(),
        base_commit: worktree.base_commit.clone(),
    };
    let short: String = worktree.base_commit.chars().take(8).collect();
    let text = format!(
        "created worktree {path} on branch {} from {} ({short})",
        worktree.branch, repository.default_branch
    );
    let metadata = json!({
        "reason": "worktree_created",
        "repository_id": repository.id.to_string(),
        "path": path,
        "branch": worktree.branch,
        "base_commit": worktree.base_commit,
    });
    let recorded = async {
        let mut tx = inner.store.begin_write().await?;
        let record = tx.insert_worktree(&new).await?;
        add_message(&mut tx, session, None, MessageKind::Status, &text, metadata).await?;
        tx.commit().await?;
        Ok::<_, EngineError>(record)
    }
    .await;
    match recorded {
        Ok(record) => Ok(Ok(record)),
        Err(err) => {
            // Not recorded means nobody would ever remove it: undo.
            if let Err(e) = git::remove_worktree(&spec.repo_path, &worktree.path, true).await {
                tracing::warn!(path, error = %e, "removing an unrecorded worktree failed");
            }
            Err(err)
        }
    }
}

async fn status(
    inner: &Inner,
    session: &Session,
    text: &str,
    metadata: serde_json::Value,
) -> Result<()> {
    let mut tx = inner.store.begin_write().await?;
    add_message(&mut tx, session, None, MessageKind::Status, text, metadata).await?;
    tx.commit().await?;
    Ok(())
}

// ---------------------------------------------------------------- locks and layout

type TaskLocks = Mutex<HashMap<String, Weak<tokio::sync::Mutex<()>>>>;

static TASK_LOCKS: LazyLock<TaskLocks> = LazyLock::new(Default::default);

/// Serializes creating, reusing and removing a task's worktrees (per home and task).
pub(crate) async fn lock_task(home: &Path, task_id: &TaskId) -> tokio::sync::OwnedMutexGuard<()> {
    let key = format!("{}\n{task_id}", home.display());
    let lock = {
        let mut locks = crate::lock(&TASK_LOCKS);
        locks.retain(|_, lock| lock.strong_count() > 0);
        match locks.get(&key).and_then(Weak::upgrade) {
            Some(lock) => lock,
            None => {
                let lock = Arc::new(tokio::sync::Mutex::new(()));
                locks.insert(key, Arc::downgrade(&lock));
                lock
            }
        }
    };
    lock.lock_owned().await
}

/// `$KANDEV_HOME/worktrees/<task>`: the folder holding a task's worktrees.
fn task_worktrees_dir(home: &Path, task_id: &TaskId) -> Result<PathBuf> {
    let one = git::worktree_dir(home, task_id.as_str(), "repository").map_err(git_error)?;
    Ok(one.parent().map(Path::to_path_buf).unwrap_or(one))
}

/// `worktrees/<task>/<repository name>`, or with the repository's short id appended when
/// another repository of the task already has that folder.
fn new_worktree_path(
    home: &Path,
    task: &Task,
    repository: &Repository,
    used: &HashSet<OsString>,
) -> Result<PathBuf> {
    let by_name = git::worktree_dir(home, task.id.as_str(), &repository.name).ok();
    if let Some(path) = by_name.filter(|p| p.file_name().is_some_and(|n| !used.contains(n))) {
        return Ok(path);
    }
    let short = git::short_id(repository.id.as_str());
    git::worktree_dir(home, task.id.as_str(), &format!("{}-{short}", repository.name))
        .or_else(|_| git::worktree_dir(home, task.id.as_str(), &short))
        .map_err(git_error)
}

async fn exists(path: &str) -> bool {
    tokio::fs::symlink_metadata(path).await.is_ok()
}

// ---------------------------------------------------------------- reading a task's folder

/// A worktree as file actions see it.
struct Mounted {
    folder: Option<String>,
    record: WorktreeRecord,
}

impl Mounted {
    fn prefixed(&self, path: &str) -> String {
        match &self.folder {
            Some(folder) => format!("{folder}/{path}"),
            None => path.to_owned(),
        }
    }

    fn info(&self) -> TaskWorktree {
        TaskWorktree {
            repository_id: self.record.repository_id.clone(),
            folder: self.folder.clone(),
            path: self.record.path.clone(),
            branch: self.record.branch.clone(),
            base_commit: self.record.base_commit.clone(),
        }
    }
}

/// What file actions work on.
enum Root {
    /// The plain folder of a task without a repository (it may not exist yet).
    Plain(PathBuf),
    /// The task's worktrees; `dir` is the folder holding them when there are several
    /// repositories (`None`: one repository, paths are relative to its worktree).
    Worktrees { dir: Option<PathBuf>, worktrees: Vec<Mounted> },
}

async fn root(inner: &Inner, task_id: &TaskId) -> Result<Root> {
    let task = inner.store.get_task(task_id).await.map_err(|e| match e {
        StoreError::NotFound { .. } => EngineError::NotFound(e.to_string()),
        other => other.into(),
    })?;
    let home = &inner.config.home;
    if task.repository_ids.is_empty() {
        return Ok(Root::Plain(git::task_dir(home, task.id.as_str()).map_err(git_error)?));
    }
    let live = inner.store.live_worktrees(&task.id).await?;
    let records: Vec<WorktreeRecord> = task
        .repository_ids
        .iter()
        .filter_map(|id| live.iter().find(|w| w.repository_id.as_ref() == Some(id)).cloned())
        .collect();
    if records.is_empty() {
        return Err(EngineError::Conflict(
            "the task has no worktree; launch a session to create one".into(),
        ));
    }
    if task.repository_ids.len() == 1 {
        let worktrees =
            records.into_iter().map(|record| Mounted { folder: None, record }).collect();
        return Ok(Root::Worktrees { dir: None, worktrees });
    }
    let worktrees = records
        .into_iter()
        .map(|record| {
            let folder = Path::new(&record.path)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            Mounted { folder: Some(folder), record }
        })
        .collect();
    Ok(Root::Worktrees { dir: Some(task_worktrees_dir(home, &task.id)?), worktrees })
}

/// Lists a plain task folder without following symlinks; `.git` is skipped. A folder that
/// does not exist yet is empty.
fn walk_plain(root: &Path) -> std::result::Result<TaskTree, PathError> {
    let root = match confine::Root::open(root) {
        Ok(root) => root,
        Err(PathError::NotFound { .. }) => {
            return Ok(TaskTree { entries: vec![], truncated: false });
        }
        Err(e) => return Err(e),
    };
    let (found, truncated) = root.walk(MAX_PLAIN_ENTRIES)?;
    let mut entries: Vec<TreeEntry> = found
        .into_iter()
        .map(|e| {
            let (kind, size) = match e.entry.kind {
                confine::EntryKind::Symlink => (EntryKind::Symlink, e.entry.size),
                confine::EntryKind::Dir => (EntryKind::Dir, 0),
                confine::EntryKind::File | confine::EntryKind::Other => {
                    (EntryKind::File, e.entry.size)
                }
            };
            TreeEntry { path: e.path, kind, size }
        })
        .collect();
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(TaskTree { entries, truncated })
}

// ---------------------------------------------------------------- conversions

/// A git-layer error as the engine reports it.
fn git_error(err: GitError) -> EngineError {
    let message = err.to_string();
    match err {
        GitError::Forbidden { .. } => EngineError::Forbidden(message),
        GitError::NotFound { .. } => EngineError::NotFound(message),
        GitError::Dirty { .. }
        | GitError::BranchInUse { .. }
        | GitError::WorktreeExists { .. }
        | GitError::DetachedHead { .. } => EngineError::Conflict(message),
        GitError::Git { .. } | GitError::Timeout { .. } | GitError::Io { .. } => {
            tracing::warn!(error = %message, "a git operation failed");
            EngineError::Unavailable(message)
        }
        _ => EngineError::Validation(message),
    }
}

fn changed_file(mounted: &Mounted, change: git::FileChange) -> ChangedFile {
    ChangedFile {
        repository_id: mounted.record.repository_id.clone(),
        path: mounted.prefixed(&change.path),
        old_path: change.old_path.as_deref().map(|p| mounted.prefixed(p)),
        status: match change.status {
            git::ChangeStatus::Added => ChangeStatus::Added,
            git::ChangeStatus::Modified => ChangeStatus::Modified,
            git::ChangeStatus::Deleted => ChangeStatus::Deleted,
            git::ChangeStatus::Renamed => ChangeStatus::Renamed,
            git::ChangeStatus::Untracked => ChangeStatus::Untracked,
        },
        additions: change.additions,
        deletions: change.deletions,
        binary: change.binary,
        truncated: change.truncated,
        hunks: change
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
                    .map(|l| DiffLine {
                        kind: match l.kind {
                            git::LineKind::Context => LineKind::Context,
                            git::LineKind::Added => LineKind::Added,
                            git::LineKind::Removed => LineKind::Removed,
                        },
                        text: l.text,
                    })
                    .collect(),
            })
            .collect(),
    }
}

fn entry_kind(kind: git::EntryKind) -> EntryKind {
    match kind {
        git::EntryKind::File => EntryKind::File,
        git::EntryKind::Dir => EntryKind::Dir,
        git::EntryKind::Symlink => EntryKind::Symlink,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_folder_is_listed_without_git_metadata_or_following_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("task");
        std::fs::create_dir_all(root.join("src/.git")).unwrap();
        std::fs::write(root.join("src/main.rs"), "fn main() {}").unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.txt"), "x").unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join("out")).unwrap();
        let tree = walk_plain(&root).unwrap();
        let listed: Vec<(&str, EntryKind)> =
            tree.entries.iter().map(|e| (e.path.as_str(), e.kind)).collect();
        assert_eq!(
            listed,
            [
                ("out", EntryKind::Symlink),
                ("src", EntryKind::Dir),
                ("src/main.rs", EntryKind::File)
            ]
        );
        assert!(!tree.truncated);
        assert_eq!(walk_plain(&dir.path().join("missing")).unwrap().entries, vec![]);
    }

    #[test]
    fn git_errors_keep_their_kind() {
        let forbidden = GitError::Forbidden { path: "../x".into(), reason: "no".into() };
        assert!(matches!(git_error(forbidden), EngineError::Forbidden(_)));
        let dirty = GitError::Dirty { path: "/w".into(), files: 1 };
        assert!(matches!(git_error(dirty), EngineError::Conflict(_)));
        let missing = GitError::BaseBranchMissing { branch: "dev".into() };
        assert!(matches!(git_error(missing), EngineError::Validation(m) if m.contains("dev")));
        let gone = GitError::NotFound { path: "a.txt".into() };
        assert!(matches!(git_error(gone), EngineError::NotFound(_)));
    }
}
