//! `POST /hooks/<id>`: an intake source's webhook (issue 47, docs/intake.md "Webhooks"). No
//! login or token: the delivery's signature is its credential, checked by the engine
//! (`Engine::receive_hook`). Each refusal has its own status and `error` code, so a sender's
//! delivery log says which check failed.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use kandev_api_types::TaskDto;
use kandev_engine::{HookError, HookOutcome};
use serde_json::json;

use crate::AppState;

/// The largest delivery read (GitHub's payloads are capped at 25 MB; issue events are far
/// smaller).
pub const MAX_HOOK_BYTES: usize = 5 * 1024 * 1024;

pub async fn receive(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    match state.engine().receive_hook(&id, &headers, &body).await {
        Ok(outcome) => accepted(outcome),
        Err(err) => refused(err),
    }
}

fn accepted(outcome: HookOutcome) -> Response {
    let (status, body) = match outcome {
        HookOutcome::Created(task) => (
            StatusCode::CREATED,
            json!({"outcome": "created", "task": TaskDto::from(task.as_ref())}),
        ),
        HookOutcome::Known(task) => {
            (StatusCode::OK, json!({"outcome": "known", "task_id": task.to_string()}))
        }
        HookOutcome::Ignored(why) => (StatusCode::OK, json!({"outcome": "ignored", "reason": why})),
        HookOutcome::Refreshing(count) => {
            (StatusCode::ACCEPTED, json!({"outcome": "refreshing", "pull_requests": count}))
        }
    };
    (status, Json(body)).into_response()
}

fn refused(err: HookError) -> Response {
    let message = err.to_string();
    let (status, code) = match err {
        // Kandev's own failure (the forge, the database, a step removed): a status of its own,
        // so a sender tells it from a refusal of the delivery; delivering again may work.
        HookError::Engine(inner) => {
            tracing::warn!(error = %inner, "a webhook delivery failed");
            let (status, message) = match inner {
                kandev_engine::EngineError::Unavailable(_) => {
                    (StatusCode::SERVICE_UNAVAILABLE, message)
                }
                // The database's own words stay in the log.
                kandev_engine::EngineError::Store(_) => (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "Kandev could not act on the delivery; deliver it again".to_owned(),
                ),
                _ => (StatusCode::INTERNAL_SERVER_ERROR, message),
            };
            return (status, Json(json!({"error": "failed", "message": message}))).into_response();
        }
        HookError::NotFound(_) => (StatusCode::NOT_FOUND, "not_found"),
        HookError::Disabled(_) => (StatusCode::FORBIDDEN, "disabled"),
        HookError::BadSignature(_) => (StatusCode::UNAUTHORIZED, "bad_signature"),
        HookError::MissingHeader(_) => (StatusCode::BAD_REQUEST, "missing_header"),
        HookError::Replayed(_) => (StatusCode::CONFLICT, "replayed_delivery"),
        HookError::UnknownEvent(_) => (StatusCode::UNPROCESSABLE_ENTITY, "unknown_event"),
        HookError::BadPayload(_) => (StatusCode::BAD_REQUEST, "bad_payload"),
    };
    (status, Json(json!({"error": code, "message": message}))).into_response()
}
