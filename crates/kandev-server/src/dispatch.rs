//! Dispatch: both transports (HTTP and WebSocket) call [`dispatch`], which routes by the
//! action table of `kandev_api_types::actions` to the handler bound below. The table declares
//! each action once (name, request, response); a handler is bound to its action's type, so an
//! action without a handler, or a handler with the wrong request or response type, does not
//! compile.

use std::future::Future;
use std::pin::Pin;

use kandev_api_types::access::Subjects;
use kandev_api_types::actions::{self, Action, Route};
use kandev_domain::account::Actor;
use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::accounts::{self, Identity};
use crate::board_cache::BoardKey;
use crate::handlers::{
    agent_auth, attempts, executor, files, git, intake, notify, profile, prompt, question,
    repository, search, secrets, session, ship, system, task, teams, terminal, turns, workflow,
    workspace,
};
use crate::{ApiError, AppState, roles};

/// Runs `action` with its JSON payload and returns the JSON result.
pub async fn dispatch(
    state: &AppState,
    identity: &Identity,
    action: &str,
    payload: Value,
) -> Result<Box<RawValue>, ApiError> {
    if let Some(run) = actions::route(action, Call { state, identity, payload }) {
        return run.await;
    }
    if actions::SOCKET_ONLY.contains(&action) {
        return Err(ApiError::bad_request(format!(
            "{action} needs the WebSocket endpoint /ws (it acts on the connection)"
        )));
    }
    Err(unknown_action(action))
}

/// An action's handler: takes the decoded request (and who sent it), answers the typed
/// response.
pub(crate) trait Handler: Action {
    fn handle<'a>(
        state: &'a AppState,
        identity: &'a Identity,
        request: Self::Request,
    ) -> impl Future<Output = Result<Self::Response, ApiError>> + Send + 'a;

    /// For an action whose answer the server keeps while the board cards do not change
    /// (`task.list`, see `board_cache.rs`): what identifies the answer. Others keep none.
    fn board_key(_request: &Self::Request) -> Option<BoardKey> {
        None
    }
}

/// `task.list`, whose answers are kept (`board_cache.rs`).
impl Handler for actions::TaskList {
    fn handle<'a>(
        state: &'a AppState,
        _identity: &'a Identity,
        request: Self::Request,
    ) -> impl Future<Output = Result<Self::Response, ApiError>> + Send + 'a {
        task::list(state, request)
    }

    fn board_key(request: &Self::Request) -> Option<BoardKey> {
        Some(BoardKey::from(request))
    }
}

/// Binds each action of the table to its handler. Handlers in `by_caller` also take the
/// caller's [`Identity`]: those that record `by` (issue 21) or act on the caller's account.
macro_rules! handlers {
    (
        plain { $($action:ident => $handler:path,)* }
        by_caller { $($baction:ident => $bhandler:path,)* }
    ) => {
        $(
            impl Handler for actions::$action {
                fn handle<'a>(
                    state: &'a AppState,
                    _identity: &'a Identity,
                    request: Self::Request,
                ) -> impl Future<Output = Result<Self::Response, ApiError>> + Send + 'a {
                    $handler(state, request)
                }
            }
        )*
        $(
            impl Handler for actions::$baction {
                fn handle<'a>(
                    state: &'a AppState,
                    identity: &'a Identity,
                    request: Self::Request,
                ) -> impl Future<Output = Result<Self::Response, ApiError>> + Send + 'a {
                    $bhandler(state, identity, request)
                }
            }
        )*
    };
}

