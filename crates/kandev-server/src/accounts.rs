//! Accounts (issue 21): password hashing (argon2id), the secrets of login sessions and
//! personal API tokens (random, stored as SHA-256), who a request is from ([`Identity`]),
//! the login limiter, and the `user.*` actions.
//!
//! Limits this module states: a password is checked with the same argon2 work whether or not
//! the name exists (a dummy hash stands in), so neither the answer nor its time tells which
//! names exist; a login session or a token that is revoked stops working for the next request,
//! and the WebSockets open with it are closed (`access.rs`).

use std::net::IpAddr;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use argon2::Argon2;
use argon2::password_hash::rand_core::OsRng;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use hashlink::LruCache;
use kandev_api_types::requests::{ById, Empty, PasswordSet, TokenCreate};
use kandev_api_types::responses::{Deleted, Me, PasswordChanged, TokenCreated, Tokens};
use kandev_api_types::{ApiTokenDto, AuthVia, ErrorCode, RoleDto, UserDto, WorkspaceRoleDto};
use kandev_domain::account::Actor;
use sha2::{Digest, Sha256};
use tokio::sync::Semaphore;
use tokio::time::Instant;

use crate::access::Credential;
use crate::{ApiError, AppState};

/// How long a login session lasts (also the cookie's `Max-Age`).
pub const SESSION_LIFETIME: Duration = Duration::from_secs(30 * 24 * 3600);
/// Prefix of a personal API token (tells it from the server's `--token` in logs and scans).
pub const TOKEN_PREFIX: &str = "kdv_";

/// Who a request is from and how it was let in; handlers that record `by` take it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub actor: Actor,
    pub via: AuthVia,
    /// A user's secret the request was let in with (its hash: the login session's or the
    /// personal token's); `None` for the others (the server token, an open server, agents).
    pub(crate) credential: Option<Credential>,
    /// For an agent's MCP calls: the rights it acts with (`roles.rs`).
    pub(crate) agent: Option<crate::roles::AgentRights>,
}

impl Identity {
    /// No accounts and no server token: the local person, as before accounts.
    pub fn open() -> Identity {
        Identity { actor: Actor::Local, via: AuthVia::Open, credential: None, agent: None }
    }

    /// What `by` fields record for this caller.
    pub fn by(&self) -> String {
        self.actor.by().to_owned()
    }

    fn user(&self) -> Result<(&str, &str), ApiError> {
        match &self.actor {
            Actor::User { id, name } => Ok((id, name)),
            _ => Err(ApiError::bad_request(
                "personal tokens belong to a user: log in as one (or use one of their tokens)",
            )),
        }
    }
}

/// Hashes a new password with argon2id (the crate's defaults: 19 MiB, 2 passes, 1 lane, as
/// OWASP recommends) into a PHC string with its own random salt.
pub fn hash_password(password: &str) -> Result<String, String> {
    let salt = SaltString::generate(&mut OsRng);
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|hash| hash.to_string())
        .map_err(|err| format!("cannot hash the password: {err}"))
}

/// Whether `password` matches `hash`. Without a hash (no such user) a fixed dummy hash is
/// checked instead and the answer is `false`: the same work either way.
pub fn verify_password(hash: Option<&str>, password: &str) -> bool {
    static DUMMY: OnceLock<String> = OnceLock::new();
    let dummy =
        DUMMY.get_or_init(|| hash_password("no user has this password").unwrap_or_default());
    let known = hash.is_some();
    let Ok(parsed) = PasswordHash::new(hash.unwrap_or(dummy)) else { return false };
    let matches = Argon2::default().verify_password(password.as_bytes(), &parsed).is_ok();
    known && matches
}

