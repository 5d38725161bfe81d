//! Permission requests of the agent (docs/lifecycle.md section G, rules 36-38): persisted as a
//! message with the options offered, answered once (by the user, by the profile's
//! `auto_approve`, or expired by the engine), and audited.

use kandev_acp::{Outcome, PermissionOption};
use kandev_api_types::{MessageDto, Notification, SessionEvent};
use kandev_domain::MessageId;
use kandev_domain::message_meta::{MessageMeta, PermissionMeta, PermissionOptionMeta};
use kandev_domain::notify::NotificationKind;
use kandev_domain::transcript::Message;
use kandev_store::WriteTx;
use serde_json::{Value, json};

use crate::api::PermissionAnswer;
use crate::error::{EngineError, Result};
use crate::publish;
use crate::session::state::{PendingPermission, SessionActor};

fn options_meta(options: &[PermissionOption]) -> Vec<PermissionOptionMeta> {
    options
        .iter()
        .map(|o| PermissionOptionMeta {
            option_id: o.option_id.clone(),
            name: o.name.clone(),
            kind: o.kind.as_str().to_owned(),
        })
        .collect()
}

impl SessionActor {
    pub(super) async fn on_permission_request(
        &mut self,
        title: String,
        raw: Value,
        options: Vec<PermissionOption>,
        responder: kandev_acp::PermissionResponder,
        from: u64,
    ) -> Result<()> {
        // Until it is answered, the runner position stays before the request (`from`): a
        // server that re-adopts the agent after a restart gets it again and asks the user.
        let at = self.handled();
        self.set_handled(from);
        let mut tx = self.begin_write().await?;
        // The same request the last run stored and nobody answered, asked again by a
        // re-adopted agent (its replay, rule 42): its card takes the answer, and no second
        // card or notification is made (issue 45 item 12).
        let (request_id, message_id) = match self.asked_before(&mut tx, &title, &raw).await? {
            Some(asked) => self.ask_again(&mut tx, asked).await?,
            None => self.ask_anew(&mut tx, &title, raw, &options).await?,
        };
        self.finish(tx).await?;
        self.permissions.insert(
            request_id.clone(),
            PendingPermission { responder, options: options.clone(), message_id, from },
        );
        self.set_handled(at);
        let auto_approve = self.profile_auto_approves().await;
        if auto_approve && let Some(allow) = options.iter().find(|o| o.kind.is_allow()) {
            self.answer_permission(
                &request_id,
                PermissionAnswer::Option(allow.option_id.clone()),
                "auto_approve",
            )
            .await?;
        }
        Ok(())
    }

    /// A stored request still pending that no live request holds (the last run's, before a
    /// restart), with this title and tool call: its request id and message.
    async fn asked_before(
        &self,
        tx: &mut WriteTx,
        title: &str,
        raw: &Value,
    ) -> Result<Option<(MessageId, PermissionMeta)>> {
        for message in tx.pending_permission_messages(&self.session.id).await? {
            let MessageMeta::PermissionRequest(request) = message.meta else { continue };
            let held = self.permissions.contains_key(&request.request_id);
            if !held && message.content == title && request.tool_call == *raw {
                return Ok(Some((message.id, request)));
            }
        }
        Ok(None)
    }

    /// Takes a stored request over for the live one: a new request id (an answer given to
    /// the old one could not reach this agent), announced as the message's change.
    async fn ask_again(
        &mut self,
        tx: &mut WriteTx,
        (id, mut request): (MessageId, PermissionMeta),
    ) -> Result<(String, MessageId)> {
        let request_id = uuid::Uuid::new_v4().to_string();
        request.request_id = request_id.clone();
        let meta = MessageMeta::PermissionRequest(request);
        let message = tx.set_message(&id, None, &meta).await?;
        publish::message_changed(tx, &self.session, &message).await?;
        Ok((request_id, message.id))
    }

