//! Workflows with their steps (a step's actions are stored as JSON): rows, reads and writes.

use kandev_domain::ship::MergeStrategy;
use kandev_domain::task::place_at;
use kandev_domain::workflow::{Action, Feedback, Step, StepEvents, Workflow, WorkflowSpec};
use kandev_domain::{AgentProfileId, StepId, Timestamp, WorkflowId, WorkspaceId};
use serde::{Deserialize, Serialize};
use sqlx::FromRow;

use crate::db::Db;
use crate::{Result, Store, StoreError, WriteTx, tasks, workspaces};

/// Fields of a step to change; `None` keeps the current value.
#[derive(Debug, Clone, Default)]
pub struct StepPatch {
    pub name: Option<String>,
    pub color: Option<String>,
    pub prompt: Option<String>,
    pub is_start_step: Option<bool>,
    pub allow_manual_move: Option<bool>,
    pub agent_profile_id: Option<Option<AgentProfileId>>,
    pub cancel_triggers_turn_complete: Option<bool>,
    pub events: Option<StepEvents<StepId>>,
}

// ---------------------------------------------------------------- rows

#[derive(FromRow)]
struct WorkflowRow {
    id: String,
    workspace_id: String,
    name: String,
    description: String,
    template_id: Option<String>,
    created_at: i64,
    updated_at: i64,
}

impl WorkflowRow {
    fn into_workflow(self, steps: Vec<Step>) -> Workflow {
        Workflow {
            id: WorkflowId::new(self.id),
            workspace_id: WorkspaceId::new(self.workspace_id),
            name: self.name,
            description: self.description,
            template_id: self.template_id,
            steps,
            created_at: Timestamp(self.created_at),
            updated_at: Timestamp(self.updated_at),
        }
    }
}

#[derive(FromRow)]
struct StepRow {
    id: String,
    workflow_id: String,
    name: String,
    position: i64,
    color: String,
    prompt: String,
    /// 0 or 1 (a flag is an integer on both engines).
    is_start_step: i64,
    /// 0 or 1 (a flag is an integer on both engines).
    allow_manual_move: i64,
    agent_profile_id: Option<String>,
    /// 0 or 1 (a flag is an integer on both engines).
    cancel_triggers_turn_complete: i64,
    events: String,
}

impl TryFrom<StepRow> for Step {
    type Error = StoreError;

    fn try_from(r: StepRow) -> Result<Step> {
        let events = events_from_json(&r.events)
            .map_err(|e| StoreError::Corrupt(format!("step {} events: {e}", r.id)))?;
        Ok(Step {
            id: StepId::new(r.id),
            workflow_id: WorkflowId::new(r.workflow_id),
            name: r.name,
            position: r.position.try_into().unwrap_or(0),
            color: r.color,
            prompt: r.prompt,
            is_start_step: r.is_start_step != 0,
            allow_manual_move: r.allow_manual_move != 0,
            agent_profile_id: r.agent_profile_id.map(AgentProfileId::new),
            cancel_triggers_turn_complete: r.cancel_triggers_turn_complete != 0,
            events,
        })
    }
}

/// The stored JSON form of one action (`move_to_step` names a step id).
#[derive(Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ActionJson {
    ResetAgentContext,
    EnablePlanMode,
    DisablePlanMode,
    SetSessionMode { mode_id: String },
    AutoStartAgent,
    MoveToNext,
    MoveToPrevious,
    MoveToStep { step_id: String },
    Push,
    CreatePullRequest,
    Merge { strategy: StrategyJson },
    Rebase,
    SendFeedback { max_rounds: u32, include_bots: bool },
    AutoMerge { strategy: StrategyJson },
    CommentIssue,
    CloseIssue,
    StartAttempts { count: u32 },
}

/// The stored form of a merge action's strategy.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum StrategyJson {
    Merge,
    Squash,
    FastForward,
}

impl From<MergeStrategy> for StrategyJson {
    fn from(s: MergeStrategy) -> Self {
        match s {
            MergeStrategy::Merge => StrategyJson::Merge,
            MergeStrategy::Squash => StrategyJson::Squash,
            MergeStrategy::FastForward => StrategyJson::FastForward,
        }
    }
}

impl From<StrategyJson> for MergeStrategy {
    fn from(s: StrategyJson) -> Self {
        match s {
            StrategyJson::Merge => MergeStrategy::Merge,
            StrategyJson::Squash => MergeStrategy::Squash,
            StrategyJson::FastForward => MergeStrategy::FastForward,
        }
    }
}

