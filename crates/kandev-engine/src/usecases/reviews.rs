//! Review comment use cases: a person's threads on lines of a task's diff (a first comment
//! and its replies, resolved or not; a reply opens a resolved thread again), kept until the review is submitted to the agent.

use kandev_domain::TaskId;
use kandev_domain::ship::{ReviewComment, diff_hash, quote_lines};
use kandev_store::NewReviewComment;

use crate::engine::Engine;
use crate::error::{EngineError, Result};

impl Engine {
    /// `review.comment.add`: the comment, with the commented line and the file's diff hash,
    /// so it can be shown (and sent) as it was even after the diff changes. A reply
    /// (`thread_id`) is on its thread's line, whatever the request said.
    pub async fn add_review_comment(&self, new: NewReviewComment) -> Result<ReviewComment> {
        // A new thread quotes its lines from the diff as it is now (read before the write).
        let new = match new.thread_id {
            Some(_) => new,
            None => {
                let lines = (new.start_line.unwrap_or(new.line), new.line);
                let (quote, diff_hash) =
                    self.review_line(&new.task_id, &new.path, lines, new.side).await;
                NewReviewComment { quote, diff_hash, ..new }
            }
        };
        let mut tx = self.inner.store.begin_write().await?;
        let new = match &new.thread_id {
            Some(thread) => {
                let first = tx.review_comment(thread).await?;
                if first.task_id != new.task_id || first.thread_id.is_some() {
                    return Err(EngineError::Validation(format!(
                        "{thread} is not a thread of this task's review; reply to a thread's \
                         first comment"
                    )));
                }
                NewReviewComment {
                    path: first.path,
                    line: first.line,
                    start_line: first.start_line,
                    side: first.side,
                    quote: first.quote,
                    diff_hash: first.diff_hash,
                    ..new
                }
            }
            None => new,
        };
        let comment = tx.add_review_comment(&new).await?;
        if let Some(thread) = &new.thread_id {
            // A reply is meant to be sent: its thread is open again.
            tx.resolve_review_thread(thread, false).await?;
        }
        tx.commit().await?;
        Ok(comment)
    }

    /// `review.thread.resolve`: resolves the thread `id` opens, or opens it again.
    pub async fn resolve_review_thread(&self, id: &str, resolved: bool) -> Result<ReviewComment> {
        let mut tx = self.inner.store.begin_write().await?;
        let first = tx.review_comment(id).await?;
        if first.thread_id.is_some() {
            return Err(EngineError::Validation(
                "a thread is resolved on its first comment; give that comment's id".into(),
            ));
        }
        let comment = tx.resolve_review_thread(id, resolved).await?;
        tx.commit().await?;
        Ok(comment)
    }

    /// The task's review comments, each with whether the lines it was made on changed since
    /// (its file's diff is not the one it was made on, or the file has no changes any more).
    pub async fn review_comments(&self, task_id: &TaskId) -> Result<Vec<(ReviewComment, bool)>> {
        let comments = self.inner.store.review_comments(task_id).await?;
        let changes = match self.task_changes(task_id).await {
            Ok(changes) => changes,
            // No diff to compare with (no worktree yet): nothing is said to have changed.
            Err(_) => return Ok(comments.into_iter().map(|c| (c, false)).collect()),
        };
        let outdated = |c: &ReviewComment| {
            if c.diff_hash.is_empty() {
                return false; // made on a line the diff did not show: nothing to compare
            }
            match changes.files.iter().find(|f| f.change.path == c.path) {
                None => true,
                Some(file) if diff_hash(&file.change) == c.diff_hash => false,
                // The file's diff changed: the thread's own line may not have.
                Some(file) => {
                    let first = c.start_line.unwrap_or(c.line);
                    quote_lines(&file.change, first, c.line, c.side).as_ref() != Some(&c.quote)
                }
            }
        };
        Ok(comments
            .into_iter()
            .map(|c| {
                let outdated = outdated(&c);
                (c, outdated)
            })
            .collect())
    }

    /// `task.review.comment.update`.
    pub async fn update_review_comment(&self, id: &str, text: &str) -> Result<ReviewComment> {
        let mut tx = self.inner.store.begin_write().await?;
        let comment = tx.update_review_comment(id, text).await?;
        tx.commit().await?;
        Ok(comment)
    }

    /// `task.review.comment.delete`.
    pub async fn delete_review_comment(&self, id: &str) -> Result<()> {
        let mut tx = self.inner.store.begin_write().await?;
        tx.delete_review_comment(id).await?;
        tx.commit().await?;
        Ok(())
    }
}
