//! Running a repository's setup script in a fresh worktree: `sh -c`, its own process group,
//! combined output kept to a bounded tail, killed on timeout.

use std::os::fd::OwnedFd;
use std::path::Path;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::net::unix::pipe;
use tokio::process::Command;
use tokio::sync::mpsc;

use super::GitError;
use super::cmd::{ensure_dir, read_into_ring, scrub_env, wait_draining};
use crate::group::ProcessGroup;
use crate::stderr::StderrRing;

/// How much of the script's combined output is kept: the last 64 KiB.
pub const SETUP_OUTPUT_LIMIT: usize = 64 * 1024;

/// How many of the last output lines an error carries.
const ERROR_TAIL_LINES: usize = 20;

/// How long to wait for a killed script to be reaped.
const KILL_WAIT: Duration = Duration::from_secs(5);

/// What `sh -c` runs: a watchdog in the script's group, then the script itself (`exec`, so
/// it leads the group and its exit status is the script's). The watchdog reads stdin, the
/// read end of a pipe whose only write end this process holds: when this process ends
/// without saying `done` (killed, e.g. a `kandev remote-op` whose runner stopped it with its
/// whole process group, issue 20), the read meets end of file and the watchdog kills the
/// script's group; the script never outlives its owner and its timeout. The script itself
/// gets stdin from `/dev/null`.
const WATCHDOG: &str = "exec 3<&0 </dev/null
(read -r said <&3 || kill -KILL 0) >/dev/null 2>&1 &
exec 3<&-
exec sh -c \"$1\"";

/// A setup script that succeeded.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SetupOutput {
    pub exit_code: i32,
    /// Combined stdout and stderr in the order written, bounded to the last
    /// [`SETUP_OUTPUT_LIMIT`] bytes (then starting at a line boundary).
    pub output: String,
}

/// Runs `script` with `sh -c` in `worktree`, in its own process group, with stdin closed and
/// the server's environment minus variables that would point git elsewhere (`GIT_DIR`, ...)
/// and with `GIT_TERMINAL_PROMPT=0`.
///
/// A non-zero exit or death by a signal gives [`GitError::SetupFailed`] with the exit code and
/// the last 20 output lines; running longer than `timeout` kills the whole group and gives
/// [`GitError::SetupTimedOut`]. Dropping the future also kills the group, and so does the
/// end of this process (a watchdog in the group, [`WATCHDOG`]). Processes the script leaves
/// running in the background after it exits successfully are not killed. An empty script
/// succeeds without starting anything.
pub async fn run_setup_script(
    worktree: &Path,
    script: &str,
    timeout: Duration,
) -> Result<SetupOutput, GitError> {
    run_setup_script_streaming(worktree, script, timeout, None).await
}

/// [`run_setup_script`], also sending the output as it comes on `live` (chunks of text,
/// split anywhere). A receiver that lags loses chunks (`try_send`), never the script's
/// progress; the returned tail is complete either way.
pub async fn run_setup_script_streaming(
    worktree: &Path,
    script: &str,
    timeout: Duration,
    live: Option<mpsc::Sender<String>>,
) -> Result<SetupOutput, GitError> {
    run_script_through(&[], worktree, script, timeout, live, &[]).await
}