#[derive(Serialize, Deserialize, Default)]
struct EventsJson {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    on_enter: Vec<ActionJson>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    on_turn_start: Vec<ActionJson>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    on_turn_complete: Vec<ActionJson>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    on_exit: Vec<ActionJson>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    on_pr_merged: Vec<ActionJson>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    on_pr_closed: Vec<ActionJson>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    on_pr_checks_failed: Vec<ActionJson>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    on_pr_checks_passed: Vec<ActionJson>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    on_pr_review: Vec<ActionJson>,
}

fn action_to_json(a: &Action<StepId>) -> ActionJson {
    match a {
        Action::ResetAgentContext => ActionJson::ResetAgentContext,
        Action::EnablePlanMode => ActionJson::EnablePlanMode,
        Action::DisablePlanMode => ActionJson::DisablePlanMode,
        Action::SetSessionMode { mode_id } => {
            ActionJson::SetSessionMode { mode_id: mode_id.clone() }
        }
        Action::AutoStartAgent => ActionJson::AutoStartAgent,
        Action::MoveToNext => ActionJson::MoveToNext,
        Action::MoveToPrevious => ActionJson::MoveToPrevious,
        Action::MoveToStep(id) => ActionJson::MoveToStep { step_id: id.to_string() },
        Action::Push => ActionJson::Push,
        Action::CreatePullRequest => ActionJson::CreatePullRequest,
        Action::Merge { strategy } => ActionJson::Merge { strategy: (*strategy).into() },
        Action::Rebase => ActionJson::Rebase,
        Action::SendFeedback(f) => {
            ActionJson::SendFeedback { max_rounds: f.max_rounds, include_bots: f.include_bots }
        }
        Action::AutoMerge { strategy } => ActionJson::AutoMerge { strategy: (*strategy).into() },
        Action::CommentIssue => ActionJson::CommentIssue,
        Action::StartAttempts { count } => ActionJson::StartAttempts { count: *count },
        Action::CloseIssue => ActionJson::CloseIssue,
    }
}

fn action_from_json(a: ActionJson) -> Action<StepId> {
    match a {
        ActionJson::ResetAgentContext => Action::ResetAgentContext,
        ActionJson::EnablePlanMode => Action::EnablePlanMode,
        ActionJson::DisablePlanMode => Action::DisablePlanMode,
        ActionJson::SetSessionMode { mode_id } => Action::SetSessionMode { mode_id },
        ActionJson::AutoStartAgent => Action::AutoStartAgent,
        ActionJson::MoveToNext => Action::MoveToNext,
        ActionJson::MoveToPrevious => Action::MoveToPrevious,
        ActionJson::MoveToStep { step_id } => Action::MoveToStep(StepId::new(step_id)),
        ActionJson::Push => Action::Push,
        ActionJson::CreatePullRequest => Action::CreatePullRequest,
        ActionJson::Merge { strategy } => Action::Merge { strategy: strategy.into() },
        ActionJson::Rebase => Action::Rebase,
        ActionJson::SendFeedback { max_rounds, include_bots } => {
            Action::SendFeedback(Feedback { max_rounds, include_bots })
        }
        ActionJson::AutoMerge { strategy } => Action::AutoMerge { strategy: strategy.into() },
        ActionJson::CommentIssue => Action::CommentIssue,
        ActionJson::StartAttempts { count } => Action::StartAttempts { count },
        ActionJson::CloseIssue => Action::CloseIssue,
    }
}

fn events_to_json(events: &StepEvents<StepId>) -> String {
    let list = |v: &[Action<StepId>]| v.iter().map(action_to_json).collect();
    let json = EventsJson {
        on_enter: list(&events.on_enter),
        on_turn_start: list(&events.on_turn_start),
        on_turn_complete: list(&events.on_turn_complete),
        on_exit: list(&events.on_exit),
        on_pr_merged: list(&events.on_pr_merged),
        on_pr_closed: list(&events.on_pr_closed),
        on_pr_checks_failed: list(&events.on_pr_checks_failed),
        on_pr_checks_passed: list(&events.on_pr_checks_passed),
        on_pr_review: list(&events.on_pr_review),
    };
    serde_json::to_string(&json).unwrap_or_else(|_| "{}".into())
}

fn events_from_json(text: &str) -> std::result::Result<StepEvents<StepId>, serde_json::Error> {
    let json: EventsJson = serde_json::from_str(text)?;
    let list = |v: Vec<ActionJson>| v.into_iter().map(action_from_json).collect();
    Ok(StepEvents {
        on_enter: list(json.on_enter),
        on_turn_start: list(json.on_turn_start),
        on_turn_complete: list(json.on_turn_complete),
        on_exit: list(json.on_exit),
        on_pr_merged: list(json.on_pr_merged),
        on_pr_closed: list(json.on_pr_closed),
        on_pr_checks_failed: list(json.on_pr_checks_failed),
        on_pr_checks_passed: list(json.on_pr_checks_passed),
        on_pr_review: list(json.on_pr_review),
    })
}

