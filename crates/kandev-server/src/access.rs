//! Access that ends must end everywhere (issue 38, item 6): the WebSockets open with a login
//! session or a personal token, by the credential that opened them, and their closing when
//! that credential ends.
//!
//! An HTTP request is checked by the guard each time (a keep-alive connection gains nothing),
//! but a WebSocket is checked once, at its upgrade. So each one opened by a user is registered
//! here ([`Live::register`]) and closed when its access ends:
//! - at once for what the server does itself: a logout closes the sockets of that login
//!   session ([`Live::end_session`]); `user.token.revoke` has every open credential checked
//!   again now ([`Live::recheck`]);
//! - within [`RECHECK`] for what another process writes to the database (`kandev user remove`,
//!   `kandev user passwd`, `kandev user token revoke`): [`watch`] checks each open credential
//!   that often: its session or token row still names the user, the user still exists, and,
//!   for a token, their password is the one they had when the socket opened (so a password
//!   change closes the sockets opened with a personal token too, though the token stays
//!   valid; it ends the login sessions by deleting them, except the one of the page that
//!   changed it with `user.password.set`, which stays signed in).
//!
//! Closing a socket stops its terminal streams and its subscriptions; requests it started
//! before run to their end (rule 33). Limits: a password changed between the guard's check
//! of a token and the upgrade's read of the password is not seen (the token is valid either
//! way); a database error during a check keeps the socket open until a check succeeds
//! (logged). A socket of an open server (no users, no token) is registered too and closes
//! within [`RECHECK`] of the first user being added; the server token is not registered:
//! nothing ends it but a restart.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kandev_api_types::AuthVia;
use kandev_domain::account::Actor;
use kandev_store::{Store, StoreError};
use sha2::{Digest, Sha256};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::accounts::Identity;

/// How often [`watch`] checks each open credential (the docs promise "within a second").
pub const RECHECK: Duration = Duration::from_millis(500);

/// The secret a user's request was let in with, as the guard found it (its SHA-256, as
/// stored), for the WebSocket upgrade to register.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Credential {
    /// A login session's cookie.
    Session(String),
    /// A personal API token.
    Token(String),
}

/// What one open socket was let in with.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Grant {
    /// A user's credential, the user, and a digest of their password hash at the time.
    User { credential: Credential, user_id: String, user_name: String, password: [u8; 32] },
    /// A trusted proxy's user header (issue 49): ends when the user is removed.
    Proxy { user_id: String },
    /// Nothing: the server had no users and no token (an open loopback server). It ends
    /// when the first user is added (`kandev user add`), as every request then needs a login.
    Open,
}

/// The registry of open user WebSockets (cheap to clone).
#[derive(Default, Clone)]
pub(crate) struct Live {
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    sockets: Mutex<Sockets>,
    /// Wakes [`watch`] for a check now.
    wake: Notify,
}

#[derive(Default)]
struct Sockets {
    next: u64,
    open: HashMap<u64, (Grant, CancellationToken)>,
    /// The user of each registered socket and what tells it its roles changed (issue 49).
    users: HashMap<u64, (String, CancellationToken)>,
}

/// One socket's place in the registry; it leaves when this is dropped.
pub(crate) struct Registration {
    live: Live,
    id: Option<u64>,
    ending: CancellationToken,
    changed: CancellationToken,
}

impl Registration {
    /// Cancelled when the socket must close: its access ended, or the server shuts down.
    pub(crate) fn ending(&self) -> CancellationToken {
        self.ending.clone()
    }

    /// Cancelled when the user's roles changed (a workspace membership added, changed or
    /// removed): the socket closes so the page reconnects with what it may see now.
    pub(crate) fn changed(&self) -> CancellationToken {
        self.changed.clone()
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        if let Some(id) = self.id {
            let mut sockets = self.live.sockets();
            sockets.open.remove(&id);
            sockets.users.remove(&id);
        }
    }
}

fn digest(password_hash: &str) -> [u8; 32] {
    Sha256::digest(password_hash.as_bytes()).into()
}

impl Live {
    fn sockets(&self) -> std::sync::MutexGuard<'_, Sockets> {
        self.shared.sockets.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Registers a socket `identity` opens with `credential`; its ending is a child of
    /// `closing` (the server's shutdown). Without a user's credential nothing is registered.
    /// `Ok(None)` when the user is gone already.
    pub(crate) async fn register(
        &self,
        store: &Store,
        identity: &Identity,
        credential: Option<Credential>,
        closing: &CancellationToken,
    ) -> Result<Option<Registration>, StoreError> {
        let ending = closing.child_token();
        let grant = match (&identity.actor, credential) {
            (Actor::Local, _) if identity.via == AuthVia::Open => Grant::Open,
            (Actor::User { id, .. }, None) if identity.via == AuthVia::Proxy => {
                Grant::Proxy { user_id: id.clone() }
            }
            (Actor::User { id, name }, Some(credential)) => {
                let Some((user, password_hash)) = store.user_credentials(name).await? else {
                    return Ok(None);
                };
                if &user.id != id {
                    return Ok(None);
                }
                Grant::User {
                    credential,
                    user_id: user.id,
                    user_name: user.name,
                    password: digest(&password_hash),
                }
            }
            _ => {
                let changed = CancellationToken::new();
                return Ok(Some(Registration { live: self.clone(), id: None, ending, changed }));
            }
        };
        let changed = CancellationToken::new();
        let mut sockets = self.sockets();
        let key = sockets.next;
        sockets.next += 1;
        if let Grant::User { user_id, .. } | Grant::Proxy { user_id } = &grant {
            sockets.users.insert(key, (user_id.clone(), changed.clone()));
        }
        sockets.open.insert(key, (grant, ending.clone()));
        Ok(Some(Registration { live: self.clone(), id: Some(key), ending, changed }))
    }

