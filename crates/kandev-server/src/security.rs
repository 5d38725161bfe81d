//! Security checks of api.md: loopback by default, the access token and, once a user exists,
//! login sessions and personal tokens (with a limit on failed guesses), and the Origin/Host/`Sec-Fetch-Site` checks that keep other web sites (and DNS
//! rebinding) from driving the API.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Mutex;
use std::time::Duration;

use axum::extract::connect_info::ConnectInfo;
use axum::extract::{Request, State};
use axum::http::header::{
    ACCEPT, AUTHORIZATION, CONTENT_TYPE, COOKIE, HOST, LOCATION, ORIGIN, RETRY_AFTER,
};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use kandev_api_types::ErrorCode;
use tokio::time::Instant;

use kandev_api_types::AuthVia;
use kandev_domain::account::Actor;

use crate::access::Credential;
use crate::accounts::{Identity, TOKEN_PREFIX, secret_hash};
use crate::{ApiError, AppState};

/// Name of the cookie that may carry the access token (browsers cannot set WS headers).
pub const TOKEN_COOKIE: &str = "kandev_token";

/// Refuses to serve a non-loopback address unless every request must authenticate (`guarded`:
/// an access token is set, or users exist).
pub fn check_bind(addr: &SocketAddr, guarded: bool) -> Result<(), String> {
    if addr.ip().is_loopback() || guarded {
        return Ok(());
    }
    Err(format!(
        "refusing to listen on {addr} without an access token or users: anyone who can reach it \
         could run commands on this machine; add a user (kandev user add <name>), pass --token \
         <secret> (or set KANDEV_TOKEN), or use 127.0.0.1"
    ))
}

/// Name of the cookie that carries a login session's secret (issue 21).
pub const SESSION_COOKIE: &str = "kandev_session";

/// The client's address, as a request extension (the login form limits guesses by it).
#[derive(Debug, Clone, Copy)]
pub struct ClientIp(pub IpAddr);

/// Middleware applied to every route. With neither a server token nor any user, requests
/// pass as the local person; otherwise each needs the server token, a login session's cookie
/// or a personal token, and carries the [`Identity`] it was let in as.
/// A webhook delivery: `POST /hooks/<id>`, one path segment (nothing else under `/hooks/` is
/// let in without a login).
fn is_hook(request: &Request) -> bool {
    let path = request.uri().path();
    request.method() == Method::POST
        && path.strip_prefix("/hooks/").is_some_and(|id| !id.is_empty() && !id.contains('/'))
}

