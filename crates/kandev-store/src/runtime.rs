//! A session's runtime binding: the live execution (process, group, epoch) as persisted, so
//! that startup can find and kill agents a previous server left behind.

use kandev_domain::SessionId;
use sqlx::FromRow;

use crate::{Result, Store, WriteTx};

/// The persisted view of a live execution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeRecord {
    pub session_id: SessionId,
    pub execution_id: String,
    pub epoch: i64,
    pub pid: Option<i32>,
    pub pgid: Option<i32>,
    pub status: String,
    pub cwd: String,
}

#[derive(FromRow)]
struct RuntimeRow {
    session_id: String,
    execution_id: String,
    epoch: i64,
    pid: Option<i64>,
    pgid: Option<i64>,
    status: String,
    cwd: String,
}

impl From<RuntimeRow> for RuntimeRecord {
    fn from(r: RuntimeRow) -> Self {
        RuntimeRecord {
            session_id: SessionId::new(r.session_id),
            execution_id: r.execution_id,
            epoch: r.epoch,
            pid: r.pid.and_then(|p| i32::try_from(p).ok()),
            pgid: r.pgid.and_then(|p| i32::try_from(p).ok()),
            status: r.status,
            cwd: r.cwd,
        }
    }
}

/// Where a runner's execution stands (issue 20): its name on the runner and the number of the
/// last item whose effects are committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunnerPosition {
    pub exec: String,
    /// The epoch of the execution (fences every write of its position).
    pub epoch: i64,
    pub committed: u64,
    /// Bytes of item `committed + 1` handled too (items are chunks of the agent's stdout, not
    /// lines).
    pub skip: u64,
    /// Bytes of the agent's output past the position whose effects are committed already
    /// (stored while a permission request before them waited for an answer): replayed after
    /// a restart, they are not handled again (but the request is asked again).
    pub ahead: u64,
    /// How many servers joined the conversation after the one that started it (request ids
    /// of the next one start at `(run + 1) << 32`).
    pub run: u64,
}

impl Store {
    /// The runner position of the session's execution, when a runner runs it.
    pub async fn runner_position(&self, session_id: &SessionId) -> Result<Option<RunnerPosition>> {
        type Row = (Option<String>, i64, Option<i64>, i64, i64, i64);
        let row: Option<Row> = crate::sql::query_as(
            "SELECT runner_exec, epoch, runner_seq, runner_skip, runner_ahead, acp_run \
             FROM session_runtime WHERE session_id = ?",
        )
        .bind(session_id.as_str())
        .fetch_optional(&self.read)
        .await?;
        Ok(row.and_then(|(exec, epoch, seq, skip, ahead, run)| {
            Some(RunnerPosition {
                exec: exec?,
                epoch,
                committed: u64::try_from(seq.unwrap_or(0)).ok()?,
                skip: u64::try_from(skip).ok()?,
                ahead: u64::try_from(ahead).ok()?,
                run: u64::try_from(run).ok()?,
            })
        }))
    }

    pub async fn get_runtime(&self, session_id: &SessionId) -> Result<Option<RuntimeRecord>> {
        let row = crate::sql::query_as::<RuntimeRow>(
            "SELECT session_id, execution_id, epoch, pid, pgid, status, cwd FROM session_runtime \
             WHERE session_id = ?",
        )
        .bind(session_id.as_str())
        .fetch_optional(&self.read)
        .await?;
        Ok(row.map(RuntimeRecord::from))
    }
}

impl WriteTx {
    pub async fn set_runtime(&mut self, record: &RuntimeRecord) -> Result<()> {
        crate::sql::query(
            "INSERT INTO session_runtime (session_id, execution_id, epoch, pid, pgid, status, cwd, started_at) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(session_id) DO UPDATE SET execution_id = excluded.execution_id, \
             epoch = excluded.epoch, pid = excluded.pid, pgid = excluded.pgid, status = excluded.status, \
             cwd = excluded.cwd, started_at = excluded.started_at, runner_exec = NULL, runner_seq = NULL, \
             runner_skip = 0, runner_ahead = 0, acp_run = 0",
        )
        .bind(record.session_id.as_str())
        .bind(&record.execution_id)
        .bind(record.epoch)
        .bind(record.pid)
        .bind(record.pgid)
        .bind(&record.status)
        .bind(&record.cwd)
        .bind(self.now().millis())
        .execute(self.conn())
        .await?;
        Ok(())
    }

