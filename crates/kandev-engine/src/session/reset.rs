//! The context reset (docs/lifecycle.md section D, rules 18-27 and 45), both halves: live (a new
//! conversation on the running agent, `session/new`, bounded) and lazy (no agent: the old
//! conversation is forgotten). A reset's intent is stored before any agent is contacted
//! and cleared in the transaction that settles it; a running turn is cancelled internally
//! first, and prompts wait in the queue meanwhile (rule 44).

use std::path::PathBuf;

use kandev_domain::message_meta::{ErrorMeta, StatusNote};
use kandev_domain::session::SessionState;
use kandev_domain::workflow::EntryCause;
use kandev_store::SessionUpdate;
use serde_json::json;

use crate::command::{Command, ResetResult};
use crate::error::{EngineError, Result};
use crate::notes::divider;
use crate::session::state::{
    InFlight, Live, Phase, Reset, ResetPlan, ResetStage, SessionActor, Taken,
};

/// The cause stored for the user's reset button.
const USER_RESET: &str = "user";

impl SessionActor {
    /// `session.reset_context`: the same path as a step's `reset_agent_context`.
    pub(super) async fn user_reset(&mut self) -> Result<()> {
        if self.session.state == SessionState::Created {
            return Ok(()); // nothing to forget yet
        }
        if self.phase.live().is_none() {
            // A lazy reset promises a start no profile can make (rule 49).
            self.refuse_without_profile().await?;
        }
        let plan = ResetPlan { step: None, then: Default::default(), cause: EntryCause::Manual };
        self.begin_reset(plan).await
    }

    /// Starts a reset: its intent is stored (rule 45), a running turn is cancelled
    /// internally first (rule 23), then it resets live or lazily.
    pub(super) async fn begin_reset(&mut self, plan: ResetPlan) -> Result<()> {
        if self.phase.is_resetting() {
            return Err(EngineError::ResetInProgress("a context reset is already running".into()));
        }
        let cause = if plan.step.is_some() { plan.cause.as_str() } else { USER_RESET };
        let mut tx = self.begin_write().await?;
        let step = plan.step.as_ref().map(|s| &s.id);
        tx.record_reset(&self.session.id, step, self.session.epoch, cause).await?;
        self.finish(tx).await?;
        self.kill_terminals();
        match self.phase.reset_after_turn(plan) {
            // No status message, no `on_turn_complete` when it ends (rule 23).
            Ok(Some((turn_id, epoch))) => {
                self.send_acp_cancel(None);
                let timeout = self.inner.config.cancel_timeout;
                self.after(timeout, Command::EscalateCancel { epoch, turn_id });
                Ok(())
            }
            Ok(None) => Ok(()), // joins the user's cancel in flight
            Err(plan) => self.continue_reset(plan).await,
        }
    }

    /// Called when no turn runs any more: resets a live conversation (`session/new` on the
    /// same process, bounded) or, without one, just forgets the old conversation.
    pub(super) async fn continue_reset(&mut self, plan: ResetPlan) -> Result<()> {
        if matches!(self.phase, Phase::Ready(_))
            && let Taken::Live(live, _) = self.phase.take()
        {
            self.start_live_reset(&live).await;
            self.phase = Phase::Resetting(live, Reset { plan, stage: ResetStage::NewConversation });
            return Ok(()); // the result comes back as Command::ResetDone
        }
        // A start in progress is superseded: it starts again below, on a new conversation,
        // with the prompt that was waiting for it (the session stays STARTING, rule 46).
        let restart = self.cancel_boot();
        let cleared = self.forget_conversation().await;
        if let Some(prompt) = restart {
            self.begin_boot(prompt, cleared.is_ok()).await?;
        }
        match cleared {
            Ok(()) => self.reset_succeeded(plan).await,
            Err(err) => {
                let cause = format!("the old conversation could not be cleared: {err}");
                self.reset_failed(plan, cause).await
            }
        }
    }

