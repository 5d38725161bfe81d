//! A failpoint for crash tests (issue 20, lifecycle rule 42): with
//! `KANDEV_FAULT=abort_before_ack:<n>` in the server's environment, the `n`-th time a session
//! transaction that recorded a runner position has committed, the process aborts before the
//! runner is acknowledged (no cleanup, like `kill -9` at the worst moment: the effects are
//! stored, the runner will replay them). Without the variable (or with another value) nothing
//! happens; the check is one atomic load once the variable was read.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// The environment variable that arms the failpoint.
pub const FAULT_ENV: &str = "KANDEV_FAULT";

/// On which hit to abort, read once.
fn armed() -> Option<u64> {
    static ARMED: OnceLock<Option<u64>> = OnceLock::new();
    *ARMED.get_or_init(|| {
        let value = std::env::var(FAULT_ENV).ok()?;
        let n = value.strip_prefix("abort_before_ack:")?.parse().ok()?;
        tracing::warn!(n, "failpoint armed: the server aborts before acknowledging commit {n}");
        Some(n)
    })
}

/// Called after a commit that recorded a runner position, before the runner is
/// acknowledged.
pub(crate) fn before_ack() {
    static HITS: AtomicU64 = AtomicU64::new(0);
    let Some(n) = armed() else { return };
    if HITS.fetch_add(1, Ordering::Relaxed) + 1 == n {
        tracing::error!(
            "failpoint {FAULT_ENV}: aborting after a commit, before its acknowledgement"
        );
        std::process::abort();
    }
}
