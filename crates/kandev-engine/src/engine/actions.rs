//! The file and git actions on a task's working directory (`task.changes`, `task.tree`,
//! `task.file.read`, `task.commit`) and the removal of its worktrees, as [`Engine`] methods
//! returning the plain values of `kandev_domain::files`.
//!
//! Invariants:
//! - Every path from outside goes through the runtime's confinement (`..`, absolute paths,
//!   `.git` and symlinks leading out are refused with `Forbidden`).
//! - Removing a worktree never deletes its branch; without `force`, a worktree with
//!   uncommitted or untracked files is kept. Running agents of the task are stopped first,
//!   and the removal holds the task's lock, so no agent ever starts in a removed worktree.

use std::path::{Path, PathBuf};

use kandev_domain::files::{
    ChangedFile, CommitMade, EntryKind, FileChange, FileContent, KeptWorktree, TaskChanges,
    TaskTree, TaskWorktree, TreeEntry, WorktreeRemoval,
};
use kandev_domain::{RepositoryId, TaskId};
use kandev_runtime::confine::{self, PathError, RelPath};
use kandev_runtime::git::{self, GitError};
use kandev_runtime::site::{RemoteErrorKind, Site};
use kandev_store::{StoreError, WorktreeRecord};

use crate::engine::Engine;
use crate::error::{EngineError, Result};
use crate::handle::is_running;
use crate::inner::Inner;
use crate::sites::site_of;
use crate::workdir::shared::{MAX_PLAIN_ENTRIES, MAX_READ_BYTES, git_error, task_worktrees_dir};

