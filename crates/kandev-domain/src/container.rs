//! Container executors (issue 42): each task's agent in a container of its own, run by
//! Podman or Docker (both CLIs take the same commands). The rules here are pure: what a
//! container executor's settings may hold. Whether the engine runs and the image exists is
//! learnt by `executor.check` and at the start of a session.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::validate::FieldError;

/// Longest accepted image name or mount path, in bytes.
pub const MAX_CONTAINER_FIELD_BYTES: usize = 1024;
/// Most read-only mounts an executor may list.
pub const MAX_MOUNTS: usize = 32;
/// The CPU limit's bounds, in thousandths of a CPU (0.1 to 256 CPUs).
pub const CPU_MILLIS: std::ops::RangeInclusive<u32> = 100..=256_000;
/// The memory limit's bounds, in MiB (64 MiB to 1 TiB).
pub const MEMORY_MIB: std::ops::RangeInclusive<u64> = 64..=1_048_576;

/// The program that runs the containers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ContainerEngine {
    Podman,
    Docker,
}

impl ContainerEngine {
    /// The engine's command (`podman`, `docker`).
    pub fn program(self) -> &'static str {
        match self {
            ContainerEngine::Podman => "podman",
            ContainerEngine::Docker => "docker",
        }
    }
}

/// Most host ports a container may be allowed.
pub const MAX_HOST_PORTS: usize = 32;

/// What a task's container may reach over the network.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ContainerNetwork {
    /// Nothing but its own loopback (the default): the agent talks to Kandev only over the
    /// runner connection.
    #[default]
    None,
    /// No network, but these ports of the host's 127.0.0.1, relayed over the runner
    /// connection to the same port of the container's 127.0.0.1.
    HostPorts(Vec<u16>),
    /// The engine's default network: whatever the host reaches.
    Full,
}

impl ContainerNetwork {
    /// Whether the container gets no network of its own (`none`, `host_ports`).
    pub fn is_isolated(&self) -> bool {
        !matches!(self, ContainerNetwork::Full)
    }

    /// The host ports relayed into the container.
    pub fn host_ports(&self) -> &[u16] {
        match self {
            ContainerNetwork::HostPorts(ports) => ports,
            _ => &[],
        }
    }
}

/// How a container executor runs a task's container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerSettings {
    /// `None`: Podman when its command runs, else Docker.
    pub engine: Option<ContainerEngine>,
    /// The image (already present: nothing is pulled). It must provide a glibc this server's
    /// `kandev` runs on.
    pub image: String,
    pub network: ContainerNetwork,
    /// CPU limit in thousandths of a CPU (`None`: no limit).
    pub cpu_millis: Option<u32>,
    /// Memory limit in MiB (`None`: no limit).
    pub memory_mib: Option<u64>,
    /// Host paths mounted read-only at the same path (e.g. an agent's credential file);
    /// nothing else of the host but the task's worktree is visible.
    pub mounts: Vec<PathBuf>,
}

impl ContainerSettings {
    /// Checks every field, trimming the image; the first problem is returned.
    ///
    /// Refuses: an empty image, one with a leading `-` (it would read as an option of the
    /// engine) or with anything but letters, digits and `. _ / : @ -`; limits outside
    /// [`CPU_MILLIS`] and [`MEMORY_MIB`]; more than [`MAX_MOUNTS`] mounts, a relative one,
    /// `/` itself, one with a `..` component, or one holding `,` or `:` (the engine's `-v` syntax splits on them) or a
    /// control character. It cannot see whether the paths exist: starting a container tells.
    pub fn validated(self) -> Result<ContainerSettings, FieldError> {
        let image = self.image.trim().to_owned();
        if image.is_empty() {
            return Err(FieldError::new(
                "image",
                "is required, e.g. debian:12 (nothing is pulled)",
            ));
        }
        if image.len() > MAX_CONTAINER_FIELD_BYTES {
            return Err(FieldError::new(
                "image",
                format!("must be at most {MAX_CONTAINER_FIELD_BYTES} bytes"),
            ));
        }
        if image.starts_with('-')
            || !image.chars().all(|c| c.is_ascii_alphanumeric() || "._/:@-".contains(c))
        {
            return Err(FieldError::new(
                "image",
                "may hold only letters, digits and . _ / : @ - and must not start with '-'",
            ));
        }
        if let Some(millis) = self.cpu_millis
            && !CPU_MILLIS.contains(&millis)
        {
            return Err(FieldError::new("cpus", "must be between 0.1 and 256"));
        }
        if let Some(mib) = self.memory_mib
            && !MEMORY_MIB.contains(&mib)
        {
            return Err(FieldError::new("memory_mib", "must be between 64 and 1048576"));
        }
        let network = match self.network {
            ContainerNetwork::HostPorts(mut ports) => {
                ports.sort_unstable();
                ports.dedup();
                if ports.is_empty() || ports.len() > MAX_HOST_PORTS || ports.contains(&0) {
                    return Err(FieldError::new(
                        "host_ports",
                        format!("must list 1 to {MAX_HOST_PORTS} ports between 1 and 65535"),
                    ));
                }
                ContainerNetwork::HostPorts(ports)
            }
            other => other,
        };
        if self.mounts.len() > MAX_MOUNTS {
            return Err(FieldError::new("mounts", format!("may list at most {MAX_MOUNTS} paths")));
        }
        for path in &self.mounts {
            mount(path)?;
        }
        Ok(ContainerSettings { image, network, ..self })
    }
}

