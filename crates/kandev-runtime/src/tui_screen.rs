//! What an agent's own terminal UI is doing, read from its screen (issue 52, scope 2): the
//! raw bytes it writes to its PTY go through a terminal emulator (`vt100`), and the visible
//! screen is classified by the agent's rules ([`TuiAgent::rules`]) as working, waiting for
//! input, or asking for a permission.
//!
//! The rules are data, one [`TuiRules`] per agent, tested on screens recorded from the real
//! programs (`tests/tui_screens/<agent>/<state>-<n>.txt`, replayed by `tests/tui_screens.rs`).
//!
//! Limits: only the visible screen is read (not the scrollback), so a question that scrolled
//! out of view is not seen; the rules are text markers, so an agent that changes its wording
//! reads as [`TuiState::Unknown`] until its rules learn the new text from a new recording.

use std::num::NonZeroU16;

/// An agent whose terminal UI Kandev knows how to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TuiAgent {
    /// `kandev fake-tui`, the scripted stand-in of the tests.
    Fake,
    /// Anthropic's Claude Code (`claude`).
    Claude,
    /// OpenAI's Codex CLI (`codex`).
    Codex,
}

/// What a terminal UI is doing, as its screen shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TuiState {
    /// It is working on a prompt (a spinner, "esc to interrupt").
    Working,
    /// Its input box waits for a prompt.
    WaitingForInput,
    /// It asks whether it may do something and waits for the answer.
    NeedsPermission,
    /// None of its rules matched: a login or onboarding screen, a dialog, a start-up.
    Unknown,
}

/// Text that must be visible for a rule to hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marker {
    /// A visible row contains this text.
    Contains(&'static str),
    /// A visible row, its leading spaces and box-drawing characters left out, starts with
    /// this text.
    RowStarts(&'static str),
}

/// One agent's rules. They are tried in order (permission, working, waiting); a rule holds
/// when every marker of one of its sets is visible.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TuiRules {
    /// A permission question.
    pub permission: &'static [&'static [Marker]],
    /// Work in progress.
    pub working: &'static [&'static [Marker]],
    /// The input box, waiting.
    pub waiting: &'static [&'static [Marker]],
}

use Marker::{Contains, RowStarts};

/// `kandev fake-tui`: its question, spinner line and prompt with its hint line.
const FAKE: TuiRules = TuiRules {
    permission: &[&[Contains("Allow fake tool"), RowStarts("1. Yes"), RowStarts("2. No")]],
    working: &[&[Contains("esc to interrupt")]],
    waiting: &[&[Contains("Fake TUI agent"), Contains("Ctrl-D quits"), RowStarts(">")]],
};

/// Claude Code 2.1: a tool's question "Do you want to proceed?" over numbered choices
/// (`❯ 1. Yes` … `4. No`); "esc to interrupt" in the status line while a turn runs; the input
/// box between two rules starts with `❯` (so do the user's earlier prompts above it, which is
/// why working and permission are tried first).
const CLAUDE: TuiRules = TuiRules {
    permission: &[&[Contains("Do you want to"), Contains("1. Yes"), Contains(". No")]],
    working: &[&[Contains("esc to interrupt")]],
    waiting: &[&[RowStarts("❯")]],
};

/// Codex 0.171: "Would you like to run the following command?" over `› 1. Yes, proceed (y)`;
/// "• Working (0s • esc to interrupt)" above the composer while a turn runs; the composer
/// row starts with `›` (as do earlier prompts).
const CODEX: TuiRules = TuiRules {
    permission: &[&[Contains("Would you like to"), Contains("1. Yes")]],
    working: &[&[Contains("esc to interrupt")]],
    waiting: &[&[RowStarts("›")]],
};

impl TuiAgent {
    /// This agent's rules.
    pub fn rules(self) -> &'static TuiRules {
        match self {
            TuiAgent::Fake => &FAKE,
            TuiAgent::Claude => &CLAUDE,
            TuiAgent::Codex => &CODEX,
        }
    }
}

