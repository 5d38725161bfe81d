//! The actor of a terminal-UI session: the one owner of the session, as the ACP actor is of
//! an ACP session. It takes the same [`Command`]s from the same inbox (`handle::inbox` starts
//! this one for a session with `terminal_ui`), so a person's prompt, a workflow step's prompt
//! and review comments reach it the way they reach any session; what a terminal UI cannot do
//! (modes, permission answers, the queue, …) is refused, saying to do it in its terminal.
//!
//! State (docs/terminal-ui.md): a start moves the session to `STARTING` (a new epoch, and its
//! MCP token); the screen then decides — working or asking a permission is `RUNNING`, an input
//! box waiting (or a screen its rules do not know) is `WAITING_FOR_INPUT`; the program's exit
//! is `COMPLETED` (code 0) or `FAILED`, a stop `CANCELLED`. Prompts are typed one at a time,
//! each when the input box waits and the agent worked since the one before.

use std::collections::VecDeque;
use std::sync::Arc;

use kandev_domain::agent::AgentKind;
use kandev_domain::message_meta::{MessageMeta, StatusNote, UserMeta};
use kandev_domain::session::SessionState;
use kandev_domain::task::Task;
use kandev_domain::transcript::{LastError, Session, TuiScreen};
use kandev_domain::workflow::{Action, EntryCause, Trigger, first_move};
use kandev_runtime::terminal::TerminalExit;
use kandev_runtime::tui_screen::TuiAgent;
use kandev_store::{NewMessage, SessionUpdate};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::api::PromptOutcome;
use crate::command::Command;
use crate::error::{EngineError, Result};
use crate::inner::Inner;
use crate::publish;
use crate::shells::TuiTerminal;
use crate::sites::Placement;
use crate::tui::event::Event;
use crate::tui::{launch, watch};
use crate::workflow::record_trigger_move;
use crate::write::{add_message, write_session};

/// How long after typing a prompt the next may go though the agent was not seen working.
const TYPED_GRACE: std::time::Duration = std::time::Duration::from_secs(3);

/// The terminal UI that runs, for the epoch it was started at.
struct Run {
    epoch: i64,
    terminal: Arc<TuiTerminal>,
    /// Ends its screen reader.
    reader: CancellationToken,
}

impl Drop for Run {
    fn drop(&mut self) {
        self.reader.cancel();
    }
}

struct TuiActor {
    inner: Arc<Inner>,
    session: Session,
    task: Task,
    kind: AgentKind,
    rules: Option<TuiAgent>,
    run: Option<Run>,
    /// A start in flight (preparing the worktree, spawning), cancelled by a stop.
    starting: Option<CancellationToken>,
    /// Prompts waiting for the input box, oldest first.
    typing: VecDeque<String>,
    /// A prompt was typed and the agent has not been seen working since.
    typed: bool,
    /// How many prompts were typed (tags the [`Event::Typed`] of the latest).
    typed_count: u64,
    report: mpsc::Sender<Event>,
}

/// Starts the actor of a terminal-UI session on its inbox; a terminal UI the last run left
/// on the runner (taken over at startup) is its running one.
pub(crate) fn start(
    inner: Arc<Inner>,
    session: Session,
    task: Task,
    inbox: mpsc::Receiver<Command>,
) {
    let kind = session.terminal_ui.unwrap_or(AgentKind::Mock);
    let (report, events) = mpsc::channel(64);
    let mut actor = TuiActor {
        inner: inner.clone(),
        rules: watch::rules_of(kind),
        kind,
        session,
        task,
        run: None,
        starting: None,
        typing: VecDeque::new(),
        typed: false,
        typed_count: 0,
        report,
    };
    if let Some(terminal) = inner.tui.get(&actor.session.id) {
        actor.watch(actor.session.epoch, terminal);
    }
    inner.tracker.spawn(actor.serve(inbox, events));
}

