//! The screen reader of a terminal-UI session: the PTY's output (from its first kept byte,
//! so a terminal taken over after a restart is read from its replayed scrollback) goes
//! through a terminal emulator, and once the output pauses the screen is classified by the
//! agent's rules; each change of what it shows, and the program's exit, is reported to the
//! session's actor, tagged with the epoch it runs for.

use std::sync::Arc;
use std::time::Duration;

use kandev_domain::agent::AgentKind;
use kandev_domain::transcript::TuiScreen;
use kandev_runtime::tui_screen::{TuiAgent, TuiScreen as Screen, TuiState};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::shells::TuiTerminal;
use crate::tui::event::Event;

/// The screen is read once the output paused this long (a redraw is often several
/// writes: reading between them would see half a screen)…
const QUIET: Duration = Duration::from_millis(40);
/// …or at the latest this long after the first unread output (a spinner never pauses).
const LATEST: Duration = Duration::from_millis(250);

/// The rules Kandev has for `kind`'s terminal UI, if any.
pub(crate) fn rules_of(kind: AgentKind) -> Option<TuiAgent> {
    match kind {
        AgentKind::Mock => Some(TuiAgent::Fake),
        AgentKind::Claude => Some(TuiAgent::Claude),
        AgentKind::Codex => Some(TuiAgent::Codex),
        _ => None,
    }
}

fn screen_of(state: TuiState) -> TuiScreen {
    match state {
        TuiState::Working => TuiScreen::Working,
        TuiState::WaitingForInput => TuiScreen::Waiting,
        TuiState::NeedsPermission => TuiScreen::Permission,
        TuiState::Unknown => TuiScreen::Unknown,
    }
}

/// Reads `terminal`'s screen for the actor until the program exits (then reports the exit)
/// or the actor is gone. Without rules for the agent, the screen reads as unknown once the
/// program drew anything.
pub(crate) async fn read_screen(
    agent: Option<TuiAgent>,
    terminal: Arc<TuiTerminal>,
    epoch: i64,
    report: mpsc::Sender<Event>,
) {
    let mut changes = terminal.shell.changes();
    let mut size = terminal.size.subscribe();
    let (cols, rows) = *size.borrow_and_update();
    let mut screen = agent.map(|agent| Screen::new(agent, rows, cols));
    let mut offset = 0;
    let mut shown: Option<TuiScreen> = None;
    let mut unread_since: Option<Instant> = None;
    loop {
        let chunk = terminal.shell.read_since(offset);
        offset = chunk.next;
        if !chunk.data.is_empty() {
            if let Some(screen) = &mut screen {
                screen.feed(&chunk.data);
            }
            unread_since.get_or_insert_with(Instant::now);
        }
        if let Some(exit) = terminal.shell.exit()
            && terminal.shell.read_since(offset).data.is_empty()
        {
            let _ = report.send(Event::Exited { epoch, exit }).await;
            return;
        }
        // Nothing unread: nothing to classify until more output comes.
        let pause = async {
            match unread_since {
                Some(since) => {
                    tokio::time::sleep(QUIET.min(LATEST.saturating_sub(since.elapsed()))).await;
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            changed = changes.changed() => {
                if changed.is_err() && terminal.shell.exit().is_none() {
                    return; // the terminal is gone without an exit: the actor dropped it
                }
                if unread_since.is_none_or(|since| since.elapsed() < LATEST) {
                    continue;
                }
            }
            resized = size.changed() => {
                if resized.is_ok() {
                    let (cols, rows) = *size.borrow_and_update();
                    if let Some(screen) = &mut screen {
                        screen.resize(rows, cols);
                    }
                }
                continue;
            }
            () = pause => {}
        }
        unread_since = None;
        let now = screen.as_ref().map_or(TuiScreen::Unknown, |s| screen_of(s.state()));
        if shown != Some(now) {
            shown = Some(now);
            if report.send(Event::Screen { epoch, screen: now }).await.is_err() {
                return;
            }
        }
    }
}