impl TuiRules {
    /// The state `rows` (the visible screen's text, row by row) show.
    pub fn classify<S: AsRef<str>>(&self, rows: &[S]) -> TuiState {
        let holds = |sets: &[&[Marker]]| {
            sets.iter().any(|set| set.iter().all(|marker| visible(*marker, rows)))
        };
        if holds(self.permission) {
            TuiState::NeedsPermission
        } else if holds(self.working) {
            TuiState::Working
        } else if holds(self.waiting) {
            TuiState::WaitingForInput
        } else {
            TuiState::Unknown
        }
    }
}

fn visible<S: AsRef<str>>(marker: Marker, rows: &[S]) -> bool {
    rows.iter().map(AsRef::as_ref).any(|row| match marker {
        Contains(text) => row.contains(text),
        RowStarts(text) => row.trim_start_matches(is_frame).starts_with(text),
    })
}

/// Spaces and the box-drawing characters a UI frames its input box with.
fn is_frame(c: char) -> bool {
    c.is_whitespace() || ('\u{2500}'..='\u{257f}').contains(&c)
}

/// A terminal UI's screen: feed it the program's output, ask what it shows.
pub struct TuiScreen {
    agent: TuiAgent,
    parser: vt100::Parser,
}

impl std::fmt::Debug for TuiScreen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TuiScreen").field("agent", &self.agent).finish_non_exhaustive()
    }
}

impl TuiScreen {
    /// An empty screen of `rows` × `cols` (each at least 1) for `agent`'s output.
    pub fn new(agent: TuiAgent, rows: u16, cols: u16) -> TuiScreen {
        let (rows, cols) = size(rows, cols);
        TuiScreen { agent, parser: vt100::Parser::new(rows, cols, 0) }
    }

    /// Takes more of the program's output (any split: an escape sequence may be cut).
    pub fn feed(&mut self, bytes: &[u8]) {
        self.parser.process(bytes);
    }

    /// The terminal was resized (as the PTY was).
    pub fn resize(&mut self, rows: u16, cols: u16) {
        let (rows, cols) = size(rows, cols);
        self.parser.screen_mut().set_size(rows, cols);
    }

    /// The visible screen's text, row by row (trailing spaces left out).
    pub fn rows(&self) -> Vec<String> {
        let screen = self.parser.screen();
        let (_, cols) = screen.size();
        screen.rows(0, cols.get()).map(|row| row.trim_end().to_owned()).collect()
    }

    /// What the screen shows, by the agent's rules.
    pub fn state(&self) -> TuiState {
        self.agent.rules().classify(&self.rows())
    }
}

fn size(rows: u16, cols: u16) -> (NonZeroU16, NonZeroU16) {
    (
        NonZeroU16::new(rows).unwrap_or(NonZeroU16::MIN),
        NonZeroU16::new(cols).unwrap_or(NonZeroU16::MIN),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permission_comes_before_working_and_working_before_waiting() {
        let rows = ["Fake TUI agent", "> hi", "⠋ Working… (esc to interrupt)"];
        assert_eq!(FAKE.classify(&rows), TuiState::Working);
        let rows = [
            "Fake TUI agent",
            "> hi",
            "Allow fake tool to write notes.txt?",
            "  1. Yes",
            "  2. No",
        ];
        assert_eq!(FAKE.classify(&rows), TuiState::NeedsPermission);
        let rows = ["Fake TUI agent", "", "──────", "#permission asks, …, Ctrl-D quits", ">"];
        assert_eq!(FAKE.classify(&rows), TuiState::WaitingForInput);
        assert_eq!(FAKE.classify(&["Log in to continue"]), TuiState::Unknown);
    }

    #[test]
    fn a_row_framed_by_box_characters_starts_after_its_frame() {
        assert!(visible(RowStarts("> "), &["│ > type here │"]));
        assert!(!visible(RowStarts("> "), &["│ >> "]));
    }

    #[test]
    fn an_escape_sequence_cut_between_two_feeds_is_drawn_whole() {
        let mut screen = TuiScreen::new(TuiAgent::Fake, 4, 20);
        screen.feed(b"\x1b[1mFake TUI agent\x1b[0m\r\n\x1b[");
        screen.feed(b"2m> \x1b[0m");
        assert_eq!(screen.rows(), ["Fake TUI agent", ">", "", ""]);
    }
}
