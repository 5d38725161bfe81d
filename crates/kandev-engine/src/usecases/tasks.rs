//! Task use cases: create, update, move, archive, unarchive, delete. Create, move and
//! archive are atomic (docs/architecture.md, "Task use cases"): every store write of one is
//! a single transaction, and the work outside the store (an agent's start, stopping agents,
//! removing worktrees) has a fixed place before or after it, so a failure or a crash leaves
//! the task as it was or as the committed write says.

use kandev_api_types::{Notification, TaskDto, WorkspaceEvent};
use kandev_domain::agent::AgentProfile;
use kandev_domain::intake::TaskOrigin;
use kandev_domain::message_meta::StatusNote;
use kandev_domain::task::Task;
use kandev_domain::transcript::Session;
use kandev_domain::workflow::{EntryCause, Step, Workflow};
use kandev_domain::workspace::Repository;
use kandev_domain::{AgentProfileId, RepositoryId, StepId, TaskId, WorkflowId};
use kandev_store::{NewTask, TaskPatch, WriteTx};

use crate::command::Command;
use crate::create::{insert_session, session_profile};
use crate::engine::Engine;
use crate::error::{EngineError, Result};
use crate::handle::ask;
use crate::publish::notify;
use crate::workdir::prepare::plan;
use crate::workdir::{KeptWorktree, WorktreeRemoval};
use crate::workflow::{release_one, release_waiting};
use crate::write::add_message;

/// `task.create` as decoded: the title and description checked, the ids not yet.
pub struct NewTaskRequest {
    pub workflow_id: WorkflowId,
    /// The step it starts in; the workflow's start step when `None`.
    pub step_id: Option<StepId>,
    pub title: String,
    pub description: String,
    pub repository_ids: Vec<RepositoryId>,
    /// Per repository, the branch its worktree starts from (checked).
    pub base_branches: Vec<(RepositoryId, String)>,
    pub agent_profile_id: Option<AgentProfileId>,
    pub parent_id: Option<TaskId>,
    pub blocked_by: Vec<TaskId>,
    /// `tasks.agent_depth`: 0 for a person's task, the creating agent's task's depth + 1
    /// for MCP's `create_task`.
    pub agent_depth: u32,
    /// Start an agent session at once even when the start step does not auto-start.
    pub start_agent: bool,
    /// What intake made it from; a task was made from its external id already: `Conflict`
    /// (`StoreError::Conflict`), and nothing is written.
    pub origin: Option<TaskOrigin>,
    /// The user whose request creates it (issue 49): a session it starts acts with their
    /// rights at most. `None`: intake, a schedule, or a server without users.
    pub started_by: Option<String>,
}

impl NewTaskRequest {
    /// A task intake makes (an issue, a webhook's delivery, a schedule's occurrence): no
    /// links, no profile, no start of its own (its step decides), and its origin.
    pub(crate) fn arrival(
        (workflow_id, step_id): (WorkflowId, StepId),
        title: String,
        description: String,
        repository_ids: Vec<RepositoryId>,
        origin: TaskOrigin,
    ) -> NewTaskRequest {
        NewTaskRequest {
            workflow_id,
            step_id: Some(step_id),
            title,
            description,
            repository_ids,
            base_branches: vec![],
            agent_profile_id: None,
            parent_id: None,
            blocked_by: vec![],
            agent_depth: 0,
            start_agent: false,
            origin: Some(origin),
            started_by: None,
        }
    }
}

/// A created task and, when its start step started an agent, the session it started.
pub struct TaskCreation {
    pub task: Task,
    pub session: Option<Session>,
}

/// `task.update` as decoded: `None` leaves a field as it is.
#[derive(Default)]
pub struct TaskEdit {
    pub title: Option<String>,
    pub description: Option<String>,
    pub repository_ids: Option<Vec<RepositoryId>>,
    pub agent_profile_id: Option<Option<AgentProfileId>>,
    pub parent_id: Option<Option<TaskId>>,
    pub blocked_by: Option<Vec<TaskId>>,
}

/// An archived task and what became of its worktrees.
pub struct TaskArchival {
    pub task: Task,
    pub removal: WorktreeRemoval,
}

