//! The container transport of a runner (issue 42): each task's agent runs in a container of
//! its own, made by Podman or Docker (the same commands for both). This server's own `kandev`
//! binary is mounted read-only in it; its first process is `kandev idle`, and
//! [`ContainerTransport`] reaches the runner with `<engine> exec -i <container> kandev runner
//! --stdio`, which starts it on a socket inside when none listens (as on a build host), so
//! exactly-once output, acknowledgements and re-adoption are the one runner stack's
//! ([`crate::runner::link`]), as over SSH.
//!
//! What the container sees of the host: the task's worktrees at their own paths (read-write),
//! and read-only: each worktree's `.git` file, the git directory it points to and the
//! repository's common git directory (git inside can read history, not change it; and what
//! this host's git reads in the worktree cannot be rewritten to run the agent's commands
//! here), the `kandev` binary and the executor's allowlisted mounts. Nothing else of the host: not
//! `$KANDEV_HOME`, not the user's home. With network `none` it has only its own loopback.
//!
//! Every failure is an error that says what to do; nothing falls back to the host.

use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use futures::future::BoxFuture;
use kandev_domain::container::{ContainerEngine, ContainerSettings};
use tokio::net::UnixStream;
use tokio::process::{Child, Command};

use crate::group::ProcessGroup;
use crate::runner::link::{Handshaken, OpenError, Opened, Transport, TransportGuard, handshake};

/// Where the server's `kandev` is mounted inside a container.
pub const KANDEV_IN_CONTAINER: &str = "/opt/kandev/kandev";
/// The runner's own folder inside a container (its socket, its log, the mock agent's state):
/// a folder of the server's home mounted there ([`TaskContainer::runner_dir`]), so the
/// server reaches the runner's socket directly.
pub const HOME_IN_CONTAINER: &str = "/kandev-home";
/// The runner's socket inside a container.
const SOCKET_IN_CONTAINER: &str = "/kandev-home/runner.sock";
/// The label every task container carries: the Kandev home of the server that made it.
pub const HOME_LABEL: &str = "dev.kandev.home";
/// The label with the task's id.
pub const TASK_LABEL: &str = "dev.kandev.task";
/// The label with a fingerprint of the settings a container was made with.
pub const SETTINGS_LABEL: &str = "dev.kandev.settings";

/// How long one engine command (inspect, create, start, remove) may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the runner's handshake may take once `exec` runs.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);

/// What can go wrong with a task's container. Each message says what to do.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ContainerError {
    #[error(
        "no container engine runs here: {tried}; install Podman (apt-get install podman) or \
         Docker, or set the executor's engine to one that runs"
    )]
    NoEngine { tried: String },
    #[error(
        "the image {image} is not on this host ({engine} does not pull it): run `{engine} pull \
         {image}` or build it, then start the session again"
    )]
    NoImage { engine: &'static str, image: String },
    #[error(
        "kandev does not run in the image {image}: {message}; the image needs a glibc at least \
         as new as this host's (e.g. debian:12 or newer)"
    )]
    NoKandev { image: String, message: String },
    #[error("{engine} {what} failed: {message}")]
    Engine { engine: &'static str, what: &'static str, message: String },
}

/// The engine a setting names, or the first that runs (Podman, then Docker).
pub async fn resolve_engine(
    chosen: Option<ContainerEngine>,
) -> Result<ContainerEngine, ContainerError> {
    let candidates = match chosen {
        Some(engine) => vec![engine],
        None => vec![ContainerEngine::Podman, ContainerEngine::Docker],
    };
    let mut tried = vec![];
    for engine in candidates {
        match run(engine, &["version"], "version").await {
            Ok(_) => return Ok(engine),
            Err(err) => tried.push(err.to_string()),
        }
    }
    Err(ContainerError::NoEngine { tried: tried.join("; ") })
}