impl Engine {
    /// Everything in the task's worktrees that differs from their review base: commits on
    /// the task branch, staged, unstaged and untracked files. The review base is the merge
    /// base of the task branch and the task's base branch as it is now (after a rebase or a
    /// merge of the base, its own commits are not the task's), else the commit the worktree
    /// was made from ([`git::review_base`]); each worktree's `base_commit` says which.
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
        let mut infos = vec![];
        for mounted in &worktrees {
            let site = site_of(&self.inner, &mounted.record).await?;
            let path = Path::new(&mounted.record.path);
            let base = review_base(&self.inner, &site, task_id, &mounted.record).await?;
            let changes = site.changes(path, &base).await.map_err(git_error)?;
            files.extend(changes.into_iter().map(|c| changed_file(mounted, c)));
            infos.push(TaskWorktree { base_commit: base, ..mounted.info() });
        }
        // A mark holds while the file's diff is the one it was made on.
        let views = self.inner.store.file_views(task_id).await?;
        for file in &mut files {
            let hash = file.view_hash();
            file.viewed = views.iter().any(|v| {
                v.repository_id == file.repository_id
                    && v.path == file.change.path
                    && v.content_hash == hash
            });
        }
        Ok(TaskChanges { worktrees: infos, files })
    }

    /// Marks one file of the task's changes viewed as its diff is now, or takes the mark
    /// away. Only a file among the changes can be marked.
    pub async fn set_file_viewed(
        &self,
        task_id: &TaskId,
        repository_id: Option<RepositoryId>,
        path: &str,
        viewed: bool,
    ) -> Result<bool> {
        let mut tx;
        if viewed {
            let changes = self.task_changes(task_id).await?;
            let file = changes
                .files
                .iter()
                .find(|f| f.change.path == path && f.repository_id == repository_id)
                .ok_or_else(|| {
                    EngineError::NotFound(format!(
                        "{path} is not among the task's changes; refresh them and try again"
                    ))
                })?;
            let view = kandev_store::FileView {
                repository_id,
                path: path.to_owned(),
                content_hash: file.view_hash(),
            };
            tx = self.inner.store.begin_write().await?;
            tx.mark_file_viewed(task_id, &view).await?;
        } else {
            tx = self.inner.store.begin_write().await?;
            tx.unmark_file_viewed(task_id, repository_id.as_ref(), path).await?;
        }
        tx.commit().await?;
        Ok(viewed)
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
                    let site = site_of(&self.inner, &mounted.record).await?;
                    let listed =
                        site.tree(Path::new(&mounted.record.path)).await.map_err(git_error)?;
                    if let Some(folder) = &mounted.folder {
                        entries.push(TreeEntry {
                            path: folder.clone(),
                            kind: EntryKind::Dir,
                            size: 0,
                        });
                    }
                    entries.extend(listed.into_iter().map(|e| TreeEntry {
                        path: mounted.prefixed(&e.path),
                        kind: e.kind,
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
        let (dir, relative, folder, site) = match root(&self.inner, task_id).await? {
            Root::Plain(dir) => (dir, path.to_owned(), None, Site::Local),
            Root::Worktrees { dir: None, mut worktrees } => {
                let mounted = worktrees.remove(0);
                let site = site_of(&self.inner, &mounted.record).await?;
                (PathBuf::from(mounted.record.path), path.to_owned(), None, site)
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
                let site = site_of(&self.inner, &mounted.record).await?;
                (PathBuf::from(&mounted.record.path), rest.join("/"), mounted.folder.clone(), site)
            }
        };
        let file = site.read_file(&dir, &relative, MAX_READ_BYTES).await.map_err(git_error)?;
        let path = match folder {
            Some(folder) => format!("{folder}/{}", file.path),
            None => file.path,
        };
        Ok(FileContent { path, ..file })
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
            let site = site_of(&self.inner, &mounted.record).await?;
            match site.commit_all(Path::new(&mounted.record.path), message).await {
                Ok(commit) => made.push(CommitMade {
                    repository_id: mounted.record.repository_id.clone(),
                    branch: mounted.record.branch.clone(),
                    sha: commit.sha,
                    summary: commit.summary,
                    files_changed: commit.files_changed,
                }),
                Err(
                    GitError::NothingToCommit { .. }
                    | GitError::Remote { kind: RemoteErrorKind::NothingToCommit, .. },
                ) => {}
                Err(err) => return Err(git_error(err)),
            }
        }
        if made.is_empty() {
            return Err(EngineError::Validation(
                "nothing to commit; the task's worktree has no changes".into(),
            ));
        }
        // Cards show the new git status.
        crate::workdir::status::refresh_status(&self.inner, task_id).await;
        Ok(made)
    }

    /// The task's live worktrees that have uncommitted or untracked files (or cannot be
    /// checked), with the reason.
    pub async fn dirty_task_worktrees(&self, task_id: &TaskId) -> Result<Vec<KeptWorktree>> {
        let mut dirty = vec![];
        for record in self.inner.store.live_worktrees(task_id).await? {
            let site = match site_of(&self.inner, &record).await {
                Ok(site) => site,
                Err(err) => {
                    dirty.push(KeptWorktree {
                        repository_id: record.repository_id.clone(),
                        path: record.path.clone(),
                        reason: err.to_string(),
                    });
                    continue;
                }
            };
            if !site.exists(Path::new(&record.path)).await.unwrap_or(true) {
                continue;
            }
            let reason = match site.is_dirty(Path::new(&record.path)).await {
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
        let _guard = self.inner.task_locks.lock(task_id).await;
        self.stop_task_sessions(task_id).await?;
        let mut removal = WorktreeRemoval::default();
        // The task's folders of worktrees on build hosts, removed once empty like the local one.
        let mut remote_folders = vec![];
        let records = self.inner.store.live_worktrees(task_id).await?;
        for record in records.clone() {
            if let Some(folder) = self.remove_recorded(record, force, &mut removal).await? {
                remote_folders.push(folder);
            }
        }
        // Its container (after the cleanup scripts that ran in it), with anything still
        // running there.
        crate::containers::remove_for_task(&self.inner, &records).await;
        // The task's folder goes too once it is empty.
        if let Ok(dir) = task_worktrees_dir(home, task_id) {
            let _ = tokio::fs::remove_dir(&dir).await;
        }
        for (site, folder) in remote_folders {
            let _ = site.remove_empty_dir(&folder).await;
        }
        Ok(removal)
    }

    /// Removes one recorded worktree (its cleanup script first); one with uncommitted or
    /// untracked files, or on a host that cannot be reached, is kept and listed in
    /// `removal` unless `force`. Returns the folder it was in on a build host (removed by
    /// the caller once empty).
    pub(crate) async fn remove_recorded(
        &self,
        record: WorktreeRecord,
        force: bool,
        removal: &mut WorktreeRemoval,
    ) -> Result<Option<(Site, PathBuf)>> {
        let site = match site_of(&self.inner, &record).await {
            Ok(site) => site,
            Err(err) => {
                removal.kept.push(KeptWorktree {
                    repository_id: record.repository_id.clone(),
                    path: record.path.clone(),
                    reason: format!("cannot reach the host it is on: {err}"),
                });
                return Ok(None);
            }
        };
        let remote = if site.is_remote() {
            Path::new(&record.path).parent().map(|folder| (site.clone(), folder.to_path_buf()))
        } else {
            None
        };
        crate::engine::ship::run_cleanup(&self.inner, &site, &record, force).await;
        let removed = site
            .remove_worktree(Path::new(&record.repository_path), Path::new(&record.path), force)
            .await;
        let gone = match removed {
            Ok(()) => true,
            // The repository is gone, and so is the worktree: nothing is left to remove.
            Err(
                GitError::RepositoryMissing { .. }
                | GitError::NotARepository { .. }
                | GitError::Remote { kind: RemoteErrorKind::RepositoryMissing, .. },
            ) if !site.exists(Path::new(&record.path)).await.unwrap_or(true) => true,
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
            crate::checkpoints::forget_worktree(&self.inner, &record).await;
            let mut tx = self.inner.store.begin_write().await?;
            tx.mark_worktree_removed(&record.id).await?;
            tx.commit().await?;
            removal.removed.push(record.path);
        }
        Ok(remote)
    }

    /// Stops every session of the task whose actor is running (an agent may be live).
    /// Also stops the task's dev servers and closes its terminals (archive, delete).
    async fn stop_task_sessions(&self, task_id: &TaskId) -> Result<()> {
        self.stop_dev_servers_of(Some(task_id)).await;
        self.close_terminals_of(Some(task_id)).await;
        for session in self.inner.store.list_sessions(task_id).await? {
            if is_running(&self.inner, &session.id) {
                match self.stop(&session.id).await {
                    Ok(()) | Err(EngineError::NotFound(_)) => {}
                    Err(err) => return Err(err),
                }
            }
        }
        Ok(())
    }
}

/// The commit the task's changes in `record`'s worktree are shown against: the merge base
/// with the task's base branch now ([`git::review_base`]).
pub(super) async fn review_base(
    inner: &Inner,
    site: &Site,
    task_id: &TaskId,
    record: &WorktreeRecord,
) -> Result<String> {
    let base_branch = match &record.repository_id {
        Some(id) => match inner.store.get_repository(id).await {
            Ok(repository) => {
                crate::workdir::prepare::task_base_branch(inner, task_id, &repository).await?
            }
            Err(StoreError::NotFound { .. }) => return Ok(record.base_commit.clone()),
            Err(err) => return Err(err.into()),
        },
        None => return Ok(record.base_commit.clone()),
    };
    site.review_base(Path::new(&record.path), &record.base_commit, &base_branch)
        .await
        .map_err(git_error)
}

/// A worktree as file actions see it.
pub(super) struct Mounted {
    pub(super) folder: Option<String>,
    pub(super) record: WorktreeRecord,
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
pub(super) enum Root {
    /// The plain folder of a task without a repository (it may not exist yet).
    Plain(PathBuf),
    /// The task's worktrees; `dir` is the folder holding them when there are several
    /// repositories (`None`: one repository, paths are relative to its worktree).
    Worktrees { dir: Option<PathBuf>, worktrees: Vec<Mounted> },
}

pub(super) async fn root(inner: &Inner, task_id: &TaskId) -> Result<Root> {
    let task = inner.store.get_task(task_id).await.map_err(|e| match e {
        StoreError::NotFound { .. } => EngineError::NotFound(e.to_string()),
        other => other.into(),
    })?;
    let home = &inner.config.home;
    if task.repository_ids.is_empty() {
        return Ok(Root::Plain(git::task_dir(home, task.id.as_str()).map_err(git_error)?));
    }
    let all = inner.store.live_worktrees(&task.id).await?;
    let live: Vec<&WorktreeRecord> = all.iter().filter(|w| w.is_task_worktree()).collect();
    let records: Vec<WorktreeRecord> = task
        .repository_ids
        .iter()
        .filter_map(|id| live.iter().find(|w| w.repository_id.as_ref() == Some(id)))
        .map(|w| (*w).clone())
        .collect();
    if records.is_empty() {
        return Err(crate::workdir::shared::no_worktree(&all));
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

/// A worktree's change as a change of the task: paths relative to the task's working
/// directory, with the repository it belongs to.
fn changed_file(mounted: &Mounted, change: FileChange) -> ChangedFile {
    let change = FileChange {
        path: mounted.prefixed(&change.path),
        old_path: change.old_path.as_deref().map(|p| mounted.prefixed(p)),
        ..change
    };
    ChangedFile { repository_id: mounted.record.repository_id.clone(), change, viewed: false }
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
}
