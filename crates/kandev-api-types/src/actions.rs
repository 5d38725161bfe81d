//! The action table: every action of api.md declared once, with its name, its request type
//! and its response type. The server's dispatch is generated from it ([`route`]: a handler
//! missing for an action is a compile error there), the web client's `Actions` map is
//! generated from it ([`typescript`]), and docs/api.md is checked against it ([`NAMES`], by
//! `crates/kandev/tests/tidy.rs`).

use serde::Serialize;
use serde::de::DeserializeOwned;
use ts_rs::{Config, TS, TypeVisitor};

use crate::access::{Access, Need, Subject, Subjects};
use crate::requests as rq;
use crate::responses as rs;

/// One action: `NAME` is what clients send (`POST /api/v1/<NAME>`, or a WebSocket request's
/// `action`), `Request` the payload it takes, `Response` what a success answers.
pub trait Action {
    const NAME: &'static str;
    /// Who may call it (issue 49), checked by the server before the handler runs.
    const ACCESS: Access;
    type Request: DeserializeOwned + Serialize + TS + Subjects + Send + 'static;
    type Response: DeserializeOwned + Serialize + TS + Send + 'static;
}

/// What [`route`] hands an action to: the server implements it for every action it handles
/// (`impl<A: Handler> Route<A> for Call`), and [`route`] requires it for every action of the
/// table.
pub trait Route<A: Action> {
    type Output;
    fn route(self) -> Self::Output;
}

/// Declares the table. Each action's `[read|write <Need> <Subject>]` is its access rule
/// (`crate::access`): who may call it, and the workspace of which object it is checked in.
/// `http` actions are served by both transports, `socket` actions by the
/// WebSocket only (they act on the connection's subscriptions).
macro_rules! actions {
    (
        http { $($name:ident = $wire:literal [$($access:tt)*] : $request:ty => $response:ty;)* }
        socket { $($sname:ident = $swire:literal [$($saccess:tt)*] : $srequest:ty => $sresponse:ty;)* }
    ) => {
        $(
            #[doc = concat!("`", $wire, "`")]
            #[derive(Debug, Clone, Copy)]
            pub struct $name;

            impl Action for $name {
                const NAME: &'static str = $wire;
                const ACCESS: Access = access!($($access)*);
                type Request = $request;
                type Response = $response;
            }
        )*
        $(
            #[doc = concat!("`", $swire, "` (WebSocket only)")]
            #[derive(Debug, Clone, Copy)]
            pub struct $sname;

            impl Action for $sname {
                const NAME: &'static str = $swire;
                const ACCESS: Access = access!($($saccess)*);
                type Request = $srequest;
                type Response = $sresponse;
            }
        )*

        /// Every action's name, in table order (WebSocket-only actions last).
        pub const NAMES: &[&str] = &[$($wire,)* $($swire,)*];

        /// Every action's name with its access rule, in table order.
        pub const ACCESS: &[(&str, Access)] = &[
            $(($wire, access!($($access)*)),)*
            $(($swire, access!($($saccess)*)),)*
        ];

        /// The actions served by the WebSocket only.
        pub const SOCKET_ONLY: &[&str] = &[$($swire,)*];

        /// Hands the action called `name` to `visitor`; `None` for a name that is not an
        /// action both transports serve.
        pub fn route<V, O>(name: &str, visitor: V) -> Option<O>
        where
            $(V: Route<$name, Output = O>,)*
        {
            match name {
                $($wire => Some(<V as Route<$name>>::route(visitor)),)*
                _ => None,
            }
        }

        /// Visits every request and response type of the table.
        pub fn visit_types(visitor: &mut impl TypeVisitor) {
            $(visitor.visit::<$request>(); visitor.visit::<$response>();)*
            $(visitor.visit::<$srequest>(); visitor.visit::<$sresponse>();)*
        }

        /// The TypeScript maps from action name to request and response types: `Actions` (what
        /// `POST /api/v1/<action>` serves) and `SocketActions`.
        pub fn typescript(cfg: &Config) -> String {
            let mut out = String::from("export type Actions = {\n");
            $(out.push_str(&entry($wire, &<$request as TS>::name(cfg), &<$response as TS>::name(cfg)));)*
            out.push_str("};\n\nexport type SocketActions = {\n");
            $(out.push_str(&entry($swire, &<$srequest as TS>::name(cfg), &<$sresponse as TS>::name(cfg)));)*
            out.push_str("};\n");
            out
        }
    };
}

