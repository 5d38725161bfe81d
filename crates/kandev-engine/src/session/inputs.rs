//! Input to the agent that must arrive exactly once across a `kill -9` of the server (issue 38
//! item 12): a turn's prompt, the user's cancel, a permission answer. Each is recorded in the
//! transaction that decides it, and its line is named by a key (`AcpClient::prompt_keyed`
//! and the like) that a runner lists once it took the line. A server that re-adopts the
//! agent after a restart sends again, from what is recorded, exactly the ones whose key the
//! runner does not list (`adopt.rs`).

use kandev_domain::TurnId;

/// The key of a turn's `session/prompt`.
pub(crate) fn prompt_key(turn_id: &TurnId) -> String {
    format!("prompt:{turn_id}")
}

/// The key of the user's `session/cancel` of a turn.
pub(crate) fn cancel_key(turn_id: &TurnId) -> String {
    format!("cancel:{turn_id}")
}

/// The key of the answer to a permission request (`request_id`: Kandev's id of the request).
pub(crate) fn answer_key(request_id: &str) -> String {
    format!("answer:{request_id}")
}
