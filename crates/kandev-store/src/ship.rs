//! Shipping a task: its base branch per repository (when not the repository's default), the
//! pull requests opened for it, and the review comments on its diff.

use kandev_domain::ship::{DiffSide, Forge, PrState, PullRequest, ReviewComment};
use kandev_domain::{RepositoryId, TaskId, Timestamp};
use sqlx::FromRow;

use crate::db::Db;
use crate::{Result, Store, StoreError, WriteTx};

/// A review comment to add.
#[derive(Debug, Clone)]
pub struct NewReviewComment {
    pub task_id: TaskId,
    pub path: String,
    pub line: u32,
    pub side: DiffSide,
    pub text: String,
    pub quote: String,
    pub diff_hash: String,
    /// The thread it replies in (its first comment's id); `None` opens a thread.
    pub thread_id: Option<String>,
    /// The first line of a range ending at `line`.
    pub start_line: Option<u32>,
}

#[derive(FromRow)]
struct PullRequestRow {
    task_id: String,
    repository_id: String,
    forge: String,
    number: i64,
    url: String,
    state: String,
    checks: Option<String>,
    review_decision: Option<String>,
    head_branch: String,
    base_branch: String,
    updated_at: i64,
}

impl TryFrom<PullRequestRow> for PullRequest {
    type Error = StoreError;

    fn try_from(r: PullRequestRow) -> Result<PullRequest> {
        let corrupt = |what: &str, value: &str| {
            StoreError::Corrupt(format!("pull request of task {}: {what} {value:?}", r.task_id))
        };
        Ok(PullRequest {
            forge: Forge::parse(&r.forge).ok_or_else(|| corrupt("forge", &r.forge))?,
            state: PrState::parse(&r.state).ok_or_else(|| corrupt("state", &r.state))?,
            task_id: TaskId::new(r.task_id),
            repository_id: RepositoryId::new(r.repository_id),
            number: r.number.try_into().unwrap_or(0),
            url: r.url,
            checks: r.checks,
            review_decision: r.review_decision,
            head_branch: r.head_branch,
            base_branch: r.base_branch,
            updated_at: Timestamp(r.updated_at),
        })
    }
}

#[derive(FromRow)]
struct CommentRow {
    id: String,
    task_id: String,
    path: String,
    line: i64,
    side: String,
    text: String,
    quote: String,
    diff_hash: String,
    created_at: i64,
    updated_at: i64,
    sent_at: Option<i64>,
    thread_id: Option<String>,
    resolved_at: Option<i64>,
    start_line: Option<i64>,
}

impl TryFrom<CommentRow> for ReviewComment {
    type Error = StoreError;

    fn try_from(r: CommentRow) -> Result<ReviewComment> {
        let side = DiffSide::parse(&r.side).ok_or_else(|| {
            StoreError::Corrupt(format!("review comment {} side {:?}", r.id, r.side))
        })?;
        Ok(ReviewComment {
            id: r.id,
            task_id: TaskId::new(r.task_id),
            path: r.path,
            line: r.line.try_into().unwrap_or(0),
            side,
            text: r.text,
            quote: r.quote,
            diff_hash: r.diff_hash,
            created_at: Timestamp(r.created_at),
            updated_at: Timestamp(r.updated_at),
            sent_at: r.sent_at.map(Timestamp),
            thread_id: r.thread_id,
            resolved_at: r.resolved_at.map(Timestamp),
            start_line: r.start_line.and_then(|n| u32::try_from(n).ok()),
        })
    }
}

async fn pull_requests_of(mut db: Db<'_>, task_id: &str) -> Result<Vec<PullRequest>> {
    let rows = crate::sql::query_as::<PullRequestRow>(
        "SELECT * FROM task_pull_requests WHERE task_id = ? ORDER BY repository_id",
    )
    .bind(task_id)
    .fetch_all(&mut db)
    .await?;
    rows.into_iter().map(PullRequest::try_from).collect()
}

