//! Startup reconciliation (docs/lifecycle.md rules 41, 42, 45), before any actor runs: agents left
//! by the last run are killed (or taken over, with the terminals the local runner kept), sessions that were starting or running wait for input with
//! an "interrupted" note, open turns are closed, pending permission requests expire, and
//! context resets that were accepted and never settled are finished without any agent. No
//! agent is started. Every session change goes through [`write_session`].

use std::sync::Arc;

use kandev_domain::SessionId;
use kandev_domain::message_meta::{ErrorMeta, MessageMeta, StatusNote};
use kandev_domain::question::QuestionStatus;
use kandev_domain::session::SessionState;
use kandev_domain::transcript::{LastError, Session};
use kandev_domain::workflow::{Action, EntryCause, step_prompt};
use kandev_runtime::runner::{AckPolicy, ExecutionInfo, RunnerClient};
use kandev_store::{OpenTurn, ResetIntent, RunnerPosition, SessionUpdate};
use serde_json::json;

use crate::error::Result;
use crate::inner::Inner;
use crate::notes::divider;
use crate::position::Adoption;
use crate::publish;
use crate::question;
use crate::saved_prompts::expand_saved_prompts;
use crate::write::{add_message, write_session};

/// The note of a session whose agent's work a restart cut off.
pub(crate) const INTERRUPTED: &str =
    "interrupted: the server stopped while the agent was working; send a message to continue";

/// The executions a runner kept across the restart: the local runner's (`serve --runner
/// local`) or an SSH executor's (`here: false`).
pub(crate) struct Kept {
    pub client: RunnerClient,
    pub executions: Vec<ExecutionInfo>,
    pub here: bool,
    /// The task whose container this runner runs in (its dev servers are taken over).
    pub container: Option<kandev_domain::TaskId>,
}

/// Whether the session can take its runner execution over: the runner still runs the
/// session's last execution (the runtime row's epoch, which a completed live context reset
/// leaves behind the session's), whose conversation is the session's current one (a live
/// reset keeps the execution and records the new conversation; a lazy one forgets it), a
/// turn that was open has the id of its prompt, no context reset was in the middle, and
/// the runner was acknowledged no further than the recorded position.
/// Anything else reconciles as after any restart (the execution is killed).
async fn adoptable<'k>(
    inner: &Inner,
    session: &Session,
    kept: &'k [Kept],
    resetting: &[SessionId],
) -> Result<Option<(RunnerPosition, &'k Kept, ExecutionInfo, Option<OpenTurn>)>> {
    let Some(position) = inner.store.runner_position(&session.id).await? else { return Ok(None) };
    let found = kept.iter().find_map(|kept| {
        let info = kept.executions.iter().find(|e| e.exec == position.exec && !e.exited)?;
        Some((kept, info))
    });
    let Some((kept, info)) = found else { return Ok(None) };
    if info.acked > position.committed {
        // The runner was told of more than is recorded: output after the position may be
        // stored already, and would be stored twice.
        tracing::warn!(session = %session.id, acked = info.acked, committed = position.committed, "the runner position is behind its acknowledgement; not re-adopting");
        return Ok(None);
    }
    let open = position.epoch <= session.epoch
        && session.acp_session_id.is_some()
        && !resetting.contains(&session.id);
    let turn = inner.store.open_turn(&session.id).await?;
    let turn = match (session.state, turn) {
        (SessionState::Running, Some(turn)) if turn.prompt_id.is_some() => Some(turn),
        (SessionState::WaitingForInput, None) => None,
        _ => return Ok(None),
    };
    Ok(open.then(|| (position, kept, info.clone(), turn)))
}

