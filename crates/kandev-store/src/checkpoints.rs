//! Checkpoints of a session's worktrees around its turns (issue 48): what was recorded before
//! and after each turn per worktree, the state the agent's turns last left (the baseline a
//! revert compares with), and what the agent is told with its next prompt after a revert.
//! The commits themselves live in the worktree's repository (`kandev_runtime::git::checkpoint`).

use kandev_domain::{RepositoryId, SessionId, Timestamp, TurnId};
use sqlx::FromRow;

use crate::{Result, Store, WriteTx};

/// One worktree's checkpoints of one turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnCheckpoint {
    pub turn_id: TurnId,
    pub session_id: SessionId,
    pub repository_id: Option<RepositoryId>,
    /// The worktree.
    pub path: String,
    /// The worktree's state before the turn.
    pub before_commit: String,
    /// Its state when the turn ended (`None` for a turn that has not ended, or that ended
    /// with its agent).
    pub after_commit: Option<String>,
    pub taken_at: Timestamp,
    /// When a revert undid the turn.
    pub undone_at: Option<Timestamp>,
}

#[derive(FromRow)]
struct CheckpointRow {
    turn_id: String,
    session_id: String,
    repository_id: Option<String>,
    path: String,
    before_commit: String,
    after_commit: Option<String>,
    taken_at: i64,
    undone_at: Option<i64>,
}

impl From<CheckpointRow> for TurnCheckpoint {
    fn from(r: CheckpointRow) -> Self {
        TurnCheckpoint {
            turn_id: TurnId::new(r.turn_id),
            session_id: SessionId::new(r.session_id),
            repository_id: r.repository_id.map(RepositoryId::new),
            path: r.path,
            before_commit: r.before_commit,
            after_commit: r.after_commit,
            taken_at: Timestamp(r.taken_at),
            undone_at: r.undone_at.map(Timestamp),
        }
    }
}

const SELECT: &str = "SELECT turn_id, session_id, repository_id, path, before_commit, \
                      after_commit, taken_at, undone_at FROM turn_checkpoints";

impl Store {
    /// A session's checkpoints, oldest turn first (then by worktree).
    pub async fn turn_checkpoints(&self, session: &SessionId) -> Result<Vec<TurnCheckpoint>> {
        let rows = crate::sql::query_as::<CheckpointRow>(&format!(
            "{SELECT} WHERE session_id = ? ORDER BY taken_at, turn_id, path"
        ))
        .bind(session.as_str())
        .fetch_all(&self.read)
        .await?;
        Ok(rows.into_iter().map(TurnCheckpoint::from).collect())
    }

    /// The sessions with checkpoints of the worktree at `path`.
    pub async fn checkpoint_sessions_at(&self, path: &str) -> Result<Vec<SessionId>> {
        let ids: Vec<String> = crate::sql::query_scalar(
            "SELECT DISTINCT session_id FROM turn_checkpoints WHERE path = ? ORDER BY session_id",
        )
        .bind(path)
        .fetch_all(&self.read)
        .await?;
        Ok(ids.into_iter().map(SessionId::new).collect())
    }

    /// The state the agent's turns last left in each of a session's worktrees:
    /// `(worktree path, commit)`.
    pub async fn checkpoint_baselines(&self, session: &SessionId) -> Result<Vec<(String, String)>> {
        Ok(crate::sql::query_as::<(String, String)>(
            "SELECT path, commit_id FROM checkpoint_baselines WHERE session_id = ? ORDER BY path",
        )
        .bind(session.as_str())
        .fetch_all(&self.read)
        .await?)
    }
}

impl WriteTx {
    /// Records a worktree's state before a turn.
    pub async fn record_checkpoint_before(
        &mut self,
        turn: &TurnId,
        session: &SessionId,
        repository: Option<&RepositoryId>,
        path: &str,
        commit: &str,
    ) -> Result<()> {
        crate::sql::query(
            "INSERT INTO turn_checkpoints (turn_id, session_id, repository_id, path, \
             before_commit, after_commit, taken_at, undone_at) \
             VALUES (?, ?, ?, ?, ?, NULL, ?, NULL) \
             ON CONFLICT (turn_id, path) DO UPDATE SET before_commit = excluded.before_commit",
        )
        .bind(turn.as_str())
        .bind(session.as_str())
        .bind(repository.map(RepositoryId::as_str))
        .bind(path)
        .bind(commit)
        .bind(self.now().millis())
        .execute(self.conn())
        .await?;
        Ok(())
    }

