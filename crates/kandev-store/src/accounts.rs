//! Accounts (issue 21): users with their argon2id password hashes, login sessions and
//! personal API tokens. Sessions and tokens are stored as the SHA-256 of their secret (the
//! caller hashes); nothing here can give a secret back.

use kandev_domain::Timestamp;
use kandev_domain::account::{ApiToken, User};
use sqlx::FromRow;

use crate::db::Db;
use crate::{Result, Store, StoreError, WriteTx};

#[derive(FromRow)]
struct UserRow {
    id: String,
    name: String,
    created_at: i64,
    owner: i64,
}

impl From<UserRow> for User {
    fn from(r: UserRow) -> User {
        User { id: r.id, name: r.name, created_at: Timestamp(r.created_at), owner: r.owner != 0 }
    }
}

#[derive(FromRow)]
struct TokenRow {
    id: String,
    user_id: String,
    name: String,
    created_at: i64,
}

impl From<TokenRow> for ApiToken {
    fn from(r: TokenRow) -> ApiToken {
        ApiToken { id: r.id, user_id: r.user_id, name: r.name, created_at: Timestamp(r.created_at) }
    }
}

pub(crate) async fn user_by_name(mut db: Db<'_>, name: &str) -> Result<Option<User>> {
    let row = crate::sql::query_as::<UserRow>(
        "SELECT id, name, created_at, owner FROM users WHERE name = ?",
    )
    .bind(name)
    .fetch_optional(&mut db)
    .await?;
    Ok(row.map(User::from))
}

async fn any_user(mut db: Db<'_>) -> Result<bool> {
    let found: Option<i64> =
        crate::sql::query_scalar("SELECT 1 FROM users LIMIT 1").fetch_optional(&mut db).await?;
    Ok(found.is_some())
}

impl Store {
    /// Whether any user exists: then every request must be authenticated.
    pub async fn has_users(&self) -> Result<bool> {
        any_user(self.db()).await
    }

    pub async fn list_users(&self) -> Result<Vec<User>> {
        let rows = crate::sql::query_as::<UserRow>(
            "SELECT id, name, created_at, owner FROM users ORDER BY name",
        )
        .fetch_all(&self.read)
        .await?;
        Ok(rows.into_iter().map(User::from).collect())
    }

    /// The user called `name` and their password hash (a PHC string), if there is one.
    pub async fn user_credentials(&self, name: &str) -> Result<Option<(User, String)>> {
        let row: Option<(String, String, i64, i64, String)> = crate::sql::query_as(
            "SELECT id, name, created_at, owner, password_hash FROM users WHERE name = ?",
        )
        .bind(name)
        .fetch_optional(&self.read)
        .await?;
        Ok(row.map(|(id, name, created_at, owner, hash)| {
            (User { id, name, created_at: Timestamp(created_at), owner: owner != 0 }, hash)
        }))
    }

    /// The user of the login session whose secret hashes to `secret_hash`, unless it expired.
    pub async fn user_for_session(&self, secret_hash: &str) -> Result<Option<User>> {
        let row = crate::sql::query_as::<UserRow>(
            "SELECT u.id, u.name, u.created_at, u.owner FROM user_sessions s JOIN users u ON u.id = s.user_id \
             WHERE s.secret_hash = ? AND s.expires_at > ?",
        )
        .bind(secret_hash)
        .bind(self.now().millis())
        .fetch_optional(&self.read)
        .await?;
        Ok(row.map(User::from))
    }

    /// The user of the personal token whose secret hashes to `secret_hash`.
    pub async fn user_for_token(&self, secret_hash: &str) -> Result<Option<User>> {
        let row = crate::sql::query_as::<UserRow>(
            "SELECT u.id, u.name, u.created_at, u.owner FROM user_tokens t JOIN users u ON u.id = t.user_id \
             WHERE t.secret_hash = ?",
        )
        .bind(secret_hash)
        .fetch_optional(&self.read)
        .await?;
        Ok(row.map(User::from))
    }

    /// The user with id `id`, if there is one.
    pub async fn get_user(&self, id: &str) -> Result<Option<User>> {
        let row = crate::sql::query_as::<UserRow>(
            "SELECT id, name, created_at, owner FROM users WHERE id = ?",
        )
        .bind(id)
        .fetch_optional(&self.read)
        .await?;
        Ok(row.map(User::from))
    }

    /// The user called `name`, if there is one.
    pub async fn user_named(&self, name: &str) -> Result<Option<User>> {
        user_by_name(self.db(), name).await
    }

    /// A user's personal tokens, oldest first, without their secrets.
    pub async fn list_tokens(&self, user_id: &str) -> Result<Vec<ApiToken>> {
        let rows = crate::sql::query_as::<TokenRow>(
            "SELECT id, user_id, name, created_at FROM user_tokens WHERE user_id = ? \
             ORDER BY created_at, id",
        )
        .bind(user_id)
        .fetch_all(&self.read)
        .await?;
        Ok(rows.into_iter().map(ApiToken::from).collect())
    }
}

impl WriteTx {
    /// Adds a user; a taken name is a `Conflict`. The first user becomes the owner. An empty
    /// `password_hash` is a user who signs in only through the trusted proxy (no password
    /// verifies against it).
    pub async fn insert_user(&mut self, name: &str, password_hash: &str) -> Result<User> {
        self.insert_user_as(name, password_hash, true).await
    }