/// Runs `<engine> args…` to its end within [`COMMAND_TIMEOUT`]; its stdout on success.
async fn run(
    engine: ContainerEngine,
    args: &[&str],
    what: &'static str,
) -> Result<String, ContainerError> {
    let program = engine.program();
    let mut command = Command::new(program);
    command.args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let failed = |message: String| ContainerError::Engine { engine: program, what, message };
    let (child, group) = ProcessGroup::spawn(&mut command)
        .map_err(|e| failed(format!("cannot run {program}: {e}")))?;
    match tokio::time::timeout(COMMAND_TIMEOUT, child.wait_with_output()).await {
        Ok(Ok(output)) => {
            group.release();
            if output.status.success() {
                return Ok(String::from_utf8_lossy(&output.stdout).into_owned());
            }
            let said = String::from_utf8_lossy(&output.stderr);
            let said = said.lines().map(str::trim).rfind(|l| !l.is_empty());
            Err(failed(said.unwrap_or("no message").to_owned()))
        }
        Ok(Err(e)) => Err(failed(e.to_string())),
        Err(_) => Err(failed(format!("no answer within {COMMAND_TIMEOUT:?}"))),
    }
}

/// Whether `image` is present; an error when the engine cannot say.
pub async fn image_exists(engine: ContainerEngine, image: &str) -> Result<bool, ContainerError> {
    match run(engine, &["image", "inspect", "--format", "{{.Id}}", "--", image], "image inspect")
        .await
    {
        Ok(_) => Ok(true),
        Err(ContainerError::Engine { message, .. })
            if message.contains("unknown")
                || message.contains("No such")
                || message.contains("not known") =>
        {
            Ok(false)
        }
        Err(other) => Err(other),
    }
}

/// Runs `kandev --version` in a throwaway container of `image` (no network); its answer.
pub async fn kandev_version_in(
    engine: ContainerEngine,
    image: &str,
    kandev: &Path,
) -> Result<String, ContainerError> {
    let mount = format!("{}:{KANDEV_IN_CONTAINER}:ro", kandev.display());
    let args = [
        "run",
        "--rm",
        "--network",
        "none",
        "-v",
        &mount,
        "--",
        image,
        KANDEV_IN_CONTAINER,
        "--version",
    ];
    match run(engine, &args, "run").await {
        Ok(version) if !version.trim().is_empty() => Ok(version.trim().to_owned()),
        Ok(_) => Err(ContainerError::NoKandev {
            image: image.into(),
            message: "it printed no version".into(),
        }),
        Err(ContainerError::Engine { message, .. }) => {
            Err(ContainerError::NoKandev { image: image.into(), message })
        }
        Err(other) => Err(other),
    }
}

/// The containers a server (its Kandev home) made: `(name, task id)`.
pub async fn containers_of(
    engine: ContainerEngine,
    home: &Path,
) -> Result<Vec<(String, String)>, ContainerError> {
    let filter = format!("label={HOME_LABEL}={}", home.display());
    // Names only (the same template in both engines); the task is in the name.
    let out =
        run(engine, &["ps", "-a", "--filter", &filter, "--format", "{{.Names}}"], "ps").await?;
    Ok(out
        .lines()
        .filter_map(|name| {
            let task = name.trim().strip_prefix("kandev-")?;
            Some((name.trim().to_owned(), task.to_owned()))
        })
        .collect())
}

/// Removes a container and what runs in it (missing already: fine).
pub async fn remove(engine: ContainerEngine, name: &str) -> Result<(), ContainerError> {
    // Docker's `rm` has no `--time`; `--force` kills at once there.
    let args: &[&str] = match engine {
        ContainerEngine::Podman => &["rm", "--force", "--time", "0", "--", name],
        ContainerEngine::Docker => &["rm", "--force", "--", name],
    };
    match run(engine, args, "rm").await {
        Ok(_) => Ok(()),
        Err(ContainerError::Engine { message, .. }) if is_missing(&message) => Ok(()),
        Err(other) => Err(other),
    }
}

/// Whether an engine's error says the container does not exist.
fn is_missing(message: &str) -> bool {
    let message = message.to_ascii_lowercase();
    message.contains("no such container") || message.contains("no such object")
}

/// One task's container: what it is made of and how its runner is reached.
#[derive(Debug, Clone)]
pub struct TaskContainer {
    pub engine: ContainerEngine,
    pub settings: ContainerSettings,
    /// The container's name (`kandev-<task id>`).
    pub name: String,
    pub task_id: String,
    /// The server's Kandev home (the label that says whose container it is).
    pub home: PathBuf,
    /// The server's own binary, mounted read-only.
    pub kandev: PathBuf,
    /// The task's worktrees (host paths, mounted at the same path).
    pub worktrees: Vec<PathBuf>,
    /// Kandev's agent installs (`<home>/agents`, issue 51), mounted read-only at the same
    /// path, so a profile that names an installed version runs it in the container too.
    pub agents: Option<PathBuf>,
    /// How long the runner keeps agents while no server is connected.
    pub grace: Duration,
    /// Whether a running container made with other settings is made again too (a session's
    /// start on a new link: what ran there is forgotten anyway); a stopped one always is.
    pub remake_if_changed: bool,
}

