//! Workflow execution outside any session's actor: recording a move of a task, and routing
//! a step entry to the session the step works in (the task's primary session, or a new one
//! when the step names its own agent profile). The step's actions themselves run inside
//! that session's actor (`session/workflow.rs`).

use std::sync::Arc;

use futures::future::BoxFuture;
use kandev_api_types::{Notification, TaskDto, WorkspaceEvent};
use kandev_domain::ship::PrState;
use kandev_domain::task::Task;
use kandev_domain::transcript::Session;
use kandev_domain::workflow::{EntryCause, Step, Trigger, first_move};
use kandev_domain::{SessionId, StepId, TaskId};

use crate::command::{Command, ShipPlan};
use crate::create::create_session;
use crate::error::Result;
use crate::handle::{ask, inbox};
use crate::inner::Inner;
use crate::publish;

/// A person's move: the task goes to `to` from wherever it is now. Stores and announces
/// it; returns the task and the step it left. The tests' way to move a task; the API's is
/// the `move_task` use case (`usecases/tasks.rs`), which also checks the move and notes it.
#[cfg(test)]
pub(crate) async fn record_move(
    inner: &Arc<Inner>,
    task_id: &TaskId,
    to: &StepId,
    position: Option<usize>,
    cause: EntryCause,
    actor: &str,
) -> Result<(Task, StepId)> {
    let moved = move_in_store(inner, task_id, None, to, position, cause, actor).await?;
    Ok(moved.expect("a move without an expected step always happens"))
}

/// A trigger's move (`on_turn_complete`, `on_turn_start`, `on_pr_*`), decided from the
/// step `from` the task was in when the trigger fired. It happens only if the task is still
/// there when the move is written: a move made meanwhile (a person's, another trigger's)
/// wins, and `None` says so (docs/workflows.md, "a trigger moves only from its own step").
/// Without the check a turn that ended while the developer moved the task to Done put it
/// back in Review.
pub(crate) async fn record_trigger_move(
    inner: &Arc<Inner>,
    task_id: &TaskId,
    from: &StepId,
    to: &StepId,
    cause: EntryCause,
    actor: &str,
) -> Result<Option<Task>> {
    let moved = move_in_store(inner, task_id, Some(from), to, None, cause, actor).await?;
    Ok(moved.map(|(task, _)| task))
}

/// Moves a task in one write transaction, unless `expected` names a step the task has left
/// (then nothing is written and `None` returned); announces the move after the commit.
async fn move_in_store(
    inner: &Arc<Inner>,
    task_id: &TaskId,
    expected: Option<&StepId>,
    to: &StepId,
    position: Option<usize>,
    cause: EntryCause,
    actor: &str,
) -> Result<Option<(Task, StepId)>> {
    let mut tx = inner.store.begin_write().await?;
    // Read inside the transaction: no other write can come between this read and the move.
    let before = tx.get_task(task_id).await?;
    if expected.is_some_and(|step| *step != before.step_id) {
        return Ok(None); // dropped: rolled back, nothing written
    }
    let moved = tx.move_task(task_id, to, position, cause.as_str(), actor).await?;
    let event = WorkspaceEvent::TaskMoved {
        task: TaskDto::from(&moved),
        from_step_id: before.step_id.to_string(),
        trigger: cause.as_str().to_owned(),
    };
    publish::notify(&mut tx, Notification::workspace(&moved.workspace_id, event)).await?;
    tx.commit().await?;
    // A task that reached its last step may be the last blocker of tasks waiting to start.
    let (owner, done) = (inner.clone(), moved.id.clone());
    inner.tracker.spawn(async move {
        if let Err(err) = release_waiting(owner, done.clone()).await {
            tracing::warn!(task = %done, error = %err, "cannot start the tasks it blocked");
        }
    });
    Ok(Some((moved, before.step_id)))
}

