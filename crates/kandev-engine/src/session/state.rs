//! A session actor's state: the session as last written, and one [`Phase`] saying what the
//! session is doing, with the data only that phase has (the live agent, the open turn, the
//! reset in progress, the start in progress), so no flag can disagree with another.
//! [`SessionActor::can_start_turn`] reads it: it is the one answer to "may a turn start now"
//! for every admission path (docs/lifecycle.md rule 44).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use kandev_acp::{AcpClient, PermissionOption, PermissionResponder};
use kandev_domain::attachment::PromptAccepts;
use kandev_domain::session::SessionState;
use kandev_domain::task::Task;
use kandev_domain::transcript::{LastError, Message, MessageKind, Session};
use kandev_domain::workflow::{Action, EntryCause, Step};
use kandev_domain::{MessageId, StepId, TurnId};
use kandev_runtime::terminal::CommandTerminal;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::command::Command;
use crate::inner::Inner;
use crate::launcher::ExecutionControl;

pub(crate) struct SessionActor {
    pub inner: Arc<Inner>,
    /// The session as last written (every write goes through the actor).
    pub session: Session,
    pub task: Task,
    pub me: mpsc::Sender<Command>,
    pub phase: Phase,
    /// Permission requests of the live agent waiting for an answer (section G).
    pub permissions: HashMap<String, PendingPermission>,
    /// Cancelled when the actor ends, so its timers end with it.
    pub ended: CancellationToken,
    /// When the session last did anything (any command but a timer's): idle agents are
    /// stopped after `EngineConfig::idle_timeout`.
    pub last_active: Instant,
    /// Streamed text received but not written yet (coalesced: `events.rs`).
    pub pending: Option<PendingText>,
    /// Streamed text handed to the group writer whose answer has not been seen yet, oldest
    /// first (`events.rs`).
    pub submitted: VecDeque<Submitted>,
    /// The agent's ACP terminals (`terminals.rs`).
    pub terminals: AgentTerminals,
    /// The runner position the last transaction begun recorded (`writes.rs`), acknowledged
    /// once it committed.
    pub last_mark: Option<crate::position::Mark>,
    /// A turn whose end could not be written (a full disk), written again until it is
    /// (`turn.rs`, [`SessionActor::settle_turn`]).
    pub unsettled: Option<UnsettledTurn>,
}

/// The end of a turn that failed to commit: what [`SessionActor::settle_turn`] writes once
/// writes work again, so the session never stays `RUNNING` with no turn (issue 38 item 11).
pub(crate) struct UnsettledTurn {
    pub turn_id: TurnId,
    pub stop_reason: String,
    /// The turn's own error, if it ended with one (it becomes `last_error` either way).
    pub error: Option<(LastError, String)>,
    /// Why the end could not be written.
    pub cause: String,
    /// Failed attempts so far (the retries back off).
    pub attempts: u32,
}

/// Chunks of one kind the agent streamed, coalesced into one write and one notification;
/// written when `due` passes, when it grows past a bound, or before any other command.
pub(crate) struct PendingText {
    pub kind: MessageKind,
    pub text: String,
    pub due: Instant,
    /// The ACP offsets before its first chunk and after its last (`crate::position`).
    pub from: u64,
    pub through: u64,
}

/// Streamed text handed to the group writer (`crate::stream`), not known to be stored yet.
pub(crate) struct Submitted {
    /// The message it went to.
    pub message: MessageId,
    pub answer: crate::stream::Answer,
    /// The ACP offset before its first chunk.
    pub from: u64,
}

/// The session's agent terminals, by id (their handling: `terminals.rs`).
#[derive(Default)]
pub(crate) struct AgentTerminals {
    pub running: HashMap<String, Arc<CommandTerminal>>,
    /// Terminals whose output streams into a tool call: the tool call's message.
    pub followed: HashMap<String, MessageId>,
}

