//! Sessions, their runtime binding, turns, transcript messages, the prompt queue and the
//! permission audit. Runtime-state writes are compare-and-set on the session's epoch.

use kandev_domain::session::SessionState;
use kandev_domain::transcript::{LastError, Message, MessageKind, QueuedPrompt, Session};
use kandev_domain::{
    AgentProfileId, MessageId, QueuedPromptId, SessionId, StepId, TaskId, Timestamp, TurnId,
};
use sqlx::{Executor, FromRow, Sqlite};

use crate::{Result, Store, StoreError, WriteTx};

#[derive(FromRow)]
struct SessionRow {
    id: String,
    task_id: String,
    agent_profile_id: Option<String>,
    state: String,
    epoch: i64,
    acp_session_id: Option<String>,
    resume_token: Option<String>,
    session_mode: Option<String>,
    model: Option<String>,
    config_options: String,
    plan_mode: bool,
    context_window: Option<String>,
    last_error: Option<String>,
    auto_run: bool,
    agent_info: Option<String>,
    cwd: String,
    created_at: i64,
    updated_at: i64,
}

/// The stored JSON form of `LastError`.
#[derive(serde::Serialize, serde::Deserialize)]
struct LastErrorJson {
    code: String,
    message: String,
    #[serde(default)]
    details: Option<serde_json::Value>,
    at: i64,
}

fn last_error_to_json(e: &LastError) -> String {
    let details = e.details.as_deref().and_then(|d| serde_json::from_str(d).ok());
    let json = LastErrorJson {
        code: e.code.clone(),
        message: e.message.clone(),
        details,
        at: e.at.millis(),
    };
    serde_json::to_string(&json).unwrap_or_default()
}

impl TryFrom<SessionRow> for Session {
    type Error = StoreError;

    fn try_from(r: SessionRow) -> Result<Session> {
        let state = SessionState::parse(&r.state)
            .ok_or_else(|| StoreError::Corrupt(format!("session {} state {:?}", r.id, r.state)))?;
        let last_error = match r.last_error.as_deref() {
            None => None,
            Some(text) => {
                let json: LastErrorJson = serde_json::from_str(text).map_err(|e| {
                    StoreError::Corrupt(format!("session {} last_error: {e}", r.id))
                })?;
                Some(LastError {
                    code: json.code,
                    message: json.message,
                    details: json.details.map(|d| d.to_string()),
                    at: Timestamp(json.at),
                })
            }
        };
        Ok(Session {
            id: SessionId::new(r.id),
            task_id: TaskId::new(r.task_id),
            agent_profile_id: r.agent_profile_id.map(AgentProfileId::new),
            state,
            epoch: r.epoch,
            acp_session_id: r.acp_session_id,
            resume_token: r.resume_token,
            session_mode: r.session_mode,
            model: r.model,
            config_options: r.config_options,
            plan_mode: r.plan_mode,
            context_window: r.context_window,
            last_error,
            auto_run: r.auto_run,
            agent_info: r.agent_info,
            cwd: r.cwd,
            created_at: Timestamp(r.created_at),
            updated_at: Timestamp(r.updated_at),
        })
    }
}

#[derive(FromRow)]
struct MessageRow {
    id: String,
    session_id: String,
    turn_id: Option<String>,
    seq: i64,
    kind: String,
    content: String,
    metadata: String,
    client_message_id: Option<String>,
    created_at: i64,
    updated_at: i64,
}

impl TryFrom<MessageRow> for Message {
    type Error = StoreError;

    fn try_from(r: MessageRow) -> Result<Message> {
        let kind = MessageKind::parse(&r.kind)
            .ok_or_else(|| StoreError::Corrupt(format!("message {} kind {:?}", r.id, r.kind)))?;
        Ok(Message {
            id: MessageId::new(r.id),
            session_id: SessionId::new(r.session_id),
            turn_id: r.turn_id.map(TurnId::new),
            seq: r.seq,
            kind,
            content: r.content,
            metadata: r.metadata,
            client_message_id: r.client_message_id,
            created_at: Timestamp(r.created_at),
            updated_at: Timestamp(r.updated_at),
        })
    }
}