/// Runs the start step's `on_enter` for a new task; with `start_agent` (or an
/// `auto_start_agent` action) its first session starts, exactly once — unless a blocker of
/// the task is not done: then the start waits (`release_waiting` runs it later).
pub(crate) async fn start_new_task(
    inner: &Arc<Inner>,
    task_id: &TaskId,
    start_agent: bool,
) -> Result<Option<Session>> {
    let task = inner.store.get_task(task_id).await?;
    let workflow = inner.store.get_workflow(&task.workflow_id).await?;
    let Some(step) = workflow.step(&task.step_id).cloned() else { return Ok(None) };
    let auto_start = step.starts_work();
    if !auto_start && !start_agent {
        return Ok(None);
    }
    if hold_if_blocked(inner, task_id).await? {
        return Ok(None);
    }
    let session = primary_session_for(inner, &task, &step).await?;
    let cause = EntryCause::Created;
    let to = step.id.clone();
    ask(inner, &session, |reply| Command::StepEntered {
        from: None,
        to,
        cause,
        start_agent,
        reply,
    })
    .await?;
    Ok(Some(inner.store.get_session(&session).await?))
}

/// Whether a task's auto-start must wait: it has a blocker that is not done. Marks the
/// start as waiting when so.
pub(crate) async fn hold_if_blocked(inner: &Inner, task_id: &TaskId) -> Result<bool> {
    if inner.store.open_blockers(task_id).await?.is_empty() {
        return Ok(false);
    }
    let mut tx = inner.store.begin_write().await?;
    tx.set_start_waiting(task_id, true).await?;
    tx.commit().await?;
    Ok(true)
}

/// `done` became done (last step, archived): every task it blocked whose auto-start waits
/// and that has no other open blocker starts now, exactly once (the flag is taken in a
/// write transaction, so two releases racing start it once).
/// Boxed with an explicit `Send`: a move spawns it, and a start may move tasks again.
pub(crate) fn release_waiting(inner: Arc<Inner>, done: TaskId) -> BoxFuture<'static, Result<()>> {
    Box::pin(async move {
        // One task that cannot start does not keep the others waiting.
        for waiting in inner.store.waiting_on(&done).await? {
            if let Err(err) = release_one(&inner, &waiting).await {
                tracing::warn!(task = %waiting, error = %err, "a task freed by its blocker did not start");
            }
        }
        Ok(())
    })
}

/// Starts `task`'s waiting auto-start if it has no open blocker; once.
pub(crate) async fn release_one(inner: &Arc<Inner>, task: &TaskId) -> Result<()> {
    if !inner.store.open_blockers(task).await?.is_empty() {
        return Ok(());
    }
    let mut tx = inner.store.begin_write().await?;
    let taken = tx.take_start_waiting(task).await?;
    tx.commit().await?;
    if taken {
        start_new_task(inner, task, true).await?;
    }
    Ok(())
}

/// A pull request of the task reached `state` (merged or closed, seen by polling or
/// `task.pr.get`): the step's `on_pr_merged` / `on_pr_closed` moves the task, at most once.
/// `on_pr_merged` waits until every pull request of the task is merged. Boxed with an
/// explicit `Send`: the entered step's actions run in a session actor.
pub(crate) fn pr_settled(
    inner: Arc<Inner>,
    task_id: TaskId,
    state: PrState,
) -> BoxFuture<'static, Result<()>> {
    Box::pin(async move {
        let (trigger, cause) = match state {
            PrState::Merged => (Trigger::OnPrMerged, EntryCause::PrMerged),
            PrState::Closed => (Trigger::OnPrClosed, EntryCause::PrClosed),
            PrState::Open => return Ok(()),
        };
        if state == PrState::Merged
            && inner.store.pull_requests(&task_id).await?.iter().any(|p| p.state != PrState::Merged)
        {
            return Ok(());
        }
        // The issue hears of it before the task moves (the move may run the next step).
        if let Err(err) = crate::writeback::run(&inner, &task_id, trigger).await {
            tracing::warn!(task = %task_id, error = %err, "cannot write back to the task's issue");
        }
        forge_move(inner, task_id, None, trigger, cause).await
    })
}