    /// Stores a new request as its card, announces it and tells the developer.
    async fn ask_anew(
        &mut self,
        tx: &mut WriteTx,
        title: &str,
        raw: Value,
        options: &[PermissionOption],
    ) -> Result<(String, MessageId)> {
        let request_id = uuid::Uuid::new_v4().to_string();
        let meta = MessageMeta::PermissionRequest(PermissionMeta {
            request_id: request_id.clone(),
            options: options_meta(options),
            status: "pending".to_owned(),
            tool_call: raw,
            selected_option_id: None,
            answered_by: None,
        });
        let message = self.add_in(tx, title, meta).await?;
        let event = SessionEvent::PermissionRequested {
            session_id: self.session.id.to_string(),
            request_id: request_id.clone(),
            message: MessageDto::from(&message),
        };
        publish::notify(tx, Notification::session(&self.session.id, event)).await?;
        publish::sync_task(tx, &self.session).await?; // the task needs its developer
        let data = json!({ "request_id": request_id, "message_id": message.id.to_string() });
        let kind = NotificationKind::PermissionRequested;
        let title = format!("{}: permission requested: {title}", self.task.title);
        publish::attention(tx, kind, &self.session, message.seq, title, data).await?;
        Ok((request_id, message.id))
    }

    async fn profile_auto_approves(&self) -> bool {
        match &self.session.agent_profile_id {
            Some(id) => {
                self.inner.store.get_profile(id).await.map(|p| p.auto_approve).unwrap_or(false)
            }
            None => false,
        }
    }

    /// Answers a pending request with an option the agent offered (rule 37).
    pub(super) async fn answer_permission(
        &mut self,
        request_id: &str,
        answer: PermissionAnswer,
        by: &str,
    ) -> Result<Message> {
        let Some(pending) = self.permissions.remove(request_id) else {
            return match self
                .inner
                .store
                .find_permission_message(&self.session.id, request_id)
                .await?
            {
                Some(_) => Err(EngineError::AlreadyResolved(
                    "this permission request was already answered or has expired".into(),
                )),
                None => Err(EngineError::NotFound(format!(
                    "permission request {request_id} does not exist in this session"
                ))),
            };
        };
        let (outcome, status, option_id) = match &answer {
            PermissionAnswer::Cancelled => (Outcome::Cancelled, "cancelled", None),
            PermissionAnswer::Option(id) => {
                match pending.options.iter().find(|o| &o.option_id == id) {
                    Some(option) => {
                        let status = if option.kind.is_allow() { "approved" } else { "rejected" };
                        (Outcome::Selected(id.clone()), status, Some(id.clone()))
                    }
                    None => {
                        let offered: Vec<String> =
                            pending.options.iter().map(|o| o.option_id.clone()).collect();
                        self.permissions.insert(request_id.to_owned(), pending);
                        return Err(EngineError::Validation(format!(
                            "the agent did not offer the option {id:?}; choose one of {offered:?}"
                        )));
                    }
                }
            }
        };
        // Stored first, then sent (issue 38 item 10): an answer that could not be stored is
        // not sent, stays pending, and can be given again.
        let stored =
            self.store_permission_answer(request_id, &pending, &outcome, status, option_id, by);
        match stored.await {
            Ok(message) => {
                // Recorded, not written yet: the next server sends it if the runner never
                // took it (issue 38 item 12).
                crate::fault::after_commit("answer");
                let key = Some(super::inputs::answer_key(request_id));
                pending.responder.respond_keyed(outcome, key);
                Ok(message)
            }
            Err(err) => {
                self.permissions.insert(request_id.to_owned(), pending);
                Err(err)
            }
        }
    }

    /// Records the answer, with the JSON-RPC answer the agent gets and the turn it belongs
    /// to (a server that re-adopts the agent sends it again if the runner never took it).
    async fn store_permission_answer(
        &mut self,
        request_id: &str,
        pending: &PendingPermission,
        outcome: &Outcome,
        status: &str,
        option_id: Option<String>,
        by: &str,
    ) -> Result<Message> {
        let reply = pending
            .responder
            .request_id()
            .map(|id| json!({ "id": id, "result": outcome.to_json() }).to_string());
        let turn = self.phase.turn().map(|turn| turn.id.clone());
        let reply = turn.as_ref().zip(reply.as_deref());
        let mut tx = self.begin_write().await?;
        let id = &self.session.id;
        tx.record_permission_answer(id, request_id, option_id.as_deref(), status, by, reply)
            .await?;
        let message = self
            .resolve_permission_message(
                &mut tx,
                &pending.message_id,
                status,
                option_id.as_deref(),
                by,
            )
            .await?;
        self.finish(tx).await?;
        Ok(message)
    }