impl TaskContainer {
    /// The name of a task's container.
    pub fn name_for(task_id: &str) -> String {
        format!("kandev-{task_id}")
    }

    /// The host folder mounted as a container's [`HOME_IN_CONTAINER`]:
    /// `<home>/containers/<name>`. Removed with the container.
    pub fn runner_dir_of(home: &Path, name: &str) -> PathBuf {
        home.join("containers").join(name)
    }

    /// This container's [`Self::runner_dir_of`].
    pub fn runner_dir(&self) -> PathBuf {
        Self::runner_dir_of(&self.home, &self.name)
    }

    /// Makes sure the container runs: started again when stopped, made when missing (the
    /// image must be present: nothing is pulled).
    ///
    /// A container made with other settings (the executor changed since) is made again when
    /// it is stopped, or when [`Self::remake_if_changed`] says so; otherwise a running one
    /// is kept as it is.
    pub async fn ensure(&self) -> Result<(), ContainerError> {
        let format =
            format!("{{{{.State.Running}}}} {{{{index .Config.Labels \"{SETTINGS_LABEL}\"}}}}");
        let state = run(
            self.engine,
            &["container", "inspect", "--format", &format, "--", &self.name],
            "inspect",
        )
        .await;
        match state {
            Ok(found)
                if found.split_whitespace().nth(1) != Some(&self.fingerprint())
                    && (self.remake_if_changed || !found.trim().starts_with("true")) =>
            {
                tracing::info!(container = %self.name, "making a stopped container again with the executor's new settings");
                remove(self.engine, &self.name).await?;
                self.create().await
            }
            Ok(found) if found.trim().starts_with("true") => Ok(()),
            Ok(_) => run(self.engine, &["start", "--", &self.name], "start").await.map(drop),
            // Only a container that is not there is made; any other failure (a slow engine)
            // is an error, never a reason to make or remove one.
            Err(ContainerError::Engine { message, .. }) if is_missing(&message) => {
                self.create().await
            }
            Err(other) => Err(other),
        }
    }

    /// A fingerprint of the executor's settings (and the binary's path), kept as a label.
    fn fingerprint(&self) -> String {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        // The layout's version too: a container of an older layout is made again.
        format!("{:?} {} runner-dir", self.settings, self.kandev.display()).hash(&mut hasher);
        format!("{:016x}", hasher.finish())
    }

    /// Whether the container exists and runs (`false` on any doubt).
    async fn is_running(&self) -> bool {
        let args = ["container", "inspect", "--format", "{{.State.Running}}", "--", &self.name];
        run(self.engine, &args, "inspect").await.is_ok_and(|r| r.trim() == "true")
    }

    async fn create(&self) -> Result<(), ContainerError> {
        if !image_exists(self.engine, &self.settings.image).await? {
            return Err(ContainerError::NoImage {
                engine: self.engine.program(),
                image: self.settings.image.clone(),
            });
        }
        let dir = self.runner_dir();
        make_private_dir(&dir).map_err(|e| ContainerError::Engine {
            engine: self.engine.program(),
            what: "run",
            message: format!("cannot make the runner's folder {}: {e}", dir.display()),
        })?;
        let args = self.run_args()?;
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        if let Err(failed) = run(self.engine, &args, "run").await {
            // Its first process is kandev: say so when that is what cannot run there (the
            // container it made is removed then; on any other failure nothing is removed:
            // a name taken by a live container stays as it is).
            if let Err(err) =
                kandev_version_in(self.engine, &self.settings.image, &self.kandev).await
                && matches!(err, ContainerError::NoKandev { .. })
            {
                let _ = remove(self.engine, &self.name).await;
                return Err(err);
            }
            return Err(failed);
        }
        Ok(())
    }