/// Reconciles every session; returns how many it changed, and the executions of the
/// runner `kept` that sessions take over (every other one it lists is killed).
pub(crate) async fn reconcile(inner: &Inner, kept: Vec<Kept>) -> Result<(usize, Vec<Adoption>)> {
    let mut fixed = 0;
    let mut adoptions = vec![];
    let mut kept = kept;
    for (client, executions) in crate::sites::kept_at_startup(inner).await? {
        kept.push(Kept { client, executions, here: false, container: None });
    }
    for (task, client, executions) in crate::containers::kept_at_startup(inner).await? {
        kept.push(Kept { client, executions, here: false, container: Some(task) });
    }
    crate::containers::remove_orphans(inner).await?;
    // Terminals and dev servers a server stopped by `kill -9` left running.
    reap_children(inner).await?;
    let resetting: Vec<SessionId> =
        inner.store.reset_intents().await?.into_iter().map(|i| i.session_id).collect();
    // Users' terminals, dev servers and terminal UIs the runners kept go on, their scrollback
    // first.
    let terminals = take_over_terminals(inner, &kept).await?;
    for session in inner.store.all_sessions().await? {
        if crate::tui::is_tui(&session) && inner.tui.get(&session.id).is_some() {
            // Its terminal UI runs on: its actor reads its screen again (issue 52).
            continue;
        }
        if let Some((position, from, info, turn)) =
            adoptable(inner, &session, &kept, &resetting).await?
        {
            let mut tx = inner.store.begin_write().await?;
            let run = tx.join_runner(&session.id, position.epoch).await?;
            // The requests the user did not answer stay pending: the agent's request comes
            // again in the replay (the committed position stays before it until answered),
            // and the same card takes the answer (rule 42).
            tx.commit().await?;
            let execution = from.client.attach_with(&info, AckPolicy::OnCommit, position.committed);
            adoptions.push(Adoption {
                session_id: session.id.clone(),
                epoch: position.epoch,
                execution,
                skip: position.skip,
                ahead: position.ahead,
                run,
                turn,
                taken: info.keys.clone(),
                here: from.here,
            });
            continue;
        }
        if let Some(runtime) = inner.store.get_runtime(&session.id).await?
            && let Some(pgid) = runtime.pgid
            && kandev_runtime::group_alive(pgid)
            && let Err(err) = kandev_runtime::kill_group(pgid)
        {
            tracing::warn!(session = %session.id, pgid, error = %err, "cannot kill a leftover agent");
        }
        let mut tx = inner.store.begin_write().await?;
        tx.end_runtime(&session.id, session.epoch, "ended").await?;
        // Its agent is gone: no token of it is accepted any more (issue 20).
        tx.forget_mcp_grants(&session.id).await?;
        let closed = tx.close_open_turns(&session.id, "interrupted").await?;
        // Rule 41: requests nobody can answer any more (the agent that asked is gone).
        expire_permissions(&mut tx, &session).await?;
        let busy = matches!(session.state, SessionState::Starting | SessionState::Running);
        if busy || closed > 0 {
            let note = INTERRUPTED;
            let update = SessionUpdate {
                state: busy.then_some(SessionState::WaitingForInput),
                acp_session_id: Some(None),
                ..SessionUpdate::default()
            };
            let updated = write_session(&mut tx, &session, &update).await?;
            add_message(&mut tx, &updated, None, note, StatusNote::Interrupted).await?;
            fixed += 1;
        }
        tx.commit().await?;
    }
    // Nobody waits for the answers of questions asked before the restart: they expire.
    let (store, waiters) = (&inner.store, &inner.questions);
    question::resolve_pending(store, waiters, None, QuestionStatus::Expired).await?;
    // Rule 45: resets the last run accepted and never settled are finished now.
    for intent in inner.store.reset_intents().await? {
        match settle_after_restart(inner, &intent).await {
            Ok(()) => fixed += 1,
            // Kept for the next startup: never forgotten.
            Err(err) => {
                tracing::error!(session = %intent.session_id, error = %err, "cannot finish an interrupted context reset")
            }
        }
    }
    // Executions no session or terminal takes over (their session deleted, or not
    // adoptable) end.
    for kept in &kept {
        for info in &kept.executions {
            let terminal = terminals.contains(&info.exec);
            if !terminal && !adoptions.iter().any(|a| a.execution.control.exec() == info.exec) {
                tracing::info!(exec = %info.exec, pid = info.pid, "stopping an agent of the last run");
                kept.client.forget(&info.exec);
            }
        }
    }
    Ok((fixed, adoptions))
}

