//! Questions an agent asks the user (MCP `ask_user`): durable, resolved exactly once.

use crate::{SessionId, TaskId, Timestamp};

/// Where a question stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuestionStatus {
    Pending,
    Answered,
    Cancelled,
    TimedOut,
    /// The server restarted while it was pending: nobody waits for its answer any more.
    Expired,
}

impl QuestionStatus {
    pub const ALL: [QuestionStatus; 5] = [
        QuestionStatus::Pending,
        QuestionStatus::Answered,
        QuestionStatus::Cancelled,
        QuestionStatus::TimedOut,
        QuestionStatus::Expired,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            QuestionStatus::Pending => "pending",
            QuestionStatus::Answered => "answered",
            QuestionStatus::Cancelled => "cancelled",
            QuestionStatus::TimedOut => "timed_out",
            QuestionStatus::Expired => "expired",
        }
    }

    pub fn parse(text: &str) -> Option<QuestionStatus> {
        QuestionStatus::ALL.into_iter().find(|s| s.as_str() == text)
    }
}

/// A question of an agent's session to the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    pub id: String,
    pub session_id: SessionId,
    pub task_id: TaskId,
    pub question: String,
    /// The answers offered as buttons; empty: free text.
    pub options: Vec<String>,
    pub status: QuestionStatus,
    pub answer: Option<String>,
    pub created_at: Timestamp,
    pub expires_at: Timestamp,
    pub resolved_at: Option<Timestamp>,
}