// ---------------------------------------------------------------- reads

async fn steps(mut db: Db<'_>, workflow_id: &str) -> Result<Vec<Step>> {
    crate::sql::query_as::<StepRow>(
        "SELECT * FROM workflow_steps WHERE workflow_id = ? ORDER BY position",
    )
    .bind(workflow_id)
    .fetch_all(&mut db)
    .await?
    .into_iter()
    .map(Step::try_from)
    .collect()
}

/// The workflow `id` with its steps in order, or `NotFound`.
async fn get(mut db: Db<'_>, id: &WorkflowId) -> Result<Workflow> {
    let row = crate::sql::query_as::<WorkflowRow>("SELECT * FROM workflows WHERE id = ?")
        .bind(id.as_str())
        .fetch_optional(&mut db)
        .await?
        .ok_or_else(|| StoreError::not_found("workflow", id.as_str()))?;
    let steps = steps(db, id.as_str()).await?;
    Ok(row.into_workflow(steps))
}

/// The id of the workflow a step belongs to, or `NotFound` for the step.
async fn workflow_id_of_step(mut db: Db<'_>, step_id: &StepId) -> Result<WorkflowId> {
    let workflow_id: Option<String> =
        crate::sql::query_scalar("SELECT workflow_id FROM workflow_steps WHERE id = ?")
            .bind(step_id.as_str())
            .fetch_optional(&mut db)
            .await?;
    workflow_id.map(WorkflowId::new).ok_or_else(|| StoreError::not_found("step", step_id.as_str()))
}

/// Checks that a step exists and belongs to `workflow_id`. Writes call it inside their
/// transaction: callers validate against a workflow they read earlier, and a concurrent
/// `workflow.step.delete` may have committed since.
pub(crate) async fn check_step_of(
    db: Db<'_>,
    step_id: &StepId,
    workflow_id: &WorkflowId,
) -> Result<()> {
    let owner = workflow_id_of_step(db, step_id).await?;
    if &owner != workflow_id {
        return Err(StoreError::Conflict(format!(
            "step {step_id} is not a step of workflow {workflow_id}"
        )));
    }
    Ok(())
}

/// The workspace of a workflow, or `NotFound` for the workflow.
pub(crate) async fn workspace_of(mut db: Db<'_>, workflow_id: &WorkflowId) -> Result<String> {
    crate::sql::query_scalar("SELECT workspace_id FROM workflows WHERE id = ?")
        .bind(workflow_id.as_str())
        .fetch_optional(&mut db)
        .await?
        .ok_or_else(|| StoreError::not_found("workflow", workflow_id.as_str()))
}

impl Store {
    pub async fn list_workflows(&self, workspace_id: &WorkspaceId) -> Result<Vec<Workflow>> {
        let rows = crate::sql::query_as::<WorkflowRow>(
            "SELECT * FROM workflows WHERE workspace_id = ? ORDER BY created_at, id",
        )
        .bind(workspace_id.as_str())
        .fetch_all(&self.read)
        .await?;
        let mut workflows = Vec::with_capacity(rows.len());
        for row in rows {
            let steps = steps(self.db(), &row.id).await?;
            workflows.push(row.into_workflow(steps));
        }
        Ok(workflows)
    }

    pub async fn get_workflow(&self, id: &WorkflowId) -> Result<Workflow> {
        get(self.db(), id).await
    }

    /// The workflow a step belongs to.
    pub async fn workflow_of_step(&self, step_id: &StepId) -> Result<Workflow> {
        let workflow_id = workflow_id_of_step(self.db(), step_id).await?;
        self.get_workflow(&workflow_id).await
    }
}

// ---------------------------------------------------------------- writes

impl WriteTx {
    pub async fn get_workflow(&mut self, id: &WorkflowId) -> Result<Workflow> {
        get(self.db(), id).await
    }

