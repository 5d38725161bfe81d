//! The SSH transport of a runner (issue 20, spec runners.md, "SSH executor"): the system
//! OpenSSH client reaches another machine, checks (and when needed replaces) the `kandev`
//! binary there, and runs `kandev runner --stdio` whose stdin/stdout carry the runner
//! protocol. [`SshTransport`] is how a [`RunnerClient`] opens (and reopens) its connection
//! there; everything else about the connection is the one runner stack's
//! ([`crate::runner::link`]).
//!
//! Every `ssh`/`scp` runs in batch mode (never a prompt) with strict host-key checking
//! against the executor's own known_hosts file only: an unknown or changed host key is
//! refused with a message that says how to trust it, never accepted on first use. A dropped
//! connection is a server-away period for the remote runner; the client opens it again with
//! back-off and the runner replays what was not acknowledged.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::future::BoxFuture;
use kandev_domain::executor::SshSettings;
use tokio::io::AsyncReadExt;
use tokio::process::{Child, Command};
use tokio_util::task::AbortOnDropHandle;

use crate::group::ProcessGroup;
pub use crate::runner::link::Backoff;
use crate::runner::link::{Handshaken, OpenError, Opened, Transport, TransportGuard, handshake};
use crate::runner::{ExecutionInfo, ProtocolError, RunnerClient};

/// How long one short remote command (version check, `mkdir`, `mv`) may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);
/// How long copying the binary may take.
const COPY_TIMEOUT: Duration = Duration::from_secs(600);
/// How long the runner protocol's handshake may take once `ssh` runs: `ConnectTimeout` and
/// `ServerAliveInterval` do not cover a live sshd whose remote command never answers.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);
/// How much of an `ssh` stderr is kept for messages.
const STDERR_TAIL: usize = 4096;

/// What can go wrong reaching a runner over SSH. Each message says what to do.
#[derive(Debug, thiserror::Error)]
pub enum SshError {
    #[error(
        "cannot run `{program}`: {source}; install OpenSSH's client (e.g. apt-get install openssh-client)"
    )]
    NoClient {
        program: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the host key of {target} is not in {known_hosts}: check the key's fingerprint with the \
         host's owner, then trust it with: ssh-keyscan -p {port} {host} >> {known_hosts}"
    )]
    UnknownHostKey { target: String, host: String, port: u16, known_hosts: String },
    #[error(
        "the host key of {target} is not the one in {known_hosts}: the host was reinstalled or \
         someone is intercepting the connection; if the change is expected, remove the old key \
         with: ssh-keygen -f {known_hosts} -R '[{host}]:{port}' and trust the new one"
    )]
    ChangedHostKey { target: String, host: String, port: u16, known_hosts: String },
    #[error("ssh to {target} failed: {message}")]
    Connect { target: String, message: String },
    #[error("ssh to {target} timed out after {after:?} ({what})")]
    Timeout { target: String, what: &'static str, after: Duration },
    #[error("cannot run this kandev ({path}) to learn its version: {message}")]
    LocalVersion { path: String, message: String },
    #[error("cannot install kandev on {target} at {path}: {message}")]
    Install { target: String, path: String, message: String },
    #[error("the runner on {target}: {source}")]
    Protocol {
        target: String,
        #[source]
        source: ProtocolError,
    },
}

impl SshError {
    /// Whether trying again later may help (a refused host key or a broken install does not).
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            SshError::Connect { .. } | SshError::Timeout { .. } | SshError::Protocol { .. }
        )
    }
}

/// What [`SshRunner::install`] found on the remote host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Installed {
    /// The remote `kandev` already was this version.
    Present,
    /// It was missing or of another version (what it reported) and was replaced.
    Copied { previous: Option<String> },
}

/// A runner on another machine, reached over SSH.
#[derive(Debug, Clone)]
pub struct SshRunner {
    settings: SshSettings,
    /// The binary copied to the remote host (this server's own).
    local_kandev: PathBuf,
    /// The remote runner's owner-gone grace period.
    grace: Duration,
    /// How long [`Self::open`] waits for the runner's `welcome`.
    handshake_timeout: Duration,
}