/// A forge trigger of the task's step fired (a pull request settled, its checks failed or
/// passed, a review came): the step's first move under it moves the task, at most once, and
/// only from that step (`fired_in`, when the trigger was read from a step before: a task that
/// moved since is not moved by it). Boxed with an explicit `Send`: the entered step's actions
/// run in a session actor.
pub(crate) fn forge_move(
    inner: Arc<Inner>,
    task_id: TaskId,
    fired_in: Option<StepId>,
    trigger: Trigger,
    cause: EntryCause,
) -> BoxFuture<'static, Result<()>> {
    Box::pin(async move {
        let task = inner.store.get_task(&task_id).await?;
        if task.archived_at.is_some() || fired_in.is_some_and(|s| s != task.step_id) {
            return Ok(());
        }
        let workflow = inner.store.get_workflow(&task.workflow_id).await?;
        let Some(step) = workflow.step(&task.step_id) else { return Ok(()) };
        let Some(target) = first_move(&workflow, step, trigger) else { return Ok(()) };
        let (to, from) = (target.id.clone(), step.id.clone());
        let Some(task) = record_trigger_move(&inner, &task_id, &from, &to, cause, "forge").await?
        else {
            return Ok(()); // moved meanwhile: the trigger belonged to the step it left
        };
        // Like a person's move: a task without a session gets one only to auto-start.
        let auto_start = workflow.step(&to).is_some_and(|s| s.starts_work());
        if task.primary_session_id.is_none() && !auto_start {
            return Ok(());
        }
        enter_step_in_primary(inner, task_id, Some(from), to, cause).await
    })
}

/// Runs a workflow's ship action outside the session's actor and reports the result to it
/// (starting the actor again if it stopped meanwhile). Boxed with an explicit `Send`: the
/// actor spawns it, and reaching the actor may start one.
pub(crate) fn ship_then_report(
    inner: Arc<Inner>,
    task_id: TaskId,
    session_id: SessionId,
    plan: ShipPlan,
) -> BoxFuture<'static, ()> {
    Box::pin(async move {
        let result = crate::workdir::ops::run_ship_action(&inner, &task_id, &plan.action).await;
        let sent = match inbox(&inner, &session_id).await {
            Ok(inbox) => inbox.send(Command::ShipDone { plan, result }).await.is_ok(),
            Err(_) => false,
        };
        if !sent {
            tracing::warn!(task = %task_id, session = %session_id, "a ship action ended after its session");
        }
    })
}

/// The session a step works in: the task's primary session, unless the step names its
/// own agent profile, in which case a session with that profile becomes primary.
pub(crate) async fn primary_session_for(
    inner: &Inner,
    task: &Task,
    step: &Step,
) -> Result<SessionId> {
    let primary = match &task.primary_session_id {
        Some(id) => Some(inner.store.get_session(id).await?),
        None => None,
    };
    let wanted = step.agent_profile_id.clone();
    match (primary, wanted) {
        (Some(session), None) => Ok(session.id),
        (Some(session), Some(profile)) if session.agent_profile_id.as_ref() == Some(&profile) => {
            Ok(session.id)
        }
        (_, profile) => {
            let profile = profile.or(task.agent_profile_id.clone());
            let session = create_session(inner, &task.id, profile, None, false).await?;
            let mut tx = inner.store.begin_write().await?;
            tx.set_primary_session(&task.id, &session.id).await?;
            tx.commit().await?;
            Ok(session.id)
        }
    }
}

