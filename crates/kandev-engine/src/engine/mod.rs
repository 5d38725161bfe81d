//! The engine's handle, [`Engine`]: what the API calls. Each session's mutations are
//! commands to its actor (`session/`); task-level work (creating sessions, moving tasks,
//! reconciling at startup) runs here, never inside an actor, and so do the actions on a
//! task's working directory, a file per kind: `actions` (files and git, removing worktrees),
//! `ship` (status, rebase, merge, push, pull requests and their polling, `review.submit`),
//! `dev` (dev servers) and `terminals` (users' shells), over the mechanics of `workdir/`.
//! The top of the engine's modules: none below imports it. Every spawned future is owned
//! by the engine's task tracker.

mod actions;
pub(crate) mod attempts;
mod control;
mod dev;
pub(crate) mod ship;
mod terminals;

use std::future::Future;
use std::sync::Arc;

use kandev_domain::files::FileChange;
use kandev_domain::message_meta::StatusNote;
use kandev_domain::question::{Question, QuestionStatus};
use kandev_domain::task::Task;
use kandev_domain::transcript::{Message, QueuedPrompt, Session};
use kandev_domain::workflow::EntryCause;
use kandev_domain::{AgentProfileId, RepositoryId, SessionId, StepId, TaskId, TurnId};
use kandev_store::Store;
use tokio::sync::oneshot;

use crate::api::{
    CheckpointedTurn, Discard, PermissionAnswer, PromptOutcome, PromptRequest, QueueChange,
    RevertOutcome,
};
use crate::attachments::{self, Upload};
use crate::command::Command;
use crate::config::EngineConfig;
use crate::create::create_session;
use crate::error::{EngineError, Result};
use crate::handle::ask;
use crate::inner::{Inner, lock};
use crate::launcher::Launcher;
use crate::mcp::{McpRefusal, McpSession};
use crate::question;
use crate::reconcile::reconcile;
use crate::workflow::{hold_if_blocked, primary_session_for, record_trigger_move};

/// How long shutdown waits for the SSH links to close (each closes within 5 s).
const LINKS_CLOSE_BOUND: std::time::Duration = std::time::Duration::from_secs(6);

/// Cheap-to-clone handle to the engine.
#[derive(Clone)]
pub struct Engine {
    pub(crate) inner: Arc<Inner>,
}

/// Starts a session's actor (`Inner::start_actor`): a terminal-UI session's (`tui/`), or the
/// ACP one (`session/`).
fn start_actor(
    inner: Arc<Inner>,
    session: kandev_domain::transcript::Session,
    task: kandev_domain::task::Task,
    me: tokio::sync::mpsc::Sender<Command>,
    inbox: tokio::sync::mpsc::Receiver<Command>,
) {
    if crate::tui::is_tui(&session) {
        crate::tui::actor::start(inner, session, task, inbox);
    } else {
        crate::session::start(inner, session, task, me, inbox);
    }
}

impl Engine {
    pub fn new(store: Store, config: EngineConfig, launcher: Arc<dyn Launcher>) -> Engine {
        let inner = Inner::new(store, config, launcher, start_actor);
        Engine { inner: Arc::new(inner) }
    }

    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    async fn ask<T>(
        &self,
        id: &SessionId,
        make: impl FnOnce(oneshot::Sender<Result<T>>) -> Command,
    ) -> Result<T> {
        ask(&self.inner, id, make).await
    }

