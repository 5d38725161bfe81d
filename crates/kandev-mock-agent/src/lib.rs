//! A deterministic, scripted ACP agent for tests, benchmarks and first runs.
//!
//! `kandev fake-tui` runs [`tui`], a fake of an agent's own terminal UI (issue 52).
//!
//! The `kandev mock-agent [flags]` command runs [`run_stdio`] (flatten [`MockArgs`] into the
//! CLI, convert with `MockConfig::from`); tests link the library and call [`run`] over
//! in-process pipes (`tokio::io::duplex`). Behaviour is described in `spec/mock-agent.md`:
//! an `echo: <first line>` reply by default, a `#!mock` script language ([`script`]), and
//! failure flags ([`MockArgs`]). `examples/mock_agent.rs` runs it on stdio without `kandev`.
//!
//! Wire details a client can rely on:
//! - `initialize` advertises `loadSession` (unless `--no-load-session`) and one auth method
//!   (two with `--require-auth`, which makes `session/prompt` answer -32000 until
//!   `authenticate` with one of them succeeded on this connection; an unknown method is -32602);
//!   `session/new` and `session/load` answer `modes` (`default`, `plan`), `configOptions`
//!   (`mode`, `model`, `thought_level`) and legacy `models`, then send an
//!   `available_commands_update`; `session/set_mode` (and `set_config_option` of `mode`)
//!   answer, then send a `current_mode_update`. Unknown ids or values answer -32602.
//! - A prompt's text is its text blocks joined by newlines; a session must have been opened
//!   on this connection (`new` or `load`) to take prompts, otherwise -32002.
//! - `stream` chunk texts come from [`script::stream_chunk_text`], so readers can verify them.
//!
//! State dir layout (`--state-dir`): `sessions/<id>.json` (cwd, mode, model, thought level),
//! `sessions/<id>.jsonl` (the history `session/load` replays: the user's prompt as
//! `user_message_chunk`, consecutive agent/thought chunks merged into one, tool calls, tool
//! call updates and plans; not usage, commands, mode updates, `garbage` or `bigline`), and
//! `calls.log` (see [`Counters`]).
//!
//! Invariants:
//! - The read loop never waits for a turn: prompts run as tasks, so `session/cancel` and
//!   answers to `session/request_permission` are read while a turn sleeps or waits.
//! - Every output line goes through one channel to one writer: one JSON message per line,
//!   each task's messages in order, flushed as soon as the queue is empty.
//! - Quick requests are answered inline, in the order they arrive.
//! - With a state dir, conversations and call records survive the process; without one,
//!   conversations live in memory and no calls are recorded.
//! - Nothing here starts a process or exits one: `crash` is an outcome of [`run`]
//!   ([`RunOutcome::Crashed`]) that the binary turns into `std::process::exit`.

mod agent;
mod catalog;
mod config;
mod counters;
mod error;
mod mcp;
mod rpc;
pub mod script;
mod store;
pub mod tui;
mod turn;

use std::sync::{Arc, Mutex, MutexGuard};

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::agent::{Agent, Outgoing};

pub use crate::catalog::{CONFIG_IDS, MODELS, MODES, THOUGHT_LEVELS};
pub use crate::config::{ArgsError, FailKind, MockArgs, MockConfig};
pub use crate::counters::{CALLS_FILE, Call, CallKind, CallOutcome, Counters};
pub use crate::error::{MockError, StateError};
pub use crate::rpc::{RpcError, codes};
pub use crate::turn::GARBAGE_LINE;

/// How many output lines may wait for the writer before producers wait.
const OUTPUT_QUEUE: usize = 1024;
/// Most lines written between two flushes while the queue stays busy.
const MAX_LINES_PER_FLUSH: usize = 256;
/// Most bytes gathered before they are written (the `BufWriter` size this replaced).
const FLUSH_BYTES: usize = 64 * 1024;

/// How a run ended without error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunOutcome {
    /// The input ended; running turns were dropped.
    Eof,
    /// A script said `crash [code]`; everything before it was written and flushed.
    Crashed {
        /// The exit code the process should end with.
        code: i32,
    },
}

impl RunOutcome {
    /// The process exit code for this outcome (0 at end of input).
    pub fn exit_code(self) -> i32 {
        match self {
            RunOutcome::Eof => 0,
            RunOutcome::Crashed { code } => code,
        }
    }
}

