//! Who may call an action (issue 49). Every action of the table declares an [`Access`]: the
//! [`Need`] a caller must meet, the kind of object ([`Subject`]) whose workspace the need is
//! checked in, and whether it writes (every write is audited). The server checks it once, for
//! every transport, before the handler runs; [`Subjects`] names the object a request is about.

use crate::requests as rq;

/// What a caller needs. The server's owner (and a server without accounts, and the server
/// token) meets every need.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Need {
    /// Anyone let in: the action acts on the caller's own account, or answers only what the
    /// caller may see.
    Anyone,
    /// At least this role in the subject's workspace; for a server-wide subject, in at least
    /// one workspace.
    Viewer,
    Member,
    Admin,
    /// The server's owner.
    Owner,
}

/// The kind of object a request is about: its workspace is where the need is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subject {
    /// Nothing of one workspace: agent profiles, executors, channels, users, the caller.
    Server,
    Workspace,
    Repository,
    Workflow,
    Step,
    Task,
    Session,
    Terminal,
    ReviewComment,
    SavedPrompt,
    IntakeSource,
    Schedule,
    Question,
}

/// An action's access rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Access {
    pub need: Need,
    pub subject: Subject,
    /// Whether the action changes something (recorded in the audit log).
    pub writes: bool,
}

/// The ids of the objects a request is about, of the kind its action's [`Subject`] names
/// (empty for a server-wide action). A request naming several (an export of several
/// workflows) needs the role in each one's workspace.
pub trait Subjects {
    fn subjects(&self) -> Vec<&str>;

    /// What the audit log records as the object a write acted on: the first subject, unless
    /// the request names its object otherwise (a member's user name, a profile's id).
    fn target(&self) -> Option<&str> {
        self.subjects().first().copied()
    }
}

macro_rules! subjects {
    (none: $($none:ty),* ; $($ty:ty => $field:ident),* $(,)?) => {
        $(impl Subjects for $none {
            fn subjects(&self) -> Vec<&str> {
                vec![]
            }
        })*
        $(impl Subjects for $ty {
            fn subjects(&self) -> Vec<&str> {
                vec![self.$field.as_str()]
            }
        })*
    };
}

subjects! {
    none: rq::Page, rq::Empty, rq::AgentVersionsQuery, rq::AgentInstall, rq::TokenCreate, rq::PasswordSet, rq::WorkspaceCreate,
        rq::ProfileCreate, rq::ExecutorCreate, rq::ChannelCreate, rq::DeliveryRetry,
        rq::DeliveryList, rq::NotificationList, rq::Subscribe, rq::Unsubscribe, rq::AuditList;
    rq::ById => id,
    rq::WorkspaceUpdate => id,
    rq::ByWorkspace => workspace_id,
    rq::RepositoryCreate => workspace_id,
    rq::RepositoryUpdate => id,
    rq::WorkflowCreate => workspace_id,
    rq::WorkflowUpdate => id,
    rq::WorkflowImport => workspace_id,
    rq::StepCreate => workflow_id,
    rq::StepUpdate => id,
    rq::StepReorder => workflow_id,
    rq::TaskCreate => workflow_id,
    rq::TaskList => workflow_id,
    rq::TaskUpdate => id,
    rq::TaskMove => id,
    rq::TaskRemove => id,
    rq::ByTask => task_id,
    rq::BySession => session_id,
    rq::QuestionAnswer => id,
    rq::SessionLaunch => task_id,
    rq::SessionResume => id,
    rq::TurnRevert => session_id,
    rq::TaskAttemptCreate => task_id,
    rq::TaskAttemptList => task_id,
    rq::TaskAttempt => task_id,
    rq::TurnDiff => session_id,
    rq::SessionAuthenticate => id,
    rq::SessionRename => id,
    rq::SessionRebind => session_id,
    rq::SessionSetMode => id,
    rq::SessionSetConfigOption => id,
    rq::PromptCreate => workspace_id,
    rq::PromptUpdate => id,
    rq::MessageAdd => session_id,
    rq::Search => workspace_id,
    rq::MessageList => session_id,
    rq::PermissionRespond => session_id,
    rq::RepositoryExecutorSet => repository_id,
    rq::QueueAdd => session_id,
    rq::QueueUpdate => session_id,
    rq::QueueRemove => session_id,
    rq::QueueReorder => session_id,
    rq::AutoRunSet => session_id,
    rq::TaskFileRead => task_id,
    rq::TaskCommit => task_id,
    rq::TaskCommitDiff => task_id,
    rq::TaskIndexChange => task_id,
    rq::TaskAmend => task_id,
    rq::FileViewedSet => task_id,
    rq::DevServerTarget => task_id,
    rq::TerminalOpen => task_id,
    rq::ByTerminal => terminal_id,
    rq::IntakeSourceCreate => workspace_id,
    rq::IntakeSourceUpdate => id,
    rq::ScheduleCreate => workspace_id,
    rq::ScheduleUpdate => id,
    rq::TaskRebase => task_id,
    rq::TaskMerge => task_id,
    rq::TaskPush => task_id,
    rq::TaskPrCreate => task_id,
    rq::ReviewCommentAdd => task_id,
    rq::ReviewThreadResolve => id,
    rq::ReviewCommentUpdate => id,
}

/// Requests about a server-wide object, or whose audited object is not their subject.
macro_rules! targets {
    ($($ty:ty => [$($subject:ident)?] $target:ident),* $(,)?) => {
        $(impl Subjects for $ty {
            fn subjects(&self) -> Vec<&str> {
                vec![$(self.$subject.as_str())?]
            }

            fn target(&self) -> Option<&str> {
                Some(self.$target.as_str())
            }
        })*
    };
}

targets! {
    rq::ProfileUpdate => [] id,
    rq::ExecutorUpdate => [] id,
    rq::ChannelUpdate => [] id,
    rq::UserCreate => [] name,
    rq::ByName => [] name,
    rq::MemberSet => [workspace_id] user,
    rq::MemberRemove => [workspace_id] user,
}

/// A secret's scope: its workspace when it names one (none: the server's secrets, whose
/// handler asks for the owner).
macro_rules! scoped {
    ($($ty:ty => $target:ident),* $(,)?) => {
        $(impl Subjects for $ty {
            fn subjects(&self) -> Vec<&str> {
                self.workspace_id.as_deref().into_iter().collect()
            }

            fn target(&self) -> Option<&str> {
                Some(self.$target.as_str())
            }
        })*
    };
}

scoped! {
    rq::SecretSet => name,
    rq::SecretRemove => name,
}

impl Subjects for rq::SecretList {
    fn subjects(&self) -> Vec<&str> {
        self.workspace_id.as_deref().into_iter().collect()
    }
}

impl Subjects for rq::WorkflowExport {
    fn subjects(&self) -> Vec<&str> {
        self.ids.iter().map(String::as_str).collect()
    }
}
