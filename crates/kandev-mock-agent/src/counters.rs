//! Call counters: every ACP call the mock agent receives is appended as one JSON line to
//! `<state-dir>/calls.log`; [`Counters::read`] aggregates them.
//!
//! Each record is written with a single `write` on a file opened with `O_APPEND`, so several
//! mock agent processes (or runs) can share one state dir without losing or mixing lines.
//!
//! Line format (fields may be absent when empty):
//! `{"pid":1234,"method":"session/prompt","outcome":"ok","session_id":"sess_…","prompt":"…"}`,
//! `outcome` being `ok`, `error` (with `error_code`) or `unanswered` (a `timeout` failure).

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::error::StateError;
use crate::lock;

/// The file the calls are appended to, inside the state dir.
pub const CALLS_FILE: &str = "calls.log";

/// The ACP methods that are counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CallKind {
    /// `initialize`
    #[serde(rename = "initialize")]
    Initialize,
    /// `authenticate`
    #[serde(rename = "authenticate")]
    Authenticate,
    /// `session/new`
    #[serde(rename = "session/new")]
    New,
    /// `session/load`
    #[serde(rename = "session/load")]
    Load,
    /// `session/prompt`
    #[serde(rename = "session/prompt")]
    Prompt,
    /// `session/cancel`
    #[serde(rename = "session/cancel")]
    Cancel,
    /// `session/set_mode`
    #[serde(rename = "session/set_mode")]
    SetMode,
    /// `session/set_config_option`
    #[serde(rename = "session/set_config_option")]
    SetConfigOption,
    /// `session/set_model`
    #[serde(rename = "session/set_model")]
    SetModel,
}

/// How the mock agent answered a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallOutcome {
    /// Accepted (for a prompt: the turn started; its stop reason is not recorded).
    Ok,
    /// Answered with a JSON-RPC error.
    Error {
        /// The error code.
        code: i64,
    },
    /// Deliberately never answered (`--fail-* timeout`).
    Unanswered,
}

/// One recorded call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// The process that received it.
    pub pid: u32,
    /// The method.
    pub kind: CallKind,
    /// How it was answered.
    pub outcome: CallOutcome,
    /// The conversation it addressed (the created one for a successful `session/new`).
    pub session_id: Option<String>,
    /// The prompt text (text blocks joined by newlines), for `session/prompt`.
    pub prompt: Option<String>,
}

/// The on-disk row of [`Call`].
#[derive(Serialize, Deserialize)]
struct CallRow {
    pid: u32,
    method: CallKind,
    outcome: OutcomeRow,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error_code: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    prompt: Option<String>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum OutcomeRow {
    Ok,
    Error,
    Unanswered,
}

impl From<&Call> for CallRow {
    fn from(call: &Call) -> Self {
        let (outcome, error_code) = match call.outcome {
            CallOutcome::Ok => (OutcomeRow::Ok, None),
            CallOutcome::Error { code } => (OutcomeRow::Error, Some(code)),
            CallOutcome::Unanswered => (OutcomeRow::Unanswered, None),
        };
        CallRow {
            pid: call.pid,
            method: call.kind,
            outcome,
            error_code,
            session_id: call.session_id.clone(),
            prompt: call.prompt.clone(),
        }
    }
}

impl From<CallRow> for Call {
    fn from(row: CallRow) -> Self {
        let outcome = match row.outcome {
            OutcomeRow::Ok => CallOutcome::Ok,
            OutcomeRow::Error => CallOutcome::Error { code: row.error_code.unwrap_or(0) },
            OutcomeRow::Unanswered => CallOutcome::Unanswered,
        };
        Call {
            pid: row.pid,
            kind: row.method,
            outcome,
            session_id: row.session_id,
            prompt: row.prompt,
        }
    }
}

/// Appends calls to `calls.log`.
pub(crate) struct CallLog {
    path: PathBuf,
    file: Mutex<File>,
}

impl CallLog {
    pub(crate) fn open(state_dir: &Path) -> Result<CallLog, StateError> {
        std::fs::create_dir_all(state_dir).map_err(|e| StateError::io(state_dir, e))?;
        let path = state_dir.join(CALLS_FILE);
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| StateError::io(&path, e))?;
        Ok(CallLog { path, file: Mutex::new(file) })
    }

    /// Appends one record; a failure is logged, never fatal to the agent.
    pub(crate) fn record(&self, call: &Call) {
        let mut line = match serde_json::to_string(&CallRow::from(call)) {
            Ok(line) => line,
            Err(error) => {
                tracing::warn!(%error, "cannot encode call record");
                return;
            }
        };
        line.push('\n');
        if let Err(error) = lock(&self.file).write_all(line.as_bytes()) {
            tracing::warn!(path = %self.path.display(), %error, "cannot append call record");
        }
    }
}

/// Every call recorded in a state dir, by all processes that used it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counters {
    calls: Vec<Call>,
}