handlers! {
    plain {
    WorkspaceGet => workspace::get,
    WorkspaceUpdate => workspace::update,
    WorkspaceDelete => workspace::delete,
    RepositoryList => repository::list,
    RepositoryCreate => repository::create,
    RepositoryGet => repository::get,
    RepositoryUpdate => repository::update,
    RepositoryDelete => repository::delete,
    WorkflowTemplateList => workflow::template_list,
    WorkflowCreate => workflow::create,
    WorkflowList => workflow::list,
    WorkflowGet => workflow::get,
    WorkflowUpdate => workflow::update,
    WorkflowDelete => workflow::delete,
    WorkflowExport => workflow::export,
    WorkflowImport => workflow::import,
    StepCreate => workflow::step_create,
    StepUpdate => workflow::step_update,
    StepDelete => workflow::step_delete,
    StepReorder => workflow::step_reorder,
    TaskGet => task::get,
    TaskNeedsYou => task::needs_you,
    TaskUpdate => task::update,
    TaskArchive => task::archive,
    TaskUnarchive => task::unarchive,
    TaskDelete => task::delete,
    TaskChanges => files::changes,
    TaskTree => files::tree,
    TaskFileRead => files::read,
    FileViewedSet => files::set_viewed,
    TaskCommit => files::commit,
    TaskCommits => git::commits,
    TaskCommitDiff => git::commit_diff,
    TaskIndex => git::index,
    TaskStage => git::stage,
    TaskUnstage => git::unstage,
    TaskDiscard => git::discard,
    TaskAmend => git::amend,
    RepositoryBranches => ship::branches,
    RepositoryUsage => ship::usage,
    TaskGitStatus => ship::git_status,
    TaskRebase => ship::rebase,
    TaskPrGet => ship::pr_get,
    ReviewCommentAdd => ship::comment_add,
    ReviewCommentList => ship::comment_list,
    ReviewCommentUpdate => ship::comment_update,
    ReviewCommentDelete => ship::comment_delete,
    ReviewThreadResolve => ship::thread_resolve,
    ReviewSubmit => ship::submit,
    DevServerStart => terminal::dev_server_start,
    DevServerStop => terminal::dev_server_stop,
    DevServerList => terminal::dev_server_list,
    TerminalOpen => terminal::open,
    TerminalClose => terminal::close,
    TerminalList => terminal::list,
    AgentKinds => profile::kinds,
    AgentVersions => profile::versions,
    AgentInstall => profile::install,
    AgentUninstall => profile::uninstall,
    ProfileList => profile::list,
    ProfileCreate => profile::create,
    ProfileUpdate => profile::update,
    ProfileDelete => profile::delete,
    TaskSessionList => session::list,
    SessionGet => session::get,
    SessionStop => session::stop,
    SessionDelete => session::delete,
    SessionResume => session::resume,
    SessionAuthenticate => agent_auth::authenticate,
    SessionResetContext => session::reset_context,
    SessionSetMode => session::set_mode,
    SessionSetConfigOption => session::set_config_option,
    SessionRename => session::rename,
    SessionRebind => session::rebind,
    SessionSetPrimary => session::set_primary,
    SessionRetry => session::retry,
    AgentCancel => session::cancel,
    MessageAdd => session::message_add,
    TurnList => session::turn_list,
    TurnCheckpointList => turns::checkpoint_list,
    TaskAttemptList => attempts::list,
    TaskAttemptDiff => attempts::diff,
    TaskAttemptPick => attempts::pick,
    TurnRevert => turns::revert,
    TurnDiff => turns::diff,
    ChannelCreate => notify::channel_create,
    ChannelList => notify::channel_list,
    ChannelUpdate => notify::channel_update,
    ChannelDelete => notify::channel_delete,
    ChannelTest => notify::channel_test,
    DeliveryList => notify::delivery_list,
    DeliveryRetry => notify::delivery_retry,
    MessageList => session::message_list,
    Search => search::search,
    ExecutorList => executor::list,
    ExecutorCreate => executor::create,
    ExecutorUpdate => executor::update,
    ExecutorDelete => executor::delete,
    ExecutorCheck => executor::check,
    SystemDoctor => system::doctor,
    RepositoryExecutorSet => executor::set_for_repository,
    PromptList => prompt::list,
    PromptCreate => prompt::create,
    PromptUpdate => prompt::update,
    PromptDelete => prompt::delete,

    IntakeSourceList => intake::list_sources,
    IntakeSourceCreate => intake::create_source,
    IntakeSourceUpdate => intake::update_source,
    IntakeSourceDelete => intake::delete_source,
    IntakeSourcePoll => intake::poll_source,
    ScheduleList => intake::list_schedules,
    ScheduleCreate => intake::create_schedule,
    ScheduleUpdate => intake::update_schedule,
    ScheduleDelete => intake::delete_schedule,
    QueueList => session::queue_list,
    QueueAdd => session::queue_add,
    QueueUpdate => session::queue_update,
    QueueRemove => session::queue_remove,
    QueueReorder => session::queue_reorder,
    QueueDrain => session::queue_drain,
    QueueAutoRunSet => session::auto_run_set,
    QuestionList => question::list,
    MemberList => teams::member_list,
    UserList => teams::user_list,
    UserCreate => teams::user_create,
    UserPasswordReset => teams::user_password_reset,
    UserRemove => teams::user_remove,
    SecretList => secrets::list,
    SecretKeyRotate => secrets::rotate,
    }
    by_caller {
        WorkspaceList => workspace::list,
        WorkspaceCreate => workspace::create,
        NotificationList => notify::list,
        AuditList => teams::audit_list,
        MemberSet => teams::member_set,
        MemberRemove => teams::member_remove,
        SecretSet => secrets::set,
        SecretRemove => secrets::remove,
        TaskCreate => task::create,
        SessionLaunch => session::launch,
        TaskAttemptCreate => attempts::create,
        TaskMove => task::move_task,
        TaskMerge => ship::merge,
        TaskPush => ship::push,
        TaskPrCreate => ship::pr_create,
        PermissionRespond => session::permission_respond,
        QuestionAnswer => question::answer,
        UserMe => accounts::me,
        TokenCreate => accounts::token_create,
        TokenList => accounts::token_list,
        TokenRevoke => accounts::token_revoke,
        PasswordSet => accounts::password_set,
    }
}

