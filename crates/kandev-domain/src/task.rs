//! Tasks: the cards on a board, and the rule for placing a task at a position in a step.

use crate::{
    AgentProfileId, RepositoryId, SessionId, StepId, TaskId, Timestamp, WorkflowId, WorkspaceId,
};

/// The lifecycle of a task as shown on its card, independent of which step it is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TaskState {
    /// Nothing has run yet.
    Todo,
    /// Its primary session's agent is working.
    InProgress,
    /// The agent finished a turn and waits for the user.
    WaitingForInput,
    /// The primary session failed.
    Failed,
    /// The task is finished.
    Completed,
}

impl TaskState {
    pub const ALL: [TaskState; 5] = [
        TaskState::Todo,
        TaskState::InProgress,
        TaskState::WaitingForInput,
        TaskState::Failed,
        TaskState::Completed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Todo => "TODO",
            TaskState::InProgress => "IN_PROGRESS",
            TaskState::WaitingForInput => "WAITING_FOR_INPUT",
            TaskState::Failed => "FAILED",
            TaskState::Completed => "COMPLETED",
        }
    }

    pub fn parse(value: &str) -> Option<TaskState> {
        TaskState::ALL.into_iter().find(|s| s.as_str() == value)
    }
}

/// A unit of work on a board.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Task {
    pub id: TaskId,
    pub workspace_id: WorkspaceId,
    pub workflow_id: WorkflowId,
    pub step_id: StepId,
    pub title: String,
    pub description: String,
    pub state: TaskState,
    /// Whether the developer is needed (kept in step with the primary session, like `state`).
    pub needs_you: Option<crate::needs_you::NeedsYou>,
    /// 0-based position within its step.
    pub position: u32,
    pub repository_ids: Vec<RepositoryId>,
    pub agent_profile_id: Option<AgentProfileId>,
    pub primary_session_id: Option<SessionId>,
    /// The task this one is a subtask of.
    pub parent_id: Option<TaskId>,
    /// Tasks that must be done before this one's agent auto-starts.
    pub blocked_by: Vec<TaskId>,
    /// Its git status as last published, summed over its repositories (`None` before the
    /// first one, or without a worktree).
    pub git: Option<crate::ship::GitSummary>,
    /// What it was made from (an issue, a webhook's delivery, a schedule), when intake made it.
    pub origin: Option<crate::intake::OriginLink>,
    pub archived_at: Option<Timestamp>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// What a board card shows (`task.list`): a [`Task`] without its description, profile and
/// timestamps, read by a query that does not fetch them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskCard {
    pub id: TaskId,
    pub workflow_id: WorkflowId,
    pub step_id: StepId,
    pub title: String,
    pub state: TaskState,
    pub needs_you: Option<crate::needs_you::NeedsYou>,
    pub position: u32,
    pub repository_ids: Vec<RepositoryId>,
    pub primary_session_id: Option<SessionId>,
    pub parent_id: Option<TaskId>,
    pub blocked_by: Vec<TaskId>,
    pub git: Option<crate::ship::GitSummary>,
    pub archived_at: Option<Timestamp>,
}

impl Task {
    /// The text `{{task_prompt}}` stands for: the title, then the description if any.
    pub fn prompt(&self) -> String {
        if self.description.trim().is_empty() {
            self.title.clone()
        } else {
            format!("{}\n\n{}", self.title, self.description)
        }
    }
}

