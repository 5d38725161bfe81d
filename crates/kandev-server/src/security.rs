//! Security checks of api.md: loopback by default, the access token, and the Origin/Host
//! checks that keep other web sites (and DNS rebinding) from driving the API.

use std::net::{IpAddr, SocketAddr};

use axum::extract::{Request, State};
use axum::http::header::{ACCEPT, AUTHORIZATION, COOKIE, HOST, LOCATION, ORIGIN};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use kandev_api_types::ErrorCode;

use crate::{ApiError, AppState};

/// Name of the cookie that may carry the access token (browsers cannot set WS headers).
pub const TOKEN_COOKIE: &str = "kandev_token";

/// Refuses to serve a non-loopback address without an access token.
pub fn check_bind(addr: &SocketAddr, token: Option<&str>) -> Result<(), String> {
    if addr.ip().is_loopback() || token.is_some_and(|t| !t.is_empty()) {
        return Ok(());
    }
    Err(format!(
        "refusing to listen on {addr} without an access token: anyone who can reach it could run \
         commands on this machine; pass --token <secret> (or set KANDEV_TOKEN), or use 127.0.0.1"
    ))
}

/// Middleware applied to every route.
pub async fn guard(State(state): State<AppState>, request: Request, next: Next) -> Response {
    // The login page is how a browser gets the token cookie, so it needs no token itself.
    let login = request.uri().path() == LOGIN_PATH;
    if let Err(err) = check(&state, request.headers(), login) {
        if err.code == ErrorCode::Unauthorized && wants_page(&request) {
            return (StatusCode::SEE_OTHER, [(LOCATION, LOGIN_PATH)]).into_response();
        }
        return err.into_response();
    }
    next.run(request).await
}

/// Path of the token login form (`ui::login_page`).
pub const LOGIN_PATH: &str = "/login";

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

fn check(state: &AppState, headers: &HeaderMap, login: bool) -> Result<(), ApiError> {
    match &state.config().token {
        Some(_) if login => {}
        Some(token) => check_token(token, headers)?,
        // Without a token only loopback host names are served (blocks DNS rebinding).
        None => check_loopback_host(headers)?,
    }
    check_origin(state, headers)
}

fn check_token(expected: &str, headers: &HeaderMap) -> Result<(), ApiError> {
    let bearer = headers
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    let cookie = headers.get_all(COOKIE).iter().filter_map(|v| v.to_str().ok()).find_map(|line| {
        line.split(';').find_map(|pair| pair.trim().strip_prefix(TOKEN_COOKIE)?.strip_prefix('='))
    });
    let given = bearer.or(cookie).unwrap_or("");
    if constant_time_eq(given.as_bytes(), expected.as_bytes()) {
        Ok(())
    } else {
        Err(ApiError::unauthorized())
    }
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

fn check_loopback_host(headers: &HeaderMap) -> Result<(), ApiError> {
    match host_header(headers) {
        Some(host) if !is_loopback_name(host_name(host)) => Err(ApiError::forbidden(
            "this server only answers on loopback names such as 127.0.0.1 or localhost",
        )),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bind_needs_a_token_off_loopback() {
        let public: SocketAddr = "0.0.0.0:38429".parse().unwrap();
        let local: SocketAddr = "127.0.0.1:38429".parse().unwrap();
        let local6: SocketAddr = "[::1]:38429".parse().unwrap();
        assert!(check_bind(&local, None).is_ok());
        assert!(check_bind(&local6, None).is_ok());
        assert!(check_bind(&public, None).unwrap_err().contains("--token"));
        assert!(check_bind(&public, Some("")).is_err());
        assert!(check_bind(&public, Some("secret")).is_ok());
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