impl TuiActor {
    async fn serve(
        mut self,
        mut inbox: mpsc::Receiver<Command>,
        mut events: mpsc::Receiver<Event>,
    ) {
        loop {
            tokio::select! {
                command = inbox.recv() => {
                    let Some(command) = command else { break };
                    match command {
                        Command::Delete { reply } => {
                            let result = self.delete().await;
                            let done = result.is_ok();
                            let _ = reply.send(result);
                            if done {
                                return;
                            }
                        }
                        Command::Shutdown { reply } => {
                            self.shut_down().await;
                            let _ = reply.send(());
                            return;
                        }
                        other => self.handle(other).await,
                    }
                }
                Some(event) = events.recv() => {
                    if let Err(err) = self.on_event(event).await {
                        tracing::error!(session = %self.session.id, error = %err, "a terminal-UI session's change was not written");
                    }
                }
            }
        }
    }

    async fn handle(&mut self, command: Command) {
        match command {
            Command::Start { reply } | Command::Resume { reply, .. } => {
                let _ = reply.send(self.ensure_started().await);
            }
            Command::Prompt { request, queued_by, reply } => {
                let _ = reply.send(self.admit(request, queued_by).await);
            }
            Command::Cancel { reply } => {
                // Escape: what interrupts the agents' terminal UIs.
                let _ = reply.send(self.type_bytes(b"\x1b".to_vec()).await);
            }
            Command::Stop { reply } => {
                let _ = reply.send(self.stop().await);
            }
            Command::StepEntered { to, cause, start_agent, reply, .. } => {
                let _ = reply.send(self.step_entered(to, cause, start_agent).await);
            }
            Command::Note { text, note, epoch, reply } => {
                let _ = reply.send(self.note(&text, note, epoch).await);
            }
            Command::AskUser { text, options, timeout_ms, reply } => {
                let (store, waiters) = (&self.inner.store, &self.inner.questions);
                let (id, task) = (&self.session.id, &self.session.task_id);
                let asked =
                    crate::question::ask(store, waiters, id, task, &text, &options, timeout_ms);
                let _ = reply.send(asked.await);
            }
            Command::Permission { reply, .. } => {
                let _ = reply.send(Err(in_terminal("answer its questions")));
            }
            Command::SetMode { reply, .. } | Command::SetConfig { reply, .. } => {
                let _ = reply.send(Err(in_terminal("change its mode and settings")));
            }
            Command::Queue { reply, .. } => {
                let _ = reply.send(Err(EngineError::Conflict(
                    "a terminal-UI session has no queue: its prompts are typed in as they come"
                        .into(),
                )));
            }
            Command::Reset { reply } => {
                let _ = reply.send(Err(in_terminal("clear its context (its own command for it)")));
            }
            Command::Revert { reply, .. } => {
                let _ = reply.send(Err(in_terminal("undo its work")));
            }
            Command::Rebind { reply, .. } => {
                let _ = reply.send(Err(EngineError::Conflict(
                    "a terminal-UI session keeps its agent; start a new session with another one"
                        .into(),
                )));
            }
            Command::Authenticate { reply, .. } => {
                let _ = reply.send(Err(in_terminal("log in")));
            }
            Command::SetAttempt { reply, .. } => {
                let _ = reply.send(Err(EngineError::Conflict(
                    "a terminal-UI session cannot be an attempt".into(),
                )));
            }
            // Reports of an ACP agent: a terminal-UI session has none.
            _ => {}
        }
    }

    async fn on_event(&mut self, event: Event) -> Result<()> {
        match event {
            Event::Started { epoch, result } => {
                if epoch != self.session.epoch || self.starting.take().is_none() {
                    // Stopped meanwhile: what started goes (the runner keeps a dropped one).
                    if let Ok(terminal) = result {
                        terminal.shell.kill().await;
                        launch::forget(&self.inner, &self.session, &terminal).await;
                    }
                    return Ok(());
                }
                match result {
                    Ok(terminal) => {
                        let terminal = Arc::new(terminal);
                        self.inner.tui.insert(self.session.id.clone(), terminal.clone());
                        self.watch(epoch, terminal);
                        if self.rules.is_none() {
                            self.show(TuiScreen::Unknown).await?;
                        }
                        Ok(())
                    }
                    Err(error) => {
                        let update = SessionUpdate {
                            state: Some(SessionState::Failed),
                            last_error: Some(Some(error)),
                            ..SessionUpdate::default()
                        };
                        self.write(update).await
                    }
                }
            }
            Event::Screen { epoch, screen } if self.is_current(epoch) => self.show(screen).await,
            Event::Typed { epoch, number } if self.is_current(epoch) => {
                if self.typed && number == self.typed_count {
                    self.typed = false;
                    if self.input_waits() {
                        self.type_next().await?;
                    }
                }
                Ok(())
            }
            Event::Exited { epoch, exit } if self.is_current(epoch) => self.exited(exit).await,
            Event::Screen { .. } | Event::Exited { .. } | Event::Typed { .. } => Ok(()),
        }
    }

