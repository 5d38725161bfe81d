//! Questions agents ask the user through MCP `ask_user`: durable, resolved exactly once
//! (answered, cancelled, timed out, or expired by a restart while pending).

use kandev_domain::question::{Question, QuestionStatus};
use kandev_domain::{SessionId, TaskId, Timestamp};
use sqlx::FromRow;

use crate::db::Db;
use crate::sql::QueryBuilder;
use crate::{Result, Store, StoreError, WriteTx};

#[derive(FromRow)]
struct QuestionRow {
    id: String,
    session_id: String,
    task_id: String,
    question: String,
    options: String,
    status: String,
    answer: Option<String>,
    created_at: i64,
    expires_at: i64,
    resolved_at: Option<i64>,
}

impl TryFrom<QuestionRow> for Question {
    type Error = StoreError;

    fn try_from(r: QuestionRow) -> Result<Question> {
        let status = QuestionStatus::parse(&r.status).ok_or_else(|| {
            StoreError::Corrupt(format!("question {} status {:?}", r.id, r.status))
        })?;
        let options: Vec<String> = serde_json::from_str(&r.options)
            .map_err(|_| StoreError::Corrupt(format!("question {} options", r.id)))?;
        Ok(Question {
            id: r.id,
            session_id: SessionId::new(r.session_id),
            task_id: TaskId::new(r.task_id),
            question: r.question,
            options,
            status,
            answer: r.answer,
            created_at: Timestamp(r.created_at),
            expires_at: Timestamp(r.expires_at),
            resolved_at: r.resolved_at.map(Timestamp),
        })
    }
}

const SELECT: &str = "SELECT id, session_id, task_id, question, options, status, answer, \
    created_at, expires_at, resolved_at FROM user_questions";

async fn get(mut db: Db<'_>, id: &str) -> Result<Question> {
    let mut q = QueryBuilder::new(db.dialect(), SELECT);
    q.push(" WHERE id = ").push_bind(id);
    q.build_query_as::<QuestionRow>()
        .fetch_optional(&mut db)
        .await?
        .ok_or_else(|| StoreError::not_found("question", id))
        .and_then(Question::try_from)
}

impl Store {
    pub async fn get_question(&self, id: &str) -> Result<Question> {
        get(self.db(), id).await
    }

    /// A session's questions, oldest first.
    pub async fn session_questions(&self, session_id: &SessionId) -> Result<Vec<Question>> {
        let mut q = QueryBuilder::new(self.dialect(), SELECT);
        q.push(" WHERE session_id = ").push_bind(session_id.as_str());
        q.push(" ORDER BY created_at, id");
        let rows: Vec<QuestionRow> = q.build_query_as().fetch_all(&self.read).await?;
        rows.into_iter().map(Question::try_from).collect()
    }
}

impl WriteTx {
    /// Stores a new pending question that expires `timeout_ms` from now.
    pub async fn insert_question(
        &mut self,
        session_id: &SessionId,
        task_id: &TaskId,
        question: &str,
        options: &[String],
        timeout_ms: i64,
    ) -> Result<Question> {
        let (id, now) = (self.new_id(), self.now().millis());
        let expires_at = Timestamp(now.saturating_add(timeout_ms));
        let options = serde_json::to_string(options)
            .map_err(|e| StoreError::Corrupt(format!("question options: {e}")))?;
        crate::sql::query(
            "INSERT INTO user_questions (id, session_id, task_id, question, options, status, \
             created_at, expires_at) VALUES (?, ?, ?, ?, ?, 'pending', ?, ?)",
        )
        .bind(&id)
        .bind(session_id.as_str())
        .bind(task_id.as_str())
        .bind(question)
        .bind(options)
        .bind(now)
        .bind(expires_at.0)
        .execute(self.conn())
        .await?;
        get(self.db(), &id).await
    }

    /// Resolves a pending question; `None` when it was resolved already (never twice).
    pub async fn resolve_question(
        &mut self,
        id: &str,
        status: QuestionStatus,
        answer: Option<&str>,
    ) -> Result<Option<Question>> {
        let now = self.now().millis();
        let done = crate::sql::query(
            "UPDATE user_questions SET status = ?, answer = ?, resolved_at = ? \
             WHERE id = ? AND status = 'pending'",
        )
        .bind(status.as_str())
        .bind(answer)
        .bind(now)
        .bind(id)
        .execute(self.conn())
        .await?;
        if done.rows_affected() == 0 {
            get(self.db(), id).await?;
            return Ok(None);
        }
        get(self.db(), id).await.map(Some)
    }

    /// The pending questions (of one session, or all).
    pub async fn pending_questions(
        &mut self,
        session_id: Option<&SessionId>,
    ) -> Result<Vec<Question>> {
        let mut q = QueryBuilder::new(self.conn().dialect(), SELECT);
        q.push(" WHERE status = 'pending'");
        if let Some(session_id) = session_id {
            q.push(" AND session_id = ").push_bind(session_id.as_str());
        }
        q.push(" ORDER BY created_at, id");
        let rows: Vec<QuestionRow> = q.build_query_as().fetch_all(self.conn()).await?;
        rows.into_iter().map(Question::try_from).collect()
    }
}
