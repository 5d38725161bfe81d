//! The web UI: the built single-page app (`web/dist`, embedded in the binary) served at
//! `/` with an `index.html` fallback for client routes, and the login page
//! (name and password, or the access token) with logout.

use axum::extract::State;
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, ETAG, IF_NONE_MATCH, LOCATION,
    REFERRER_POLICY, RETRY_AFTER, SET_COOKIE, X_CONTENT_TYPE_OPTIONS,
};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Form};
use rust_embed::RustEmbed;
use serde::Deserialize;

use crate::accounts::{SESSION_LIFETIME, new_secret, secret_hash};
use crate::security::{
    ClientIp, LOGIN_PATH, SESSION_COOKIE, TOKEN_COOKIE, constant_time_eq, cookie, too_many_guesses,
};
use crate::{ApiError, AppState};

/// The output of `scripts/ui-build`, embedded in every build (rust-embed's `debug-embed`: a
/// packaged debug binary serves its UI without the source tree). A missing folder (UI not built) is an empty set of files.
#[derive(RustEmbed)]
#[folder = "../../web/dist/"]
#[allow_missing = true]
struct Assets;

/// Hashed file names that never change content (Vite's `assets/` output).
const IMMUTABLE: &str = "public, max-age=31536000, immutable";
/// Everything else is revalidated on each load so a new build shows at once.
const REVALIDATE: &str = "no-cache";
const CSP: &str = "default-src 'self'; connect-src 'self'; img-src 'self' data:; \
                   style-src 'self' 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'";

const LOGIN_CSP: &str =
    "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'";

const NOT_BUILT: &str = "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>Kandev</title></head>\
<body style=\"font-family: system-ui, sans-serif; max-width: 36rem; margin: 4rem auto; padding: 0 1rem\">\
<h1>Kandev</h1><p>The web UI was not built; run <code>./scripts/run</code> (or \
<code>./scripts/ui-build</code>, then rebuild). The API is up at <code>/api/v1/</code>.</p></body></html>";

/// The router's fallback: GET and HEAD requests outside `/api` and `/ws` get the UI, anything
/// else the JSON 404 of the API.
pub async fn fallback(method: Method, uri: Uri, headers: HeaderMap) -> Response {
    let path = uri.path();
    let api =
        path == "/api" || path.starts_with("/api/") || path == "/ws" || path.starts_with("/ws/");
    if api || !(method == Method::GET || method == Method::HEAD) {
        return crate::http::no_route().await;
    }
    serve_path(path, &headers)
}

fn serve_path(path: &str, headers: &HeaderMap) -> Response {
    let file = path.trim_start_matches('/');
    if !file.is_empty()
        && let Some(asset) = Assets::get(file)
    {
        let cache = if file.starts_with("assets/") { IMMUTABLE } else { REVALIDATE };
        return asset_response(file, asset, cache, headers);
    }
    // A missing file with an extension is a 404, not the app: a broken asset must not be
    // answered with HTML.
    let last = file.rsplit('/').next().unwrap_or_default();
    if last.contains('.') && file != "index.html" {
        return (StatusCode::NOT_FOUND, [(CACHE_CONTROL, REVALIDATE)], "not found").into_response();
    }
    match Assets::get("index.html") {
        Some(index) => asset_response("index.html", index, REVALIDATE, headers),
        None => html(StatusCode::OK, NOT_BUILT.to_owned()),
    }
}