#[derive(FromRow)]
struct QueuedRow {
    id: String,
    session_id: String,
    position: i64,
    content: String,
    client_message_id: Option<String>,
    queued_by: String,
    created_at: i64,
}

impl From<QueuedRow> for QueuedPrompt {
    fn from(r: QueuedRow) -> Self {
        QueuedPrompt {
            id: QueuedPromptId::new(r.id),
            session_id: SessionId::new(r.session_id),
            position: r.position,
            content: r.content,
            client_message_id: r.client_message_id,
            queued_by: r.queued_by,
            created_at: Timestamp(r.created_at),
        }
    }
}

#[derive(FromRow)]
struct RuntimeRow {
    session_id: String,
    execution_id: String,
    epoch: i64,
    pid: Option<i64>,
    pgid: Option<i64>,
    status: String,
    cwd: String,
}

/// Fields of a session to change; `None` keeps the value. Applied only if the epoch matches.
#[derive(Debug, Clone, Default)]
pub struct SessionUpdate {
    pub state: Option<SessionState>,
    pub acp_session_id: Option<Option<String>>,
    pub resume_token: Option<Option<String>>,
    pub session_mode: Option<Option<String>>,
    pub model: Option<Option<String>>,
    pub config_options: Option<String>,
    pub plan_mode: Option<bool>,
    pub context_window: Option<Option<String>>,
    pub last_error: Option<Option<LastError>>,
    pub auto_run: Option<bool>,
    pub agent_info: Option<Option<String>>,
}

/// The persisted view of a live execution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeRecord {
    pub session_id: SessionId,
    pub execution_id: String,
    pub epoch: i64,
    pub pid: Option<i32>,
    pub pgid: Option<i32>,
    pub status: String,
    pub cwd: String,
}

/// A context reset that was accepted and has not settled yet (lifecycle rule 45).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResetIntent {
    pub session_id: SessionId,
    /// The step whose `on_enter` asked for it; `None` for the user's reset button.
    pub step_id: Option<StepId>,
    /// The session's epoch when it was accepted.
    pub epoch: i64,
    /// Why the task entered the step (`created`, `manual`, `on_turn_start`,
    /// `on_turn_complete`), or `user`.
    pub cause: String,
    pub created_at: Timestamp,
}

#[derive(FromRow)]
struct ResetRow {
    session_id: String,
    step_id: Option<String>,
    epoch: i64,
    cause: String,
    created_at: i64,
}

impl From<ResetRow> for ResetIntent {
    fn from(r: ResetRow) -> Self {
        ResetIntent {
            session_id: SessionId::new(r.session_id),
            step_id: r.step_id.map(StepId::new),
            epoch: r.epoch,
            cause: r.cause,
            created_at: Timestamp(r.created_at),
        }
    }
}

/// A transcript message to add.
#[derive(Debug, Clone)]
pub struct NewMessage {
    pub session_id: SessionId,
    pub turn_id: Option<TurnId>,
    pub kind: MessageKind,
    pub content: String,
    pub metadata: String,
    pub client_message_id: Option<String>,
}

const MESSAGE_COLUMNS: &str = "id, session_id, turn_id, seq, kind, content, metadata, client_message_id, created_at, updated_at";

async fn fetch_session<'e>(e: impl Executor<'e, Database = Sqlite>, id: &str) -> Result<Session> {
    sqlx::query_as::<_, SessionRow>("SELECT * FROM sessions WHERE id = ?")
        .bind(id)
        .fetch_optional(e)
        .await?
        .ok_or_else(|| StoreError::not_found("session", id))
        .and_then(Session::try_from)
}

async fn fetch_message<'e>(e: impl Executor<'e, Database = Sqlite>, id: &str) -> Result<Message> {
    let sql = format!("SELECT {MESSAGE_COLUMNS} FROM messages WHERE id = ?");
    sqlx::query_as::<_, MessageRow>(&sql)
        .bind(id)
        .fetch_optional(e)
        .await?
        .ok_or_else(|| StoreError::not_found("message", id))
        .and_then(Message::try_from)
}

impl Store {
    pub async fn get_session(&self, id: &SessionId) -> Result<Session> {
        fetch_session(&self.read, id.as_str()).await
    }

