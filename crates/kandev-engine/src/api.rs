//! What callers hand the engine and get back, besides the domain's own types: prompts and
//! what became of them, permission answers, changes to the prompt queue.

use kandev_domain::QueuedPromptId;
use kandev_domain::attachment::AttachmentRef;
use kandev_domain::transcript::{Message, QueuedPrompt};

/// A prompt from the user (or a workflow).
#[derive(Debug, Clone)]
pub struct PromptRequest {
    pub content: String,
    /// Idempotency key: the same id is recorded once (rule 3).
    pub client_message_id: Option<String>,
    /// Queue when the agent is busy (default) instead of failing with `Busy`.
    pub queue: bool,
    /// Files sent with it (checked by `Engine::prompt`).
    pub attachments: Vec<AttachmentRef>,
}

impl PromptRequest {
    /// A text prompt, queued when the agent is busy.
    pub fn text(content: String) -> Self {
        PromptRequest { content, client_message_id: None, queue: true, attachments: vec![] }
    }
}

/// What happened to a prompt.
#[derive(Debug, Clone)]
pub enum PromptOutcome {
    /// Recorded and sent (or waiting for the agent to be ready).
    Sent(Message),
    /// The agent is busy; it will run after the current turn.
    Queued(QueuedPrompt),
    /// The `client_message_id` was already recorded; nothing new happened.
    Duplicate(Message),
}

/// An answer to a permission request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PermissionAnswer {
    Option(String),
    Cancelled,
}

/// Changes to the prompt queue.
#[derive(Debug, Clone)]
pub enum QueueChange {
    Add {
        content: String,
        client_message_id: Option<String>,
        attachments: Vec<AttachmentRef>,
    },
    Update {
        id: QueuedPromptId,
        content: String,
    },
    Remove {
        id: QueuedPromptId,
    },
    Reorder {
        ids: Vec<QueuedPromptId>,
    },
    /// Runs the next entry now if the agent is idle.
    Drain,
    /// Runs the next queued message if auto-run is on and a turn may start (after something
    /// outside the session queued one: a pull request's feedback).
    Nudge,
    SetAutoRun(bool),
}
