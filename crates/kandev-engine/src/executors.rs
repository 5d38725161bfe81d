//! Checking an SSH executor (issue 20, `executor.check`): connect with the executor's
//! settings, install this server's `kandev` there when missing or of another version, start
//! (or reach) the remote runner and complete the protocol handshake, then let go. A task's
//! sessions run there through the same runner (`sites.rs`; docs/architecture.md, "SSH
//! executor").

use std::time::Duration;

use kandev_domain::executor::SshSettings;
use kandev_runtime::runner::ssh::{Installed, SshRunner};

use crate::Engine;

/// The remote runner's grace period when only a check started it: with nothing to keep it
/// ends when the check lets go anyway.
const CHECK_GRACE: Duration = Duration::from_secs(600);

/// What a successful check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecutorCheck {
    /// Whether this server's binary was copied (the remote one was missing or of another
    /// version, which `previous` tells).
    pub copied: bool,
    pub previous: Option<String>,
    /// The remote `kandev --version`.
    pub remote_version: String,
    /// Executions the remote runner holds.
    pub executions: usize,
}

impl Engine {
    /// `executor.check` of a container executor: the engine runs, the image is present,
    /// this server's `kandev` runs in it (nothing is pulled).
    pub async fn check_container_executor(
        &self,
        settings: &kandev_domain::executor::ContainerSettings,
    ) -> Vec<crate::containers::CheckStep> {
        crate::containers::check(settings).await
    }

    /// Connects to an SSH executor as a session would, without running anything there;
    /// `Err` is the message to show (an unknown host key says how to trust it).
    pub async fn check_ssh_executor(&self, settings: SshSettings) -> Result<ExecutorCheck, String> {
        // This server's own binary is what the remote host gets.
        let local = std::env::current_exe()
            .map_err(|e| format!("cannot find this server's kandev binary: {e}"))?;
        let ssh = SshRunner::new(settings, local, CHECK_GRACE);
        let installed = ssh.install().await.map_err(|e| e.to_string())?;
        let connection = ssh.open().await.map_err(|e| e.to_string())?;
        let executions = connection.executions.len();
        connection.client.close();
        let remote_version = ssh.remote_version().await.map_err(|e| e.to_string())?;
        let (copied, previous) = match installed {
            Installed::Present => (false, None),
            Installed::Copied { previous } => (true, previous),
        };
        Ok(ExecutorCheck {
            copied,
            previous,
            remote_version: remote_version.unwrap_or_default(),
            executions,
        })
    }
}
