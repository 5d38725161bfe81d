//! The HTTP transport: `POST /api/v1/<action>` with a JSON body, and the health check.

use axum::body::{Body, Bytes};
use axum::{Extension, Json};
use futures::StreamExt;
use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::http::HeaderValue;
use axum::http::header::{CACHE_CONTROL, CONTENT_DISPOSITION, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};
use kandev_api_types::access::{Access, Need, Subject};
use kandev_api_types::{AttachmentDto, AttachmentUploaded};
use kandev_domain::attachment::MAX_ATTACHMENT_BYTES;
use kandev_store::WriteState;
use serde_json::{Value, json};

use crate::accounts::Identity;
use crate::{ApiError, AppState, VERSION, dispatch};

/// `GET /api/v1/health`: `db` says whether the database answers, `writes` whether the latest
/// write succeeded (`failing` with a `reason` after a full disk, until a write commits again).
pub async fn health(State(state): State<AppState>) -> Response {
    let db = match state.store().ping().await {
        Ok(()) => "ok",
        Err(err) => {
            tracing::error!(error = %err, "health check: database unavailable");
            "unavailable"
        }
    };
    let mut body = json!({ "status": "ok", "version": VERSION, "db": db, "writes": "ok" });
    if let WriteState::Failing { reason } = state.store().write_state() {
        body["writes"] = json!("failing");
        body["reason"] = json!(reason);
    }
    if db != "ok" || body["writes"] != "ok" {
        body["status"] = json!("degraded");
    }
    Json(body).into_response()
}

pub async fn action(
    State(state): State<AppState>,
    Extension(identity): Extension<Identity>,
    Path(action): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    match run(&state, &identity, &action, &headers, body).await {
        Ok(result) => Json(result).into_response(),
        Err(err) => err.into_response(),
    }
}

async fn run(
    state: &AppState,
    identity: &Identity,
    action: &str,
    headers: &HeaderMap,
    body: Body,
) -> Result<Box<serde_json::value::RawValue>, ApiError> {
    let declared = json_content_type(headers)?;
    let limit = state.config().max_request_bytes;
    let wait = state.config().read_timeout;
    let bytes = match tokio::time::timeout(wait, read_body(body, limit)).await {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(_)) => {
            return Err(ApiError::bad_request(format!(
                "request body is larger than {}",
                human_bytes(limit)
            )));
        }
        Err(_) => {
            return Err(ApiError::bad_request(format!(
                "the request body did not arrive within {} s; send it at once",
                wait.as_secs_f64()
            )));
        }
    };
    if !declared && !bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(content_type_required());
    }
    let payload = parse_json(&bytes)?;
    dispatch(state, identity, action, payload).await
}

/// An over-limit body is still read (and dropped) up to this many bytes in all (or the limit,
/// when larger) before the
/// answer: a server that stops reading and closes makes the kernel reset the connection, and
/// the client loses the 400 that says what was wrong (seen in R4). Past it the connection is
/// closed anyway; the read timeout bounds the time.
const DRAIN_BYTES: usize = 32 << 20;

/// Reads a request body of at most `limit` bytes. A longer one is an error, answered only
/// once the rest of it is read (up to [`DRAIN_BYTES`]).
async fn read_body(body: Body, limit: usize) -> Result<Bytes, ()> {
    let mut stream = body.into_data_stream();
    let mut kept = Vec::new();
    let mut seen = 0usize;
    let drain = DRAIN_BYTES.max(limit);
    while let Some(frame) = stream.next().await {
        let Ok(chunk) = frame else { return Err(()) };
        seen = seen.saturating_add(chunk.len());
        if seen > drain {
            return Err(());
        }
        if seen <= limit {
            kept.extend_from_slice(&chunk);
        } else {
            kept = Vec::new();
        }
    }
    if seen > limit { Err(()) } else { Ok(Bytes::from(kept)) }
}

/// Whether the request says its body is JSON. Any other content type is refused: a browser
/// may send `text/plain` or form bodies to any site without asking first (a "simple"
/// request), never `application/json`. No content type is allowed only with an empty body
/// (no payload), which [`run`] checks once the body is read.
fn json_content_type(headers: &HeaderMap) -> Result<bool, ApiError> {
    let Some(value) = headers.get(CONTENT_TYPE) else { return Ok(false) };
    let essence = value.to_str().unwrap_or("").split(';').next().unwrap_or("").trim();
    if essence.eq_ignore_ascii_case("application/json") {
        Ok(true)
    } else {
        Err(content_type_required())
    }
}

fn content_type_required() -> ApiError {
    ApiError::bad_request(
        "send the payload as JSON with the header content-type: application/json (curl --json)",
    )
}

/// The header an upload must carry (any value; clients send `1`): a web page cannot send it
/// to another site without a CORS preflight, which this server never grants, so a page
/// elsewhere cannot upload even a `text/plain` body (issue 38, item 5).
pub const UPLOAD_HEADER: &str = "x-kandev-upload";

/// `POST /api/v1/attachment.upload?name=<file name>`: the body is the file, its
/// `content-type` the file's type (composer spec; docs/api.md "Attachments"), with the header
/// [`UPLOAD_HEADER`]. Form content types are refused, as everywhere in the API. The body is
/// written to disk as it arrives (`kandev_engine::Upload`). Answers `{attachment: {id, name,
/// mime, size}}`.
pub async fn upload(
    State(state): State<AppState>,
    Extension(identity): Extension<Identity>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    // An upload is for a message, which a member sends (issue 49).
    let may = async {
        let grants = crate::roles::grants(&state, &identity).await?;
        let access = Access { need: Need::Member, subject: Subject::Server, writes: true };
        crate::roles::precheck(&grants, access)
    };
    if let Err(err) = may.await {
        return err.into_response();
    }
    match store_upload(&state, &query, &headers, body).await {
        Ok(attachment) => Json(AttachmentUploaded { attachment: AttachmentDto::from(&attachment) })
            .into_response(),
        Err(err) => err.into_response(),
    }
}