fn asset_response(
    name: &str,
    asset: rust_embed::EmbeddedFile,
    cache: &'static str,
    headers: &HeaderMap,
) -> Response {
    let etag = format!("\"{}\"", hex(&asset.metadata.sha256_hash()[..16]));
    let fresh = headers
        .get(IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|given| given.split(',').any(|t| t.trim() == etag));
    let mime = asset.metadata.mimetype().to_owned();
    let mut response = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        asset.data.into_owned().into_response()
    };
    let h = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(&mime) {
        h.insert(CONTENT_TYPE, value);
    }
    h.insert(CACHE_CONTROL, HeaderValue::from_static(cache));
    if let Ok(value) = HeaderValue::from_str(&etag) {
        h.insert(ETAG, value);
    }
    h.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    if name.ends_with(".html") {
        h.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
        h.insert(REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    }
    response
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn html(status: StatusCode, body: String) -> Response {
    (
        status,
        [
            (CONTENT_TYPE, "text/html; charset=utf-8"),
            (CACHE_CONTROL, "no-store"),
            (CONTENT_SECURITY_POLICY, LOGIN_CSP),
        ],
        body,
    )
        .into_response()
}

/// What the login page offers: name and password once a user exists, the access token when
/// the server has one.
#[derive(Debug, Clone, Copy)]
struct Offer {
    accounts: bool,
    token: bool,
}

fn login_html(offer: Offer, problem: Option<&str>) -> String {
    let problem = problem
        .map(|p| format!("<p role=\"alert\" style=\"color:#b42318\">{p}</p>"))
        .unwrap_or_default();
    let password_form = if offer.accounts {
        "<form method=\"post\" action=\"/login\" aria-label=\"Sign in with your account\">\
<label for=\"name\">Name</label>\
<input id=\"name\" name=\"name\" autocomplete=\"username\" required autofocus>\
<label for=\"password\">Password</label>\
<input id=\"password\" name=\"password\" type=\"password\" autocomplete=\"current-password\" required>\
<button type=\"submit\">Sign in</button></form>"
    } else {
        ""
    };
    let token_form = match (offer.token, offer.accounts) {
        (false, _) => String::new(),
        (true, accounts) => format!(
            "{}<p>This server needs its access token (the one given with <code>--token</code> or \
<code>KANDEV_TOKEN</code>).</p>\
<form method=\"post\" action=\"/login\" aria-label=\"Sign in with the access token\">\
<label for=\"token\">Access token</label>\
<input id=\"token\" name=\"token\" type=\"password\" autocomplete=\"current-password\" required{}>\
<button type=\"submit\">Sign in with the token</button></form>",
            if accounts { "<hr>" } else { "" },
            if accounts { "" } else { " autofocus" },
        ),
    };
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>Kandev · sign in</title>\
<style>body{{font-family:system-ui,sans-serif;max-width:24rem;margin:5rem auto;padding:0 1rem}}\
input,button{{font:inherit;padding:.5rem;width:100%;box-sizing:border-box;margin:.25rem 0}}\
@media (prefers-color-scheme:dark){{body{{background:#111;color:#eee}}}}</style></head>\
<body><h1>Kandev</h1>{problem}{password_form}{token_form}</body></html>"
    )
}

async fn offer(state: &AppState) -> Result<Offer, Response> {
    match state.store().has_users().await {
        Ok(accounts) => Ok(Offer { accounts, token: state.config().token.is_some() }),
        Err(err) => {
            tracing::error!(error = %err, "cannot tell whether accounts exist");
            Err(ApiError::internal().into_response())
        }
    }
}

/// `GET /login`: the sign-in forms (or straight to the board when nothing is needed).
pub async fn login_page(State(state): State<AppState>) -> Response {
    match offer(&state).await {
        Ok(offer) if offer.accounts || offer.token => html(StatusCode::OK, login_html(offer, None)),
        Ok(_) => redirect("/"),
        Err(response) => response,
    }
}

/// The login form: `name` and `password`, or `token`.
#[derive(Deserialize)]
pub struct LoginForm {
    name: Option<String>,
    password: Option<String>,
    token: Option<String>,
}

/// `POST /login`: checks a name and password (argon2id; the same error and work for an
/// unknown name) and starts a login session, or checks the access token; either way the
/// secret goes into an HttpOnly, SameSite=Strict cookie. Guesses are limited: passwords per
/// address and name (`LoginLimiter`), tokens per address (`AuthLimiter`).
pub async fn login(
    State(state): State<AppState>,
    Extension(ClientIp(client)): Extension<ClientIp>,
    Form(form): Form<LoginForm>,
) -> Response {
    let offer = match offer(&state).await {
        Ok(offer) => offer,
        Err(response) => return response,
    };
    match form {
        LoginForm { name: Some(name), password: Some(password), .. } if offer.accounts => {
            password_login(&state, offer, client, name.trim(), password).await
        }
        LoginForm { token: Some(token), .. } if offer.token => {
            token_login(&state, offer, client, &token).await
        }
        _ if offer.accounts || offer.token => html(
            StatusCode::BAD_REQUEST,
            login_html(offer, Some("Fill in the form: your name and password, or the token.")),
        ),
        _ => redirect("/"),
    }
}

async fn password_login(
    state: &AppState,
    offer: Offer,
    client: std::net::IpAddr,
    name: &str,
    password: String,
) -> Response {
    let limiter = state.login_limiter();
    if let Err(wait) = limiter.check(client, name) {
        return too_many_guesses(wait, true);
    }
    // A name no user can have (too long, say) is not looked up, but costs the same check and
    // gets the same page as a wrong password.
    let credentials = match kandev_domain::account::user_name(name) {
        Ok(valid) => match state.store().user_credentials(&valid).await {
            Ok(credentials) => credentials,
            Err(err) => {
                tracing::error!(error = %err, "cannot read a user's credentials");
                return ApiError::internal().into_response();
            }
        },
        Err(_) => None,
    };
    let hash = credentials.as_ref().map(|(_, hash)| hash.clone());
    let Some(checked) = state.password_checks().verify(hash, password).await else {
        return too_busy();
    };
    let user = match (checked, credentials) {
        (true, Some((user, _))) => user,
        _ => {
            limiter.failed(client, name);
            let problem = "Wrong name or password.";
            return html(StatusCode::UNAUTHORIZED, login_html(offer, Some(problem)));
        }
    };
    limiter.succeeded(client, name);
    let secret = new_secret("");
    let lifetime = SESSION_LIFETIME.as_millis() as i64;
    let expires = kandev_domain::Timestamp(state.store().now().millis() + lifetime);
    let hash = secret_hash(&secret);
    if let Err(err) = state.engine().start_login_session(&user.id, &hash, expires).await {
        tracing::error!(error = %err, "cannot start a login session");
        return ApiError::from(err).into_response();
    }
    tracing::info!(user = %user.name, "logged in");
    let max_age = SESSION_LIFETIME.as_secs();
    let secure = secure(state);
    with_cookie(
        redirect("/"),
        &format!(
            "{SESSION_COOKIE}={secret}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age}{secure}"
        ),
    )
}

/// Every password-check slot is taken: try again in a second (nothing was checked or counted).
fn too_busy() -> Response {
    let body = "<!doctype html><html lang=\"en\"><meta charset=\"utf-8\"><title>Kandev</title>\
                <p role=\"alert\">Too many sign-ins at once; try again in a second.</p>\
                <p><a href=\"/login\">Back</a></p></html>";
    let mut response = html(StatusCode::TOO_MANY_REQUESTS, body.to_owned());
    response.headers_mut().insert(RETRY_AFTER, HeaderValue::from_static("1"));
    response
}

async fn token_login(
    state: &AppState,
    offer: Offer,
    client: std::net::IpAddr,
    given: &str,
) -> Response {
    let Some(expected) = &state.config().token else { return redirect("/") };
    if let Err(wait) = state.auth_limiter().check(client) {
        return too_many_guesses(wait, true);
    }
    if !constant_time_eq(given.trim().as_bytes(), expected.as_bytes()) {
        state.auth_limiter().failed(client);
        return html(StatusCode::UNAUTHORIZED, login_html(offer, Some("That token is not right.")));
    }
    let secure = secure(state);
    let cookie = format!(
        "{TOKEN_COOKIE}={expected}; Path=/; HttpOnly; SameSite=Strict; Max-Age=2592000{secure}"
    );
    if HeaderValue::from_str(&cookie).is_err() {
        let problem =
            "This token cannot be kept in a browser cookie; use a token of letters and digits.";
        return html(StatusCode::BAD_REQUEST, login_html(offer, Some(problem)));
    }
    with_cookie(redirect("/"), &cookie)
}

/// `POST /logout`: ends the login session the cookie names and clears both cookies.
pub async fn logout(State(state): State<AppState>, headers: HeaderMap) -> Response {
    if let Some(secret) = cookie(&headers, SESSION_COOKIE) {
        let hash = secret_hash(secret);
        if let Err(err) = state.engine().end_login_session(&hash).await {
            tracing::error!(error = %err, "cannot end a login session");
            return ApiError::from(err).into_response();
        }
        // Its WebSockets close too (issue 38, item 6).
        state.live().end_session(&hash);
    }
    let mut response = redirect(LOGIN_PATH);
    let secure = secure(&state);
    for name in [SESSION_COOKIE, TOKEN_COOKIE] {
        let clear = format!("{name}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0{secure}");
        if let Ok(value) = HeaderValue::from_str(&clear) {
            response.headers_mut().append(SET_COOKIE, value);
        }
    }
    response
}

/// The cookies' `Secure` attribute, with `serve --cookie-secure` (behind a TLS proxy).
fn secure(state: &AppState) -> &'static str {
    if state.config().cookie_secure { "; Secure" } else { "" }
}

fn with_cookie(mut response: Response, cookie: &str) -> Response {
    if let Ok(value) = HeaderValue::from_str(cookie) {
        response.headers_mut().append(SET_COOKIE, value);
    }
    response
}

fn redirect(to: &'static str) -> Response {
    (StatusCode::SEE_OTHER, [(LOCATION, to)]).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_files_with_an_extension_are_404_and_routes_get_the_app() {
        let none = HeaderMap::new();
        let missing = serve_path("/assets/nope-123.js", &none);
        assert_eq!(missing.status(), StatusCode::NOT_FOUND);
        let route = serve_path("/tasks/abc", &none);
        assert_eq!(route.status(), StatusCode::OK);
        let kind = route.headers().get(CONTENT_TYPE).unwrap().to_str().unwrap();
        assert!(kind.starts_with("text/html"), "{kind}");
    }
}