pub async fn guard(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    let path = request.uri().path();
    // The login form is how a browser gets a cookie, so it needs none itself; logout only
    // ends the session its cookie names.
    // A webhook delivery's credential is its signature, checked by its handler (`hooks.rs`).
    let public = path == LOGIN_PATH || path == LOGOUT_PATH || is_hook(&request);
    let accounts = match state.store().has_users().await {
        Ok(accounts) => accounts,
        Err(err) => {
            tracing::error!(error = %err, "cannot tell whether accounts exist");
            return ApiError::internal().into_response();
        }
    };
    if let Err(err) = check_browser(&state, &request) {
        return err.into_response();
    }
    let client = client_ip(&request);
    request.extensions_mut().insert(ClientIp(client));
    if let Some(proxy) = &state.config().proxy
        && let Some(value) = request.headers().get(&proxy.header)
    {
        return match proxy_identity(&state, proxy, client, value).await {
            Ok(identity) => {
                request.extensions_mut().insert(identity);
                next.run(request).await
            }
            Err(err) => err.into_response(),
        };
    }
    // An agent's session token is checked by `/mcp` itself (its epoch, its session).
    let session_token = request.uri().path() == crate::MCP_PATH
        && crate::mcp::session_token(request.headers()).is_some();
    let token = state.config().token.clone();
    if token.is_none() && !accounts && !session_token && !state.listens_on_loopback() {
        // The last user was removed while the server listens beyond loopback without a token
        // (`check_bind` only looked at startup): nobody is let in as the local person.
        return ApiError::new(
            ErrorCode::Unavailable,
            "this server listens beyond loopback and has no users and no access token: add a \
             user with `kandev user add <name>` (or restart it with --token)",
        )
        .into_response();
    }
    if public || session_token || (token.is_none() && !accounts) {
        request.extensions_mut().insert(Identity::open());
        return next.run(request).await;
    }
    // The caller is identified first; only a failed check (or the guessable server token)
    // consults the guess limiter, so others' wrong guesses never lock out a login session or
    // a personal token.
    match identify(&state, token.as_deref(), accounts, request.headers()).await {
        Ok(found) => {
            let presented = presented_token(request.headers()).is_some();
            if let Err(wait) = gate(state.auth_limiter(), client, found.as_ref(), presented) {
                return too_many_guesses(wait, false);
            }
            if let Some(identity) = found {
                if let Some(credential) = identity.credential.clone() {
                    request.extensions_mut().insert(credential);
                }
                request.extensions_mut().insert(identity);
                return next.run(request).await;
            }
            if wants_page(&request) {
                return (StatusCode::SEE_OTHER, [(LOCATION, login_link(request.uri()))])
                    .into_response();
            }
            ApiError::unauthorized().into_response()
        }
        Err(err) => {
            tracing::error!(error = %err, "cannot check a request's credentials");
            ApiError::internal().into_response()
        }
    }
}

/// What the guess limiter says about a request whose credentials were checked (`found`: who
/// they name). A login session or a personal token (244 random bits, not guessable) always
/// passes, whatever others guessed. The server token (chosen by a person, so guessable) passes
/// only while `client` is not limited: a guesser must not see the one success. A failed check
/// with a token (`presented`) is refused while limited, and otherwise counted; a request
/// without any token is not a guess (a first page load, say).
fn gate(
    limiter: &AuthLimiter,
    client: IpAddr,
    found: Option<&Identity>,
    presented: bool,
) -> Result<(), Duration> {
    match found {
        Some(identity) if identity.via != AuthVia::ServerToken => Ok(()),
        Some(_) => limiter.check(client),
        None if presented => {
            limiter.check(client)?;
            limiter.failed(client);
            Ok(())
        }
        None => Ok(()),
    }
}

/// Who the request's credentials name, if any: the server token (compared in constant
/// time), a live login session (cookie) or a personal token (bearer), the last two only while
/// accounts exist. Secrets are looked up by their SHA-256.
async fn identify(
    state: &AppState,
    token: Option<&str>,
    accounts: bool,
    headers: &HeaderMap,
) -> Result<Option<Identity>, kandev_store::StoreError> {
    let presented = presented_token(headers);
    if let Some(expected) = token
        && constant_time_eq(presented.unwrap_or("").as_bytes(), expected.as_bytes())
    {
        return Ok(Some(Identity {
            actor: Actor::ServerToken,
            via: AuthVia::ServerToken,
            credential: None,
            agent: None,
        }));
    }
    if !accounts {
        return Ok(None);
    }
    let as_user = |user: kandev_domain::account::User, via, credential| Identity {
        actor: Actor::User { id: user.id, name: user.name },
        via,
        credential: Some(credential),
        agent: None,
    };
    if let Some(secret) = cookie(headers, SESSION_COOKIE) {
        let hash = secret_hash(secret);
        if let Some(user) = state.store().user_for_session(&hash).await? {
            return Ok(Some(as_user(user, AuthVia::Session, Credential::Session(hash))));
        }
    }
    if let Some(secret) = presented.filter(|t| t.starts_with(TOKEN_PREFIX)) {
        let hash = secret_hash(secret);
        if let Some(user) = state.store().user_for_token(&hash).await? {
            return Ok(Some(as_user(user, AuthVia::Token, Credential::Token(hash))));
        }
    }
    Ok(None)
}