/// The `ssh` client of a connection. Dropping it kills the client (the remote runner keeps
/// its agents for its grace period).
pub struct SshClientProcess {
    child: Child,
    group: ProcessGroup,
    /// Reads ssh's stderr; ends with the connection.
    _stderr: AbortOnDropHandle<()>,
}

impl TransportGuard for SshClientProcess {
    fn kill(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            self.group.kill();
            let _ = self.child.wait().await;
        })
    }

    /// The connection's write side is shut by then: `ssh` gets end of input and is given
    /// `bound` to carry what was written (the last acknowledgements) to the runner and exit;
    /// killed past that. Killing it at once could lose an acknowledgement still in its pipe,
    /// and the runner would keep a finished execution for its whole grace.
    fn close(mut self: Box<Self>, bound: Duration) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            let _ = tokio::time::timeout(bound, self.child.wait()).await;
        })
    }
}

/// One SSH channel to the remote runner, after the handshake, on a client that does not
/// reconnect by itself (tests that play the drops; [`SshTransport`] is what reconnects).
pub struct SshConnection {
    pub client: RunnerClient,
    /// The executions the runner already held (from an earlier connection).
    pub executions: Vec<ExecutionInfo>,
    process: SshClientProcess,
}

impl SshConnection {
    /// The local `ssh` client's pid.
    pub fn ssh_pid(&self) -> Option<u32> {
        self.process.child.id()
    }

    /// Kills the `ssh` client: the connection drops as if the network went away.
    pub async fn drop_transport(&mut self) {
        self.process.kill().await;
        self.client.closed().await;
    }
}

/// How a [`RunnerClient`] reaches an executor's runner: the first open installs this
/// server's `kandev` there when needed ([`SshRunner::install`]), every open runs
/// `kandev runner --stdio` over a new `ssh`.
pub struct SshTransport {
    runner: SshRunner,
    installed: bool,
}

impl SshTransport {
    pub fn new(runner: SshRunner) -> Self {
        Self { runner, installed: false }
    }
}

impl Transport for SshTransport {
    fn open(&mut self) -> BoxFuture<'_, Result<Opened, OpenError>> {
        Box::pin(async move {
            let failed = |err: SshError| OpenError {
                transient: err.is_transient(),
                message: err.to_string(),
            };
            if !self.installed {
                self.runner.install().await.map_err(failed)?;
                self.installed = true;
            }
            let (connection, process) = self.runner.open_channel().await.map_err(failed)?;
            Ok(Opened { connection, guard: Some(Box::new(process)) })
        })
    }
}

/// A client of `runner` that reopens its connection with `backoff`: installs and connects
/// (the errors of [`SshRunner::connect`]), with the executions the runner already held.
pub async fn connect_link(
    runner: SshRunner,
    backoff: Backoff,
) -> Result<(RunnerClient, Vec<ExecutionInfo>), OpenError> {
    RunnerClient::open(SshTransport::new(runner), backoff).await
}

/// `value` as one word of a POSIX shell command line.
fn quote(value: &str) -> String {
    format!("'{}'", value.replace('\'', r"'\''"))
}

impl SshRunner {
    /// `settings` must have passed [`SshSettings::validated`].
    pub fn new(settings: SshSettings, local_kandev: PathBuf, grace: Duration) -> Self {
        Self { settings, local_kandev, grace, handshake_timeout: HANDSHAKE_TIMEOUT }
    }

    /// How long [`Self::open`] waits for the remote runner's handshake (default
    /// [`HANDSHAKE_TIMEOUT`]); past it the attempt is a transient [`SshError::Timeout`].
    pub fn with_handshake_timeout(mut self, bound: Duration) -> Self {
        self.handshake_timeout = bound;
        self
    }

    pub fn settings(&self) -> &SshSettings {
        &self.settings
    }

    /// `user@host:port`, for messages.
    pub fn target(&self) -> String {
        format!("{}@{}:{}", self.settings.user, self.settings.host, self.settings.port)
    }

    /// Where the binary lives on the remote host.
    pub fn remote_kandev(&self) -> String {
        format!("{}/bin/kandev", self.settings.remote_home)
    }

    /// The remote runner's socket.
    pub fn remote_socket(&self) -> String {
        format!("{}/runner.sock", self.settings.remote_home)
    }

