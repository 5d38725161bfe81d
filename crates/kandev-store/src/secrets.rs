//! Secrets (issue 50): names and scopes in the clear, values only sealed (the engine seals
//! and opens them; the key is never here), and the one-time imports that move older
//! plain-text values in.

use kandev_domain::Timestamp;
use kandev_domain::secret::{Sealed, Secret, SecretScope};
use sqlx::FromRow;

use crate::db::Db;
use crate::sql::QueryBuilder;
use crate::{Result, Store, StoreError, WriteTx};

#[derive(FromRow)]
struct SecretRow {
    id: String,
    scope: String,
    workspace_id: Option<String>,
    repository_id: Option<String>,
    name: String,
    key_id: String,
    sealed: String,
    created_at: i64,
    updated_at: i64,
}

impl SecretRow {
    fn into_parts(self) -> Result<(Secret, Sealed)> {
        let scope = match (self.scope.as_str(), self.workspace_id, self.repository_id) {
            ("server", None, None) => SecretScope::Server,
            ("workspace", Some(workspace_id), None) => SecretScope::Workspace { workspace_id },
            ("repository", Some(workspace_id), Some(repository_id)) => {
                SecretScope::Repository { workspace_id, repository_id }
            }
            (other, ..) => {
                return Err(StoreError::Corrupt(format!(
                    "secret {} has the scope {other} without its ids",
                    self.id
                )));
            }
        };
        let secret = Secret {
            id: self.id,
            scope,
            name: self.name,
            created_at: Timestamp(self.created_at),
            updated_at: Timestamp(self.updated_at),
        };
        Ok((secret, Sealed { key_id: self.key_id, sealed: self.sealed }))
    }
}

fn parts(rows: Vec<SecretRow>) -> Result<Vec<(Secret, Sealed)>> {
    rows.into_iter().map(SecretRow::into_parts).collect()
}

/// The one-time imports a start runs until each is done: profiles' plain env values, and
/// the forge token variables of the server's environment.
pub const SECRET_IMPORTS: [&str; 2] = ["forge_tokens", "profile_env"];

const SELECT: &str = "SELECT id, scope, workspace_id, repository_id, name, key_id, sealed, \
                      created_at, updated_at FROM secrets";

async fn find(mut db: Db<'_>, scope: &SecretScope, name: &str) -> Result<Option<Secret>> {
    let row = crate::sql::query_as::<SecretRow>(&format!(
        "{SELECT} WHERE scope = ? AND COALESCE(workspace_id, '') = ? \
         AND COALESCE(repository_id, '') = ? AND name = ?"
    ))
    .bind(scope.kind())
    .bind(scope.workspace_id().unwrap_or(""))
    .bind(scope.repository_id().unwrap_or(""))
    .bind(name)
    .fetch_optional(&mut db)
    .await?;
    Ok(match row {
        Some(row) => Some(row.into_parts()?.0),
        None => None,
    })
}

async fn all_sealed(mut db: Db<'_>) -> Result<Vec<(Secret, Sealed)>> {
    let rows = crate::sql::query_as::<SecretRow>(&format!("{SELECT} ORDER BY id"))
        .fetch_all(&mut db)
        .await?;
    parts(rows)
}

impl Store {
    /// The server's secrets and, with `workspace_id`, that workspace's and its repositories'
    /// (by scope, then name): never a value.
    pub async fn list_secrets(&self, workspace_id: Option<&str>) -> Result<Vec<Secret>> {
        let rows = crate::sql::query_as::<SecretRow>(&format!(
            "{SELECT} WHERE workspace_id IS NULL OR workspace_id = ? \
             ORDER BY scope DESC, repository_id, name"
        ))
        .bind(workspace_id.unwrap_or(""))
        .fetch_all(&self.read)
        .await?;
        Ok(parts(rows)?.into_iter().map(|(secret, _)| secret).collect())
    }

    /// The sealed secrets named `names` a process of `workspace_id` (and `repository_id`)
    /// may be given: the server's, the workspace's, and the repository's (the engine takes
    /// the most specific of each name).
    pub async fn sealed_secrets_for(
        &self,
        names: &[String],
        workspace_id: &str,
        repository_id: Option<&str>,
    ) -> Result<Vec<(Secret, Sealed)>> {
        if names.is_empty() {
            return Ok(vec![]);
        }
        let mut query = QueryBuilder::new(
            self.dialect(),
            &format!(
                "{SELECT} WHERE (scope = 'server' OR (scope = 'workspace' \
                 AND workspace_id = "
            ),
        );
        query.push_bind(workspace_id.to_owned());
        query.push(") OR (scope = 'repository' AND repository_id = ");
        query.push_bind(repository_id.unwrap_or("").to_owned());
        query.push(")) AND name IN (");
        for (i, name) in names.iter().enumerate() {
            query.push(if i == 0 { "" } else { ", " }).push_bind(name.clone());
        }
        query.push(")");
        let rows: Vec<SecretRow> = query.build_query_as().fetch_all(&self.read).await?;
        parts(rows)
    }

