//! `session.authenticate` (issue 18): on a live agent, ACP `authenticate` goes over the open
//! connection — the agent is not restarted and the conversation stays where it is; without
//! one (the start itself needed credentials), the agent restarts and authenticates right
//! after `initialize` (`handshake.rs`).

use kandev_acp::AcpError;
use kandev_domain::message_meta::StatusNote;
use kandev_store::SessionUpdate;
use serde_json::Value;

use crate::command::{Command, Reply};
use crate::error::{EngineError, Result};
use crate::session::state::SessionActor;

impl SessionActor {
    /// Authenticates with `method_id`: over the live connection as a child future (answered
    /// by [`Command::Authenticated`]), else by restarting with it.
    pub(super) async fn authenticate(&mut self, method_id: String, reply: Reply<()>) {
        let Some(live) = self.phase.live() else {
            self.inner.wish_auth(&self.session.id, method_id);
            let result = self.resume(false).await;
            if result.is_err() {
                self.inner.forget_auth_wish(&self.session.id);
            }
            let _ = reply.send(result);
            return;
        };
        let offered = self.offered_auth_methods();
        if !offered.is_empty() && !offered.iter().any(|(id, _)| id == &method_id) {
            let names: Vec<&str> = offered.iter().map(|(id, _)| id.as_str()).collect();
            let _ = reply.send(Err(EngineError::Validation(format!(
                "the agent does not offer the auth method {method_id:?}; use one of: {}",
                names.join(", ")
            ))));
            return;
        }
        let (epoch, client) = (live.epoch, live.client.clone());
        let inbox = self.sender();
        self.spawn(async move {
            let result = client.authenticate(&method_id).await;
            let _ = inbox.send(Command::Authenticated { epoch, method_id, result, reply }).await;
        });
    }

    /// The agent answered a live `authenticate`: on success the login hint is cleared and a
    /// status note says so; a refusal is answered with the agent's words.
    pub(super) async fn on_authenticated(
        &mut self,
        epoch: i64,
        method_id: String,
        result: std::result::Result<(), AcpError>,
    ) -> Result<()> {
        if self.live_epoch() != Some(epoch) {
            return Err(EngineError::Conflict(
                "the agent was restarted meanwhile; authenticate again".into(),
            ));
        }
        if let Err(err) = result {
            return Err(EngineError::Conflict(format!(
                "the agent refused authenticate with {method_id:?}: {err}; log in the way the \
                 method describes, then try again"
            )));
        }
        let name = self
            .offered_auth_methods()
            .into_iter()
            .find(|(id, _)| id == &method_id)
            .map_or_else(|| method_id.clone(), |(_, name)| name);
        let mut update = SessionUpdate::default();
        if self.session.last_error.as_ref().is_some_and(|e| e.code == "agent_auth_required") {
            update.last_error = Some(None);
        }
        let note = (
            format!("authenticated with {name}"),
            StatusNote::Authenticated { auth_method: method_id }.into(),
        );
        self.commit(update, Some(note)).await
    }

    /// The agent's auth methods as stored in `agent_info.auth_methods`: `(id, name)`.
    fn offered_auth_methods(&self) -> Vec<(String, String)> {
        let info: Value = self
            .session
            .agent_info
            .as_deref()
            .and_then(|text| serde_json::from_str(text).ok())
            .unwrap_or_default();
        let Some(methods) = info.get("auth_methods").and_then(Value::as_array) else {
            return Vec::new();
        };
        methods
            .iter()
            .filter_map(|m| {
                let id = m.get("id").and_then(Value::as_str)?.to_owned();
                let name = m.get("name").and_then(Value::as_str).unwrap_or(&id).to_owned();
                Some((id, name))
            })
            .collect()
    }
}