impl AgentTerminals {
    /// Kills every terminal (their groups get `SIGKILL` now; the wait runs in `spawn`) and
    /// forgets them.
    pub(crate) fn kill_all(&mut self, spawn: impl Fn(Arc<CommandTerminal>)) {
        self.followed.clear();
        for (_, terminal) in self.running.drain() {
            terminal.kill_now();
            spawn(terminal);
        }
    }

    pub(crate) fn get(&self, id: &str) -> Option<Arc<CommandTerminal>> {
        self.running.get(id).cloned()
    }
}

/// What the session is doing. A stop leaves `Idle` at once (the process is stopped by a
/// child future the stop's answer waits for); a delete ends the actor.
pub(crate) type Phase = PhaseOf<Live>;

/// [`Phase`], over what its live execution is: the transitions only move it from one phase to
/// the next, so the unit tests of every transition run them on a stand-in.
#[allow(clippy::large_enum_variant)] // one per session, moved rarely
pub(crate) enum PhaseOf<L> {
    /// No agent runs; nothing is in flight.
    Idle,
    /// The agent is being started or resumed (its working directory prepared first).
    Booting(Boot),
    /// The agent is ready; nothing is in flight.
    Ready(L),
    /// A turn runs.
    Running(L, Turn),
    /// The user cancelled the running turn (rule 12); it ends when the agent ends it, or the
    /// engine ends it after the cancel timeout (rule 13).
    Cancelling(L, Turn),
    /// A context reset runs on the live agent (rules 18-27).
    Resetting(L, Reset),
}

/// A start in progress. The prompt that waits for the agent to be ready belongs to it:
/// cancelling the start drops it, restarting the start keeps it.
pub(crate) struct Boot {
    pub epoch: i64,
    pub cancel: CancellationToken,
    /// The recorded prompt that started this boot (a lazy start or resume, rule 28).
    pub prompt: Option<Message>,
}

/// The live execution: the agent process and its ACP connection.
pub(crate) struct Live {
    pub epoch: i64,
    pub client: AcpClient,
    pub control: Arc<dyn ExecutionControl>,
    pub acp_session_id: String,
    /// Stops the event pump and the exit watcher of this execution.
    pub cancel: CancellationToken,
    /// Results of calls whose events must be handled first (turn ends): they go through the
    /// event pump, which forwards every event the agent sent before them first.
    pub ordered: mpsc::UnboundedSender<Command>,
    /// The MCP transports the agent takes and the profile's extra servers (a live reset
    /// hands them again).
    pub mcp_caps: crate::mcp::McpCaps,
    pub mcp_servers: Vec<kandev_domain::agent::McpServerConfig>,
    /// What its prompts accept besides text (how attachments are sent).
    pub accepts: PromptAccepts,
    /// Set when a runner runs it: what of its output is handled (`crate::position`).
    pub track: Option<crate::position::Track>,
}

/// An open turn.
pub(crate) struct Turn {
    pub id: TurnId,
    pub epoch: i64,
    /// The message streamed chunks are appended to, while the agent keeps to one kind.
    pub streaming: Option<(MessageKind, MessageId)>,
    pub tool_calls: HashMap<String, MessageId>,
    /// When the prompt was sent.
    pub sent_at: Instant,
    /// The agent's output in this turn, once there is any (rule 40).
    pub output: Option<Output>,
    /// Cancelled when the user cancels the turn: a prompt not sent yet (its checkpoint is
    /// still being taken) is then not sent at all.
    pub cancelled: CancellationToken,
}

/// When a turn's agent last said something, and whether its quiet was noted already.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Output {
    pub last: Instant,
    /// One stall notice per turn (rule 40).
    pub stall_noticed: bool,
}

/// What a context reset is for: the step that asked for it and the entry actions waiting
/// behind it (rule 18), or the user's reset button.
pub(crate) struct ResetPlan {
    /// `None` for the user's reset button.
    pub step: Option<Box<Step>>,
    pub then: VecDeque<Action<StepId>>,
    pub cause: EntryCause,
}

