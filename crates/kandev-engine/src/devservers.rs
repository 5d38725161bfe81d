//! Dev servers (docs/terminals.md): a repository's `dev_script` run in a task's worktree with
//! `PORT` set to a free port of `EngineConfig::dev_server_ports`. One per task and
//! repository; several tasks run theirs at once. Each runs in a process group of its own,
//! its output kept in a bounded tail (256 KiB). Archiving or deleting the task and the
//! server's shutdown stop them (the group is killed; nothing is left). With the local runner
//! (the default) the runner runs them, and a crash or `kill -9` of the server leaves them
//! running: the next start takes them over with their log (`reconcile::take_over_terminals`). This is the registry;
//! the actions are `engine/dev.rs`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use kandev_domain::{RepositoryId, TaskId};
use kandev_runtime::terminal::CommandTerminal;

/// How much of a dev server's output is kept.
pub const DEV_SERVER_LOG_BYTES: usize = 256 * 1024;

/// A dev server as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DevServerInfo {
    pub task_id: TaskId,
    pub repository_id: RepositoryId,
    pub port: u16,
    pub url: String,
    /// The id its log streams under over the WebSocket (`terminal.attach`): `dev_<port>`.
    pub terminal_id: String,
    /// `running` or `exited`.
    pub state: &'static str,
    pub exit_code: Option<i32>,
    /// The most recent output.
    pub log: String,
    pub truncated: bool,
}

pub(crate) struct DevServer {
    pub port: u16,
    pub process: Arc<CommandTerminal>,
    /// For a dev server in a task's container: the relay from this host's port (ends when
    /// the dev server is dropped from the registry).
    #[expect(dead_code, reason = "held, never read: dropping it ends the relay")]
    pub relay: Option<tokio_util::task::AbortOnDropHandle<()>>,
}

/// The running dev servers, by task and repository.
#[derive(Default)]
pub(crate) struct DevServers {
    running: Mutex<HashMap<(TaskId, RepositoryId), DevServer>>,
}

impl DevServers {
    pub(crate) fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<(TaskId, RepositoryId), DevServer>> {
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes every dev server of `task` (all when `None`) out of the map, with its port.
    pub(crate) fn take(&self, task: Option<&TaskId>) -> Vec<(u16, Arc<CommandTerminal>)> {
        let mut running = self.lock();
        let keys: Vec<_> =
            running.keys().filter(|(t, _)| task.is_none_or(|task| t == task)).cloned().collect();
        keys.into_iter()
            .filter_map(|key| running.remove(&key))
            .map(|s| (s.port, s.process))
            .collect()
    }
}

pub(crate) fn info(
    task_id: &TaskId,
    repository_id: &RepositoryId,
    server: &DevServer,
) -> DevServerInfo {
    let output = server.process.output();
    DevServerInfo {
        task_id: task_id.clone(),
        repository_id: repository_id.clone(),
        port: server.port,
        url: format!("http://localhost:{}/", server.port),
        terminal_id: format!("dev_{}", server.port),
        state: if output.exit.is_some() { "exited" } else { "running" },
        exit_code: output.exit.and_then(|e| e.exit_code),
        log: output.output,
        truncated: output.truncated,
    }
}

/// A repository's dev server command and the environment its script secrets give it.
pub(crate) struct DevScript {
    pub script: String,
    pub env: Vec<(String, String)>,
}

impl DevScript {
    /// Its environment with `PORT` set.
    pub(crate) fn with_port(&self, port: u16) -> Vec<(String, String)> {
        let mut env = self.env.clone();
        env.push(("PORT".to_owned(), port.to_string()));
        env
    }

    /// The secrets' values, which the runner scrubs from the dev server's log.
    pub(crate) fn values(&self) -> Vec<String> {
        self.env.iter().map(|(_, value)| value.clone()).collect()
    }
}
