//! The orchestrator: one actor per session owns every mutation of it (state, turns, queue,
//! resume token, runtime binding, last error), fencing stale work with a persisted epoch.
//!
//! Callers (the API) hold an [`Engine`] and talk to session actors through it; agent events
//! and the results of slow work (booting, prompts, stops) come back to the actor's inbox as
//! messages, so nothing is ever stuck behind them.

mod actor;
mod agent_events;
mod boot;
mod error;
mod files;
mod launcher;
mod publish;
pub mod workdir;
mod workflow_exec;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kandev_domain::transcript::{Message, QueuedPrompt, Session};
use kandev_domain::{AgentProfileId, QueuedPromptId, SessionId, TaskId};
use kandev_store::Store;
use tokio::sync::{mpsc, oneshot};
use tokio_util::task::TaskTracker;

pub use error::EngineError;
pub use launcher::{ExecutionControl, LaunchSpec, Launched, Launcher, LocalLauncher, MockLauncher};

use actor::{Command, SessionActor};

pub type Result<T, E = EngineError> = std::result::Result<T, E>;

/// The program and leading arguments that run the built-in mock agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentCommand {
    pub program: String,
    pub args: Vec<String>,
}

/// Settings of the engine. Durations are the lifecycle defaults; tests shrink them.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// `$KANDEV_HOME`: tasks without a repository work in `<home>/tasks/<task-id>`.
    pub home: PathBuf,
    pub mock_agent: AgentCommand,
    /// Grace between TERM and KILL when stopping an agent (rule 16).
    pub stop_grace: Duration,
    /// How long a cancelled turn may take before the engine ends it (rule 13).
    pub cancel_timeout: Duration,
    /// Timeout of protocol calls other than prompts (initialize, session/new, ...).
    pub call_timeout: Duration,
    /// Most queued prompts per session; 0 = unlimited (rule 8).
    pub queue_cap: usize,
    /// Quiet time before a stall notice, and before a turn with no output fails (rule 40).
    pub stall_after: Duration,
    /// Bound of a live context reset with the agent (rule 25).
    pub reset_timeout: Duration,
    /// Longest a repository's setup script may run before it is killed.
    pub setup_timeout: Duration,
    /// An agent idle this long (no turn, reset or command) is stopped; the next message
    /// resumes it. Zero: never.
    pub idle_timeout: Duration,
}

impl EngineConfig {
    pub fn new(home: PathBuf, mock_agent: AgentCommand) -> Self {
        EngineConfig {
            home,
            mock_agent,
            stop_grace: Duration::from_secs(5),
            cancel_timeout: Duration::from_secs(10),
            call_timeout: Duration::from_secs(60),
            queue_cap: 10,
            stall_after: Duration::from_secs(5 * 60),
            reset_timeout: Duration::from_secs(10),
            setup_timeout: workdir::SETUP_TIMEOUT,
            idle_timeout: Duration::from_secs(30 * 60),
        }
    }
}

/// A prompt from the user (or a workflow).
#[derive(Debug, Clone)]
pub struct PromptRequest {
    pub content: String,
    /// Idempotency key: the same id is recorded once (rule 3).
    pub client_message_id: Option<String>,
    /// Queue when the agent is busy (default) instead of failing with `Busy`.
    pub queue: bool,
}

/// What happened to a prompt.
#[derive(Debug, Clone)]
pub enum PromptOutcome {
    /// Recorded and sent (or waiting for the agent to be ready).
    Sent(Message),
    /// The agent is busy; it will run after the current turn.
    Queued(QueuedPrompt),
    /// The `client_message_id` was already recorded; nothing new happened.
    Duplicate(Message),
}

/// An answer to a permission request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PermissionAnswer {
    Option(String),
    Cancelled,
}

/// Changes to the prompt queue.
#[derive(Debug, Clone)]
pub enum QueueChange {
    Add {
        content: String,
        client_message_id: Option<String>,
    },
    Update {
        id: QueuedPromptId,
        content: String,
    },
    Remove {
        id: QueuedPromptId,
    },
    Reorder {
        ids: Vec<QueuedPromptId>,
    },
    /// Runs the next entry now if the agent is idle.
    Drain,
    SetAutoRun(bool),
}