/// Places `moving` at `position` among `others` (the step's tasks in order, without it),
/// clamping the position to the end. Returns the new order.
pub fn place_at<T>(mut others: Vec<T>, moving: T, position: Option<usize>) -> Vec<T> {
    let index = position.unwrap_or(others.len()).min(others.len());
    others.insert(index, moving);
    others
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn place_at_inserts_clamps_and_appends() {
        let cases: &[(&[u32], Option<usize>, &[u32])] = &[
            (&[1, 2, 3], Some(0), &[9, 1, 2, 3]),
            (&[1, 2, 3], Some(2), &[1, 2, 9, 3]),
            (&[1, 2, 3], Some(99), &[1, 2, 3, 9]),
            (&[1, 2, 3], None, &[1, 2, 3, 9]),
            (&[], Some(5), &[9]),
        ];
        for (others, position, expected) in cases {
            assert_eq!(place_at(others.to_vec(), 9, *position), expected.to_vec());
        }
    }

    #[test]
    fn task_states_round_trip() {
        for s in TaskState::ALL {
            assert_eq!(TaskState::parse(s.as_str()), Some(s));
        }
        assert_eq!(TaskState::parse("DONE"), None);
    }
}

/// The cycle that blocking `task` by `blockers` would close, given the other blocker edges
/// (`(task, blocker)` pairs; `task`'s own are ignored, they are being replaced): the path
/// `task → blocker → … → task`, or `None`.
pub fn blocker_cycle(
    edges: &[(TaskId, TaskId)],
    task: &TaskId,
    blockers: &[TaskId],
) -> Option<Vec<TaskId>> {
    fn walk(
        edges: &[(TaskId, TaskId)],
        from: &TaskId,
        target: &TaskId,
        path: &mut Vec<TaskId>,
        seen: &mut std::collections::HashSet<TaskId>,
    ) -> bool {
        if from == target {
            return true;
        }
        if !seen.insert(from.clone()) {
            return false;
        }
        for (_, next) in edges.iter().filter(|(t, _)| t == from && t != target) {
            path.push(next.clone());
            if walk(edges, next, target, path, seen) {
                return true;
            }
            path.pop();
        }
        false
    }
    let mut seen = std::collections::HashSet::new();
    for blocker in blockers {
        let mut path = vec![task.clone(), blocker.clone()];
        if walk(edges, blocker, task, &mut path, &mut seen) {
            return Some(path);
        }
    }
    None
}

/// The chain of parents of a task that `parent` would make cyclic: `task`, `parent`, its
/// parent, … back to `task`; `parents` maps a task to its parent.
pub fn parent_cycle(
    parents: &std::collections::HashMap<TaskId, TaskId>,
    task: &TaskId,
    parent: &TaskId,
) -> Option<Vec<TaskId>> {
    let mut path = vec![task.clone(), parent.clone()];
    let mut at = parent.clone();
    while &at != task {
        at = parents.get(&at)?.clone();
        if path.len() > parents.len() + 2 {
            return None;
        }
        path.push(at.clone());
    }
    Some(path)
}

#[cfg(test)]
mod dependency_tests {
    use super::*;

    fn id(s: &str) -> TaskId {
        TaskId::new(s)
    }

    #[test]
    fn a_blocker_that_waits_on_the_task_closes_a_cycle() {
        // b is blocked by c, c is blocked by a: a blocked by b closes a → b → c → a.
        let edges = vec![(id("b"), id("c")), (id("c"), id("a"))];
        assert_eq!(
            blocker_cycle(&edges, &id("a"), &[id("b")]),
            Some(vec![id("a"), id("b"), id("c"), id("a")])
        );
        assert_eq!(blocker_cycle(&edges, &id("d"), &[id("b")]), None);
        assert_eq!(blocker_cycle(&[], &id("a"), &[id("a")]), Some(vec![id("a"), id("a")]));
    }

    #[test]
    fn a_parent_below_the_task_closes_a_cycle() {
        let parents: std::collections::HashMap<TaskId, TaskId> =
            [(id("b"), id("a")), (id("c"), id("b"))].into_iter().collect();
        assert_eq!(
            parent_cycle(&parents, &id("a"), &id("c")),
            Some(vec![id("a"), id("c"), id("b"), id("a")])
        );
        assert_eq!(parent_cycle(&parents, &id("d"), &id("c")), None);
    }
}
