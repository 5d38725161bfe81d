//! MCP session tokens as stored (issue 20): the SHA-256 of each token minted, with its session
//! and epoch, so the token a re-adopted agent holds is still accepted after a restart. The
//! token itself is never stored.

use kandev_domain::SessionId;

use crate::{Result, Store, WriteTx};

impl Store {
    /// The session and epoch of the token whose SHA-256 (hex) is `hash`.
    pub async fn mcp_grant(&self, hash: &str) -> Result<Option<(SessionId, i64)>> {
        let row: Option<(String, i64)> =
            crate::sql::query_as("SELECT session_id, epoch FROM mcp_tokens WHERE token_hash = ?")
                .bind(hash)
                .fetch_optional(&self.read)
                .await?;
        Ok(row.map(|(session_id, epoch)| (SessionId::new(session_id), epoch)))
    }
}

impl WriteTx {
    /// Records a token minted for the session at `epoch` by its hash; the session's tokens of
    /// epochs before `epoch - 1` are deleted (a live reset mints the next epoch's token while
    /// the current one is still in use).
    pub async fn add_mcp_grant(
        &mut self,
        hash: &str,
        session_id: &SessionId,
        epoch: i64,
    ) -> Result<()> {
        crate::sql::query("DELETE FROM mcp_tokens WHERE session_id = ? AND epoch < ?")
            .bind(session_id.as_str())
            .bind(epoch - 1)
            .execute(self.conn())
            .await?;
        crate::sql::query(
            "INSERT INTO mcp_tokens (token_hash, session_id, epoch, created_at) VALUES (?, ?, ?, ?)",
        )
        .bind(hash)
        .bind(session_id.as_str())
        .bind(epoch)
        .bind(self.now().millis())
        .execute(self.conn())
        .await?;
        Ok(())
    }

    /// Deletes every token of the session (the agents that held them are gone).
    pub async fn forget_mcp_grants(&mut self, session_id: &SessionId) -> Result<()> {
        crate::sql::query("DELETE FROM mcp_tokens WHERE session_id = ?")
            .bind(session_id.as_str())
            .execute(self.conn())
            .await?;
        Ok(())
    }
}
