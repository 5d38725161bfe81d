//! Task writes: create, update, move, archive, delete, links between tasks, and the fields
//! the engine sets (git summary, primary session, waiting auto-start).

use std::collections::HashMap;

use kandev_domain::needs_you::NeedsYou;
use kandev_domain::ship::{GitSummary, PrState};
use kandev_domain::task::{Task, TaskState, blocker_cycle, parent_cycle, place_at};
use kandev_domain::{RepositoryId, SessionId, StepId, TaskId};

use super::{NewTask, TaskPatch, get};
use crate::messages::json_rows;
use crate::{Result, StoreError, WriteTx, workflows};

/// How many open cards a step holds (a new card's position); by `tasks_by_step`.
const OPEN_IN_STEP: &str = "SELECT COUNT(*) FROM tasks WHERE step_id = ? AND archived_at IS NULL";

/// A step's open cards with their positions, in board order, but one (the card moving in).
const OTHERS_IN_STEP: &str = "SELECT id, position FROM tasks WHERE step_id = ? AND id != ? \
    AND archived_at IS NULL ORDER BY position, created_at, id";

/// A step's open cards with their positions, in board order (to renumber it).
const CARDS_OF_STEP: &str = "SELECT id, position FROM tasks WHERE step_id = ? \
    AND archived_at IS NULL ORDER BY position, created_at, id";

impl WriteTx {
    /// Records a task's git summary (what its card shows), replacing the last one.
    pub async fn set_git_summary(&mut self, task_id: &TaskId, summary: &GitSummary) -> Result<()> {
        crate::sql::query(
            "INSERT INTO task_git_summaries (task_id, ahead, behind, dirty, conflicts, pr_state, \
             updated_at, merged) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (task_id) DO UPDATE \
             SET ahead = excluded.ahead, behind = excluded.behind, dirty = excluded.dirty, \
             conflicts = excluded.conflicts, pr_state = excluded.pr_state, \
             updated_at = excluded.updated_at, merged = excluded.merged",
        )
        .bind(task_id.as_str())
        .bind(i64::from(summary.ahead))
        .bind(i64::from(summary.behind))
        .bind(i64::from(summary.dirty))
        .bind(i64::from(summary.conflicts))
        .bind(summary.pr_state.map(PrState::as_str))
        .bind(self.now().millis())
        .bind(i64::from(summary.merged))
        .execute(self.conn())
        .await?;
        Ok(())
    }

    pub async fn get_task(&mut self, id: &TaskId) -> Result<Task> {
        get(self.db(), id.as_str()).await
    }

    /// How many unarchived tasks `step_id` holds (the position at its end).
    async fn open_tasks_in(&mut self, step_id: &StepId) -> Result<i64> {
        let n = crate::sql::query_scalar(OPEN_IN_STEP)
            .bind(step_id.as_str())
            .fetch_one(self.conn())
            .await?;
        Ok(n)
    }

