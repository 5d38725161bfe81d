//! Notifications: what `/ws` subscribers are told, one type per topic kind, so an event can
//! only be published on the kind of topic api.md lists it under. Every emit site (the
//! server's handlers, the engine's `publish`) builds a [`Notification`] and writes its
//! [`Notification::into_parts`] in the transaction of the change it describes.
//!
//! On the wire a notification is `{type: "notification", topic, action, seq, payload}`: each
//! event enum is tagged by `action` with its fields in `payload`.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;
use ts_rs::TS;

use crate::{
    AgentProfileDto, LastErrorDto, MessageDto, MessageKindDto, QuestionDto, QueuedPromptDto,
    RepositoryDto, SessionDto, TaskDto, WorkflowDto, WorkspaceDto,
};

/// The topic of workspace creation, renames and deletion.
pub const WORKSPACES_TOPIC: &str = "workspaces";
/// The topic of agent profile changes (profiles are global, not per workspace).
pub const PROFILES_TOPIC: &str = "profiles";
/// The topic of notification records (events that need a person).
pub const NOTIFICATIONS_TOPIC: &str = "notifications";
/// The prefix of a workspace's topic (`workspace:<id>`).
pub const WORKSPACE_TOPIC_PREFIX: &str = "workspace:";
/// The prefix of a session's topic (`session:<id>`).
pub const SESSION_TOPIC_PREFIX: &str = "session:";

/// The topic of a workspace: `workspace:<id>`.
pub fn workspace_topic(workspace_id: impl std::fmt::Display) -> String {
    format!("{WORKSPACE_TOPIC_PREFIX}{workspace_id}")
}

/// The topic of a session: `session:<id>`.
pub fn session_topic(session_id: impl std::fmt::Display) -> String {
    format!("{SESSION_TOPIC_PREFIX}{session_id}")
}

/// Events of the `workspaces` topic.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(tag = "action", content = "payload")]
pub enum WorkspacesEvent {
    #[serde(rename = "workspace.created")]
    Created { workspace: WorkspaceDto },
    #[serde(rename = "workspace.updated")]
    Updated { workspace: WorkspaceDto },
    #[serde(rename = "workspace.deleted")]
    Deleted { id: String },
}

/// Events of the `profiles` topic.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(tag = "action", content = "payload")]
pub enum ProfilesEvent {
    #[serde(rename = "agent.profile.created")]
    Created { profile: AgentProfileDto },
    #[serde(rename = "agent.profile.updated")]
    Updated { profile: AgentProfileDto },
    #[serde(rename = "agent.profile.deleted")]
    Deleted { id: String },
}

/// Events of the `notifications` topic: a notification record was written (permission
/// requested, turn completed). Following this one topic from a `seq` misses none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(tag = "action", content = "payload")]
pub enum NotificationsEvent {
    #[serde(rename = "notification.created")]
    Created { notification: crate::NotificationRecordDto },
    /// An attempt of a delivery was logged (the delivery log changed).
    #[serde(rename = "notification.delivery.updated")]
    DeliveryUpdated { delivery: crate::DeliveryDto },
    /// Someone made a delivery due now (`notification.delivery.retry`).
    #[serde(rename = "notification.delivery.retried")]
    DeliveryRetried { delivery: crate::DeliveryDto },
}

/// Events of a `workspace:<id>` topic: its repositories, workflows, tasks, and the sessions
/// its tasks gain or lose.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(tag = "action", content = "payload")]
pub enum WorkspaceEvent {
    #[serde(rename = "repository.created")]
    RepositoryCreated { repository: RepositoryDto },
    #[serde(rename = "repository.updated")]
    RepositoryUpdated { repository: RepositoryDto },
    #[serde(rename = "repository.deleted")]
    RepositoryDeleted { id: String },
    #[serde(rename = "workflow.created")]
    WorkflowCreated { workflow: WorkflowDto },
    #[serde(rename = "workflow.updated")]
    WorkflowUpdated { workflow: WorkflowDto },
    #[serde(rename = "workflow.deleted")]
    WorkflowDeleted { id: String },
    #[serde(rename = "task.created")]
    TaskCreated { task: TaskDto },
    #[serde(rename = "task.updated")]
    TaskUpdated { task: TaskDto },
    #[serde(rename = "task.archived")]
    TaskArchived { task: TaskDto },
    /// `trigger` is what moved it (the step history's trigger: `manual`, a workflow action).
    #[serde(rename = "task.moved")]
    TaskMoved { task: TaskDto, from_step_id: String, trigger: String },
    /// A task's git status was recomputed (after a turn, a commit, a ship action, on demand).
    #[serde(rename = "task.git_status")]
    TaskGitStatus { task_id: String, repositories: Vec<crate::GitStatusDto> },
    #[serde(rename = "task.deleted")]
    TaskDeleted { id: String, workflow_id: String, step_id: String },
    #[serde(rename = "session.created")]
    SessionCreated { session: SessionDto },
    #[serde(rename = "session.deleted")]
    SessionDeleted { id: String, task_id: String },
    /// A session got a name (`session.rename`): the task page's session tabs show it.
    #[serde(rename = "session.renamed")]
    SessionRenamed { session: SessionDto },
    /// A session became or stopped being one of its task's attempts (issue 48): the task
    /// page's tabs and Attempts view follow it.
    #[serde(rename = "session.attempt_changed")]
    SessionAttemptChanged { session: SessionDto },
}