    /// The live reset (rule 20) as a child future: `session/new`, then model, mode and
    /// options (rule 27), within the reset timeout (rule 25). Its result comes back through
    /// the event pump, after everything the agent said before it.
    async fn start_live_reset(&mut self, live: &Live) {
        let (exec_epoch, client) = (live.epoch, live.client.clone());
        // The new conversation is adopted under the next epoch (`adopt_conversation`): its
        // MCP token is of that epoch, so the old conversation's token stops working then.
        // An agent on an SSH executor's host gets no Kandev MCP server, as at its start (the
        // server's loopback address does not reach the build host).
        let bridge = self.inner.config.mcp_bridge.clone();
        let next = self.session.epoch + 1;
        // An agent on a build host gets no MCP server from Kandev (the server's address is
        // loopback there), as at its first start.
        let offer = if live.control.on_this_host() {
            self.inner.mcp.offer(&self.session.id, next, bridge)
        } else {
            None
        };
        // Stored before the agent gets it, so it survives a restart (issue 20).
        if let Some(offer) = &offer
            && let Err(err) = self.store_mcp_grant(offer, next).await
        {
            tracing::warn!(session = %self.session.id, error = %err, "cannot store the MCP token of a live reset");
        }
        let mut servers = offer.map(|offer| offer.servers(live.mcp_caps.http)).unwrap_or_default();
        servers.extend(crate::mcp::profile_servers(&live.mcp_servers, live.mcp_caps).0);
        let cwd = PathBuf::from(&self.session.cwd);
        let (model, mode) = (self.session.model.clone(), self.session.session_mode.clone());
        let mut options: Vec<(String, serde_json::Value)> = serde_json::from_str::<
            serde_json::Map<String, serde_json::Value>,
        >(&self.session.config_options)
        .unwrap_or_default()
        .into_iter()
        .filter(|(id, _)| id != "model" && id != "mode")
        .collect();
        options.sort_by(|a, b| a.0.cmp(&b.0));
        let timeout = self.inner.config.reset_timeout;
        let ordered = live.ordered.clone();
        self.spawn(async move {
            let work = async {
                let fresh = client
                    .new_session(&cwd, &servers)
                    .await
                    .map_err(|e| (None, format!("session/new failed: {e}")))?;
                let id = fresh.session_id;
                // Rule 27: model, then mode, then options sorted by id.
                let step = |what: &str, e: kandev_acp::AcpError| {
                    (Some(id.clone()), format!("the agent refused {what}: {e}"))
                };
                if let Some(model) = &model {
                    client
                        .set_config_option(&id, "model", model.clone())
                        .await
                        .map_err(|e| step("the model", e))?;
                }
                if let Some(mode) = &mode {
                    client.set_mode(&id, mode).await.map_err(|e| step("the mode", e))?;
                }
                for (option, value) in &options {
                    client
                        .set_config_option(&id, option, value.clone())
                        .await
                        .map_err(|e| step("a config option", e))?;
                }
                Ok(id.clone())
            };
            let result = match tokio::time::timeout(timeout, work).await {
                Ok(result) => result,
                Err(_) => {
                    Err((None, format!("the agent did not answer within {} s", timeout.as_secs())))
                }
            };
            let _ = ordered.send(Command::ResetDone { exec_epoch, result });
        });
    }

    /// Stores the hash of a token minted for `epoch` (`mcp_tokens`).
    async fn store_mcp_grant(&mut self, offer: &crate::mcp::McpOffer, epoch: i64) -> Result<()> {
        let mut tx = self.begin_write().await?;
        tx.add_mcp_grant(&offer.stored_hash(), &self.session.id, epoch).await?;
        self.finish(tx).await?;
        Ok(())
    }

    pub(super) async fn on_reset_done(&mut self, exec_epoch: i64, result: ResetResult) {
        let current = matches!(
            &self.phase,
            Phase::Resetting(live, Reset { stage: ResetStage::NewConversation, .. })
                if live.epoch == exec_epoch
        );
        if !current {
            return;
        }
        let Taken::Live(live, InFlight::LiveReset(plan)) = self.phase.take() else { return };
        self.phase = Phase::Ready(live);
        let outcome = match result {
            Ok(new_id) => match self.adopt_conversation(new_id).await {
                Ok(()) => self.reset_succeeded(plan).await,
                Err(err) => self.reset_failed(plan, err.to_string()).await,
            },
            Err((new_id, cause)) => {
                // The live conversation changed even though the reset failed: keep it.
                let adopted = match new_id {
                    Some(id) => self.adopt_conversation(id).await,
                    None => Ok(()),
                };
                self.log("recording the new conversation", adopted);
                self.reset_failed(plan, cause).await
            }
        };
        self.log("finishing the context reset", outcome);
    }

