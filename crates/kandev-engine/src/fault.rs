//! Failpoints for crash tests, armed by `KANDEV_FAULT` in the server's environment. Without
//! the variable (or with another value) nothing happens; a check is one atomic load once the
//! variable was read.
//!
//! - `abort_before_ack:<n>` (issue 20, lifecycle rule 42): the `n`-th time a session
//!   transaction that recorded a runner position has committed, the process aborts before
//!   the runner is acknowledged (no cleanup, like `kill -9` at the worst moment: the effects
//!   are stored, the runner will replay them).
//! - `abort_after_commit:<input>` (issue 38 item 12), `<input>` one of `prompt`, `cancel`,
//!   `answer`: the first time the transaction that records that input to the agent (a turn's
//!   prompt, the user's cancel, a permission answer) has committed, the process aborts before
//!   the input is written, so only the restarted server can send it.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// The environment variable that arms the failpoints.
pub const FAULT_ENV: &str = "KANDEV_FAULT";

/// What the variable armed, read once.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Armed {
    BeforeAck(u64),
    AfterCommit(String),
}

fn armed() -> Option<&'static Armed> {
    static ARMED: OnceLock<Option<Armed>> = OnceLock::new();
    ARMED
        .get_or_init(|| {
            let value = std::env::var(FAULT_ENV).ok()?;
            let armed = if let Some(n) = value.strip_prefix("abort_before_ack:") {
                Armed::BeforeAck(n.parse().ok()?)
            } else {
                Armed::AfterCommit(value.strip_prefix("abort_after_commit:")?.to_owned())
            };
            tracing::warn!(?armed, "failpoint armed");
            Some(armed)
        })
        .as_ref()
}

/// Called after a commit that recorded a runner position, before the runner is
/// acknowledged.
pub(crate) fn before_ack() {
    static HITS: AtomicU64 = AtomicU64::new(0);
    let Some(Armed::BeforeAck(n)) = armed() else { return };
    if HITS.fetch_add(1, Ordering::Relaxed) + 1 == *n {
        tracing::error!(
            "failpoint {FAULT_ENV}: aborting after a commit, before its acknowledgement"
        );
        std::process::abort();
    }
}

/// Called after the commit that records an input to the agent (`prompt`, `cancel`,
/// `answer`), before the input is written.
pub(crate) fn after_commit(input: &str) {
    let Some(Armed::AfterCommit(armed)) = armed() else { return };
    if armed == input {
        tracing::error!(
            "failpoint {FAULT_ENV}: aborting after the commit of a {input}, before it is written"
        );
        std::process::abort();
    }
}