    /// The options every `ssh` and `scp` gets: batch mode, the configured key only, strict
    /// host-key checking against the configured known_hosts only, a dead peer noticed. The
    /// user's `~/.ssh/config` still applies (its `ProxyJump`, ciphers), but nothing of it may
    /// forward the agent, X11 or ports to the build host, or run a local command: a build
    /// host that is taken over must not get at this server's keys or ports.
    fn common_options(&self) -> Vec<OsString> {
        let s = &self.settings;
        let mut known = OsString::from("UserKnownHostsFile=");
        known.push(&s.known_hosts);
        let options: [&std::ffi::OsStr; 11] = [
            "BatchMode=yes".as_ref(),
            "StrictHostKeyChecking=yes".as_ref(),
            known.as_os_str(),
            "GlobalKnownHostsFile=/dev/null".as_ref(),
            "IdentitiesOnly=yes".as_ref(),
            "ConnectTimeout=15".as_ref(),
            "ServerAliveInterval=10".as_ref(),
            "ForwardAgent=no".as_ref(),
            "ForwardX11=no".as_ref(),
            "ClearAllForwardings=yes".as_ref(),
            "PermitLocalCommand=no".as_ref(),
        ];
        let mut args = Vec::new();
        for option in options {
            args.push(OsString::from("-o"));
            args.push(option.to_owned());
        }
        args.push("-o".into());
        args.push("ServerAliveCountMax=3".into());
        args.push("-i".into());
        args.push(s.identity_file.clone().into_os_string());
        args
    }

    /// The `GIT_SSH_COMMAND` that makes git's own ssh transport use this executor's options
    /// (a push of the base branch to the build host): every word shell-quoted.
    pub fn git_ssh_command(&self) -> String {
        let mut words = vec![quote("ssh")];
        for option in self.common_options() {
            words.push(quote(&option.to_string_lossy()));
        }
        words.join(" ")
    }

    /// `ssh://user@host:port<path>`: a repository at `path` on the build host, for git.
    pub fn git_url(&self, path: &str) -> String {
        let s = &self.settings;
        // `::1` and `[::1]` alike: brackets once.
        let bare = s.host.trim_start_matches('[').trim_end_matches(']');
        let host = if bare.contains(':') { format!("[{bare}]") } else { bare.to_owned() };
        format!("ssh://{}@{host}:{}{path}", s.user, s.port)
    }

    /// `ssh ... user@host <remote command>`.
    fn ssh(&self, remote: &str) -> Command {
        let s = &self.settings;
        let mut command = Command::new("ssh");
        command
            .arg("-T")
            .args(self.common_options())
            .arg("-p")
            .arg(s.port.to_string())
            .arg("--")
            .arg(format!("{}@{}", s.user, s.host))
            .arg(remote)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    }

    /// Runs a short command (`ssh` or `scp`) to its end; `Ok((success, stdout, stderr))`.
    async fn run(
        &self,
        program: &'static str,
        mut command: Command,
        what: &'static str,
        bound: Duration,
    ) -> Result<(bool, String, String), SshError> {
        let (child, group) = ProcessGroup::spawn(&mut command)
            .map_err(|source| SshError::NoClient { program, source })?;
        match tokio::time::timeout(bound, child.wait_with_output()).await {
            Ok(Ok(output)) => {
                group.release();
                let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
                let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
                let ok = output.status.success();
                if !ok && output.status.code() == Some(255) {
                    return Err(self.classify(&stderr));
                }
                Ok((ok, stdout, stderr))
            }
            Ok(Err(source)) => Err(SshError::NoClient { program, source }),
            // `group` dropped: the command is killed.
            Err(_) => Err(SshError::Timeout { target: self.target(), what, after: bound }),
        }
    }

    /// The error an `ssh` that exited 255 (its own failure, not the remote command's) means.
    fn classify(&self, stderr: &str) -> SshError {
        let s = &self.settings;
        let (target, host, port) = (self.target(), s.host.clone(), s.port);
        let known_hosts = s.known_hosts.display().to_string();
        if stderr.contains("REMOTE HOST IDENTIFICATION HAS CHANGED") {
            return SshError::ChangedHostKey { target, host, port, known_hosts };
        }
        if stderr.contains("host key is known for")
            || stderr.contains("Host key verification failed")
        {
            return SshError::UnknownHostKey { target, host, port, known_hosts };
        }
        SshError::Connect { target, message: last_lines(stderr) }
    }

