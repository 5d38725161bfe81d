//! What one WebSocket connection may see of the server-wide topics (issue 49). A connection
//! follows `workspace:<id>` and `session:<id>` only in the workspaces its user belongs to
//! (checked when it subscribes, `ws.rs`); the `workspaces` and `notifications` topics carry
//! events of every workspace, so each frame of theirs is shown only if its workspace is one
//! the user sees. Delivery events (the channels' log) go to admins only.
//!
//! A connection's [`Visibility`] is taken when it opens: a change of the user's roles closes
//! their sockets (`access.rs`, `Live::roles_changed`), and the page reconnects.

use std::collections::{HashMap, HashSet};

use kandev_api_types::notifications::{
    NOTIFICATIONS_TOPIC, SESSION_TOPIC_PREFIX, WORKSPACE_TOPIC_PREFIX, WORKSPACES_TOPIC,
};
use kandev_domain::account::Role;
use kandev_domain::{SessionId, TaskId};
use kandev_store::Store;
use serde::Deserialize;

use crate::roles::Grants;

/// Tasks whose workspace one connection remembers at most (then it forgets them all).
const MAX_KNOWN_TASKS: usize = 10_000;

/// The workspaces one connection sees.
#[derive(Debug, Default)]
pub(crate) struct Visibility {
    /// `None`: every workspace.
    workspaces: Option<HashSet<String>>,
    /// Whether the user is an admin of some workspace (delivery events).
    admin: bool,
    /// The workspace of each task a notification named (a task never changes workspace).
    tasks: HashMap<String, Option<String>>,
}

/// The parts of a frame this reads.
#[derive(Deserialize)]
struct Envelope {
    action: String,
    #[serde(default)]
    payload: Payload,
}

#[derive(Deserialize, Default)]
struct Payload {
    id: Option<String>,
    workspace: Option<Named>,
    notification: Option<Record>,
}

#[derive(Deserialize)]
struct Named {
    id: String,
}

#[derive(Deserialize)]
struct Record {
    task_id: String,
}

impl Visibility {
    /// Everything: the owner, the server token, a server without accounts.
    #[cfg(test)]
    pub(crate) fn all() -> Visibility {
        Visibility::default()
    }

    pub(crate) fn of(grants: &Grants) -> Visibility {
        Visibility {
            workspaces: grants.workspaces().map(|w| w.into_iter().collect()),
            admin: grants.workspaces_with(Role::Admin).is_none_or(|w| !w.is_empty()),
            tasks: HashMap::new(),
        }
    }

    /// Whether the frame `text` of `topic` may be sent to this connection.
    pub(crate) async fn shows(&mut self, store: &Store, topic: &str, text: &str) -> bool {
        let Some(workspaces) = &self.workspaces else { return true };
        if topic != WORKSPACES_TOPIC && topic != NOTIFICATIONS_TOPIC {
            return true;
        }
        let Ok(frame) = serde_json::from_str::<Envelope>(text) else { return false };
        if topic == WORKSPACES_TOPIC {
            let id = frame.payload.workspace.map(|w| w.id).or(frame.payload.id);
            return id.is_some_and(|id| workspaces.contains(&id));
        }
        if frame.action.starts_with("notification.delivery.") {
            return self.admin;
        }
        let Some(record) = frame.payload.notification else { return false };
        let workspace = match self.tasks.get(&record.task_id) {
            Some(known) => known.clone(),
            None => {
                let found = store
                    .get_task(&TaskId::new(&record.task_id))
                    .await
                    .ok()
                    .map(|t| t.workspace_id.to_string());
                if self.tasks.len() >= MAX_KNOWN_TASKS {
                    self.tasks.clear();
                }
                self.tasks.insert(record.task_id, found.clone());
                found
            }
        };
        workspace.is_some_and(|w| workspaces.contains(&w))
    }

    /// Whether this connection may follow `topic`: a workspace's or a session's topic only
    /// in a workspace it sees (a session that does not exist is refused: its id says
    /// nothing of where it will be).
    pub(crate) async fn may_follow(&self, store: &Store, topic: &str) -> bool {
        let Some(workspaces) = &self.workspaces else { return true };
        if let Some(id) = topic.strip_prefix(WORKSPACE_TOPIC_PREFIX) {
            return workspaces.contains(id);
        }
        let Some(id) = topic.strip_prefix(SESSION_TOPIC_PREFIX) else { return true };
        let Ok(session) = store.get_session(&SessionId::new(id)).await else { return false };
        match store.get_task(&session.task_id).await {
            Ok(task) => workspaces.contains(task.workspace_id.as_str()),
            Err(_) => false,
        }
    }
}
