//! How an agent process ended, in a form that reads well in error messages.

use std::fmt;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

/// The recorded end of a process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExitInfo {
    /// The process called `exit(code)`.
    Exited { code: i32 },
    /// The process was terminated by a signal.
    Signaled { signal: i32 },
    /// The exit status could not be determined (waiting failed, or the process did not go
    /// away even after `SIGKILL`).
    Unknown { reason: String },
}

impl ExitInfo {
    /// True only for `exit(0)`.
    pub fn success(&self) -> bool {
        matches!(self, ExitInfo::Exited { code: 0 })
    }

    /// The exit code, if the process exited normally.
    pub fn code(&self) -> Option<i32> {
        match self {
            ExitInfo::Exited { code } => Some(*code),
            _ => None,
        }
    }

    /// The terminating signal, if the process was killed by one.
    pub fn signal(&self) -> Option<i32> {
        match self {
            ExitInfo::Signaled { signal } => Some(*signal),
            _ => None,
        }
    }
}

impl From<ExitStatus> for ExitInfo {
    fn from(status: ExitStatus) -> Self {
        if let Some(code) = status.code() {
            ExitInfo::Exited { code }
        } else if let Some(signal) = status.signal() {
            ExitInfo::Signaled { signal }
        } else {
            ExitInfo::Unknown { reason: format!("unrecognised wait status {status}") }
        }
    }
}

impl fmt::Display for ExitInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExitInfo::Exited { code } => write!(f, "exited with code {code}"),
            ExitInfo::Signaled { signal } => write!(f, "killed by signal {signal}"),
            ExitInfo::Unknown { reason } => write!(f, "exit status unknown: {reason}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_readable() {
        assert_eq!(ExitInfo::Exited { code: 3 }.to_string(), "exited with code 3");
        assert_eq!(ExitInfo::Signaled { signal: 9 }.to_string(), "killed by signal 9");
        assert_eq!(ExitInfo::Unknown { reason: "x".into() }.to_string(), "exit status unknown: x");
    }

    #[test]
    fn from_exit_status_distinguishes_code_and_signal() {
        assert_eq!(ExitInfo::from(ExitStatus::from_raw(3 << 8)), ExitInfo::Exited { code: 3 });
        assert_eq!(ExitInfo::from(ExitStatus::from_raw(9)), ExitInfo::Signaled { signal: 9 });
        assert!(ExitInfo::Exited { code: 0 }.success());
        assert!(!ExitInfo::Signaled { signal: 15 }.success());
    }
}