/// Locks a mutex, ignoring poisoning (the guarded data stays consistent: no panics inside).
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Serves one client over `input`/`output` until the input ends or a script crashes.
///
/// Turns still running at end of input are dropped (like a process that exits on stdin EOF).
pub async fn run<R, W>(config: MockConfig, input: R, output: W) -> Result<RunOutcome, MockError>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send,
{
    let (tx, rx) = mpsc::channel(OUTPUT_QUEUE);
    let agent = Arc::new(Agent::new(config, tx)?);
    let reader = read_loop(agent, input);
    let writer = write_loop(rx, output);
    tokio::pin!(reader, writer);
    let mut read_result = None;
    loop {
        tokio::select! {
            result = &mut reader, if read_result.is_none() => read_result = Some(result),
            result = &mut writer => {
                return match result? {
                    WriterEnd::Crash(code) => Ok(RunOutcome::Crashed { code }),
                    // All senders are gone, so the reader has finished.
                    WriterEnd::Drained => read_result.unwrap_or(Ok(())).map(|()| RunOutcome::Eof),
                };
            }
        }
    }
}

/// Serves the process's stdin/stdout and returns the exit code (0 at end of input, the
/// `crash` code, 1 on an IO error). The caller should `std::process::exit` with it right
/// away: tokio's stdin keeps a blocking read that would delay a runtime shutdown.
///
/// When stdin and stdout are pipes (as an ACP client starts an agent) they are used as
/// non-blocking pipes on this thread, like a real agent's event loop does; tokio's
/// `stdin()`/`stdout()` hand every read and write to a thread of the blocking pool: two
/// thread wake-ups per line of a paced stream (issue 15). Anything else (a terminal, a
/// file) falls back to tokio's.
pub async fn run_stdio(config: MockConfig) -> i32 {
    let input: Box<dyn AsyncRead + Unpin + Send> = match pipe_in() {
        Some(pipe) => Box::new(pipe),
        None => Box::new(tokio::io::stdin()),
    };
    let output: Box<dyn AsyncWrite + Unpin + Send> = match pipe_out() {
        Some(pipe) => Box::new(pipe),
        None => Box::new(tokio::io::stdout()),
    };
    match run(config, input, output).await {
        Ok(outcome) => outcome.exit_code(),
        Err(error) => {
            tracing::error!(%error, "mock agent stopped");
            1
        }
    }
}

/// Standard input as a non-blocking pipe, if it is one.
fn pipe_in() -> Option<tokio::net::unix::pipe::Receiver> {
    use std::os::fd::AsFd;
    let fd = std::io::stdin().as_fd().try_clone_to_owned().ok()?;
    tokio::net::unix::pipe::Receiver::from_owned_fd(fd).ok()
}

/// Standard output as a non-blocking pipe, if it is one.
fn pipe_out() -> Option<tokio::net::unix::pipe::Sender> {
    use std::os::fd::AsFd;
    let fd = std::io::stdout().as_fd().try_clone_to_owned().ok()?;
    tokio::net::unix::pipe::Sender::from_owned_fd(fd).ok()
}

async fn read_loop<R: AsyncRead + Unpin>(agent: Arc<Agent>, input: R) -> Result<(), MockError> {
    let mut reader = BufReader::new(input);
    let mut tasks = JoinSet::new();
    let mut line = Vec::new();
    let result = loop {
        while let Some(finished) = tasks.try_join_next() {
            if let Err(error) = finished {
                tracing::warn!(%error, "mock agent task failed");
            }
        }
        line.clear();
        match reader.read_until(b'\n', &mut line).await {
            Ok(0) => break Ok(()),
            Ok(_) => agent.handle_line(&line, &mut tasks).await,
            Err(error) => break Err(MockError::Read(error)),
        }
    };
    tasks.shutdown().await;
    result
}

enum WriterEnd {
    /// Every sender is gone and everything was written.
    Drained,
    /// A crash was requested after everything before it was written.
    Crash(i32),
}

async fn write_loop<W: AsyncWrite + Unpin>(
    mut rx: mpsc::Receiver<Outgoing>,
    mut output: W,
) -> Result<WriterEnd, MockError> {
    let mut out = Pending::default();
    while let Some(first) = rx.recv().await {
        let mut next = Some(first);
        let mut lines = 0;
        while let Some(item) = next.take() {
            match item {
                Outgoing::Line(line) => out.push(line, None),
                Outgoing::Stamped { line, at } => out.push(line, Some(at)),
                Outgoing::Crash(code) => {
                    out.write_to(&mut output).await?;
                    return Ok(WriterEnd::Crash(code));
                }
                Outgoing::Flushed(done) => {
                    out.write_to(&mut output).await?;
                    let _ = done.send(());
                }
            }
            lines += 1;
            if lines < MAX_LINES_PER_FLUSH && out.bytes.len() < FLUSH_BYTES {
                next = rx.try_recv().ok();
            }
        }
        out.write_to(&mut output).await?;
    }
    out.write_to(&mut output).await?;
    Ok(WriterEnd::Drained)
}

/// Lines waiting for the pipe, and where the stamps of stamped chunks among them are.
#[derive(Default)]
struct Pending {
    bytes: Vec<u8>,
    /// Byte offsets of the 16-digit stamps in `bytes`, in order.
    stamps: Vec<usize>,
}

