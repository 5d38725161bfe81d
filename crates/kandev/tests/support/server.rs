//! Starting the real `kandev serve` for process-level tests: on a free port, with a given
//! home, waiting (bounded) for the line that announces its address.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub const KANDEV: &str = env!("CARGO_BIN_EXE_kandev");

/// A running server; killed when dropped.
pub struct Server {
    pub child: Child,
    pub url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `kandev serve --addr 127.0.0.1:0` on `home`; its log goes to `<home>/server.log`.
pub fn start(home: &Path) -> Server {
    start_with(home, &[])
}

/// [`start`] with more arguments for `kandev serve`; the log is appended to.
pub fn start_with(home: &Path, extra: &[&str]) -> Server {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(home.join("server.log"))
        .unwrap();
    let mut child = Command::new(KANDEV)
        .args(["serve", "--addr", "127.0.0.1:0"])
        .args(extra)
        .env("KANDEV_HOME", home)
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx.recv_timeout(Duration::from_secs(30)).expect("the server announces its address");
    let url =
        line.split_whitespace().find(|w| w.starts_with("http://")).expect("an address").to_owned();
    Server { child, url }
}
