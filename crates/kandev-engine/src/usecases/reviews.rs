//! Review comment use cases: a person's comments on lines of a task's diff, kept until the
//! review is submitted to the agent.

use kandev_domain::ship::ReviewComment;
use kandev_store::NewReviewComment;

use crate::engine::Engine;
use crate::error::Result;

impl Engine {
    /// `task.review.comment.add`: the comment, with the commented line and the file's diff
    /// hash, so it can be shown (and sent) as it was even after the diff changes.
    pub async fn add_review_comment(&self, new: NewReviewComment) -> Result<ReviewComment> {
        let (quote, diff_hash) =
            self.review_line(&new.task_id, &new.path, new.line, new.side).await;
        let new = NewReviewComment { quote, diff_hash, ..new };
        let mut tx = self.inner.store.begin_write().await?;
        let comment = tx.add_review_comment(&new).await?;
        tx.commit().await?;
        Ok(comment)
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