/// `session.message.updated`: a streamed chunk appended to a message (apply it only when the
/// message's UTF-8 length plus the delta's is `length`), or a message that changed as a
/// whole.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(untagged)]
pub enum MessageUpdate {
    Chunk { message_id: String, seq: i64, kind: MessageKindDto, delta: String, length: u64 },
    Whole { message_id: String, seq: i64, message: Box<MessageDto> },
}

/// Events of a `session:<id>` topic.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(tag = "action", content = "payload")]
pub enum SessionEvent {
    #[serde(rename = "session.created")]
    Created { session: SessionDto },
    /// A change of the session object that is not a state change.
    #[serde(rename = "session.updated")]
    Updated { session: SessionDto },
    #[serde(rename = "session.state_changed")]
    StateChanged { session: SessionDto },
    #[serde(rename = "session.mode_changed")]
    ModeChanged { session: SessionDto },
    #[serde(rename = "session.config_changed")]
    ConfigChanged { session: SessionDto },
    #[serde(rename = "session.deleted")]
    Deleted { id: String, task_id: String },
    /// `last_error` set, or cleared (`null`).
    #[serde(rename = "session.error")]
    Error { session_id: String, last_error: Option<LastErrorDto> },
    #[serde(rename = "session.turn.started")]
    TurnStarted { session_id: String, turn_id: String, message_id: String },
    /// `stop_reason` as the agent gave it (ACP: `end_turn`, `cancelled`, ...).
    #[serde(rename = "session.turn.completed")]
    /// `tokens`: the turn's token usage from the agent's answer (`{input_tokens,
    /// output_tokens, cached_read_tokens, cached_write_tokens, thought_tokens,
    /// total_tokens}`), `null` when it sent none.
    TurnCompleted { session_id: String, turn_id: String, stop_reason: String, tokens: Value },
    #[serde(rename = "session.message.added")]
    MessageAdded { message: MessageDto },
    #[serde(rename = "session.message.updated")]
    MessageUpdated(MessageUpdate),
    #[serde(rename = "session.queue.changed")]
    QueueChanged { session_id: String, queue: Vec<QueuedPromptDto> },
    #[serde(rename = "session.permission.requested")]
    PermissionRequested { session_id: String, request_id: String, message: MessageDto },
    /// `status` is the request's new status (`approved`, `rejected`, `cancelled`).
    #[serde(rename = "session.permission.resolved")]
    PermissionResolved {
        session_id: String,
        request_id: Option<String>,
        status: String,
        option_id: Option<String>,
    },
    #[serde(rename = "session.permission.expired")]
    PermissionExpired {
        session_id: String,
        request_id: Option<String>,
        status: String,
        option_id: Option<String>,
    },
    /// The agent asked the user a question (MCP `ask_user`).
    #[serde(rename = "session.question.asked")]
    QuestionAsked { question: QuestionDto },
    /// A question was answered, cancelled, timed out or expired.
    #[serde(rename = "session.question.resolved")]
    QuestionResolved { question: QuestionDto },
    /// The agent's context window use (`{used, size, cost}` as the agent reported it).
    #[serde(rename = "session.usage")]
    Usage { session_id: String, usage: crate::transcript::UsageMetaDto },
}

impl SessionEvent {
    /// The event for a change of the whole session object, by its action name
    /// (`session.created`, `.updated`, `.state_changed`, `.mode_changed`, `.config_changed`);
    /// `None` for any other name.
    pub fn session_change(action: &str, session: SessionDto) -> Option<SessionEvent> {
        Some(match action {
            "session.created" => SessionEvent::Created { session },
            "session.updated" => SessionEvent::Updated { session },
            "session.state_changed" => SessionEvent::StateChanged { session },
            "session.mode_changed" => SessionEvent::ModeChanged { session },
            "session.config_changed" => SessionEvent::ConfigChanged { session },
            _ => return None,
        })
    }
}