/// [`run_setup_script_streaming`] with `sh` run by `through` (a program and its arguments,
/// e.g. `podman exec -i -w <worktree> <container>`: a task's container, issue 42). The
/// watchdog's pipe is that program's stdin, which it must carry to `sh` (`exec -i` does), so
/// the script still ends with its owner and its timeout, there. `env` (a repository's script
/// secrets, issue 50) is added to the script's environment; through a container, as `-e
/// NAME` options before the container (`through`'s last word) with the values in the
/// engine command's own environment.
pub async fn run_script_through(
    through: &[String],
    worktree: &Path,
    script: &str,
    timeout: Duration,
    live: Option<mpsc::Sender<String>>,
    env: &[(String, String)],
) -> Result<SetupOutput, GitError> {
    ensure_dir(worktree, || GitError::NotFound { path: worktree.to_path_buf() }).await?;
    if script.trim().is_empty() {
        return Ok(SetupOutput { exit_code: 0, output: String::new() });
    }
    let io_err = |context: &str| {
        let context = context.to_owned();
        move |e| GitError::io(context, e)
    };
    let (reader, writer) =
        std::io::pipe().map_err(io_err("failed to create a pipe for the setup script"))?;
    let writer_for_stderr =
        writer.try_clone().map_err(io_err("failed to create a pipe for the setup script"))?;
    // The owner's end of the watchdog pipe (see [`WATCHDOG`]): closed without a word when
    // this process dies, however it dies.
    let (owner_gone, mut owner) =
        std::io::pipe().map_err(io_err("failed to create a pipe for the setup script"))?;

    let mut command = match through.split_first() {
        Some((program, args)) => {
            // `args` ends with the container: each variable goes before it as `-e NAME`,
            // which takes its value from this command's environment, never its arguments
            // (which `ps` shows).
            let mut command = Command::new(program);
            if let Some((container, options)) = args.split_last() {
                command.args(options);
                for (name, _) in env {
                    command.arg("-e").arg(name);
                }
                command.arg(container);
            }
            command.arg("sh");
            command
        }
        None => Command::new("sh"),
    };
    command
        .arg("-c")
        .arg(WATCHDOG)
        .arg("sh")
        .arg(script)
        .current_dir(worktree)
        .stdin(owner_gone)
        .stdout(writer)
        .stderr(writer_for_stderr);
    scrub_env(&mut command);
    command.envs(env.iter().map(|(name, value)| (name, value)));
    let spawned = ProcessGroup::spawn(&mut command);
    // The command holds the parent's copies of the write end; without dropping them the
    // pipe never reaches end of file.
    drop(command);
    let (mut child, group) =
        spawned.map_err(io_err("failed to start the setup script with `sh`"))?;
    let reader = pipe::Receiver::from_owned_fd(OwnedFd::from(reader))
        .map_err(io_err("failed to read the setup script's output"))?;

    let mut ring = StderrRing::new(SETUP_OUTPUT_LIMIT);
    let readers = async {
        match live {
            Some(live) => read_teeing(reader, &mut ring, &live).await,
            None => read_into_ring(reader, &mut ring).await,
        }
    };
    let finished = tokio::time::timeout(timeout, wait_draining(&mut child, readers)).await;
    match finished {
        Ok(Ok(status)) => {
            // Lets the watchdog go without killing what the script left running.
            let _ = std::io::Write::write_all(&mut owner, b"done\n");
            drop(owner);
            group.release();
            let output = ring.tail();
            tracing::debug!(worktree = %worktree.display(), %status, "setup script finished");
            match status.code() {
                Some(0) => Ok(SetupOutput { exit_code: 0, output }),
                exit_code => Err(GitError::SetupFailed {
                    exit_code,
                    output_tail: last_lines(&output, ERROR_TAIL_LINES),
                }),
            }
        }
        Ok(Err(e)) => Err(GitError::io("failed to wait for the setup script", e)),
        Err(_elapsed) => {
            group.kill();
            let _ = tokio::time::timeout(KILL_WAIT, child.wait()).await;
            group.release();
            Err(GitError::SetupTimedOut {
                timeout,
                output_tail: last_lines(&ring.tail(), ERROR_TAIL_LINES),
            })
        }
    }
}

/// Reads until end of file into `ring`, sending each chunk on `live` as well.
async fn read_teeing(
    mut reader: impl AsyncRead + Unpin,
    ring: &mut StderrRing,
    live: &mpsc::Sender<String>,
) {
    let mut chunk = vec![0u8; 8 * 1024];
    let mut partial = Vec::new(); // an incomplete UTF-8 sequence held for the next chunk
    loop {
        match reader.read(&mut chunk).await {
            Ok(0) => return,
            Ok(n) => {
                ring.push(&chunk[..n]);
                partial.extend_from_slice(&chunk[..n]);
                let valid = match std::str::from_utf8(&partial) {
                    Ok(_) => partial.len(),
                    Err(e) if e.error_len().is_none() => e.valid_up_to(),
                    Err(_) => partial.len(), // not UTF-8: sent lossily
                };
                let text = String::from_utf8_lossy(&partial[..valid]).into_owned();
                partial.drain(..valid);
                if !text.is_empty() {
                    let _ = live.try_send(text);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                tracing::debug!(error = %e, "reading the setup script's output failed");
                return;
            }
        }
    }
}

/// The last `n` lines of `text`.
fn last_lines(text: &str, n: usize) -> String {
    let trimmed = text.trim_end_matches('\n');
    let start = trimmed.rmatch_indices('\n').nth(n.saturating_sub(1)).map_or(0, |(i, _)| i + 1);
    trimmed[start..].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_lines_keeps_the_end() {
        assert_eq!(last_lines("a\nb\nc\n", 2), "b\nc");
        assert_eq!(last_lines("a\nb\nc", 5), "a\nb\nc");
        assert_eq!(last_lines("", 3), "");
        assert_eq!(last_lines("only", 1), "only");
    }
}