    /// The roles of `user_id` changed: their sockets close and reconnect (issue 49).
    pub(crate) fn roles_changed(&self, user_id: &str) {
        for (user, changed) in self.sockets().users.values() {
            if user == user_id {
                changed.cancel();
            }
        }
    }

    /// Logout: closes the sockets opened with the login session whose secret hashes to
    /// `secret_hash`.
    pub(crate) fn end_session(&self, secret_hash: &str) {
        let ended = Credential::Session(secret_hash.to_owned());
        self.end(|grant| matches!(grant, Grant::User { credential, .. } if *credential == ended));
    }

    /// Has [`watch`] check every open credential now (a token was revoked).
    pub(crate) fn recheck(&self) {
        self.shared.wake.notify_one();
    }

    fn end(&self, ended: impl Fn(&Grant) -> bool) {
        for (grant, ending) in self.sockets().open.values() {
            if ended(grant) {
                ending.cancel();
            }
        }
    }

    fn grants(&self) -> HashSet<Grant> {
        self.sockets().open.values().map(|(grant, _)| grant.clone()).collect()
    }
}

/// Whether `grant` still lets its socket in: the session or token row names the same user;
/// for a token, the user still has the same password; an open server's socket while there is
/// still no user. A login session needs no password check: a password change deletes the
/// user's login sessions, all but the one of the page that changed it (`user.password.set`),
/// whose sockets stay open.
async fn still_valid(store: &Store, grant: &Grant) -> Result<bool, StoreError> {
    let (credential, user_id, user_name, password) = match grant {
        Grant::User { credential, user_id, user_name, password } => {
            (credential, user_id, user_name, password)
        }
        Grant::Proxy { user_id } => return Ok(store.get_user(user_id).await?.is_some()),
        Grant::Open => return Ok(!store.has_users().await?),
    };
    let holder = match credential {
        Credential::Session(hash) => store.user_for_session(hash).await?,
        Credential::Token(hash) => store.user_for_token(hash).await?,
    };
    if holder.is_none_or(|user| &user.id != user_id) {
        return Ok(false);
    }
    if matches!(credential, Credential::Session(_)) {
        return Ok(true);
    }
    let current = store.user_credentials(user_name).await?;
    Ok(current.is_some_and(|(user, hash)| &user.id == user_id && digest(&hash) == *password))
}

/// Checks every open credential each `every` (and when [`Live::recheck`] asks), closing the
/// sockets whose access ended, until `shutdown`. One check per distinct credential, however
/// many sockets share it; nothing is read while no socket is registered.
pub(crate) async fn watch(store: Store, live: Live, every: Duration, shutdown: CancellationToken) {
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = ticks.tick() => {}
            _ = live.shared.wake.notified() => {}
        }
        let mut ended = HashSet::new();
        for grant in live.grants() {
            match still_valid(&store, &grant).await {
                Ok(true) => {}
                Ok(false) => {
                    ended.insert(grant);
                }
                Err(err) => {
                    tracing::warn!(error = %err, "cannot check an open WebSocket's access; will retry")
                }
            }
        }
        if !ended.is_empty() {
            tracing::info!(credentials = ended.len(), "access ended; closing its WebSockets");
            live.end(|grant| ended.contains(grant));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alice() -> Identity {
        Identity {
            actor: Actor::User { id: "u1".into(), name: "alice".into() },
            via: AuthVia::Session,
            credential: None,
            agent: None,
        }
    }

    /// A logout ends the sockets of that session only; a dropped registration leaves.
    #[tokio::test]
    async fn i38_6_end_session_cancels_only_that_sessions_sockets() {
        let store = Store::in_memory().await.unwrap();
        let mut tx = store.begin_write().await.unwrap();
        let user = tx.insert_user("alice", "hash").await.unwrap();
        tx.commit().await.unwrap();
        let identity = Identity {
            actor: Actor::User { id: user.id.clone(), name: "alice".into() },
            via: AuthVia::Session,
            credential: None,
            agent: None,
        };
        let live = Live::default();
        let closing = CancellationToken::new();
        let register = |hash: &str| {
            let credential = Some(Credential::Session(hash.into()));
            let (live, store, identity, closing) =
                (live.clone(), store.clone(), identity.clone(), closing.clone());
            async move { live.register(&store, &identity, credential, &closing).await }
        };
        let one = register("one").await.unwrap().unwrap();
        let two = register("two").await.unwrap().unwrap();
        live.end_session("one");
        assert!(one.ending().is_cancelled());
        assert!(!two.ending().is_cancelled());
        drop(one);
        assert_eq!(live.grants().len(), 1, "a dropped registration leaves");
        closing.cancel();
        assert!(two.ending().is_cancelled(), "shutdown ends every socket");
        let other = Credential::Session("x".into());
        let removed = live.register(&store, &alice(), Some(other), &closing).await.unwrap();
        assert!(removed.is_none(), "another user of that name (removed, added again) is not");
    }
}