/// A notification and the topic it is published on.
#[derive(Debug, Clone, PartialEq)]
pub enum Notification {
    /// On `workspaces`.
    Workspaces(WorkspacesEvent),
    /// On `profiles`.
    Profiles(ProfilesEvent),
    /// On `notifications`.
    Notifications(NotificationsEvent),
    /// On `workspace:<workspace_id>`.
    Workspace { workspace_id: String, event: WorkspaceEvent },
    /// On `session:<session_id>`.
    Session { session_id: String, event: SessionEvent },
}

/// A notification as the event log stores it.
#[derive(Debug, Clone)]
pub struct NotificationParts {
    pub topic: String,
    pub action: String,
    /// The payload as JSON text, serialized once (issue 15): the event row
    /// stores it and every WebSocket frame copies it as it is.
    pub payload: Box<RawValue>,
}

impl PartialEq for NotificationParts {
    fn eq(&self, other: &NotificationParts) -> bool {
        (&self.topic, &self.action, self.payload.get())
            == (&other.topic, &other.action, other.payload.get())
    }
}

/// A stored event that is not a notification of api.md.
#[derive(Debug)]
pub struct UnknownNotification(pub String);

impl std::fmt::Display for UnknownNotification {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UnknownNotification {}

impl Notification {
    pub fn workspace(workspace_id: impl ToString, event: WorkspaceEvent) -> Notification {
        Notification::Workspace { workspace_id: workspace_id.to_string(), event }
    }

    pub fn session(session_id: impl ToString, event: SessionEvent) -> Notification {
        Notification::Session { session_id: session_id.to_string(), event }
    }

    pub fn topic(&self) -> String {
        match self {
            Notification::Workspaces(_) => WORKSPACES_TOPIC.to_owned(),
            Notification::Profiles(_) => PROFILES_TOPIC.to_owned(),
            Notification::Notifications(_) => NOTIFICATIONS_TOPIC.to_owned(),
            Notification::Workspace { workspace_id, .. } => workspace_topic(workspace_id),
            Notification::Session { session_id, .. } => session_topic(session_id),
        }
    }

    /// Topic, action and payload, as `WriteTx::emit` takes them. The event is serialized
    /// once, straight to JSON text (no `Value` tree in between), and its payload cut out of
    /// that text.
    pub fn into_parts(self) -> NotificationParts {
        let topic = self.topic();
        let tagged = match &self {
            Notification::Workspaces(event) => serde_json::to_string(event),
            Notification::Profiles(event) => serde_json::to_string(event),
            Notification::Notifications(event) => serde_json::to_string(event),
            Notification::Workspace { event, .. } => serde_json::to_string(event),
            Notification::Session { event, .. } => serde_json::to_string(event),
        };
        /// An event as serde writes it (`tag = "action", content = "payload"`), read back
        /// without copying or parsing its payload.
        #[derive(Deserialize)]
        struct Tagged<'a> {
            #[serde(borrow)]
            action: std::borrow::Cow<'a, str>,
            #[serde(borrow)]
            payload: Option<&'a RawValue>,
        }
        // Serializing cannot fail (every map in these types has string keys), and what serde
        // wrote reads back.
        let text = tagged.unwrap_or_default();
        let (action, payload) = match serde_json::from_str::<Tagged<'_>>(&text) {
            Ok(Tagged { action, payload }) => {
                (action.into_owned(), payload.map(RawValue::to_owned).unwrap_or_default())
            }
            Err(_) => (String::new(), Box::<RawValue>::default()),
        };
        NotificationParts { topic, action, payload }
    }

    /// Reads a stored event back as a notification; an event whose topic, action or payload
    /// is not one of api.md's is an error naming what did not fit.
    pub fn from_parts(
        topic: &str,
        action: &str,
        payload: &Value,
    ) -> Result<Notification, UnknownNotification> {
        let tagged = serde_json::json!({ "action": action, "payload": payload });
        let fail = |err: serde_json::Error| {
            UnknownNotification(format!("{action} on {topic} is not a notification: {err}"))
        };
        if topic == WORKSPACES_TOPIC {
            return serde_json::from_value(tagged).map(Notification::Workspaces).map_err(fail);
        }
        if topic == PROFILES_TOPIC {
            return serde_json::from_value(tagged).map(Notification::Profiles).map_err(fail);
        }
        if topic == NOTIFICATIONS_TOPIC {
            return serde_json::from_value(tagged).map(Notification::Notifications).map_err(fail);
        }
        if let Some(id) = topic.strip_prefix(WORKSPACE_TOPIC_PREFIX) {
            return serde_json::from_value(tagged)
                .map(|event| Notification::workspace(id, event))
                .map_err(fail);
        }
        if let Some(id) = topic.strip_prefix(SESSION_TOPIC_PREFIX) {
            return serde_json::from_value(tagged)
                .map(|event| Notification::session(id, event))
                .map_err(fail);
        }
        Err(UnknownNotification(format!("{topic} is not a topic")))
    }
}

