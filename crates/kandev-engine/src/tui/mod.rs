//! Terminal-UI sessions (issue 52, docs/terminal-ui.md): a session that runs its agent's own
//! terminal UI (Claude Code, Codex, … or `kandev fake-tui` for the Mock kind) in a PTY in the
//! task's worktree instead of speaking ACP with it. Its actor ([`actor`]) owns it like any
//! session's: it starts the program (with Kandev's MCP handed to it for this session only,
//! [`launch`]), reads what the screen shows ([`watch`], by the agent's rules of
//! `kandev_runtime::tui_screen`) into the session's state, and types prompts into it — a
//! person's, a workflow step's, review comments — once its input box waits.
//!
//! The PTY is streamed like a user terminal whose id is the session's (`terminal.attach`).
//! With the local runner it outlives the server: it is recorded in `runner_terminals` (kind
//! `tui`), and the next start takes it over, its scrollback replayed into the screen
//! reader, and its actor goes on with it (`reconcile.rs`).

pub(crate) mod actor;
mod event;
mod launch;
mod watch;

/// Whether the session runs a terminal UI (its actor is [`actor`], not the ACP one).
pub(crate) fn is_tui(session: &kandev_domain::transcript::Session) -> bool {
    session.terminal_ui.is_some()
}
