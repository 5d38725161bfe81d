//! Executors (issue 20, spec runners.md): where a session's agent runs. `local` is the
//! server's own host; an `ssh` executor is another machine reached with the system OpenSSH
//! client, where `kandev runner --stdio` owns the agents; a `container` executor runs each
//! task's agent in a container of its own ([`crate::container`]). The rules here are pure:
//! what an executor's settings may hold.

use std::path::PathBuf;

use crate::Timestamp;
pub use crate::container::ContainerSettings;
use crate::validate::FieldError;

/// Longest accepted host, user or path of an SSH executor, in bytes.
pub const MAX_SSH_FIELD_BYTES: usize = 1024;

/// A named executor (`executor.create`). A repository without one runs its agents locally.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Executor {
    pub id: String,
    /// Unique among executors.
    pub name: String,
    pub kind: ExecutorKind,
    /// The repositories that chose it (`repository.executor.set`).
    pub repository_ids: Vec<String>,
    /// The secrets (issue 50) a process it starts may receive, by name; `local` receives
    /// every secret a process references, whatever this says.
    pub allowed_secrets: Vec<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// How to reach an SSH build machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshSettings {
    /// A host name or IP address (no `user@`, no port).
    pub host: String,
    pub port: u16,
    pub user: String,
    /// The private key (on the server's host) the connection authenticates with.
    pub identity_file: PathBuf,
    /// The known_hosts file (on the server's host) the host key must be in; keys are checked,
    /// never accepted on first use.
    pub known_hosts: PathBuf,
    /// An absolute directory on the remote host: the runner, its socket and `bin/kandev`
    /// live there.
    pub remote_home: String,
}

/// The kind of an executor and its settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecutorKind {
    /// The server's own host (today's behaviour).
    Local,
    Ssh(SshSettings),
    Container(ContainerSettings),
}

impl ExecutorKind {
    /// The kind's name on the wire and in storage.
    pub fn name(&self) -> &'static str {
        match self {
            ExecutorKind::Local => "local",
            ExecutorKind::Ssh(_) => "ssh",
            ExecutorKind::Container(_) => "container",
        }
    }
}

impl SshSettings {
    /// Checks every field, trimming the text ones; the first problem is returned.
    ///
    /// Refuses: an empty host or user, or one with a leading `-` (it would read as an option
    /// of `ssh`); a host with anything but letters, digits and `. - : [ ]` (names, IPv4 and
    /// IPv6 addresses); a user with anything but letters, digits and `. _ -` (both end up in
    /// messages' copy-paste `ssh-keyscan` advice, so no shell character may pass); port 0;
    /// relative `identity_file` and `known_hosts` (the server's working directory is no
    /// stable base), or ones holding white space, `%` or `$` (ssh splits
    /// `-o UserKnownHostsFile=` on white space and expands `%` and `$` tokens in both
    /// paths); a `remote_home` that is not absolute or holds anything
    /// but letters, digits and `/._-+@` (it is put into remote shell commands and `scp`
    /// paths, which would otherwise expand it). It cannot see whether the files exist or the
    /// host answers: connecting tells.
    pub fn validated(self) -> Result<SshSettings, FieldError> {
        let host = word("host", &self.host)?;
        if host.contains('@') {
            return Err(FieldError::new("host", "must not hold a user; set user instead"));
        }
        if !host.chars().all(|c| c.is_ascii_alphanumeric() || ".-:[]".contains(c)) {
            return Err(FieldError::new(
                "host",
                "must be a host name or IP address: letters, digits and . - : [ ] only",
            ));
        }
        let user = word("user", &self.user)?;
        if user.contains(['@', ':']) {
            return Err(FieldError::new("user", "must not contain '@' or ':'"));
        }
        if !user.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)) {
            return Err(FieldError::new("user", "may hold only letters, digits and . _ -"));
        }
        if self.port == 0 {
            return Err(FieldError::new("port", "must be between 1 and 65535; ssh uses 22"));
        }
        let identity_file = absolute_file("identity_file", self.identity_file)?;
        let known_hosts = absolute_file("known_hosts", self.known_hosts)?;
        let remote_home = self.remote_home.trim().trim_end_matches('/').to_owned();
        if !remote_home.starts_with('/') {
            return Err(FieldError::new(
                "remote_home",
                "must be an absolute path on the remote host, e.g. /home/build/.kandev",
            ));
        }
        if remote_home.len() > MAX_SSH_FIELD_BYTES {
            return Err(FieldError::new(
                "remote_home",
                format!("must be at most {MAX_SSH_FIELD_BYTES} bytes"),
            ));
        }
        if !remote_home.chars().all(|c| c.is_ascii_alphanumeric() || "/._-+@".contains(c)) {
            return Err(FieldError::new(
                "remote_home",
                "may hold only letters, digits and / . _ - + @",
            ));
        }
        Ok(SshSettings { host, port: self.port, user, identity_file, known_hosts, remote_home })
    }
}

