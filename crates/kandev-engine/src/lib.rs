//! The orchestrator: one actor per session owns every mutation of it (state, turns, queue,
//! resume token, runtime binding, last error), fencing stale work with a persisted epoch.
//!
//! Callers (the API) hold an [`Engine`] and talk to session actors through it; agent events
//! and the results of slow work (booting, prompts, stops) come back to the actor's inbox as
//! messages, so nothing is ever stuck behind them. The module layout and its rules are in
//! docs/architecture.md; this file only declares modules and the public API.
//!
//! "Rule N" in comments is rule N of docs/lifecycle.md, which carries the text of each rule
//! the code relies on.

mod api;
mod attachments;
mod attempts;
mod checkpoints;
mod command;
mod config;
mod containers;
mod controls;
mod create;
mod deliveries;
mod devservers;
pub mod doctor;
mod engine;
mod error;
mod executors;
mod fault;
mod feedback;
mod files;
mod handle;
pub mod handoff;
mod handshake;
mod inner;
mod installs;
mod intake;
mod launcher;
mod links;
pub mod mcp;
mod notes;
mod position;
mod publish;
mod question;
mod reconcile;
mod saved_prompts;
mod schedules;
mod sealing;
pub mod secrets;
mod session;
mod shells;
mod sites;
mod stream;
#[cfg(test)]
mod test_support;
mod tui;
mod usecases;
pub mod workdir;
mod workflow;
mod write;
mod writeback;

pub use api::{
    AttemptRequest, CheckpointedTurn, Discard, PermissionAnswer, PromptOutcome, PromptRequest,
    QueueChange, RevertFile, RevertOutcome, UndoneTurn,
};
pub use attachments::{Upload, too_large_error};
pub use config::{
    ATTACHMENT_QUOTA, AgentCommand, AttachmentSettings, EngineConfig, INTAKE_POLL_INTERVAL,
    PR_POLL_INTERVAL, SETUP_TIMEOUT,
};
pub use devservers::{DEV_SERVER_LOG_BYTES, DevServerInfo};
pub use engine::Engine;
pub use engine::attempts::{Attempt, AttemptPick};
pub use error::{EngineError, Result};
pub use executors::ExecutorCheck;
pub use intake::{HookError, HookOutcome, IntakeSourceRequest};
pub use kandev_notify::{SIGNATURE_HEADER, signature};
/// Facts about this machine's programs (whether an agent's command is installed).
pub use kandev_runtime::program;
pub use launcher::{
    BuiltinMockLauncher, ExecutionControl, LaunchSpec, Launched, Launcher, LocalLauncher,
    RunnerExec, RunnerLauncher,
};
pub use schedules::{Fired, LATE_AFTER, ScheduleInput};
pub use shells::{
    MAX_TERMINAL_CELLS, MAX_TERMINALS_PER_TASK, TerminalChunk, TerminalExit, TerminalHandle,
    TerminalInfo,
};
pub use usecases::{
    AgentVersions, InstalledVersion, NewTaskRequest, TaskArchival, TaskCreation, TaskDeletion,
    TaskEdit,
};