/// What `task.delete` did.
pub enum TaskDeletion {
    Deleted(WorktreeRemoval),
    /// Not deleted (without `force`): these worktrees have uncommitted or untracked files
    /// or could not be removed; the first one's reason says why.
    Kept(Vec<KeptWorktree>),
}

impl Engine {
    /// `task.create`: the task, its links and, when its start step starts an agent, its
    /// opening session (row, primary, or the wait for its blockers) are one transaction, so a
    /// refused start (a repository on another executor, a folder that cannot be made)
    /// leaves no task. The step's entry (the agent's start) follows the commit; the answer
    /// comes once it is accepted (`STARTING`). Runs as the engine's own task: a caller that
    /// goes away never leaves a task without the start its step asked for (rule 33).
    pub async fn create_task(&self, request: NewTaskRequest) -> Result<TaskCreation> {
        let engine = self.clone();
        self.run_detached(async move { engine.create_task_now(request).await }).await?
    }

    async fn create_task_now(&self, request: NewTaskRequest) -> Result<TaskCreation> {
        let store = &self.inner.store;
        let workflow = store.get_workflow(&request.workflow_id).await?;
        let step = first_step(&workflow, request.step_id.as_ref())?.clone();
        let repository_ids = self.checked_repositories(&workflow, &request.repository_ids).await?;
        if let Some(profile) = &request.agent_profile_id {
            store.get_profile(profile).await?;
        }
        let new = NewTask {
            workflow_id: workflow.id.clone(),
            step_id: step.id.clone(),
            title: request.title,
            description: request.description,
            repository_ids,
            agent_profile_id: request.agent_profile_id,
        };
        let starts = request.start_agent || step.starts_work();
        let request_started_by = request.started_by.clone();
        // What the start needs is read before the transaction; only the new task's own
        // directory is planned inside it (it needs the task's id).
        let blocked = starts && self.any_open(&request.blocked_by).await?;
        let profile = match starts && !blocked {
            true => {
                let wanted = step.agent_profile_id.clone().or(new.agent_profile_id.clone());
                Some(session_profile(&self.inner, wanted).await?)
            }
            false => None,
        };
        if let Some(Some(profile)) = &profile {
            // A start that would be refused is refused before the task exists, so the caller's
            // error leaves nothing behind (a retry makes no second task).
            let names = crate::secrets::profile_references(profile);
            let repository = new.repository_ids.first().map(|r| r.as_str());
            crate::secrets::resolve(
                &self.inner,
                &names,
                workflow.workspace_id.as_str(),
                repository,
            )
            .await?;
            crate::installs::check_pinned_for(&self.inner, profile, &new.repository_ids).await?;
        }
        let mut tx = store.begin_write().await?;
        let task = tx.insert_task(&new, "user").await?;
        if let Some(origin) = &request.origin {
            // In the write transaction: of two arrivals of one issue, the second sees the first.
            tx.insert_task_origin(&task.workspace_id, &task.id, origin).await?;
        }
        if request.agent_depth > 0 {
            tx.set_task_agent_depth(&task.id, request.agent_depth).await?;
        }
        for (repository_id, branch) in &request.base_branches {
            tx.set_task_base_branch(&task.id, repository_id, branch).await?;
        }
        let linked = request.parent_id.is_some() || !request.blocked_by.is_empty();
        if linked {
            let blockers = Some(request.blocked_by.as_slice());
            tx.set_task_links(&task.id, Some(request.parent_id.as_ref()), blockers).await?;
        }
        let reread = linked || request.origin.is_some();
        let task = if reread { tx.get_task(&task.id).await? } else { task };
        let event = WorkspaceEvent::TaskCreated { task: TaskDto::from(&task) };
        notify(&mut tx, Notification::workspace(&task.workspace_id, event)).await?;
        if blocked {
            // Its start waits for its blockers (`release_waiting` runs it).
            tx.set_start_waiting(&task.id, true).await?;
        }
        let session = match profile {
            Some(profile) => {
                let session = self.first_session(&mut tx, &task, profile.as_ref()).await?;
                if let Some(user_id) = &request_started_by {
                    tx.set_session_started_by(&session.id, user_id).await?;
                }
                Some(session)
            }
            None => None,
        };
        tx.commit().await?;
        if blocked {
            // A blocker finished between the check and the commit: its release saw no wait.
            release_after_commit(&self.inner, &task.id).await;
        }
        let Some(session) = session else { return Ok(TaskCreation { task, session: None }) };
        let (to, start_agent) = (step.id.clone(), request.start_agent);
        ask(&self.inner, &session.id, |reply| Command::StepEntered {
            from: None,
            to,
            cause: EntryCause::Created,
            start_agent,
            reply,
        })
        .await?;
        let task = store.get_task(&task.id).await?;
        Ok(TaskCreation { task, session: Some(store.get_session(&session.id).await?) })
    }

