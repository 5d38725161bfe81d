//! Workspace members (issue 49): who may see and do what in a workspace. A user who is not a
//! member of a workspace does not see it (the owner sees all of them).

use kandev_domain::Timestamp;
use kandev_domain::account::{Member, Role};
use sqlx::FromRow;

use crate::{Result, Store, StoreError, WriteTx};

#[derive(FromRow)]
struct MemberRow {
    user_id: String,
    name: String,
    role: String,
    added_at: i64,
}

impl MemberRow {
    fn member(self) -> Member {
        Member {
            user_id: self.user_id,
            name: self.name,
            role: stored_role(&self.role),
            added_at: Timestamp(self.added_at),
        }
    }
}

/// A stored role. A value no version wrote (a hand edit) reads as the least one: a role
/// check never grants more than was meant.
fn stored_role(value: &str) -> Role {
    Role::parse(value).unwrap_or(Role::Viewer)
}

impl Store {
    /// The workspaces `user_id` belongs to, with their role in each.
    pub async fn user_roles(&self, user_id: &str) -> Result<Vec<(String, Role)>> {
        let rows: Vec<(String, String)> = crate::sql::query_as(
            "SELECT workspace_id, role FROM workspace_members WHERE user_id = ?",
        )
        .bind(user_id)
        .fetch_all(&self.read)
        .await?;
        Ok(rows.into_iter().map(|(w, r)| (w, stored_role(&r))).collect())
    }

    /// The members of a workspace, by name.
    pub async fn list_members(&self, workspace_id: &str) -> Result<Vec<Member>> {
        let rows = crate::sql::query_as::<MemberRow>(
            "SELECT m.user_id, u.name, m.role, m.added_at FROM workspace_members m \
             JOIN users u ON u.id = m.user_id WHERE m.workspace_id = ? ORDER BY u.name",
        )
        .bind(workspace_id)
        .fetch_all(&self.read)
        .await?;
        Ok(rows.into_iter().map(MemberRow::member).collect())
    }
}

impl WriteTx {
    /// Gives `user_id` `role` in a workspace (adding them, or changing their role).
    pub async fn set_member(
        &mut self,
        workspace_id: &str,
        user_id: &str,
        role: Role,
    ) -> Result<()> {
        let now = self.now().millis();
        crate::sql::query(
            "INSERT INTO workspace_members (workspace_id, user_id, role, added_at) \
             VALUES (?, ?, ?, ?) \
             ON CONFLICT (workspace_id, user_id) DO UPDATE SET role = excluded.role",
        )
        .bind(workspace_id)
        .bind(user_id)
        .bind(role.as_str())
        .bind(now)
        .execute(self.conn())
        .await?;
        Ok(())
    }

    /// Takes `user_id` out of a workspace; `NotFound` if they were not in it.
    pub async fn remove_member(&mut self, workspace_id: &str, user_id: &str) -> Result<()> {
        let done = crate::sql::query(
            "DELETE FROM workspace_members WHERE workspace_id = ? AND user_id = ?",
        )
        .bind(workspace_id)
        .bind(user_id)
        .execute(self.conn())
        .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::not_found("member", user_id));
        }
        Ok(())
    }

    /// The role of `user_id` in a workspace, read in this transaction.
    pub async fn member_role(&mut self, workspace_id: &str, user_id: &str) -> Result<Option<Role>> {
        let role: Option<String> = crate::sql::query_scalar(
            "SELECT role FROM workspace_members WHERE workspace_id = ? AND user_id = ?",
        )
        .bind(workspace_id)
        .bind(user_id)
        .fetch_optional(self.conn())
        .await?;
        Ok(role.as_deref().map(stored_role))
    }

    /// Whether workspace `id` exists, read in this transaction.
    pub async fn get_workspace_in_tx(&mut self, id: &str) -> Result<Option<()>> {
        match crate::workspaces::get(self.db(), id).await {
            Ok(_) => Ok(Some(())),
            Err(StoreError::NotFound { .. }) => Ok(None),
            Err(err) => Err(err),
        }
    }

    /// The user called `name`, read in this transaction.
    pub async fn user_named_in_tx(
        &mut self,
        name: &str,
    ) -> Result<Option<kandev_domain::account::User>> {
        crate::accounts::user_by_name(self.db(), name).await
    }

    /// How many admins a workspace has, read in this transaction.
    pub async fn admin_count(&mut self, workspace_id: &str) -> Result<i64> {
        let count: i64 = crate::sql::query_scalar(
            "SELECT COUNT(*) FROM workspace_members WHERE workspace_id = ? AND role = 'admin'",
        )
        .bind(workspace_id)
        .fetch_one(self.conn())
        .await?;
        Ok(count)
    }
}