    /// The live execution now talks in conversation `id`: a new epoch fences the old one
    /// (rule 22) and the token is replaced only now (rule 31).
    async fn adopt_conversation(&mut self, id: String) -> Result<()> {
        let mut tx = self.begin_write().await?;
        let epoch = tx.bump_epoch(&self.session.id, self.session.epoch).await?;
        self.session.epoch = epoch;
        let update = SessionUpdate {
            acp_session_id: Some(Some(id.clone())),
            resume_token: Some(Some(id.clone())),
            context_window: Some(None),
            ..SessionUpdate::default()
        };
        self.write(&mut tx, update).await?;
        self.finish(tx).await?;
        if let Some(live) = self.phase.live_mut() {
            live.acp_session_id = id;
        }
        Ok(())
    }

    /// The lazy reset (rule 21): a new epoch, no token, no conversation id, no context window.
    async fn forget_conversation(&mut self) -> Result<()> {
        let mut tx = self.begin_write().await?;
        let epoch = tx.bump_epoch(&self.session.id, self.session.epoch).await?;
        let before = self.session.epoch;
        self.session.epoch = epoch;
        let update = SessionUpdate {
            acp_session_id: Some(None),
            resume_token: Some(None),
            context_window: Some(None),
            ..SessionUpdate::default()
        };
        let written = match self.write(&mut tx, update).await {
            Ok(()) => self.finish(tx).await.map(drop).map_err(EngineError::from),
            Err(err) => Err(err),
        };
        if written.is_err() {
            self.session.epoch = before; // nothing was committed
        }
        written
    }

    /// After a successful reset: a divider in the transcript, then the waiting actions, then
    /// what waited in the queue.
    async fn reset_succeeded(&mut self, plan: ResetPlan) -> Result<()> {
        let text = divider(plan.step.as_deref());
        let mut tx = self.begin_write().await?;
        tx.clear_reset(&self.session.id).await?;
        let note = (text, StatusNote::ContextReset.into());
        self.commit_tx(tx, SessionUpdate::default(), Some(note)).await?;
        if let Some(step) = plan.step {
            self.run_entry_actions(*step, plan.then, plan.cause).await?;
        }
        // What waited for the reset runs now, unless a step prompt just took the turn.
        self.drain_queue().await;
        Ok(())
    }

    /// Rule 25: no prompt, no divider, `last_error` with the step and the cause, waiting.
    pub(super) async fn reset_failed(&mut self, plan: ResetPlan, cause: String) -> Result<()> {
        let message = match &plan.step {
            Some(step) => format!(
                "the context reset for step {} failed: {cause}; the step prompt was not sent",
                step.name
            ),
            None => format!("the context reset failed: {cause}"),
        };
        let step_name = plan.step.as_ref().map(|s| s.name.clone());
        let error = self.error(
            "workflow_context_reset_failed",
            message.clone(),
            json!({ "step": step_name, "epoch": self.session.epoch }),
        );
        // Only a state nothing backs any more goes back to waiting (rule 46).
        let state = match self.session.state {
            SessionState::Starting if !self.phase.is_booting() => {
                Some(SessionState::WaitingForInput)
            }
            SessionState::Running if self.phase.turn().is_none() => {
                Some(SessionState::WaitingForInput)
            }
            _ => None,
        };
        let update =
            SessionUpdate { state, last_error: Some(Some(error)), ..SessionUpdate::default() };
        let mut tx = self.begin_write().await?;
        tx.clear_reset(&self.session.id).await?;
        let note = (message, ErrorMeta::code("workflow_context_reset_failed").into());
        self.commit_tx(tx, update, Some(note)).await
    }
}