    fn is_current(&self, epoch: i64) -> bool {
        self.run.as_ref().is_some_and(|run| run.epoch == epoch)
    }

    /// Reads `terminal`'s screen for the run of `epoch`.
    fn watch(&mut self, epoch: i64, terminal: Arc<TuiTerminal>) {
        let reader = CancellationToken::new();
        let read = watch::read_screen(self.rules, terminal.clone(), epoch, self.report.clone());
        let ended = reader.clone();
        self.inner.tracker.spawn(async move {
            tokio::select! {
                () = ended.cancelled() => {}
                () = read => {}
            }
        });
        self.run = Some(Run { epoch, terminal, reader });
    }

    /// The screen shows `screen`: the session's state follows, and a waiting prompt is typed
    /// when the input box waits.
    async fn show(&mut self, screen: TuiScreen) -> Result<()> {
        let state = match screen {
            TuiScreen::Working | TuiScreen::Permission => SessionState::Running,
            TuiScreen::Waiting | TuiScreen::Unknown => SessionState::WaitingForInput,
        };
        if state == SessionState::Running {
            self.typed = false;
        }
        let turn_ended =
            self.session.state == SessionState::Running && screen == TuiScreen::Waiting;
        if self.session.tui_screen != Some(screen) || self.session.state != state {
            let update = SessionUpdate {
                state: Some(state),
                tui_screen: Some(Some(screen)),
                // An error of an earlier run is over once the program draws.
                last_error: self.session.last_error.is_some().then_some(None),
                ..SessionUpdate::default()
            };
            self.write(update).await?;
        }
        if turn_ended {
            self.turn_complete().await?;
        }
        if self.input_waits() && !self.typed {
            self.type_next().await?;
        }
        Ok(())
    }

    /// Whether its input box waits for a prompt, as far as Kandev can tell: its screen says
    /// so, or there are no rules to read it by (then prompts are typed as they come).
    fn input_waits(&self) -> bool {
        self.session.tui_screen == Some(TuiScreen::Waiting) || self.rules.is_none()
    }

    /// The agent finished working (its input box waits again): the move of the step's
    /// `on_turn_complete`, as for an ACP session's turn, when this is the task's primary
    /// session. The step's other actions (ship actions) do not run for a terminal UI.
    async fn turn_complete(&mut self) -> Result<()> {
        self.follow_move(Trigger::OnTurnComplete, EntryCause::TurnComplete, "agent").await
    }

    /// A person's prompt starts a turn: the step's `on_turn_start` move (primary session).
    async fn turn_started(&mut self) -> Result<()> {
        self.follow_move(Trigger::OnTurnStart, EntryCause::TurnStart, "user").await
    }

    /// The first move of the task's step for `trigger`, then the entered step's actions.
    async fn follow_move(&mut self, trigger: Trigger, cause: EntryCause, by: &str) -> Result<()> {
        let task = self.inner.store.get_task(&self.task.id).await?;
        if task.primary_session_id.as_ref() != Some(&self.session.id) {
            return Ok(());
        }
        let workflow = self.inner.store.get_workflow(&task.workflow_id).await?;
        let Some(step) = workflow.step(&task.step_id).cloned() else { return Ok(()) };
        let Some(target) = first_move(&workflow, &step, trigger) else { return Ok(()) };
        let target = target.id.clone();
        let moved =
            record_trigger_move(&self.inner, &task.id, &step.id, &target, cause, by).await?;
        if moved.is_none() {
            return Ok(()); // moved meanwhile
        }
        self.step_entered(target, cause, false).await
    }

