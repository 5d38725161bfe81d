//! Sessions: the row, reads and writes. Every write of a session's runtime state is a
//! compare-and-set on its epoch. Its runtime binding (`runtime.rs`), turns (`turns.rs`),
//! transcript (`messages.rs`), queue (`queue.rs`), permission audit (`permissions.rs`) and
//! pending reset (`session_resets.rs`) have their own files and go with it by cascade.

use kandev_domain::agent::AgentKind;
use kandev_domain::message_meta::UsageMeta;
use kandev_domain::session::SessionState;
use kandev_domain::transcript::{LastError, Session, TuiScreen};
use kandev_domain::{AgentProfileId, SessionId, TaskId, Timestamp};
use sqlx::FromRow;

use crate::db::Db;
use crate::{Result, Store, StoreError, WriteTx};

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
    pub context_window: Option<Option<UsageMeta>>,
    pub last_error: Option<Option<LastError>>,
    pub auto_run: Option<bool>,
    pub agent_info: Option<Option<String>>,
    pub available_commands: Option<String>,
    /// A terminal-UI session's screen state (issue 52).
    pub tui_screen: Option<Option<TuiScreen>>,
}

// ---------------------------------------------------------------- rows

#[derive(FromRow)]
struct SessionRow {
    id: String,
    task_id: String,
    agent_profile_id: Option<String>,
    deleted_profile: Option<String>,
    name: Option<String>,
    terminal_ui: Option<String>,
    tui_screen: Option<String>,
    state: String,
    epoch: i64,
    acp_session_id: Option<String>,
    resume_token: Option<String>,
    session_mode: Option<String>,
    model: Option<String>,
    config_options: String,
    /// 0 or 1 (a flag is an integer on both engines).
    plan_mode: i64,
    context_window: Option<String>,
    last_error: Option<String>,
    /// 0 or 1 (a flag is an integer on both engines).
    auto_run: i64,
    agent_info: Option<String>,
    available_commands: String,
    cwd: String,
    attempt: Option<i64>,
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
        let context_window = match &r.context_window {
            Some(text) => Some(crate::error::read_json("session", &r.id, text)?),
            None => None,
        };
        Ok(Session {
            id: SessionId::new(r.id),
            task_id: TaskId::new(r.task_id),
            agent_profile_id: r.agent_profile_id.map(AgentProfileId::new),
            name: r.name,
            terminal_ui: r.terminal_ui.as_deref().and_then(AgentKind::parse),
            // A value this version does not know reads as not drawn yet.
            tui_screen: r.tui_screen.as_deref().and_then(TuiScreen::parse),
            state,
            epoch: r.epoch,
            acp_session_id: r.acp_session_id,
            resume_token: r.resume_token,
            session_mode: r.session_mode,
            model: r.model,
            config_options: r.config_options,
            plan_mode: r.plan_mode != 0,
            context_window,
            last_error,
            auto_run: r.auto_run != 0,
            agent_info: r.agent_info,
            available_commands: r.available_commands,
            cwd: r.cwd,
            attempt: r.attempt.and_then(|n| u32::try_from(n).ok()),
            deleted_profile: r.deleted_profile,
            created_at: Timestamp(r.created_at),
            updated_at: Timestamp(r.updated_at),
        })
    }
}

/// The `context_window` column after `update`: its usage as JSON text, or NULL.
fn context_window_json(update: &SessionUpdate, current: &Session) -> Option<String> {
    let usage = update.context_window.as_ref().unwrap_or(&current.context_window).as_ref();
    // Numbers and a JSON value: serializing cannot fail.
    usage.map(|u| serde_json::to_string(u).unwrap_or_else(|_| "{}".to_owned()))
}

// ---------------------------------------------------------------- reads

