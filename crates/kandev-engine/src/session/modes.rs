//! Modes, models, config options and plan mode (docs/lifecycle.md section H): asking the live agent
//! to change, persisting what it accepted so a resume or reset reapplies it (rules 27, 39),
//! and the workflow's preferences for the next start.

use kandev_acp::{AcpError, ConfigOption};
use kandev_domain::transcript::Session;
use kandev_store::SessionUpdate;

use crate::command::{Applied, Command, Reply};
use crate::error::{EngineError, Result};
use crate::publish;
use crate::session::state::SessionActor;

impl SessionActor {
    /// `session.set_mode` / `session.set_config_option`: asks the live agent as a child
    /// future; the answer comes back as [`Command::Applied`].
    pub(super) fn apply(&mut self, change: Applied, reply: Reply<Session>) {
        let Some(live) = self.phase.live() else {
            let _ = reply.send(Err(EngineError::Conflict(
                "the agent is not running; send a message to start it first".into(),
            )));
            return;
        };
        let (epoch, client, acp) = (live.epoch, live.client.clone(), live.acp_session_id.clone());
        let inbox = self.sender();
        self.spawn(async move {
            let result = match &change {
                Applied::Mode(mode) => client.set_mode(&acp, mode).await.map(|_| None),
                Applied::Config { id, value } if id == "model" => {
                    match client.set_config_option(&acp, id, value.clone()).await {
                        Err(err) if err.is_method_not_found() => client
                            .set_model(&acp, value.as_str().unwrap_or_default())
                            .await
                            .map(|_| None),
                        other => other,
                    }
                }
                Applied::Config { id, value } => {
                    client.set_config_option(&acp, id, value.clone()).await
                }
            };
            let _ = inbox.send(Command::Applied { epoch, change, result, reply }).await;
        });
    }

    pub(super) async fn on_applied(
        &mut self,
        epoch: i64,
        change: Applied,
        result: std::result::Result<Option<Vec<ConfigOption>>, AcpError>,
    ) -> Result<Session> {
        if self.live_epoch() != Some(epoch) {
            return Err(EngineError::Conflict(
                "the agent was restarted meanwhile; try again".into(),
            ));
        }
        let options =
            result.map_err(|e| EngineError::Conflict(format!("the agent refused: {e}")))?;
        let mut update = SessionUpdate::default();
        let action = match &change {
            Applied::Mode(mode) => {
                update.session_mode = Some(Some(mode.clone()));
                "session.mode_changed"
            }
            Applied::Config { id, value } => {
                let mut current: serde_json::Map<String, serde_json::Value> =
                    serde_json::from_str(&self.session.config_options).map_err(|e| {
                        let what = format!("session {} config_options: {e}", self.session.id);
                        EngineError::Store(kandev_store::StoreError::Corrupt(what))
                    })?;
                match options {
                    Some(list) => current.extend(list.into_iter().map(|o| (o.id, o.current_value))),
                    None => {
                        current.insert(id.clone(), value.clone());
                    }
                }
                update.config_options = Some(serde_json::Value::Object(current).to_string());
                if id == "model" {
                    update.model = Some(value.as_str().map(str::to_owned));
                }
                "session.config_changed"
            }
        };
        let mut tx = self.begin_write().await?;
        self.write(&mut tx, update).await?;
        publish::session_event(&mut tx, &self.session, action).await?;
        self.finish(tx).await?;
        Ok(self.session.clone())
    }

    /// Persists the mode for the next start, and asks a running agent to switch now (a
    /// workflow's `set_session_mode`).
    pub(super) async fn prefer_mode(&mut self, mode_id: String) -> Result<()> {
        let update =
            SessionUpdate { session_mode: Some(Some(mode_id.clone())), ..SessionUpdate::default() };
        self.commit(update, None).await?;
        if let Some(live) = self.phase.live() {
            let (client, acp) = (live.client.clone(), live.acp_session_id.clone());
            self.spawn(async move {
                if let Err(err) = client.set_mode(&acp, &mode_id).await {
                    tracing::warn!(error = %err, mode_id, "the agent refused a workflow mode");
                }
            });
        }
        Ok(())
    }

    /// Plan mode puts an instruction in front of every prompt (docs/workflows.md).
    pub(super) async fn set_plan_mode(&mut self, on: bool) -> Result<()> {
        if self.session.plan_mode == on {
            return Ok(());
        }
        self.commit(SessionUpdate { plan_mode: Some(on), ..SessionUpdate::default() }, None).await
    }
}
