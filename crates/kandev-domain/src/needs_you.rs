//! Whether a task needs its developer (issue 14): a pending permission request, a question
//! the agent is waiting on, a failed session, or a pull request whose auto-fix stopped
//! (issue 46: its feedback rounds are used up). Worked out by the server from its primary
//! session, so the board, the tab title and every client agree without guessing.

use crate::session::SessionState;

/// Why a task needs its developer; the most urgent reason when several hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NeedsYou {
    /// The agent waits for an answer to a permission request.
    Permission,
    /// The agent asked a question and waits for the answer.
    Question,
    /// The session failed: it needs a look (and a new message or a resume).
    Error,
    /// The pull request's checks or reviews still ask for changes after the feedback rounds
    /// the workflow allows: auto-fix stopped.
    PullRequest,
}

impl NeedsYou {
    pub const ALL: [NeedsYou; 4] =
        [NeedsYou::Permission, NeedsYou::Question, NeedsYou::Error, NeedsYou::PullRequest];

    pub fn as_str(self) -> &'static str {
        match self {
            NeedsYou::Permission => "permission",
            NeedsYou::Question => "question",
            NeedsYou::Error => "error",
            NeedsYou::PullRequest => "pull_request",
        }
    }

    pub fn parse(s: &str) -> Option<NeedsYou> {
        NeedsYou::ALL.into_iter().find(|n| n.as_str() == s)
    }
}

/// What the primary session shows about whether its developer is needed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Waiting {
    /// Permission requests the agent waits on.
    pub permissions: usize,
    /// Questions the agent waits on (asked with an ask-user tool).
    pub questions: usize,
    /// The session holds a last error (the agent crashed, a start failed).
    pub last_error: bool,
    /// The task's pull request stopped auto-fixing (its rounds are used up).
    pub pull_request: bool,
}

/// Whether the task of a primary session in `state`, waiting on `waiting`, needs its
/// developer. A request outranks a question, which outranks an error: an answer is what lets
/// the agent go on. An error counts once nothing runs: a failed session, or one waiting for
/// input with a last error (the agent crashed; the next message starts it again). A cancelled
/// session needs nobody (the developer cancelled it).
pub fn needs_you(state: SessionState, waiting: Waiting) -> Option<NeedsYou> {
    if waiting.permissions > 0 {
        Some(NeedsYou::Permission)
    } else if waiting.questions > 0 {
        Some(NeedsYou::Question)
    } else {
        match state {
            SessionState::Failed => Some(NeedsYou::Error),
            SessionState::WaitingForInput if waiting.last_error => Some(NeedsYou::Error),
            _ if waiting.pull_request => Some(NeedsYou::PullRequest),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOTHING: Waiting =
        Waiting { permissions: 0, questions: 0, last_error: false, pull_request: false };

    #[test]
    fn i14_needs_you_for_every_state_and_wait() {
        for state in SessionState::ALL {
            let expected = if state == SessionState::Failed { Some(NeedsYou::Error) } else { None };
            assert_eq!(needs_you(state, NOTHING), expected, "{state:?} with nothing waiting");
            let errored = Waiting { last_error: true, ..NOTHING };
            let expected = match state {
                SessionState::Failed | SessionState::WaitingForInput => Some(NeedsYou::Error),
                _ => None, // working again, or cancelled by the developer
            };
            assert_eq!(needs_you(state, errored), expected, "{state:?} with a last error");
            let permission = Waiting { permissions: 1, questions: 1, last_error: true, ..NOTHING };
            assert_eq!(needs_you(state, permission), Some(NeedsYou::Permission), "{state:?}");
            let question = Waiting { questions: 2, last_error: true, ..NOTHING };
            assert_eq!(needs_you(state, question), Some(NeedsYou::Question), "{state:?}");
            // Issue 46: a pull request whose auto-fix stopped, below anything of the session.
            let stopped = Waiting { pull_request: true, ..NOTHING };
            let expected = match state {
                SessionState::Failed => NeedsYou::Error,
                _ => NeedsYou::PullRequest,
            };
            assert_eq!(needs_you(state, stopped), Some(expected), "{state:?}");
        }
    }

    #[test]
    fn i14_needs_you_round_trips_through_its_name() {
        for n in NeedsYou::ALL {
            assert_eq!(NeedsYou::parse(n.as_str()), Some(n));
        }
        assert_eq!(NeedsYou::parse("bored"), None);
    }
}
