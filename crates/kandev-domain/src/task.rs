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
    pub archived_at: Option<Timestamp>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
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