    /// The opening session of a new task, running `profile`, written in the transaction that
    /// creates the task and made its primary. No task lock is taken: nobody else can name a
    /// task that is not committed. Planning its directory reads the task's repositories and
    /// their executors through the store's read connections while the transaction is open
    /// (a file or PostgreSQL store; the in-memory store of unit tests shares one connection).
    async fn first_session(
        &self,
        tx: &mut WriteTx,
        task: &Task,
        profile: Option<&AgentProfile>,
    ) -> Result<Session> {
        let plan = plan(&self.inner, task).await?;
        let session = insert_session(tx, task, profile, &plan, None).await?;
        tx.set_primary_session(&task.id, &session.id).await?;
        Ok(session)
    }

    /// Whether any of `tasks` is not done: neither archived nor in its workflow's last step
    /// (what `Store::open_blockers` counts, for blockers not yet linked in the store).
    async fn any_open(&self, tasks: &[TaskId]) -> Result<bool> {
        for id in tasks {
            let task = self.inner.store.get_task(id).await?;
            let workflow = self.inner.store.get_workflow(&task.workflow_id).await?;
            let last = workflow.steps.iter().max_by_key(|s| s.position).map(|s| &s.id);
            if task.archived_at.is_none() && last != Some(&task.step_id) {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// `ids` without repeats, each a repository of the workflow's workspace.
    async fn checked_repositories(
        &self,
        workflow: &Workflow,
        ids: &[RepositoryId],
    ) -> Result<Vec<RepositoryId>> {
        let mut checked: Vec<RepositoryId> = Vec::with_capacity(ids.len());
        for id in ids {
            let repository: Repository = self.inner.store.get_repository(id).await?;
            if repository.workspace_id != workflow.workspace_id {
                return Err(EngineError::Validation(format!(
                    "repository {} belongs to another workspace",
                    repository.id
                )));
            }
            if !checked.contains(&repository.id) {
                checked.push(repository.id);
            }
        }
        Ok(checked)
    }

    /// `task.update`. Fewer blockers may leave a waiting auto-start free to run: it runs
    /// after the commit.
    pub async fn update_task(&self, id: &TaskId, edit: TaskEdit) -> Result<Task> {
        let store = &self.inner.store;
        let current = store.get_task(id).await?;
        let workflow = store.get_workflow(&current.workflow_id).await?;
        let repository_ids = match &edit.repository_ids {
            Some(ids) => Some(self.checked_repositories(&workflow, ids).await?),
            None => None,
        };
        if let Some(Some(profile)) = &edit.agent_profile_id {
            store.get_profile(profile).await?;
        }
        let patch = TaskPatch {
            title: edit.title,
            description: edit.description,
            state: None,
            needs_you: None,
            repository_ids,
            agent_profile_id: edit.agent_profile_id,
        };
        let (parent_id, blocked_by) = (edit.parent_id, edit.blocked_by);
        let mut tx = store.begin_write().await?;
        let mut task = tx.update_task(id, &patch).await?;
        if parent_id.is_some() || blocked_by.is_some() {
            tx.set_task_links(id, parent_id.as_ref().map(Option::as_ref), blocked_by.as_deref())
                .await?;
            task = tx.get_task(id).await?;
        }
        let event = WorkspaceEvent::TaskUpdated { task: TaskDto::from(&task) };
        notify(&mut tx, Notification::workspace(&task.workspace_id, event)).await?;
        tx.commit().await?;
        if blocked_by.is_some() {
            release_after_commit(&self.inner, id).await;
        }
        Ok(task)
    }

    /// `task.move`: a person's move (`by` whom) to another step of the task's workflow, or
    /// to another place in its own step. The checks (the step is the workflow's, it accepts
    /// manual moves), the move, its step history, its announcement and the mover's note in
    /// the primary session's transcript are one transaction; the entered step's `on_enter`
    /// runs after the commit, on the primary session. Returns the task and the step it left.
    /// Runs as the engine's own task, so a caller that goes away never cuts the entry off.
    pub async fn move_task(
        &self,
        id: &TaskId,
        to: &StepId,
        position: Option<usize>,
        by: &str,
    ) -> Result<(Task, StepId)> {
        let (engine, id, to, by) = (self.clone(), id.clone(), to.clone(), by.to_owned());
        self.run_detached(async move {
            let (moved, from) = engine.record_person_move(&id, &to, position, &by).await?;
            // A task that reached its last step may be the last blocker of tasks waiting.
            let (owner, done) = (engine.inner.clone(), moved.id.clone());
            engine.inner.tracker.spawn(async move {
                if let Err(err) = release_waiting(owner, done.clone()).await {
                    tracing::warn!(task = %done, error = %err, "cannot start the tasks it blocked");
                }
            });
            if from == to {
                return Ok((moved, from));
            }
            engine.enter_moved_step(moved, from, &to).await
        })
        .await?
    }

    /// The store's half of [`Engine::move_task`], in one transaction.
    async fn record_person_move(
        &self,
        id: &TaskId,
        to: &StepId,
        position: Option<usize>,
        by: &str,
    ) -> Result<(Task, StepId)> {
        let store = &self.inner.store;
        // A task never changes workflow; its steps are read before the transaction.
        let workflow = store.get_workflow(&store.get_task(id).await?.workflow_id).await?;
        let mut tx = store.begin_write().await?;
        // Read inside the transaction: no other move can come between the checks and this one.
        let before = tx.get_task(id).await?;
        let Some(step) = workflow.step(to) else {
            return Err(EngineError::Validation(format!(
                "step {to} is not a step of the task's workflow; pick one of the board's steps"
            )));
        };
        if step.id != before.step_id && !step.allow_manual_move {
            return Err(EngineError::Conflict(format!(
                "step {:?} does not accept manual moves",
                step.name
            )));
        }
        let cause = EntryCause::Manual;
        let moved = tx.move_task(id, to, position, cause.as_str(), by).await?;
        let event = WorkspaceEvent::TaskMoved {
            task: TaskDto::from(&moved),
            from_step_id: before.step_id.to_string(),
            trigger: cause.as_str().to_owned(),
        };
        notify(&mut tx, Notification::workspace(&moved.workspace_id, event)).await?;
        if before.step_id != *to && kandev_domain::account::names_someone(by) {
            note_move(&mut tx, &workflow, &moved, &before.step_id, by).await?;
        }
        tx.commit().await?;
        Ok((moved, before.step_id))
    }

    /// `task.archive`: stops the task's agents and removes its worktrees (one with
    /// uncommitted or untracked files is kept unless `force`; branches always are), then
    /// archives it in one transaction. A failure before the commit leaves the task
    /// unarchived, its agents stopped and the worktrees removed so far recorded as removed
    /// (a later start makes them again); once archived, tasks whose auto-start waited for
    /// it start, and a start that fails is theirs (logged), not the archive's. Runs as the
    /// engine's own task: a caller that goes away never stops it halfway.
    pub async fn archive_task(&self, id: &TaskId, force: bool) -> Result<TaskArchival> {
        let (engine, id) = (self.clone(), id.clone());
        self.run_detached(async move {
            engine.inner.store.get_task(&id).await?;
            let removal = engine.remove_task_worktrees(&id, force).await?;
            let mut tx = engine.inner.store.begin_write().await?;
            let task = tx.archive_task(&id).await?;
            let event = WorkspaceEvent::TaskArchived { task: TaskDto::from(&task) };
            notify(&mut tx, Notification::workspace(&task.workspace_id, event)).await?;
            tx.commit().await?;
            if let Err(err) = release_waiting(engine.inner.clone(), id.clone()).await {
                tracing::warn!(task = %id, error = %err, "cannot start the tasks it blocked");
            }
            Ok(TaskArchival { task, removal })
        })
        .await?
    }

    /// `task.unarchive` (archive's Undo): back at the end of its step, announced as updated.
    /// Its worktrees are made again when an agent next starts.
    pub async fn unarchive_task(&self, id: &TaskId) -> Result<Task> {
        let mut tx = self.inner.store.begin_write().await?;
        let task = tx.unarchive_task(id).await?;
        let event = WorkspaceEvent::TaskUpdated { task: TaskDto::from(&task) };
        notify(&mut tx, Notification::workspace(&task.workspace_id, event)).await?;
        tx.commit().await?;
        Ok(task)
    }

    /// `task.delete`: stops the task's agents, removes its worktrees (branches are kept) and
    /// deletes it; its subtasks become top-level and the tasks it blocked are announced, and
    /// those left with no open blocker start if their auto-start waited. Without `force`,
    /// nothing is deleted while a worktree has uncommitted or untracked files or cannot be
    /// removed.
    pub async fn delete_task(&self, id: &TaskId, force: bool) -> Result<TaskDeletion> {
        let store = &self.inner.store;
        store.get_task(id).await?;
        if !force {
            let dirty = self.dirty_task_worktrees(id).await?;
            if !dirty.is_empty() {
                return Ok(TaskDeletion::Kept(dirty));
            }
        }
        let removal = self.remove_task_worktrees(id, force).await?;
        if !force && !removal.kept.is_empty() {
            return Ok(TaskDeletion::Kept(removal.kept));
        }
        let mut tx = store.begin_write().await?;
        let dependents = tx.dependents(id).await?;
        let task = tx.delete_task(id).await?;
        let event = WorkspaceEvent::TaskDeleted {
            id: id.to_string(),
            workflow_id: task.workflow_id.to_string(),
            step_id: task.step_id.to_string(),
        };
        notify(&mut tx, Notification::workspace(&task.workspace_id, event)).await?;
        for dependent in &dependents {
            if let Ok(changed) = tx.get_task(dependent).await {
                let event = WorkspaceEvent::TaskUpdated { task: TaskDto::from(&changed) };
                notify(&mut tx, Notification::workspace(&changed.workspace_id, event)).await?;
            }
        }
        tx.commit().await?;
        for dependent in &dependents {
            release_after_commit(&self.inner, dependent).await;
        }
        Ok(TaskDeletion::Deleted(removal))
    }
}

/// The step a new task starts in: `wanted`, which must be the workflow's, else its start step.
fn first_step<'w>(workflow: &'w Workflow, wanted: Option<&StepId>) -> Result<&'w Step> {
    match wanted {
        Some(id) => workflow.step(id).ok_or_else(|| {
            EngineError::Validation(format!("step {id} is not a step of workflow {}", workflow.id))
        }),
        None => workflow.start_step().ok_or_else(|| {
            EngineError::Conflict("the workflow has no steps; add one first".into())
        }),
    }
}

/// Starts `task`'s waiting auto-start if nothing blocks it any more, after the change that
/// freed it committed: that change stands whatever the start does, so a failed start is
/// logged (the task's own, not the caller's) and never answered as the change's error.
async fn release_after_commit(inner: &std::sync::Arc<crate::inner::Inner>, task: &TaskId) {
    if let Err(err) = release_one(inner, task).await {
        tracing::warn!(task = %task, error = %err, "a task freed by this change did not start");
    }
}

/// "`by` moved the task from A to B" in the moved task's primary session, if it has one.
async fn note_move(
    tx: &mut WriteTx,
    workflow: &Workflow,
    moved: &Task,
    from: &StepId,
    by: &str,
) -> Result<()> {
    let Some(session_id) = &moved.primary_session_id else { return Ok(()) };
    let session = tx.get_session(session_id).await?;
    let name = |id: &StepId| workflow.step(id).map(|s| s.name.clone()).unwrap_or_default();
    let text = format!("{by} moved the task from {} to {}", name(from), name(&moved.step_id));
    let note = StatusNote::TaskMoved { by: by.to_owned() };
    add_message(tx, &session, None, &text, note).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use kandev_domain::workflow::{StepSpec, Workflow, WorkflowSpec};
    use kandev_domain::{StepId, TaskId};
    use kandev_store::{Location, Store, TaskFilter};

    use super::NewTaskRequest;
    use crate::config::{AgentCommand, EngineConfig};
    use crate::engine::Engine;
    use crate::error::EngineError;
    use crate::launcher::BuiltinMockLauncher;

    /// An engine on a fresh store with one workflow of `steps`.
    async fn engine_with(steps: Vec<StepSpec>) -> (tempfile::TempDir, Engine, Workflow) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(Location::File(dir.path().join("kandev.db"))).await.unwrap();
        let mut tx = store.begin_write().await.unwrap();
        let workspace = tx.insert_workspace("w").await.unwrap();
        let spec = WorkflowSpec { name: "b".into(), description: String::new(), steps };
        let workflow = tx.insert_workflow(&workspace.id, &spec, None).await.unwrap();
        tx.commit().await.unwrap();
        let mock = AgentCommand { program: "kandev".into(), args: vec![], flags: vec![] };
        let config = EngineConfig::new(dir.path().to_path_buf(), mock);
        (dir, Engine::new(store, config, Arc::new(BuiltinMockLauncher)), workflow)
    }