    /// Types the oldest waiting prompt, then Enter.
    async fn type_next(&mut self) -> Result<()> {
        let Some(text) = self.typing.pop_front() else { return Ok(()) };
        let bytes = typed_form(self.kind, &text);
        self.typed = true;
        self.typed_count += 1;
        self.type_bytes(bytes).await?;
        self.type_bytes(b"\r".to_vec()).await?;
        if let Some(run) = &self.run {
            let (report, epoch, number) = (self.report.clone(), run.epoch, self.typed_count);
            self.inner.tracker.spawn(async move {
                tokio::time::sleep(TYPED_GRACE).await;
                let _ = report.send(Event::Typed { epoch, number }).await;
            });
        }
        Ok(())
    }

    async fn type_bytes(&self, bytes: Vec<u8>) -> Result<()> {
        let Some(run) = &self.run else {
            return Err(EngineError::Conflict(
                "its terminal UI does not run; start it first".into(),
            ));
        };
        run.terminal.shell.write(bytes).await.map_err(|_| {
            EngineError::Conflict("its terminal UI has exited; start the session again".into())
        })
    }

    /// Starts the terminal UI unless it runs or starts.
    async fn ensure_started(&mut self) -> Result<()> {
        if self.run.is_some() || self.starting.is_some() {
            return Ok(());
        }
        self.refresh().await?;
        if let (None, Some(deleted)) =
            (&self.session.agent_profile_id, &self.session.deleted_profile)
        {
            return Err(EngineError::Validation(format!(
                "the agent profile {deleted} of this session was deleted: start a new session \
                 with another agent"
            )));
        }
        if matches!(self.session.state, SessionState::Running | SessionState::Starting) {
            // Left so by a run that is gone (its runner did not keep it).
            self.write(SessionUpdate {
                state: Some(SessionState::WaitingForInput),
                ..SessionUpdate::default()
            })
            .await?;
        }
        let first = self.session.state == SessionState::Created;
        let mut tx = self.inner.store.begin_write().await?;
        let epoch = tx.bump_epoch(&self.session.id, self.session.epoch).await?;
        self.session.epoch = epoch;
        let offer = self.inner.mcp.offer(&self.session.id, epoch, None);
        if let Some(offer) = &offer {
            tx.add_mcp_grant(&offer.stored_hash(), &self.session.id, epoch).await?;
        }
        let update = SessionUpdate {
            state: Some(SessionState::Starting),
            tui_screen: Some(None),
            last_error: Some(None),
            ..SessionUpdate::default()
        };
        self.session = write_session(&mut tx, &self.session, &update).await?;
        if !first {
            // Nothing starts blank silently: a new program knows nothing of the messages above.
            let text = "its terminal UI started again: it does not remember the messages above \
                        (unless the agent keeps its own history)";
            add_message(&mut tx, &self.session, None, text, StatusNote::Fresh).await?;
        }
        tx.commit().await?;
        let cancel = CancellationToken::new();
        self.starting = Some(cancel.clone());
        let (inner, session, kind, report) =
            (self.inner.clone(), self.session.clone(), self.kind, self.report.clone());
        self.inner.tracker.spawn(async move {
            let result = tokio::select! {
                () = cancel.cancelled() => return,
                result = start_program(&inner, &session, kind, offer, first, &cancel) => result,
            };
            let _ = report.send(Event::Started { epoch, result }).await;
        });
        Ok(())
    }

    /// Records a prompt in the transcript and types it once the input box waits (starting
    /// the terminal UI first when it does not run).
    /// A prompt from outside (a person, a retry, `review.submit`): refused with `Busy` when it
    /// must not wait (`queue: false`) and the agent works; a person's applies the step's
    /// `on_turn_start` move, as an ACP session's turn start does.
    async fn admit(
        &mut self,
        request: crate::api::PromptRequest,
        queued_by: &str,
    ) -> Result<PromptOutcome> {
        let busy = self.session.state == SessionState::Running || !self.typing.is_empty();
        if !request.queue && busy {
            return Err(EngineError::Busy(
                "the agent is working in its terminal UI; wait, or send the message to be typed \
                 in when it is done"
                    .into(),
            ));
        }
        let outcome = self.prompt(request.content, request.client_message_id, queued_by).await?;
        if queued_by == "user" && matches!(outcome, PromptOutcome::Sent(_)) {
            self.turn_started().await?;
        }
        Ok(outcome)
    }