fn word(field: &str, value: &str) -> Result<String, FieldError> {
    let value = value.trim();
    if value.is_empty() {
        return Err(FieldError::new(field, "is required"));
    }
    if value.len() > MAX_SSH_FIELD_BYTES {
        return Err(FieldError::new(field, format!("must be at most {MAX_SSH_FIELD_BYTES} bytes")));
    }
    if value.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(FieldError::new(field, "must not contain white space or control characters"));
    }
    if value.starts_with('-') {
        return Err(FieldError::new(field, "must not start with '-'"));
    }
    Ok(value.to_owned())
}

fn absolute_file(field: &str, path: PathBuf) -> Result<PathBuf, FieldError> {
    let text = path.to_string_lossy();
    if text.trim().is_empty() {
        return Err(FieldError::new(field, "is required"));
    }
    if !path.is_absolute() {
        return Err(FieldError::new(field, "must be an absolute path on the server's host"));
    }
    if text.len() > MAX_SSH_FIELD_BYTES || text.chars().any(char::is_control) {
        return Err(FieldError::new(field, "is not a usable path"));
    }
    if text.chars().any(|c| c.is_whitespace() || c == '%' || c == '$') {
        return Err(FieldError::new(
            field,
            "must not contain white space, '%' or '$' (ssh would split or expand it); \
             move the file to a plain path",
        ));
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn good() -> SshSettings {
        SshSettings {
            host: " build1.example ".into(),
            port: 22,
            user: "build".into(),
            identity_file: "/home/me/.ssh/id_ed25519".into(),
            known_hosts: "/home/me/.ssh/known_hosts".into(),
            remote_home: "/home/build/.kandev/".into(),
        }
    }

    #[test]
    fn i20_s3_good_settings_are_trimmed() {
        let ok = good().validated().unwrap();
        assert_eq!(ok.host, "build1.example");
        assert_eq!(ok.remote_home, "/home/build/.kandev");
    }

    #[test]
    fn i20_s3_bad_settings_name_their_field() {
        let cases: Vec<(Change, &str)> = vec![
            (|s| s.host = "".into(), "host"),
            (|s| s.host = "-oProxyCommand=x".into(), "host"),
            (|s| s.host = "me@host".into(), "host"),
            (|s| s.host = "a b".into(), "host"),
            (|s| s.user = "".into(), "user"),
            (|s| s.user = "a:b".into(), "user"),
            (|s| s.port = 0, "port"),
            (|s| s.identity_file = "id_ed25519".into(), "identity_file"),
            (|s| s.known_hosts = "".into(), "known_hosts"),
            (|s| s.remote_home = "kandev".into(), "remote_home"),
            (|s| s.remote_home = "/home/$(reboot)".into(), "remote_home"),
            (|s| s.remote_home = "/home/a b".into(), "remote_home"),
        ];
        assert_refused(cases);
    }

    type Change = fn(&mut SshSettings);

    /// Each change applied to good settings is refused, naming its field.
    fn assert_refused(cases: Vec<(Change, &str)>) {
        for (change, field) in cases {
            let mut settings = good();
            change(&mut settings);
            let err = settings.clone().validated().unwrap_err();
            assert_eq!(err.field, field, "{settings:?}: {err}");
        }
    }

    #[test]
    fn i20_d3_files_with_space_percent_or_dollar_are_refused() {
        let cases: Vec<(Change, &str)> = vec![
            (|s| s.known_hosts = "/home/me/my hosts".into(), "known_hosts"),
            (|s| s.known_hosts = "/home/%u/known_hosts".into(), "known_hosts"),
            (|s| s.identity_file = "/home/${HOME}/id".into(), "identity_file"),
            (|s| s.identity_file = "/home/me/.ssh/my key".into(), "identity_file"),
        ];
        assert_refused(cases);
    }

    #[test]
    fn i20_d3_host_and_user_hold_no_shell_characters() {
        let cases: Vec<(Change, &str)> = vec![
            (|s| s.host = "build1;reboot".into(), "host"),
            (|s| s.host = "build1|x".into(), "host"),
            (|s| s.host = "$(reboot)".into(), "host"),
            (|s| s.user = "me;reboot".into(), "user"),
            (|s| s.user = "$(id)".into(), "user"),
            (|s| s.user = "a|b".into(), "user"),
        ];
        assert_refused(cases);
        for host in ["10.0.0.7", "::1", "[fe80::1]", "build-1.example.org"] {
            let mut settings = good();
            settings.host = host.into();
            settings.user = "build_user.2-x".into();
            assert!(settings.validated().is_ok(), "{host}");
        }
    }
}
