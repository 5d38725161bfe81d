//! Processes the server started for a task outside any agent session (user terminals, dev
//! servers), recorded while they run so that a start after a `kill -9` of the server can
//! kill what was left (docs/terminals.md).

use kandev_domain::{RepositoryId, TaskId};
use sqlx::FromRow;

use crate::{Result, Store, WriteTx};

/// A recorded child: its process group (a terminal's: also its session) and what it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildProcess {
    pub pgid: i32,
    /// `terminal` (kill the session) or `dev_server` (kill the group).
    pub kind: String,
    pub task_id: TaskId,
}

#[derive(FromRow)]
struct ChildRow {
    pgid: i64,
    kind: String,
    task_id: String,
}

impl Store {
    /// Every recorded child, oldest first; a pgid that does not fit an `i32` is skipped.
    pub async fn child_processes(&self) -> Result<Vec<ChildProcess>> {
        let rows = crate::sql::query_as::<ChildRow>(
            "SELECT pgid, kind, task_id FROM child_processes ORDER BY started_at, pgid",
        )
        .fetch_all(&self.read)
        .await?;
        Ok(rows
            .into_iter()
            .filter_map(|r| {
                let pgid = i32::try_from(r.pgid).ok()?;
                Some(ChildProcess { pgid, kind: r.kind, task_id: TaskId::new(r.task_id) })
            })
            .collect())
    }
}

impl WriteTx {
    /// Records a child that now runs (a pgid seen again replaces the old row).
    pub async fn record_child(&mut self, child: &ChildProcess) -> Result<()> {
        crate::sql::query(
            "INSERT INTO child_processes (pgid, kind, task_id, started_at) VALUES (?, ?, ?, ?) \
             ON CONFLICT(pgid) DO UPDATE SET kind = excluded.kind, task_id = excluded.task_id, \
             started_at = excluded.started_at",
        )
        .bind(child.pgid)
        .bind(&child.kind)
        .bind(child.task_id.as_str())
        .bind(self.now().millis())
        .execute(self.conn())
        .await?;
        Ok(())
    }

    /// Forgets a child that is gone.
    pub async fn forget_child(&mut self, pgid: i32) -> Result<()> {
        crate::sql::query("DELETE FROM child_processes WHERE pgid = ?")
            .bind(pgid)
            .execute(self.conn())
            .await?;
        Ok(())
    }
}

/// A terminal or dev server a runner runs (it outlives the server; docs/terminals.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunnerTerminal {
    /// As the API shows it: `term_<uuid>`, or `dev_<port>` for a dev server's log.
    pub id: String,
    pub task_id: TaskId,
    pub repository_id: RepositoryId,
    /// `terminal` or `dev_server`.
    pub kind: String,
    /// Its execution's name on the runner.
    pub exec: String,
    /// A dev server's port.
    pub port: Option<u16>,
}

#[derive(FromRow)]
struct RunnerTerminalRow {
    id: String,
    task_id: String,
    repository_id: String,
    kind: String,
    exec: String,
    port: Option<i64>,
}

impl Store {
    /// Every recorded runner terminal, oldest first.
    pub async fn runner_terminals(&self) -> Result<Vec<RunnerTerminal>> {
        let rows = crate::sql::query_as::<RunnerTerminalRow>(
            "SELECT id, task_id, repository_id, kind, exec, port FROM runner_terminals \
             ORDER BY started_at, id",
        )
        .fetch_all(&self.read)
        .await?;
        Ok(rows
            .into_iter()
            .map(|r| RunnerTerminal {
                id: r.id,
                task_id: TaskId::new(r.task_id),
                repository_id: RepositoryId::new(r.repository_id),
                kind: r.kind,
                exec: r.exec,
                port: r.port.and_then(|p| u16::try_from(p).ok()),
            })
            .collect())
    }
}

impl WriteTx {
    /// Records a terminal or dev server a runner now runs (replacing a stale record of the
    /// same id).
    pub async fn record_runner_terminal(&mut self, terminal: &RunnerTerminal) -> Result<()> {
        crate::sql::query(
            "INSERT INTO runner_terminals (id, task_id, repository_id, kind, exec, port, \
             started_at) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET \
             task_id = excluded.task_id, repository_id = excluded.repository_id, \
             kind = excluded.kind, exec = excluded.exec, port = excluded.port, \
             started_at = excluded.started_at",
        )
        .bind(&terminal.id)
        .bind(terminal.task_id.as_str())
        .bind(terminal.repository_id.as_str())
        .bind(&terminal.kind)
        .bind(&terminal.exec)
        .bind(terminal.port.map(i64::from))
        .bind(self.now().millis())
        .execute(self.conn())
        .await?;
        Ok(())
    }

    /// Forgets a runner terminal that is gone (closed, stopped, or not held any more).
    pub async fn forget_runner_terminal(&mut self, id: &str) -> Result<()> {
        crate::sql::query("DELETE FROM runner_terminals WHERE id = ?")
            .bind(id)
            .execute(self.conn())
            .await?;
        Ok(())
    }
}