async fn comment(mut db: Db<'_>, id: &str) -> Result<ReviewComment> {
    crate::sql::query_as::<CommentRow>("SELECT * FROM review_comments WHERE id = ?")
        .bind(id)
        .fetch_optional(&mut db)
        .await?
        .ok_or_else(|| StoreError::not_found("review comment", id))
        .and_then(ReviewComment::try_from)
}

async fn comments_of(mut db: Db<'_>, task_id: &str) -> Result<Vec<ReviewComment>> {
    let rows = crate::sql::query_as::<CommentRow>(
        "SELECT * FROM review_comments WHERE task_id = ? ORDER BY created_at, id",
    )
    .bind(task_id)
    .fetch_all(&mut db)
    .await?;
    rows.into_iter().map(ReviewComment::try_from).collect()
}

impl Store {
    /// The base branch the task chose for `repository_id`, if it chose one.
    pub async fn task_base_branch(
        &self,
        task_id: &TaskId,
        repository_id: &RepositoryId,
    ) -> Result<Option<String>> {
        let branch = crate::sql::query_scalar::<String>(
            "SELECT base_branch FROM task_base_branches WHERE task_id = ? AND repository_id = ?",
        )
        .bind(task_id.as_str())
        .bind(repository_id.as_str())
        .fetch_optional(&self.read)
        .await?;
        Ok(branch)
    }

    /// The task's pull requests, one per repository at most.
    pub async fn pull_requests(&self, task_id: &TaskId) -> Result<Vec<PullRequest>> {
        pull_requests_of(self.db(), task_id.as_str()).await
    }

    /// Every pull request still open (what polling refreshes).
    pub async fn open_pull_requests(&self) -> Result<Vec<PullRequest>> {
        let rows = crate::sql::query_as::<PullRequestRow>(
            "SELECT * FROM task_pull_requests WHERE state = 'open' ORDER BY updated_at",
        )
        .fetch_all(&self.read)
        .await?;
        rows.into_iter().map(PullRequest::try_from).collect()
    }

    /// The task's review comments, oldest first, sent ones included.
    pub async fn review_comments(&self, task_id: &TaskId) -> Result<Vec<ReviewComment>> {
        comments_of(self.db(), task_id.as_str()).await
    }

    pub async fn review_comment(&self, id: &str) -> Result<ReviewComment> {
        comment(self.db(), id).await
    }
}

impl WriteTx {
    /// Records the base branch a task works from in a repository.
    pub async fn set_task_base_branch(
        &mut self,
        task_id: &TaskId,
        repository_id: &RepositoryId,
        base_branch: &str,
    ) -> Result<()> {
        crate::sql::query(
            "INSERT INTO task_base_branches (task_id, repository_id, base_branch) VALUES (?, ?, ?) \
             ON CONFLICT (task_id, repository_id) DO UPDATE SET base_branch = excluded.base_branch",
        )
        .bind(task_id.as_str())
        .bind(repository_id.as_str())
        .bind(base_branch)
        .execute(self.conn())
        .await?;
        Ok(())
    }

    /// Records (or replaces) the pull request of a task in a repository.
    /// The task's pull requests, read in this transaction.
    pub async fn pull_requests(&mut self, task_id: &TaskId) -> Result<Vec<PullRequest>> {
        pull_requests_of(self.db(), task_id.as_str()).await
    }

    pub async fn save_pull_request(&mut self, pr: &PullRequest) -> Result<()> {
        crate::sql::query(
            "INSERT INTO task_pull_requests (task_id, repository_id, forge, number, url, state, \
             checks, review_decision, head_branch, base_branch, updated_at) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) \
             ON CONFLICT (task_id, repository_id) DO UPDATE SET forge = excluded.forge, \
             number = excluded.number, url = excluded.url, state = excluded.state, \
             checks = excluded.checks, review_decision = excluded.review_decision, \
             head_branch = excluded.head_branch, base_branch = excluded.base_branch, \
             updated_at = excluded.updated_at",
        )
        .bind(pr.task_id.as_str())
        .bind(pr.repository_id.as_str())
        .bind(pr.forge.as_str())
        .bind(i64::try_from(pr.number).unwrap_or(i64::MAX))
        .bind(&pr.url)
        .bind(pr.state.as_str())
        .bind(&pr.checks)
        .bind(&pr.review_decision)
        .bind(&pr.head_branch)
        .bind(&pr.base_branch)
        .bind(pr.updated_at.millis())
        .execute(self.conn())
        .await?;
        Ok(())
    }

