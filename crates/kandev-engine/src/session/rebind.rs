//! `session.rebind` (issue 52): the session moves to another agent profile. Its worktree and
//! transcript stay; the old agent is stopped, the conversation it could load is forgotten
//! (another agent cannot load it), and the new agent starts with a handoff prompt Kandev
//! writes from the transcript (`crate::handoff`). A session whose profile was deleted is
//! refused a start until it is moved.

use kandev_domain::agent::AgentProfile;
use kandev_domain::message_meta::StatusNote;

use crate::api::PromptRequest;
use crate::error::{EngineError, Result};
use crate::handoff::{self, HANDOFF_MESSAGES};
use crate::publish;
use crate::session::state::{Phase, SessionActor};
use crate::write::add_message;

impl SessionActor {
    /// Moves the session to `profile` and sends the new agent its handoff prompt. Refused
    /// while a turn, a start or a context reset runs.
    pub(super) async fn rebind(&mut self, profile: AgentProfile) -> Result<()> {
        if !matches!(self.phase, Phase::Idle | Phase::Ready(_)) || self.unsettled.is_some() {
            return Err(EngineError::Busy(
                "the session is busy (a turn, a start or a context reset): wait for it or cancel \
                 it, then move the session"
                    .into(),
            ));
        }
        self.reread_profile().await?;
        if self.session.agent_profile_id.as_ref() == Some(&profile.id) {
            return Err(EngineError::Validation(format!(
                "the session already runs the profile {}: choose another one",
                profile.name
            )));
        }
        let (from, from_name) = self.profile_title().await?;
        // Quietly: the stop's own note ("the next message resumes") would not be true.
        self.stop_execution(true).await;
        let handoff = self.handoff_prompt(&from).await?;
        let mut tx = self.begin_write().await?;
        let written = tx.rebind_session(&self.session.id, self.session.epoch, &profile.id).await?;
        publish::session_event(&mut tx, &written, "session.updated").await?;
        self.session = written;
        let text = format!(
            "moved from {from} to {}: its agent starts a new conversation, told what happened \
             so far",
            title_of(&profile)
        );
        let note = StatusNote::Rebound { from: from_name, to: profile.name.clone() };
        add_message(&mut tx, &self.session, None, &text, note).await?;
        self.finish(tx).await?;
        if self.session.state.needs_resume() {
            // `FAILED` or `CANCELLED` is left the way a resume leaves it: by a start (its
            // error cleared when the agent is ready); the handoff waits in the queue for it.
            self.begin_boot(None, true).await?;
        }
        self.admit(PromptRequest::text(handoff), "rebind").await.map(|_| ())
    }

    /// Refuses to start an agent for a session whose profile was deleted: never another agent
    /// in its place; the session is moved explicitly (`session.rebind`).
    pub(super) async fn refuse_without_profile(&mut self) -> Result<()> {
        self.reread_profile().await?;
        match (&self.session.agent_profile_id, &self.session.deleted_profile) {
            (None, Some(deleted)) => Err(EngineError::Validation(format!(
                "the agent profile {deleted} of this session was deleted: move the session to \
                 another agent to go on"
            ))),
            _ => Ok(()),
        }
    }

    /// The session's profile fields as stored: a profile's deletion is written beside the
    /// actor (`agent.profile.delete`).
    async fn reread_profile(&mut self) -> Result<()> {
        let stored = self.inner.store.get_session(&self.session.id).await?;
        self.session.agent_profile_id = stored.agent_profile_id;
        self.session.deleted_profile = stored.deleted_profile;
        Ok(())
    }

    /// The profile the session runs, for people (its name and agent, the deleted one's
    /// name, or the built-in mock agent), and its name alone.
    async fn profile_title(&self) -> Result<(String, String)> {
        Ok(match (self.profile().await?, &self.session.deleted_profile) {
            (Some(profile), _) => (title_of(&profile), profile.name),
            (None, Some(deleted)) => (format!("the deleted profile {deleted}"), deleted.clone()),
            (None, None) => ("the built-in mock agent".to_owned(), "Mock".to_owned()),
        })
    }

    /// The handoff prompt from the task and the transcript: its first messages and its
    /// latest [`HANDOFF_MESSAGES`].
    async fn handoff_prompt(&self, from: &str) -> Result<String> {
        let store = &self.inner.store;
        let task = store.get_task(&self.session.task_id).await?;
        let id = &self.session.id;
        let mut messages = store.list_messages(id, None, None, 20).await?;
        let latest = store.list_messages(id, None, Some(i64::MAX), HANDOFF_MESSAGES).await?;
        let last_early = messages.last().map_or(0, |m| m.seq);
        messages.extend(latest.into_iter().filter(|m| m.seq > last_early));
        Ok(handoff::prompt(&task.title, &task.description, from, &messages))
    }
}

/// A profile for people: `name (agent)`.
fn title_of(profile: &AgentProfile) -> String {
    format!("{} ({})", profile.name, profile.kind.default_command().title)
}
