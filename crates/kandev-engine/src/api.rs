//! What callers hand the engine and get back, besides the domain's own types: prompts and
//! what became of them, permission answers, changes to the prompt queue, a turn's checkpoint
//! and what a revert does (issue 48).

use kandev_domain::attachment::AttachmentRef;
use kandev_domain::transcript::{Message, QueuedPrompt};
use kandev_domain::{MessageId, QueuedPromptId, RepositoryId, TurnId};

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

/// One attempt to start (issue 48): its profile (the task's, else the built-in mock) and its
/// first prompt (the task's title and description by default).
#[derive(Debug, Clone, Default)]
pub struct AttemptRequest {
    pub profile_id: Option<kandev_domain::AgentProfileId>,
    pub prompt: Option<String>,
    /// The user who starts it (issue 49): its agent acts with their rights at most. `None`:
    /// a step's `start_attempts`, or a server without users.
    pub started_by: Option<String>,
}

/// Which edits made since the agent's last turn by someone else a revert may discard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Discard {
    /// None: the revert is refused while there are any.
    None,
    /// Those at these paths (what a person confirmed); any other one refuses the revert.
    Only(Vec<String>),
    /// Whatever they are.
    All,
}

impl Discard {
    /// The outside edits among `edits` this does not allow discarding.
    pub fn refused<'e>(&self, edits: &'e [RevertFile]) -> Vec<&'e RevertFile> {
        match self {
            Discard::All => vec![],
            Discard::None => edits.iter().collect(),
            Discard::Only(paths) => edits.iter().filter(|e| !paths.contains(&e.path)).collect(),
        }
    }
}

/// A turn with a checkpoint, as `turn.checkpoint.list` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointedTurn {
    pub turn_id: TurnId,
    /// Its number in the session, from 1.
    pub number: usize,
    /// The prompt it carried.
    pub message_id: Option<MessageId>,
    /// A revert undid it.
    pub undone: bool,
    /// It ended with a checkpoint after it, so what it changed can be shown.
    pub diff: bool,
}

/// A file a revert changes, or one changed outside the agent's turns.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct RevertFile {
    pub repository_id: Option<RepositoryId>,
    pub path: String,
}

/// A turn a revert undoes: its number in the session (from 1) and its prompt's first line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UndoneTurn {
    pub turn_id: TurnId,
    pub number: usize,
    pub prompt: String,
}

/// What a revert to before a turn does (or did).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RevertOutcome {
    /// The turn reverted to and every later one not undone before, oldest first.
    pub turns: Vec<UndoneTurn>,
    /// The files it changes back (changed back, once `reverted`).
    pub files: Vec<RevertFile>,
    /// Files changed since the agent's last turn by someone else: a revert without `force`
    /// is refused while there are any.
    pub outside_edits: Vec<RevertFile>,
    /// Whether the worktrees were restored (`false`: a dry run).
    pub reverted: bool,
}
