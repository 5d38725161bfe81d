//! The error type of the runtime crate.

use std::path::PathBuf;

/// Everything that can go wrong while starting or signalling agent processes.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The program could not be found (not on `PATH`, or the path does not exist).
    #[error("agent command `{program}` was not found; install it or fix the profile's command")]
    NotFound { program: String },

    /// The program exists but may not be executed.
    #[error("agent command `{program}` is not executable (permission denied)")]
    PermissionDenied { program: String },

    /// The working directory does not exist.
    #[error("working directory `{}` does not exist", cwd.display())]
    CwdNotFound { cwd: PathBuf },

    /// The working directory exists but is not a directory.
    #[error("working directory `{}` is not a directory", cwd.display())]
    CwdNotADirectory { cwd: PathBuf },

    /// Any other failure to start the program.
    #[error("failed to start agent command `{program}`: {source}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },

    /// A process group id that must never be signalled (`<= 1`, or the server's own group).
    #[error("refusing to signal process group {pgid}: {reason}")]
    ForbiddenProcessGroup { pgid: i32, reason: &'static str },

    /// Sending a signal to a process group failed for a reason other than "no such group".
    #[error("failed to send {signal} to process group {pgid}: {source}")]
    Signal {
        pgid: i32,
        signal: &'static str,
        #[source]
        source: nix::errno::Errno,
    },
}
