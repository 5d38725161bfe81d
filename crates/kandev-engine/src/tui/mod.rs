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
mod launch;
mod watch;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use kandev_domain::{RepositoryId, SessionId, TaskId};
use kandev_runtime::pty::PtyShell;
use tokio::sync::watch as channel;

/// The size a terminal UI starts at, until a viewer resizes it.
pub const TUI_COLS: u16 = 120;
pub const TUI_ROWS: u16 = 36;

/// A terminal UI's PTY, as the screen reader and the terminal stream share it.
pub(crate) struct TuiTerminal {
    pub task_id: TaskId,
    /// The task's first repository (terminals are listed by one).
    pub repository_id: RepositoryId,
    pub shell: Arc<PtyShell>,
    /// The PTY's (cols, rows): the screen reader follows a resize.
    pub size: channel::Sender<(u16, u16)>,
}

impl TuiTerminal {
    pub(crate) fn new(task_id: TaskId, repository_id: RepositoryId, shell: PtyShell) -> Self {
        let (size, _) = channel::channel((TUI_COLS, TUI_ROWS));
        TuiTerminal { task_id, repository_id, shell: Arc::new(shell), size }
    }

    /// Resizes the PTY, and the screen the rules read with it.
    pub(crate) async fn resize(
        &self,
        cols: u16,
        rows: u16,
    ) -> Result<(), kandev_runtime::pty::ShellGone> {
        self.shell.resize(cols, rows).await?;
        self.size.send_replace((cols, rows));
        Ok(())
    }
}

/// The running terminal UIs, by session: the actor's, or one the last run left on the
/// runner that its actor takes over when it starts.
#[derive(Default)]
pub(crate) struct TuiTerminals {
    open: Mutex<HashMap<SessionId, Arc<TuiTerminal>>>,
}

impl TuiTerminals {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<SessionId, Arc<TuiTerminal>>> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn get(&self, id: &SessionId) -> Option<Arc<TuiTerminal>> {
        self.lock().get(id).cloned()
    }

    pub(crate) fn insert(&self, id: SessionId, terminal: Arc<TuiTerminal>) {
        self.lock().insert(id, terminal);
    }

    pub(crate) fn remove(&self, id: &SessionId) -> Option<Arc<TuiTerminal>> {
        self.lock().remove(id)
    }

    /// The sessions whose terminal UI runs.
    pub(crate) fn sessions(&self) -> Vec<SessionId> {
        self.lock().keys().cloned().collect()
    }
}

/// Whether the session runs a terminal UI (its actor is [`actor`], not the ACP one).
pub(crate) fn is_tui(session: &kandev_domain::transcript::Session) -> bool {
    session.terminal_ui.is_some()
}
