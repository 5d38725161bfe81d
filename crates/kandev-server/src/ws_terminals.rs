//! Terminals over the WebSocket (docs/api.md, "Terminal frames"): `terminal.attach` streams
//! a terminal's output to this connection as binary frames, from the oldest byte its replay
//! buffer keeps (so a reconnecting client redraws the recent screen first), then live;
//! `terminal.detach` stops it. Input and resizes arrive as binary frames from the client.
//! A connection's streams end with it; the terminals do not.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::ws::Message;
use kandev_api_types::Action;
use kandev_api_types::actions::{TerminalAttach, TerminalDetach};
use kandev_api_types::frame;
use kandev_api_types::requests::ByTerminal;
use kandev_api_types::responses::TerminalOne;
use kandev_engine::TerminalHandle;
use serde_json::{Value, json};
use tokio::task::{AbortHandle, JoinSet};

use crate::accounts::Identity;
use crate::dispatch::decode;
use crate::handlers::terminal::terminal_dto;
use crate::outbox::{Outbox, Refused};
use crate::{ApiError, AppState};
use kandev_api_types::access::{Access, Need, Subject};

/// The terminal streams of one connection, by terminal id. Dropping it stops them all.
#[derive(Default)]
pub(crate) struct Streams {
    tasks: JoinSet<()>,
    by_id: HashMap<String, AbortHandle>,
}

impl Streams {
    /// Answers `terminal.attach` or `terminal.detach`; for an attach, also returns what to
    /// [`Streams::start`] once the answer is queued (the output follows the answer).
    pub(crate) fn handle(
        &mut self,
        state: &AppState,
        action: &str,
        payload: Value,
    ) -> Result<(Value, Option<(String, TerminalHandle)>), ApiError> {
        // Streams that ended by themselves (the terminal exited) leave the map.
        while self.tasks.try_join_next().is_some() {}
        self.by_id.retain(|_, task| !task.is_finished());
        let request: ByTerminal = decode(payload)?;
        let id = request.terminal_id;
        let (info, handle) = state.engine().terminal(&id)?;
        if let Some(running) = self.by_id.remove(&id) {
            running.abort();
        }
        let answer = serde_json::to_value(TerminalOne { terminal: terminal_dto(info) })
            .map_err(|_| ApiError::internal())?;
        if action == TerminalDetach::NAME {
            return Ok((answer, None));
        }
        debug_assert_eq!(action, TerminalAttach::NAME);
        Ok((answer, Some((id, handle))))
    }

    /// Starts streaming `handle`'s output as the terminal `id` (after its answer was queued).
    /// Whether this connection attached terminal `id` (its input then needs no new check).
    pub(crate) fn attached(&self, id: &str) -> bool {
        self.by_id.get(id).is_some_and(|task| !task.is_finished())
    }

    pub(crate) fn start(&mut self, id: String, handle: TerminalHandle, out: Arc<Outbox>) {
        let task = self.tasks.spawn(stream(id.clone(), handle, out));
        self.by_id.insert(id, task);
    }
}

/// Queues a frame; `false` once the connection cannot take more (closed, or its client does
/// not read: it is disconnected, and the replay on its next attach makes up for it).
async fn send(out: &Outbox, kind: u8, id: &str, payload: &[u8]) -> bool {
    let Some(bytes) = frame::encode(kind, id, payload) else { return false };
    match out.push(Message::Binary(bytes.into()), None).await {
        Ok(()) => true,
        Err(Refused::Full) => {
            tracing::info!(
                "a WebSocket client does not read its terminal output; disconnecting it"
            );
            out.shut();
            false
        }
        Err(Refused::Closed) => false,
    }
}

/// Sends everything kept from the start, then what comes, then the exit.
async fn stream(id: String, handle: TerminalHandle, out: Arc<Outbox>) {
    let mut changes = handle.changes();
    let mut offset = 0;
    loop {
        changes.borrow_and_update();
        loop {
            let chunk = handle.read_since(offset);
            if chunk.skipped && !send(&out, frame::SKIPPED, &id, &[]).await {
                return;
            }
            if chunk.data.is_empty() {
                break;
            }
            offset = chunk.next;
            if !send(&out, frame::OUTPUT, &id, &chunk.data).await {
                return;
            }
        }
        if let Some(exit) = handle.exit() {
            let body = json!({ "exit_code": exit.exit_code, "signal": exit.signal });
            send(&out, frame::EXIT, &id, body.to_string().as_bytes()).await;
            return;
        }
        if changes.changed().await.is_err() {
            return;
        }
    }
}

/// Handles a binary frame from the client (input or resize); an error is answered as an
/// error frame for `terminal.input` / `terminal.resize`.
/// Using a user's shell (issue 49): what `terminal.open` needs, on the terminal's workspace.
pub(crate) const SHELL_ACCESS: Access =
    Access { need: Need::Admin, subject: Subject::Terminal, writes: true };

pub(crate) async fn on_frame(
    state: &AppState,
    identity: &Identity,
    streams: &Streams,
    body: &[u8],
) -> Result<(), (&'static str, ApiError)> {
    let Some((kind, id, payload)) = frame::decode(body) else {
        let err = ApiError::bad_request("a terminal frame is [kind][id length][id][payload]");
        return Err(("terminal.input", err));
    };
    let action = if kind == frame::RESIZE { "terminal.resize" } else { "terminal.input" };
    // Typing into a terminal is using a shell on the server: an admin's (a terminal attached
    // here was checked at its attach; a dev server's log takes no input).
    if !streams.attached(id) {
        let access = SHELL_ACCESS;
        let checked = async {
            let grants = crate::roles::grants(state, identity).await?;
            crate::roles::precheck(&grants, access)?;
            crate::roles::check_subjects(state, &grants, access, &[id]).await
        };
        checked.await.map_err(|err| (action, err))?;
    }
    let (_, handle) = state.engine().terminal(id).map_err(|e| (action, e.into()))?;
    let done = match (kind, payload) {
        (frame::INPUT, bytes) => handle.write(bytes.to_vec()).await,
        (frame::RESIZE, &[c1, c0, r1, r0]) => {
            handle.resize(u16::from_be_bytes([c1, c0]), u16::from_be_bytes([r1, r0])).await
        }
        (frame::RESIZE, _) => {
            let err =
                ApiError::bad_request("a resize frame's payload is cols and rows, u16 big-endian");
            return Err((action, err));
        }
        _ => return Err((action, ApiError::bad_request("unknown terminal frame kind"))),
    };
    done.map_err(|e| (action, e.into()))
}
