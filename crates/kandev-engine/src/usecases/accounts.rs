//! Account use cases (issue 21): a user's personal tokens and login sessions. The server
//! checks passwords and makes the secrets; only their hashes arrive here.

use kandev_domain::Timestamp;
use kandev_domain::account::{ApiToken, Role, User};
use kandev_store::WriteTx;

use crate::engine::Engine;
use crate::error::{EngineError, Result};

impl Engine {
    /// `user.token.create`: a personal token of `user_id` named `name`.
    pub async fn create_token(&self, user_id: &str, name: &str, hash: &str) -> Result<ApiToken> {
        let mut tx = self.inner.store.begin_write().await?;
        let token = tx.insert_token(user_id, name, hash).await?;
        tx.commit().await?;
        Ok(token)
    }

    /// `user.token.revoke`: one of `user_id`'s tokens.
    pub async fn revoke_token(&self, user_id: &str, token_id: &str) -> Result<()> {
        let mut tx = self.inner.store.begin_write().await?;
        tx.delete_token(user_id, token_id).await?;
        tx.commit().await?;
        Ok(())
    }

    /// `user.password.set`: `name`'s new password hash; their login sessions end but the one
    /// whose secret hashes to `keep_session` (tokens stay).
    pub async fn set_password(
        &self,
        name: &str,
        hash: &str,
        keep_session: Option<&str>,
    ) -> Result<kandev_domain::account::User> {
        let mut tx = self.inner.store.begin_write().await?;
        let user = tx.set_password(name, hash, keep_session).await?;
        tx.commit().await?;
        Ok(user)
    }

    /// A login session of `user_id` (`POST /login`), until `expires`.
    pub async fn start_login_session(
        &self,
        user_id: &str,
        hash: &str,
        expires: Timestamp,
    ) -> Result<()> {
        let mut tx = self.inner.store.begin_write().await?;
        tx.insert_login_session(user_id, hash, expires).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Ends the login session whose secret hashes to `hash` (`POST /logout`).
    pub async fn end_login_session(&self, hash: &str) -> Result<()> {
        let mut tx = self.inner.store.begin_write().await?;
        tx.delete_login_session(hash).await?;
        tx.commit().await?;
        Ok(())
    }
}

/// Teams (issue 49): users the owner manages, workspace members, the audit log.
impl Engine {
    /// `user.create` (and a trusted proxy's first sign-in, with an empty hash: no password
    /// logs in as them).
    pub async fn create_user(&self, name: &str, hash: &str) -> Result<User> {
        let mut tx = self.inner.store.begin_write().await?;
        let user = tx.insert_user(name, hash).await?;
        tx.commit().await?;
        Ok(user)
    }

    /// A proxy-signed-in user's first visit: the user (never the owner, and with no
    /// password), a viewer of each of the workspaces `workspace_ids`.
    pub async fn create_proxy_user(&self, name: &str, workspace_ids: &[String]) -> Result<User> {
        let mut tx = self.inner.store.begin_write().await?;
        let user = tx.insert_user_as(name, "", false).await?;
        for workspace in workspace_ids {
            if tx.get_workspace_in_tx(workspace).await?.is_some() {
                tx.set_member(workspace, &user.id, Role::Viewer).await?;
            }
        }
        tx.commit().await?;
        Ok(user)
    }

    /// `user.remove`: the user with their sessions, tokens and memberships. The owner cannot
    /// remove themself (hand the ownership on first: `kandev user owner NAME`).
    pub async fn remove_user(&self, name: &str) -> Result<User> {
        let mut tx = self.inner.store.begin_write().await?;
        let user = tx.delete_user(name).await?;
        if user.owner {
            return Err(EngineError::Conflict(format!(
                "{name} owns this server: make another user the owner first (`kandev user owner <name>`)"
            )));
        }
        tx.commit().await?;
        Ok(user)
    }

    /// `workspace.member.set`: `user` gets `role` in the workspace. A change that would leave
    /// the workspace without an admin is refused when `keep_admin` (an admin's change; the
    /// owner, who manages every workspace, may leave one without).
    pub async fn set_member(
        &self,
        workspace_id: &str,
        user: &str,
        role: Role,
        keep_admin: bool,
    ) -> Result<()> {
        let mut tx = self.inner.store.begin_write().await?;
        let found = tx.user_named_in_tx(user).await?.ok_or_else(|| {
            EngineError::NotFound(format!("no user named {user}: the owner adds users first"))
        })?;
        let before = tx.member_role(workspace_id, &found.id).await?;
        tx.set_member(workspace_id, &found.id, role).await?;
        if keep_admin && before == Some(Role::Admin) && role != Role::Admin {
            keeps_an_admin(&mut tx, workspace_id, user).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// `workspace.member.remove`: takes `user` out of the workspace, unless they are its last
    /// admin and `keep_admin` (as for [`Engine::set_member`]).
    pub async fn remove_member(
        &self,
        workspace_id: &str,
        user: &str,
        keep_admin: bool,
    ) -> Result<String> {
        let mut tx = self.inner.store.begin_write().await?;
        let found = tx
            .user_named_in_tx(user)
            .await?
            .ok_or_else(|| EngineError::NotFound(format!("no user named {user}")))?;
        tx.remove_member(workspace_id, &found.id).await.map_err(|err| match err {
            kandev_store::StoreError::NotFound { .. } => {
                EngineError::NotFound(format!("{user} is not a member of this workspace"))
            }
            other => other.into(),
        })?;
        if keep_admin {
            keeps_an_admin(&mut tx, workspace_id, user).await?;
        }
        tx.commit().await?;
        Ok(found.id)
    }

    /// Makes the creator of a workspace its admin.
    pub async fn add_creator(&self, workspace_id: &str, user_id: &str) -> Result<()> {
        let mut tx = self.inner.store.begin_write().await?;
        tx.set_member(workspace_id, user_id, Role::Admin).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Records one write action in the audit log.
    pub async fn audit(
        &self,
        by: &str,
        action: &str,
        workspace_id: Option<&str>,
        target: Option<&str>,
    ) -> Result<()> {
        let mut tx = self.inner.store.begin_write().await?;
        tx.insert_audit(by, action, workspace_id, target).await?;
        tx.commit().await?;
        Ok(())
    }
}

/// Refuses a change that leaves `workspace_id` with no admin (the transaction is dropped).
async fn keeps_an_admin(tx: &mut WriteTx, workspace_id: &str, user: &str) -> Result<()> {
    if tx.admin_count(workspace_id).await? == 0 {
        return Err(EngineError::Conflict(format!(
            "{user} is the workspace's last admin: make someone else an admin first"
        )));
    }
    Ok(())
}