    async fn resolve_permission_message(
        &mut self,
        tx: &mut WriteTx,
        id: &kandev_domain::MessageId,
        status: &str,
        option_id: Option<&str>,
        by: &str,
    ) -> Result<Message> {
        let mut meta = self.inner.store.get_message(id).await?.meta;
        let MessageMeta::PermissionRequest(request) = &mut meta else {
            let corrupt = format!("message {id} has no readable permission request metadata");
            return Err(EngineError::Store(kandev_store::StoreError::Corrupt(corrupt)));
        };
        request.status = status.to_owned();
        request.selected_option_id = option_id.map(str::to_owned);
        request.answered_by = Some(by.to_owned());
        let request_id = Some(request.request_id.clone());
        let message = tx.set_message(id, None, &meta).await?;
        publish::message_changed(tx, &self.session, &message).await?;
        let (session_id, status) = (self.session.id.to_string(), status.to_owned());
        let option_id = option_id.map(str::to_owned);
        let event = if status == "expired" {
            SessionEvent::PermissionExpired { session_id, request_id, status, option_id }
        } else {
            SessionEvent::PermissionResolved { session_id, request_id, status, option_id }
        };
        publish::notify(tx, Notification::session(&self.session.id, event)).await?;
        publish::sync_task(tx, &self.session).await?; // maybe no longer needed
        Ok(message)
    }

    /// Marks every pending request `status` in `tx` (rules 12, 38) and returns their
    /// answers, which [`Expired::send`] gives the agent once `tx` committed (stored first,
    /// then sent, as [`Self::answer_permission`] does).
    pub(super) async fn expire_permissions(
        &mut self,
        tx: &mut WriteTx,
        status: &str,
    ) -> Result<Expired> {
        let expired = Expired(self.permissions.drain().collect());
        for (request_id, permission) in &expired.0 {
            let id = &self.session.id;
            let recorded = match tx
                .record_permission_answer(id, request_id, None, status, "engine", None)
                .await
            {
                Ok(()) => {
                    let message = &permission.message_id;
                    self.resolve_permission_message(tx, message, status, None, "engine").await
                }
                Err(err) => Err(err.into()),
            };
            if let Err(err) = recorded {
                expired.restore(self);
                return Err(err);
            }
        }
        // Requests of the last run that the re-adopted agent did not ask again: nobody can
        // answer them any more.
        if let Err(err) = self.expire_unheld(tx, status).await {
            expired.restore(self);
            return Err(err);
        }
        Ok(expired)
    }
}

impl SessionActor {
    async fn expire_unheld(&mut self, tx: &mut WriteTx, status: &str) -> Result<()> {
        for message in tx.pending_permission_messages(&self.session.id).await? {
            let MessageMeta::PermissionRequest(request) = &message.meta else { continue };
            let (id, request_id) = (&self.session.id, &request.request_id);
            tx.record_permission_answer(id, request_id, None, status, "engine", None).await?;
            self.resolve_permission_message(tx, &message.id, status, None, "engine").await?;
        }
        Ok(())
    }
}

/// Permission requests marked expired or cancelled in a transaction not committed yet.
#[must_use = "send the answers once the transaction committed, or restore them"]
pub(super) struct Expired(Vec<(String, PendingPermission)>);

impl Expired {
    /// Answers each request `cancelled` (after the commit that recorded it).
    pub(super) fn send(self) {
        for (_, permission) in self.0 {
            permission.responder.respond(Outcome::Cancelled);
        }
    }

    /// Puts the requests back as pending (the transaction that would have recorded their
    /// answer failed): they stay answerable.
    pub(super) fn restore(self, actor: &mut SessionActor) {
        actor.permissions.extend(self.0);
    }

    /// Sends the answers if `committed` is `Ok` (the transaction that recorded them
    /// committed), else restores the requests; returns `committed`.
    pub(super) fn after_commit(
        self,
        actor: &mut SessionActor,
        committed: Result<()>,
    ) -> Result<()> {
        match committed {
            Ok(()) => self.send(),
            Err(_) => self.restore(actor),
        }
        committed
    }
}