impl Pending {
    fn push(&mut self, line: String, stamp_at: Option<usize>) {
        if let Some(at) = stamp_at {
            self.stamps.push(self.bytes.len() + at);
        }
        self.bytes.extend_from_slice(line.as_bytes());
        self.bytes.push(b'\n');
    }

    /// Writes everything out. Right before each write the stamps not yet in the pipe get the
    /// current time, so a stamp says when its chunk went into the pipe: a write that waits
    /// for room (the reader is behind) stamps again when it goes on.
    async fn write_to<W: AsyncWrite + Unpin>(&mut self, output: &mut W) -> Result<(), MockError> {
        self.write_with_clock(output, script::unix_micros).await
    }

    /// [`Self::write_to`] with the clock the stamps read (microseconds since the epoch).
    async fn write_with_clock<W: AsyncWrite + Unpin>(
        &mut self,
        output: &mut W,
        now: impl Fn() -> u64,
    ) -> Result<(), MockError> {
        let mut written = 0;
        while written < self.bytes.len() {
            let n = std::future::poll_fn(|cx| {
                self.stamp_from(written, now());
                std::pin::Pin::new(&mut *output).poll_write(cx, &self.bytes[written..])
            })
            .await
            .map_err(MockError::Write)?;
            if n == 0 {
                return Err(MockError::Write(std::io::ErrorKind::WriteZero.into()));
            }
            written += n;
        }
        output.flush().await.map_err(MockError::Write)?;
        self.bytes.clear();
        self.stamps.clear();
        Ok(())
    }

    /// Writes `micros` into every stamp at or after byte `from` (those not yet written).
    fn stamp_from(&mut self, from: usize, micros: u64) {
        let digits = format!("{micros:0width$}", width = script::STAMP_DIGITS);
        let first = self.stamps.partition_point(|&at| at < from);
        for &at in &self.stamps[first..] {
            self.bytes[at..at + script::STAMP_DIGITS].copy_from_slice(digits.as_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use tokio::io::AsyncWrite;

    use super::Pending;
    use std::cell::Cell;
    use std::rc::Rc;

    use crate::script::{chunk_stamp, stamped_chunk_text};

    /// A pipe whose reader is behind: it takes `first` bytes, then has no room for one poll,
    /// during which the clock moves 2 ms, then takes the rest. The clock is the test's own
    /// (the writer stamps from it), so nothing depends on the wall clock or on scheduling.
    struct SlowPipe {
        first: usize,
        taken: Vec<u8>,
        clock: Rc<Cell<u64>>,
        waited: bool,
    }

    impl AsyncWrite for SlowPipe {
        fn poll_write(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<std::io::Result<usize>> {
            if self.taken.is_empty() {
                let n = self.first.min(buf.len());
                self.taken.extend_from_slice(&buf[..n]);
                return Poll::Ready(Ok(n));
            }
            if !self.waited {
                self.waited = true;
                self.clock.set(self.clock.get() + 2_000);
                cx.waker().wake_by_ref(); // room comes back by itself: poll again
                return Poll::Pending;
            }
            self.taken.extend_from_slice(buf);
            Poll::Ready(Ok(buf.len()))
        }

        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Ready(Ok(()))
        }

        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    /// The stamps a line carries, from its chunk texts (`"text":"…"`).
    fn stamps(written: &[u8]) -> Vec<u64> {
        let text = String::from_utf8(written.to_vec()).unwrap();
        text.lines()
            .map(|line| {
                let start = line.find("\"text\":\"").unwrap() + 8;
                chunk_stamp(&line[start..]).unwrap()
            })
            .collect()
    }

    #[tokio::test]
    async fn i15_a_stamp_is_the_time_its_chunk_goes_into_the_pipe() {
        let made = 1_000; // the generation time: long past
        let mut pending = Pending::default();
        let mut first_len = 0;
        for index in 0..2 {
            let text = stamped_chunk_text(index, 40, made);
            let line =
                format!("{{\"params\":{{\"update\":{{\"content\":{{\"text\":\"{text}\"}}}}}}}}");
            let at = line.find(&text).unwrap() + crate::script::STAMP_OFFSET;
            first_len = first_len.max(line.len() + 1);
            pending.push(line, Some(at));
        }
        let clock = Rc::new(Cell::new(5_000));
        let mut pipe =
            SlowPipe { first: first_len, taken: vec![], clock: clock.clone(), waited: false };
        pending.write_with_clock(&mut pipe, || clock.get()).await.unwrap();

        let [one, two] = stamps(&pipe.taken)[..] else { panic!("two lines") };
        assert_eq!(one, 5_000, "stamped when written, not when made ({made})");
        assert_eq!(two, 7_000, "the line that waited for room is stamped when it went in");
        assert!(pending.bytes.is_empty() && pending.stamps.is_empty());
    }
}
