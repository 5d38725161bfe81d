//! What a terminal-UI session's actor hears from its own child futures: the end of a start,
//! and the screen reader's reports, each tagged with the epoch it belongs to.

use kandev_domain::transcript::{LastError, TuiScreen};
use kandev_runtime::terminal::TerminalExit;

use crate::shells::TuiTerminal;

/// What the actor's own child futures report.
pub(crate) enum Event {
    /// The start of `epoch` ended: the running terminal UI, or why it did not start.
    Started { epoch: i64, result: std::result::Result<TuiTerminal, LastError> },
    /// What the screen shows now.
    Screen { epoch: i64, screen: TuiScreen },
    /// A prompt was typed a while ago and the agent was never seen working on it (it
    /// answered faster than the screen is read, or took it as a command): the next one may go.
    Typed { epoch: i64, number: u64 },
    /// The program exited.
    Exited { epoch: i64, exit: TerminalExit },
}
