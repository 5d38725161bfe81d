//! Roles (issue 49): what a caller may do, checked once for every action of the table before
//! its handler runs, whichever transport carried it (`dispatch.rs`) and for the MCP tools
//! (`mcp/tools.rs`).
//!
//! A caller's [`Grants`]: everything for the server's owner, the server token and a server
//! without accounts; otherwise a role per workspace the user belongs to. An agent acts with
//! the rights of the user who started its session, in its own workspace only, and with a
//! workspace admin's when no user started it (a workflow trigger, a schedule or intake: the
//! workflow's owner). An action's [`Access`] names the role it needs and the object whose
//! workspace it is checked in; a caller who is not a member of that workspace is answered as
//! if the object did not exist.

use std::collections::HashMap;

use kandev_api_types::access::{Access, Need, Subject, Subjects};
use kandev_api_types::actions::Action;
use kandev_domain::account::{Actor, Role};
use kandev_domain::{RepositoryId, SessionId, StepId, TaskId, WorkflowId};
use kandev_store::StoreError;

use crate::accounts::Identity;
use crate::{ApiError, AppState};

/// The rights an agent's MCP calls act with: its session's workspace, and the user who
/// started the session (`None`: a trigger, a schedule or intake).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentRights {
    pub workspace_id: String,
    pub started_by: Option<String>,
}

/// What a caller may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grants {
    /// Every action in every workspace.
    All,
    /// A role in each workspace the caller belongs to.
    Roles(HashMap<String, Role>),
}

impl Grants {
    /// The caller's role in `workspace_id` (`Admin` for [`Grants::All`]).
    pub fn role_in(&self, workspace_id: &str) -> Option<Role> {
        match self {
            Grants::All => Some(Role::Admin),
            Grants::Roles(roles) => roles.get(workspace_id).copied(),
        }
    }

    /// Whether the caller may see workspace `workspace_id`.
    pub fn sees(&self, workspace_id: &str) -> bool {
        self.role_in(workspace_id).is_some()
    }

    /// The workspaces the caller sees; `None`: all of them.
    pub fn workspaces(&self) -> Option<Vec<String>> {
        match self {
            Grants::All => None,
            Grants::Roles(roles) => Some(roles.keys().cloned().collect()),
        }
    }

    /// The workspaces where the caller is at least `role`; `None`: all of them.
    pub fn workspaces_with(&self, role: Role) -> Option<Vec<String>> {
        match self {
            Grants::All => None,
            Grants::Roles(roles) => {
                Some(roles.iter().filter(|(_, r)| **r >= role).map(|(w, _)| w.clone()).collect())
            }
        }
    }

    fn highest(&self) -> Option<Role> {
        match self {
            Grants::All => Some(Role::Admin),
            Grants::Roles(roles) => roles.values().copied().max(),
        }
    }
}

/// The role a need asks for (`None`: anyone let in, or the owner only).
fn needed_role(need: Need) -> Option<Role> {
    match need {
        Need::Viewer => Some(Role::Viewer),
        Need::Member => Some(Role::Member),
        Need::Admin => Some(Role::Admin),
        Need::Anyone | Need::Owner => None,
    }
}

/// What `identity` may do, read now (a role changed a moment ago counts).
pub async fn grants(state: &AppState, identity: &Identity) -> Result<Grants, ApiError> {
    if let Some(agent) = &identity.agent {
        return agent_grants(state, agent).await;
    }
    match &identity.actor {
        Actor::Local | Actor::ServerToken | Actor::Agent => Ok(Grants::All),
        Actor::User { id, .. } => user_grants(state, id).await,
    }
}

async fn user_grants(state: &AppState, user_id: &str) -> Result<Grants, ApiError> {
    match state.store().get_user(user_id).await? {
        Some(user) if user.owner => Ok(Grants::All),
        Some(_) => {
            Ok(Grants::Roles(state.store().user_roles(user_id).await?.into_iter().collect()))
        }
        None => Ok(Grants::Roles(HashMap::new())),
    }
}

/// An agent's rights: in its own workspace, its starter's role there (`Admin` when no user
/// started it), never more; nothing elsewhere.
async fn agent_grants(state: &AppState, agent: &AgentRights) -> Result<Grants, ApiError> {
    let role = match &agent.started_by {
        None => Some(Role::Admin),
        Some(user_id) => user_grants(state, user_id).await?.role_in(&agent.workspace_id),
    };
    Ok(Grants::Roles(role.map(|r| (agent.workspace_id.clone(), r)).into_iter().collect()))
}

/// The user a session started by `identity` acts for (issue 49): a user, or the user an
/// agent acts for; `None` for the server token, a server without users, or an agent no user
/// started.
pub fn starter(identity: &Identity) -> Option<String> {
    match (&identity.actor, &identity.agent) {
        (_, Some(agent)) => agent.started_by.clone(),
        (Actor::User { id, .. }, None) => Some(id.clone()),
        _ => None,
    }
}

/// The first half of the check, before the request is read: whether the caller's highest
/// role (any workspace's) meets the action's need at all. A refusal here needs no valid
/// payload, so every action of the table can be checked with an empty one.
pub fn precheck(grants: &Grants, access: Access) -> Result<(), ApiError> {
    if *grants == Grants::All {
        return Ok(());
    }
    let role = match access.need {
        Need::Anyone => return Ok(()),
        Need::Owner => {
            return Err(ApiError::forbidden(
                "only the server's owner can do this: ask them (`kandev user list` names them)",
            ));
        }
        need => needed_role(need).unwrap_or(Role::Admin),
    };
    refuse_below(grants.highest(), role, false)
}

