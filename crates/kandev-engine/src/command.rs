//! Everything a session actor can be asked or told: requests from callers (each with its
//! reply channel), timers, and reports from the child futures it started, tagged with the
//! epoch they belong to so stale ones are ignored.

use std::collections::VecDeque;

use kandev_acp::{AcpError, AgentEvent, ConfigOption, PromptResponse, SessionUpdate};
use kandev_domain::question::Question;
use kandev_domain::transcript::{Message, QueuedPrompt, Session};
use kandev_domain::workflow::{Action, EntryCause, Step};
use kandev_domain::{StepId, TurnId};
use kandev_runtime::ExitInfo;
use tokio::sync::oneshot;

use crate::api::{PermissionAnswer, PromptOutcome, PromptRequest, QueueChange};
use crate::error::Result;
use crate::handshake::{BootFailure, Booted};

pub(crate) type Reply<T> = oneshot::Sender<Result<T>>;

/// What a live context reset's `session/new` came back with: the new conversation's id, or
/// why it failed (with the id of a conversation the agent did create on the way).
pub(crate) type ResetResult = std::result::Result<String, (Option<String>, String)>;

/// A workflow's ship action running outside the actor (it takes the task's lock and may
/// wait for a forge), and the actions of the same event waiting behind it.
pub(crate) struct ShipPlan {
    pub step: Box<Step>,
    pub action: Action<StepId>,
    pub then: VecDeque<Action<StepId>>,
    pub event: ShipEvent,
}

/// The event a ship action belongs to: what runs after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ShipEvent {
    /// `on_enter`: the rest of the entry actions.
    Enter(EntryCause),
    /// `on_turn_complete`: the rest of its actions, then its move.
    TurnComplete,
}

impl ShipEvent {
    pub fn trigger(self) -> &'static str {
        match self {
            ShipEvent::Enter(_) => "on_enter",
            ShipEvent::TurnComplete => "on_turn_complete",
        }
    }
}

