//! Account use cases (issue 21): a user's personal tokens and login sessions. The server
//! checks passwords and makes the secrets; only their hashes arrive here.

use kandev_domain::Timestamp;
use kandev_domain::account::ApiToken;

use crate::engine::Engine;
use crate::error::Result;

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
