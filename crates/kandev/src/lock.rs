//! One server per home and per SQLite database: `kandev serve` holds an OS lock (`flock`) on
//! a file for as long as it runs, and a second server that cannot take it is refused, naming
//! the first one's pid.
//!
//! What it guards: `<home>/server.lock` (the home's runner socket, worktrees and agent state,
//! and its default database), and for a SQLite database `<database>.lock` beside the file
//! (the same database used from two homes). PostgreSQL has its own lock (the store's advisory
//! lock). The kernel releases the lock when the server's process ends, however it ends
//! (`kill -9` too), so a crash never leaves a stale lock. The file is opened close-on-exec
//! (Rust opens every file so), so processes the server starts (the local runner, which
//! outlives it, and agents) do not hold it. The pid written into the file is only for the
//! message: the lock, not the pid, decides. Limits: a lock on a network file system is as
//! good as that file system's `flock`; commands that share the database (`kandev user`,
//! `kandev db copy`) do not take it.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// A lock held until it is dropped (or the process ends).
#[derive(Debug)]
pub struct ServerLock {
    _file: Option<File>,
}

/// Takes `<home>/server.lock`; refused while another server holds it.
pub fn lock_home(home: &Path) -> Result<ServerLock> {
    take(&home.join("server.lock"), |pid| {
        format!(
            "another kandev server{} is using {}; stop it first, or give this one another --home",
            pid_text(pid),
            home.display()
        )
    })
}

/// Takes `<database>.lock` beside a SQLite database file (its real path, so two spellings
/// of one file are one lock); refused while another server holds it.
pub fn lock_database(database: &Path) -> Result<ServerLock> {
    let lock = lock_path(database)?;
    take(&lock, |pid| {
        format!(
            "another kandev server{} is using the database {}; stop it first (one server per database)",
            pid_text(pid),
            database.display()
        )
    })
}

fn pid_text(pid: Option<u32>) -> String {
    pid.map(|pid| format!(" (pid {pid})")).unwrap_or_default()
}

/// `<database>.lock` of the database's real path; its folder is created (the store would
/// create it next).
fn lock_path(database: &Path) -> Result<PathBuf> {
    let name = database
        .file_name()
        .with_context(|| format!("{} is not a database file name", database.display()))?;
    let parent = database.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent)
        .with_context(|| format!("cannot create the folder {}", parent.display()))?;
    let real = match std::fs::canonicalize(database) {
        Ok(real) => real,
        Err(_) => std::fs::canonicalize(parent)
            .with_context(|| format!("cannot find the folder {}", parent.display()))?
            .join(name),
    };
    let mut lock = real.into_os_string();
    lock.push(".lock");
    Ok(PathBuf::from(lock))
}

fn take(path: &Path, refusal: impl FnOnce(Option<u32>) -> String) -> Result<ServerLock> {
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot open the lock file {}", path.display()))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let mut text = String::new();
            let _ = file.read_to_string(&mut text);
            anyhow::bail!(refusal(text.trim().parse().ok()));
        }
        Err(TryLockError::Error(err)) if err.kind() == std::io::ErrorKind::Unsupported => {
            tracing::warn!(
                path = %path.display(),
                "this file system cannot lock files: nothing stops a second server on this home"
            );
            return Ok(ServerLock { _file: None });
        }
        Err(TryLockError::Error(err)) => {
            return Err(err).with_context(|| format!("cannot lock {}", path.display()));
        }
    }
    // Ours now: the pid of the previous holder (ended) is replaced by ours.
    let written = file
        .set_len(0)
        .and_then(|()| file.rewind())
        .and_then(|()| writeln!(file, "{}", std::process::id()))
        .and_then(|()| file.flush());
    if let Err(err) = written {
        tracing::warn!(path = %path.display(), error = %err, "cannot write the pid into the lock file");
    }
    Ok(ServerLock { _file: Some(file) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_is_refused_naming_the_holder_and_released_on_drop() {
        let home = tempfile::tempdir().unwrap();
        let held = lock_home(home.path()).unwrap();
        let text = std::fs::read_to_string(home.path().join("server.lock")).unwrap();
        assert_eq!(text.trim(), std::process::id().to_string());
        let err = lock_home(home.path()).unwrap_err().to_string();
        let wanted = format!("(pid {}) is using {}", std::process::id(), home.path().display());
        assert!(err.contains(&wanted), "{err}");
        drop(held);
        lock_home(home.path()).unwrap();
    }

    #[test]
    fn two_spellings_of_one_database_are_one_lock() {
        let dir = tempfile::tempdir().unwrap();
        let database = dir.path().join("kandev.db");
        let _held = lock_database(&database).unwrap();
        std::os::unix::fs::symlink(dir.path(), dir.path().join("link")).unwrap();
        let other = dir.path().join("link/./kandev.db");
        let err = lock_database(&other).unwrap_err().to_string();
        assert!(err.contains("is using the database"), "{err}");
    }
}