pub(crate) enum Command {
    Start {
        reply: Reply<()>,
    },
    /// Restart on the saved conversation (`fresh: false`) or a new one (`fresh: true`).
    Resume {
        fresh: bool,
        reply: Reply<()>,
    },
    StallCheck {
        epoch: i64,
        turn_id: TurnId,
    },
    /// Writes the end of a turn that could not be written before (`UnsettledTurn`).
    SettleTurn,
    /// Stops the execution of `epoch` if it has been idle for the idle timeout.
    IdleCheck {
        epoch: i64,
    },
    /// The task entered a step: run `on_exit` of `from` and `on_enter` of `to`.
    StepEntered {
        from: Option<StepId>,
        to: StepId,
        cause: EntryCause,
        start_agent: bool,
        reply: Reply<()>,
    },
    /// A workflow's ship action ended (`session/workflow.rs`): what it did, or why not.
    ShipDone {
        plan: ShipPlan,
        result: Result<String>,
    },
    /// The user's reset button (`session.reset_context`).
    Reset {
        reply: Reply<()>,
    },
    /// The session's number among its task's attempts (issue 48; `None`: no longer one).
    SetAttempt {
        attempt: Option<u32>,
        reply: Reply<()>,
    },
    /// `turn.revert`: the worktrees back to before a turn (issue 48).
    Revert {
        turn_id: TurnId,
        discard: crate::api::Discard,
        dry_run: bool,
        reply: Reply<crate::api::RevertOutcome>,
    },
    ResetDone {
        exec_epoch: i64,
        result: ResetResult,
    },
    Prompt {
        request: PromptRequest,
        queued_by: &'static str,
        reply: Reply<PromptOutcome>,
    },
    Cancel {
        reply: Reply<()>,
    },
    Stop {
        reply: Reply<()>,
    },
    /// `session.rebind` (issue 52): the session moves to `profile`.
    Rebind {
        profile: Box<kandev_domain::agent::AgentProfile>,
        reply: Reply<()>,
    },
    Delete {
        reply: Reply<()>,
    },
    Shutdown {
        reply: oneshot::Sender<()>,
    },
    Permission {
        request_id: String,
        answer: PermissionAnswer,
        /// Who answers (`by`: a user's name, `token` or `user`; issue 21).
        by: String,
        reply: Reply<Message>,
    },
    SetMode {
        mode_id: String,
        reply: Reply<Session>,
    },
    SetConfig {
        config_id: String,
        value: serde_json::Value,
        reply: Reply<Session>,
    },
    Queue {
        change: QueueChange,
        reply: Reply<Vec<QueuedPrompt>>,
    },
    /// A status message in the transcript (MCP `add_note`, `complete_step`'s summary); with
    /// `epoch`, only while the session is still at that epoch.
    Note {
        text: String,
        note: kandev_domain::message_meta::StatusNote,
        epoch: Option<i64>,
        reply: Reply<()>,
    },
    /// A question of the agent to its developer (MCP `ask_user`): stored and announced
    /// after the text the agent streamed before it; the receiver gets the resolution.
    AskUser {
        text: String,
        options: Vec<String>,
        timeout_ms: i64,
        reply: Reply<(Question, oneshot::Receiver<Question>)>,
    },
    // Reports from child futures, tagged with their epoch.
    Booted {
        epoch: i64,
        result: std::result::Result<Box<Booted>, BootFailure>,
    },
    /// Rule 42's re-adopt branch: take over the execution the last run left on the runner.
    Adopt {
        adoption: Box<crate::position::Adoption>,
        reply: oneshot::Sender<Result<()>>,
    },
    Agent {
        epoch: i64,
        /// The ACP offset where the event's line ends.
        at: u64,
        event: AgentEvent,
    },
    TurnDone {
        epoch: i64,
        turn_id: TurnId,
        result: std::result::Result<PromptResponse, AcpError>,
    },
    Exited {
        epoch: i64,
        exit: ExitInfo,
        stderr: String,
    },
    EscalateCancel {
        epoch: i64,
        turn_id: TurnId,
    },
    /// A terminal shown by the tool call `message` has new output (or exited).
    TerminalOutput {
        message: kandev_domain::MessageId,
        terminal_id: String,
        output: kandev_runtime::terminal::TerminalOutput,
    },
    /// A terminal the agent waits for exited (`terminal/wait_for_exit`).
    TerminalExited {
        terminal_id: String,
        output: kandev_runtime::terminal::TerminalOutput,
        responder: kandev_acp::TerminalResponder,
    },
    /// `session.authenticate` with one of the agent's auth method ids.
    Authenticate {
        method_id: String,
        reply: Reply<()>,
    },
    /// The live agent answered `authenticate`.
    Authenticated {
        epoch: i64,
        method_id: String,
        result: std::result::Result<(), AcpError>,
        reply: Reply<()>,
    },
    Applied {
        epoch: i64,
        change: Applied,
        result: std::result::Result<Option<Vec<ConfigOption>>, AcpError>,
        reply: Reply<Session>,
    },
}

impl Command {
    /// A chunk of the agent's streamed text or thoughts: it joins the actor's pending text
    /// (coalesced); every other command writes that text first, so the order is kept.
    pub fn is_stream_chunk(&self) -> bool {
        let Command::Agent { event: AgentEvent::SessionUpdate { update, .. }, .. } = self else {
            return false;
        };
        matches!(
            update,
            SessionUpdate::AgentMessageChunk { .. } | SessionUpdate::AgentThoughtChunk { .. }
        ) && !kandev_acp::quirks::is_noise_chunk(update)
    }

    /// A timer's own check: it does not count as activity of the session.
    pub fn is_timer(&self) -> bool {
        matches!(
            self,
            Command::StallCheck { .. }
                | Command::IdleCheck { .. }
                | Command::EscalateCancel { .. }
                | Command::SettleTurn
        )
    }
}

/// A mode or config change the agent was asked to make.
pub(crate) enum Applied {
    Mode(String),
    Config { id: String, value: serde_json::Value },
}