    /// The local binary's `--version` line.
    async fn local_version(&self) -> Result<String, SshError> {
        let path = self.local_kandev.display().to_string();
        let output = Command::new(&self.local_kandev)
            .arg("--version")
            .stdin(Stdio::null())
            .output()
            .await
            .map_err(|e| SshError::LocalVersion { path: path.clone(), message: e.to_string() })?;
        let version = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        if !output.status.success() || version.is_empty() {
            return Err(SshError::LocalVersion { path, message: "it printed no version".into() });
        }
        Ok(version)
    }

    /// What the remote `kandev --version` says (`None`: no executable there).
    pub async fn remote_version(&self) -> Result<Option<String>, SshError> {
        let bin = quote(&self.remote_kandev());
        let probe = format!("if [ -x {bin} ]; then {bin} --version; else echo kandev-missing; fi");
        let (_, stdout, _) =
            self.run("ssh", self.ssh(&probe), "the version check", COMMAND_TIMEOUT).await?;
        let version = stdout.trim();
        Ok((version != "kandev-missing" && !version.is_empty()).then(|| version.to_owned()))
    }

    /// Makes sure the remote `kandev` is this server's version: when it is missing or reports
    /// another version, this binary is copied with `scp` beside it and renamed over it (a
    /// runner still running the old one keeps its file). Fails with a message when the copy
    /// fails or the copied binary does not run there.
    pub async fn install(&self) -> Result<Installed, SshError> {
        let local = self.local_version().await?;
        let previous = self.remote_version().await?;
        if previous.as_deref() == Some(local.as_str()) {
            return Ok(Installed::Present);
        }
        let target = self.target();
        let path = self.remote_kandev();
        let fail = |message: String| SshError::Install {
            target: target.clone(),
            path: path.clone(),
            message,
        };
        let bin_dir = format!("{}/bin", self.settings.remote_home);
        let upload = format!("{bin_dir}/.kandev-upload-{}", std::process::id());
        let mkdir = format!("{} && mkdir -p {}", self.private_home(), quote(&bin_dir));
        let (ok, _, stderr) = self.run("ssh", self.ssh(&mkdir), "mkdir", COMMAND_TIMEOUT).await?;
        if !ok {
            return Err(fail(format!("mkdir failed: {}", last_lines(&stderr))));
        }
        let (ok, _, stderr) = self.run("scp", self.scp(&upload), "the copy", COPY_TIMEOUT).await?;
        if !ok {
            return Err(fail(format!("scp failed: {}", last_lines(&stderr))));
        }
        let rename =
            format!("chmod 755 {0} && mv -f {0} {1}", quote(&upload), quote(&self.remote_kandev()));
        let (ok, _, stderr) =
            self.run("ssh", self.ssh(&rename), "the rename", COMMAND_TIMEOUT).await?;
        if !ok {
            return Err(fail(format!("cannot replace the old binary: {}", last_lines(&stderr))));
        }
        match self.remote_version().await? {
            Some(version) if version == local => {
                tracing::info!(target = %self.target(), ?previous, %version, "installed kandev");
                Ok(Installed::Copied { previous })
            }
            other => Err(fail(format!(
                "the copied binary does not run there (it reports {other:?}); the remote host \
                 needs the same OS and CPU architecture as this server"
            ))),
        }
    }

    /// The shell command that makes `remote_home` exist and be owner-only (0700) whatever
    /// the remote umask: the runner's socket is bound there (and only then made 0600), so
    /// nobody else may reach into the directory first; whoever can connect owns every agent.
    fn private_home(&self) -> String {
        let home = quote(&self.settings.remote_home);
        format!("mkdir -p {home} && chmod 700 {home}")
    }

    /// `scp` of the local binary to `remote_path`.
    fn scp(&self, remote_path: &str) -> Command {
        let s = &self.settings;
        let host = if s.host.contains(':') { format!("[{}]", s.host) } else { s.host.clone() };
        let mut command = Command::new("scp");
        command
            .arg("-q")
            .arg("-B")
            .args(self.common_options())
            .arg("-P")
            .arg(s.port.to_string())
            .arg("--")
            .arg(&self.local_kandev)
            .arg(format!("{}@{host}:{remote_path}", s.user))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        command
    }