    /// Records that the runtime row of `epoch` runs on a runner as `exec` (nothing committed
    /// yet).
    pub async fn set_runner_exec(
        &mut self,
        session_id: &SessionId,
        epoch: i64,
        exec: &str,
    ) -> Result<()> {
        crate::sql::query(
            "UPDATE session_runtime SET runner_exec = ?, runner_seq = 0, runner_skip = 0, runner_ahead = 0, \
             acp_run = 0 \
             WHERE session_id = ? AND epoch = ?",
        )
        .bind(exec)
        .bind(session_id.as_str())
        .bind(epoch)
        .execute(self.conn())
        .await?;
        Ok(())
    }

    /// Records, in the transaction that commits their effects, that runner items up to `seq`
    /// of the execution of `epoch` are handled. Never moves back; a row of another epoch or
    /// without a runner is left alone.
    pub async fn commit_runner_seq(
        &mut self,
        session_id: &SessionId,
        epoch: i64,
        seq: u64,
    ) -> Result<()> {
        let seq = i64::try_from(seq).unwrap_or(i64::MAX);
        crate::sql::query(
            "UPDATE session_runtime SET runner_seq = CASE WHEN runner_seq < ?1 THEN ?1 ELSE runner_seq END \
             WHERE session_id = ?2 AND epoch = ?3 AND runner_exec IS NOT NULL",
        )
        .bind(seq)
        .bind(session_id.as_str())
        .bind(epoch)
        .execute(self.conn())
        .await?;
        Ok(())
    }

    /// [`Self::commit_runner_seq`] with the bytes of the next item handled too, and `ahead`
    /// bytes past that whose effects are committed as well (`RunnerPosition::ahead`). The
    /// position (`seq`, `skip`) never moves back (compared as a pair); at the same position
    /// `ahead` only grows.
    pub async fn commit_runner_position(
        &mut self,
        session_id: &SessionId,
        epoch: i64,
        seq: u64,
        skip: u64,
        ahead: u64,
    ) -> Result<()> {
        let seq = i64::try_from(seq).unwrap_or(i64::MAX);
        let skip = i64::try_from(skip).unwrap_or(i64::MAX);
        let ahead = i64::try_from(ahead).unwrap_or(i64::MAX);
        crate::sql::query(
            "UPDATE session_runtime SET runner_seq = ?1, runner_skip = ?2, runner_ahead = ?3 \
             WHERE session_id = ?4 AND epoch = ?5 AND runner_exec IS NOT NULL \
             AND (COALESCE(runner_seq, 0) < ?1 OR (COALESCE(runner_seq, 0) = ?1 \
             AND (runner_skip < ?2 OR (runner_skip = ?2 AND runner_ahead < ?3))))",
        )
        .bind(seq)
        .bind(skip)
        .bind(ahead)
        .bind(session_id.as_str())
        .bind(epoch)
        .execute(self.conn())
        .await?;
        Ok(())
    }

    /// A server joins the conversation of the runner's execution of `epoch` (re-adopting it
    /// after a restart): returns its run number (1 for the first that joins), from which its
    /// request ids start (`run << 32`).
    pub async fn join_runner(&mut self, session_id: &SessionId, epoch: i64) -> Result<u64> {
        let run: Option<i64> = crate::sql::query_scalar(
            "UPDATE session_runtime SET acp_run = acp_run + 1, status = 'running' \
             WHERE session_id = ? AND epoch = ? AND runner_exec IS NOT NULL RETURNING acp_run",
        )
        .bind(session_id.as_str())
        .bind(epoch)
        .fetch_optional(self.conn())
        .await?;
        run.and_then(|r| u64::try_from(r).ok()).ok_or_else(|| crate::StoreError::NotFound {
            what: "runner execution",
            id: session_id.to_string(),
        })
    }

    /// Marks the runtime row of `epoch` as ended (no live process); keeps it for the record.
    pub async fn end_runtime(
        &mut self,
        session_id: &SessionId,
        epoch: i64,
        status: &str,
    ) -> Result<()> {
        crate::sql::query("UPDATE session_runtime SET status = ?, pid = NULL, pgid = NULL WHERE session_id = ? AND epoch = ?")
            .bind(status)
            .bind(session_id.as_str())
            .bind(epoch)
            .execute(self.conn())
            .await?;
        Ok(())
    }
}
