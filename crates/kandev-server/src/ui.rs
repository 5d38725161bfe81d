//! The web UI: the built single-page app (`web/dist`, embedded in the binary) served at
//! `/` with an `index.html` fallback for client routes, and the login page
//! (name and password, or the access token) with logout.

use axum::extract::{Query, State};
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

/// What the login page shows besides its forms: a problem, the name typed (kept after a wrong
/// password) and the page to land on after signing in.
#[derive(Default)]
struct Shown<'a> {
    problem: Option<&'a str>,
    /// The name typed (not shown past 200 characters: no name is that long).
    name: &'a str,
    /// A wrong password: the password field gets the focus.
    retry: bool,
    next: Option<&'a str>,
}

/// `text` safe inside HTML text and attribute values.
fn escaped(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Where signing in lands: `next` when it is a page of this server (a path, not a link to
/// elsewhere, nor the login page itself), else the board.
fn landing(next: Option<&str>) -> String {
    match next {
        Some(next)
            if next.starts_with('/')
                && !next.starts_with("//")
                && !next.starts_with(LOGIN_PATH)
                && next.len() <= 2048
                && !next.chars().any(|c| c == '\\' || c.is_control()) =>
        {
            next.to_owned()
        }
        _ => "/".to_owned(),
    }
}

fn login_html(offer: Offer, shown: &Shown<'_>) -> String {
    let problem = shown
        .problem
        .map(|p| format!("<p role=\"alert\" class=\"problem\">{}</p>", escaped(p)))
        .unwrap_or_default();
    let next = shown
        .next
        .map(|n| {
            format!(
                "<input type=\"hidden\" name=\"next\" value=\"{}\">",
                escaped(&landing(Some(n)))
            )
        })
        .unwrap_or_default();
    let name = if shown.name.len() <= 200 { escaped(shown.name) } else { String::new() };
    // After a wrong password the name stays and the password gets the focus.
    let (name_focus, password_focus) =
        if shown.retry { ("", " autofocus") } else { (" autofocus", "") };
    let password_form = if offer.accounts {
        format!(
            "<form method=\"post\" action=\"/login\" aria-label=\"Sign in with your account\">{next}\
<label for=\"name\">Name</label>\
<input id=\"name\" name=\"name\" autocomplete=\"username\" value=\"{name}\" required{name_focus}>\
<label for=\"password\">Password</label>\
<input id=\"password\" name=\"password\" type=\"password\" autocomplete=\"current-password\" required{password_focus}>\
<button type=\"submit\">Sign in</button></form>"
        )
    } else {
        String::new()
    };
    let token_form = match (offer.token, offer.accounts) {
        (false, _) => String::new(),
        (true, accounts) => format!(
            "{}<p>This server needs its access token (the one given with <code>--token</code> or \
<code>KANDEV_TOKEN</code>).</p>\
<form method=\"post\" action=\"/login\" aria-label=\"Sign in with the access token\">{next}\
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
<style>{LOGIN_STYLE}</style></head>\
<body><main class=\"card\"><h1><span class=\"logo\" aria-hidden=\"true\"></span>Kandev</h1>\
<p class=\"lead\">Sign in to continue.</p>{problem}{password_form}{token_form}</main></body></html>"
    )
}

/// The login page's look: the app's own colours and a card, light and dark.
const LOGIN_STYLE: &str = "\
:root{--bg:#f6f7f9;--panel:#fff;--text:#111827;--muted:#6b7280;--border:#e5e7eb;--accent:#4f46e5;--danger:#b42318}\
@media (prefers-color-scheme:dark){:root{--bg:#0f1115;--panel:#171a21;--text:#e5e7eb;--muted:#9ca3af;--border:#2a2f3a;--accent:#818cf8;--danger:#f97066}}\
*{box-sizing:border-box}body{margin:0;min-height:100vh;display:grid;place-items:center;background:var(--bg);color:var(--text);font:15px/1.45 system-ui,sans-serif;padding:1rem}\
.card{width:100%;max-width:24rem;background:var(--panel);border:1px solid var(--border);border-radius:12px;padding:1.5rem 1.5rem 1rem;box-shadow:0 1px 3px rgba(0,0,0,.06)}\
h1{display:flex;align-items:center;gap:.5rem;margin:0 0 .25rem;font-size:1.4rem}\
.logo{width:1.4rem;height:1.4rem;border-radius:6px;background:var(--accent)}\
.lead{margin:0 0 1rem;color:var(--muted)}\
label{display:block;margin:.75rem 0 .25rem;font-weight:600;font-size:.9rem}\
input{font:inherit;width:100%;padding:.55rem .65rem;border:1px solid var(--border);border-radius:8px;background:var(--bg);color:var(--text)}\
input:focus{outline:2px solid var(--accent);outline-offset:1px}\
button{font:inherit;font-weight:600;width:100%;margin:1rem 0 .5rem;padding:.6rem;border:0;border-radius:8px;background:var(--accent);color:#fff;cursor:pointer}\
.problem{color:var(--danger);margin:.5rem 0}hr{border:0;border-top:1px solid var(--border);margin:1rem 0}\
code{font-size:.85em}";

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
pub async fn login_page(State(state): State<AppState>, Query(asked): Query<Asked>) -> Response {
    match offer(&state).await {
        Ok(offer) if offer.accounts || offer.token => {
            let shown = Shown { next: asked.next.as_deref(), ..Shown::default() };
            html(StatusCode::OK, login_html(offer, &shown))
        }
        Ok(_) => redirect("/"),
        Err(response) => response,
    }
}

/// `GET /login?next=`: the page to land on after signing in.
#[derive(Deserialize)]
pub struct Asked {
    next: Option<String>,
}

/// The login form: `name` and `password`, or `token`; `next` where to land.
#[derive(Deserialize)]
pub struct LoginForm {
    name: Option<String>,
    password: Option<String>,
    token: Option<String>,
    next: Option<String>,
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
    let next = form.next.as_deref();
    match &form {
        LoginForm { name: Some(name), password: Some(password), .. } if offer.accounts => {
            password_login(&state, offer, client, name.trim(), password.clone(), next).await
        }
        LoginForm { token: Some(token), .. } if offer.token => {
            token_login(&state, offer, client, token, next).await
        }
        _ if offer.accounts || offer.token => {
            let problem = "Fill in the form: your name and password, or the token.";
            let shown = Shown { problem: Some(problem), next, ..Shown::default() };
            html(StatusCode::BAD_REQUEST, login_html(offer, &shown))
        }
        _ => redirect("/"),
    }
}

async fn password_login(
    state: &AppState,
    offer: Offer,
    client: std::net::IpAddr,
    name: &str,
    password: String,
    next: Option<&str>,
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
            let problem = Some("Wrong name or password.");
            let shown = Shown { problem, name, retry: true, next };
            return html(StatusCode::UNAUTHORIZED, login_html(offer, &shown));
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
        redirect_to(&landing(next)),
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
    next: Option<&str>,
) -> Response {
    let Some(expected) = &state.config().token else { return redirect("/") };
    if let Err(wait) = state.auth_limiter().check(client) {
        return too_many_guesses(wait, true);
    }
    if !constant_time_eq(given.trim().as_bytes(), expected.as_bytes()) {
        state.auth_limiter().failed(client);
        let shown = Shown { problem: Some("That token is not right."), next, ..Shown::default() };
        return html(StatusCode::UNAUTHORIZED, login_html(offer, &shown));
    }
    let secure = secure(state);
    let cookie = format!(
        "{TOKEN_COOKIE}={expected}; Path=/; HttpOnly; SameSite=Strict; Max-Age=2592000{secure}"
    );
    if HeaderValue::from_str(&cookie).is_err() {
        let problem =
            "This token cannot be kept in a browser cookie; use a token of letters and digits.";
        let shown = Shown { problem: Some(problem), next, ..Shown::default() };
        return html(StatusCode::BAD_REQUEST, login_html(offer, &shown));
    }
    with_cookie(redirect_to(&landing(next)), &cookie)
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

/// A redirect to a page of this server (`landing` checked it).
fn redirect_to(to: &str) -> Response {
    match HeaderValue::from_str(to) {
        Ok(value) => (StatusCode::SEE_OTHER, [(LOCATION, value)]).into_response(),
        Err(_) => redirect("/"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn i45_25_signing_in_lands_only_on_a_page_of_this_server() {
        assert_eq!(landing(Some("/tasks/abc?tab=changes")), "/tasks/abc?tab=changes");
        for elsewhere in ["//evil.example/x", "https://evil.example/", "/\\evil", "/login", "x", ""]
        {
            assert_eq!(landing(Some(elsewhere)), "/", "{elsewhere}");
        }
        assert_eq!(landing(None), "/");
        assert_eq!(escaped("<a href=\"x\">&'"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
    }

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