    /// Records a worktree's state when a turn ended, which becomes the session's baseline
    /// there. False when the turn has no checkpoint before it in that worktree (nothing is
    /// written).
    pub async fn record_checkpoint_after(
        &mut self,
        turn: &TurnId,
        session: &SessionId,
        path: &str,
        commit: &str,
    ) -> Result<bool> {
        let done = crate::sql::query(
            "UPDATE turn_checkpoints SET after_commit = ? WHERE turn_id = ? AND path = ?",
        )
        .bind(commit)
        .bind(turn.as_str())
        .bind(path)
        .execute(self.conn())
        .await?;
        if done.rows_affected() == 0 {
            return Ok(false);
        }
        self.set_checkpoint_baseline(session, path, commit).await?;
        Ok(true)
    }

    /// Sets the state the agent's turns last left in a worktree (a turn's end, a revert).
    pub async fn set_checkpoint_baseline(
        &mut self,
        session: &SessionId,
        path: &str,
        commit: &str,
    ) -> Result<()> {
        crate::sql::query(
            "INSERT INTO checkpoint_baselines (session_id, path, commit_id) VALUES (?, ?, ?) \
             ON CONFLICT (session_id, path) DO UPDATE SET commit_id = excluded.commit_id",
        )
        .bind(session.as_str())
        .bind(path)
        .bind(commit)
        .execute(self.conn())
        .await?;
        Ok(())
    }

    /// Marks turns of a session undone by a revert.
    pub async fn mark_turns_undone(&mut self, session: &SessionId, turns: &[TurnId]) -> Result<()> {
        let now = self.now().millis();
        for turn in turns {
            crate::sql::query(
                "UPDATE turn_checkpoints SET undone_at = ? \
                 WHERE session_id = ? AND turn_id = ? AND undone_at IS NULL",
            )
            .bind(now)
            .bind(session.as_str())
            .bind(turn.as_str())
            .execute(self.conn())
            .await?;
        }
        Ok(())
    }

    /// Forgets the checkpoints of turns whose refs were collected.
    pub async fn forget_checkpoints(
        &mut self,
        session: &SessionId,
        turns: &[TurnId],
    ) -> Result<()> {
        for turn in turns {
            crate::sql::query("DELETE FROM turn_checkpoints WHERE session_id = ? AND turn_id = ?")
                .bind(session.as_str())
                .bind(turn.as_str())
                .execute(self.conn())
                .await?;
        }
        Ok(())
    }

    /// Forgets every checkpoint and baseline of the worktree at `path` (it was removed).
    pub async fn forget_checkpoints_at(&mut self, path: &str) -> Result<()> {
        crate::sql::query("DELETE FROM turn_checkpoints WHERE path = ?")
            .bind(path)
            .execute(self.conn())
            .await?;
        crate::sql::query("DELETE FROM checkpoint_baselines WHERE path = ?")
            .bind(path)
            .execute(self.conn())
            .await?;
        Ok(())
    }

    /// Sets what the agent is told with its next prompt (replacing a notice not told yet).
    pub async fn set_checkpoint_notice(&mut self, session: &SessionId, text: &str) -> Result<()> {
        crate::sql::query(
            "INSERT INTO checkpoint_notices (session_id, text) VALUES (?, ?) \
             ON CONFLICT (session_id) DO UPDATE SET text = excluded.text",
        )
        .bind(session.as_str())
        .bind(text)
        .execute(self.conn())
        .await?;
        Ok(())
    }

    /// Takes the notice the agent is to be told with the prompt of the turn this transaction
    /// opens: it is gone once the transaction commits.
    pub async fn take_checkpoint_notice(&mut self, session: &SessionId) -> Result<Option<String>> {
        let text: Option<(String,)> =
            crate::sql::query_as("SELECT text FROM checkpoint_notices WHERE session_id = ?")
                .bind(session.as_str())
                .fetch_optional(self.conn())
                .await?;
        if text.is_some() {
            crate::sql::query("DELETE FROM checkpoint_notices WHERE session_id = ?")
                .bind(session.as_str())
                .execute(self.conn())
                .await?;
        }
        Ok(text.map(|(t,)| t))
    }
}