    /// Creates a task at the end of its step and records its entry in the step history.
    pub async fn insert_task(&mut self, new: &NewTask, actor: &str) -> Result<Task> {
        let workspace_id = workflows::workspace_of(self.db(), &new.workflow_id).await?;
        workflows::check_step_of(self.db(), &new.step_id, &new.workflow_id).await?;
        let position = self.open_tasks_in(&new.step_id).await?;
        let (id, now) = (self.new_id(), self.now().millis());
        crate::sql::query(
            "INSERT INTO tasks (id, workspace_id, workflow_id, step_id, title, description, state, position, \
             agent_profile_id, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(&id)
        .bind(&workspace_id)
        .bind(new.workflow_id.as_str())
        .bind(new.step_id.as_str())
        .bind(&new.title)
        .bind(&new.description)
        .bind(TaskState::Todo.as_str())
        .bind(position)
        .bind(new.agent_profile_id.as_ref().map(|p| p.as_str()))
        .bind(now)
        .bind(now)
        .execute(self.conn())
        .await?;
        let task_id = TaskId::new(id);
        self.write_task_repositories(&task_id, &new.repository_ids).await?;
        self.record_step_change(&task_id, None, &new.step_id, "created", actor).await?;
        self.get_task(&task_id).await
    }

    pub async fn update_task(&mut self, id: &TaskId, patch: &TaskPatch) -> Result<Task> {
        let current = self.get_task(id).await?;
        let now = self.now().millis();
        let profile = match &patch.agent_profile_id {
            Some(p) => p.clone(),
            None => current.agent_profile_id.clone(),
        };
        crate::sql::query(
            "UPDATE tasks SET title = ?, description = ?, state = ?, needs_you = ?, \
             agent_profile_id = ?, updated_at = ? WHERE id = ?",
        )
        .bind(patch.title.as_ref().unwrap_or(&current.title))
        .bind(patch.description.as_ref().unwrap_or(&current.description))
        .bind(patch.state.unwrap_or(current.state).as_str())
        .bind(patch.needs_you.unwrap_or(current.needs_you).map(NeedsYou::as_str))
        .bind(profile.as_ref().map(|p| p.as_str()))
        .bind(now)
        .bind(id.as_str())
        .execute(self.conn())
        .await?;
        if let Some(repository_ids) = &patch.repository_ids {
            crate::sql::query("DELETE FROM task_repositories WHERE task_id = ?")
                .bind(id.as_str())
                .execute(self.conn())
                .await?;
            self.write_task_repositories(id, repository_ids).await?;
        }
        self.get_task(id).await
    }

    async fn write_task_repositories(
        &mut self,
        task_id: &TaskId,
        repository_ids: &[RepositoryId],
    ) -> Result<()> {
        for (position, repository_id) in repository_ids.iter().enumerate() {
            crate::sql::query(
                "INSERT INTO task_repositories (task_id, repository_id, position) VALUES (?, ?, ?)",
            )
            .bind(task_id.as_str())
            .bind(repository_id.as_str())
            .bind(position as i64)
            .execute(self.conn())
            .await?;
        }
        Ok(())
    }

    /// Moves a task to `position` (end when `None`) in `to_step` of its own workflow,
    /// renumbering the affected steps. Records the move in the step history when the step
    /// changes. A step deleted since the caller looked is `NotFound` (issue 12, finding 9).
    pub async fn move_task(
        &mut self,
        id: &TaskId,
        to_step: &StepId,
        position: Option<usize>,
        trigger: &str,
        actor: &str,
    ) -> Result<Task> {
        let task = self.get_task(id).await?;
        workflows::check_step_of(self.db(), to_step, &task.workflow_id).await?;
        let others: Vec<(String, i64)> = crate::sql::query_as(OTHERS_IN_STEP)
            .bind(to_step.as_str())
            .bind(id.as_str())
            .fetch_all(self.conn())
            .await?;
        let mut positions: HashMap<String, i64> = others.iter().cloned().collect();
        // The moved task always gets its position written (it may come from another step).
        positions.insert(id.as_str().to_owned(), -1);
        let others = others.into_iter().map(|(id, _)| id).collect();
        let order = place_at(others, id.as_str().to_owned(), position);
        let now = self.now().millis();
        crate::sql::query("UPDATE tasks SET step_id = ?, updated_at = ? WHERE id = ?")
            .bind(to_step.as_str())
            .bind(now)
            .bind(id.as_str())
            .execute(self.conn())
            .await?;
        self.write_task_order(&order, &positions).await?;
        if &task.step_id != to_step {
            self.renumber_step(&task.step_id).await?;
            self.record_step_change(id, Some(&task.step_id), to_step, trigger, actor).await?;
        }
        self.get_task(id).await
    }

    /// Gives the tasks of `order` the positions 0, 1, … in that order, writing only those
    /// whose position in `current` differs, in one statement: a step of thousands of cards
    /// is renumbered in one round trip, and a move to its end writes one row.
    async fn write_task_order(
        &mut self,
        order: &[String],
        current: &HashMap<String, i64>,
    ) -> Result<()> {
        let changed: Vec<(&str, i64)> = (0_i64..)
            .zip(order)
            .filter(|(position, id)| current.get(*id) != Some(position))
            .map(|(position, id)| (id.as_str(), position))
            .collect();
        if changed.is_empty() {
            return Ok(());
        }
        crate::sql::query(
            "UPDATE tasks SET position = CAST(j.value->>1 AS BIGINT) FROM json_each(?) AS j \
             WHERE tasks.id = j.value->>0",
        )
        .bind(json_rows(&changed, self.conn().dialect())?)
        .execute(self.conn())
        .await?;
        Ok(())
    }

    async fn renumber_step(&mut self, step_id: &StepId) -> Result<()> {
        let rows: Vec<(String, i64)> = crate::sql::query_as(CARDS_OF_STEP)
            .bind(step_id.as_str())
            .fetch_all(self.conn())
            .await?;
        let order: Vec<String> = rows.iter().map(|(id, _)| id.clone()).collect();
        self.write_task_order(&order, &rows.into_iter().collect()).await
    }

    async fn record_step_change(
        &mut self,
        task_id: &TaskId,
        from: Option<&StepId>,
        to: &StepId,
        trigger: &str,
        actor: &str,
    ) -> Result<()> {
        let now = self.now().millis();
        crate::sql::query(
            "INSERT INTO task_step_history (task_id, from_step_id, to_step_id, trigger, actor, at) \
             VALUES (?, ?, ?, ?, ?, ?)",
        )
        .bind(task_id.as_str())
        .bind(from.map(|s| s.as_str()))
        .bind(to.as_str())
        .bind(trigger)
        .bind(actor)
        .bind(now)
        .execute(self.conn())
        .await?;
        Ok(())
    }

    /// Archives a task (hidden from the board, kept in the database).
    pub async fn archive_task(&mut self, id: &TaskId) -> Result<Task> {
        let task = self.get_task(id).await?;
        if task.archived_at.is_some() {
            return Ok(task);
        }
        let now = self.now().millis();
        crate::sql::query("UPDATE tasks SET archived_at = ?, updated_at = ? WHERE id = ?")
            .bind(now)
            .bind(now)
            .bind(id.as_str())
            .execute(self.conn())
            .await?;
        self.renumber_step(&task.step_id).await?;
        self.get_task(id).await
    }

    /// Takes a task out of the archive (issue 14: archive's Undo), at the end of its step.
    pub async fn unarchive_task(&mut self, id: &TaskId) -> Result<Task> {
        let task = self.get_task(id).await?;
        if task.archived_at.is_none() {
            return Ok(task);
        }
        let position = self.open_tasks_in(&task.step_id).await?;
        crate::sql::query(
            "UPDATE tasks SET archived_at = NULL, position = ?, updated_at = ? WHERE id = ?",
        )
        .bind(position)
        .bind(self.now().millis())
        .bind(id.as_str())
        .execute(self.conn())
        .await?;
        self.get_task(id).await
    }

    /// Deletes a task; returns it for publication.
    pub async fn delete_task(&mut self, id: &TaskId) -> Result<Task> {
        let task = self.get_task(id).await?;
        crate::sql::query("DELETE FROM tasks WHERE id = ?")
            .bind(id.as_str())
            .execute(self.conn())
            .await?;
        self.renumber_step(&task.step_id).await?;
        Ok(task)
    }

    /// Sets a task's parent (`Some(None)` clears it) and its blockers (`Some` replaces them),
    /// refusing tasks of another workspace, the task itself and cycles, which the error names.
    pub async fn set_task_links(
        &mut self,
        id: &TaskId,
        parent: Option<Option<&TaskId>>,
        blockers: Option<&[TaskId]>,
    ) -> Result<()> {
        let task = self.get_task(id).await?;
        if let Some(parent) = parent {
            if let Some(parent) = parent {
                let found = self.linked_task("parent_id", &task, parent).await?;
                let rows: Vec<(String, String)> = crate::sql::query_as(
                    "SELECT id, parent_id FROM tasks WHERE workspace_id = ? AND parent_id IS NOT NULL",
                )
                .bind(task.workspace_id.as_str())
                .fetch_all(self.conn())
                .await?;
                let parents = rows.into_iter().map(|(t, p)| (TaskId::new(t), TaskId::new(p)));
                let parents = parents.filter(|(t, _)| t != id).collect();
                if let Some(cycle) = parent_cycle(&parents, id, &found.id) {
                    let shown = self.cycle_text(&cycle).await?;
                    return Err(StoreError::Invalid(format!(
                        "that parent would make a cycle of subtasks: {shown}"
                    )));
                }
            }
            crate::sql::query("UPDATE tasks SET parent_id = ? WHERE id = ?")
                .bind(parent.map(|p| p.as_str()))
                .bind(id.as_str())
                .execute(self.conn())
                .await?;
        }
        if let Some(blockers) = blockers {
            let mut unique: Vec<TaskId> = vec![];
            for blocker in blockers {
                let found = self.linked_task("blocked_by", &task, blocker).await?;
                if !unique.contains(&found.id) {
                    unique.push(found.id);
                }
            }
            let rows: Vec<(String, String)> = crate::sql::query_as(
                "SELECT b.task_id, b.blocker_id FROM task_blockers b \
                 JOIN tasks t ON t.id = b.task_id WHERE t.workspace_id = ?",
            )
            .bind(task.workspace_id.as_str())
            .fetch_all(self.conn())
            .await?;
            let edges: Vec<(TaskId, TaskId)> =
                rows.into_iter().map(|(t, b)| (TaskId::new(t), TaskId::new(b))).collect();
            if let Some(cycle) = blocker_cycle(&edges, id, &unique) {
                let shown = self.cycle_text(&cycle).await?;
                return Err(StoreError::Invalid(format!(
                    "those blockers would make a dependency cycle: {shown}; remove one of these \
                     dependencies"
                )));
            }
            crate::sql::query("DELETE FROM task_blockers WHERE task_id = ?")
                .bind(id.as_str())
                .execute(self.conn())
                .await?;
            for blocker in &unique {
                crate::sql::query("INSERT INTO task_blockers (task_id, blocker_id) VALUES (?, ?)")
                    .bind(id.as_str())
                    .bind(blocker.as_str())
                    .execute(self.conn())
                    .await?;
            }
        }
        Ok(())
    }

    /// A task named in `field` of `task`: another task of the same workspace.
    async fn linked_task(&mut self, field: &str, task: &Task, other: &TaskId) -> Result<Task> {
        if other == &task.id {
            return Err(StoreError::Invalid(format!("{field}: a task cannot name itself")));
        }
        let found = match self.get_task(other).await {
            Ok(found) => found,
            Err(StoreError::NotFound { .. }) => {
                return Err(StoreError::Invalid(format!("{field}: there is no task {other}")));
            }
            Err(err) => return Err(err),
        };
        if found.workspace_id != task.workspace_id {
            return Err(StoreError::Invalid(format!(
                "{field}: task {other} belongs to another workspace"
            )));
        }
        Ok(found)
    }

    /// `"a" → "b" → "a"`: a cycle by the tasks' titles.
    async fn cycle_text(&mut self, cycle: &[TaskId]) -> Result<String> {
        let mut names = vec![];
        for id in cycle {
            let title = match self.get_task(id).await {
                Ok(task) => format!("{:?} ({id})", task.title),
                Err(_) => id.to_string(),
            };
            names.push(title);
        }
        Ok(names.join(" → "))
    }

    /// The tasks that name `id` as parent or blocker (they change when it is deleted).
    pub async fn dependents(&mut self, id: &TaskId) -> Result<Vec<TaskId>> {
        let rows: Vec<String> = crate::sql::query_scalar(
            "SELECT task_id FROM task_blockers WHERE blocker_id = ? \
             UNION SELECT id FROM tasks WHERE parent_id = ?",
        )
        .bind(id.as_str())
        .bind(id.as_str())
        .fetch_all(self.conn())
        .await?;
        Ok(rows.into_iter().map(TaskId::new).collect())
    }

    /// Records how many agents in a row led to a task ([`Store::task_agent_depth`]).
    pub async fn set_task_agent_depth(&mut self, id: &TaskId, depth: u32) -> Result<()> {
        crate::sql::query("UPDATE tasks SET agent_depth = ? WHERE id = ?")
            .bind(i64::from(depth))
            .bind(id.as_str())
            .execute(self.conn())
            .await?;
        Ok(())
    }

    /// Marks (or clears) a task's auto-start as waiting for its blockers.
    pub async fn set_start_waiting(&mut self, id: &TaskId, waiting: bool) -> Result<()> {
        crate::sql::query("UPDATE tasks SET start_waiting = ? WHERE id = ?")
            .bind(i64::from(waiting))
            .bind(id.as_str())
            .execute(self.conn())
            .await?;
        Ok(())
    }

    /// Clears the waiting auto-start of a task; `true` when it was waiting (so exactly one
    /// caller runs it).
    pub async fn take_start_waiting(&mut self, id: &TaskId) -> Result<bool> {
        let done = crate::sql::query(
            "UPDATE tasks SET start_waiting = 0 WHERE id = ? AND start_waiting = 1",
        )
        .bind(id.as_str())
        .execute(self.conn())
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Makes `session_id` the task's primary session (a step with its own agent profile).
    pub async fn set_primary_session(
        &mut self,
        task_id: &TaskId,
        session_id: &SessionId,
    ) -> Result<()> {
        crate::sql::query("UPDATE tasks SET primary_session_id = ?, updated_at = ? WHERE id = ?")
            .bind(session_id.as_str())
            .bind(self.now().millis())
            .bind(task_id.as_str())
            .execute(self.conn())
            .await?;
        Ok(())
    }

    /// Makes a new session the task's primary session if the task has none yet.
    pub(crate) async fn adopt_primary_session(
        &mut self,
        task_id: &TaskId,
        session_id: &str,
    ) -> Result<()> {
        crate::sql::query("UPDATE tasks SET primary_session_id = ?, updated_at = ? WHERE id = ? AND primary_session_id IS NULL")
            .bind(session_id)
            .bind(self.now().millis())
            .bind(task_id.as_str())
            .execute(self.conn())
            .await?;
        Ok(())
    }

    /// After `deleted` was deleted: if it was the task's primary session, the task's oldest
    /// remaining session becomes primary (none when there is none).
    pub(crate) async fn replace_primary_session(
        &mut self,
        task_id: &TaskId,
        deleted: &SessionId,
    ) -> Result<()> {
        let now = self.now().millis();
        crate::sql::query(
            "UPDATE tasks SET primary_session_id = (SELECT id FROM sessions WHERE task_id = tasks.id \
             ORDER BY created_at LIMIT 1), updated_at = ? WHERE id = ? AND primary_session_id = ?",
        )
        .bind(now)
        .bind(task_id.as_str())
        .bind(deleted.as_str())
        .execute(self.conn())
        .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{CARDS_OF_STEP, OPEN_IN_STEP, OTHERS_IN_STEP};
    use crate::Store;
    use crate::sql::{Dialect, QueryBuilder};

    /// Issue 53: a task's creation and a move read only the steps they touch, by the step
    /// index, not every card of the board (which made creation slower as a board grew).
    #[tokio::test]
    async fn i53_a_step_s_cards_are_read_by_the_step_index() {
        let store = Store::in_memory().await.unwrap();
        for statement in [OPEN_IN_STEP, OTHERS_IN_STEP, CARDS_OF_STEP] {
            let mut q = QueryBuilder::new(Dialect::Sqlite, "EXPLAIN QUERY PLAN ");
            let mut parts = statement.split('?');
            q.push(parts.next().unwrap_or_default());
            for part in parts {
                q.push_bind("s").push(part);
            }
            let rows: Vec<(i64, i64, i64, String)> =
                q.build_query_as().fetch_all(&store.read).await.unwrap();
            let plan: Vec<String> = rows.into_iter().map(|r| r.3).collect();
            assert!(
                plan.iter().any(|l| l.contains("USING") && l.contains("tasks_by_step")),
                "{plan:?}"
            );
            assert!(!plan.iter().any(|l| l.starts_with("SCAN")), "{statement}: {plan:?}");
        }
    }
}