/// The user a trusted proxy's header names (issue 49). The header is taken only from the
/// configured proxy addresses: from anyone else it is a forgery, refused whatever else the
/// request carries. A name the server does not know becomes a user (a viewer of the
/// `--proxy-join` workspaces), unless the server refuses new users.
async fn proxy_identity(
    state: &AppState,
    proxy: &crate::ProxyAuth,
    client: IpAddr,
    value: &axum::http::HeaderValue,
) -> Result<Identity, ApiError> {
    if !proxy.trusts(client) {
        tracing::warn!(%client, header = %proxy.header, "refused a user header from an untrusted address");
        return Err(ApiError::forbidden(format!(
            "the {} header is accepted only from the trusted proxy (--trusted-proxy); this \
             request came from {client}: sign in through the proxy",
            proxy.header
        )));
    }
    let name = value.to_str().ok().map(str::trim).unwrap_or_default();
    let name = kandev_domain::account::user_name(name).map_err(|err| {
        ApiError::forbidden(format!(
            "the proxy named a user Kandev cannot take: name {}",
            err.problem
        ))
    })?;
    let user = match state.store().user_named(&name).await? {
        Some(user) => user,
        None if proxy.create_users => {
            let mut join = Vec::new();
            for workspace in state.store().list_workspaces().await? {
                if proxy.join.contains(&workspace.name) {
                    join.push(workspace.id.to_string());
                }
            }
            match state.engine().create_proxy_user(&name, &join).await {
                Ok(user) => user,
                // Two first requests at once: the other made it.
                Err(_) => state.store().user_named(&name).await?.ok_or_else(ApiError::internal)?,
            }
        }
        None => {
            return Err(ApiError::forbidden(format!(
                "{name} has no account on this Kandev: ask its owner to add you"
            )));
        }
    };
    Ok(Identity {
        actor: Actor::User { id: user.id, name: user.name },
        via: AuthVia::Proxy,
        credential: None,
        agent: None,
    })
}

/// The value of cookie `name`, if the request has it.
pub(crate) fn cookie<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|line| {
            line.split(';').find_map(|pair| pair.trim().strip_prefix(name)?.strip_prefix('='))
        })
        .filter(|v| !v.is_empty())
}

/// The client's address as the connection reported it (unspecified when unknown).
fn client_ip(request: &Request) -> IpAddr {
    request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(addr)| addr.ip())
        .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED))
}

pub(crate) fn too_many_guesses(wait: Duration, page: bool) -> Response {
    let secs = wait.as_secs_f64().ceil().max(1.0) as u64;
    let message = format!("too many wrong access tokens; try again in {secs} s");
    let mut response = if page {
        let body = format!(
            "<!doctype html><html lang=\"en\"><meta charset=\"utf-8\"><title>Kandev</title>\
             <p role=\"alert\">{message}.</p><p><a href=\"/login\">Back</a></p></html>"
        );
        (StatusCode::TOO_MANY_REQUESTS, [(CONTENT_TYPE, "text/html; charset=utf-8")], body)
            .into_response()
    } else {
        ApiError::new(ErrorCode::RateLimited, message).into_response()
    };
    response.headers_mut().insert(RETRY_AFTER, HeaderValue::from(secs));
    response
}

/// The login form's link for a page asked for without credentials: it names the page
/// (`?next=`), so signing in lands there; the board needs no name.
fn login_link(asked: &axum::http::Uri) -> String {
    let target = asked.path_and_query().map_or("/", |p| p.as_str());
    if target == "/" {
        return LOGIN_PATH.to_owned();
    }
    let next: String = form_urlencoded::byte_serialize(target.as_bytes()).collect();
    format!("{LOGIN_PATH}?next={next}")
}

/// Path of the login form (`ui::login_page`).
pub const LOGIN_PATH: &str = "/login";
/// Path that ends a login session (`ui::logout`).
pub const LOGOUT_PATH: &str = "/logout";