/// A context reset in progress on the live agent.
pub(crate) struct Reset {
    pub plan: ResetPlan,
    pub stage: ResetStage,
}

pub(crate) enum ResetStage {
    /// The running turn is being cancelled internally; the reset goes on once it has ended
    /// (rule 23).
    AfterTurn(Turn),
    /// That turn has ended; the reset goes on, in the same command (so nothing can start a
    /// turn in between: the gate stays closed for the whole reset).
    TurnEnded,
    /// `session/new` (then model, mode and options) is in flight on the agent (rules 20, 27):
    /// anything the old conversation still sends is dropped (rule 22).
    NewConversation,
}

/// How a turn that ended was ending ([`Phase::end_turn`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    /// The agent ended it by itself.
    Normally,
    /// The user had cancelled it (rule 12).
    CancelledByUser,
    /// The engine had cancelled it for the reset in the phase, which goes on now (rule 23).
    ForReset,
}

/// Who was cancelling an open turn when its execution was taken apart ([`Phase::take`]).
pub(crate) enum CancelledBy {
    Nobody,
    /// The user (rule 12): a status note, and `on_turn_complete` only with
    /// `cancel_triggers_turn_complete`.
    User,
    /// The engine, for the reset that goes on now (rule 23): no note, no `on_turn_complete`.
    Reset(ResetPlan),
}

/// What was in flight when a phase was taken apart ([`Phase::take`]).
pub(crate) enum InFlight {
    Nothing,
    /// An open turn, and who was cancelling it.
    Turn(Turn, CancelledBy),
    /// A reset in the middle of the agent's `session/new`: without the agent it can only
    /// fail (rule 25).
    LiveReset(ResetPlan),
}

impl InFlight {
    /// The open turn and who was cancelling it, if a turn was open.
    pub fn turn(self) -> Option<(Turn, CancelledBy)> {
        match self {
            InFlight::Turn(turn, by) => Some((turn, by)),
            InFlight::Nothing | InFlight::LiveReset(_) => None,
        }
    }
}

impl CancelledBy {
    /// The reset that was waiting for the turn, if the engine was cancelling it for one.
    pub fn into_reset(self) -> Option<ResetPlan> {
        match self {
            CancelledBy::Reset(plan) => Some(plan),
            CancelledBy::Nobody | CancelledBy::User => None,
        }
    }
}

pub(crate) struct PendingPermission {
    pub responder: PermissionResponder,
    pub options: Vec<PermissionOption>,
    pub message_id: MessageId,
    /// The ACP offset before the request's line: a committed position stays before it until
    /// it is answered, so a server that re-adopts the agent gets the request again.
    pub from: u64,
}

/// Why a turn may not start now (rule 44): the prompt waits in the queue (or is refused).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Closed {
    /// `FAILED` (or `CANCELLED`): only an explicit resume reopens the session (rule 2).
    Ended(SessionState),
    /// A context reset is in progress (rule 24).
    Resetting,
    /// A turn is open, possibly being cancelled.
    Turn,
    /// The agent is being started or resumed.
    Starting,
    /// The end of the last turn is not written yet (a full disk; issue 38 item 11): it is
    /// written first.
    Unsettled,
}

impl<L> PhaseOf<L> {
    /// The live execution, whatever the session does with it.
    pub fn live(&self) -> Option<&L> {
        match self {
            PhaseOf::Ready(live)
            | PhaseOf::Running(live, _)
            | PhaseOf::Cancelling(live, _)
            | PhaseOf::Resetting(live, _) => Some(live),
            PhaseOf::Idle | PhaseOf::Booting(_) => None,
        }
    }

