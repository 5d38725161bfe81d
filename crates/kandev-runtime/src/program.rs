//! Facts about the programs and the disk of this machine, for `kandev doctor` and the
//! profiles' "installed" mark: whether a program is found, the version it prints, and the
//! free space of a folder's file system.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;

use crate::group::ProcessGroup;

/// How long `<program> --version` may take.
const VERSION_TIMEOUT: Duration = Duration::from_secs(10);

/// A bare name is on `PATH` (as an executable file's name in one of its folders).
pub fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
        .unwrap_or(false)
}

/// A program given as a path exists as a file; a bare name is on `PATH`.
pub fn command_found(program: &str) -> bool {
    if program.contains('/') { Path::new(program).is_file() } else { on_path(program) }
}

/// The first line `program args…` prints (its version), or `None` when it cannot run, fails,
/// or says nothing within 10 s.
pub async fn version_of(program: &str, args: &[&str]) -> Option<String> {
    let mut command = Command::new(program);
    command.args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let (child, group) = ProcessGroup::spawn(&mut command).ok()?;
    let output =
        tokio::time::timeout(VERSION_TIMEOUT, child.wait_with_output()).await.ok()?.ok()?;
    group.release();
    if !output.status.success() {
        return None;
    }
    // `ssh -V` prints on stderr.
    let text = if output.stdout.is_empty() { output.stderr } else { output.stdout };
    let text = String::from_utf8_lossy(&text);
    text.lines().map(str::trim).find(|l| !l.is_empty()).map(str::to_owned)
}

/// The bytes an unprivileged user may still write on the file system holding `path`.
pub fn free_bytes(path: &Path) -> std::io::Result<u64> {
    let stats = rustix::fs::statvfs(path)?;
    Ok(stats.f_bavail.saturating_mul(stats.f_frsize))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn i43_a4_a_program_s_version_is_its_first_line_and_a_missing_one_has_none() {
        let git = version_of("git", &["--version"]).await.expect("git runs here");
        assert!(git.starts_with("git version "), "{git}");
        assert_eq!(version_of("no-such-program-kandev", &["--version"]).await, None);
        assert!(on_path("git") && !on_path("no-such-program-kandev"));
        assert!(free_bytes(Path::new("/")).unwrap() > 0);
    }
}