    /// The `run` command line of the container.
    fn run_args(&self) -> Result<Vec<String>, ContainerError> {
        let s = &self.settings;
        let uid = server_ids();
        let mut args: Vec<String> = vec![
            "run".into(),
            "-d".into(),
            "--init".into(),
            "--name".into(),
            self.name.clone(),
            "--hostname".into(),
            // A host name has at most 63 bytes.
            self.name.chars().take(63).collect(),
            "--label".into(),
            format!("{HOME_LABEL}={}", self.home.display()),
            "--label".into(),
            format!("{TASK_LABEL}={}", self.task_id),
            "--label".into(),
            format!("{SETTINGS_LABEL}={}", self.fingerprint()),
            "--user".into(),
            uid,
            "-v".into(),
            format!("{}:{HOME_IN_CONTAINER}", self.runner_dir().display()),
            "-e".into(),
            format!("HOME={HOME_IN_CONTAINER}"),
            "-v".into(),
            format!("{}:{KANDEV_IN_CONTAINER}:ro", self.kandev.display()),
        ];
        // Rootless Podman maps the container's ids to subordinate ones unless told to keep
        // the user's own: the agent must write the worktree as its owner.
        if self.engine == ContainerEngine::Podman && !nix::unistd::getuid().is_root() {
            args.push("--userns=keep-id".into());
        }
        if s.network.is_isolated() {
            args.extend(["--network".into(), "none".into()]);
        }
        if let Some(millis) = s.cpu_millis {
            args.extend(["--cpus".into(), format!("{}.{:03}", millis / 1000, millis % 1000)]);
        }
        if let Some(mib) = s.memory_mib {
            args.extend(["--memory".into(), format!("{mib}m")]);
        }
        for mount in self.mounts()? {
            args.extend(["-v".into(), mount]);
        }
        // The first process only waits: the runner is started by the first `runner --stdio`
        // and ends after its grace without a server, while the container (its terminals,
        // a long setup script) lives on until its task is removed.
        args.extend(["--".into(), s.image.clone(), KANDEV_IN_CONTAINER.into(), "idle".into()]);
        Ok(args)
    }

    /// The `-v` values: worktrees and their git directories, then the allowlisted paths.
    fn mounts(&self) -> Result<Vec<String>, ContainerError> {
        let mut mounts: Vec<String> = vec![];
        let mut add = |mount: String| {
            if !mounts.contains(&mount) {
                mounts.push(mount);
            }
        };
        for worktree in self.worktrees.iter().filter(|w| w.exists()) {
            add(format!("{0}:{0}", worktree.display()));
            // Git's metadata read-only, the worktree's `.git` file too: this host runs git
            // in the worktree, and a `.git`, `commondir` or config the agent could rewrite
            // would make that git run the agent's commands here (`core.fsmonitor`, hooks).
            if let Some((own, common)) = git_dirs(worktree) {
                add(format!("{0}:{0}:ro", common.display()));
                add(format!("{0}:{0}:ro", own.display()));
                add(format!("{0}:{0}:ro", worktree.join(".git").display()));
            }
        }
        if let Some(agents) = self.agents.as_ref().filter(|a| a.is_dir()) {
            add(format!("{0}:{0}:ro", agents.display()));
        }
        for path in &self.settings.mounts {
            if !path.exists() {
                return Err(ContainerError::Engine {
                    engine: self.engine.program(),
                    what: "run",
                    message: format!(
                        "the mount {} does not exist on this host; create it or remove it from \
                         the executor's mounts",
                        path.display()
                    ),
                });
            }
            mounts.push(format!("{0}:{0}:ro", path.display()));
        }
        Ok(mounts)
    }
}

/// The uid:gid this server runs as: the container's processes write the worktree as it does.
fn server_ids() -> String {
    format!("{}:{}", nix::unistd::getuid(), nix::unistd::getgid())
}

/// For a worktree whose `.git` is a file (`gitdir: <repo>/.git/worktrees/<name>`): that
/// folder and the repository's common git folder (`<repo>/.git`).
fn git_dirs(worktree: &Path) -> Option<(PathBuf, PathBuf)> {
    let text = std::fs::read_to_string(worktree.join(".git")).ok()?;
    let own = PathBuf::from(text.trim().strip_prefix("gitdir:")?.trim());
    let own = if own.is_absolute() { own } else { worktree.join(own) };
    let common = std::fs::read_to_string(own.join("commondir")).ok()?;
    let common = PathBuf::from(common.trim());
    let common = if common.is_absolute() { common } else { own.join(common) };
    Some((own.canonicalize().ok()?, common.canonicalize().ok()?))
}