    fn new_task(workflow: &Workflow, title: &str) -> NewTaskRequest {
        NewTaskRequest {
            workflow_id: workflow.id.clone(),
            step_id: None,
            title: title.into(),
            description: String::new(),
            repository_ids: vec![],
            base_branches: vec![],
            agent_profile_id: None,
            parent_id: None,
            blocked_by: vec![],
            agent_depth: 0,
            start_agent: false,
            origin: None,
            started_by: None,
        }
    }

    /// Task folders cannot be made from now on: a plain file stands where they go.
    fn break_task_folders(dir: &tempfile::TempDir) {
        std::fs::write(dir.path().join("tasks"), b"not a folder").unwrap();
    }

    async fn tasks_of(engine: &Engine, workflow: &Workflow) -> Vec<TaskId> {
        let filter = TaskFilter {
            workflow_id: Some(workflow.id.clone()),
            include_archived: true,
            limit: 100,
            ..Default::default()
        };
        engine.store().list_tasks(&filter).await.unwrap().into_iter().map(|t| t.id).collect()
    }

    /// Before issue 40 the handler committed the task, then asked the engine for its first
    /// session: a start refused there (here: its folder cannot be made) answered an error
    /// and left the task on the board all the same.
    #[tokio::test]
    async fn i40_s3_a_task_whose_first_start_is_refused_is_not_created() {
        let (dir, engine, workflow) = engine_with(vec![StepSpec::named("Todo")]).await;
        break_task_folders(&dir);
        let mut events = engine.store().subscribe();

        let request = NewTaskRequest { start_agent: true, ..new_task(&workflow, "t") };
        let created = engine.create_task(request).await;

        assert!(matches!(created, Err(EngineError::Unavailable(_))), "refused");
        assert!(tasks_of(&engine, &workflow).await.is_empty(), "no task was left behind");
        assert!(events.try_recv().is_err(), "nothing was announced");
        engine.shutdown().await;
    }