    pub async fn list_sessions(&self, task_id: &TaskId) -> Result<Vec<Session>> {
        sqlx::query_as::<_, SessionRow>(
            "SELECT * FROM sessions WHERE task_id = ? ORDER BY created_at, id",
        )
        .bind(task_id.as_str())
        .fetch_all(&self.read)
        .await?
        .into_iter()
        .map(Session::try_from)
        .collect()
    }

    /// Every session, for startup reconciliation.
    pub async fn all_sessions(&self) -> Result<Vec<Session>> {
        sqlx::query_as::<_, SessionRow>("SELECT * FROM sessions ORDER BY created_at, id")
            .fetch_all(&self.read)
            .await?
            .into_iter()
            .map(Session::try_from)
            .collect()
    }

    /// Messages in `seq` order: after `after_seq`, before `before_seq` (newest page when only
    /// `before_seq` is given), at most `limit`.
    pub async fn list_messages(
        &self,
        session_id: &SessionId,
        after_seq: Option<i64>,
        before_seq: Option<i64>,
        limit: i64,
    ) -> Result<Vec<Message>> {
        let newest_first = after_seq.is_none() && before_seq.is_some();
        let order = if newest_first { "DESC" } else { "ASC" };
        let sql = format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = ? AND seq > ? AND seq < ? \
             ORDER BY seq {order} LIMIT ?"
        );
        let rows = sqlx::query_as::<_, MessageRow>(&sql)
            .bind(session_id.as_str())
            .bind(after_seq.unwrap_or(0))
            .bind(before_seq.unwrap_or(i64::MAX))
            .bind(limit)
            .fetch_all(&self.read)
            .await?;
        let mut messages: Vec<Message> =
            rows.into_iter().map(Message::try_from).collect::<Result<_>>()?;
        if newest_first {
            messages.reverse();
        }
        Ok(messages)
    }

    pub async fn get_message(&self, id: &MessageId) -> Result<Message> {
        fetch_message(&self.read, id.as_str()).await
    }

    /// The permission request message with `request_id` in a session, if any.
    pub async fn find_permission_message(
        &self,
        session_id: &SessionId,
        request_id: &str,
    ) -> Result<Option<Message>> {
        let sql = format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = ? AND kind = 'permission_request' \
             AND json_extract(metadata, '$.request_id') = ?"
        );
        sqlx::query_as::<_, MessageRow>(&sql)
            .bind(session_id.as_str())
            .bind(request_id)
            .fetch_optional(&self.read)
            .await?
            .map(Message::try_from)
            .transpose()
    }

    pub async fn list_queue(&self, session_id: &SessionId) -> Result<Vec<QueuedPrompt>> {
        let rows = sqlx::query_as::<_, QueuedRow>(
            "SELECT * FROM queued_prompts WHERE session_id = ? ORDER BY position, created_at",
        )
        .bind(session_id.as_str())
        .fetch_all(&self.read)
        .await?;
        Ok(rows.into_iter().map(QueuedPrompt::from).collect())
    }

    /// Context resets that were accepted and never settled (a restart came in between).
    pub async fn reset_intents(&self) -> Result<Vec<ResetIntent>> {
        let rows = sqlx::query_as::<_, ResetRow>(
            "SELECT session_id, step_id, epoch, cause, created_at FROM session_resets \
             ORDER BY created_at, session_id",
        )
        .fetch_all(&self.read)
        .await?;
        Ok(rows.into_iter().map(ResetIntent::from).collect())
    }

    pub async fn get_runtime(&self, session_id: &SessionId) -> Result<Option<RuntimeRecord>> {
        let row = sqlx::query_as::<_, RuntimeRow>(
            "SELECT session_id, execution_id, epoch, pid, pgid, status, cwd FROM session_runtime \
             WHERE session_id = ?",
        )
        .bind(session_id.as_str())
        .fetch_optional(&self.read)
        .await?;
        Ok(row.map(|r| RuntimeRecord {
            session_id: SessionId::new(r.session_id),
            execution_id: r.execution_id,
            epoch: r.epoch,
            pid: r.pid.and_then(|p| i32::try_from(p).ok()),
            pgid: r.pgid.and_then(|p| i32::try_from(p).ok()),
            status: r.status,
            cwd: r.cwd,
        }))
    }
}