/// A browser navigating to a UI page (not the API) is sent to the login form instead of a
/// JSON error.
fn wants_page(request: &Request) -> bool {
    let path = request.uri().path();
    request.method() == Method::GET
        && !path.starts_with("/api/")
        && path != "/ws"
        && request
            .headers()
            .get(ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains("text/html"))
}

/// The checks against other web sites, before any token is looked at (so a foreign page's
/// requests never count as failed guesses).
fn check_browser(state: &AppState, request: &Request) -> Result<(), ApiError> {
    let headers = request.headers();
    check_fetch_site(request)?;
    if state.listens_on_loopback() {
        // On loopback only loopback host names are served, whether or not a token or users
        // exist (blocks DNS rebinding), and the hosts of `--allowed-origin`s (a TLS proxy on
        // the same machine that keeps the `Host` header).
        check_loopback_host(headers, &state.config().allowed_origins)?;
    }
    check_origin(state, headers)
}

/// Defence in depth behind the Origin check: a browser that says the request comes from
/// another site (`Sec-Fetch-Site: cross-site`) is refused, except when it navigates to a UI
/// page (a link from elsewhere opens the board).
fn check_fetch_site(request: &Request) -> Result<(), ApiError> {
    let site = request.headers().get("sec-fetch-site").and_then(|v| v.to_str().ok());
    if !site.is_some_and(|s| s.eq_ignore_ascii_case("cross-site")) {
        return Ok(());
    }
    let path = request.uri().path();
    let navigation = request.method() == Method::GET
        && !path.starts_with("/api/")
        && path != "/ws"
        && request
            .headers()
            .get("sec-fetch-mode")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|m| m.eq_ignore_ascii_case("navigate"));
    if navigation {
        return Ok(());
    }
    Err(ApiError::forbidden(
        "cross-site requests are refused; open the UI from this server's own address",
    ))
}

/// The token a request carries (bearer header or cookie), if any.
fn presented_token(headers: &HeaderMap) -> Option<&str> {
    let bearer = headers
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    bearer.filter(|t| !t.is_empty()).or_else(|| cookie(headers, TOKEN_COOKIE))
}

pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn host_header(headers: &HeaderMap) -> Option<&str> {
    headers.get(HOST).and_then(|v| v.to_str().ok())
}

/// The host name of a `host[:port]` authority (IPv6 in brackets).
fn host_name(authority: &str) -> &str {
    if let Some(rest) = authority.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    authority.rsplit_once(':').map(|(h, _)| h).unwrap_or(authority)
}