/// The session `id`, or `NotFound`.
async fn get(mut db: Db<'_>, id: &str) -> Result<Session> {
    crate::sql::query_as::<SessionRow>("SELECT * FROM sessions WHERE id = ?")
        .bind(id)
        .fetch_optional(&mut db)
        .await?
        .ok_or_else(|| StoreError::not_found("session", id))
        .and_then(Session::try_from)
}

impl Store {
    /// The user who started a session (`None`: a workflow trigger, a schedule, intake, or
    /// before accounts), and whether the session exists at all.
    pub async fn session_started_by(&self, id: &SessionId) -> Result<Option<Option<String>>> {
        let row: Option<Option<String>> =
            crate::sql::query_scalar("SELECT started_by FROM sessions WHERE id = ?")
                .bind(id.as_str())
                .fetch_optional(&self.read)
                .await?;
        Ok(row)
    }

    pub async fn get_session(&self, id: &SessionId) -> Result<Session> {
        get(self.db(), id.as_str()).await
    }

    pub async fn list_sessions(&self, task_id: &TaskId) -> Result<Vec<Session>> {
        crate::sql::query_as::<SessionRow>(
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
        crate::sql::query_as::<SessionRow>("SELECT * FROM sessions ORDER BY created_at, id")
            .fetch_all(&self.read)
            .await?
            .into_iter()
            .map(Session::try_from)
            .collect()
    }
}

// ---------------------------------------------------------------- writes

impl WriteTx {
    pub async fn get_session(&mut self, id: &SessionId) -> Result<Session> {
        get(self.db(), id.as_str()).await
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
        crate::sql::query(
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
        self.adopt_primary_session(task_id, &id).await?;
        get(self.db(), &id).await
    }

    /// Numbers a session among its task's attempts (`None`: it is not, or no longer, one).
    pub async fn set_session_attempt(
        &mut self,
        id: &SessionId,
        attempt: Option<u32>,
    ) -> Result<Session> {
        crate::sql::query("UPDATE sessions SET attempt = ?, updated_at = ? WHERE id = ?")
            .bind(attempt.map(i64::from))
            .bind(self.now().millis())
            .bind(id.as_str())
            .execute(self.conn())
            .await?;
        get(self.db(), id.as_str()).await
    }

    /// Records the user who started a session (issue 49): its agent acts with their rights
    /// at most.
    /// The sessions of profile `id`, about to be deleted, keep its name (issue 52).
    pub async fn mark_profile_deleted(&mut self, id: &AgentProfileId, name: &str) -> Result<()> {
        crate::sql::query("UPDATE sessions SET deleted_profile = ? WHERE agent_profile_id = ?")
            .bind(name)
            .bind(id.as_str())
            .execute(self.conn())
            .await?;
        Ok(())
    }

    /// Moves a session to another agent profile (`session.rebind`, issue 52): the new
    /// profile, no deleted one, and no conversation to load (another agent cannot load it).
    pub async fn rebind_session(
        &mut self,
        id: &SessionId,
        epoch: i64,
        profile_id: &AgentProfileId,
    ) -> Result<Session> {
        let current = self.get_session(id).await?;
        if current.epoch != epoch {
            let (session, actual) = (id.to_string(), current.epoch);
            return Err(StoreError::StaleEpoch { session, expected: epoch, actual });
        }
        let now = self.now().millis();
        crate::sql::query(
            "UPDATE sessions SET agent_profile_id = ?, deleted_profile = NULL, \
             acp_session_id = NULL, resume_token = NULL, updated_at = ? WHERE id = ?",
        )
        .bind(profile_id.as_str())
        .bind(now)
        .bind(id.as_str())
        .execute(self.conn())
        .await?;
        self.get_session(id).await
    }

    /// Makes a new session one that runs `agent`'s own terminal UI (issue 52).
    pub async fn set_session_terminal_ui(
        &mut self,
        id: &SessionId,
        agent: AgentKind,
    ) -> Result<()> {
        crate::sql::query("UPDATE sessions SET terminal_ui = ? WHERE id = ?")
            .bind(agent.as_str())
            .bind(id.as_str())
            .execute(self.conn())
            .await?;
        Ok(())
    }

    pub async fn set_session_started_by(&mut self, id: &SessionId, user_id: &str) -> Result<()> {
        crate::sql::query("UPDATE sessions SET started_by = ? WHERE id = ?")
            .bind(user_id)
            .bind(id.as_str())
            .execute(self.conn())
            .await?;
        Ok(())
    }

    /// Applies `update` if the session's epoch is still `epoch`; otherwise `StaleEpoch`.
    pub async fn update_session(
        &mut self,
        id: &SessionId,
        epoch: i64,
        update: &SessionUpdate,
    ) -> Result<Session> {
        let current = self.get_session(id).await?;
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
        crate::sql::query(
            "UPDATE sessions SET state = ?, acp_session_id = ?, resume_token = ?, session_mode = ?, model = ?, \
             config_options = ?, plan_mode = ?, context_window = ?, last_error = ?, auto_run = ?, agent_info = ?, \
             available_commands = ?, tui_screen = ?, updated_at = ? WHERE id = ? AND epoch = ?",
        )
        .bind(update.state.unwrap_or(current.state).as_str())
        .bind(pick(&update.acp_session_id, &current.acp_session_id))
        .bind(pick(&update.resume_token, &current.resume_token))
        .bind(pick(&update.session_mode, &current.session_mode))
        .bind(pick(&update.model, &current.model))
        .bind(update.config_options.as_ref().unwrap_or(&current.config_options))
        .bind(update.plan_mode.unwrap_or(current.plan_mode))
        .bind(context_window_json(update, &current))
        .bind(last_error)
        .bind(update.auto_run.unwrap_or(current.auto_run))
        .bind(pick(&update.agent_info, &current.agent_info))
        .bind(update.available_commands.as_ref().unwrap_or(&current.available_commands))
        .bind(update.tui_screen.unwrap_or(current.tui_screen).map(TuiScreen::as_str))
        .bind(now)
        .bind(id.as_str())
        .bind(epoch)
        .execute(self.conn())
        .await?;
        self.get_session(id).await
    }

    /// Names the session (`None` clears the name). Not fenced by the epoch: the name is the
    /// person's, never the runtime's, and no runtime write touches it.
    pub async fn rename_session(&mut self, id: &SessionId, name: Option<&str>) -> Result<Session> {
        let done = crate::sql::query("UPDATE sessions SET name = ?, updated_at = ? WHERE id = ?")
            .bind(name)
            .bind(self.now().millis())
            .bind(id.as_str())
            .execute(self.conn())
            .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::not_found("session", id.as_str()));
        }
        self.get_session(id).await
    }

    /// Moves the session to a new epoch (compare-and-set); returns the new epoch.
    pub async fn bump_epoch(&mut self, id: &SessionId, expected: i64) -> Result<i64> {
        let done = crate::sql::query(
            "UPDATE sessions SET epoch = epoch + 1, updated_at = ? WHERE id = ? AND epoch = ?",
        )
        .bind(self.now().millis())
        .bind(id.as_str())
        .bind(expected)
        .execute(self.conn())
        .await?;
        if done.rows_affected() == 0 {
            let current = self.get_session(id).await?;
            return Err(StoreError::StaleEpoch {
                session: id.to_string(),
                expected,
                actual: current.epoch,
            });
        }
        Ok(expected + 1)
    }

    /// Deletes a session with its turns, messages, queue and runtime row (by cascade).
    pub async fn delete_session(&mut self, id: &SessionId) -> Result<Session> {
        let session = self.get_session(id).await?;
        crate::sql::query("DELETE FROM sessions WHERE id = ?")
            .bind(id.as_str())
            .execute(self.conn())
            .await?;
        // Promote the next session of the task to primary, if the deleted one was.
        self.replace_primary_session(&session.task_id, id).await?;
        Ok(session)
    }
}