    pub fn live_mut(&mut self) -> Option<&mut L> {
        match self {
            PhaseOf::Ready(live)
            | PhaseOf::Running(live, _)
            | PhaseOf::Cancelling(live, _)
            | PhaseOf::Resetting(live, _) => Some(live),
            PhaseOf::Idle | PhaseOf::Booting(_) => None,
        }
    }

    /// The open turn (being cancelled or not).
    pub fn turn(&self) -> Option<&Turn> {
        match self {
            PhaseOf::Running(_, turn)
            | PhaseOf::Cancelling(_, turn)
            | PhaseOf::Resetting(_, Reset { stage: ResetStage::AfterTurn(turn), .. }) => Some(turn),
            _ => None,
        }
    }

    pub fn turn_mut(&mut self) -> Option<&mut Turn> {
        match self {
            PhaseOf::Running(_, turn)
            | PhaseOf::Cancelling(_, turn)
            | PhaseOf::Resetting(_, Reset { stage: ResetStage::AfterTurn(turn), .. }) => Some(turn),
            _ => None,
        }
    }

    /// The open turn `turn_id` of `epoch`, if it is the one open.
    pub fn turn_of(&self, epoch: i64, turn_id: &TurnId) -> Option<&Turn> {
        self.turn().filter(|t| &t.id == turn_id && t.epoch == epoch)
    }

    pub fn is_booting(&self) -> bool {
        matches!(self, PhaseOf::Booting(_))
    }

    pub fn is_resetting(&self) -> bool {
        matches!(self, PhaseOf::Resetting(..))
    }

    /// A live reset waits for the agent's new conversation (rule 22: the old one is stale).
    pub fn is_replacing_conversation(&self) -> bool {
        matches!(self, PhaseOf::Resetting(_, Reset { stage: ResetStage::NewConversation, .. }))
    }

    /// Takes the phase apart, leaving `Idle`: the live execution (if any) and what was in
    /// flight. A start in progress is returned as it is (its caller cancels it).
    pub fn take(&mut self) -> TakenOf<L> {
        match std::mem::replace(self, PhaseOf::Idle) {
            PhaseOf::Idle => TakenOf::Nothing,
            PhaseOf::Booting(boot) => TakenOf::Boot(boot),
            PhaseOf::Ready(live) => TakenOf::Live(live, InFlight::Nothing),
            PhaseOf::Running(live, turn) => {
                TakenOf::Live(live, InFlight::Turn(turn, CancelledBy::Nobody))
            }
            PhaseOf::Cancelling(live, turn) => {
                TakenOf::Live(live, InFlight::Turn(turn, CancelledBy::User))
            }
            PhaseOf::Resetting(live, Reset { plan, stage: ResetStage::AfterTurn(turn) }) => {
                TakenOf::Live(live, InFlight::Turn(turn, CancelledBy::Reset(plan)))
            }
            // A reset whose turn has ended is settled in the command that ended it; were it
            // ever taken apart in between, it fails like a live one (rule 25): nothing is sent.
            PhaseOf::Resetting(
                live,
                Reset { plan, stage: ResetStage::NewConversation | ResetStage::TurnEnded },
            ) => TakenOf::Live(live, InFlight::LiveReset(plan)),
        }
    }

    /// The user cancels the running turn: `Running` becomes `Cancelling`. Returns the turn's
    /// id and epoch, or `None` (nothing changed) in any other phase.
    pub fn cancel_turn(&mut self) -> Option<(TurnId, i64)> {
        match std::mem::replace(self, PhaseOf::Idle) {
            PhaseOf::Running(live, turn) => {
                turn.cancelled.cancel();
                let cancelled = (turn.id.clone(), turn.epoch);
                *self = PhaseOf::Cancelling(live, turn);
                Some(cancelled)
            }
            other => {
                *self = other;
                None
            }
        }
    }