fn is_loopback_name(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host.to_ascii_lowercase().ends_with(".localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

fn check_loopback_host(headers: &HeaderMap, allowed_origins: &[String]) -> Result<(), ApiError> {
    let allowed = |host: &str| {
        allowed_origins.iter().any(|origin| {
            let origin = origin.trim_end_matches('/');
            let authority = origin
                .strip_prefix("https://")
                .or_else(|| origin.strip_prefix("http://"))
                .unwrap_or(origin);
            authority.eq_ignore_ascii_case(host)
        })
    };
    match host_header(headers) {
        Some(host) if !is_loopback_name(host_name(host)) && !allowed(host) => {
            Err(ApiError::forbidden(
                "this server only answers on loopback names such as 127.0.0.1 or localhost; \
                 behind a proxy that keeps the host name, pass --allowed-origin https://<that name>",
            ))
        }
        _ => Ok(()),
    }
}

/// A browser request must come from the page this server serves (or an allowed origin).
fn check_origin(state: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(origin) = headers.get(ORIGIN).and_then(|v| v.to_str().ok()) else {
        return Ok(()); // not a browser: CLI, curl, scripts
    };
    let origin = origin.trim_end_matches('/');
    let same_origin = host_header(headers).is_some_and(|host| {
        origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://")) == Some(host)
    });
    let allowed = state.config().allowed_origins.iter().any(|o| o.trim_end_matches('/') == origin);
    if same_origin || allowed {
        Ok(())
    } else {
        Err(ApiError::forbidden(format!(
            "requests from origin {origin} are not allowed; open the UI from this server's own address"
        )))
    }
}

/// Failed token checks allowed per client address: a burst, then one more per interval.
const PER_CLIENT_BURST: f64 = 10.0;
const PER_CLIENT_EVERY: Duration = Duration::from_secs(3);
/// Failed token checks allowed from all clients together.
const ALL_BURST: f64 = 60.0;
const ALL_EVERY: Duration = Duration::from_millis(500);
/// Client addresses remembered at most; past it, refilled entries are forgotten first.
const MAX_CLIENTS: usize = 4096;

/// Limits failed token checks (`POST /login` and requests with a wrong token), per client
/// address and overall, with token buckets. While a bucket is empty every token check of that
/// client (or of everyone, for the overall bucket) answers 429 with `Retry-After`, the right
/// token included: otherwise a guesser could keep guessing and watch for the one success.
#[derive(Default)]
pub struct AuthLimiter {
    inner: Mutex<Buckets>,
}

#[derive(Default)]
struct Buckets {
    clients: HashMap<IpAddr, Bucket>,
    all: Option<Bucket>,
}

#[derive(Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn full(burst: f64, now: Instant) -> Bucket {
        Bucket { tokens: burst, at: now }
    }

    fn refill(&mut self, burst: f64, every: Duration, now: Instant) {
        let gained = now.saturating_duration_since(self.at).as_secs_f64() / every.as_secs_f64();
        self.tokens = (self.tokens + gained).min(burst);
        self.at = now;
    }

    /// Time until one token is back (zero when there is one).
    fn wait(&self, every: Duration) -> Duration {
        if self.tokens >= 1.0 { Duration::ZERO } else { every.mul_f64(1.0 - self.tokens) }
    }
}

impl AuthLimiter {
    fn buckets(&self) -> std::sync::MutexGuard<'_, Buckets> {
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// `Err(wait)` when `client` (or everyone) must wait before the next token check.
    pub fn check(&self, client: IpAddr) -> Result<(), Duration> {
        let now = Instant::now();
        let mut buckets = self.buckets();
        let mut wait = Duration::ZERO;
        if let Some(bucket) = buckets.clients.get_mut(&client) {
            bucket.refill(PER_CLIENT_BURST, PER_CLIENT_EVERY, now);
            wait = wait.max(bucket.wait(PER_CLIENT_EVERY));
        }
        if let Some(bucket) = buckets.all.as_mut() {
            bucket.refill(ALL_BURST, ALL_EVERY, now);
            wait = wait.max(bucket.wait(ALL_EVERY));
        }
        if wait.is_zero() { Ok(()) } else { Err(wait) }
    }

    /// Counts one failed token check of `client`.
    pub fn failed(&self, client: IpAddr) {
        let now = Instant::now();
        let mut buckets = self.buckets();
        if buckets.clients.len() >= MAX_CLIENTS && !buckets.clients.contains_key(&client) {
            buckets.clients.retain(|_, bucket| {
                bucket.refill(PER_CLIENT_BURST, PER_CLIENT_EVERY, now);
                bucket.tokens < PER_CLIENT_BURST
            });
            if buckets.clients.len() >= MAX_CLIENTS {
                // Every remembered client is still limited: the overall bucket covers the rest.
                buckets.clients.clear();
            }
        }
        let bucket =
            buckets.clients.entry(client).or_insert_with(|| Bucket::full(PER_CLIENT_BURST, now));
        bucket.refill(PER_CLIENT_BURST, PER_CLIENT_EVERY, now);
        bucket.tokens = (bucket.tokens - 1.0).max(0.0);
        let all = buckets.all.get_or_insert_with(|| Bucket::full(ALL_BURST, now));
        all.refill(ALL_BURST, ALL_EVERY, now);
        all.tokens = (all.tokens - 1.0).max(0.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn failed_guesses_are_limited_per_client_and_recover() {
        let limiter = AuthLimiter::default();
        let guesser: IpAddr = "10.0.0.1".parse().unwrap();
        let other: IpAddr = "10.0.0.2".parse().unwrap();
        for _ in 0..10 {
            assert!(limiter.check(guesser).is_ok());
            limiter.failed(guesser);
        }
        let wait = limiter.check(guesser).unwrap_err();
        assert_eq!(wait, PER_CLIENT_EVERY);
        assert!(limiter.check(other).is_ok(), "another client is not limited yet");
        tokio::time::advance(PER_CLIENT_EVERY).await;
        assert!(limiter.check(guesser).is_ok(), "one more guess after the interval");
    }

    #[tokio::test(start_paused = true)]
    async fn failed_guesses_from_many_clients_are_limited_overall() {
        let limiter = AuthLimiter::default();
        for i in 0..60u32 {
            limiter.failed(IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i)));
        }
        assert!(limiter.check("10.9.9.9".parse().unwrap()).is_err());
    }