/// A new random secret (244 random bits from the OS, as hex) with `prefix`.
pub fn new_secret(prefix: &str) -> String {
    format!("{prefix}{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple())
}

/// What is stored of a secret: its SHA-256, as hex.
pub fn secret_hash(secret: &str) -> String {
    Sha256::digest(secret.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

/// Consecutive wrong passwords allowed for one (address, name) before logins slow down.
pub const FREE_FAILURES: u32 = 20;
/// The first wait after [`FREE_FAILURES`] wrong passwords; each further one doubles it.
const FIRST_WAIT: Duration = Duration::from_secs(1);
/// The longest wait.
const MAX_WAIT: Duration = Duration::from_secs(15 * 60);
/// (address, name) pairs remembered at most; past it the least recently failed is forgotten.
const MAX_KEYS: usize = 4096;

/// A limiter key: the client's address and the SHA-256 of the name tried, so a key has a fixed
/// size whatever the form sent.
type LoginKey = (IpAddr, [u8; 32]);

fn login_key(client: IpAddr, name: &str) -> LoginKey {
    (client, Sha256::digest(name.as_bytes()).into())
}

/// Limits password guessing per client address and name: after 20 wrong passwords in a row
/// every attempt (the right password too) waits, 1 s after the 20th and doubling with each
/// further failure up to 15 min; a success starts the count again, a wait that passed does
/// not. Unknown names are counted like known ones, so the limiter tells nothing about which
/// names exist. It remembers at most 4,096 keys: past that the least recently failed one is
/// forgotten (a guesser who fills the map to forget a name pays a checked guess per entry).
/// Time is tokio's, so tests control it.
pub struct LoginLimiter {
    keys: Mutex<LruCache<LoginKey, Failures>>,
}

impl Default for LoginLimiter {
    fn default() -> Self {
        LoginLimiter { keys: Mutex::new(LruCache::new(MAX_KEYS)) }
    }
}

#[derive(Clone, Copy)]
struct Failures {
    count: u32,
    until: Option<Instant>,
}

impl LoginLimiter {
    fn keys(&self) -> std::sync::MutexGuard<'_, LruCache<LoginKey, Failures>> {
        self.keys.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// `Err(wait)` while `client` must wait before trying `name` again.
    pub fn check(&self, client: IpAddr, name: &str) -> Result<(), Duration> {
        let now = Instant::now();
        match self.keys().peek(&login_key(client, name)).and_then(|f| f.until) {
            Some(until) if until > now => Err(until - now),
            _ => Ok(()),
        }
    }

    /// Counts a wrong password (or unknown name).
    pub fn failed(&self, client: IpAddr, name: &str) {
        let now = Instant::now();
        let key = login_key(client, name);
        let mut keys = self.keys();
        let mut entry = keys.remove(&key).unwrap_or(Failures { count: 0, until: None });
        entry.count = entry.count.saturating_add(1);
        if entry.count >= FREE_FAILURES {
            let doublings = (entry.count - FREE_FAILURES).min(20);
            let wait = FIRST_WAIT.saturating_mul(1 << doublings).min(MAX_WAIT);
            entry.until = Some(now + wait);
        }
        keys.insert(key, entry);
    }

    /// A right password: the count starts again.
    pub fn succeeded(&self, client: IpAddr, name: &str) {
        self.keys().remove(&login_key(client, name));
    }
}

/// Password checks (argon2id, 19 MiB and tens of milliseconds each) running at once, at most
/// two per CPU: past it a login is answered 429 at once instead of queueing memory.
pub struct PasswordChecks {
    slots: Arc<Semaphore>,
}

impl Default for PasswordChecks {
    fn default() -> Self {
        let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
        PasswordChecks::new(2 * cpus)
    }
}

impl PasswordChecks {
    pub fn new(slots: usize) -> Self {
        PasswordChecks { slots: Arc::new(Semaphore::new(slots)) }
    }

    /// Whether `password` matches `hash` ([`verify_password`], on a blocking thread), or
    /// `None` when every slot is taken. The slot is held by the blocking work itself, so a
    /// client that hangs up does not free it before the check ends.
    pub async fn verify(&self, hash: Option<String>, password: String) -> Option<bool> {
        let slot = self.slots.clone().try_acquire_owned().ok()?;
        let checked = tokio::task::spawn_blocking(move || {
            let _slot = slot;
            verify_password(hash.as_deref(), &password)
        })
        .await;
        Some(checked.unwrap_or(false))
    }
}

/// `user.me`.
pub async fn me(s: &AppState, who: &Identity, _: Empty) -> Result<Me, ApiError> {
    let user = match &who.actor {
        Actor::User { id, name } => Some(UserDto { id: id.clone(), name: name.clone() }),
        _ => None,
    };
    let grants = crate::roles::grants(s, who).await?;
    let owner = grants == crate::roles::Grants::All;
    let mut roles: Vec<WorkspaceRoleDto> = match &grants {
        crate::roles::Grants::All => s
            .store()
            .list_workspaces()
            .await?
            .iter()
            .map(|w| WorkspaceRoleDto { workspace_id: w.id.to_string(), role: RoleDto::Admin })
            .collect(),
        crate::roles::Grants::Roles(roles) => roles
            .iter()
            .map(|(w, r)| WorkspaceRoleDto { workspace_id: w.clone(), role: (*r).into() })
            .collect(),
    };
    roles.sort_by(|a, b| a.workspace_id.cmp(&b.workspace_id));
    Ok(Me { user, via: who.via, accounts: s.store().has_users().await?, owner, roles })
}

/// `user.token.create`: a new personal token of the caller; the secret is answered once.
pub async fn token_create(
    s: &AppState,
    who: &Identity,
    p: TokenCreate,
) -> Result<TokenCreated, ApiError> {
    let (user_id, _) = who.user()?;
    let name = kandev_domain::validate::name("name", &p.name)?;
    let secret = new_secret(TOKEN_PREFIX);
    let token = s.engine().create_token(user_id, &name, &secret_hash(&secret)).await?;
    Ok(TokenCreated { token: ApiTokenDto::from(&token), secret })
}

/// `user.token.list`: the caller's tokens, without secrets.
pub async fn token_list(s: &AppState, who: &Identity, _: Empty) -> Result<Tokens, ApiError> {
    let (user_id, _) = who.user()?;
    let tokens = s.store().list_tokens(user_id).await?;
    Ok(Tokens { tokens: tokens.iter().map(ApiTokenDto::from).collect() })
}

/// `user.token.revoke`: one of the caller's tokens stops working.
pub async fn token_revoke(s: &AppState, who: &Identity, p: ById) -> Result<Deleted, ApiError> {
    let (user_id, _) = who.user()?;
    s.engine().revoke_token(user_id, &p.id).await?;
    // The WebSockets opened with it close now (issue 38, item 6).
    s.live().recheck();
    Ok(Deleted { deleted: true, id: p.id })
}

/// `user.password.set`: the caller changes their own password, giving the current one. Their
/// other login sessions end and the sockets opened with them or with their tokens close (the
/// tokens stay valid); the login session the request came with goes on, so the page that
/// changed it stays signed in. Wrong current passwords are limited like logins, per user
/// (counted as from the unspecified address: a handler does not see the client's).
pub async fn password_set(
    s: &AppState,
    who: &Identity,
    p: PasswordSet,
) -> Result<PasswordChanged, ApiError> {
    let Actor::User { name, .. } = &who.actor else {
        return Err(ApiError::bad_request(
            "only a user has a password: log in as one to change it (`kandev user passwd` \
             sets any user's on the server's machine)",
        ));
    };
    kandev_domain::account::password(&p.new_password)
        .map_err(|e| ApiError::validation(format!("the new password {}", e.problem)))?;
    let limiter = s.login_limiter();
    let from = IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED);
    if let Err(wait) = limiter.check(from, name) {
        let secs = wait.as_secs_f64().ceil().max(1.0) as u64;
        return Err(ApiError::new(
            ErrorCode::RateLimited,
            format!("too many wrong passwords; try again in {secs} s"),
        ));
    }
    let hash = s.store().user_credentials(name).await?.map(|(_, hash)| hash);
    let Some(right) = s.password_checks().verify(hash, p.current_password).await else {
        return Err(ApiError::new(
            ErrorCode::RateLimited,
            "too many password checks at once; try again in a second",
        ));
    };
    if !right {
        limiter.failed(from, name);
        return Err(ApiError::validation("the current password is wrong; nothing was changed"));
    }
    limiter.succeeded(from, name);
    let new_hash = hash_password(&p.new_password).map_err(|err| {
        tracing::error!(error = %err, "cannot hash a new password");
        ApiError::internal()
    })?;
    let keep = match &who.credential {
        Some(Credential::Session(hash)) => Some(hash.as_str()),
        _ => None,
    };
    let user = s.engine().set_password(name, &new_hash, keep).await?;
    // The other sessions' and the tokens' WebSockets close now (issue 38, item 6).
    s.live().recheck();
    Ok(PasswordChanged { user: UserDto::from(&user), session_kept: keep.is_some() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_verify_and_unknown_users_never_do() {
        let hash = hash_password("correct horse").unwrap();
        assert!(hash.starts_with("$argon2id$"), "{hash}");
        assert!(verify_password(Some(&hash), "correct horse"));
        assert!(!verify_password(Some(&hash), "wrong horse"));
        assert!(!verify_password(None, "no user has this password"));
        assert!(!verify_password(Some("not a hash"), "x"));
    }

    #[test]
    fn secrets_are_random_and_stored_as_hashes() {
        let (a, b) = (new_secret(TOKEN_PREFIX), new_secret(TOKEN_PREFIX));
        assert_ne!(a, b);
        assert!(a.starts_with("kdv_") && a.len() == 4 + 64, "{a}");
        assert_eq!(secret_hash(&a).len(), 64);
        assert_ne!(secret_hash(&a), a);
    }

    /// Issue 21, acceptance 5: the 20th wrong password in a row slows the next attempt down,
    /// with doubling waits; the wait passes with (paused, deterministic) time; a success
    /// starts the count again; other names and addresses are not affected.
    #[tokio::test(start_paused = true)]
    async fn i21_a5_twenty_wrong_passwords_slow_down_and_recover() {
        let limiter = LoginLimiter::default();
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        for _ in 0..19 {
            assert!(limiter.check(ip, "alice").is_ok());
            limiter.failed(ip, "alice");
        }
        assert!(limiter.check(ip, "alice").is_ok(), "19 wrong passwords are not limited");
        limiter.failed(ip, "alice");
        assert_eq!(limiter.check(ip, "alice"), Err(FIRST_WAIT));
        assert!(limiter.check(ip, "bob").is_ok());
        assert!(limiter.check("10.0.0.2".parse().unwrap(), "alice").is_ok());
        tokio::time::advance(FIRST_WAIT).await;
        assert!(limiter.check(ip, "alice").is_ok(), "the wait passed");
        limiter.failed(ip, "alice");
        assert_eq!(limiter.check(ip, "alice"), Err(FIRST_WAIT * 2), "the next wait doubles");
        tokio::time::advance(FIRST_WAIT * 2).await;
        limiter.succeeded(ip, "alice");
        for _ in 0..19 {
            limiter.failed(ip, "alice");
        }
        assert!(limiter.check(ip, "alice").is_ok(), "a success starts the count again");
    }

    /// Defect 4 of the issue 21 review: a full limiter forgets the least recently failed key
    /// (it used to forget every key without a running wait, or all of them), and a count
    /// survives the end of its wait.
    #[tokio::test(start_paused = true)]
    async fn i21_d4_a_full_limiter_forgets_the_oldest_key_and_keeps_counts() {
        let limiter = LoginLimiter::default();
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        for i in 0..MAX_KEYS - 1 {
            limiter.failed(ip, &format!("name{i}"));
        }
        for _ in 0..FREE_FAILURES {
            limiter.failed(ip, "alice");
        }
        assert_eq!(limiter.check(ip, "alice"), Err(FIRST_WAIT));
        tokio::time::advance(FIRST_WAIT).await;
        assert!(limiter.check(ip, "alice").is_ok(), "the wait passed");
        limiter.failed(ip, "newcomer");
        limiter.failed(ip, "alice");
        assert_eq!(limiter.check(ip, "alice"), Err(FIRST_WAIT * 2), "the count was kept");
        assert_eq!(limiter.keys().len(), MAX_KEYS);
        assert!(limiter.keys().peek(&login_key(ip, "name0")).is_none(), "the oldest went");
        assert!(limiter.keys().peek(&login_key(ip, "name1")).is_some());
    }

    /// Defect 3 of the issue 21 review: password checks at once are bounded; with every slot
    /// taken a check is refused at once, and runs again when a slot is free.
    #[tokio::test]
    async fn i21_d3_password_checks_at_once_are_bounded() {
        let checks = PasswordChecks::new(2);
        let hash = hash_password("pw").unwrap();
        let held = checks.slots.clone().try_acquire_many_owned(2).unwrap();
        assert_eq!(checks.verify(Some(hash.clone()), "pw".into()).await, None, "all busy");
        drop(held);
        assert_eq!(checks.verify(Some(hash), "pw".into()).await, Some(true));
        assert_eq!(checks.slots.available_permits(), 2, "the slot is given back");
    }
}
