//! Agent executors and process supervision: the only crate that starts processes.
//!
//! Invariants of this crate:
//! - Every child (agent, git command, setup script) is started by one supervisor,
//!   `group::ProcessGroup`, in its own process group (pgid = pid of the leader); stopping or
//!   dropping its owner (an [`AgentProcess`], a cancelled git future) signals the whole
//!   group, so wrappers such as `npx` leave no orphans.
//! - Once a process group has been observed empty (`ESRCH`), it is never signalled again by
//!   its owner, so a recycled pgid is not hit.
//! - stderr is drained in the background into a bounded ring; memory use does not grow with
//!   the agent's output.
//! - Process groups `<= 1` and the server's own group are never signalled.
//! - [`AgentProcess::stderr_tail`] never shows a value of the spec's env (see
//!   [`redact::Redactor`]), and no `Debug` output of a spec shows one.
//! - A terminal's shell ([`pty::PtyShell`]) leads a session of its own and is supervised by
//!   session: its kill reaches every job group the shell made.
//! - A runner ([`runner`]) forgets an execution's output only once its owner acknowledged
//!   it, and kills its agents when no owner was connected for its grace period.
//! - [`runner::ssh`] never accepts a host key it does not already know (batch mode, strict
//!   checking against the executor's own known_hosts file).
//! - An execution through a [`runner::RunnerClient`] has one stdout that carries each runner
//!   item once, in order, and one stdin whose items reach the agent once, across dropped
//!   connections of any transport (re-attached after the last item it took).
//! - Every path from outside is resolved beneath its root by [`confine`], without a
//!   check-then-use race.

#![cfg_attr(
    test,
    allow(
        clippy::disallowed_methods,
        reason = "unit tests spawn tasks and start processes freely"
    )
)]

pub mod agent_install;
pub mod confine;
mod error;
mod exit;
pub mod git;
mod group;
mod process;
pub mod program;
pub mod pty;
pub mod redact;
pub mod runner;
pub mod site;
mod stderr;
pub mod terminal;
pub mod tui_screen;
pub mod tunnel;

pub use error::RuntimeError;
pub use exit::ExitInfo;
pub use group::{group_alive, group_has_live_member, kill_group, kill_session, session_members};
pub use process::{AgentProcess, AgentStdio, DEFAULT_STDERR_LIMIT, EnvPolicy, ProcessSpec, spawn};