/// `read Viewer Task` → an [`Access`].
macro_rules! access {
    (read $need:ident $subject:ident) => {
        Access { need: Need::$need, subject: Subject::$subject, writes: false }
    };
    (write $need:ident $subject:ident) => {
        Access { need: Need::$need, subject: Subject::$subject, writes: true }
    };
}

/// The access rule of the action called `name`.
pub fn access(name: &str) -> Option<Access> {
    ACCESS.iter().find(|(n, _)| *n == name).map(|(_, a)| *a)
}

fn entry(name: &str, request: &str, response: &str) -> String {
    format!("  \"{name}\": {{ request: {request}, response: {response} }},\n")
}

actions! {
    http {
        WorkspaceList = "workspace.list" [read Anyone Server]: rq::Page => rs::Workspaces;
        WorkspaceCreate = "workspace.create" [write Admin Server]: rq::WorkspaceCreate => rs::WorkspaceOne;
        WorkspaceGet = "workspace.get" [read Viewer Workspace]: rq::ById => rs::WorkspaceOne;
        WorkspaceUpdate = "workspace.update" [write Admin Workspace]: rq::WorkspaceUpdate => rs::WorkspaceOne;
        WorkspaceDelete = "workspace.delete" [write Admin Workspace]: rq::ById => rs::Deleted;

        RepositoryList = "repository.list" [read Viewer Workspace]: rq::ByWorkspace => rs::Repositories;
        RepositoryCreate = "repository.create" [write Admin Workspace]: rq::RepositoryCreate => rs::RepositoryOne;
        RepositoryGet = "repository.get" [read Viewer Repository]: rq::ById => rs::RepositoryOne;
        RepositoryUpdate = "repository.update" [write Admin Repository]: rq::RepositoryUpdate => rs::RepositoryOne;
        RepositoryDelete = "repository.delete" [write Admin Repository]: rq::ById => rs::Deleted;

        WorkflowTemplateList = "workflow.template.list" [read Anyone Server]: rq::Empty => rs::WorkflowTemplates;
        WorkflowCreate = "workflow.create" [write Admin Workspace]: rq::WorkflowCreate => rs::WorkflowOne;
        WorkflowList = "workflow.list" [read Viewer Workspace]: rq::ByWorkspace => rs::Workflows;
        WorkflowGet = "workflow.get" [read Viewer Workflow]: rq::ById => rs::WorkflowOne;
        WorkflowUpdate = "workflow.update" [write Admin Workflow]: rq::WorkflowUpdate => rs::WorkflowOne;
        WorkflowDelete = "workflow.delete" [write Admin Workflow]: rq::ById => rs::Deleted;
        WorkflowExport = "workflow.export" [read Viewer Workflow]: rq::WorkflowExport => rs::WorkflowYaml;
        WorkflowImport = "workflow.import" [write Admin Workspace]: rq::WorkflowImport => rs::WorkflowsImported;
        StepCreate = "workflow.step.create" [write Admin Workflow]: rq::StepCreate => rs::WorkflowOne;
        StepUpdate = "workflow.step.update" [write Admin Step]: rq::StepUpdate => rs::WorkflowOne;
        StepDelete = "workflow.step.delete" [write Admin Step]: rq::ById => rs::WorkflowOne;
        StepReorder = "workflow.step.reorder" [write Admin Workflow]: rq::StepReorder => rs::WorkflowOne;

        TaskCreate = "task.create" [write Member Workflow]: rq::TaskCreate => rs::TaskCreated;
        TaskList = "task.list" [read Viewer Workflow]: rq::TaskList => rs::Tasks;
        TaskNeedsYou = "task.needs_you" [read Viewer Workspace]: rq::ByWorkspace => rs::TasksNeedingYou;
        TaskGet = "task.get" [read Viewer Task]: rq::ById => rs::TaskOne;
        TaskUpdate = "task.update" [write Member Task]: rq::TaskUpdate => rs::TaskOne;
        TaskMove = "task.move" [write Member Task]: rq::TaskMove => rs::TaskMoved;
        TaskArchive = "task.archive" [write Member Task]: rq::TaskRemove => rs::TaskArchived;
        TaskUnarchive = "task.unarchive" [write Member Task]: rq::ById => rs::TaskOne;
        TaskDelete = "task.delete" [write Member Task]: rq::TaskRemove => rs::TaskDeleted;
        TaskChanges = "task.changes" [read Viewer Task]: rq::ByTask => rs::TaskChanges;
        TaskTree = "task.tree" [read Viewer Task]: rq::ByTask => rs::TaskTree;
        TaskFileRead = "task.file.read" [read Viewer Task]: rq::TaskFileRead => crate::FileContentDto;
        FileViewedSet = "task.file.viewed.set" [write Member Task]: rq::FileViewedSet => rs::FileViewed;
        TaskCommit = "task.commit" [write Member Task]: rq::TaskCommit => rs::TaskCommitted;
        TaskCommits = "task.commits" [read Viewer Task]: rq::ByTask => rs::TaskCommits;
        TaskCommitDiff = "task.commit.diff" [read Viewer Task]: rq::TaskCommitDiff => rs::CommitDiff;
        TaskIndex = "task.index" [read Viewer Task]: rq::ByTask => rs::TaskIndex;
        TaskStage = "task.stage" [write Member Task]: rq::TaskIndexChange => rs::TaskIndexChanged;
        TaskUnstage = "task.unstage" [write Member Task]: rq::TaskIndexChange => rs::TaskIndexChanged;
        TaskDiscard = "task.discard" [write Member Task]: rq::TaskIndexChange => rs::TaskIndexChanged;
        TaskAmend = "task.amend" [write Member Task]: rq::TaskAmend => rs::TaskAmended;
        RepositoryBranches = "repository.branches" [read Viewer Repository]: rq::ById => rs::Branches;
        RepositoryUsage = "repository.usage" [read Viewer Repository]: rq::ById => rs::RepositoryUsage;
        TaskGitStatus = "task.git_status" [read Viewer Task]: rq::ByTask => rs::TaskGitStatus;
        TaskRebase = "task.rebase" [write Member Task]: rq::TaskRebase => rs::TaskGitStatus;
        TaskMerge = "task.merge" [write Member Task]: rq::TaskMerge => rs::TaskMerged;
        TaskPush = "task.push" [write Member Task]: rq::TaskPush => rs::TaskPushed;
        TaskPrCreate = "task.pr.create" [write Member Task]: rq::TaskPrCreate => rs::TaskPullRequests;
        TaskPrGet = "task.pr.get" [read Viewer Task]: rq::ByTask => rs::TaskPullRequests;
        ReviewCommentAdd = "review.comment.add" [write Member Task]: rq::ReviewCommentAdd => rs::ReviewCommentOne;
        ReviewCommentList = "review.comment.list" [read Viewer Task]: rq::ByTask => rs::ReviewComments;
        ReviewCommentUpdate = "review.comment.update" [write Member ReviewComment]: rq::ReviewCommentUpdate => rs::ReviewCommentOne;
        ReviewCommentDelete = "review.comment.delete" [write Member ReviewComment]: rq::ById => rs::Deleted;
        ReviewThreadResolve = "review.thread.resolve" [write Member ReviewComment]: rq::ReviewThreadResolve => rs::ReviewCommentOne;
        ReviewSubmit = "review.submit" [write Member Task]: rq::ByTask => rs::ReviewSubmitted;
        DevServerStart = "devserver.start" [write Member Task]: rq::DevServerTarget => rs::DevServerOne;
        DevServerStop = "devserver.stop" [write Member Task]: rq::DevServerTarget => rs::DevServerOne;
        DevServerList = "devserver.list" [read Viewer Task]: rq::ByTask => rs::DevServers;
        TerminalOpen = "terminal.open" [write Admin Task]: rq::TerminalOpen => rs::TerminalOne;
        TerminalClose = "terminal.close" [write Admin Terminal]: rq::ByTerminal => rs::TerminalOne;
        TerminalList = "terminal.list" [read Viewer Task]: rq::ByTask => rs::Terminals;

        AgentKinds = "agent.kinds" [read Anyone Server]: rq::Empty => rs::AgentKinds;
        AgentVersions = "agent.versions" [read Admin Server]: rq::AgentVersionsQuery => rs::AgentVersions;
        AgentInstall = "agent.install" [write Admin Server]: rq::AgentInstall => rs::AgentInstalled;
        AgentUninstall = "agent.uninstall" [write Admin Server]: rq::AgentInstall => rs::AgentUninstalled;
        ProfileList = "agent.profile.list" [read Anyone Server]: rq::Page => rs::Profiles;
        ProfileCreate = "agent.profile.create" [write Admin Server]: rq::ProfileCreate => rs::ProfileSaved;
        ProfileUpdate = "agent.profile.update" [write Admin Server]: rq::ProfileUpdate => rs::ProfileSaved;
        ProfileDelete = "agent.profile.delete" [write Admin Server]: rq::ById => rs::Deleted;

        SessionLaunch = "session.launch" [write Member Task]: rq::SessionLaunch => rs::SessionOne;
        TaskSessionList = "task.session.list" [read Viewer Task]: rq::ByTask => rs::Sessions;
        SessionGet = "session.get" [read Viewer Session]: rq::ById => rs::SessionOne;
        SessionStop = "session.stop" [write Member Session]: rq::ById => rs::SessionOne;
        SessionDelete = "session.delete" [write Member Session]: rq::ById => rs::Deleted;
        SessionResume = "session.resume" [write Member Session]: rq::SessionResume => rs::SessionOne;
        SessionAuthenticate = "session.authenticate" [write Member Session]: rq::SessionAuthenticate => rs::SessionOne;
        SessionResetContext = "session.reset_context" [write Member Session]: rq::ById => rs::SessionOne;
        SessionSetMode = "session.set_mode" [write Member Session]: rq::SessionSetMode => rs::SessionOne;
        SessionSetConfigOption = "session.set_config_option" [write Member Session]: rq::SessionSetConfigOption => rs::SessionOne;
        SessionRename = "session.rename" [write Member Session]: rq::SessionRename => rs::SessionOne;
        SessionRebind = "session.rebind" [write Member Session]: rq::SessionRebind => rs::SessionOne;
        SessionSetPrimary = "session.set_primary" [write Member Session]: rq::ById => rs::TaskOne;
        SessionRetry = "session.retry" [write Member Session]: rq::ById => rs::MessageOne;
        AgentCancel = "agent.cancel" [write Member Session]: rq::BySession => rs::SessionOne;

        MessageAdd = "message.add" [write Member Session]: rq::MessageAdd => rs::MessageAdded;
        MessageList = "message.list" [read Viewer Session]: rq::MessageList => rs::Messages;
        TurnList = "session.turn.list" [read Viewer Session]: rq::BySession => rs::Turns;
        TurnCheckpointList = "turn.checkpoint.list" [read Viewer Session]: rq::BySession => rs::TurnCheckpoints;
        TaskAttemptCreate = "task.attempt.create" [write Member Task]: rq::TaskAttemptCreate => rs::Sessions;
        TaskAttemptList = "task.attempt.list" [read Viewer Task]: rq::TaskAttemptList => rs::TaskAttempts;
        TaskAttemptDiff = "task.attempt.diff" [read Viewer Task]: rq::TaskAttempt => rs::CommitDiff;
        TaskAttemptPick = "task.attempt.pick" [write Member Task]: rq::TaskAttempt => rs::AttemptPicked;
        TurnRevert = "turn.revert" [write Member Session]: rq::TurnRevert => rs::TurnReverted;
        TurnDiff = "turn.diff" [read Viewer Session]: rq::TurnDiff => rs::CommitDiff;
        QueueList = "message.queue.list" [read Viewer Session]: rq::BySession => rs::Queue;
        QueueAdd = "message.queue.add" [write Member Session]: rq::QueueAdd => rs::Queue;
        QueueUpdate = "message.queue.update" [write Member Session]: rq::QueueUpdate => rs::Queue;
        QueueRemove = "message.queue.remove" [write Member Session]: rq::QueueRemove => rs::Queue;
        QueueReorder = "message.queue.reorder" [write Member Session]: rq::QueueReorder => rs::Queue;
        QueueDrain = "message.queue.drain" [write Member Session]: rq::BySession => rs::Queue;
        QueueAutoRunSet = "message.queue.auto_run.set" [write Member Session]: rq::AutoRunSet => rs::Queue;
        PermissionRespond = "permission.respond" [write Member Session]: rq::PermissionRespond => rs::MessageOne;

        PromptList = "prompt.list" [read Viewer Workspace]: rq::ByWorkspace => rs::SavedPrompts;
        PromptCreate = "prompt.create" [write Member Workspace]: rq::PromptCreate => rs::SavedPromptOne;
        PromptUpdate = "prompt.update" [write Member SavedPrompt]: rq::PromptUpdate => rs::SavedPromptOne;
        PromptDelete = "prompt.delete" [write Member SavedPrompt]: rq::ById => rs::Deleted;

        IntakeSourceList = "intake.source.list" [read Admin Workspace]: rq::ByWorkspace => rs::IntakeSources;
        IntakeSourceCreate = "intake.source.create" [write Admin Workspace]: rq::IntakeSourceCreate => rs::IntakeSourceCreated;
        IntakeSourceUpdate = "intake.source.update" [write Admin IntakeSource]: rq::IntakeSourceUpdate => rs::IntakeSourceOne;
        IntakeSourceDelete = "intake.source.delete" [write Admin IntakeSource]: rq::ById => rs::Deleted;
        IntakeSourcePoll = "intake.source.poll" [write Admin IntakeSource]: rq::ById => rs::IntakePolled;
        ScheduleList = "schedule.list" [read Viewer Workspace]: rq::ByWorkspace => rs::Schedules;
        ScheduleCreate = "schedule.create" [write Admin Workspace]: rq::ScheduleCreate => rs::ScheduleOne;
        ScheduleUpdate = "schedule.update" [write Admin Schedule]: rq::ScheduleUpdate => rs::ScheduleOne;
        ScheduleDelete = "schedule.delete" [write Admin Schedule]: rq::ById => rs::Deleted;

        ExecutorList = "executor.list" [read Anyone Server]: rq::Empty => rs::Executors;
        ExecutorCreate = "executor.create" [write Admin Server]: rq::ExecutorCreate => rs::ExecutorOne;
        ExecutorUpdate = "executor.update" [write Admin Server]: rq::ExecutorUpdate => rs::ExecutorOne;
        ExecutorDelete = "executor.delete" [write Admin Server]: rq::ById => rs::Deleted;
        ExecutorCheck = "executor.check" [write Admin Server]: rq::ById => rs::ExecutorChecked;
        SystemDoctor = "system.doctor" [read Admin Server]: rq::Empty => rs::SystemHealth;
        RepositoryExecutorSet = "repository.executor.set" [write Admin Repository]: rq::RepositoryExecutorSet => rs::RepositoryExecutor;

        Search = "search" [read Viewer Workspace]: rq::Search => rs::SearchResults;
        QuestionList = "question.list" [read Viewer Session]: rq::BySession => rs::Questions;
        QuestionAnswer = "question.answer" [write Member Question]: rq::QuestionAnswer => rs::QuestionOne;

        NotificationList = "notification.list" [read Anyone Server]: rq::NotificationList => rs::NotificationRecords;
        ChannelCreate = "notification.channel.create" [write Admin Server]: rq::ChannelCreate => rs::ChannelOne;
        ChannelList = "notification.channel.list" [read Admin Server]: rq::Empty => rs::Channels;
        ChannelUpdate = "notification.channel.update" [write Admin Server]: rq::ChannelUpdate => rs::ChannelOne;
        ChannelDelete = "notification.channel.delete" [write Admin Server]: rq::ById => rs::Deleted;
        ChannelTest = "notification.channel.test" [write Admin Server]: rq::ById => rs::ChannelTested;
        DeliveryList = "notification.delivery.list" [read Admin Server]: rq::DeliveryList => rs::Deliveries;
        DeliveryRetry = "notification.delivery.retry" [write Admin Server]: rq::DeliveryRetry => rs::DeliveryOne;

        UserMe = "user.me" [read Anyone Server]: rq::Empty => rs::Me;
        TokenCreate = "user.token.create" [write Anyone Server]: rq::TokenCreate => rs::TokenCreated;
        TokenList = "user.token.list" [read Anyone Server]: rq::Empty => rs::Tokens;
        TokenRevoke = "user.token.revoke" [write Anyone Server]: rq::ById => rs::Deleted;
        PasswordSet = "user.password.set" [write Anyone Server]: rq::PasswordSet => rs::PasswordChanged;
        UserList = "user.list" [read Owner Server]: rq::Empty => rs::Users;
        UserCreate = "user.create" [write Owner Server]: rq::UserCreate => rs::UserOne;
        UserPasswordReset = "user.password.reset" [write Owner Server]: rq::UserPasswordReset => rs::UserOne;
        UserRemove = "user.remove" [write Owner Server]: rq::ByName => rs::Deleted;
        MemberList = "workspace.member.list" [read Viewer Workspace]: rq::ByWorkspace => rs::Members;
        MemberSet = "workspace.member.set" [write Admin Workspace]: rq::MemberSet => rs::Members;
        MemberRemove = "workspace.member.remove" [write Admin Workspace]: rq::MemberRemove => rs::Members;
        AuditList = "audit.list" [read Admin Server]: rq::AuditList => rs::AuditEntries;
        SecretList = "secret.list" [read Admin Workspace]: rq::SecretList => rs::Secrets;
        SecretSet = "secret.set" [write Admin Workspace]: rq::SecretSet => rs::SecretOne;
        SecretRemove = "secret.remove" [write Admin Workspace]: rq::SecretRemove => rs::Deleted;
        SecretKeyRotate = "secret.key.rotate" [write Owner Server]: rq::Empty => rs::SecretKeyRotated;
    }
    socket {
        Subscribe = "subscribe" [read Anyone Server]: rq::Subscribe => rs::Subscribed;
        Unsubscribe = "unsubscribe" [read Anyone Server]: rq::Unsubscribe => rs::Unsubscribed;
        TerminalAttach = "terminal.attach" [read Viewer Terminal]: rq::ByTerminal => rs::TerminalOne;
        TerminalDetach = "terminal.detach" [read Anyone Server]: rq::ByTerminal => rs::TerminalOne;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_socket_actions_are_not_routed() {
        let mut names = NAMES.to_vec();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), NAMES.len(), "an action is declared twice");
        struct Name;
        impl<A: Action> Route<A> for Name {
            type Output = &'static str;
            fn route(self) -> &'static str {
                A::NAME
            }
        }
        for name in NAMES {
            let routed = route(name, Name);
            if SOCKET_ONLY.contains(name) {
                assert_eq!(routed, None, "{name}");
            } else {
                assert_eq!(routed, Some(*name), "{name} routes to another action");
            }
        }
        assert_eq!(route("no.such.action", Name), None);
    }
}