async fn store_upload(
    state: &AppState,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
    body: Body,
) -> Result<kandev_domain::attachment::AttachmentRef, ApiError> {
    if !headers.contains_key(UPLOAD_HEADER) {
        return Err(ApiError::bad_request(
            "send the header x-kandev-upload: 1 with the file (a web page cannot send it to \
             another site): curl -H 'x-kandev-upload: 1' -H 'content-type: text/plain' \
             --data-binary @file '<server>/api/v1/attachment.upload?name=file'",
        ));
    }
    let Some(name) = query.get("name") else {
        return Err(ApiError::validation(
            "name is required: POST /api/v1/attachment.upload?name=<file name> with the file as the body",
        ));
    };
    let mime = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    let essence = mime.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    if essence == "application/x-www-form-urlencoded" || essence == "multipart/form-data" {
        return Err(ApiError::bad_request(
            "send the file itself as the body, with its own content-type (curl -H 'content-type: \
             text/plain' --data-binary @file; image/png for a PNG)",
        ));
    }
    // Waits (bounded) for an upload slot before any of the body is read.
    let mut upload = state.engine().begin_upload(name, mime).await?;
    let wait = state.config().read_timeout.max(std::time::Duration::from_secs(60));
    let mut stream = body.into_data_stream();
    let received = tokio::time::timeout(wait, async {
        while let Some(frame) = stream.next().await {
            let Ok(chunk) = frame else {
                return Err(ApiError::bad_request("the upload was cut off; send the file again"));
            };
            if let Err(err) = upload.write(&chunk).await {
                if matches!(err, kandev_engine::EngineError::Validation(_)) {
                    // Too large: read (and drop) the rest, so the client gets the answer.
                    drain(&mut stream, MAX_ATTACHMENT_BYTES as usize).await;
                }
                return Err(err.into());
            }
        }
        Ok(())
    })
    .await;
    match received {
        Ok(Ok(())) => Ok(upload.finish().await?),
        Ok(Err(err)) => Err(err),
        Err(_) => Err(ApiError::bad_request(format!(
            "the file did not arrive within {} s; send it at once",
            wait.as_secs_f64()
        ))),
    }
}

/// Reads and drops the rest of a refused body, up to [`DRAIN_BYTES`] (or `seen`, when
/// larger) in all: see there.
async fn drain<S, E>(stream: &mut S, seen: usize)
where
    S: futures::Stream<Item = Result<Bytes, E>> + Unpin,
{
    let mut seen = seen;
    let limit = DRAIN_BYTES.max(seen);
    while let Some(Ok(chunk)) = stream.next().await {
        seen = seen.saturating_add(chunk.len());
        if seen > limit {
            return;
        }
    }
}

/// `GET /api/v1/attachment/<id>?mime=<type>`: a stored attachment, for the transcript's
/// thumbnails. Only raster images (PNG, JPEG, GIF, WebP) are served as themselves; anything
/// else (SVG included, which can carry script) is a download (`application/octet-stream`,
/// `content-disposition: attachment`). Every answer forbids sniffing and running anything.
pub async fn attachment(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let bytes = match state.engine().attachment(&id).await {
        Ok(bytes) => bytes,
        Err(err) => return ApiError::from(err).into_response(),
    };
    let wanted = query.get("mime").map(|m| m.to_ascii_lowercase());
    let inline = ["image/png", "image/jpeg", "image/gif", "image/webp"];
    let mut response = Response::new(Body::from(bytes));
    let headers = response.headers_mut();
    match wanted.as_deref().filter(|m| inline.contains(m)) {
        Some(mime) => {
            headers.insert(CONTENT_TYPE, HeaderValue::from_static(inline_type(mime)));
        }
        None => {
            headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
            headers.insert(CONTENT_DISPOSITION, HeaderValue::from_static("attachment"));
        }
    }
    headers.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    headers
        .insert("content-security-policy", HeaderValue::from_static("default-src 'none'; sandbox"));
    // Content-addressed: the same id is always the same bytes.
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("private, max-age=31536000, immutable"));
    response
}

fn inline_type(mime: &str) -> &'static str {
    match mime {
        "image/png" => "image/png",
        "image/jpeg" => "image/jpeg",
        "image/gif" => "image/gif",
        _ => "image/webp",
    }
}

pub async fn no_route() -> Response {
    ApiError::not_found("no such endpoint; actions are served at POST /api/v1/<action>")
        .into_response()
}

pub async fn wrong_method() -> Response {
    ApiError::bad_request("wrong HTTP method; actions take POST, health takes GET").into_response()
}

/// Parses a request body; empty means no payload.
pub fn parse_json(bytes: &[u8]) -> Result<Value, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Value::Null);
    }
    serde_json::from_slice(bytes).map_err(|e| ApiError::bad_request(format!("malformed JSON: {e}")))
}

pub fn human_bytes(n: usize) -> String {
    if n >= 1024 * 1024 && n.is_multiple_of(1024 * 1024) {
        format!("{} MiB", n / (1024 * 1024))
    } else {
        format!("{n} bytes")
    }
}