    /// Creates a workflow and its steps from a spec, resolving step-index targets to ids.
    pub async fn insert_workflow(
        &mut self,
        workspace_id: &WorkspaceId,
        spec: &WorkflowSpec,
        template_id: Option<&str>,
    ) -> Result<Workflow> {
        workspaces::get(self.db(), workspace_id.as_str()).await?;
        let (id, now) = (self.new_id(), self.now().millis());
        crate::sql::query(
            "INSERT INTO workflows (id, workspace_id, name, description, template_id, created_at, updated_at) \
             VALUES (?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(&id)
        .bind(workspace_id.as_str())
        .bind(&spec.name)
        .bind(&spec.description)
        .bind(template_id)
        .bind(now)
        .bind(now)
        .execute(self.conn())
        .await?;
        let step_ids: Vec<StepId> = spec.steps.iter().map(|_| StepId::new(self.new_id())).collect();
        for (position, (step, step_id)) in spec.steps.iter().zip(&step_ids).enumerate() {
            let events = step.events.clone().map_targets(|index| {
                step_ids.get(index).cloned().ok_or_else(|| {
                    StoreError::Conflict(format!(
                        "step {:?} moves to a step that does not exist",
                        step.name
                    ))
                })
            })?;
            crate::sql::query(
                "INSERT INTO workflow_steps (id, workflow_id, name, position, color, prompt, is_start_step, \
                 allow_manual_move, cancel_triggers_turn_complete, events) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            )
            .bind(step_id.as_str())
            .bind(&id)
            .bind(&step.name)
            .bind(position as i64)
            .bind(&step.color)
            .bind(&step.prompt)
            .bind(step.is_start_step)
            .bind(step.allow_manual_move)
            .bind(step.cancel_triggers_turn_complete)
            .bind(events_to_json(&events))
            .execute(self.conn())
            .await?;
        }
        self.get_workflow(&WorkflowId::new(id)).await
    }

    pub async fn update_workflow(
        &mut self,
        id: &WorkflowId,
        name: Option<&str>,
        description: Option<&str>,
    ) -> Result<Workflow> {
        let current = self.get_workflow(id).await?;
        let now = self.now().millis();
        crate::sql::query(
            "UPDATE workflows SET name = ?, description = ?, updated_at = ? WHERE id = ?",
        )
        .bind(name.unwrap_or(&current.name))
        .bind(description.unwrap_or(&current.description))
        .bind(now)
        .bind(id.as_str())
        .execute(self.conn())
        .await?;
        self.get_workflow(id).await
    }

    /// Deletes a workflow with its steps and tasks; returns it for publication.
    pub async fn delete_workflow(&mut self, id: &WorkflowId) -> Result<Workflow> {
        let current = self.get_workflow(id).await?;
        crate::sql::query("DELETE FROM workflows WHERE id = ?")
            .bind(id.as_str())
            .execute(self.conn())
            .await?;
        Ok(current)
    }

    /// Adds a step at `position` (end when `None`); returns the updated workflow.
    pub async fn insert_step(
        &mut self,
        workflow_id: &WorkflowId,
        name: &str,
        position: Option<usize>,
    ) -> Result<(Workflow, StepId)> {
        let workflow = self.get_workflow(workflow_id).await?;
        let step_id = StepId::new(self.new_id());
        crate::sql::query(
            "INSERT INTO workflow_steps (id, workflow_id, name, position) VALUES (?, ?, ?, ?)",
        )
        .bind(step_id.as_str())
        .bind(workflow_id.as_str())
        .bind(name)
        .bind(workflow.steps.len() as i64)
        .execute(self.conn())
        .await?;
        let others: Vec<StepId> = workflow.steps.iter().map(|s| s.id.clone()).collect();
        let order = place_at(others, step_id.clone(), position);
        self.write_step_order(&order).await?;
        self.touch_workflow(workflow_id).await?;
        Ok((self.get_workflow(workflow_id).await?, step_id))
    }

    pub async fn update_step(&mut self, step_id: &StepId, patch: &StepPatch) -> Result<Workflow> {
        let workflow_id = workflow_id_of_step(self.db(), step_id).await?;
        let workflow = self.get_workflow(&workflow_id).await?;
        let current = workflow
            .step(step_id)
            .cloned()
            .ok_or_else(|| StoreError::not_found("step", step_id.as_str()))?;
        if patch.is_start_step == Some(true) {
            crate::sql::query("UPDATE workflow_steps SET is_start_step = 0 WHERE workflow_id = ?")
                .bind(workflow_id.as_str())
                .execute(self.conn())
                .await?;
        }
        let profile = match &patch.agent_profile_id {
            Some(p) => p.clone(),
            None => current.agent_profile_id.clone(),
        };
        crate::sql::query(
            "UPDATE workflow_steps SET name = ?, color = ?, prompt = ?, is_start_step = ?, \
             allow_manual_move = ?, agent_profile_id = ?, cancel_triggers_turn_complete = ?, events = ? \
             WHERE id = ?",
        )
        .bind(patch.name.as_ref().unwrap_or(&current.name))
        .bind(patch.color.as_ref().unwrap_or(&current.color))
        .bind(patch.prompt.as_ref().unwrap_or(&current.prompt))
        .bind(patch.is_start_step.unwrap_or(current.is_start_step))
        .bind(patch.allow_manual_move.unwrap_or(current.allow_manual_move))
        .bind(profile.as_ref().map(|p| p.as_str()))
        .bind(patch.cancel_triggers_turn_complete.unwrap_or(current.cancel_triggers_turn_complete))
        .bind(events_to_json(patch.events.as_ref().unwrap_or(&current.events)))
        .bind(step_id.as_str())
        .execute(self.conn())
        .await?;
        self.touch_workflow(&workflow_id).await?;
        self.get_workflow(&workflow_id).await
    }

    /// Deletes an empty step. Refused while tasks are in it.
    pub async fn delete_step(&mut self, step_id: &StepId) -> Result<Workflow> {
        let workflow_id = workflow_id_of_step(self.db(), step_id).await?;
        let tasks = tasks::count_in_step(self.db(), step_id).await?;
        if tasks > 0 {
            return Err(StoreError::Conflict(format!(
                "the step still holds {tasks} task(s); move or delete them first"
            )));
        }
        crate::sql::query("DELETE FROM workflow_steps WHERE id = ?")
            .bind(step_id.as_str())
            .execute(self.conn())
            .await?;
        let remaining: Vec<StepId> =
            self.get_workflow(&workflow_id).await?.steps.into_iter().map(|s| s.id).collect();
        self.write_step_order(&remaining).await?;
        self.touch_workflow(&workflow_id).await?;
        self.get_workflow(&workflow_id).await
    }

    /// Sets the step order; `order` must hold exactly the workflow's step ids.
    pub async fn reorder_steps(
        &mut self,
        workflow_id: &WorkflowId,
        order: &[StepId],
    ) -> Result<Workflow> {
        let workflow = self.get_workflow(workflow_id).await?;
        let mut current: Vec<&StepId> = workflow.steps.iter().map(|s| &s.id).collect();
        let mut wanted: Vec<&StepId> = order.iter().collect();
        current.sort();
        wanted.sort();
        if current != wanted {
            return Err(StoreError::Conflict(
                "the new order must list every step of the workflow exactly once".into(),
            ));
        }
        self.write_step_order(order).await?;
        self.touch_workflow(workflow_id).await?;
        self.get_workflow(workflow_id).await
    }

    async fn write_step_order(&mut self, order: &[StepId]) -> Result<()> {
        for (position, id) in order.iter().enumerate() {
            crate::sql::query("UPDATE workflow_steps SET position = ? WHERE id = ?")
                .bind(position as i64)
                .bind(id.as_str())
                .execute(self.conn())
                .await?;
        }
        Ok(())
    }

    async fn touch_workflow(&mut self, id: &WorkflowId) -> Result<()> {
        let now = self.now().millis();
        crate::sql::query("UPDATE workflows SET updated_at = ? WHERE id = ?")
            .bind(now)
            .bind(id.as_str())
            .execute(self.conn())
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_events_json_round_trips() {
        let events = StepEvents {
            on_enter: vec![
                Action::ResetAgentContext,
                Action::SetSessionMode { mode_id: "plan".into() },
                Action::AutoStartAgent,
                Action::Rebase,
                Action::Push,
            ],
            on_turn_start: vec![Action::MoveToPrevious],
            on_turn_complete: vec![
                Action::MoveToStep(StepId::new("s-3")),
                Action::DisablePlanMode,
                Action::Merge { strategy: MergeStrategy::FastForward },
                Action::CreatePullRequest,
            ],
            on_exit: vec![Action::DisablePlanMode],
            on_pr_merged: vec![Action::CommentIssue, Action::CloseIssue, Action::MoveToNext],
            on_pr_closed: vec![Action::MoveToStep(StepId::new("s-1"))],
            on_pr_checks_failed: vec![Action::SendFeedback(Feedback {
                max_rounds: 5,
                include_bots: true,
            })],
            on_pr_checks_passed: vec![Action::AutoMerge { strategy: MergeStrategy::Squash }],
            on_pr_review: vec![Action::SendFeedback(Feedback::default()), Action::MoveToNext],
        };
        let text = events_to_json(&events);
        assert_eq!(events_from_json(&text).unwrap(), events);
        assert_eq!(events_from_json("{}").unwrap(), StepEvents::default());
    }
}