    /// A reset waits for the open turn (rule 23): `Running` or `Cancelling` becomes
    /// `Resetting` with the turn. Returns the turn's id and epoch when the engine has to
    /// cancel it now (`Running`); `Ok(None)` when a user's cancel is already in flight (the
    /// reset joins it). Without an open turn, nothing changes and `plan` comes back.
    pub fn reset_after_turn(
        &mut self,
        plan: ResetPlan,
    ) -> Result<Option<(TurnId, i64)>, ResetPlan> {
        let (live, turn, cancel_now) = match std::mem::replace(self, PhaseOf::Idle) {
            PhaseOf::Running(live, turn) => (live, turn, true),
            PhaseOf::Cancelling(live, turn) => (live, turn, false),
            other => {
                *self = other;
                return Err(plan);
            }
        };
        let cancel = cancel_now.then(|| (turn.id.clone(), turn.epoch));
        *self = PhaseOf::Resetting(live, Reset { plan, stage: ResetStage::AfterTurn(turn) });
        Ok(cancel)
    }

    /// Ends the open turn: the phase becomes `Ready` on the same execution, or, for the turn
    /// a reset waited for, `Resetting` at [`ResetStage::TurnEnded`]. Returns the turn and how
    /// it was ending; `None` (nothing changed) without an open turn.
    pub fn end_turn(&mut self) -> Option<(Turn, Ending)> {
        self.turn()?;
        match std::mem::replace(self, PhaseOf::Idle) {
            PhaseOf::Running(live, turn) => {
                *self = PhaseOf::Ready(live);
                Some((turn, Ending::Normally))
            }
            PhaseOf::Cancelling(live, turn) => {
                *self = PhaseOf::Ready(live);
                Some((turn, Ending::CancelledByUser))
            }
            PhaseOf::Resetting(live, Reset { plan, stage: ResetStage::AfterTurn(turn) }) => {
                *self = PhaseOf::Resetting(live, Reset { plan, stage: ResetStage::TurnEnded });
                Some((turn, Ending::ForReset))
            }
            other => {
                *self = other; // unreachable: turn() found one above
                None
            }
        }
    }

    /// The reset whose turn has just ended, out of the phase (which becomes `Ready`), to go
    /// on with it at once.
    pub fn take_reset_after_turn(&mut self) -> Option<ResetPlan> {
        match std::mem::replace(self, PhaseOf::Idle) {
            PhaseOf::Resetting(live, Reset { plan, stage: ResetStage::TurnEnded }) => {
                *self = PhaseOf::Ready(live);
                Some(plan)
            }
            other => {
                *self = other;
                None
            }
        }
    }
}

/// A phase taken apart.
pub(crate) type Taken = TakenOf<Live>;

#[allow(clippy::large_enum_variant)] // short-lived, taken apart at once
pub(crate) enum TakenOf<L> {
    Nothing,
    Boot(Boot),
    Live(L, InFlight),
}

impl SessionActor {
    pub fn new(inner: Arc<Inner>, session: Session, task: Task, me: mpsc::Sender<Command>) -> Self {
        SessionActor {
            inner,
            session,
            task,
            me,
            phase: Phase::Idle,
            permissions: HashMap::new(),
            ended: CancellationToken::new(),
            last_active: Instant::now(),
            pending: None,
            submitted: VecDeque::new(),
            terminals: AgentTerminals::default(),
            last_mark: None,
            unsettled: None,
        }
    }

    /// Rule 44, the one answer to "may a turn start now" for every admission path (a new
    /// message, the queue's add, drain and auto-run, the queue at a turn's end, a workflow's
    /// auto-start): only when nothing is in flight (no reset, start or resume, turn or its
    /// cancel), and not in `FAILED` or `CANCELLED` (rule 2).
    pub fn can_start_turn(&self) -> Result<(), Closed> {
        if self.session.state.needs_resume() {
            return Err(Closed::Ended(self.session.state));
        }
        if self.unsettled.is_some() {
            return Err(Closed::Unsettled);
        }
        match &self.phase {
            Phase::Idle | Phase::Ready(_) => Ok(()),
            Phase::Booting(_) => Err(Closed::Starting),
            Phase::Running(..) | Phase::Cancelling(..) => Err(Closed::Turn),
            Phase::Resetting(..) => Err(Closed::Resetting),
        }
    }