    /// [`Self::install`], then [`Self::open`].
    pub async fn connect(&self) -> Result<SshConnection, SshError> {
        self.install().await?;
        self.open().await
    }

    /// Opens a channel to the remote runner (`kandev runner --stdio`, which starts the runner
    /// when none listens on its socket) and handshakes, on a client that does not reconnect
    /// by itself. The binary must be installed.
    pub async fn open(&self) -> Result<SshConnection, SshError> {
        let (connection, process) = self.open_channel().await?;
        let executions = connection.executions.clone();
        let client = RunnerClient::connected(connection);
        Ok(SshConnection { client, executions, process })
    }

    /// Opens a channel to the remote runner and handshakes.
    async fn open_channel(&self) -> Result<(Handshaken, SshClientProcess), SshError> {
        let s = &self.settings;
        let remote = format!(
            "{private} && KANDEV_HOME={home} exec {bin} runner --stdio --socket {socket} \
             --grace {grace}ms",
            private = self.private_home(),
            home = quote(&s.remote_home),
            bin = quote(&self.remote_kandev()),
            socket = quote(&self.remote_socket()),
            grace = self.grace.as_millis().max(1),
        );
        let mut command = self.ssh(&remote);
        command.stdin(Stdio::piped());
        let (mut child, group) = ProcessGroup::spawn(&mut command)
            .map_err(|source| SshError::NoClient { program: "ssh", source })?;
        let (Some(stdout), Some(stdin), Some(mut stderr)) =
            (child.stdout.take(), child.stdin.take(), child.stderr.take())
        else {
            return Err(SshError::Connect {
                target: self.target(),
                message: "the ssh client's pipes are missing".into(),
            });
        };
        // ssh's own messages (and the relay's log lines), kept for errors and logged.
        let tail = Arc::new(Mutex::new(String::new()));
        let stderr_tail = tail.clone();
        let target = self.target();
        #[expect(
            clippy::disallowed_methods,
            reason = "owned: aborted on drop (`AbortOnDropHandle`)"
        )]
        let stderr_reader = AbortOnDropHandle::new(tokio::spawn(async move {
            let mut chunk = vec![0u8; 4096];
            while let Ok(n) = stderr.read(&mut chunk).await {
                if n == 0 {
                    break;
                }
                let text = String::from_utf8_lossy(&chunk[..n]).into_owned();
                tracing::debug!(target = %target, stderr = %text.trim_end(), "ssh");
                let mut tail = stderr_tail.lock().unwrap_or_else(PoisonError::into_inner);
                tail.push_str(&text);
                if tail.len() > STDERR_TAIL {
                    let cut = tail.len() - STDERR_TAIL;
                    let cut = (cut..tail.len()).find(|i| tail.is_char_boundary(*i)).unwrap_or(0);
                    tail.drain(..cut);
                }
            }
        }));
        let stream = tokio::io::join(stdout, stdin);
        let bound = self.handshake_timeout;
        let Ok(shaken) = tokio::time::timeout(bound, handshake(stream)).await else {
            // A live sshd whose remote command never answers: kill ssh, let the caller retry.
            drop(group);
            let _ = child.wait().await;
            return Err(SshError::Timeout {
                target: self.target(),
                what: "the runner's handshake: the remote `kandev runner --stdio` never answered",
                after: bound,
            });
        };
        match shaken {
            Ok(connection) => {
                Ok((connection, SshClientProcess { child, group, _stderr: stderr_reader }))
            }
            Err(source) => {
                // Let ssh finish writing why it failed, then explain with its words.
                let status = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
                drop(group);
                let said = tail.lock().unwrap_or_else(PoisonError::into_inner).clone();
                if matches!(status, Ok(Ok(status)) if status.code() == Some(255)) {
                    return Err(self.classify(&said));
                }
                match source {
                    ProtocolError::Closed | ProtocolError::Io(_) if !said.trim().is_empty() => {
                        Err(SshError::Connect { target: self.target(), message: last_lines(&said) })
                    }
                    source => Err(SshError::Protocol { target: self.target(), source }),
                }
            }
        }
    }

    /// Opens the channel again after a drop: attempts spaced by `backoff` while the failure
    /// may pass (a refused host key ends at once). The remote binary is not checked again.
    pub async fn reconnect(&self, backoff: Backoff) -> Result<SshConnection, SshError> {
        let mut delay = backoff.first;
        let mut attempt = 1;
        loop {
            match self.open().await {
                Ok(connection) => return Ok(connection),
                Err(err) if err.is_transient() && attempt < backoff.attempts => {
                    tracing::warn!(target = %self.target(), attempt, error = %err, "reconnecting");
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(backoff.max);
                    attempt += 1;
                }
                Err(err) => return Err(err),
            }
        }
    }
}

