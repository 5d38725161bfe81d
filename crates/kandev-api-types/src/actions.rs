//! The action table: every action of api.md declared once, with its name, its request type
//! and its response type. The server's dispatch is generated from it ([`route`]: a handler
//! missing for an action is a compile error there), the web client's `Actions` map is
//! generated from it ([`typescript`]), and docs/api.md is checked against it ([`NAMES`], by
//! `crates/kandev/tests/tidy.rs`).

use serde::Serialize;
use serde::de::DeserializeOwned;
use ts_rs::{Config, TS, TypeVisitor};

use crate::requests as rq;
use crate::responses as rs;

/// One action: `NAME` is what clients send (`POST /api/v1/<NAME>`, or a WebSocket request's
/// `action`), `Request` the payload it takes, `Response` what a success answers.
pub trait Action {
    const NAME: &'static str;
    type Request: DeserializeOwned + Serialize + TS + Send + 'static;
    type Response: DeserializeOwned + Serialize + TS + Send + 'static;
}

/// What [`route`] hands an action to: the server implements it for every action it handles
/// (`impl<A: Handler> Route<A> for Call`), and [`route`] requires it for every action of the
/// table.
pub trait Route<A: Action> {
    type Output;
    fn route(self) -> Self::Output;
}

/// Declares the table. `http` actions are served by both transports, `socket` actions by the
/// WebSocket only (they act on the connection's subscriptions).
macro_rules! actions {
    (
        http { $($name:ident = $wire:literal : $request:ty => $response:ty;)* }
        socket { $($sname:ident = $swire:literal : $srequest:ty => $sresponse:ty;)* }
    ) => {
        $(
            #[doc = concat!("`", $wire, "`")]
            #[derive(Debug, Clone, Copy)]
            pub struct $name;

            impl Action for $name {
                const NAME: &'static str = $wire;
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
                type Request = $srequest;
                type Response = $sresponse;
            }
        )*

        /// Every action's name, in table order (WebSocket-only actions last).
        pub const NAMES: &[&str] = &[$($wire,)* $($swire,)*];

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

fn entry(name: &str, request: &str, response: &str) -> String {
    format!("  \"{name}\": {{ request: {request}, response: {response} }},\n")
}

actions! {
    http {
        WorkspaceList = "workspace.list": rq::Page => rs::Workspaces;
        WorkspaceCreate = "workspace.create": rq::WorkspaceCreate => rs::WorkspaceOne;
        WorkspaceGet = "workspace.get": rq::ById => rs::WorkspaceOne;
        WorkspaceUpdate = "workspace.update": rq::WorkspaceUpdate => rs::WorkspaceOne;
        WorkspaceDelete = "workspace.delete": rq::ById => rs::Deleted;

        RepositoryList = "repository.list": rq::ByWorkspace => rs::Repositories;
        RepositoryCreate = "repository.create": rq::RepositoryCreate => rs::RepositoryOne;
        RepositoryGet = "repository.get": rq::ById => rs::RepositoryOne;
        RepositoryUpdate = "repository.update": rq::RepositoryUpdate => rs::RepositoryOne;
        RepositoryDelete = "repository.delete": rq::ById => rs::Deleted;

        WorkflowTemplateList = "workflow.template.list": rq::Empty => rs::WorkflowTemplates;
        WorkflowCreate = "workflow.create": rq::WorkflowCreate => rs::WorkflowOne;
        WorkflowList = "workflow.list": rq::ByWorkspace => rs::Workflows;
        WorkflowGet = "workflow.get": rq::ById => rs::WorkflowOne;
        WorkflowUpdate = "workflow.update": rq::WorkflowUpdate => rs::WorkflowOne;
        WorkflowDelete = "workflow.delete": rq::ById => rs::Deleted;
        WorkflowExport = "workflow.export": rq::WorkflowExport => rs::WorkflowYaml;
        WorkflowImport = "workflow.import": rq::WorkflowImport => rs::WorkflowsImported;
        StepCreate = "workflow.step.create": rq::StepCreate => rs::WorkflowOne;
        StepUpdate = "workflow.step.update": rq::StepUpdate => rs::WorkflowOne;
        StepDelete = "workflow.step.delete": rq::ById => rs::WorkflowOne;
        StepReorder = "workflow.step.reorder": rq::StepReorder => rs::WorkflowOne;

        TaskCreate = "task.create": rq::TaskCreate => rs::TaskCreated;
        TaskList = "task.list": rq::TaskList => rs::Tasks;
        TaskNeedsYou = "task.needs_you": rq::ByWorkspace => rs::TasksNeedingYou;
        TaskGet = "task.get": rq::ById => rs::TaskOne;
        TaskUpdate = "task.update": rq::TaskUpdate => rs::TaskOne;
        TaskMove = "task.move": rq::TaskMove => rs::TaskMoved;
        TaskArchive = "task.archive": rq::TaskRemove => rs::TaskArchived;
        TaskUnarchive = "task.unarchive": rq::ById => rs::TaskOne;
        TaskDelete = "task.delete": rq::TaskRemove => rs::TaskDeleted;
        TaskChanges = "task.changes": rq::ByTask => rs::TaskChanges;
        TaskTree = "task.tree": rq::ByTask => rs::TaskTree;
        TaskFileRead = "task.file.read": rq::TaskFileRead => crate::FileContentDto;
        FileViewedSet = "task.file.viewed.set": rq::FileViewedSet => rs::FileViewed;
        TaskCommit = "task.commit": rq::TaskCommit => rs::TaskCommitted;
        TaskCommits = "task.commits": rq::ByTask => rs::TaskCommits;
        TaskCommitDiff = "task.commit.diff": rq::TaskCommitDiff => rs::CommitDiff;
        TaskIndex = "task.index": rq::ByTask => rs::TaskIndex;
        TaskStage = "task.stage": rq::TaskIndexChange => rs::TaskIndexChanged;
        TaskUnstage = "task.unstage": rq::TaskIndexChange => rs::TaskIndexChanged;
        TaskDiscard = "task.discard": rq::TaskIndexChange => rs::TaskIndexChanged;
        TaskAmend = "task.amend": rq::TaskAmend => rs::TaskAmended;
        RepositoryBranches = "repository.branches": rq::ById => rs::Branches;
        RepositoryUsage = "repository.usage": rq::ById => rs::RepositoryUsage;
        TaskGitStatus = "task.git_status": rq::ByTask => rs::TaskGitStatus;
        TaskRebase = "task.rebase": rq::TaskRebase => rs::TaskGitStatus;
        TaskMerge = "task.merge": rq::TaskMerge => rs::TaskMerged;
        TaskPush = "task.push": rq::TaskPush => rs::TaskPushed;
        TaskPrCreate = "task.pr.create": rq::TaskPrCreate => rs::TaskPullRequests;
        TaskPrGet = "task.pr.get": rq::ByTask => rs::TaskPullRequests;
        ReviewCommentAdd = "review.comment.add": rq::ReviewCommentAdd => rs::ReviewCommentOne;
        ReviewCommentList = "review.comment.list": rq::ByTask => rs::ReviewComments;
        ReviewCommentUpdate = "review.comment.update": rq::ReviewCommentUpdate => rs::ReviewCommentOne;
        ReviewCommentDelete = "review.comment.delete": rq::ById => rs::Deleted;
        ReviewThreadResolve = "review.thread.resolve": rq::ReviewThreadResolve => rs::ReviewCommentOne;
        ReviewSubmit = "review.submit": rq::ByTask => rs::ReviewSubmitted;
        DevServerStart = "devserver.start": rq::DevServerTarget => rs::DevServerOne;
        DevServerStop = "devserver.stop": rq::DevServerTarget => rs::DevServerOne;
        DevServerList = "devserver.list": rq::ByTask => rs::DevServers;
        TerminalOpen = "terminal.open": rq::TerminalOpen => rs::TerminalOne;
        TerminalClose = "terminal.close": rq::ByTerminal => rs::TerminalOne;
        TerminalList = "terminal.list": rq::ByTask => rs::Terminals;

        AgentKinds = "agent.kinds": rq::Empty => rs::AgentKinds;
        ProfileList = "agent.profile.list": rq::Page => rs::Profiles;
        ProfileCreate = "agent.profile.create": rq::ProfileCreate => rs::ProfileSaved;
        ProfileUpdate = "agent.profile.update": rq::ProfileUpdate => rs::ProfileSaved;
        ProfileDelete = "agent.profile.delete": rq::ById => rs::Deleted;

        SessionLaunch = "session.launch": rq::SessionLaunch => rs::SessionOne;
        TaskSessionList = "task.session.list": rq::ByTask => rs::Sessions;
        SessionGet = "session.get": rq::ById => rs::SessionOne;
        SessionStop = "session.stop": rq::ById => rs::SessionOne;
        SessionDelete = "session.delete": rq::ById => rs::Deleted;
        SessionResume = "session.resume": rq::SessionResume => rs::SessionOne;
        SessionAuthenticate = "session.authenticate": rq::SessionAuthenticate => rs::SessionOne;
        SessionResetContext = "session.reset_context": rq::ById => rs::SessionOne;
        SessionSetMode = "session.set_mode": rq::SessionSetMode => rs::SessionOne;
        SessionSetConfigOption = "session.set_config_option": rq::SessionSetConfigOption => rs::SessionOne;
        SessionRename = "session.rename": rq::SessionRename => rs::SessionOne;
        SessionSetPrimary = "session.set_primary": rq::ById => rs::TaskOne;
        SessionRetry = "session.retry": rq::ById => rs::MessageOne;
        AgentCancel = "agent.cancel": rq::BySession => rs::SessionOne;

        MessageAdd = "message.add": rq::MessageAdd => rs::MessageAdded;
        MessageList = "message.list": rq::MessageList => rs::Messages;
        TurnList = "session.turn.list": rq::BySession => rs::Turns;
        TurnCheckpointList = "turn.checkpoint.list": rq::BySession => rs::TurnCheckpoints;
        TaskAttemptCreate = "task.attempt.create": rq::TaskAttemptCreate => rs::Sessions;
        TaskAttemptList = "task.attempt.list": rq::TaskAttemptList => rs::TaskAttempts;
        TaskAttemptDiff = "task.attempt.diff": rq::TaskAttempt => rs::CommitDiff;
        TaskAttemptPick = "task.attempt.pick": rq::TaskAttempt => rs::AttemptPicked;
        TurnRevert = "turn.revert": rq::TurnRevert => rs::TurnReverted;
        TurnDiff = "turn.diff": rq::TurnDiff => rs::CommitDiff;
        QueueList = "message.queue.list": rq::BySession => rs::Queue;
        QueueAdd = "message.queue.add": rq::QueueAdd => rs::Queue;
        QueueUpdate = "message.queue.update": rq::QueueUpdate => rs::Queue;
        QueueRemove = "message.queue.remove": rq::QueueRemove => rs::Queue;
        QueueReorder = "message.queue.reorder": rq::QueueReorder => rs::Queue;
        QueueDrain = "message.queue.drain": rq::BySession => rs::Queue;
        QueueAutoRunSet = "message.queue.auto_run.set": rq::AutoRunSet => rs::Queue;
        PermissionRespond = "permission.respond": rq::PermissionRespond => rs::MessageOne;

        PromptList = "prompt.list": rq::ByWorkspace => rs::SavedPrompts;
        PromptCreate = "prompt.create": rq::PromptCreate => rs::SavedPromptOne;
        PromptUpdate = "prompt.update": rq::PromptUpdate => rs::SavedPromptOne;
        PromptDelete = "prompt.delete": rq::ById => rs::Deleted;

        IntakeSourceList = "intake.source.list": rq::ByWorkspace => rs::IntakeSources;
        IntakeSourceCreate = "intake.source.create": rq::IntakeSourceCreate => rs::IntakeSourceCreated;
        IntakeSourceUpdate = "intake.source.update": rq::IntakeSourceUpdate => rs::IntakeSourceOne;
        IntakeSourceDelete = "intake.source.delete": rq::ById => rs::Deleted;
        IntakeSourcePoll = "intake.source.poll": rq::ById => rs::IntakePolled;
        ScheduleList = "schedule.list": rq::ByWorkspace => rs::Schedules;
        ScheduleCreate = "schedule.create": rq::ScheduleCreate => rs::ScheduleOne;
        ScheduleUpdate = "schedule.update": rq::ScheduleUpdate => rs::ScheduleOne;
        ScheduleDelete = "schedule.delete": rq::ById => rs::Deleted;

        ExecutorList = "executor.list": rq::Empty => rs::Executors;
        ExecutorCreate = "executor.create": rq::ExecutorCreate => rs::ExecutorOne;
        ExecutorUpdate = "executor.update": rq::ExecutorUpdate => rs::ExecutorOne;
        ExecutorDelete = "executor.delete": rq::ById => rs::Deleted;
        ExecutorCheck = "executor.check": rq::ById => rs::ExecutorChecked;
        SystemDoctor = "system.doctor": rq::Empty => rs::SystemHealth;
        RepositoryExecutorSet = "repository.executor.set": rq::RepositoryExecutorSet => rs::RepositoryExecutor;

        Search = "search": rq::Search => rs::SearchResults;
        QuestionList = "question.list": rq::BySession => rs::Questions;
        QuestionAnswer = "question.answer": rq::QuestionAnswer => rs::QuestionOne;

        NotificationList = "notification.list": rq::NotificationList => rs::NotificationRecords;
        ChannelCreate = "notification.channel.create": rq::ChannelCreate => rs::ChannelOne;
        ChannelList = "notification.channel.list": rq::Empty => rs::Channels;
        ChannelUpdate = "notification.channel.update": rq::ChannelUpdate => rs::ChannelOne;
        ChannelDelete = "notification.channel.delete": rq::ById => rs::Deleted;
        ChannelTest = "notification.channel.test": rq::ById => rs::ChannelTested;
        DeliveryList = "notification.delivery.list": rq::DeliveryList => rs::Deliveries;
        DeliveryRetry = "notification.delivery.retry": rq::DeliveryRetry => rs::DeliveryOne;

        UserMe = "user.me": rq::Empty => rs::Me;
        TokenCreate = "user.token.create": rq::TokenCreate => rs::TokenCreated;
        TokenList = "user.token.list": rq::Empty => rs::Tokens;
        TokenRevoke = "user.token.revoke": rq::ById => rs::Deleted;
        PasswordSet = "user.password.set": rq::PasswordSet => rs::PasswordChanged;
    }
    socket {
        Subscribe = "subscribe": rq::Subscribe => rs::Subscribed;
        Unsubscribe = "unsubscribe": rq::Unsubscribe => rs::Unsubscribed;
        TerminalAttach = "terminal.attach": rq::ByTerminal => rs::TerminalOne;
        TerminalDetach = "terminal.detach": rq::ByTerminal => rs::TerminalOne;
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
