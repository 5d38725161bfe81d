//! Teams (issue 49): `workspace.member.*`, the owner's `user.*` actions, and `audit.list`.

use kandev_api_types::requests::{
    AuditList, ByName, ByWorkspace, Empty, MemberRemove, MemberSet, UserCreate,
};
use kandev_api_types::responses::{AuditEntries, Deleted, Members, UserOne, Users};
use kandev_api_types::{AuditEntryDto, MemberDto, UserEntryDto, WorkspaceRoleDto};
use kandev_domain::Timestamp;
use kandev_domain::account::{self, Role, User};
use kandev_store::AuditFilter;

use crate::accounts::{Identity, hash_password};
use crate::{ApiError, AppState};

/// Most audit entries in one answer.
const MAX_AUDIT: u32 = 500;

async fn members(s: &AppState, workspace_id: &str) -> Result<Members, ApiError> {
    let members = s.store().list_members(workspace_id).await?;
    Ok(Members { members: members.iter().map(MemberDto::from).collect() })
}

/// `workspace.member.list`.
pub async fn member_list(s: &AppState, p: ByWorkspace) -> Result<Members, ApiError> {
    s.store().get_workspace(&kandev_domain::WorkspaceId::new(&p.workspace_id)).await?;
    members(s, &p.workspace_id).await
}

/// Whether a member change by `who` must leave the workspace an admin: an admin's must, the
/// owner's need not (the owner manages every workspace).
async fn keep_admin(s: &AppState, who: &Identity) -> Result<bool, ApiError> {
    Ok(crate::roles::grants(s, who).await? != crate::roles::Grants::All)
}

/// `workspace.member.set`: invites a user by name, or changes their role. Their open pages
/// reconnect with what they may see now.
pub async fn member_set(s: &AppState, who: &Identity, p: MemberSet) -> Result<Members, ApiError> {
    s.store().get_workspace(&kandev_domain::WorkspaceId::new(&p.workspace_id)).await?;
    let role = Role::from(p.role);
    let keep = keep_admin(s, who).await?;
    s.engine().set_member(&p.workspace_id, p.user.trim(), role, keep).await?;
    if let Some(user) = s.store().user_named(p.user.trim()).await? {
        s.live().roles_changed(&user.id);
    }
    members(s, &p.workspace_id).await
}

/// `workspace.member.remove`: what the user had open of the workspace closes (their pages
/// reconnect without it).
pub async fn member_remove(
    s: &AppState,
    who: &Identity,
    p: MemberRemove,
) -> Result<Members, ApiError> {
    let keep = keep_admin(s, who).await?;
    let user_id = s.engine().remove_member(&p.workspace_id, p.user.trim(), keep).await?;
    s.live().roles_changed(&user_id);
    members(s, &p.workspace_id).await
}

async fn entry(s: &AppState, user: &User) -> Result<UserEntryDto, ApiError> {
    let mut roles: Vec<WorkspaceRoleDto> = s
        .store()
        .user_roles(&user.id)
        .await?
        .into_iter()
        .map(|(workspace_id, role)| WorkspaceRoleDto { workspace_id, role: role.into() })
        .collect();
    roles.sort_by(|a, b| a.workspace_id.cmp(&b.workspace_id));
    Ok(UserEntryDto {
        id: user.id.clone(),
        name: user.name.clone(),
        owner: user.owner,
        created_at: kandev_api_types::rfc3339(user.created_at),
        roles,
    })
}

/// `user.list` (the owner's): every user with their roles.
pub async fn user_list(s: &AppState, _: Empty) -> Result<Users, ApiError> {
    let mut users = Vec::new();
    for user in s.store().list_users().await? {
        users.push(entry(s, &user).await?);
    }
    Ok(Users { users })
}

/// A new password checked and hashed (argon2id, on a blocking thread: tens of milliseconds;
/// only the owner calls this).
async fn checked_hash(password: String) -> Result<String, ApiError> {
    account::password(&password)?;
    tokio::task::spawn_blocking(move || hash_password(&password))
        .await
        .map_err(|_| ApiError::internal())?
        .map_err(|err| {
            tracing::error!(error = %err, "cannot hash a password");
            ApiError::internal()
        })
}

/// `user.create` (the owner's): a user with a first password, in no workspace yet.
pub async fn user_create(s: &AppState, p: UserCreate) -> Result<UserOne, ApiError> {
    let name = account::user_name(&p.name)?;
    let hash = checked_hash(p.password).await?;
    let user = s.engine().create_user(&name, &hash).await?;
    Ok(UserOne { user: entry(s, &user).await? })
}

/// `user.password.reset` (the owner's): a new password; the user's login sessions end and
/// their open pages close.
pub async fn user_password_reset(s: &AppState, p: UserCreate) -> Result<UserOne, ApiError> {
    let hash = checked_hash(p.password).await?;
    let user = s.engine().set_password(p.name.trim(), &hash, None).await?;
    s.live().recheck();
    Ok(UserOne { user: entry(s, &user).await? })
}

/// `user.remove` (the owner's): the user with their sessions, tokens and memberships; their
/// open pages close.
pub async fn user_remove(s: &AppState, p: ByName) -> Result<Deleted, ApiError> {
    let user = s.engine().remove_user(p.name.trim()).await?;
    s.live().recheck();
    Ok(Deleted { deleted: true, id: user.id })
}

/// `audit.list`: entries of the workspaces the caller administers (every entry, server-wide
/// ones too, for the owner), newest first.
pub async fn audit_list(
    s: &AppState,
    who: &Identity,
    p: AuditList,
) -> Result<AuditEntries, ApiError> {
    let limit = match p.limit.unwrap_or(100) {
        l @ 1..=MAX_AUDIT => i64::from(l),
        _ => return Err(ApiError::validation(format!("limit must be between 1 and {MAX_AUDIT}"))),
    };
    let grants = crate::roles::grants(s, who).await?;
    let mut workspaces = grants.workspaces_with(Role::Admin);
    if let Some(only) = p.workspace_id {
        if workspaces.as_ref().is_some_and(|w| !w.contains(&only)) {
            return Err(kandev_store::StoreError::not_found("workspace", only).into());
        }
        workspaces = Some(vec![only]);
    }
    let after = match p.cursor.as_deref() {
        None => None,
        Some(cursor) => Some(parse_cursor(cursor).ok_or_else(|| {
            ApiError::validation("cursor: pass the next cursor of the previous page as it was")
        })?),
    };
    let filter = AuditFilter {
        workspaces,
        by: p.by.filter(|b| !b.trim().is_empty()),
        action: p.action.filter(|a| !a.trim().is_empty()),
        after,
        limit,
    };
    let entries = s.store().list_audit(&filter).await?;
    let last = entries.last().filter(|_| entries.len() as i64 == limit);
    let next_cursor = last.map(|e| format!("{}.{}", e.at.millis(), e.id));
    Ok(AuditEntries { entries: entries.iter().map(AuditEntryDto::from).collect(), next_cursor })
}

/// A page cursor of `audit.list`: the last entry's time and id, `<millis>.<id>`.
fn parse_cursor(cursor: &str) -> Option<(Timestamp, String)> {
    let (at, id) = cursor.split_once('.')?;
    Some((Timestamp(at.parse().ok()?), id.to_owned()))
}