/// Cheap-to-clone handle to the engine.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub store: Store,
    pub config: EngineConfig,
    pub launcher: Arc<dyn Launcher>,
    sessions: Mutex<HashMap<SessionId, mpsc::Sender<Command>>>,
    pub(crate) tracker: TaskTracker,
    /// Auth methods chosen with `session.authenticate`, used by the session's next boot.
    auth_wishes: Mutex<HashMap<SessionId, String>>,
}

impl Inner {
    /// The auth method to call `authenticate` with at the session's next boot (taken once).
    pub(crate) fn take_auth_wish(&self, id: &SessionId) -> Option<String> {
        lock(&self.auth_wishes).remove(id)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Engine {
    pub fn new(store: Store, config: EngineConfig, launcher: Arc<dyn Launcher>) -> Engine {
        let inner = Inner {
            store,
            config,
            launcher,
            sessions: Mutex::new(HashMap::new()),
            tracker: TaskTracker::new(),
            auth_wishes: Mutex::new(HashMap::new()),
        };
        Engine { inner: Arc::new(inner) }
    }

    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    /// The inbox of a session's actor, starting the actor if it is not running.
    async fn inbox(&self, id: &SessionId) -> Result<mpsc::Sender<Command>> {
        if let Some(tx) = lock(&self.inner.sessions).get(id).filter(|tx| !tx.is_closed()) {
            return Ok(tx.clone());
        }
        let session = self.inner.store.get_session(id).await.map_err(not_found)?;
        let task = self.inner.store.get_task(&session.task_id).await?;
        let mut sessions = lock(&self.inner.sessions);
        if let Some(tx) = sessions.get(id).filter(|tx| !tx.is_closed()) {
            return Ok(tx.clone());
        }
        let (tx, rx) = mpsc::channel(256);
        let actor = SessionActor::new(self.inner.clone(), session, task, tx.clone());
        self.inner.tracker.spawn(actor.run(rx));
        sessions.insert(id.clone(), tx.clone());
        Ok(tx)
    }

    /// Sends a command built around a reply channel and waits for the answer.
    async fn ask<T>(
        &self,
        id: &SessionId,
        make: impl FnOnce(oneshot::Sender<Result<T>>) -> Command,
    ) -> Result<T> {
        let inbox = self.inbox(id).await?;
        let (reply, answer) = oneshot::channel();
        inbox.send(make(reply)).await.map_err(|_| EngineError::gone())?;
        answer.await.map_err(|_| EngineError::gone())?
    }

    /// Runs `work` as the engine's own task and waits for it: a caller that goes away (an
    /// HTTP client disconnecting) never leaves it half done (rule 33).
    pub async fn run_detached<T: Send + 'static>(
        &self,
        work: impl std::future::Future<Output = T> + Send + 'static,
    ) -> Result<T> {
        self.inner.tracker.spawn(work).await.map_err(|_| EngineError::gone())
    }

    /// Creates a session for a task and starts its agent; `prompt`, if any, is its first turn.
    /// Answers once the start is accepted (`STARTING`, rule 46): preparing the working
    /// directory (worktrees, setup script) is part of the start, in the session's own work.
    pub async fn launch(
        &self,
        task_id: &TaskId,
        profile_id: Option<AgentProfileId>,
        prompt: Option<String>,
    ) -> Result<Session> {
        let engine = self.clone();
        let task_id = task_id.clone();
        self.run_detached(async move {
            let session = actor::create_session(&engine.inner, &task_id, profile_id).await?;
            match prompt {
                Some(content) => {
                    let request = PromptRequest { content, client_message_id: None, queue: true };
                    engine.prompt(&session.id, request).await?;
                }
                None => engine.ask(&session.id, |reply| Command::Start { reply }).await?,
            }
            Ok(engine.inner.store.get_session(&session.id).await?)
        })
        .await?
    }

    pub async fn prompt(&self, id: &SessionId, request: PromptRequest) -> Result<PromptOutcome> {
        self.ask(id, |reply| Command::Prompt { request, queued_by: "user", reply }).await
    }

    /// Restarts the agent on the saved conversation (`fresh: false`, `session/load`) or on a
    /// new one (`fresh: true`); also the way out of `FAILED` and `CANCELLED`.
    pub async fn resume(&self, id: &SessionId, fresh: bool) -> Result<()> {
        self.ask(id, |reply| Command::Resume { fresh, reply }).await
    }

    /// `session.authenticate`: restarts the agent so that it runs ACP `authenticate` with
    /// `method_id` right after `initialize`, then reloads the conversation (or opens a new
    /// one). A refusal ends the start with `agent_auth_required` again.
    pub async fn authenticate(&self, id: &SessionId, method_id: String) -> Result<()> {
        lock(&self.inner.auth_wishes).insert(id.clone(), method_id);
        let result = self.resume(id, false).await;
        if result.is_err() {
            lock(&self.inner.auth_wishes).remove(id);
        }
        result
    }

    /// `session.reset_context`: a fresh conversation for the agent (rules 20-27).
    pub async fn reset_context(&self, id: &SessionId) -> Result<()> {
        self.ask(id, |reply| Command::Reset { reply }).await
    }

    /// Runs the start step's `on_enter` for a new task; with `start_agent` (or an
    /// `auto_start_agent` action) the task's first session starts, exactly once.
    pub async fn task_created(
        &self,
        task_id: &TaskId,
        start_agent: bool,
    ) -> Result<Option<Session>> {
        let task = self.inner.store.get_task(task_id).await?;
        let workflow = self.inner.store.get_workflow(&task.workflow_id).await?;
        let Some(step) = workflow.step(&task.step_id).cloned() else { return Ok(None) };
        let auto_start =
            step.events.on_enter.contains(&kandev_domain::workflow::Action::AutoStartAgent);
        if !auto_start && !start_agent {
            return Ok(None);
        }
        let session = self.primary_session_for(&task, &step).await?;
        let cause = workflow_exec::EntryCause::Created;
        let to = step.id.clone();
        self.ask(&session, |reply| Command::StepEntered {
            from: None,
            to,
            cause,
            start_agent,
            reply,
        })
        .await?;
        Ok(Some(self.inner.store.get_session(&session).await?))
    }

    /// Moves a task (a person's move), running `on_exit` of the step it leaves and
    /// `on_enter` of the step it enters on its primary session (workflows.md).
    pub async fn move_task(
        &self,
        task_id: &TaskId,
        to: &kandev_domain::StepId,
        position: Option<usize>,
    ) -> Result<(kandev_domain::task::Task, kandev_domain::StepId)> {
        let cause = workflow_exec::EntryCause::Manual;
        let (task, from) =
            workflow_exec::record_move(&self.inner, task_id, to, position, cause, "user").await?;
        if &from == to {
            return Ok((task, from));
        }
        let workflow = self.inner.store.get_workflow(&task.workflow_id).await?;
        let Some(step) = workflow.step(to).cloned() else { return Ok((task, from)) };
        let auto_start =
            step.events.on_enter.contains(&kandev_domain::workflow::Action::AutoStartAgent);
        if task.primary_session_id.is_none() && !auto_start {
            return Ok((task, from));
        }
        let session = self.primary_session_for(&task, &step).await?;
        let (from_step, to_step) = (Some(from.clone()), to.clone());
        self.ask(&session, |reply| Command::StepEntered {
            from: from_step,
            to: to_step,
            cause,
            start_agent: false,
            reply,
        })
        .await?;
        Ok((self.inner.store.get_task(task_id).await?, from))
    }

    pub(crate) fn from_inner(inner: Arc<Inner>) -> Engine {
        Engine { inner }
    }

    /// Runs a step entry in the session the step works in (its own profile's, if it has one).
    /// Boxed with an explicit `Send`: it is spawned from inside a session actor.
    pub(crate) fn enter_step_in_primary(
        &self,
        task_id: TaskId,
        from: Option<kandev_domain::StepId>,
        to: kandev_domain::StepId,
        cause: workflow_exec::EntryCause,
    ) -> futures::future::BoxFuture<'static, Result<()>> {
        let engine = self.clone();
        Box::pin(async move {
            let task = engine.inner.store.get_task(&task_id).await?;
            let workflow = engine.inner.store.get_workflow(&task.workflow_id).await?;
            let Some(step) = workflow.step(&to).cloned() else { return Ok(()) };
            let session = engine.primary_session_for(&task, &step).await?;
            engine
                .ask(&session, |reply| Command::StepEntered {
                    from,
                    to,
                    cause,
                    start_agent: false,
                    reply,
                })
                .await
        })
    }

