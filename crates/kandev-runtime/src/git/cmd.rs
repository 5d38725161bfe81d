//! Running the `git` CLI as a short-lived child: a scrubbed environment, no prompts, bounded
//! output, a deadline, and its own process group that is killed on timeout or cancellation.

use std::ffi::{OsStr, OsString};
use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::{Child, Command};

use super::GitError;
use crate::group::ProcessGroup;
use crate::stderr::StderrRing;

/// Deadline for a single git command. Generous: a checkout of a large repository or a slow
/// hook may take a while, but a command waiting on something that never comes (a signing
/// prompt, a stuck hook) must not block a task forever.
pub(crate) const GIT_TIMEOUT: Duration = Duration::from_secs(600);

/// How much of git's stderr is kept for error messages.
const STDERR_LIMIT: usize = 16 * 1024;

/// Default cap on captured stdout; only `git diff` uses a smaller one.
const DEFAULT_STDOUT_LIMIT: usize = 256 * 1024 * 1024;

/// After the leader exited, how long output pipes are still read. A background process
/// started by a hook or setup script may keep them open forever.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// How long to wait for a killed process to be reaped.
const KILL_WAIT: Duration = Duration::from_secs(5);

/// Variables that would point git at another repository, index or object store than the
/// directory it runs in. They are set, for example, when the server is started from a git
/// hook, and they would also leak into setup scripts.
const SCRUBBED_ENV: &[&str] = &[
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_PREFIX",
    "GIT_CEILING_DIRECTORIES",
    "GIT_DISCOVERY_ACROSS_FILESYSTEM",
    "GIT_QUARANTINE_PATH",
    "GIT_CONFIG_PARAMETERS",
    "GIT_EXTERNAL_DIFF",
];

/// Removes repository-locating variables and disables credential prompts.
pub(crate) fn scrub_env(command: &mut Command) {
    for name in SCRUBBED_ENV {
        command.env_remove(name);
    }
    command.env("GIT_TERMINAL_PROMPT", "0");
}

/// A git invocation being built.
#[derive(Debug, Clone)]
pub(crate) struct Git {
    cwd: PathBuf,
    config: Vec<String>,
    args: Vec<OsString>,
    /// Extra environment (only the SSH executor's push sets one: `GIT_SSH_COMMAND`).
    env: Vec<(OsString, OsString)>,
    stdout_limit: usize,
    /// What git reads on stdin (none: `/dev/null`).
    stdin: Option<Vec<u8>>,
}

/// What a finished git command printed.
#[derive(Debug)]
pub(crate) struct Output {
    pub(crate) status: ExitStatus,
    pub(crate) stdout: Vec<u8>,
    /// Stdout was longer than the limit; the rest was not read and git was cut off (its
    /// exit status is then meaningless).
    pub(crate) stdout_truncated: bool,
    pub(crate) stderr: String,
}

impl Output {
    pub(crate) fn success(&self) -> bool {
        self.status.success()
    }

    /// Stdout as text without the trailing newline.
    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).trim_end_matches(['\n', '\r']).to_owned()
    }
}

impl Git {
    /// `git` running in `cwd`.
    pub(crate) fn new(cwd: impl Into<PathBuf>) -> Self {
        Self {
            cwd: cwd.into(),
            config: Vec::new(),
            args: Vec::new(),
            env: Vec::new(),
            stdout_limit: DEFAULT_STDOUT_LIMIT,
            stdin: None,
        }
    }

    /// Gives git `bytes` on stdin (a commit message with `-F -`: an argument is bounded to
    /// 128 KiB).
    pub(crate) fn stdin_bytes(mut self, bytes: impl Into<Vec<u8>>) -> Self {
        self.stdin = Some(bytes.into());
        self
    }

