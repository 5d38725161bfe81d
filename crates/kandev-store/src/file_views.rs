//! Files marked viewed in a task's changes (issue 44 item 3): per task, repository and path,
//! the hash of the file's diff when it was marked. Whether a mark still holds (the diff is
//! the same) is the engine's to decide.

use kandev_domain::{RepositoryId, TaskId};

use crate::{Result, Store, WriteTx};

/// One file's viewed mark.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileView {
    /// `None`: a file of no repository's worktree.
    pub repository_id: Option<RepositoryId>,
    pub path: String,
    /// The hash of the file's diff when it was marked.
    pub content_hash: String,
}

/// The repository column: '' for none (a key column cannot be NULL).
fn repository_key(repository_id: Option<&RepositoryId>) -> &str {
    repository_id.map(RepositoryId::as_str).unwrap_or("")
}

impl Store {
    /// The task's viewed marks.
    pub async fn file_views(&self, task_id: &TaskId) -> Result<Vec<FileView>> {
        let rows: Vec<(String, String, String)> = crate::sql::query_as(
            "SELECT repository_id, path, content_hash FROM file_views WHERE task_id = ? \
             ORDER BY repository_id, path",
        )
        .bind(task_id.as_str())
        .fetch_all(&self.read)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(repository, path, content_hash)| FileView {
                repository_id: (!repository.is_empty()).then(|| RepositoryId::new(repository)),
                path,
                content_hash,
            })
            .collect())
    }
}

impl WriteTx {
    /// Marks a file viewed as its diff is now (`content_hash`), replacing an earlier mark.
    pub async fn mark_file_viewed(&mut self, task_id: &TaskId, view: &FileView) -> Result<()> {
        crate::sql::query(
            "INSERT INTO file_views (task_id, repository_id, path, content_hash, viewed_at) \
             VALUES (?, ?, ?, ?, ?) ON CONFLICT (task_id, repository_id, path) \
             DO UPDATE SET content_hash = excluded.content_hash, viewed_at = excluded.viewed_at",
        )
        .bind(task_id.as_str())
        .bind(repository_key(view.repository_id.as_ref()))
        .bind(view.path.as_str())
        .bind(view.content_hash.as_str())
        .bind(self.now().millis())
        .execute(self.conn())
        .await?;
        Ok(())
    }

    /// Removes a file's viewed mark (none: nothing to do).
    pub async fn unmark_file_viewed(
        &mut self,
        task_id: &TaskId,
        repository_id: Option<&RepositoryId>,
        path: &str,
    ) -> Result<()> {
        crate::sql::query(
            "DELETE FROM file_views WHERE task_id = ? AND repository_id = ? AND path = ?",
        )
        .bind(task_id.as_str())
        .bind(repository_key(repository_id))
        .bind(path)
        .execute(self.conn())
        .await?;
        Ok(())
    }
}