    /// Defect 1 of the issue 21 review: wrong tokens from everyone drain the limiter, yet a
    /// login session and a personal token still get in; the server token and further wrong
    /// tokens wait (paused time).
    #[tokio::test(start_paused = true)]
    async fn i21_d1_others_guesses_never_limit_sessions_or_personal_tokens() {
        let limiter = AuthLimiter::default();
        let proxy: IpAddr = "10.0.0.1".parse().unwrap();
        for i in 0..60u32 {
            limiter.failed(IpAddr::V4(Ipv4Addr::from(0x0a00_0100 + i)));
        }
        for _ in 0..10 {
            limiter.failed(proxy);
        }
        let user = |via| Identity {
            actor: Actor::User { id: "u1".into(), name: "alice".into() },
            via,
            credential: None,
            agent: None,
        };
        assert_eq!(gate(&limiter, proxy, Some(&user(AuthVia::Session)), false), Ok(()));
        assert_eq!(gate(&limiter, proxy, Some(&user(AuthVia::Token)), true), Ok(()));
        let server = Identity {
            actor: Actor::ServerToken,
            via: AuthVia::ServerToken,
            credential: None,
            agent: None,
        };
        assert!(gate(&limiter, proxy, Some(&server), true).is_err(), "the guessable token waits");
        assert!(gate(&limiter, proxy, None, true).is_err(), "a wrong token waits");
        assert_eq!(gate(&limiter, proxy, None, false), Ok(()), "no token is no guess");
        tokio::time::advance(PER_CLIENT_EVERY).await;
        assert_eq!(gate(&limiter, proxy, None, true), Ok(()), "one more guess after a while");
        assert!(gate(&limiter, proxy, None, true).is_err(), "and it was counted");
    }

    #[test]
    fn bind_needs_a_token_off_loopback() {
        let public: SocketAddr = "0.0.0.0:38429".parse().unwrap();
        let local: SocketAddr = "127.0.0.1:38429".parse().unwrap();
        let local6: SocketAddr = "[::1]:38429".parse().unwrap();
        assert!(check_bind(&local, false).is_ok());
        assert!(check_bind(&local6, false).is_ok());
        assert!(check_bind(&public, false).unwrap_err().contains("--token"));
        assert!(check_bind(&public, true).is_ok());
    }

    #[test]
    fn host_names_are_parsed() {
        assert_eq!(host_name("127.0.0.1:38429"), "127.0.0.1");
        assert_eq!(host_name("[::1]:38429"), "::1");
        assert_eq!(host_name("localhost"), "localhost");
        assert!(is_loopback_name("localhost"));
        assert!(is_loopback_name("::1"));
        assert!(is_loopback_name("127.0.0.2"));
        assert!(!is_loopback_name("evil.example"));
        assert!(!is_loopback_name("127.0.0.1.evil.example"));
    }

    #[test]
    fn token_comparison() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
    }
}
