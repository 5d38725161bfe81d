//! Runners (docs/architecture.md, "Runners"): a process that owns agent processes for a
//! server and outlives it, and the one stack every execution off this process goes through.
//! [`proto`] is the wire protocol, [`host`] the runner, [`client`] the server's handle,
//! [`link`] the task that owns a connection and reopens it, [`ledger`] the acknowledgements
//! of output and input. The runner speaks over any byte stream; transports differ only in
//! how it is opened: the local runner's Unix socket under `$KANDEV_HOME` ([`LocalTransport`],
//! [`serve_unix`]), `ssh … kandev runner --stdio` ([`ssh::SshTransport`]),
//! `<engine> exec -i … kandev runner --stdio` in a task's container
//! ([`container::ContainerTransport`]), or a
//! given stream ([`RunnerClient::connect`]).

pub mod client;
pub mod container;
pub mod host;
pub mod ledger;
pub mod link;
pub mod ops;
pub mod proto;
pub mod ssh;

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::net::{UnixListener, UnixStream};

use link::{Opened, handshake};

pub use client::{RemoteControl, RemoteExecution, ResumedExecution, RunnerClient};
pub use host::{DEFAULT_BUFFER_LIMIT, DEFAULT_GRACE, INPUT_LIMIT, Runner, RunnerConfig};
pub use ledger::{AckPolicy, Acks, InputKeys, Inputs};
pub use link::{Backoff, LinkState, OpenError, SpawnError, Transport};
pub use proto::{ExecutionInfo, KEYS_KEPT, PROTOCOL_VERSION, ProtocolError, SpawnSpec};

/// How often a runner checks that its socket file still exists.
const SOCKET_CHECK: Duration = Duration::from_secs(1);

/// How long [`connect_or_start`] waits for a runner it started to listen.
const START_WAIT: Duration = Duration::from_secs(10);

/// The local runner's socket under a Kandev home.
pub fn socket_path(home: &Path) -> PathBuf {
    home.join("runner.sock")
}

/// Serves owner connections on `listener` until the runner ends (owner gone past the grace
/// period, or its socket file removed while no owner is connected: nobody can reach it any
/// more). Removes the socket file when it ends.
pub async fn serve_unix(listener: UnixListener, runner: Runner) -> io::Result<()> {
    let done = runner.done();
    let path = listener.local_addr()?.as_pathname().map(Path::to_path_buf);
    let mut check = tokio::time::interval(SOCKET_CHECK);
    loop {
        let stream = tokio::select! {
            _ = done.cancelled() => break,
            accepted = listener.accept() => accepted?.0,
            _ = check.tick() => {
                // Its socket removed (the home deleted), no server can reach it again.
                if path.as_ref().is_some_and(|p| !p.exists()) && !runner.has_owner() {
                    tracing::warn!("the runner's socket is gone; killing its agents");
                    runner.shutdown().await;
                    break;
                }
                continue;
            }
        };
        let runner = runner.clone();
        #[expect(
            clippy::disallowed_methods,
            reason = "serves one connection and ends with it; the runner's shutdown kills the agents it serves"
        )]
        tokio::spawn(async move {
            if let Err(err) = runner.serve_connection(stream).await {
                tracing::warn!(error = %err, "runner connection ended with an error");
            }
        });
    }
    if let Some(path) = path {
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}

/// Binds the runner's socket; a stale socket file (nobody listening) is replaced, a live one
/// is an error that says so. The socket is made owner-only (0600) whatever the umask: who
/// can connect owns every agent of the runner.
pub async fn bind(socket: &Path) -> io::Result<UnixListener> {
    if socket.exists() {
        if UnixStream::connect(socket).await.is_ok() {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!("a runner already listens on {}", socket.display()),
            ));
        }
        std::fs::remove_file(socket)?;
    }
    let listener = UnixListener::bind(socket)?;
    std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

/// Connects to the runner on `socket`, starting `program args` detached from this process's
/// group (it outlives the server; its stdio goes to `log`) when none listens.
pub async fn connect_or_start(
    socket: &Path,
    program: &Path,
    args: &[String],
    log: &Path,
) -> Result<UnixStream, String> {
    if let Ok(stream) = UnixStream::connect(socket).await {
        return Ok(stream);
    }
    let log_file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| format!("cannot open the runner log {}: {e}", log.display()))?;
    let err_file = log_file
        .try_clone()
        .map_err(|e| format!("cannot open the runner log {}: {e}", log.display()))?;
    let mut command = tokio::process::Command::new(program);
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::from(log_file))
        .stderr(Stdio::from(err_file))
        // Its own group: a signal to the server's group (Ctrl-C) does not reach it.
        .process_group(0)
        .kill_on_drop(false);
    let child = command
        .spawn()
        .map_err(|e| format!("cannot start the runner {}: {e}", program.display()))?;
    tracing::info!(pid = child.id(), socket = %socket.display(), "started the local runner");
    // Not awaited: the runner outlives this server (tokio reaps it if it ends first).
    drop(child);
    let deadline = tokio::time::Instant::now() + START_WAIT;
    loop {
        match UnixStream::connect(socket).await {
            Ok(stream) => return Ok(stream),
            Err(err) if tokio::time::Instant::now() >= deadline => {
                return Err(format!(
                    "the runner did not listen on {} within {START_WAIT:?} ({err}); see {}",
                    socket.display(),
                    log.display()
                ));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

/// How a server reaches its local runner: the socket under its home, starting the runner
/// (`program args`, its output to `log`) when none listens, as the first time.
pub struct LocalTransport {
    pub socket: PathBuf,
    pub program: PathBuf,
    pub args: Vec<String>,
    pub log: PathBuf,
}

impl Transport for LocalTransport {
    fn open(&mut self) -> BoxFuture<'_, Result<Opened, OpenError>> {
        Box::pin(async move {
            let stream = connect_or_start(&self.socket, &self.program, &self.args, &self.log)
                .await
                .map_err(|message| OpenError { message, transient: true })?;
            let connection = handshake(stream).await.map_err(|err| OpenError {
                // A runner that is ending refuses for a moment; another version for good.
                transient: !matches!(err, ProtocolError::VersionMismatch { .. }),
                message: format!("cannot use the runner on {}: {err}", self.socket.display()),
            })?;
            Ok(Opened { connection, guard: None })
        })
    }
}
