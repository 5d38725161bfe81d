//! Names the commit the binary was built from in `kandev --version` (`KANDEV_COMMIT`): the
//! `KANDEV_COMMIT` variable when set (a build from a source archive), else git's short id of
//! `HEAD`, `-dirty` when the work tree has changes; `unknown` without either.

#![allow(clippy::disallowed_methods, reason = "a build script asks git, at build time")]

use std::path::PathBuf;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn main() {
    println!("cargo:rerun-if-env-changed=KANDEV_COMMIT");
    let commit = match std::env::var("KANDEV_COMMIT") {
        Ok(given) if !given.trim().is_empty() => given.trim().to_owned(),
        _ => from_git().unwrap_or_else(|| "unknown".to_owned()),
    };
    println!("cargo:rustc-env=KANDEV_COMMIT={commit}");
}

fn from_git() -> Option<String> {
    let head = git(&["rev-parse", "--short=12", "HEAD"])?;
    // Built again when HEAD moves (a commit, a checkout) or the index changes (dirty or not).
    for path in ["HEAD", "index"] {
        if let Some(file) = git(&["rev-parse", "--git-path", path]) {
            println!("cargo:rerun-if-changed={}", PathBuf::from(file).display());
        }
    }
    if let Some(reference) = git(&["symbolic-ref", "-q", "HEAD"])
        && let Some(file) = git(&["rev-parse", "--git-path", &reference])
    {
        println!("cargo:rerun-if-changed={file}");
    }
    let dirty =
        git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    Some(if dirty { format!("{head}-dirty") } else { head })
}