/// One call on its way to its action's handler.
struct Call<'a> {
    state: &'a AppState,
    identity: &'a Identity,
    payload: Value,
}

impl<'a, A: Handler> Route<A> for Call<'a> {
    type Output = Pin<Box<dyn Future<Output = Result<Box<RawValue>, ApiError>> + Send + 'a>>;

    fn route(self) -> Self::Output {
        Box::pin(async move {
            let grants = roles::grants(self.state, self.identity).await?;
            roles::precheck(&grants, A::ACCESS)?;
            let request = decode::<A::Request>(self.payload)?;
            let workspace =
                roles::check_subjects(self.state, &grants, A::ACCESS, &request.subjects()).await?;
            let target = request.target().map(str::to_owned);
            // Read before the handler reads the store: an answer is kept only as true as
            // the cards were at this version (`board_cache.rs`).
            let kept = A::board_key(&request).map(|key| (key, self.state.store().cards_version()));
            if let Some((key, version)) = &kept
                && let Some(answer) = self.state.board_cache().get(key, *version)
            {
                return Ok(answer);
            }
            let response = A::handle(self.state, self.identity, request).await?;
            record::<A>(self.state, self.identity, workspace.as_deref(), target.as_deref()).await;
            // Straight to JSON text, once: a board of 2,000 cards is 600 KB, and building a
            // `Value` of it first cost as much again as writing it (issue 15, P3).
            let answer = serde_json::value::to_raw_value(&response).map_err(|err| {
                tracing::error!(action = A::NAME, error = %err, "cannot serialize a response");
                ApiError::internal()
            })?;
            if let Some((key, version)) = kept {
                self.state.board_cache().put(key, version, &answer);
            }
            Ok(answer)
        })
    }
}

/// Records a write action in the audit log (issue 49), on a server with accounts or a token
/// (a server without either has one person, `user`, and keeps none). After the action
/// succeeded, in its own transaction: a failure to record is logged, and the action stands.
pub(crate) async fn record<A: Action>(
    state: &AppState,
    identity: &Identity,
    workspace: Option<&str>,
    target: Option<&str>,
) {
    if !A::ACCESS.writes || identity.actor == Actor::Local {
        return;
    }
    let by = identity.by();
    if let Err(err) = state.engine().audit(&by, A::NAME, workspace, target).await {
        tracing::error!(action = A::NAME, error = %err, "cannot record an action in the audit log");
    }
}

fn unknown_action(action: &str) -> ApiError {
    let shown: String = action.chars().take(80).collect();
    ApiError::new(
        kandev_api_types::ErrorCode::UnknownAction,
        format!("unknown action `{shown}`; see the API reference in docs/api.md"),
    )
}

/// Decodes a payload into its request type; `null` counts as `{}`. Errors name the field.
pub fn decode<T: DeserializeOwned>(payload: Value) -> Result<T, ApiError> {
    let payload = if payload.is_null() { Value::Object(Default::default()) } else { payload };
    serde_path_to_error::deserialize(payload).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner().to_string();
        let message = if path == "." { inner } else { format!("{path}: {inner}") };
        ApiError::validation(message).with_details(serde_json::json!({ "path": path }))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kandev_api_types::requests::{Empty, Page, WorkspaceCreate};

    #[test]
    fn decode_names_the_offending_field() {
        let err = decode::<WorkspaceCreate>(serde_json::json!({"name": 5})).unwrap_err();
        assert_eq!(err.code, kandev_api_types::ErrorCode::ValidationError);
        assert!(err.message.starts_with("name: invalid type: integer"), "{}", err.message);
        let err = decode::<WorkspaceCreate>(serde_json::json!({})).unwrap_err();
        assert_eq!(err.message, "missing field `name`");
    }

    /// Issue 13: `ListAll` flattened `Page` under `deny_unknown_fields`, which serde does not
    /// support; a list payload is now `Page` itself. Unknown fields are refused and a wrong
    /// field is named (through the flatten, the error said only "invalid type").
    #[test]
    fn i13_list_requests_refuse_unknown_fields_and_name_the_wrong_one() {
        let err = decode::<Page>(serde_json::json!({"limti": 5})).unwrap_err();
        assert_eq!(err.code, kandev_api_types::ErrorCode::ValidationError);
        assert!(err.message.contains("unknown field `limti`"), "{}", err.message);
        let err = decode::<Page>(serde_json::json!({"limit": "x"})).unwrap_err();
        assert!(err.message.starts_with("limit: invalid type: string"), "{}", err.message);
        assert!(decode::<Page>(serde_json::json!({"limit": 5, "cursor": "10"})).is_ok());
        let err = decode::<Empty>(serde_json::json!({"limit": 5})).unwrap_err();
        assert!(err.message.contains("unknown field `limit`"), "{}", err.message);
        assert!(decode::<Empty>(Value::Null).is_ok());
    }
}