/// The last few lines of a tool's stderr, on one line.
fn last_lines(text: &str) -> String {
    let lines: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    let start = lines.len().saturating_sub(3);
    let joined = lines[start..].join("; ");
    if joined.is_empty() { "no message from ssh".to_owned() } else { joined }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runner() -> SshRunner {
        let settings = SshSettings {
            host: "build1".into(),
            port: 2222,
            user: "me".into(),
            identity_file: "/k/id".into(),
            known_hosts: "/k/known_hosts".into(),
            remote_home: "/srv/kandev".into(),
        };
        SshRunner::new(settings, "/usr/bin/kandev".into(), Duration::from_secs(600))
    }

    /// A host entered with its brackets gets them once in git's URL.
    #[test]
    fn i20_d9_an_ipv6_host_is_bracketed_once_in_the_git_url() {
        for host in ["::1", "[::1]"] {
            let mut settings = runner().settings.clone();
            settings.host = host.into();
            let runner = SshRunner::new(settings, "/k".into(), Duration::from_secs(1));
            assert_eq!(runner.git_url("/r.git"), "ssh://me@[::1]:2222/r.git", "{host}");
        }
        assert_eq!(runner().git_url("/r.git"), "ssh://me@build1:2222/r.git");
    }

    #[test]
    fn i20_a4_ssh_errors_say_how_to_trust_a_host() {
        let r = runner();
        let unknown = r.classify(
            "No ED25519 host key is known for [build1]:2222 and you have requested strict checking.\nHost key verification failed.\n",
        );
        assert!(matches!(unknown, SshError::UnknownHostKey { .. }), "{unknown:?}");
        let text = unknown.to_string();
        assert!(text.contains("ssh-keyscan -p 2222 build1 >> /k/known_hosts"), "{text}");
        let changed = r.classify(
            "@@@@\n@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\nHost key verification failed.\n",
        );
        assert!(matches!(changed, SshError::ChangedHostKey { .. }), "{changed:?}");
        assert!(changed.to_string().contains("ssh-keygen -f /k/known_hosts -R"), "{changed}");
        let refused = r.classify("ssh: connect to host build1 port 2222: Connection refused\n");
        assert!(refused.is_transient());
        assert!(refused.to_string().contains("Connection refused"), "{refused}");
    }

    /// The `-o` options of a command.
    fn options(command: &Command) -> Vec<String> {
        let args: Vec<String> =
            command.as_std().get_args().map(|a| a.to_string_lossy().into_owned()).collect();
        args.windows(2).filter(|w| w[0] == "-o").map(|w| w[1].clone()).collect()
    }

    #[test]
    fn i20_d2_no_forwarding_or_local_command_reaches_the_build_host() {
        let r = runner();
        for command in [r.ssh("true"), r.scp("/srv/kandev/bin/x")] {
            let options = options(&command);
            for wanted in [
                "ForwardAgent=no",
                "ForwardX11=no",
                "ClearAllForwardings=yes",
                "PermitLocalCommand=no",
                "BatchMode=yes",
                "StrictHostKeyChecking=yes",
            ] {
                assert!(options.iter().any(|o| o == wanted), "{wanted} missing in {options:?}");
            }
        }
    }

    #[test]
    fn i20_s3_remote_words_are_quoted() {
        assert_eq!(quote("/a b/it's"), r"'/a b/it'\''s'");
    }
}
