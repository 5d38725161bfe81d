//! The session actor: one per session, the only owner of its mutations. `actor.rs` is its
//! loop; `state.rs` its state (one `Phase`) and the gate every admission path asks
//! (`can_start_turn`, rule 44); what it can be told is `crate::command`, and how the rest
//! of the engine reaches it `crate::handle` (both below the actor, which `start` starts).
//! What each command does: `boot.rs` (start, resume), `auth.rs` (`session.authenticate`), `turn.rs`
//! (prompts and turns), `queue.rs`, `control.rs` (cancel, stop, delete, the agent exiting),
//! `modes.rs`, `reset.rs` (the context reset, live and lazy), `revert.rs` (`turn.revert`), `workflow.rs` (step actions),
//! `events.rs` (the agent's transcript), `permissions.rs`, `inputs.rs` (the keys of input that must arrive exactly once), `terminals.rs` (the agent's ACP terminals), `writes.rs` (its session
//! writes).

mod actor;
mod adopt;
mod attempt;
mod auth;
mod boot;
mod control;
mod events;
mod inputs;
mod modes;
mod permissions;
mod pump;
mod queue;
mod rebind;
pub(crate) mod reset;
mod revert;
pub(crate) mod state;
mod terminals;
mod turn;
mod workflow;
mod writes;

pub(crate) use actor::start;