    /// Records a pull request read again from its forge; returns the state stored before it
    /// (`None`: none was stored). Write transactions run one at a time, so of two refreshes
    /// racing, only one sees a state change.
    pub async fn update_pull_request(&mut self, pr: &PullRequest) -> Result<Option<PrState>> {
        let before = crate::sql::query_scalar::<String>(
            "SELECT state FROM task_pull_requests WHERE task_id = ? AND repository_id = ?",
        )
        .bind(pr.task_id.as_str())
        .bind(pr.repository_id.as_str())
        .fetch_optional(self.conn())
        .await?;
        self.save_pull_request(pr).await?;
        Ok(before.as_deref().and_then(PrState::parse))
    }

    pub async fn add_review_comment(&mut self, new: &NewReviewComment) -> Result<ReviewComment> {
        let (id, now) = (self.new_id(), self.now().millis());
        crate::sql::query(
            "INSERT INTO review_comments (id, task_id, path, line, side, text, quote, diff_hash, \
             created_at, updated_at, thread_id, start_line) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(&id)
        .bind(new.task_id.as_str())
        .bind(&new.path)
        .bind(i64::from(new.line))
        .bind(new.side.as_str())
        .bind(&new.text)
        .bind(&new.quote)
        .bind(&new.diff_hash)
        .bind(now)
        .bind(now)
        .bind(new.thread_id.as_deref())
        .bind(new.start_line.map(i64::from))
        .execute(self.conn())
        .await?;
        comment(self.db(), &id).await
    }

    /// A review comment, read inside this transaction.
    pub async fn review_comment(&mut self, id: &str) -> Result<ReviewComment> {
        comment(self.db(), id).await
    }

    /// Resolves the thread that `id` opens (or opens it again); returns its first comment.
    pub async fn resolve_review_thread(
        &mut self,
        id: &str,
        resolved: bool,
    ) -> Result<ReviewComment> {
        comment(self.db(), id).await?;
        let at = resolved.then(|| self.now().millis());
        crate::sql::query(
            "UPDATE review_comments SET resolved_at = ? WHERE id = ? AND thread_id IS NULL",
        )
        .bind(at)
        .bind(id)
        .execute(self.conn())
        .await?;
        comment(self.db(), id).await
    }

    pub async fn update_review_comment(&mut self, id: &str, text: &str) -> Result<ReviewComment> {
        comment(self.db(), id).await?;
        crate::sql::query("UPDATE review_comments SET text = ?, updated_at = ? WHERE id = ?")
            .bind(text)
            .bind(self.now().millis())
            .bind(id)
            .execute(self.conn())
            .await?;
        comment(self.db(), id).await
    }

    pub async fn delete_review_comment(&mut self, id: &str) -> Result<ReviewComment> {
        let current = comment(self.db(), id).await?;
        // A thread's first comment takes its replies with it.
        crate::sql::query("DELETE FROM review_comments WHERE id = ? OR thread_id = ?")
            .bind(id)
            .bind(id)
            .execute(self.conn())
            .await?;
        Ok(current)
    }

    /// Marks the comments `ids` of the task sent now (those still open); returns them.
    pub async fn mark_review_comments_sent(
        &mut self,
        task_id: &TaskId,
        ids: &[String],
    ) -> Result<Vec<ReviewComment>> {
        let now = self.now().millis();
        for id in ids {
            crate::sql::query(
                "UPDATE review_comments SET sent_at = ? WHERE id = ? AND task_id = ? AND sent_at IS NULL",
            )
            .bind(now)
            .bind(id)
            .bind(task_id.as_str())
            .execute(self.conn())
            .await?;
        }
        let sent = comments_of(self.db(), task_id.as_str()).await?;
        Ok(sent.into_iter().filter(|c| ids.contains(&c.id)).collect())
    }
}