    /// Runs `work` as the engine's own task and waits for it: a caller that goes away (an
    /// HTTP client disconnecting) never leaves it half done (rule 33).
    pub async fn run_detached<T: Send + 'static>(
        &self,
        work: impl Future<Output = T> + Send + 'static,
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
        self.launch_by(task_id, profile_id, prompt, None, false).await
    }

    /// [`Engine::launch`] by the user `started_by` (issue 49): the session's agent acts with
    /// that user's rights at most. With `terminal_ui`, the session runs the agent's own
    /// terminal UI in a terminal (issue 52, `tui/`).
    pub async fn launch_by(
        &self,
        task_id: &TaskId,
        profile_id: Option<AgentProfileId>,
        prompt: Option<String>,
        started_by: Option<String>,
        terminal_ui: bool,
    ) -> Result<Session> {
        let engine = self.clone();
        let task_id = task_id.clone();
        self.run_detached(async move {
            let started_by = started_by.as_deref();
            let session =
                create_session(&engine.inner, &task_id, profile_id, started_by, terminal_ui)
                    .await?;
            match prompt {
                Some(content) => {
                    let request = PromptRequest::text(content);
                    engine.prompt(&session.id, request).await?;
                }
                None => engine.ask(&session.id, |reply| Command::Start { reply }).await?,
            }
            Ok(engine.inner.store.get_session(&session.id).await?)
        })
        .await?
    }

    /// Sends or queues a prompt; its attachments are checked first (limits, stored files).
    pub async fn prompt(
        &self,
        id: &SessionId,
        mut request: PromptRequest,
    ) -> Result<PromptOutcome> {
        request.attachments = attachments::check(&self.inner.uploads, request.attachments).await?;
        self.ask(id, |reply| Command::Prompt { request, queued_by: "user", reply }).await
    }

    /// Sends notification records to their channels until `stop` (the server runs it as
    /// one of its tasks).
    pub fn deliver_notifications(
        &self,
        stop: tokio_util::sync::CancellationToken,
    ) -> impl Future<Output = ()> + Send + 'static {
        let backoff = self.inner.config.notification_backoff;
        let allow_private = self.inner.config.allow_private_notification_targets;
        let web = self.web_url();
        let stored = crate::secrets::server_secrets(self.inner.clone());
        crate::deliveries::deliver(
            self.inner.store.clone(),
            backoff,
            allow_private,
            web,
            stored,
            stop,
        )
    }

    /// Where people open the web UI (`http://127.0.0.1:38429`, or the server's public URL):
    /// webhook bodies link to the task's page there. Set before notifications are delivered.
    pub fn set_web_url(&self, url: Option<String>) {
        *crate::inner::lock(&self.inner.web_url) = crate::deliveries::WebUrl(url);
    }

    fn web_url(&self) -> crate::deliveries::WebUrl {
        crate::inner::lock(&self.inner.web_url).clone()
    }

    /// `notification.channel.test`: one test notification to `channel`, now (not retried,
    /// not logged as a delivery). Returns what the receiver answered and why it failed, if
    /// it did; a target that is not allowed (not public, without the opt-in) is
    /// `Forbidden`, and nothing is sent to it.
    pub async fn test_channel(
        &self,
        channel: &kandev_domain::notify::Channel,
    ) -> Result<kandev_notify::Answer> {
        let allow_private = self.inner.config.allow_private_notification_targets;
        let stored = crate::secrets::server_secrets(self.inner.clone());
        let now = self.inner.store.now();
        crate::deliveries::test(channel, now, allow_private, &self.web_url(), &stored)
            .await
            .map_err(|refused| EngineError::Forbidden(refused.to_string()))
    }

    /// Refuses a channel URL whose host is an address that is not public, unless the server
    /// allows private targets (a name is checked on what it resolves to, each time a
    /// notification is sent).
    pub fn check_channel_url(&self, url: &str) -> Result<()> {
        let allow_private = self.inner.config.allow_private_notification_targets;
        kandev_notify::check_url(url, allow_private)
            .map_err(|refused| EngineError::Validation(format!("url: {refused}")))
    }

    /// The content of a stored attachment (`GET /api/v1/attachment/<id>`).
    pub async fn attachment(&self, id: &str) -> Result<Vec<u8>> {
        attachments::read(&self.inner.config.home, id).await
    }

    /// Starts an upload (`attachment.upload`): checks its name and type and waits, at most
    /// the configured while, for an upload slot (`BUSY` past it). Its bytes are written to
    /// disk as they come; [`Upload::finish`] stores the file once by its content hash.
    pub async fn begin_upload(&self, name: &str, mime: &str) -> Result<Upload> {
        attachments::begin(&self.inner.uploads, name, mime).await
    }

    /// Removes old uploads no stored message or queued prompt names, every
    /// `attachments.sweep_every`, until `stop` (the server runs it as one of its tasks).
    pub fn sweep_attachments(
        &self,
        stop: tokio_util::sync::CancellationToken,
    ) -> impl Future<Output = ()> + Send + 'static {
        attachments::sweep_until(self.inner.uploads.clone(), self.inner.store.clone(), stop)
    }

    /// Restarts the agent on the saved conversation (`fresh: false`, `session/load`) or on a
    /// new one (`fresh: true`); also the way out of `FAILED` and `CANCELLED`.
    pub async fn resume(&self, id: &SessionId, fresh: bool) -> Result<()> {
        self.ask(id, |reply| Command::Resume { fresh, reply }).await
    }

    /// `session.authenticate`: on a live agent, ACP `authenticate` with `method_id` over the
    /// open connection (no restart; the login hint is cleared); otherwise the agent restarts,
    /// runs `authenticate` right after `initialize`, then reloads the conversation (or opens
    /// a new one). A refusal at a restart ends the start with `agent_auth_required` again.
    pub async fn authenticate(&self, id: &SessionId, method_id: String) -> Result<()> {
        self.ask(id, |reply| Command::Authenticate { method_id, reply }).await
    }

    /// `turn.revert`: the session's worktrees back to before `turn_id`, undoing it and every
    /// later turn (issue 48; `dry_run` only says what it would do). Refused while a turn
    /// runs; edits made since the agent's last turn by someone else are refused by name
    /// unless `force`.
    pub async fn revert_turn(
        &self,
        id: &SessionId,
        turn_id: TurnId,
        discard: Discard,
        dry_run: bool,
    ) -> Result<RevertOutcome> {
        self.ask(id, |reply| Command::Revert { turn_id, discard, dry_run, reply }).await
    }

    /// `turn.checkpoint.list`: the session's turns that have a checkpoint, oldest first.
    pub async fn checkpointed_turns(&self, id: &SessionId) -> Result<Vec<CheckpointedTurn>> {
        self.inner.store.get_session(id).await.map_err(crate::error::not_found)?;
        crate::checkpoints::checkpointed_turns(&self.inner, id).await
    }

    /// `turn.diff`: what one turn changed, from its checkpoint before to the one after.
    pub async fn turn_changes(
        &self,
        id: &SessionId,
        turn_id: &TurnId,
    ) -> Result<Vec<(Option<RepositoryId>, Vec<FileChange>)>> {
        self.inner.store.get_session(id).await.map_err(crate::error::not_found)?;
        crate::checkpoints::turn_changes(&self.inner, id, turn_id).await
    }

    /// `session.reset_context`: a fresh conversation for the agent (rules 20-27).
    pub async fn reset_context(&self, id: &SessionId) -> Result<()> {
        self.ask(id, |reply| Command::Reset { reply }).await
    }

    /// An agent's `complete_step`: [`Engine::move_task`] decided from the step `from` the
    /// agent read, made only if the task is still there when it is written (`None`: it moved
    /// meanwhile, docs/workflows.md, "a trigger moves only from its own step"). Only once the
    /// move is committed does `note` go into the session's transcript (through its actor,
    /// after what the agent streamed, fenced by `epoch`), then the new step's entry runs:
    /// a move that did not happen leaves no note. A note that cannot be written is logged;
    /// the move stands and its step's entry runs all the same.
    pub async fn complete_step(
        &self,
        session_id: &SessionId,
        epoch: Option<i64>,
        task_id: &TaskId,
        from: &StepId,
        to: &StepId,
        note: (String, StatusNote),
    ) -> Result<Option<(Task, StepId)>> {
        let (cause, by) = (EntryCause::Manual, "agent");
        let moved = record_trigger_move(&self.inner, task_id, from, to, cause, by).await?;
        let Some(task) = moved else { return Ok(None) };
        let (text, note) = note;
        if let Err(err) = self.add_note(session_id, text, note, epoch).await {
            tracing::warn!(session = %session_id, error = %err, "cannot note a completed step");
        }
        if from == to {
            return Ok(Some((task, from.clone())));
        }
        self.enter_moved_step(task, from.clone(), to).await.map(Some)
    }

    /// The entry of the step a task moved to (from another), on its primary session: a task
    /// without one gets one only when the step auto-starts and no blocker holds it.
    pub(crate) async fn enter_moved_step(
        &self,
        task: Task,
        from: StepId,
        to: &StepId,
    ) -> Result<(Task, StepId)> {
        let task_id = &task.id.clone();
        let workflow = self.inner.store.get_workflow(&task.workflow_id).await?;
        let Some(step) = workflow.step(to).cloned() else { return Ok((task, from)) };
        let auto_start = step.starts_work();
        if task.primary_session_id.is_none() && !auto_start {
            return Ok((task, from));
        }
        // A blocked task's auto-start waits for its blockers (runs once they are done).
        if task.primary_session_id.is_none() && hold_if_blocked(&self.inner, task_id).await? {
            return Ok((task, from));
        }
        let session = primary_session_for(&self.inner, &task, &step).await?;
        let (from_step, to_step) = (Some(from.clone()), to.clone());
        self.ask(&session, |reply| Command::StepEntered {
            from: from_step,
            to: to_step,
            cause: EntryCause::Manual,
            start_agent: false,
            reply,
        })
        .await?;
        Ok((self.inner.store.get_task(task_id).await?, from))
    }

    /// Where agents reach Kandev's MCP server (`http://127.0.0.1:<port>/mcp`): set by the
    /// server once it listens. Agents started from then on get a session token for it;
    /// `None` (the server runs without MCP) gives them none.
    pub fn set_mcp_url(&self, url: Option<String>) {
        self.inner.mcp.set_url(url);
    }

    /// The listener that serves `/mcp` alone, where task containers' MCP relays lead: an
    /// agent in a container reaches the MCP tools, never the rest of the API.
    pub fn set_mcp_relay_target(&self, target: Option<std::net::SocketAddr>) {
        self.inner.mcp.set_relay_target(target);
    }

    /// The session a session token (`kst_…`) belongs to, while it is the session's current
    /// execution: the refusal says why not (unknown, an older epoch, a deleted session).
    pub async fn mcp_session(
        &self,
        token: &str,
    ) -> Result<std::result::Result<McpSession, McpRefusal>> {
        let granted = match self.inner.mcp.grant(token) {
            Some(grant) => Some(grant),
            // Minted by an earlier server for an agent re-adopted since (issue 20).
            None => {
                let stored = self.inner.store.mcp_grant(&crate::mcp::stored_hash(token)).await?;
                if let Some((session_id, epoch)) = &stored {
                    self.inner.mcp.remember(token, session_id, *epoch);
                }
                stored
            }
        };
        let Some((session_id, epoch)) = granted else {
            return Ok(Err(McpRefusal::Unknown));
        };
        let session = match self.inner.store.get_session(&session_id).await {
            Ok(session) => session,
            Err(kandev_store::StoreError::NotFound { .. }) => {
                self.inner.mcp.forget(&session_id);
                return Ok(Err(McpRefusal::SessionGone { session_id }));
            }
            Err(err) => return Err(err.into()),
        };
        if session.epoch != epoch {
            return Ok(Err(McpRefusal::StaleEpoch {
                session_id,
                token_epoch: epoch,
                current_epoch: session.epoch,
            }));
        }
        Ok(Ok(McpSession { session_id, task_id: session.task_id, epoch }))
    }

    /// Adds a status message to the session's transcript (MCP `add_note`); with `epoch`, only
    /// while the session is still at that epoch.
    pub async fn add_note(
        &self,
        id: &SessionId,
        text: String,
        note: StatusNote,
        epoch: Option<i64>,
    ) -> Result<()> {
        self.ask(id, |reply| Command::Note { text, note, epoch, reply }).await
    }

    /// Asks the user a question for a session (MCP `ask_user`): stored and announced after
    /// what the agent streamed before it; the receiver gets the question once it is answered,
    /// cancelled, timed out or expired.
    pub async fn ask_user(
        &self,
        session_id: &SessionId,
        text: &str,
        options: &[String],
        timeout: std::time::Duration,
    ) -> Result<(Question, tokio::sync::oneshot::Receiver<Question>)> {
        let timeout_ms = i64::try_from(timeout.as_millis()).unwrap_or(i64::MAX);
        let (text, options) = (text.to_owned(), options.to_vec());
        // Through the session's actor: it stores the question after the text the agent
        // streamed before asking (its pending and submitted writes settle first).
        self.ask(session_id, |reply| Command::AskUser { text, options, timeout_ms, reply }).await
    }

    /// Resolves a question once (`AlreadyResolved` the second time) and wakes whoever waits;
    /// `by` is who answered it.
    pub async fn resolve_question(
        &self,
        id: &str,
        status: QuestionStatus,
        answer: Option<&str>,
        by: Option<&str>,
    ) -> Result<Question> {
        let (store, waiters) = (&self.inner.store, &self.inner.questions);
        question::resolve(store, waiters, id, status, answer, by).await
    }

    /// Cancels a question in the background (its waiter went away: the agent's call broke
    /// off); a question resolved meanwhile stays as it is.
    pub fn drop_question(&self, id: String) {
        let inner = self.inner.clone();
        self.inner.tracker.spawn(async move {
            let (store, waiters) = (&inner.store, &inner.questions);
            let _ =
                question::resolve(store, waiters, &id, QuestionStatus::Cancelled, None, None).await;
        });
    }

    /// Cancels the session's pending questions (turn cancel, stop, delete).
    async fn cancel_questions(&self, id: &SessionId) -> Result<()> {
        let (store, waiters) = (&self.inner.store, &self.inner.questions);
        question::resolve_pending(store, waiters, Some(id), QuestionStatus::Cancelled).await?;
        Ok(())
    }

    /// Cancels the running turn (rule 12) and the questions its agent waits on; succeeds
    /// when nothing runs.
    pub async fn cancel(&self, id: &SessionId) -> Result<()> {
        self.cancel_questions(id).await?;
        self.ask(id, |reply| Command::Cancel { reply }).await
    }

    /// Ends the agent process, leaving the session resumable (rule 16).
    pub async fn stop(&self, id: &SessionId) -> Result<()> {
        self.cancel_questions(id).await?;
        self.ask(id, |reply| Command::Stop { reply }).await
    }

    /// `session.rebind` (issue 52): moves the session to another agent profile, which starts
    /// with a handoff prompt written from the transcript; answers the session as it is then.
    pub async fn rebind(
        &self,
        id: &SessionId,
        profile_id: &kandev_domain::AgentProfileId,
    ) -> Result<kandev_domain::transcript::Session> {
        let profile = self.inner.store.get_profile(profile_id).await.map_err(|e| match e {
            kandev_store::StoreError::NotFound { .. } => EngineError::Validation(format!(
                "there is no agent profile {profile_id}: choose one of the profiles"
            )),
            other => other.into(),
        })?;
        let profile = Box::new(profile);
        self.ask(id, |reply| Command::Rebind { profile, reply }).await?;
        Ok(self.inner.store.get_session(id).await?)
    }

    /// Stops any execution and deletes the session and its transcript (rule 35).
    pub async fn delete(&self, id: &SessionId) -> Result<()> {
        self.cancel_questions(id).await?;
        let checkpoints = crate::checkpoints::session_paths(&self.inner, id).await;
        let result = self.ask(id, |reply| Command::Delete { reply }).await;
        if result.is_ok() {
            crate::checkpoints::forget_session(id, &checkpoints).await;
        }
        lock(&self.inner.sessions).remove(id);
        // Its MCP tokens stay known until used once more, so the refusal can say why.
        result
    }

    /// Answers a permission request; `by` (who answers) is kept in the request's message.
    pub async fn respond_permission(
        &self,
        id: &SessionId,
        request_id: String,
        answer: PermissionAnswer,
        by: &str,
    ) -> Result<Message> {
        let by = by.to_owned();
        self.ask(id, |reply| Command::Permission { request_id, answer, by, reply }).await
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
        mut change: QueueChange,
    ) -> Result<Vec<QueuedPrompt>> {
        if let QueueChange::Add { attachments: list, .. } = &mut change {
            *list = attachments::check(&self.inner.uploads, std::mem::take(list)).await?;
        }
        self.ask(id, |reply| Command::Queue { change, reply }).await
    }

    /// Stops every agent and every actor (server shutdown). No agent process remains.
    pub async fn shutdown(&self) {
        let inboxes: Vec<_> = {
            let mut sessions = lock(&self.inner.sessions);
            // From here on no actor starts (a ship action or a forge poll finishing late).
            self.inner.stopping.store(true, std::sync::atomic::Ordering::Release);
            sessions.drain().map(|(_, tx)| tx).collect()
        };
        // All at once: an agent whose runner is unreachable holds its session for the stop's
        // bound, and one after another those bounds would add up.
        let stopping = inboxes.into_iter().map(|inbox| async move {
            let (reply, done) = oneshot::channel();
            if inbox.send(Command::Shutdown { reply }).await.is_ok() {
                let _ = done.await;
            }
        });
        futures::future::join_all(stopping).await;
        self.stop_dev_servers_of(None).await;
        self.close_terminals_of(None).await;
        self.inner.tracker.close();
        self.inner.tracker.wait().await;
        // Last: the links carry the acknowledgements of the agents just stopped. Closed and
        // awaited (each within 5 s), not dropped: a dropped link closes in a task of its own
        // that the runtime's end would cut short, killing `ssh` with those still on their
        // way (the remote runner then kept the executions for its whole grace).
        let links = self.inner.links.take_all();
        let closing = futures::future::join_all(links.iter().map(|link| link.finish()));
        if tokio::time::timeout(LINKS_CLOSE_BOUND, closing).await.is_err() {
            tracing::warn!("closing the ssh links took too long; ending without them");
        }
    }

    /// Startup reconciliation (rule 42): sessions that were starting or running become
    /// `WAITING_FOR_INPUT` with an "interrupted" note, open turns are closed, agent process
    /// groups recorded as ours are killed. No agent is launched. A session whose agent an SSH
    /// executor's runner kept takes it over (as with [`Self::reconcile_with_runner`]).
    pub async fn reconcile(&self) -> Result<usize> {
        self.reconcile_kept(vec![]).await
    }

    /// [`Self::reconcile`] with the executions a runner kept across the restart (`serve
    /// --runner local`), rule 42's re-adopt branch: a session whose execution the runner
    /// still runs keeps it (and its open turn, and `RUNNING`), with no "interrupted" note;
    /// its actor joins the conversation and gets the output the last run had not committed,
    /// once. Every other execution the runner lists is killed. The runners of SSH executors
    /// are asked the same way. Returns how many sessions reconciliation changed.
    pub async fn reconcile_with_runner(
        &self,
        client: &kandev_runtime::runner::RunnerClient,
        executions: Vec<kandev_runtime::runner::ExecutionInfo>,
    ) -> Result<usize> {
        let kept = crate::reconcile::Kept {
            client: client.clone(),
            executions,
            here: true,
            container: None,
        };
        self.reconcile_kept(vec![kept]).await
    }

    async fn reconcile_kept(&self, kept: Vec<crate::reconcile::Kept>) -> Result<usize> {
        // The key is checked (and older plain-text values moved in) before a session starts.
        self.open_secrets().await?;
        let (fixed, adoptions) = reconcile(&self.inner, kept).await?;
        // Terminal UIs the runner kept: their actors read their screens again.
        for id in self.inner.tui.sessions() {
            if let Err(err) = crate::handle::inbox(&self.inner, &id).await {
                tracing::error!(session = %id, error = %err, "cannot take over a terminal UI");
            }
        }
        for adoption in adoptions {
            let id = adoption.session_id.clone();
            let adoption = Box::new(adoption);
            match ask(&self.inner, &id, |reply| Command::Adopt { adoption, reply }).await {
                Ok(()) => tracing::info!(session = %id, "re-adopted the agent of the last run"),
                Err(err) => {
                    tracing::error!(session = %id, error = %err, "cannot re-adopt an agent")
                }
            }
        }
        Ok(fixed)
    }
}
