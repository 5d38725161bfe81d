//! What every part of the engine shares: the store, the settings, the launcher, the inboxes
//! of running session actors, the task tracker that owns every spawned future, and the
//! per-task worktree locks. Only small synchronous maps sit under `std` locks, and none is
//! held across an `.await`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use kandev_domain::task::Task;
use kandev_domain::transcript::Session;
use kandev_domain::{SessionId, TaskId};
use kandev_store::Store;
use tokio::sync::{OwnedMutexGuard, mpsc};
use tokio_util::task::TaskTracker;

use crate::command::Command;
use crate::config::EngineConfig;
use crate::devservers::DevServers;
use crate::launcher::Launcher;
use crate::mcp::McpTokens;
use crate::question::Waiters;
use crate::shells::Shells;
use crate::stream::StreamWriter;

/// How [`crate::handle::inbox`] starts a session's actor on its inbox: `session::start`,
/// handed in by the engine, so the shared state and the inboxes sit below the actor that
/// uses them (docs/architecture.md, the engine's layers).
pub(crate) type StartActor =
    fn(Arc<Inner>, Session, Task, mpsc::Sender<Command>, mpsc::Receiver<Command>);

pub(crate) struct Inner {
    pub store: Store,
    pub config: EngineConfig,
    pub launcher: Arc<dyn Launcher>,
    /// The inbox of each running session actor (the only map of sessions).
    pub sessions: Mutex<HashMap<SessionId, mpsc::Sender<Command>>>,
    /// Starts the actor of a session that has no running one (`handle::inbox`).
    pub start_actor: StartActor,
    /// Set (under the `sessions` lock) when the engine shuts down: no actor starts after it,
    /// so one that a late ship action or forge poll would start cannot outlive the shutdown.
    pub stopping: std::sync::atomic::AtomicBool,
    pub tracker: TaskTracker,
    /// Auth methods chosen with `session.authenticate`, used by the session's next boot.
    auth_wishes: Mutex<HashMap<SessionId, String>>,
    pub task_locks: TaskLocks,
    /// One follower of a task's pull requests at a time (the poll and `task.pr.get`).
    pub feedback_locks: TaskLocks,
    /// Repositories whose pull requests a webhook is having read again, each with whether
    /// another event came meanwhile (one more read then; `intake.rs`).
    pub hook_refreshes: Mutex<HashMap<kandev_domain::RepositoryId, bool>>,
    /// Group commit of streamed text (`stream.rs`).
    pub streams: StreamWriter,
    /// The MCP endpoint and the session tokens minted for it.
    pub mcp: McpTokens,
    /// Callers waiting for the answers of agents' questions.
    pub questions: Waiters,
    /// Running dev servers (`devservers.rs`).
    pub dev_servers: DevServers,
    /// Open user terminals (`shells.rs`).
    pub shells: Shells,
    /// The terminal UIs of terminal-UI sessions (`tui/`).
    pub tui: crate::shells::TuiTerminals,
    /// The links to SSH executors' hosts (`sites.rs`).
    pub links: crate::links::Links,
    /// Upload slots and the bytes stored for the attachment quota (`attachments.rs`).
    pub uploads: Arc<crate::attachments::Uploads>,
    /// Where people open the web UI (links in notifications); set once the server listens.
    pub web_url: Mutex<crate::deliveries::WebUrl>,
    /// The key secrets are sealed with, once read (`secrets.rs`).
    pub vault: crate::sealing::Vault,
    /// Agents installed by Kandev, under `<home>/agents` (`installs.rs`).
    pub agents: kandev_runtime::agent_install::AgentPrefix,
}

impl Inner {
    pub fn new(
        store: Store,
        config: EngineConfig,
        launcher: Arc<dyn Launcher>,
        start_actor: StartActor,
    ) -> Inner {
        let uploads = Arc::new(crate::attachments::Uploads::new(&config.home, &config.attachments));
        let tracker = TaskTracker::new();
        let agents = kandev_runtime::agent_install::AgentPrefix::in_home(&config.home);
        Inner {
            store,
            config,
            launcher,
            sessions: Mutex::new(HashMap::new()),
            start_actor,
            stopping: std::sync::atomic::AtomicBool::new(false),
            tracker: tracker.clone(),
            auth_wishes: Mutex::new(HashMap::new()),
            task_locks: TaskLocks::default(),
            feedback_locks: TaskLocks::default(),
            hook_refreshes: Mutex::default(),
            streams: StreamWriter::new(tracker),
            mcp: McpTokens::default(),
            questions: Waiters::default(),
            dev_servers: DevServers::default(),
            shells: Shells::default(),
            tui: crate::shells::TuiTerminals::default(),
            links: crate::links::Links::default(),
            uploads,
            web_url: Mutex::default(),
            vault: crate::sealing::Vault::default(),
            agents,
        }
    }

    /// Remembers the auth method the session's next boot authenticates with.
    pub fn wish_auth(&self, id: &SessionId, method_id: String) {
        lock(&self.auth_wishes).insert(id.clone(), method_id);
    }

    /// Forgets a wish that was not used (the resume it was for failed).
    pub fn forget_auth_wish(&self, id: &SessionId) {
        lock(&self.auth_wishes).remove(id);
    }

    /// The auth method to call `authenticate` with at the session's next boot (taken once).
    pub fn take_auth_wish(&self, id: &SessionId) -> Option<String> {
        lock(&self.auth_wishes).remove(id)
    }
}

/// A `std` lock that survives a panic elsewhere (the maps stay usable).
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// One async lock per task, serializing the creation, reuse and removal of its worktrees.
/// Held across `.await` on purpose (a setup script may run for minutes under it); owned by
/// the engine, so engines (tests run many) never share one.
#[derive(Default)]
pub(crate) struct TaskLocks {
    locks: Mutex<HashMap<TaskId, Weak<tokio::sync::Mutex<()>>>>,
}

impl TaskLocks {
    /// Waits for the task's lock; entries of tasks nobody holds are dropped on the way.
    pub async fn lock(&self, task_id: &TaskId) -> OwnedMutexGuard<()> {
        let task_lock = {
            let mut locks = lock(&self.locks);
            locks.retain(|_, held| held.strong_count() > 0);
            match locks.get(task_id).and_then(Weak::upgrade) {
                Some(held) => held,
                None => {
                    let new = Arc::new(tokio::sync::Mutex::new(()));
                    locks.insert(task_id.clone(), Arc::downgrade(&new));
                    new
                }
            }
        };
        task_lock.lock_owned().await
    }
}