/// The `exec` client of a connection. Dropping it kills the client (the runner in the
/// container keeps its agents for its grace period).
struct ExecProcess {
    child: Child,
    group: ProcessGroup,
}

impl TransportGuard for ExecProcess {
    fn kill(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            self.group.kill();
            let _ = self.child.wait().await;
        })
    }

    /// As `ssh`'s: given `bound` to carry the last acknowledgements, killed past it.
    fn close(mut self: Box<Self>, bound: Duration) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            let _ = tokio::time::timeout(bound, self.child.wait()).await;
        })
    }
}

/// How a [`crate::runner::RunnerClient`] reaches a task container's runner: every open makes
/// sure the container runs, then connects to the runner's socket in the container's folder
/// of this host ([`TaskContainer::runner_dir`]), starting the runner when none listens; the
/// same path as the local runner's, no process between. Where that socket cannot be reached
/// from here (an engine in a VM) or is not the container's own, it `exec`s `kandev runner
/// --stdio` in the container instead.
pub struct ContainerTransport {
    pub container: TaskContainer,
}

impl Transport for ContainerTransport {
    fn open(&mut self) -> BoxFuture<'_, Result<Opened, OpenError>> {
        Box::pin(async move {
            let c = &self.container;
            let lasting = |err: ContainerError| OpenError {
                transient: matches!(err, ContainerError::Engine { .. }),
                message: err.to_string(),
            };
            c.ensure().await.map_err(lasting)?;
            if let Some(connection) = direct(c).await {
                return Ok(Opened { connection, guard: None });
            }
            let grace = grace_arg(c.grace);
            let mut command = Command::new(c.engine.program());
            command
                .args(["exec", "-i", "--", &c.name, KANDEV_IN_CONTAINER, "runner", "--stdio"])
                .args(["--socket", SOCKET_IN_CONTAINER, "--grace", &grace])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                // The relay's log lines are not read: a full pipe must never stall it.
                .stderr(Stdio::null());
            let failed = |message: String| OpenError { transient: true, message };
            let (mut child, group) = ProcessGroup::spawn(&mut command)
                .map_err(|e| failed(format!("cannot run {}: {e}", c.engine.program())))?;
            let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
                return Err(failed("the exec client's pipes are missing".into()));
            };
            let stream = tokio::io::join(stdout, stdin);
            let shaken = tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake(stream)).await;
            let why = match shaken {
                Ok(Ok(connection)) => {
                    let guard = Box::new(ExecProcess { child, group });
                    return Ok(Opened { connection, guard: Some(guard) });
                }
                Ok(Err(err)) => err.to_string(),
                Err(_) => format!("no answer within {HANDSHAKE_TIMEOUT:?}"),
            };
            drop(group);
            let _ = child.wait().await;
            // A kandev that cannot run in the image (no usable glibc) ends its container at
            // once: say that, and remove the stopped container, rather than try again. A
            // running container (agents in it) is never removed here.
            if !c.is_running().await
                && let Err(err) = kandev_version_in(c.engine, &c.settings.image, &c.kandev).await
                && matches!(err, ContainerError::NoKandev { .. })
            {
                let _ = remove(c.engine, &c.name).await;
                return Err(lasting(err));
            }
            Err(failed(format!("the runner in the container {} did not answer: {why}", c.name)))
        })
    }
}

fn grace_arg(grace: Duration) -> String {
    format!("{}ms", grace.as_millis().max(1))
}

/// The container's runner through its socket in the mounted folder, started (`kandev runner
/// --start` exec'd in the container) when none listens. `None` when that does not work here,
/// or when what listens is not a process of this container: a socket file is the agent's to
/// replace (the folder is its home), and a symlink to a socket of this host must never lead
/// the server to a runner outside the container.
async fn direct(c: &TaskContainer) -> Option<Handshaken> {
    let dir = c.runner_dir();
    let stream = match connect_in(&dir).await {
        Ok(stream) => stream,
        Err(_) => {
            let grace = grace_arg(c.grace);
            let args = [
                "exec",
                "--",
                &c.name,
                KANDEV_IN_CONTAINER,
                "runner",
                "--start",
                "--socket",
                SOCKET_IN_CONTAINER,
                "--grace",
                &grace,
                "--one-thread",
            ];
            if let Err(err) = run(c.engine, &args, "exec").await {
                tracing::debug!(container = %c.name, error = %err, "cannot start the container's runner");
                return None;
            }
            connect_in(&dir).await.ok()?
        }
    };
    if !listens_in(c, &stream).await {
        tracing::warn!(container = %c.name, "the socket in the container's folder is not its runner's; using exec");
        return None;
    }
    tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake(stream)).await.ok()?.ok()
}