    /// [`WriteTx::insert_user`]; with `may_own` false the user never becomes the owner (one
    /// made by a trusted proxy's first sign-in: whoever signs in first must not own the
    /// server).
    pub async fn insert_user_as(
        &mut self,
        name: &str,
        password_hash: &str,
        may_own: bool,
    ) -> Result<User> {
        if user_by_name(self.db(), name).await?.is_some() {
            return Err(StoreError::Conflict(format!("user {name} already exists")));
        }
        let owner = may_own && !any_user(self.db()).await?;
        let (id, now) = (self.new_id(), self.now().millis());
        crate::sql::query(
            "INSERT INTO users (id, name, password_hash, created_at, updated_at, owner) \
             VALUES (?, ?, ?, ?, ?, ?)",
        )
        .bind(&id)
        .bind(name)
        .bind(password_hash)
        .bind(now)
        .bind(now)
        .bind(i64::from(owner))
        .execute(self.conn())
        .await?;
        Ok(User { id, name: name.to_owned(), created_at: Timestamp(now), owner })
    }

    /// Makes `name` the server's owner, and nobody else.
    pub async fn set_owner(&mut self, name: &str) -> Result<User> {
        let user = user_by_name(self.db(), name)
            .await?
            .ok_or_else(|| StoreError::not_found("user", name))?;
        crate::sql::query("UPDATE users SET owner = CASE WHEN id = ? THEN 1 ELSE 0 END")
            .bind(&user.id)
            .execute(self.conn())
            .await?;
        Ok(User { owner: true, ..user })
    }

    /// Sets a user's password and ends their login sessions (tokens stay), except the one whose
    /// secret hashes to `keep_session` (the session of the user who changed it on their page).
    pub async fn set_password(
        &mut self,
        name: &str,
        password_hash: &str,
        keep_session: Option<&str>,
    ) -> Result<User> {
        let user = user_by_name(self.db(), name)
            .await?
            .ok_or_else(|| StoreError::not_found("user", name))?;
        crate::sql::query("UPDATE users SET password_hash = ?, updated_at = ? WHERE id = ?")
            .bind(password_hash)
            .bind(self.now().millis())
            .bind(&user.id)
            .execute(self.conn())
            .await?;
        crate::sql::query("DELETE FROM user_sessions WHERE user_id = ? AND secret_hash <> ?")
            .bind(&user.id)
            .bind(keep_session.unwrap_or(""))
            .execute(self.conn())
            .await?;
        Ok(user)
    }

    /// Removes a user with their sessions and tokens.
    pub async fn delete_user(&mut self, name: &str) -> Result<User> {
        let user = user_by_name(self.db(), name)
            .await?
            .ok_or_else(|| StoreError::not_found("user", name))?;
        crate::sql::query("DELETE FROM users WHERE id = ?")
            .bind(&user.id)
            .execute(self.conn())
            .await?;
        Ok(user)
    }

    /// Starts a login session that lasts until `expires_at`; expired ones are dropped.
    pub async fn insert_login_session(
        &mut self,
        user_id: &str,
        secret_hash: &str,
        expires_at: Timestamp,
    ) -> Result<()> {
        let now = self.now().millis();
        crate::sql::query("DELETE FROM user_sessions WHERE expires_at <= ?")
            .bind(now)
            .execute(self.conn())
            .await?;
        crate::sql::query(
            "INSERT INTO user_sessions (secret_hash, user_id, created_at, expires_at) \
             VALUES (?, ?, ?, ?)",
        )
        .bind(secret_hash)
        .bind(user_id)
        .bind(now)
        .bind(expires_at.millis())
        .execute(self.conn())
        .await?;
        Ok(())
    }

    /// Ends the login session whose secret hashes to `secret_hash` (logout).
    pub async fn delete_login_session(&mut self, secret_hash: &str) -> Result<()> {
        crate::sql::query("DELETE FROM user_sessions WHERE secret_hash = ?")
            .bind(secret_hash)
            .execute(self.conn())
            .await?;
        Ok(())
    }

    pub async fn insert_token(
        &mut self,
        user_id: &str,
        name: &str,
        secret_hash: &str,
    ) -> Result<ApiToken> {
        let (id, now) = (self.new_id(), self.now().millis());
        crate::sql::query(
            "INSERT INTO user_tokens (id, user_id, name, secret_hash, created_at) \
             VALUES (?, ?, ?, ?, ?)",
        )
        .bind(&id)
        .bind(user_id)
        .bind(name)
        .bind(secret_hash)
        .bind(now)
        .execute(self.conn())
        .await?;
        Ok(ApiToken {
            id,
            user_id: user_id.to_owned(),
            name: name.to_owned(),
            created_at: Timestamp(now),
        })
    }

    /// Revokes one of `user_id`'s tokens; another user's token is `NotFound` like a missing one.
    pub async fn delete_token(&mut self, user_id: &str, token_id: &str) -> Result<()> {
        let done = crate::sql::query("DELETE FROM user_tokens WHERE id = ? AND user_id = ?")
            .bind(token_id)
            .bind(user_id)
            .execute(self.conn())
            .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::not_found("token", token_id));
        }
        Ok(())
    }
}
