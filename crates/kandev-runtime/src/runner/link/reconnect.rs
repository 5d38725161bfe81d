//! Reconnecting: opening the connection again with [`Backoff`] after a drop, and what the
//! link answers meanwhile (every command that needs no connection; the others wait for the
//! next one).

use std::collections::HashMap;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinSet;

use super::connection::Opened;
use super::{CLOSED, Command, Link, LinkState, Route, admit, gone, reap};

/// Back-off between attempts to open a connection again: `first`, doubled each time up to
/// `max`, for at most `attempts` attempts (then the link is gone for good).
#[derive(Debug, Clone, Copy)]
pub struct Backoff {
    pub first: Duration,
    pub max: Duration,
    pub attempts: u32,
}

impl Default for Backoff {
    /// What an SSH executor uses: 20 attempts, 200 ms to 30 s apart (about 8 minutes).
    fn default() -> Self {
        Self { first: Duration::from_millis(200), max: Duration::from_secs(30), attempts: 20 }
    }
}

impl Backoff {
    /// What the local runner uses: never gives up, 100 ms to 5 s apart (a runner that died
    /// is started again by the transport).
    pub fn forever() -> Self {
        Self { first: Duration::from_millis(100), max: Duration::from_secs(5), attempts: u32::MAX }
    }
}

impl Link {
    /// Opens a new connection with back-off, answering the commands that need no connection
    /// meanwhile. `Err(None)`: closed meanwhile; `Err(Some)`: gone for good.
    pub(super) async fn reopen(
        &mut self,
        routes: &mut HashMap<String, Route>,
        followers: &mut JoinSet<()>,
    ) -> Result<Opened, Option<String>> {
        let mut delay = self.backoff.first;
        let mut attempt = 1u32;
        loop {
            let open = self.transport.open();
            let failed =
                match while_offline(open, &mut self.commands, &self.state, routes, followers).await
                {
                    None => return Err(None),
                    Some(Ok(opened)) => return Ok(opened),
                    Some(Err(err)) => err,
                };
            if !failed.transient || attempt >= self.backoff.attempts {
                return Err(Some(failed.message));
            }
            tracing::warn!(attempt, error = %failed.message, "reaching the runner again failed; trying again");
            let wait = tokio::time::sleep(delay);
            if while_offline(wait, &mut self.commands, &self.state, routes, followers)
                .await
                .is_none()
            {
                return Err(None);
            }
            delay = (delay * 2).min(self.backoff.max);
            attempt = attempt.saturating_add(1);
        }
    }
}

/// Runs `work` while no connection is open, answering the commands that need none; `None`
/// when the link was closed meanwhile (every follower told).
async fn while_offline<T>(
    work: impl Future<Output = T>,
    commands: &mut mpsc::UnboundedReceiver<Command>,
    state: &watch::Sender<LinkState>,
    routes: &mut HashMap<String, Route>,
    followers: &mut JoinSet<()>,
) -> Option<T> {
    tokio::pin!(work);
    loop {
        tokio::select! {
            done = &mut work => return Some(done),
            Some(command) = commands.recv() => {
                if let Some(done) = offline(command, routes, followers) {
                    gone(state, routes, CLOSED);
                    let _ = done.send(());
                    return None;
                }
            }
            Some(()) = reap(followers) => {}
        }
    }
}

/// A command that needs no connection (any command while reconnecting: what needs one waits
/// for the next connection, or is answered from the state). `Some`: the link is closing.
pub(super) fn offline(
    command: Command,
    routes: &mut HashMap<String, Route>,
    followers: &mut JoinSet<()>,
) -> Option<oneshot::Sender<()>> {
    match command {
        Command::Run(task) => {
            followers.spawn(task);
        }
        Command::Close(done) => return Some(done),
        // Sent on the next connection: the spawn as a pending one, the attach as a follow
        // whose take-over happens there, the stop as a requested one.
        Command::Spawn { exec, follower } => {
            if admit(&exec, &follower, routes) {
                routes.insert(exec, Route::Follow(follower));
            }
        }
        Command::Attach { info, follower, .. } => {
            if admit(&info.exec, &follower, routes) {
                routes.insert(info.exec, Route::Follow(follower));
            }
        }
        Command::Forget { exec } => {
            // The next connection forgets what nobody follows.
            routes.remove(&exec);
        }
        Command::Stop { exec, grace } => {
            if let Some(Route::Follow(follower)) = routes.get_mut(&exec) {
                follower.stopping = Some(grace);
            }
        }
        // A size for a terminal nobody sees while the connection is down: the next one
        // after it counts.
        Command::DropTransport | Command::Resize { .. } => {}
    }
    None
}