    async fn prompt(
        &mut self,
        content: String,
        client_message_id: Option<String>,
        queued_by: &str,
    ) -> Result<PromptOutcome> {
        if content.trim().is_empty() {
            return Err(EngineError::Validation("the prompt is empty; type something".into()));
        }
        let mut tx = self.inner.store.begin_write().await?;
        if let Some(id) = &client_message_id
            && let Some(message) = tx.message_by_client_id(&self.session.id, id).await?
        {
            return Ok(PromptOutcome::Duplicate(message));
        }
        let new = NewMessage {
            session_id: self.session.id.clone(),
            turn_id: None,
            content: content.clone(),
            meta: MessageMeta::User(UserMeta { attachments: vec![] }),
            client_message_id,
        };
        let message = tx.insert_message(&new).await?;
        publish::message_added(&mut tx, &self.session.id, &message).await?;
        tx.commit().await?;
        tracing::debug!(session = %self.session.id, queued_by, "a prompt for a terminal UI");
        self.typing.push_back(content);
        match &self.run {
            None => self.ensure_started().await?,
            Some(_) => {
                if self.input_waits() && !self.typed {
                    self.type_next().await?;
                }
            }
        }
        Ok(PromptOutcome::Sent(message))
    }

    /// A workflow step was entered: its prompt is typed in when the step starts the agent
    /// (its context is not reset: the terminal UI keeps its own conversation).
    async fn step_entered(
        &mut self,
        to: kandev_domain::StepId,
        cause: EntryCause,
        start_agent: bool,
    ) -> Result<()> {
        let workflow = self.inner.store.workflow_of_step(&to).await?;
        self.task = self.inner.store.get_task(&self.task.id).await?;
        let Some(step) = workflow.step(&to).cloned() else { return Ok(()) };
        let starts = start_agent || step.events.on_enter.contains(&Action::AutoStartAgent);
        if !starts || cause == EntryCause::TurnStart {
            return Ok(());
        }
        let prompt = kandev_domain::workflow::step_prompt(&step, &self.task.prompt());
        let expanded =
            crate::saved_prompts::expand_saved_prompts(&self.inner.store, &self.task, prompt)
                .await?;
        self.prompt(expanded.text, None, "workflow").await.map(|_| ())
    }

