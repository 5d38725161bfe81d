//! The SSH executor settings of a test's sshd (apart from `sshd.rs`, which `kandev-bench`
//! shares and which uses no kandev crate).

use std::path::Path;

use kandev_domain::executor::SshSettings;

use crate::sshd::Sshd;

impl Sshd {
    /// SSH executor settings for this server with `remote_home`.
    pub fn settings(&self, remote_home: &Path) -> SshSettings {
        SshSettings {
            host: "127.0.0.1".into(),
            port: self.port,
            user: self.user.clone(),
            identity_file: self.identity.clone(),
            known_hosts: self.known_hosts.clone(),
            remote_home: remote_home.display().to_string(),
        }
        .validated()
        .expect("valid settings")
    }
}