/// At startup: the terminals, dev servers and terminal UIs the last run recorded that a runner still holds
/// (the local runner; a dev server: also its task's container's) are taken over, their
/// scrollback first, a container's dev server with its relay made again; the records of the
/// others are dropped. Returns the executions taken over.
async fn take_over_terminals(inner: &Inner, kept: &[Kept]) -> Result<Vec<String>> {
    let mut taken = vec![];
    for record in inner.store.runner_terminals().await? {
        let held = kept
            .iter()
            .filter(|k| k.here || k.container.as_ref() == Some(&record.task_id))
            .find_map(|k| Some((k, k.executions.iter().find(|e| e.exec == record.exec)?)));
        let mut task_there = inner.store.get_task(&record.task_id).await.is_ok();
        if record.kind == "tui" {
            // A terminal UI goes on only with its session.
            let session = inner.store.get_session(&SessionId::new(record.id.clone())).await;
            task_there &= session.is_ok_and(|s| crate::tui::is_tui(&s));
        }
        let kept = record;
        let (Some((from, info)), true) = (held, task_there) else {
            let mut tx = inner.store.begin_write().await?;
            tx.forget_runner_terminal(&kept.id).await?;
            tx.commit().await?;
            continue;
        };
        let execution = from.client.attach(info);
        match (kept.kind.as_str(), kept.port) {
            ("dev_server", Some(port)) => {
                let process = kandev_runtime::terminal::through_runner(
                    execution,
                    crate::devservers::DEV_SERVER_LOG_BYTES,
                );
                // A container's dev server is reached through a relay from this host's port.
                let relay = match from.container {
                    Some(_) => crate::containers::relay_dev_server(inner, &from.client, port)
                        .await
                        .inspect_err(|err| {
                            tracing::warn!(port, error = %err, "cannot relay a dev server of the last run")
                        })
                        .ok(),
                    None => None,
                };
                let server =
                    crate::devservers::DevServer { port, process: Arc::new(process), relay };
                inner.dev_servers.lock().insert((kept.task_id, kept.repository_id), server);
            }
            ("tui", _) => {
                let shell = kandev_runtime::pty::through_runner(execution);
                let tui = crate::shells::TuiTerminal::new(kept.task_id, kept.repository_id, shell);
                inner.tui.insert(kandev_domain::SessionId::new(kept.id), Arc::new(tui));
            }
            _ => {
                let shell = crate::shells::Shell {
                    task_id: kept.task_id,
                    repository_id: kept.repository_id,
                    shell: Arc::new(kandev_runtime::pty::through_runner(execution)),
                };
                inner.shells.lock().insert(kept.id, shell);
            }
        }
        tracing::info!(exec = %info.exec, "took over a terminal of the last run");
        taken.push(info.exec.clone());
    }
    Ok(taken)
}

/// Marks the session's pending permission requests expired.
async fn expire_permissions(tx: &mut kandev_store::WriteTx, session: &Session) -> Result<()> {
    for message in tx.pending_permission_messages(&session.id).await? {
        let mut meta = message.meta;
        let MessageMeta::PermissionRequest(request) = &mut meta else { continue };
        request.status = "expired".to_owned();
        let message = tx.set_message(&message.id, None, &meta).await?;
        publish::message_changed(tx, session, &message).await?;
    }
    Ok(())
}