    async fn note(&mut self, text: &str, note: StatusNote, epoch: Option<i64>) -> Result<()> {
        self.refresh().await?;
        if epoch.is_some_and(|e| e != self.session.epoch) {
            return Err(EngineError::Conflict(
                "the session moved on to a newer execution; this note was not added".into(),
            ));
        }
        let mut tx = self.inner.store.begin_write().await?;
        add_message(&mut tx, &self.session, None, text, note).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Ends the terminal UI (or its start): `CANCELLED`.
    async fn stop(&mut self) -> Result<()> {
        let was_running = self.end_run().await;
        self.drop_untyped().await?;
        if was_running && self.session.state.can_become(SessionState::Cancelled) {
            self.write(SessionUpdate {
                state: Some(SessionState::Cancelled),
                tui_screen: Some(None),
                ..SessionUpdate::default()
            })
            .await?;
        }
        Ok(())
    }

    /// Prompts that were waiting to be typed when the program ended: the transcript says
    /// they never reached it.
    async fn drop_untyped(&mut self) -> Result<()> {
        let untyped = std::mem::take(&mut self.typing).len();
        if untyped == 0 {
            return Ok(());
        }
        let text = format!(
            "{untyped} message(s) above were not typed in: the terminal UI ended first; send \
             them again"
        );
        let mut tx = self.inner.store.begin_write().await?;
        add_message(&mut tx, &self.session, None, &text, StatusNote::Stopped).await?;
        tx.commit().await?;
        Ok(())
    }

    /// The server stops gracefully: the terminal UI ends with it, as ACP agents and user
    /// terminals do (only a crash leaves it to the runner, for the next start to take over).
    async fn shut_down(&mut self) {
        self.end_run().await;
    }

    /// Kills the running terminal UI (or cancels its start); whether there was one.
    async fn end_run(&mut self) -> bool {
        let starting = self.starting.take().inspect(CancellationToken::cancel).is_some();
        let Some(run) = self.run.take() else { return starting };
        self.inner.tui.remove(&self.session.id);
        run.terminal.shell.kill().await;
        launch::forget(&self.inner, &self.session, &run.terminal).await;
        true
    }

    /// The program exited by itself.
    async fn exited(&mut self, exit: TerminalExit) -> Result<()> {
        if let Some(run) = self.run.take() {
            self.inner.tui.remove(&self.session.id);
            launch::forget(&self.inner, &self.session, &run.terminal).await;
        }
        self.drop_untyped().await?;
        let clean = exit.exit_code == Some(0);
        let completed = clean && self.session.state.can_become(SessionState::Completed);
        let update = if completed {
            SessionUpdate {
                state: Some(SessionState::Completed),
                tui_screen: Some(None),
                ..SessionUpdate::default()
            }
        } else {
            let how = match (exit.exit_code, &exit.signal) {
                (Some(code), _) => format!("with code {code}"),
                (None, Some(signal)) => format!("on signal {signal}"),
                (None, None) => "".to_owned(),
            };
            let error = LastError {
                code: "agent_exited".to_owned(),
                message: format!("its terminal UI exited {how}; start the session again to go on")
                    .replace("  ", " "),
                details: None,
                at: self.inner.store.now(),
            };
            SessionUpdate {
                state: Some(SessionState::Failed),
                tui_screen: Some(None),
                last_error: Some(Some(error)),
                ..SessionUpdate::default()
            }
        };
        self.write(update).await
    }

    async fn delete(&mut self) -> Result<()> {
        self.end_run().await;
        let mut tx = self.inner.store.begin_write().await?;
        crate::write::delete_session(&mut tx, &self.session.id, &self.task).await?;
        tx.commit().await?;
        self.inner.mcp.forget(&self.session.id);
        launch::remove_files(&self.inner, &self.session);
        Ok(())
    }

    /// Writes `update` and keeps the task's card in step (a permission question needs its
    /// developer).
    async fn write(&mut self, update: SessionUpdate) -> Result<()> {
        let mut tx = self.inner.store.begin_write().await?;
        self.session = write_session(&mut tx, &self.session, &update).await?;
        publish::sync_task(&mut tx, &self.session).await?;
        tx.commit().await?;
        Ok(())
    }

    /// The session as stored (its profile may have been deleted beside the actor).
    async fn refresh(&mut self) -> Result<()> {
        self.session = self.inner.store.get_session(&self.session.id).await?;
        Ok(())
    }
}

/// Prepares the working directory and starts the program there.
async fn start_program(
    inner: &Inner,
    session: &Session,
    kind: AgentKind,
    offer: Option<crate::mcp::McpOffer>,
    first: bool,
    cancel: &CancellationToken,
) -> std::result::Result<TuiTerminal, LastError> {
    let failed = |code: &str, message: String| LastError {
        code: code.to_owned(),
        message,
        details: None,
        at: inner.store.now(),
    };
    let placement = crate::workdir::prepare::prepare_for_start(inner, session, first, cancel)
        .await
        .map_err(|failure| failed(failure.code, failure.message))?;
    if !matches!(placement, Placement::Local) {
        return Err(failed(
            "agent_start_failed",
            "terminal-UI sessions run on this machine only; start an ACP session for a task on \
             another executor"
                .to_owned(),
        ));
    }
    let start = async {
        let command = launch::command(inner, session, kind, offer.as_ref()).await?;
        launch::spawn(inner, session, session.epoch, &session.cwd, command).await
    };
    start.await.map_err(|err| failed("agent_start_failed", err.to_string()))
}

/// A prompt as typed into `kind`'s terminal UI: a bracketed paste (its lines stay one
/// prompt), or for `kandev fake-tui`, which reads a line at a time, one line.
fn typed_form(kind: AgentKind, text: &str) -> Vec<u8> {
    match kind {
        AgentKind::Mock => text
            .split(['\r', '\n'])
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join(" ")
            .into_bytes(),
        _ => format!("\x1b[200~{}\x1b[201~", text.replace("\x1b[201~", "")).into_bytes(),
    }
}

/// Refuses what a terminal UI does in its terminal.
fn in_terminal(what: &str) -> EngineError {
    EngineError::Conflict(format!(
        "this session runs its agent's own terminal UI: {what} in its terminal"
    ))
}
