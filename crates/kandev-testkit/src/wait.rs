//! Waiting, bounded, for a state that no event announces: a process list, a file, a count
//! kept by the code under test. The test says what it waits for, and a timeout says it.
//!
//! This is the one place that looks again and again (tidy.rs refuses a sleep in a loop in
//! any test file). Where an event exists (a channel message, a frame, a child's exit, a
//! line on a stream, a server notification) a test waits for that event with
//! `tokio::time::timeout` instead, or with `server::Watch`.

use std::fmt::Display;
use std::time::{Duration, Instant};

/// How long a test waits for anything before it fails.
pub const DEADLINE: Duration = Duration::from_secs(60);

/// How long [`poll`] waits between two looks.
pub const POLL: Duration = Duration::from_millis(20);

/// What a check answers: `true` or `Some(value)` once what it waits for is there.
pub trait Done {
    type Value;
    fn done(self) -> Option<Self::Value>;
}

impl Done for bool {
    type Value = ();
    fn done(self) -> Option<()> {
        self.then_some(())
    }
}

impl<T> Done for Option<T> {
    type Value = T;
    fn done(self) -> Option<T> {
        self
    }
}

/// Waits until `check` is done (`true`, or `Some(value)`: the value is returned); fails the
/// test, naming `what`, if it is not within [`DEADLINE`].
pub async fn eventually<D: Done>(what: impl Display, check: impl AsyncFnMut() -> D) -> D::Value {
    eventually_within(DEADLINE, what, check).await
}

/// [`eventually`] with its own bound (where the bound is part of what the test claims).
pub async fn eventually_within<D: Done>(
    within: Duration,
    what: impl Display,
    check: impl AsyncFnMut() -> D,
) -> D::Value {
    match poll(within, check).await {
        Some(value) => value,
        None => panic!("timed out after {within:?} waiting for: {what}"),
    }
}

/// Looks at `check` now and every [`POLL`] until it is done (`Some(value)`), or `within` has
/// passed (`None`, after one last look), for a test that says more than a timeout would
/// when it fails. The bound is wall-clock time; the pauses are tokio sleeps, so under paused
/// tokio time they take no real time (the looks come as fast as the check runs).
pub async fn poll<D: Done>(
    within: Duration,
    mut check: impl AsyncFnMut() -> D,
) -> Option<D::Value> {
    let deadline = Instant::now() + within;
    loop {
        let last_look = Instant::now() >= deadline;
        if let Some(value) = check().await.done() {
            return Some(value);
        }
        if last_look {
            return None;
        }
        tokio::time::sleep(POLL.min(deadline.saturating_duration_since(Instant::now()))).await;
    }
}

/// Waits until the file at `path` holds a `T` (its trimmed text parses: a pid a script wrote,
/// say) and returns it; fails the test past [`DEADLINE`].
pub async fn file_value<T: std::str::FromStr>(path: &std::path::Path) -> T {
    let what = format!("a value in {}", path.display());
    eventually(what, async || std::fs::read_to_string(path).ok()?.trim().parse().ok()).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_condition_that_comes_true_is_waited_for() {
        let mut looks = 0;
        let got = eventually("the third look", async || {
            looks += 1;
            (looks == 3).then_some(looks)
        })
        .await;
        assert_eq!(got, 3);
    }

    #[tokio::test]
    async fn a_condition_that_never_holds_times_out_saying_what_was_awaited() {
        let waited = tokio::spawn(async {
            eventually_within(Duration::from_millis(50), "the sky to fall", async || false).await
        })
        .await;
        let panic = waited.unwrap_err().into_panic();
        let message = panic.downcast_ref::<String>().unwrap();
        assert!(message.contains("waiting for: the sky to fall"), "{message}");
        assert_eq!(poll(Duration::ZERO, async || None::<()>).await, None);
    }
}