    /// The session a step works in: the task's primary session, unless the step names its
    /// own agent profile, in which case a session with that profile becomes primary.
    async fn primary_session_for(
        &self,
        task: &kandev_domain::task::Task,
        step: &kandev_domain::workflow::Step,
    ) -> Result<SessionId> {
        let primary = match &task.primary_session_id {
            Some(id) => Some(self.inner.store.get_session(id).await?),
            None => None,
        };
        let wanted = step.agent_profile_id.clone();
        match (primary, wanted) {
            (Some(session), None) => Ok(session.id),
            (Some(session), Some(profile))
                if session.agent_profile_id.as_ref() == Some(&profile) =>
            {
                Ok(session.id)
            }
            (_, profile) => {
                let profile = profile.or(task.agent_profile_id.clone());
                let session = actor::create_session(&self.inner, &task.id, profile).await?;
                let mut tx = self.inner.store.begin_write().await?;
                tx.set_primary_session(&task.id, &session.id).await?;
                tx.commit().await?;
                Ok(session.id)
            }
        }
    }

    /// Cancels the running turn (rule 12); succeeds when nothing runs.
    pub async fn cancel(&self, id: &SessionId) -> Result<()> {
        self.ask(id, |reply| Command::Cancel { reply }).await
    }

    /// Ends the agent process, leaving the session resumable (rule 16).
    pub async fn stop(&self, id: &SessionId) -> Result<()> {
        self.ask(id, |reply| Command::Stop { reply }).await
    }

