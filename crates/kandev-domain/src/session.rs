//! Session states and the one table of allowed transitions (docs/lifecycle.md rule 1).

use thiserror::Error;

/// The state of an agent session (docs/lifecycle.md section A).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SessionState {
    Created,
    Starting,
    Running,
    WaitingForInput,
    Completed,
    Failed,
    Cancelled,
}

use SessionState::*;

/// Every allowed transition, and only these (lifecycle rule 1).
///
/// - `Created` starts, or ends before it ever ran.
/// - `Starting` becomes ready (`WaitingForInput`), runs a prompt that waited for readiness,
///   or fails / is cancelled.
/// - `Running` ends its turn (`WaitingForInput`), or the session completes, fails or is
///   cancelled.
/// - `WaitingForInput` takes a prompt (`Running`), resumes or restarts (`Starting`), or ends.
/// - `Completed` reopens with a prompt or a resume (rule 2).
/// - `Failed` and `Cancelled` need an explicit resume or fresh start (`Starting`).
/// - Startup reconciliation (rule 42) moves `Starting`/`Running` to `WaitingForInput`,
///   which the rows above already allow.
pub const TRANSITIONS: &[(SessionState, SessionState)] = &[
    (Created, Starting),
    (Created, Failed),
    (Created, Cancelled),
    (Starting, WaitingForInput),
    (Starting, Running),
    (Starting, Failed),
    (Starting, Cancelled),
    (Running, WaitingForInput),
    (Running, Completed),
    (Running, Failed),
    (Running, Cancelled),
    (WaitingForInput, Running),
    (WaitingForInput, Starting),
    (WaitingForInput, Completed),
    (WaitingForInput, Failed),
    (WaitingForInput, Cancelled),
    (Completed, Running),
    (Completed, Starting),
    (Failed, Starting),
    (Cancelled, Starting),
];

/// A transition outside [`TRANSITIONS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error("session cannot go from {} to {}", from.as_str(), to.as_str())]
pub struct InvalidTransition {
    pub from: SessionState,
    pub to: SessionState,
}

impl SessionState {
    pub const ALL: [SessionState; 7] =
        [Created, Starting, Running, WaitingForInput, Completed, Failed, Cancelled];

    pub fn as_str(self) -> &'static str {
        match self {
            Created => "CREATED",
            Starting => "STARTING",
            Running => "RUNNING",
            WaitingForInput => "WAITING_FOR_INPUT",
            Completed => "COMPLETED",
            Failed => "FAILED",
            Cancelled => "CANCELLED",
        }
    }

    pub fn parse(value: &str) -> Option<SessionState> {
        SessionState::ALL.into_iter().find(|s| s.as_str() == value)
    }

    /// `Completed`, `Failed` and `Cancelled` end a session.
    pub fn is_terminal(self) -> bool {
        matches!(self, Completed | Failed | Cancelled)
    }

    /// `Failed` and `Cancelled`: a prompt is refused until an explicit resume or fresh start
    /// (rule 2).
    pub fn needs_resume(self) -> bool {
        matches!(self, Failed | Cancelled)
    }

    pub fn can_become(self, to: SessionState) -> bool {
        TRANSITIONS.contains(&(self, to))
    }

    /// The checked transition: the new state, or a typed error naming both states.
    pub fn transition(self, to: SessionState) -> Result<SessionState, InvalidTransition> {
        if self.can_become(to) { Ok(to) } else { Err(InvalidTransition { from: self, to }) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The full 7x7 matrix, one row per `from` state in `ALL` order; `1` = allowed.
    /// Columns: CREATED STARTING RUNNING WAITING COMPLETED FAILED CANCELLED.
    const MATRIX: [[u8; 7]; 7] = [
        [0, 1, 0, 0, 0, 1, 1], // CREATED
        [0, 0, 1, 1, 0, 1, 1], // STARTING
        [0, 0, 0, 1, 1, 1, 1], // RUNNING
        [0, 1, 1, 0, 1, 1, 1], // WAITING_FOR_INPUT
        [0, 1, 1, 0, 0, 0, 0], // COMPLETED
        [0, 1, 0, 0, 0, 0, 0], // FAILED
        [0, 1, 0, 0, 0, 0, 0], // CANCELLED
    ];

    #[test]
    fn l01_transition_table_is_exactly_the_matrix() {
        for (i, from) in SessionState::ALL.into_iter().enumerate() {
            for (j, to) in SessionState::ALL.into_iter().enumerate() {
                let allowed = MATRIX[i][j] == 1;
                assert_eq!(from.can_become(to), allowed, "{from:?} -> {to:?}");
                match from.transition(to) {
                    Ok(state) => {
                        assert!(allowed);
                        assert_eq!(state, to);
                    }
                    Err(err) => {
                        assert!(!allowed);
                        assert_eq!(err, InvalidTransition { from, to });
                    }
                }
            }
        }
    }

    #[test]
    fn l01_terminal_states_are_completed_failed_cancelled() {
        let terminal: Vec<_> = SessionState::ALL.into_iter().filter(|s| s.is_terminal()).collect();
        assert_eq!(terminal, vec![Completed, Failed, Cancelled]);
    }

    #[test]
    fn l01_invalid_transition_error_names_both_states() {
        let err = Failed.transition(Running).unwrap_err();
        assert_eq!(err.to_string(), "session cannot go from FAILED to RUNNING");
    }

    #[test]
    fn l02_terminal_failed_and_cancelled_cannot_take_a_prompt_directly() {
        assert!(!Failed.can_become(Running));
        assert!(!Cancelled.can_become(Running));
        assert!(Completed.can_become(Running), "a prompt reopens a completed session");
    }

    #[test]
    fn l42_reconciliation_transitions_are_allowed() {
        assert!(Starting.can_become(WaitingForInput));
        assert!(Running.can_become(WaitingForInput));
    }

    #[test]
    fn state_names_round_trip() {
        for s in SessionState::ALL {
            assert_eq!(SessionState::parse(s.as_str()), Some(s));
        }
        assert_eq!(SessionState::parse("running"), None);
    }
}