    #[tokio::test]
    async fn i40_s3_a_task_and_its_first_session_are_created_together() {
        let (_dir, engine, workflow) = engine_with(vec![StepSpec::named("Todo")]).await;

        let request = NewTaskRequest { start_agent: true, ..new_task(&workflow, "t") };
        let created = engine.create_task(request).await.unwrap();

        let session = created.session.expect("its opening session");
        assert_eq!(created.task.primary_session_id.as_ref(), Some(&session.id));
        assert_eq!(tasks_of(&engine, &workflow).await, vec![created.task.id]);
        engine.shutdown().await;
    }

    /// A move's checks are read in its transaction; a refused move writes nothing.
    #[tokio::test]
    async fn i40_s3_a_refused_move_changes_nothing() {
        let mut locked = StepSpec::named("Review");
        locked.allow_manual_move = false;
        let (_dir, engine, workflow) = engine_with(vec![StepSpec::named("Todo"), locked]).await;
        let task = engine.create_task(new_task(&workflow, "t")).await.unwrap().task;
        let history = engine.store().step_history(&task.id).await.unwrap();
        let mut events = engine.store().subscribe();

        let review = &workflow.steps[1].id;
        let moved = engine.move_task(&task.id, review, None, "ada").await;

        assert!(matches!(moved, Err(EngineError::Conflict(_))), "refused: {:?}", moved.err());
        let after = engine.store().get_task(&task.id).await.unwrap();
        assert_eq!(after.step_id, task.step_id);
        assert_eq!(engine.store().step_history(&task.id).await.unwrap().len(), history.len());
        assert!(events.try_recv().is_err(), "nothing was announced");
        let elsewhere = StepId::new("not-a-step");
        let moved = engine.move_task(&task.id, &elsewhere, None, "ada").await;
        assert!(matches!(moved, Err(EngineError::Validation(_))));
        engine.shutdown().await;
    }

