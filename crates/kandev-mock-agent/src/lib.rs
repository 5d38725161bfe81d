//! A deterministic, scripted ACP agent for tests, benchmarks and first runs.
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
mod turn;

use std::sync::{Arc, Mutex, MutexGuard};

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, BufWriter};
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
pub async fn run_stdio(config: MockConfig) -> i32 {
    match run(config, tokio::io::stdin(), tokio::io::stdout()).await {
        Ok(outcome) => outcome.exit_code(),
        Err(error) => {
            tracing::error!(%error, "mock agent stopped");
            1
        }
    }
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
    output: W,
) -> Result<WriterEnd, MockError> {
    let mut out = BufWriter::with_capacity(64 * 1024, output);
    while let Some(first) = rx.recv().await {
        let mut next = Some(first);
        let mut written = 0;
        while let Some(item) = next.take() {
            match item {
                Outgoing::Line(line) => {
                    out.write_all(line.as_bytes()).await.map_err(MockError::Write)?;
                    out.write_all(b"\n").await.map_err(MockError::Write)?;
                }
                Outgoing::Crash(code) => {
                    out.flush().await.map_err(MockError::Write)?;
                    return Ok(WriterEnd::Crash(code));
                }
                Outgoing::Flushed(done) => {
                    out.flush().await.map_err(MockError::Write)?;
                    let _ = done.send(());
                }
            }
            written += 1;
            if written < MAX_LINES_PER_FLUSH {
                next = rx.try_recv().ok();
            }
        }
        out.flush().await.map_err(MockError::Write)?;
    }
    out.flush().await.map_err(MockError::Write)?;
    Ok(WriterEnd::Drained)
}