/// Rule 45: a reset that was accepted but never settled (the server stopped in the middle,
/// gracefully or not) is finished at startup, without any agent: a new epoch, no token, no
/// conversation id or context window, the divider, then what the step does after the reset
/// (plan mode, session mode, and its prompt queued once, `queued_by = workflow`; no agent is
/// started, rule 42). When the step no longer exists it is recorded as failed (rule 25).
/// Clearing the stored intent is part of the same transaction, so it happens once.
async fn settle_after_restart(inner: &Inner, intent: &ResetIntent) -> Result<()> {
    let session = inner.store.get_session(&intent.session_id).await?;
    let task = inner.store.get_task(&session.task_id).await?;
    let workflow = inner.store.get_workflow(&task.workflow_id).await?;
    let step = intent.step_id.as_ref().and_then(|id| workflow.step(id)).cloned();
    let mut tx = inner.store.begin_write().await?;
    tx.clear_reset(&session.id).await?;
    if intent.step_id.is_some() && step.is_none() {
        let message = "the context reset of a step that no longer exists failed: the server \
                       stopped during it; the step prompt was not sent"
            .to_owned();
        let error = LastError {
            code: "workflow_context_reset_failed".into(),
            message: message.clone(),
            details: Some(
                json!({ "step": null, "epoch": session.epoch, "cause": "server_restart" })
                    .to_string(),
            ),
            at: inner.store.now(),
        };
        let update = SessionUpdate { last_error: Some(Some(error)), ..SessionUpdate::default() };
        let session = write_session(&mut tx, &session, &update).await?;
        let meta = ErrorMeta::code("workflow_context_reset_failed");
        add_message(&mut tx, &session, None, &message, meta).await?;
        tx.commit().await?;
        return Ok(());
    }
    let epoch = tx.bump_epoch(&session.id, session.epoch).await?;
    let mut update = SessionUpdate {
        acp_session_id: Some(None),
        resume_token: Some(None),
        context_window: Some(None),
        ..SessionUpdate::default()
    };
    let mut prompt = None;
    if let Some(step) = &step {
        let after_reset = step
            .events
            .on_enter
            .iter()
            .skip_while(|a| !matches!(a, Action::ResetAgentContext))
            .skip(1);
        for action in after_reset {
            match action {
                Action::EnablePlanMode => update.plan_mode = Some(true),
                Action::DisablePlanMode => update.plan_mode = Some(false),
                Action::SetSessionMode { mode_id } => {
                    update.session_mode = Some(Some(mode_id.clone()))
                }
                Action::AutoStartAgent if intent.cause != EntryCause::TurnStart.as_str() => {
                    prompt = Some(step_prompt(step, &task.prompt()))
                }
                _ => {}
            }
        }
    }
    let session = write_session(&mut tx, &Session { epoch, ..session }, &update).await?;
    let text = format!("{} (finished after the server restarted)", divider(step.as_ref()));
    add_message(&mut tx, &session, None, &text, StatusNote::ContextReset).await?;
    if let Some(prompt) = prompt {
        // Unknown names stay as written, and so does a prompt whose expansion is too long (the
        // live path also leaves a note; see session/workflow.rs).
        let prompt = expand_saved_prompts(&inner.store, &task, prompt).await?.text;
        tx.enqueue(&session.id, &prompt, &[], None, "workflow").await?;
        let queue = tx.list_queue(&session.id).await?;
        publish::queue_changed(&mut tx, &session, &queue).await?;
    }
    tx.commit().await?;
    Ok(())
}

/// At startup: kills what the last run's terminals and dev servers left running (a server
/// stopped by `kill -9` could not) and forgets them.
async fn reap_children(inner: &Inner) -> Result<()> {
    for child in inner.store.child_processes().await? {
        let killed = match child.kind.as_str() {
            "terminal" => kandev_runtime::kill_session(child.pgid),
            _ if kandev_runtime::group_alive(child.pgid) => kandev_runtime::kill_group(child.pgid),
            _ => Ok(()),
        };
        if let Err(err) = killed {
            tracing::warn!(pgid = child.pgid, kind = %child.kind, error = %err, "cannot kill a leftover process");
        }
        let mut tx = inner.store.begin_write().await?;
        tx.forget_child(child.pgid).await?;
        tx.commit().await?;
    }
    Ok(())
}