    /// A person's move records its step history, is announced, and notes who moved the task
    /// in its primary session's transcript (all in the move's transaction).
    #[tokio::test]
    async fn i40_s3_a_persons_move_records_its_history_and_its_note() {
        let steps = vec![StepSpec::named("Todo"), StepSpec::named("Review")];
        let (_dir, engine, workflow) = engine_with(steps).await;
        let task = engine.create_task(new_task(&workflow, "t")).await.unwrap().task;
        let mut tx = engine.store().begin_write().await.unwrap();
        let session = tx.insert_session(&task.id, None, "/tmp", None, None).await.unwrap();
        tx.set_primary_session(&task.id, &session.id).await.unwrap();
        tx.commit().await.unwrap();
        let mut events = engine.store().subscribe();

        let review = &workflow.steps[1].id;
        let (moved, from) = engine.move_task(&task.id, review, None, "ada").await.unwrap();

        assert_eq!((&moved.step_id, &from), (review, &task.step_id));
        let announced: Vec<String> =
            std::iter::from_fn(|| events.try_recv().ok()).map(|e| e.action.clone()).collect();
        assert!(announced.iter().any(|a| a == "task.moved"), "announced: {announced:?}");
        let messages = engine.store().list_messages(&session.id, None, None, 10).await.unwrap();
        let note = messages.iter().find(|m| m.content == "ada moved the task from Todo to Review");
        assert!(note.is_some(), "noted: {messages:?}");
        let last = engine.store().step_history(&task.id).await.unwrap().pop().unwrap();
        assert_eq!(&last.to_step_id, review);
        engine.shutdown().await;
    }

    /// Before issue 40 the archive handler committed the archive, then asked the engine to
    /// start the tasks waiting on it and answered that start's error: the task was archived
    /// but the caller was told it was not.
    #[tokio::test]
    async fn i40_s3_an_archive_stands_when_a_task_it_unblocks_cannot_start() {
        // Two steps: a task in the last step is done, so it could block nothing.
        let steps = vec![StepSpec::named("Todo"), StepSpec::named("Done")];
        let (dir, engine, board) = engine_with(steps).await;
        let blocker = engine.create_task(new_task(&board, "blocker")).await.unwrap().task;
        let waiting = NewTaskRequest {
            start_agent: true,
            blocked_by: vec![blocker.id.clone()],
            ..new_task(&board, "waiting")
        };
        let waiting = engine.create_task(waiting).await.unwrap();
        assert!(waiting.session.is_none(), "its start waits for its blocker");
        break_task_folders(&dir);

        let archived = engine.archive_task(&blocker.id, false).await.unwrap();

        assert!(archived.task.archived_at.is_some());
        let stored = engine.store().get_task(&blocker.id).await.unwrap();
        assert!(stored.archived_at.is_some(), "the archive stands");
        engine.shutdown().await;
    }
}