    /// The epoch of the live execution, if one runs.
    pub fn live_epoch(&self) -> Option<i64> {
        self.phase.live().map(|live| live.epoch)
    }
}

/// Every transition of [`Phase`] (docs/lifecycle.md rules 12, 13, 23, 25, 44), on a stand-in
/// for the live execution: from each phase, what it becomes and what comes back.
#[cfg(test)]
mod tests {
    use super::*;

    /// The stand-in live execution.
    const AGENT: &str = "agent";

    fn turn(id: &str) -> Turn {
        Turn {
            id: TurnId::new(id),
            epoch: 3,
            streaming: None,
            tool_calls: HashMap::new(),
            sent_at: Instant::now(),
            output: None,
            cancelled: CancellationToken::new(),
        }
    }

    fn plan() -> ResetPlan {
        ResetPlan { step: None, then: VecDeque::new(), cause: EntryCause::Manual }
    }

    fn resetting(stage: ResetStage) -> PhaseOf<&'static str> {
        PhaseOf::Resetting(AGENT, Reset { plan: plan(), stage })
    }

    /// One of each phase (the reset in each of its stages), by name.
    fn every_phase() -> Vec<(&'static str, PhaseOf<&'static str>)> {
        let boot = Boot { epoch: 3, cancel: CancellationToken::new(), prompt: None };
        vec![
            ("idle", PhaseOf::Idle),
            ("booting", PhaseOf::Booting(boot)),
            ("ready", PhaseOf::Ready(AGENT)),
            ("running", PhaseOf::Running(AGENT, turn("t1"))),
            ("cancelling", PhaseOf::Cancelling(AGENT, turn("t1"))),
            ("resetting after turn", resetting(ResetStage::AfterTurn(turn("t1")))),
            ("resetting, turn ended", resetting(ResetStage::TurnEnded)),
            ("resetting, new conversation", resetting(ResetStage::NewConversation)),
        ]
    }

    fn name<L>(phase: &PhaseOf<L>) -> &'static str {
        match phase {
            PhaseOf::Idle => "idle",
            PhaseOf::Booting(_) => "booting",
            PhaseOf::Ready(_) => "ready",
            PhaseOf::Running(..) => "running",
            PhaseOf::Cancelling(..) => "cancelling",
            PhaseOf::Resetting(_, Reset { stage: ResetStage::AfterTurn(_), .. }) => {
                "resetting after turn"
            }
            PhaseOf::Resetting(_, Reset { stage: ResetStage::TurnEnded, .. }) => {
                "resetting, turn ended"
            }
            PhaseOf::Resetting(_, Reset { stage: ResetStage::NewConversation, .. }) => {
                "resetting, new conversation"
            }
        }
    }

    #[test]
    fn i41_the_phase_says_what_is_live_open_and_in_flight() {
        for (was, phase) in every_phase() {
            let live = !matches!(was, "idle" | "booting");
            assert_eq!(phase.live().is_some(), live, "{was}: live");
            let open = matches!(was, "running" | "cancelling" | "resetting after turn");
            assert_eq!(phase.turn().map(|t| t.id.as_str()), open.then_some("t1"), "{was}: turn");
            assert_eq!(phase.is_booting(), was == "booting", "{was}");
            assert_eq!(phase.is_resetting(), was.starts_with("resetting"), "{was}");
            let replacing = was == "resetting, new conversation";
            assert_eq!(phase.is_replacing_conversation(), replacing, "{was}");
        }
    }

    /// Rule 25: taking a phase apart leaves `Idle` and hands back the execution and what was
    /// in flight, saying who was cancelling an open turn.
    #[test]
    fn l25_taking_a_phase_apart_leaves_idle_and_returns_what_was_in_flight() {
        for (was, mut phase) in every_phase() {
            let taken = phase.take();
            assert_eq!(name(&phase), "idle", "{was}");
            let what = match taken {
                TakenOf::Nothing => "nothing",
                TakenOf::Boot(_) => "the start",
                TakenOf::Live(live, in_flight) => {
                    assert_eq!(live, AGENT, "{was}");
                    match in_flight {
                        InFlight::Nothing => "the agent",
                        InFlight::Turn(_, CancelledBy::Nobody) => "a turn",
                        InFlight::Turn(_, CancelledBy::User) => "a turn the user cancelled",
                        InFlight::Turn(_, CancelledBy::Reset(_)) => "a turn a reset waited for",
                        InFlight::LiveReset(_) => "a live reset",
                    }
                }
            };
            let expected = match was {
                "idle" => "nothing",
                "booting" => "the start",
                "ready" => "the agent",
                "running" => "a turn",
                "cancelling" => "a turn the user cancelled",
                "resetting after turn" => "a turn a reset waited for",
                _ => "a live reset",
            };
            assert_eq!(what, expected, "{was}");
        }
    }

    /// Rule 12: only a running turn can be cancelled; it becomes `Cancelling`.
    #[test]
    fn l12_cancel_turns_running_into_cancelling_and_changes_nothing_else() {
        for (was, mut phase) in every_phase() {
            let cancelled = phase.cancel_turn();
            if was == "running" {
                assert_eq!(cancelled, Some((TurnId::new("t1"), 3)));
                assert_eq!(name(&phase), "cancelling");
            } else {
                assert_eq!(cancelled, None, "{was}");
                assert_eq!(name(&phase), was, "{was}: unchanged");
            }
        }
    }

    /// Rule 23: a reset waits for the open turn; the engine cancels a running one, joins a
    /// user's cancel, and without an open turn gets its plan back.
    #[test]
    fn l23_a_reset_waits_for_the_open_turn() {
        for (was, mut phase) in every_phase() {
            let result = phase.reset_after_turn(plan());
            match was {
                "running" => {
                    assert_eq!(result.ok(), Some(Some((TurnId::new("t1"), 3))));
                    assert_eq!(name(&phase), "resetting after turn");
                }
                "cancelling" => {
                    assert_eq!(result.ok(), Some(None), "joins the user's cancel");
                    assert_eq!(name(&phase), "resetting after turn");
                }
                _ => {
                    assert!(result.is_err(), "{was}: the plan comes back");
                    assert_eq!(name(&phase), was, "{was}: unchanged");
                }
            }
        }
    }

    /// Rules 12 and 23: the end of a turn says how it was ending; the turn a reset waited for
    /// leaves the reset at `TurnEnded`, which `take_reset_after_turn` then takes out.
    #[test]
    fn l23_ending_a_turn_says_how_it_ended_and_a_waiting_reset_goes_on() {
        for (was, mut phase) in every_phase() {
            let ended = phase.end_turn().map(|(turn, ending)| (turn.id, ending));
            let t1 = TurnId::new("t1");
            let (ending, after) = match was {
                "running" => (Some((t1, Ending::Normally)), "ready"),
                "cancelling" => (Some((t1, Ending::CancelledByUser)), "ready"),
                "resetting after turn" => (Some((t1, Ending::ForReset)), "resetting, turn ended"),
                _ => (None, was),
            };
            assert_eq!(ended, ending, "{was}");
            assert_eq!(name(&phase), after, "{was}");
        }
        for (was, mut phase) in every_phase() {
            let plan = phase.take_reset_after_turn();
            if was == "resetting, turn ended" {
                assert!(plan.is_some());
                assert_eq!(name(&phase), "ready");
            } else {
                assert!(plan.is_none(), "{was}");
                assert_eq!(name(&phase), was, "{was}: unchanged");
            }
        }
    }
}