/// Refuses `have` below `need`: `there` when `have` is the caller's role in the object's
/// workspace, else their highest in any workspace (the first half of the check, which names
/// no object).
fn refuse_below(have: Option<Role>, need: Role, there: bool) -> Result<(), ApiError> {
    match have {
        Some(have) if have >= need => Ok(()),
        Some(have) if there => Err(ApiError::forbidden(format!(
            "this needs the {} role in the workspace; you are a {} there: ask an admin of the \
             workspace",
            need.as_str(),
            have.as_str(),
        ))),
        Some(have) => Err(ApiError::forbidden(format!(
            "this needs the {} role; you are at most a {} in your workspaces: ask an admin of \
             the workspace (for server-wide settings, the server's owner)",
            need.as_str(),
            have.as_str(),
        ))),
        None => Err(ApiError::forbidden(
            "you are not a member of any workspace yet: ask an admin of one to add you",
        )),
    }
}

/// The second half, once the request is read: the need in the workspace of each object it
/// names. A caller who is not a member of that workspace is answered as if the object did not
/// exist. Answers the workspace of the first object (`None`: server-wide, or not found, which
/// its handler then says).
pub async fn check_subjects(
    state: &AppState,
    grants: &Grants,
    access: Access,
    subjects: &[&str],
) -> Result<Option<String>, ApiError> {
    let mut first = None;
    for id in subjects {
        let Some(workspace) = workspace_of(state, access.subject, id).await? else { continue };
        if access.need != Need::Anyone {
            if !grants.sees(&workspace) {
                // Worded as the store words a missing one: the answer tells nothing.
                return Err(StoreError::not_found(noun(access.subject), *id).into());
            }
            if let Some(need) = needed_role(access.need) {
                refuse_below(grants.role_in(&workspace), need, true)?;
            }
        }
        first.get_or_insert(workspace);
    }
    Ok(first)
}

/// Both halves for an action of the table and its decoded request (the MCP tools' way in).
pub async fn authorize<A: Action>(
    state: &AppState,
    identity: &Identity,
    request: &A::Request,
) -> Result<(Grants, Option<String>), ApiError> {
    let grants = grants(state, identity).await?;
    precheck(&grants, A::ACCESS)?;
    let workspace = check_subjects(state, &grants, A::ACCESS, &request.subjects()).await?;
    Ok((grants, workspace))
}

fn noun(subject: Subject) -> &'static str {
    match subject {
        Subject::Server => "object",
        Subject::Workspace => "workspace",
        Subject::Repository => "repository",
        Subject::Workflow => "workflow",
        Subject::Step => "step",
        Subject::Task => "task",
        Subject::Session => "session",
        Subject::Terminal => "terminal",
        Subject::ReviewComment => "review comment",
        Subject::SavedPrompt => "saved prompt",
        Subject::IntakeSource => "intake source",
        Subject::Schedule => "schedule",
        Subject::Question => "question",
    }
}

/// The workspace of the object `id` of kind `subject`; `None` for a server-wide subject or an
/// object that does not exist (its handler answers that).
pub async fn workspace_of(
    state: &AppState,
    subject: Subject,
    id: &str,
) -> Result<Option<String>, ApiError> {
    let store = state.store();
    let found = match subject {
        Subject::Server => return Ok(None),
        Subject::Workspace => return Ok(Some(id.to_owned())),
        Subject::Repository => {
            store.get_repository(&RepositoryId::new(id)).await.map(|r| r.workspace_id.to_string())
        }
        Subject::Workflow => {
            store.get_workflow(&WorkflowId::new(id)).await.map(|w| w.workspace_id.to_string())
        }
        Subject::Step => {
            store.workflow_of_step(&StepId::new(id)).await.map(|w| w.workspace_id.to_string())
        }
        Subject::Task => task_workspace(state, &TaskId::new(id)).await,
        Subject::Session => match store.get_session(&SessionId::new(id)).await {
            Ok(session) => task_workspace(state, &session.task_id).await,
            Err(err) => Err(err),
        },
        Subject::Terminal => match state.engine().terminal(id) {
            Ok((info, _)) => task_workspace(state, &info.task_id).await,
            Err(_) => return Ok(None),
        },
        Subject::ReviewComment => match store.review_comment(id).await {
            Ok(comment) => task_workspace(state, &comment.task_id).await,
            Err(err) => Err(err),
        },
        Subject::SavedPrompt => {
            store.get_saved_prompt(id).await.map(|p| p.workspace_id.to_string())
        }
        Subject::IntakeSource => {
            store.get_intake_source(id).await.map(|s| s.workspace_id.to_string())
        }
        Subject::Schedule => store.get_schedule(id).await.map(|s| s.workspace_id.to_string()),
        Subject::Question => match store.get_question(id).await {
            Ok(question) => task_workspace(state, &question.task_id).await,
            Err(err) => Err(err),
        },
    };
    match found {
        Ok(workspace) => Ok(Some(workspace)),
        Err(StoreError::NotFound { .. }) => Ok(None),
        Err(err) => Err(err.into()),
    }
}

async fn task_workspace(state: &AppState, task_id: &TaskId) -> Result<String, StoreError> {
    state.store().get_task(task_id).await.map(|t| t.workspace_id.to_string())
}