impl Counters {
    /// Reads `<state_dir>/calls.log`; a missing file means no calls.
    pub fn read(state_dir: &Path) -> Result<Counters, StateError> {
        let path = state_dir.join(CALLS_FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Counters::default()),
            Err(e) => return Err(StateError::io(path, e)),
        };
        let mut calls = Vec::new();
        for (index, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let row: CallRow = serde_json::from_str(line).map_err(|source| {
                StateError::Corrupt { path: path.clone(), line: index + 1, source }
            })?;
            calls.push(row.into());
        }
        Ok(Counters { calls })
    }

    /// All calls in the order they were recorded.
    pub fn calls(&self) -> &[Call] {
        &self.calls
    }

    /// Calls of this kind, whatever their outcome.
    pub fn count(&self, kind: CallKind) -> usize {
        self.calls.iter().filter(|c| c.kind == kind).count()
    }

    /// Calls of this kind that were accepted.
    pub fn succeeded(&self, kind: CallKind) -> usize {
        self.calls.iter().filter(|c| c.kind == kind && c.outcome == CallOutcome::Ok).count()
    }

    /// Calls of this kind that were answered with an error or deliberately not answered.
    pub fn failed(&self, kind: CallKind) -> usize {
        self.count(kind) - self.succeeded(kind)
    }

    /// `initialize` calls.
    pub fn initialize(&self) -> usize {
        self.count(CallKind::Initialize)
    }

    /// `authenticate` calls.
    pub fn authenticate(&self) -> usize {
        self.count(CallKind::Authenticate)
    }

    /// `session/new` calls.
    pub fn new_session(&self) -> usize {
        self.count(CallKind::New)
    }

    /// `session/load` calls.
    pub fn load_session(&self) -> usize {
        self.count(CallKind::Load)
    }

    /// `session/prompt` calls.
    pub fn prompt(&self) -> usize {
        self.count(CallKind::Prompt)
    }

    /// `session/cancel` calls.
    pub fn cancel(&self) -> usize {
        self.count(CallKind::Cancel)
    }

    /// `session/set_mode` calls.
    pub fn set_mode(&self) -> usize {
        self.count(CallKind::SetMode)
    }

    /// `session/set_config_option` calls.
    pub fn set_config_option(&self) -> usize {
        self.count(CallKind::SetConfigOption)
    }

    /// `session/set_model` calls.
    pub fn set_model(&self) -> usize {
        self.count(CallKind::SetModel)
    }

    /// The texts of the accepted prompts sent to `session_id`, in order.
    pub fn prompts_in(&self, session_id: &str) -> Vec<&str> {
        self.calls
            .iter()
            .filter(|c| c.kind == CallKind::Prompt && c.outcome == CallOutcome::Ok)
            .filter(|c| c.session_id.as_deref() == Some(session_id))
            .filter_map(|c| c.prompt.as_deref())
            .collect()
    }

    /// The sessions that received a prompt containing `needle`, in order (one per prompt).
    pub fn sessions_prompted_with(&self, needle: &str) -> Vec<&str> {
        self.calls
            .iter()
            .filter(|c| c.kind == CallKind::Prompt)
            .filter(|c| c.prompt.as_deref().is_some_and(|p| p.contains(needle)))
            .filter_map(|c| c.session_id.as_deref())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_aggregate() {
        let dir = std::env::temp_dir().join(format!("mock-counters-{}", uuid::Uuid::new_v4()));
        let log = CallLog::open(&dir).unwrap();
        let call = |kind, outcome, session: Option<&str>, prompt: Option<&str>| Call {
            pid: 7,
            kind,
            outcome,
            session_id: session.map(str::to_owned),
            prompt: prompt.map(str::to_owned),
        };
        let calls = vec![
            call(CallKind::New, CallOutcome::Ok, Some("s1"), None),
            call(CallKind::Load, CallOutcome::Error { code: -32002 }, Some("s0"), None),
            call(CallKind::Load, CallOutcome::Unanswered, Some("s0"), None),
            call(CallKind::Prompt, CallOutcome::Ok, Some("s1"), Some("Build it")),
            call(CallKind::Prompt, CallOutcome::Ok, Some("s2"), Some("other")),
        ];
        for c in &calls {
            log.record(c);
        }
        // A second writer on the same dir appends to the same file.
        CallLog::open(&dir).unwrap().record(&call(
            CallKind::Initialize,
            CallOutcome::Ok,
            None,
            None,
        ));

        let counters = Counters::read(&dir).unwrap();
        assert_eq!(&counters.calls()[..5], &calls[..]);
        assert_eq!(counters.new_session(), 1);
        assert_eq!(counters.load_session(), 2);
        assert_eq!(counters.failed(CallKind::Load), 2);
        assert_eq!(counters.succeeded(CallKind::Load), 0);
        assert_eq!(counters.initialize(), 1);
        assert_eq!(counters.prompts_in("s1"), vec!["Build it"]);
        assert_eq!(counters.sessions_prompted_with("Build"), vec!["s1"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn missing_log_means_no_calls() {
        let dir = std::env::temp_dir().join(format!("mock-none-{}", uuid::Uuid::new_v4()));
        assert_eq!(Counters::read(&dir).unwrap(), Counters::default());
    }
}
