//! A real OpenSSH server (Debian's `openssh-server`, installed by scripts/setup) for the SSH
//! executor's tests: on a free loopback port, with a temp host key and a temp authorized key,
//! logging to its stderr (`-D -e`), killed when dropped and bounded in time (`timeout`) should
//! the test process die first. It fails the test with the reason when it cannot start; it is
//! never skipped. `kandev-bench` (R6 over SSH) includes this file as a module of its own (the
//! testkit is a dev-dependency only), so it uses no kandev crate and nothing else of the
//! testkit: the executor settings for it are in `ssh_settings.rs`.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The longest an sshd of a test may live.
const LIFETIME: &str = "600";
/// How long it may take to listen.
const START: Duration = Duration::from_secs(15);

/// A running sshd; killed when dropped.
pub struct Sshd {
    pub dir: tempfile::TempDir,
    pub port: u16,
    /// The client's private key (its public half is the only authorized key).
    pub identity: PathBuf,
    /// A known_hosts file that trusts this server's host key.
    pub known_hosts: PathBuf,
    /// The user to log in as (the current one; the tests run as root in CI).
    pub user: String,
    child: Child,
    log: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Drop for Sshd {
    fn drop(&mut self) {
        // TERM reaches sshd through `timeout`, which passes it on.
        if let Ok(pid) = i32::try_from(self.child.id()) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
        let _ = self.child.wait();
    }
}

fn sshd_binary() -> PathBuf {
    let path =
        std::env::var_os("KANDEV_SSHD").map_or_else(|| "/usr/sbin/sshd".into(), PathBuf::from);
    assert!(
        path.is_file(),
        "sshd is not installed at {}: run scripts/setup (it installs Debian's openssh-server) \
         or point KANDEV_SSHD at an sshd",
        path.display()
    );
    path
}

fn keygen(path: &Path) {
    let status = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "kandev-test", "-f"])
        .arg(path)
        .status()
        .expect("ssh-keygen runs (openssh-client is installed)");
    assert!(status.success(), "ssh-keygen failed for {}", path.display());
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

impl Sshd {
    pub fn start() -> Sshd {
        let sshd = sshd_binary();
        // sshd refuses to start without its privilege separation directory.
        let privsep = Path::new("/run/sshd");
        if !privsep.is_dir() {
            std::fs::create_dir_all(privsep).unwrap_or_else(|e| {
                panic!("sshd needs {} and it cannot be created: {e}", privsep.display())
            });
        }
        let dir = tempfile::tempdir().unwrap();
        let host_key = dir.path().join("host_key");
        let identity = dir.path().join("client_key");
        keygen(&host_key);
        keygen(&identity);
        let authorized = dir.path().join("authorized_keys");
        std::fs::copy(identity.with_extension("pub"), &authorized).unwrap();
        let who = Command::new("id").arg("-un").output().expect("id runs");
        let user = String::from_utf8(who.stdout).unwrap().trim().to_owned();
        assert!(!user.is_empty(), "the current user has a name");
        let host_pub = std::fs::read_to_string(host_key.with_extension("pub")).unwrap();
        let mut fields = host_pub.split_whitespace();
        let (kind, key) = (fields.next().unwrap(), fields.next().unwrap());

        // A taken port (a race with another test) is tried again on another.
        let mut failures = Vec::new();
        for _ in 0..5 {
            let port = free_port();
            let config = dir.path().join("sshd_config");
            std::fs::write(
                &config,
                format!(
                    "ListenAddress 127.0.0.1\nPort {port}\nHostKey {host}\n\
                     AuthorizedKeysFile {authorized}\nPidFile none\nUsePAM no\nStrictModes no\n\
                     PermitRootLogin prohibit-password\nPasswordAuthentication no\n\
                     KbdInteractiveAuthentication no\nAllowUsers {user}\n\
                     Subsystem sftp internal-sftp\nMaxStartups 100\nMaxSessions 100\n",
                    host = host_key.display(),
                    authorized = authorized.display(),
                ),
            )
            .unwrap();
            let mut child = Command::new("timeout")
                .arg(LIFETIME)
                .arg(&sshd)
                .args(["-D", "-e", "-f"])
                .arg(&config)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("timeout (coreutils) runs sshd");
            let stderr = child.stderr.take().unwrap();
            let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
            let (tx, rx) = mpsc::channel();
            let sink = log.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    if line.contains("Server listening on") {
                        let _ = tx.send(true);
                    }
                    sink.lock().unwrap().push_str(&format!("{line}\n"));
                }
                let _ = tx.send(false);
            });
            match rx.recv_timeout(START) {
                Ok(true) => {
                    let known_hosts = dir.path().join("known_hosts");
                    std::fs::write(&known_hosts, format!("[127.0.0.1]:{port} {kind} {key}\n"))
                        .unwrap();
                    return Sshd { dir, port, identity, known_hosts, user, child, log };
                }
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    failures.push(log.lock().unwrap().clone());
                }
            }
        }
        panic!("sshd did not start; its messages:\n{}", failures.join("\n---\n"));
    }

    /// What sshd logged so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }
}
