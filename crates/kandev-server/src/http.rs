//! The HTTP transport: `POST /api/v1/<action>` with a JSON body, and the health check.

use axum::Json;
use axum::body::{Body, to_bytes};
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use kandev_store::WriteState;
use serde_json::{Value, json};

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
    Path(action): Path<String>,
    body: Body,
) -> Response {
    match run(&state, &action, body).await {
        Ok(result) => Json(result).into_response(),
        Err(err) => err.into_response(),
    }
}

async fn run(state: &AppState, action: &str, body: Body) -> Result<Value, ApiError> {
    let limit = state.config().max_request_bytes;
    let bytes = to_bytes(body, limit).await.map_err(|_| {
        ApiError::bad_request(format!("request body is larger than {}", human_bytes(limit)))
    })?;
    let payload = parse_json(&bytes)?;
    dispatch(state, action, payload).await
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