impl WriteTx {
    pub async fn get_session(&mut self, id: &SessionId) -> Result<Session> {
        fetch_session(self.conn(), id.as_str()).await
    }

    /// Creates a `CREATED` session; it becomes the task's primary session if it has none.
    pub async fn insert_session(
        &mut self,
        task_id: &TaskId,
        profile_id: Option<&AgentProfileId>,
        cwd: &str,
        session_mode: Option<&str>,
        model: Option<&str>,
    ) -> Result<Session> {
        let (id, now) = (self.new_id(), self.now().millis());
        sqlx::query(
            "INSERT INTO sessions (id, task_id, agent_profile_id, state, cwd, session_mode, model, created_at, updated_at) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(&id)
        .bind(task_id.as_str())
        .bind(profile_id.map(|p| p.as_str()))
        .bind(SessionState::Created.as_str())
        .bind(cwd)
        .bind(session_mode)
        .bind(model)
        .bind(now)
        .bind(now)
        .execute(self.conn())
        .await?;
        sqlx::query("UPDATE tasks SET primary_session_id = ?, updated_at = ? WHERE id = ? AND primary_session_id IS NULL")
            .bind(&id)
            .bind(now)
            .bind(task_id.as_str())
            .execute(self.conn())
            .await?;
        fetch_session(self.conn(), &id).await
    }

    /// Applies `update` if the session's epoch is still `epoch`; otherwise `StaleEpoch`.
    pub async fn update_session(
        &mut self,
        id: &SessionId,
        epoch: i64,
        update: &SessionUpdate,
    ) -> Result<Session> {
        let current = fetch_session(self.conn(), id.as_str()).await?;
        if current.epoch != epoch {
            return Err(StoreError::StaleEpoch {
                session: id.to_string(),
                expected: epoch,
                actual: current.epoch,
            });
        }
        let pick = |new: &Option<Option<String>>, old: &Option<String>| {
            new.clone().unwrap_or_else(|| old.clone())
        };
        let last_error = match &update.last_error {
            Some(e) => e.as_ref().map(last_error_to_json),
            None => current.last_error.as_ref().map(last_error_to_json),
        };
        let now = self.now().millis();
        sqlx::query(
            "UPDATE sessions SET state = ?, acp_session_id = ?, resume_token = ?, session_mode = ?, model = ?, \
             config_options = ?, plan_mode = ?, context_window = ?, last_error = ?, auto_run = ?, agent_info = ?, \
             updated_at = ? WHERE id = ? AND epoch = ?",
        )
        .bind(update.state.unwrap_or(current.state).as_str())
        .bind(pick(&update.acp_session_id, &current.acp_session_id))
        .bind(pick(&update.resume_token, &current.resume_token))
        .bind(pick(&update.session_mode, &current.session_mode))
        .bind(pick(&update.model, &current.model))
        .bind(update.config_options.as_ref().unwrap_or(&current.config_options))
        .bind(update.plan_mode.unwrap_or(current.plan_mode))
        .bind(pick(&update.context_window, &current.context_window))
        .bind(last_error)
        .bind(update.auto_run.unwrap_or(current.auto_run))
        .bind(pick(&update.agent_info, &current.agent_info))
        .bind(now)
        .bind(id.as_str())
        .bind(epoch)
        .execute(self.conn())
        .await?;
        fetch_session(self.conn(), id.as_str()).await
    }

    /// Stores an accepted context reset (one per session); its `created_at` is now.
    pub async fn record_reset(
        &mut self,
        session_id: &SessionId,
        step_id: Option<&StepId>,
        epoch: i64,
        cause: &str,
    ) -> Result<()> {
        sqlx::query(
            "INSERT INTO session_resets (session_id, step_id, epoch, cause, created_at) \
             VALUES (?, ?, ?, ?, ?) ON CONFLICT(session_id) DO UPDATE SET step_id = excluded.step_id, \
             epoch = excluded.epoch, cause = excluded.cause, created_at = excluded.created_at",
        )
        .bind(session_id.as_str())
        .bind(step_id.map(|s| s.as_str()))
        .bind(epoch)
        .bind(cause)
        .bind(self.now().millis())
        .execute(self.conn())
        .await?;
        Ok(())
    }

    /// Forgets the session's reset once it settled; returns whether one was stored.
    pub async fn clear_reset(&mut self, session_id: &SessionId) -> Result<bool> {
        let done = sqlx::query("DELETE FROM session_resets WHERE session_id = ?")
            .bind(session_id.as_str())
            .execute(self.conn())
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Moves the session to a new epoch (compare-and-set); returns the new epoch.
    pub async fn bump_epoch(&mut self, id: &SessionId, expected: i64) -> Result<i64> {
        let done = sqlx::query(
            "UPDATE sessions SET epoch = epoch + 1, updated_at = ? WHERE id = ? AND epoch = ?",
        )
        .bind(self.now().millis())
        .bind(id.as_str())
        .bind(expected)
        .execute(self.conn())
        .await?;
        if done.rows_affected() == 0 {
            let current = fetch_session(self.conn(), id.as_str()).await?;
            return Err(StoreError::StaleEpoch {
                session: id.to_string(),
                expected,
                actual: current.epoch,
            });
        }
        Ok(expected + 1)
    }

    pub async fn set_runtime(&mut self, record: &RuntimeRecord) -> Result<()> {
        sqlx::query(
            "INSERT INTO session_runtime (session_id, execution_id, epoch, pid, pgid, status, cwd, started_at) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(session_id) DO UPDATE SET execution_id = excluded.execution_id, \
             epoch = excluded.epoch, pid = excluded.pid, pgid = excluded.pgid, status = excluded.status, \
             cwd = excluded.cwd, started_at = excluded.started_at",
        )
        .bind(record.session_id.as_str())
        .bind(&record.execution_id)
        .bind(record.epoch)
        .bind(record.pid)
        .bind(record.pgid)
        .bind(&record.status)
        .bind(&record.cwd)
        .bind(self.now().millis())
        .execute(self.conn())
        .await?;
        Ok(())
    }

    /// Marks the runtime row of `epoch` as ended (no live process); keeps it for the record.
    pub async fn end_runtime(
        &mut self,
        session_id: &SessionId,
        epoch: i64,
        status: &str,
    ) -> Result<()> {
        sqlx::query("UPDATE session_runtime SET status = ?, pid = NULL, pgid = NULL WHERE session_id = ? AND epoch = ?")
            .bind(status)
            .bind(session_id.as_str())
            .bind(epoch)
            .execute(self.conn())
            .await?;
        Ok(())
    }

    pub async fn open_turn(&mut self, session_id: &SessionId, epoch: i64) -> Result<TurnId> {
        let id = self.new_id();
        sqlx::query("INSERT INTO turns (id, session_id, epoch, started_at) VALUES (?, ?, ?, ?)")
            .bind(&id)
            .bind(session_id.as_str())
            .bind(epoch)
            .bind(self.now().millis())
            .execute(self.conn())
            .await?;
        Ok(TurnId::new(id))
    }

    /// Closes a turn; returns false if it was already closed.
    pub async fn close_turn(&mut self, turn_id: &TurnId, stop_reason: &str) -> Result<bool> {
        let done = sqlx::query("UPDATE turns SET completed_at = ?, stop_reason = ? WHERE id = ? AND completed_at IS NULL")
            .bind(self.now().millis())
            .bind(stop_reason)
            .bind(turn_id.as_str())
            .execute(self.conn())
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Closes every open turn of a session (startup reconciliation); returns how many.
    pub async fn close_open_turns(
        &mut self,
        session_id: &SessionId,
        stop_reason: &str,
    ) -> Result<u64> {
        let done = sqlx::query(
            "UPDATE turns SET completed_at = ?, stop_reason = ? WHERE session_id = ? AND completed_at IS NULL",
        )
        .bind(self.now().millis())
        .bind(stop_reason)
        .bind(session_id.as_str())
        .execute(self.conn())
        .await?;
        Ok(done.rows_affected())
    }

    /// The `seq` the next emitted event will get (writes are serialized, so it is exact).
    pub async fn next_seq(&mut self) -> Result<i64> {
        let last: Option<i64> =
            sqlx::query_scalar("SELECT seq FROM sqlite_sequence WHERE name = 'events'")
                .fetch_optional(self.conn())
                .await?;
        Ok(last.unwrap_or(0) + 1)
    }

    /// Inserts a message whose `seq` is the seq of the event that will announce it; the
    /// caller emits that event next.
    pub async fn insert_message(&mut self, new: &NewMessage) -> Result<Message> {
        let (id, now) = (self.new_id(), self.now().millis());
        let seq = self.next_seq().await?;
        sqlx::query(
            "INSERT INTO messages (id, session_id, turn_id, seq, kind, content, metadata, client_message_id, \
             created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(&id)
        .bind(new.session_id.as_str())
        .bind(new.turn_id.as_ref().map(|t| t.as_str()))
        .bind(seq)
        .bind(new.kind.as_str())
        .bind(&new.content)
        .bind(&new.metadata)
        .bind(&new.client_message_id)
        .bind(now)
        .bind(now)
        .execute(self.conn())
        .await?;
        fetch_message(self.conn(), &id).await
    }

    /// Appends text to a message (streamed chunks are coalesced into one row).
    pub async fn append_message(&mut self, id: &MessageId, delta: &str) -> Result<Message> {
        sqlx::query("UPDATE messages SET content = content || ?, updated_at = ? WHERE id = ?")
            .bind(delta)
            .bind(self.now().millis())
            .bind(id.as_str())
            .execute(self.conn())
            .await?;
        fetch_message(self.conn(), id.as_str()).await
    }

    pub async fn set_message(
        &mut self,
        id: &MessageId,
        content: Option<&str>,
        metadata: &str,
    ) -> Result<Message> {
        sqlx::query("UPDATE messages SET content = COALESCE(?, content), metadata = ?, updated_at = ? WHERE id = ?")
            .bind(content)
            .bind(metadata)
            .bind(self.now().millis())
            .bind(id.as_str())
            .execute(self.conn())
            .await?;
        fetch_message(self.conn(), id.as_str()).await
    }

    pub async fn message_by_client_id(
        &mut self,
        session_id: &SessionId,
        client_message_id: &str,
    ) -> Result<Option<Message>> {
        let sql = format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = ? AND client_message_id = ?"
        );
        sqlx::query_as::<_, MessageRow>(&sql)
            .bind(session_id.as_str())
            .bind(client_message_id)
            .fetch_optional(self.conn())
            .await?
            .map(Message::try_from)
            .transpose()
    }

    /// Pending permission requests of a session (status `pending` in their metadata).
    pub async fn pending_permission_messages(
        &mut self,
        session_id: &SessionId,
    ) -> Result<Vec<Message>> {
        let sql = format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = ? AND kind = 'permission_request' \
             AND json_extract(metadata, '$.status') = 'pending' ORDER BY seq"
        );
        sqlx::query_as::<_, MessageRow>(&sql)
            .bind(session_id.as_str())
            .fetch_all(self.conn())
            .await?
            .into_iter()
            .map(Message::try_from)
            .collect()
    }

    pub async fn record_permission_answer(
        &mut self,
        session_id: &SessionId,
        request_id: &str,
        option_id: Option<&str>,
        outcome: &str,
        answered_by: &str,
    ) -> Result<()> {
        sqlx::query(
            "INSERT INTO permission_answers (session_id, request_id, option_id, outcome, answered_by, at) \
             VALUES (?, ?, ?, ?, ?, ?)",
        )
        .bind(session_id.as_str())
        .bind(request_id)
        .bind(option_id)
        .bind(outcome)
        .bind(answered_by)
        .bind(self.now().millis())
        .execute(self.conn())
        .await?;
        Ok(())
    }

    pub async fn list_queue(&mut self, session_id: &SessionId) -> Result<Vec<QueuedPrompt>> {
        let rows = sqlx::query_as::<_, QueuedRow>(
            "SELECT * FROM queued_prompts WHERE session_id = ? ORDER BY position, created_at",
        )
        .bind(session_id.as_str())
        .fetch_all(self.conn())
        .await?;
        Ok(rows.into_iter().map(QueuedPrompt::from).collect())
    }

    pub async fn enqueue(
        &mut self,
        session_id: &SessionId,
        content: &str,
        client_message_id: Option<&str>,
        queued_by: &str,
    ) -> Result<QueuedPrompt> {
        let position: i64 = sqlx::query_scalar(
            "SELECT COALESCE(MAX(position), -1) + 1 FROM queued_prompts WHERE session_id = ?",
        )
        .bind(session_id.as_str())
        .fetch_one(self.conn())
        .await?;
        let id = self.new_id();
        sqlx::query(
            "INSERT INTO queued_prompts (id, session_id, position, content, client_message_id, queued_by, created_at) \
             VALUES (?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(&id)
        .bind(session_id.as_str())
        .bind(position)
        .bind(content)
        .bind(client_message_id)
        .bind(queued_by)
        .bind(self.now().millis())
        .execute(self.conn())
        .await?;
        let row = sqlx::query_as::<_, QueuedRow>("SELECT * FROM queued_prompts WHERE id = ?")
            .bind(&id)
            .fetch_one(self.conn())
            .await?;
        Ok(row.into())
    }

    /// Removes a queue entry; returns false if it was not there.
    pub async fn dequeue(&mut self, session_id: &SessionId, id: &QueuedPromptId) -> Result<bool> {
        let done = sqlx::query("DELETE FROM queued_prompts WHERE id = ? AND session_id = ?")
            .bind(id.as_str())
            .bind(session_id.as_str())
            .execute(self.conn())
            .await?;
        Ok(done.rows_affected() == 1)
    }

    pub async fn update_queued(
        &mut self,
        session_id: &SessionId,
        id: &QueuedPromptId,
        content: &str,
    ) -> Result<bool> {
        let done =
            sqlx::query("UPDATE queued_prompts SET content = ? WHERE id = ? AND session_id = ?")
                .bind(content)
                .bind(id.as_str())
                .bind(session_id.as_str())
                .execute(self.conn())
                .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Sets the queue order; `order` must hold exactly the session's entries.
    pub async fn reorder_queue(
        &mut self,
        session_id: &SessionId,
        order: &[QueuedPromptId],
    ) -> Result<()> {
        let mut current: Vec<String> =
            self.list_queue(session_id).await?.into_iter().map(|q| q.id.into_string()).collect();
        let mut wanted: Vec<String> = order.iter().map(|q| q.to_string()).collect();
        current.sort();
        wanted.sort();
        if current != wanted {
            return Err(StoreError::Conflict(
                "ids must list every queued prompt exactly once".into(),
            ));
        }
        for (position, id) in order.iter().enumerate() {
            sqlx::query("UPDATE queued_prompts SET position = ? WHERE id = ?")
                .bind(position as i64)
                .bind(id.as_str())
                .execute(self.conn())
                .await?;
        }
        Ok(())
    }

    /// Makes `session_id` the task's primary session (a step with its own agent profile).
    pub async fn set_primary_session(
        &mut self,
        task_id: &TaskId,
        session_id: &SessionId,
    ) -> Result<()> {
        sqlx::query("UPDATE tasks SET primary_session_id = ?, updated_at = ? WHERE id = ?")
            .bind(session_id.as_str())
            .bind(self.now().millis())
            .bind(task_id.as_str())
            .execute(self.conn())
            .await?;
        Ok(())
    }

    /// Deletes a session with its turns, messages, queue and runtime row (by cascade).
    pub async fn delete_session(&mut self, id: &SessionId) -> Result<Session> {
        let session = fetch_session(self.conn(), id.as_str()).await?;
        sqlx::query("DELETE FROM sessions WHERE id = ?")
            .bind(id.as_str())
            .execute(self.conn())
            .await?;
        let now = self.now().millis();
        // Promote the next session of the task to primary, if the deleted one was.
        sqlx::query(
            "UPDATE tasks SET primary_session_id = (SELECT id FROM sessions WHERE task_id = tasks.id \
             ORDER BY created_at LIMIT 1), updated_at = ? WHERE id = ? AND primary_session_id = ?",
        )
        .bind(now)
        .bind(session.task_id.as_str())
        .bind(id.as_str())
        .execute(self.conn())
        .await?;
        Ok(session)
    }
}