    /// Every secret, sealed (a key check at start).
    pub async fn all_sealed_secrets(&self) -> Result<Vec<(Secret, Sealed)>> {
        all_sealed(self.db()).await
    }
}

impl WriteTx {
    /// Sets the secret `name` of `scope`: its value sealed by `seal` (given the secret's id,
    /// the associated data), in a new row or the one of that name.
    pub async fn put_secret(
        &mut self,
        scope: &SecretScope,
        name: &str,
        seal: impl FnOnce(&str) -> Result<Sealed>,
    ) -> Result<Secret> {
        let now = self.now().millis();
        if let Some(found) = find(self.db(), scope, name).await? {
            let sealed = seal(&found.id)?;
            self.write_sealed(&found.id, &sealed, now).await?;
            return Ok(Secret { updated_at: Timestamp(now), ..found });
        }
        let id = self.new_id();
        let sealed = seal(&id)?;
        crate::sql::query(
            "INSERT INTO secrets (id, scope, workspace_id, repository_id, name, key_id, sealed, \
             created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(&id)
        .bind(scope.kind())
        .bind(scope.workspace_id())
        .bind(scope.repository_id())
        .bind(name)
        .bind(&sealed.key_id)
        .bind(&sealed.sealed)
        .bind(now)
        .bind(now)
        .execute(self.conn())
        .await?;
        Ok(Secret {
            id,
            scope: scope.clone(),
            name: name.to_owned(),
            created_at: Timestamp(now),
            updated_at: Timestamp(now),
        })
    }

    /// Replaces a secret's sealed value with the same value under a new key: its
    /// `updated_at` stays, the time its value was last set.
    pub async fn reseal_secret(&mut self, id: &str, sealed: &Sealed) -> Result<()> {
        self.write_sealed(id, sealed, -1).await
    }

    /// Writes a sealed value; `now` (unless negative) becomes its `updated_at`.
    async fn write_sealed(&mut self, id: &str, sealed: &Sealed, now: i64) -> Result<()> {
        crate::sql::query(
            "UPDATE secrets SET key_id = ?, sealed = ?, \
             updated_at = CASE WHEN ? < 0 THEN updated_at ELSE ? END WHERE id = ?",
        )
        .bind(&sealed.key_id)
        .bind(&sealed.sealed)
        .bind(now)
        .bind(now)
        .bind(id)
        .execute(self.conn())
        .await?;
        Ok(())
    }

    /// Every secret, sealed, as this transaction sees them (a key rotation re-seals them
    /// all in one transaction).
    pub async fn all_sealed_secrets(&mut self) -> Result<Vec<(Secret, Sealed)>> {
        all_sealed(self.db()).await
    }

    /// Removes the secret `name` of `scope`; `NotFound` when there is none.
    pub async fn remove_secret(&mut self, scope: &SecretScope, name: &str) -> Result<Secret> {
        let found = find(self.db(), scope, name)
            .await?
            .ok_or_else(|| StoreError::not_found("secret", name))?;
        crate::sql::query("DELETE FROM secrets WHERE id = ?")
            .bind(&found.id)
            .execute(self.conn())
            .await?;
        Ok(found)
    }

    /// The imports of older plain-text values still to do, of [`SECRET_IMPORTS`].
    pub async fn pending_secret_imports(&mut self) -> Result<Vec<String>> {
        let done = crate::sql::query_scalar::<String>("SELECT kind FROM secret_imports")
            .fetch_all(self.conn())
            .await?;
        Ok(SECRET_IMPORTS
            .iter()
            .filter(|kind| !done.iter().any(|d| d == *kind))
            .map(|kind| (*kind).to_owned())
            .collect())
    }

    /// Marks an import done (in the transaction that moved its values).
    pub async fn finish_secret_import(&mut self, kind: &str) -> Result<()> {
        crate::sql::query("INSERT INTO secret_imports (kind) VALUES (?)")
            .bind(kind)
            .execute(self.conn())
            .await?;
        Ok(())
    }
}