/// The TypeScript type of a notification frame: the event unions above under their topics.
pub fn typescript_frame() -> String {
    "export type Notification = { type: \"notification\", seq: number } & (\n  \
     | ({ topic: \"workspaces\" } & WorkspacesEvent)\n  \
     | ({ topic: \"profiles\" } & ProfilesEvent)\n  \
     | ({ topic: \"notifications\" } & NotificationsEvent)\n  \
     | ({ topic: `workspace:${string}` } & WorkspaceEvent)\n  \
     | ({ topic: `session:${string}` } & SessionEvent)\n);\n"
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn workspace() -> WorkspaceDto {
        WorkspaceDto {
            id: "w1".into(),
            name: "Default".into(),
            created_at: "1970-01-01T00:00:00Z".into(),
            updated_at: "1970-01-01T00:00:00Z".into(),
        }
    }

    fn value(parts: &NotificationParts) -> Value {
        serde_json::from_str(parts.payload.get()).unwrap()
    }

    #[test]
    fn parts_are_the_topic_action_and_payload_of_api_md() {
        let parts = Notification::Workspaces(WorkspacesEvent::Created { workspace: workspace() })
            .into_parts();
        assert_eq!(parts.topic, "workspaces");
        assert_eq!(parts.action, "workspace.created");
        assert_eq!(value(&parts)["workspace"]["id"], "w1");

        let deleted = WorkspaceEvent::TaskDeleted {
            id: "t1".into(),
            workflow_id: "f1".into(),
            step_id: "s1".into(),
        };
        let parts = Notification::workspace("w1", deleted).into_parts();
        assert_eq!(parts.topic, "workspace:w1");
        assert_eq!(parts.action, "task.deleted");
        assert_eq!(value(&parts), json!({"id": "t1", "workflow_id": "f1", "step_id": "s1"}));

        let chunk = MessageUpdate::Chunk {
            message_id: "m1".into(),
            seq: 7,
            kind: MessageKindDto::Agent,
            delta: "hé".into(),
            length: 3,
        };
        let parts =
            Notification::session("s1", SessionEvent::MessageUpdated(chunk.clone())).into_parts();
        assert_eq!(parts.topic, "session:s1");
        assert_eq!(parts.action, "session.message.updated");
        assert_eq!(
            value(&parts),
            json!({"message_id": "m1", "seq": 7, "kind": "agent", "delta": "hé", "length": 3})
        );
        let back = Notification::from_parts(&parts.topic, &parts.action, &value(&parts)).unwrap();
        assert_eq!(back, Notification::session("s1", SessionEvent::MessageUpdated(chunk)));
    }

    #[test]
    fn an_event_on_the_wrong_kind_of_topic_or_with_a_wrong_payload_is_not_a_notification() {
        let payload = json!({"workspace": workspace()});
        assert!(Notification::from_parts("workspaces", "workspace.created", &payload).is_ok());
        for (topic, action, payload) in [
            ("session:s1", "workspace.created", payload.clone()),
            ("workspaces", "workspace.renamed", payload.clone()),
            ("workspaces", "workspace.created", json!({"workspace": {"id": "w1"}})),
            ("everything", "workspace.created", payload.clone()),
        ] {
            let err = Notification::from_parts(topic, action, &payload).unwrap_err();
            assert!(err.to_string().contains(topic), "{err}");
        }
    }

    #[test]
    fn session_changes_are_named_by_their_action() {
        let session: SessionDto = serde_json::from_value(json!({
            "id": "s1", "task_id": "t1", "agent_profile_id": null, "state": "RUNNING",
            "epoch": 1, "acp_session_id": null, "session_mode": null, "model": null,
            "config_options": null, "plan_mode": false, "auto_run": true, "last_error": null,
            "context_window": null, "agent_info": null, "cwd": "/tmp",
            "available_commands": [], "created_at": "x", "updated_at": "x",
        }))
        .unwrap();
        for action in [
            "session.created",
            "session.updated",
            "session.state_changed",
            "session.mode_changed",
            "session.config_changed",
        ] {
            let event = SessionEvent::session_change(action, session.clone()).unwrap();
            assert_eq!(Notification::session("s1", event).into_parts().action, action);
        }
        assert_eq!(SessionEvent::session_change("session.usage", session), None);
    }
}
