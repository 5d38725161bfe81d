//! The web UI: the built single-page app (`web/dist`, embedded in release builds) served at
//! `/` with an `index.html` fallback for client routes, and the token login page.

use axum::Form;
use axum::extract::State;
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, ETAG, IF_NONE_MATCH, LOCATION,
    REFERRER_POLICY, SET_COOKIE, X_CONTENT_TYPE_OPTIONS,
};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use rust_embed::RustEmbed;
use serde::Deserialize;

use crate::AppState;
use crate::security::{TOKEN_COOKIE, constant_time_eq};

/// The output of `scripts/ui-build`. Debug builds read it from disk at run time; release
/// builds embed it. A missing folder (UI not built) is an empty set of files.
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

fn login_html(problem: Option<&str>) -> String {
    let problem = problem
        .map(|p| format!("<p role=\"alert\" style=\"color:#b42318\">{p}</p>"))
        .unwrap_or_default();
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>Kandev · sign in</title>\
<style>body{{font-family:system-ui,sans-serif;max-width:24rem;margin:5rem auto;padding:0 1rem}}\
input,button{{font:inherit;padding:.5rem;width:100%;box-sizing:border-box;margin:.25rem 0}}\
@media (prefers-color-scheme:dark){{body{{background:#111;color:#eee}}}}</style></head>\
<body><h1>Kandev</h1><p>This server needs its access token (the one given with \
<code>--token</code> or <code>KANDEV_TOKEN</code>).</p>{problem}\
<form method=\"post\" action=\"/login\"><label for=\"token\">Access token</label>\
<input id=\"token\" name=\"token\" type=\"password\" autocomplete=\"current-password\" required autofocus>\
<button type=\"submit\">Sign in</button></form></body></html>"
    )
}

/// `GET /login`: the token form (or straight to the board when no token is needed).
pub async fn login_page(State(state): State<AppState>) -> Response {
    match state.config().token {
        Some(_) => html(StatusCode::OK, login_html(None)),
        None => redirect("/"),
    }
}

#[derive(Deserialize)]
pub struct LoginForm {
    token: String,
}

/// `POST /login`: checks the token and keeps it in an HttpOnly cookie.
pub async fn login(State(state): State<AppState>, Form(form): Form<LoginForm>) -> Response {
    let Some(expected) = &state.config().token else {
        return redirect("/");
    };
    if !constant_time_eq(form.token.trim().as_bytes(), expected.as_bytes()) {
        return html(StatusCode::UNAUTHORIZED, login_html(Some("That token is not right.")));
    }
    let cookie =
        format!("{TOKEN_COOKIE}={expected}; Path=/; HttpOnly; SameSite=Strict; Max-Age=2592000");
    let mut response = redirect("/");
    match HeaderValue::from_str(&cookie) {
        Ok(value) => {
            response.headers_mut().insert(SET_COOKIE, value);
            response
        }
        Err(_) => html(
            StatusCode::BAD_REQUEST,
            login_html(Some(
                "This token cannot be kept in a browser cookie; use a token of letters and digits.",
            )),
        ),
    }
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
