//! Response payloads of the actions: what a success answers, by action (see [`crate::actions`]).
//! Lists carry `next_cursor` (`null` on the last page, and for lists that are never paged).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::{
    AgentKindDto, AgentProfileDto, CommitDto, FileChangeDto, KeptWorktreeDto, MessageDto,
    QueuedPromptDto, RepositoryDto, SessionDto, TaskDto, TreeEntryDto, WorkflowDto, WorkspaceDto,
    WorktreeDto,
};

/// Declares response payloads with the attributes every one of them carries.
macro_rules! responses {
    ($($(#[$meta:meta])* pub struct $name:ident $body:tt)*) => {
        $(
            $(#[$meta])*
            #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
            pub struct $name $body
        )*
    };
}

responses! {
    /// `*.delete`: the id of what is gone (`deleted` is always `true`).
    pub struct Deleted {
        pub deleted: bool,
        pub id: String,
    }

    pub struct Workspaces {
        pub workspaces: Vec<WorkspaceDto>,
        pub next_cursor: Option<String>,
    }

    pub struct WorkspaceOne {
        pub workspace: WorkspaceDto,
    }

    pub struct Repositories {
        pub repositories: Vec<RepositoryDto>,
        pub next_cursor: Option<String>,
    }

    pub struct RepositoryOne {
        pub repository: RepositoryDto,
    }

    /// A built-in workflow template: its id for `workflow.create`, and its step names.
    pub struct WorkflowTemplateDto {
        pub id: String,
        pub name: String,
        pub description: String,
        pub steps: Vec<String>,
    }

    pub struct WorkflowTemplates {
        pub templates: Vec<WorkflowTemplateDto>,
        pub next_cursor: Option<String>,
    }

    pub struct Workflows {
        pub workflows: Vec<WorkflowDto>,
        pub next_cursor: Option<String>,
    }

    pub struct WorkflowOne {
        pub workflow: WorkflowDto,
    }

    /// `workflow.import`: the workflows created, in document order.
    pub struct WorkflowsImported {
        pub workflows: Vec<WorkflowDto>,
    }

    pub struct WorkflowYaml {
        pub yaml: String,
    }

    /// `task.create`: with `start_agent` (or a start step that starts an agent), the task's
    /// first session too.
    pub struct TaskCreated {
        pub task: TaskDto,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[ts(optional)]
        pub session: Option<SessionDto>,
    }

    pub struct Tasks {
        pub tasks: Vec<TaskDto>,
        pub next_cursor: Option<String>,
    }

    pub struct TaskOne {
        pub task: TaskDto,
    }

    pub struct TaskMoved {
        pub task: TaskDto,
        pub from_step_id: String,
    }

    /// `task.archive`: the worktrees removed (paths) and those kept, with why.
    pub struct TaskArchived {
        pub task: TaskDto,
        pub worktrees_removed: Vec<String>,
        pub worktrees_kept: Vec<KeptWorktreeDto>,
    }

    /// `task.delete`.
    pub struct TaskDeleted {
        pub deleted: bool,
        pub id: String,
        pub worktrees_removed: Vec<String>,
        pub worktrees_kept: Vec<KeptWorktreeDto>,
    }

    pub struct TaskChanges {
        pub worktrees: Vec<WorktreeDto>,
        pub files: Vec<FileChangeDto>,
    }

    pub struct TaskTree {
        pub entries: Vec<TreeEntryDto>,
        pub truncated: bool,
    }

    /// `task.commit`: `commit` is the first of `commits` (one per worktree that had changes).
    pub struct TaskCommitted {
        pub commit: Option<CommitDto>,
        pub commits: Vec<CommitDto>,
    }

    /// One kind of agent: its default command, whether that is installed, how to install it,
    /// and the version an agent of this kind last reported in `initialize` (else `null`).
    pub struct AgentKindInfo {
        pub kind: AgentKindDto,
        pub command: String,
        pub installed: bool,
        pub install: String,
        pub version: Option<String>,
    }

    pub struct AgentKinds {
        pub kinds: Vec<AgentKindInfo>,
    }

    pub struct Profiles {
        pub profiles: Vec<AgentProfileDto>,
        pub next_cursor: Option<String>,
    }

    /// `agent.profile.create` and `.update`: `installed` says whether the profile's command is
    /// found; when it is not, `install` says how to install the agent.
    pub struct ProfileSaved {
        pub profile: AgentProfileDto,
        pub installed: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[ts(optional)]
        pub install: Option<String>,
    }

    pub struct Sessions {
        pub sessions: Vec<SessionDto>,
        pub next_cursor: Option<String>,
    }

    pub struct SessionOne {
        pub session: SessionDto,
    }

    pub struct Messages {
        pub messages: Vec<MessageDto>,
    }

    pub struct MessageOne {
        pub message: MessageDto,
    }

    /// Every `message.queue.*` action answers the whole queue after the change.
    pub struct Queue {
        pub queue: Vec<QueuedPromptDto>,
    }

    /// `subscribe`: the last `seq` sent per topic now followed (a topic told
    /// `resync_required` is left out).
    pub struct Subscribed {
        pub topics: HashMap<String, i64>,
    }

    /// `devserver.start`, `devserver.stop`.
    pub struct DevServerOne {
        pub dev_server: crate::DevServerDto,
    }

    /// `devserver.list`: the task's dev servers.
    pub struct DevServers {
        pub dev_servers: Vec<crate::DevServerDto>,
    }

    /// `unsubscribe`: the topics named.
    pub struct Unsubscribed {
        pub topics: Vec<String>,
    }
}

/// `message.add`: sent as a turn now, recorded once for a repeated `client_message_id`, or
/// queued.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum MessageAdded {
    Sent { message: MessageDto },
    Duplicate { message: MessageDto },
    Queued { queued: QueuedPromptDto },
}