fn mount(path: &std::path::Path) -> Result<(), FieldError> {
    let text = path.to_string_lossy();
    if !path.is_absolute() || text.trim_end_matches('/').is_empty() {
        return Err(FieldError::new(
            "mounts",
            format!("{text} must be an absolute path on the server's host other than /"),
        ));
    }
    if text.len() > MAX_CONTAINER_FIELD_BYTES || text.chars().any(|c| c.is_control()) {
        return Err(FieldError::new("mounts", format!("{text} is not a usable path")));
    }
    if path.components().any(|c| matches!(c, std::path::Component::ParentDir)) {
        return Err(FieldError::new("mounts", format!("{text} must not contain '..'")));
    }
    if text.contains([',', ':']) {
        return Err(FieldError::new(
            "mounts",
            format!(
                "{text} must not contain ',' or ':' (the engine's mount syntax splits on them)"
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn good() -> ContainerSettings {
        ContainerSettings {
            engine: None,
            image: " localhost/agents:1 ".into(),
            network: ContainerNetwork::None,
            cpu_millis: Some(1500),
            memory_mib: Some(2048),
            mounts: vec!["/home/me/.claude.json".into()],
        }
    }

    #[test]
    fn i42_s1_good_settings_are_trimmed_and_the_network_is_none_by_default() {
        let ok = good().validated().unwrap();
        assert_eq!(ok.image, "localhost/agents:1");
        let mut ports = good();
        ports.network = ContainerNetwork::HostPorts(vec![8080, 5432, 8080]);
        let ports = ports.validated().unwrap().network;
        assert_eq!(ports, ContainerNetwork::HostPorts(vec![5432, 8080]), "sorted, once each");
        assert_eq!(ContainerNetwork::default(), ContainerNetwork::None);
    }

    #[test]
    fn i42_s1_bad_settings_name_their_field() {
        type Change = fn(&mut ContainerSettings);
        let cases: Vec<(Change, &str)> = vec![
            (|s| s.image = " ".into(), "image"),
            (|s| s.image = "--privileged".into(), "image"),
            (|s| s.image = "debian;reboot".into(), "image"),
            (|s| s.image = "a b".into(), "image"),
            (|s| s.cpu_millis = Some(0), "cpus"),
            (|s| s.memory_mib = Some(1), "memory_mib"),
            (|s| s.mounts = vec!["relative".into()], "mounts"),
            (|s| s.mounts = vec!["/".into()], "mounts"),
            (|s| s.mounts = vec!["/a:/etc".into()], "mounts"),
            (|s| s.mounts = vec!["/a,ro".into()], "mounts"),
            (|s| s.mounts = vec!["/home/me/../..".into()], "mounts"),
            (|s| s.mounts = vec!["/a".into(); MAX_MOUNTS + 1], "mounts"),
            (|s| s.network = ContainerNetwork::HostPorts(vec![]), "host_ports"),
            (|s| s.network = ContainerNetwork::HostPorts(vec![0]), "host_ports"),
        ];
        for (change, field) in cases {
            let mut settings = good();
            change(&mut settings);
            let err = settings.clone().validated().unwrap_err();
            assert_eq!(err.field, field, "{settings:?}: {}", err.problem);
        }
    }
}