    /// Stops any execution and deletes the session and its transcript (rule 35).
    pub async fn delete(&self, id: &SessionId) -> Result<()> {
        let result = self.ask(id, |reply| Command::Delete { reply }).await;
        lock(&self.inner.sessions).remove(id);
        result
    }

    pub async fn respond_permission(
        &self,
        id: &SessionId,
        request_id: String,
        answer: PermissionAnswer,
    ) -> Result<Message> {
        self.ask(id, |reply| Command::Permission { request_id, answer, reply }).await
    }

    pub async fn set_mode(&self, id: &SessionId, mode_id: String) -> Result<Session> {
        self.ask(id, |reply| Command::SetMode { mode_id, reply }).await
    }

    pub async fn set_config_option(
        &self,
        id: &SessionId,
        config_id: String,
        value: serde_json::Value,
    ) -> Result<Session> {
        self.ask(id, |reply| Command::SetConfig { config_id, value, reply }).await
    }

    /// Changes the prompt queue; returns the queue afterwards.
    pub async fn change_queue(
        &self,
        id: &SessionId,
        change: QueueChange,
    ) -> Result<Vec<QueuedPrompt>> {
        self.ask(id, |reply| Command::Queue { change, reply }).await
    }

    /// Stops every agent and every actor (server shutdown). No agent process remains.
    pub async fn shutdown(&self) {
        let inboxes: Vec<_> = lock(&self.inner.sessions).drain().map(|(_, tx)| tx).collect();
        for inbox in inboxes {
            let (reply, done) = oneshot::channel();
            if inbox.send(Command::Shutdown { reply }).await.is_ok() {
                let _ = done.await;
            }
        }
        self.inner.tracker.close();
        self.inner.tracker.wait().await;
    }

    /// Startup reconciliation (rule 42): sessions that were starting or running become
    /// `WAITING_FOR_INPUT` with an "interrupted" note, open turns are closed, agent process
    /// groups recorded as ours are killed. No agent is launched.
    pub async fn reconcile(&self) -> Result<usize> {
        actor::reconcile(&self.inner).await
    }
}

fn not_found(err: kandev_store::StoreError) -> EngineError {
    match err {
        kandev_store::StoreError::NotFound { .. } => EngineError::NotFound(err.to_string()),
        other => EngineError::Store(other),
    }
}
