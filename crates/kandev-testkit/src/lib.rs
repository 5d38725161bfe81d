//! Shared support for the workspace's tests, so that no test file carries its own copy:
//! waiting for a condition that no event announces ([`wait`]), git fixtures ([`git`]), Podman
//! with a test image built without a registry ([`container`]), a
//! labelled temp dir, and with the `server` feature the real-binary tests' support —
//! starting `kandev serve` and calling its API ([`server`]), a local OpenSSH server
//! ([`sshd`]), a task on an SSH executor ([`remote_task`]) and the fake model API of the
//! interoperability tests ([`fake_model`]) and a fake npm registry ([`fake_registry`]).
//!
//! A dev-dependency only (tidy.rs checks it): nothing here is shipped. Without features it
//! needs only tokio and tempfile, so the lowest crates (the runtime) take it as well. The
//! `kandev` binary is not found here: `env!("CARGO_BIN_EXE_kandev")` exists only in the
//! kandev crate's own tests, which hand its path in ([`server::Kandev`]).

#![allow(
    clippy::disallowed_methods,
    reason = "test support: it starts the server, git and sshd, and serves fake peers"
)]

pub mod container;
pub mod git;
pub mod wait;

#[cfg(feature = "server")]
pub mod fake_model;
#[cfg(feature = "server")]
pub mod fake_registry;
#[cfg(feature = "server")]
pub mod remote_task;
#[cfg(feature = "server")]
pub mod server;
#[cfg(feature = "server")]
mod ssh_settings;
#[cfg(feature = "server")]
pub mod sshd;

pub use tempfile::TempDir;
pub use wait::{DEADLINE, Done, eventually, eventually_within};

/// A new directory under the system's temp dir whose name starts with `kandev-<label>-`
/// (so a kept or leaked one says which test made it); removed when dropped.
pub fn temp_dir(label: &str) -> TempDir {
    tempfile::Builder::new().prefix(&format!("kandev-{label}-")).tempdir().unwrap()
}