    /// Sets a variable in git's environment.
    pub(crate) fn env(mut self, name: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.env.push((name.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    /// Adds `-c key=value` before the subcommand.
    pub(crate) fn config(mut self, key_value: impl Into<String>) -> Self {
        self.config.push(key_value.into());
        self
    }

    pub(crate) fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    pub(crate) fn args<I, A>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = A>,
        A: AsRef<OsStr>,
    {
        self.args.extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// Reads at most `bytes` of stdout; git is cut off after that.
    pub(crate) fn stdout_limit(mut self, bytes: usize) -> Self {
        self.stdout_limit = bytes;
        self
    }

    /// The command line for error messages (long arguments such as commit messages are cut).
    pub(crate) fn describe(&self) -> String {
        let mut text = String::from("git");
        for arg in &self.args {
            text.push(' ');
            text.push_str(&arg.to_string_lossy());
        }
        if text.chars().count() > 160 {
            text = text.chars().take(157).collect::<String>() + "...";
        }
        text
    }

    /// Runs the command; a non-zero exit is not an error here.
    pub(crate) async fn output(&self) -> Result<Output, GitError> {
        let mut command = Command::new("git");
        command.arg("-c").arg("core.quotepath=off");
        for kv in &self.config {
            command.arg("-c").arg(kv);
        }
        command
            .args(&self.args)
            .current_dir(&self.cwd)
            .stdin(if self.stdin.is_some() { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        scrub_env(&mut command);
        // English messages (they end up in errors), no pager, and no index refresh by
        // read-only commands, which would fight over `index.lock` with the agent's own git.
        command.env("LC_ALL", "C").env("GIT_PAGER", "cat").env("GIT_OPTIONAL_LOCKS", "0");
        command.envs(self.env.iter().map(|(k, v)| (k, v)));

        let (mut child, group) = ProcessGroup::spawn(&mut command).map_err(|source| {
            let context = if source.kind() == io::ErrorKind::NotFound && self.cwd.is_dir() {
                "failed to start `git`; install git and make sure it is on PATH".to_owned()
            } else {
                format!("failed to start `{}` in `{}`", self.describe(), self.cwd.display())
            };
            GitError::io(context, source)
        })?;
        let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
            return Err(GitError::io(
                format!("failed to capture the output of `{}`", self.describe()),
                io::Error::other("no stdout or stderr pipe"),
            ));
        };

        if let (Some(bytes), Some(mut pipe)) = (self.stdin.clone(), child.stdin.take()) {
            // Ends with the write, or when git exits (the pipe breaks).
            #[expect(
                clippy::disallowed_methods,
                reason = "feeds git's stdin; ends with the write, or when git exits and the pipe breaks"
            )]
            tokio::spawn(async move {
                let _ = tokio::io::AsyncWriteExt::write_all(&mut pipe, &bytes).await;
            });
        }
        let mut out = Vec::new();
        let mut truncated = false;
        let mut err = StderrRing::new(STDERR_LIMIT);
        let finished = {
            let readers = async {
                tokio::join!(
                    read_limited(stdout, self.stdout_limit, &mut out, &mut truncated),
                    read_into_ring(stderr, &mut err)
                )
            };
            tokio::time::timeout(GIT_TIMEOUT, wait_draining(&mut child, readers)).await
        };
        match finished {
            Ok(Ok(status)) => {
                group.release();
                Ok(Output { status, stdout: out, stdout_truncated: truncated, stderr: err.tail() })
            }
            Ok(Err(source)) => {
                Err(GitError::io(format!("failed to wait for `{}`", self.describe()), source))
            }
            Err(_elapsed) => {
                group.kill();
                let _ = tokio::time::timeout(KILL_WAIT, child.wait()).await;
                group.release();
                Err(GitError::Timeout { command: self.describe(), timeout: GIT_TIMEOUT })
            }
        }
    }

    /// Runs the command and fails with [`GitError::Git`] on a non-zero exit (unless stdout
    /// was cut off on purpose).
    pub(crate) async fn run(&self) -> Result<Output, GitError> {
        let output = self.output().await?;
        if output.success() || output.stdout_truncated {
            Ok(output)
        } else {
            Err(self.failed(&output))
        }
    }

    /// Runs the command and returns its stdout as trimmed text.
    pub(crate) async fn text(&self) -> Result<String, GitError> {
        Ok(self.run().await?.text())
    }

    /// The error for a failed run of this command.
    pub(crate) fn failed(&self, output: &Output) -> GitError {
        let stderr = if output.stderr.trim().is_empty() {
            format!("git exited with {}", output.status)
        } else {
            output.stderr.clone()
        };
        GitError::Git { command: self.describe(), stderr }
    }
}

/// Waits for `child` while `readers` consume its output. If the child exits first, the
/// readers get [`DRAIN_GRACE`] to reach end of file and are then abandoned.
pub(crate) async fn wait_draining<F: Future>(
    child: &mut Child,
    readers: F,
) -> io::Result<ExitStatus> {
    tokio::pin!(readers);
    let mut readers_done = false;
    let status = tokio::select! {
        _ = &mut readers => {
            readers_done = true;
            None
        }
        status = child.wait() => Some(status),
    };
    match status {
        Some(status) => {
            if !readers_done {
                let _ = tokio::time::timeout(DRAIN_GRACE, &mut readers).await;
            }
            status
        }
        None => child.wait().await,
    }
}

/// Reads into `out` until end of file or until `limit` bytes were read. Returning drops
/// the reader, so a writer that is cut off gets `SIGPIPE`.
async fn read_limited(
    mut reader: impl AsyncRead + Unpin,
    limit: usize,
    out: &mut Vec<u8>,
    truncated: &mut bool,
) {
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        match reader.read(&mut chunk).await {
            Ok(0) => return,
            Ok(n) => {
                let room = limit.saturating_sub(out.len());
                if n > room {
                    out.extend_from_slice(&chunk[..room]);
                    *truncated = true;
                    return;
                }
                out.extend_from_slice(&chunk[..n]);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                tracing::debug!(error = %e, "reading git output failed");
                return;
            }
        }
    }
}

/// Reads until end of file, keeping only the most recent bytes.
pub(crate) async fn read_into_ring(mut reader: impl AsyncRead + Unpin, ring: &mut StderrRing) {
    let mut chunk = vec![0u8; 8 * 1024];
    loop {
        match reader.read(&mut chunk).await {
            Ok(0) => return,
            Ok(n) => ring.push(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                tracing::debug!(error = %e, "reading child output failed");
                return;
            }
        }
    }
}

/// Checks that `path` is an existing directory; `missing` builds the error otherwise.
pub(crate) async fn ensure_dir(
    path: &Path,
    missing: impl FnOnce() -> GitError,
) -> Result<(), GitError> {
    match tokio::fs::metadata(path).await {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(missing()),
        Err(e)
            if e.kind() == io::ErrorKind::NotFound || e.kind() == io::ErrorKind::NotADirectory =>
        {
            Err(missing())
        }
        Err(e) => Err(GitError::io(format!("failed to inspect `{}`", path.display()), e)),
    }
}