/// Runs a step entry in the session the step works in (its own profile's, if it has one).
/// Boxed with an explicit `Send`: a session actor spawns it when it hands a step over.
pub(crate) fn enter_step_in_primary(
    inner: Arc<Inner>,
    task_id: TaskId,
    from: Option<StepId>,
    to: StepId,
    cause: EntryCause,
) -> BoxFuture<'static, Result<()>> {
    Box::pin(async move {
        let task = inner.store.get_task(&task_id).await?;
        let workflow = inner.store.get_workflow(&task.workflow_id).await?;
        let Some(step) = workflow.step(&to).cloned() else { return Ok(()) };
        let session = primary_session_for(&inner, &task, &step).await?;
        ask(&inner, &session, |reply| Command::StepEntered {
            from,
            to,
            cause,
            start_agent: false,
            reply,
        })
        .await
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use kandev_domain::task::Task;
    use kandev_domain::transcript::Session;
    use kandev_domain::workflow::EntryCause;
    use kandev_store::{Location, Store};
    use tokio::sync::mpsc::{Receiver, Sender};

    use super::{record_move, record_trigger_move};
    use crate::command::Command;
    use crate::config::{AgentCommand, EngineConfig};
    use crate::inner::Inner;
    use crate::launcher::BuiltinMockLauncher;
    use crate::test_support::insert_task_on;

    /// These tests move tasks that start no session.
    fn no_actor(_: Arc<Inner>, _: Session, _: Task, _: Sender<Command>, _: Receiver<Command>) {
        unreachable!("a move in these tests starts no session's actor")
    }

    type Board = (tempfile::TempDir, Arc<Inner>, kandev_domain::TaskId, Vec<kandev_domain::StepId>);

    /// A task in step "In Progress" of an In Progress / Review / Done board, and the engine's
    /// state.
    async fn board() -> Board {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(Location::File(dir.path().join("kandev.db"))).await.unwrap();
        let mut tx = store.begin_write().await.unwrap();
        let (task, steps) = insert_task_on(&mut tx, &["In Progress", "Review", "Done"]).await;
        tx.commit().await.unwrap();
        let mock = AgentCommand { program: "kandev".into(), args: vec![], flags: vec![] };
        let config = EngineConfig::new(dir.path().to_path_buf(), mock);
        let inner = Inner::new(store, config, Arc::new(BuiltinMockLauncher), no_actor);
        (dir, Arc::new(inner), task.id, steps)
    }

    /// The race CI's browser test hit: a turn ended in In Progress (its `on_turn_complete`
    /// says Review) while the developer moved the task to Done; the trigger's move, written
    /// after, put the task back in Review.
    #[tokio::test]
    async fn i5_a_trigger_move_from_a_step_the_task_has_left_changes_nothing() {
        let (_dir, inner, task, steps) = board().await;
        let (in_progress, review, done) = (&steps[0], &steps[1], &steps[2]);
        let inner = &inner;
        record_move(inner, &task, done, None, EntryCause::Manual, "user").await.unwrap();
        let mut events = inner.store.subscribe();

        let cause = EntryCause::TurnComplete;
        let moved = record_trigger_move(inner, &task, in_progress, review, cause, "agent").await;

        assert!(moved.unwrap().is_none(), "the trigger's move is refused");
        assert_eq!(&inner.store.get_task(&task).await.unwrap().step_id, done);
        let history = inner.store.step_history(&task).await.unwrap();
        assert_eq!(history.last().map(|h| &h.to_step_id), Some(done), "no move recorded after it");
        assert!(events.try_recv().is_err(), "no task.moved announced");
    }

    #[tokio::test]
    async fn i5_a_trigger_move_from_the_step_the_task_is_in_moves_it() {
        let (_dir, inner, task, steps) = board().await;
        let (in_progress, review) = (&steps[0], &steps[1]);
        let inner = &inner;
        let mut events = inner.store.subscribe();

        let cause = EntryCause::TurnComplete;
        let moved = record_trigger_move(inner, &task, in_progress, review, cause, "agent").await;

        assert_eq!(&moved.unwrap().expect("moved").step_id, review);
        let history = inner.store.step_history(&task).await.unwrap();
        let last = history.last().unwrap();
        assert_eq!((last.from_step_id.as_ref(), &last.to_step_id), (Some(in_progress), review));
        assert_eq!(events.try_recv().unwrap().action, "task.moved");
    }
}