/// Connects to `runner.sock` in `dir`, through the folder's descriptor when the path is
/// longer than a socket address holds (107 bytes).
async fn connect_in(dir: &Path) -> std::io::Result<UnixStream> {
    let socket = dir.join("runner.sock");
    if socket.as_os_str().len() < 100 {
        return UnixStream::connect(&socket).await;
    }
    let folder = std::fs::File::open(dir)?;
    UnixStream::connect(format!("/proc/self/fd/{}/runner.sock", folder.as_raw_fd())).await
}

/// Whether the peer of `stream` runs in `c` (the same PID namespace as the container's
/// first process). `false` on any doubt.
async fn listens_in(c: &TaskContainer, stream: &UnixStream) -> bool {
    let Some(peer) = stream.peer_cred().ok().and_then(|cred| cred.pid()) else { return false };
    let args = ["container", "inspect", "--format", "{{.State.Pid}}", "--", &c.name];
    let Ok(first) = run(c.engine, &args, "inspect").await else { return false };
    let namespace = |pid: &str| std::fs::read_link(format!("/proc/{pid}/ns/pid")).ok();
    let theirs = namespace(&peer.to_string());
    theirs.is_some() && theirs == namespace(first.trim())
}

/// Makes `dir` (and its parents), owner-only.
fn make_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}

#[cfg(test)]
mod tests {
    use kandev_domain::container::ContainerNetwork;

    use super::*;

    fn container() -> TaskContainer {
        TaskContainer {
            engine: ContainerEngine::Podman,
            settings: ContainerSettings {
                engine: None,
                image: "localhost/agents:1".into(),
                network: ContainerNetwork::None,
                cpu_millis: Some(1500),
                memory_mib: Some(512),
                mounts: vec![],
            },
            name: TaskContainer::name_for("t1"),
            task_id: "t1".into(),
            home: "/home/me/.kandev".into(),
            kandev: "/usr/bin/kandev".into(),
            worktrees: vec![],
            agents: None,
            grace: Duration::from_secs(600),
            remake_if_changed: false,
        }
    }

    #[test]
    fn i42_s1_a_container_has_no_network_by_default_and_its_limits() {
        let args = container().run_args().unwrap().join(" ");
        assert!(args.contains("--network none"), "{args}");
        assert!(args.contains("--cpus 1.500"), "{args}");
        assert!(args.contains("--memory 512m"), "{args}");
        assert!(args.contains("-v /usr/bin/kandev:/opt/kandev/kandev:ro"), "{args}");
        // The runner's folder is the server's, so it reaches the runner's socket directly.
        assert!(args.contains("-v /home/me/.kandev/containers/kandev-t1:/kandev-home "), "{args}");
        assert!(args.ends_with("-- localhost/agents:1 /opt/kandev/kandev idle"), "{args}");
        let mut full = container();
        full.settings.network = ContainerNetwork::Full;
        assert!(!full.run_args().unwrap().join(" ").contains("--network"));
    }

    #[test]
    fn i51_3_kandev_s_agent_installs_are_mounted_read_only() {
        let agents = tempfile::tempdir().unwrap();
        let mut c = container();
        c.agents = Some(agents.path().to_owned());
        let args = c.run_args().unwrap().join(" ");
        let shown = agents.path().display();
        assert!(args.contains(&format!("-v {shown}:{shown}:ro ")), "{args}");
        // Not there (nothing installed yet): not mounted, and no error.
        c.agents = Some(agents.path().join("none"));
        assert!(!c.run_args().unwrap().join(" ").contains(&format!("{shown}/none")));
    }

    #[test]
    fn i42_s1_a_missing_mount_is_an_error_before_anything_runs() {
        let mut c = container();
        c.settings.mounts = vec!["/no/such/kandev-mount".into()];
        let err = c.run_args().unwrap_err().to_string();
        assert!(err.contains("/no/such/kandev-mount does not exist"), "{err}");
    }
}
