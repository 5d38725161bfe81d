//! Issue 43, install and operate: the release archive (`scripts/package`, `install.sh`).

#![allow(clippy::disallowed_methods, reason = "tests start processes freely")]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod support;

use support::{KANDEV, Kandev};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn run(command: &mut Command) -> Output {
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "{command:?} failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// `scripts/package` of this build's binary into `out`: the archive's path.
fn package(out: &Path) -> PathBuf {
    let script = workspace().join("scripts/package");
    let made = run(Command::new(script).arg(KANDEV.path()).arg("--out").arg(out));
    PathBuf::from(String::from_utf8_lossy(&made.stdout).trim())
}

/// The archive unpacked in `into`: the folder it holds.
fn unpack(archive: &Path, into: &Path) -> PathBuf {
    run(Command::new("tar").arg("-xzf").arg(archive).arg("-C").arg(into));
    let mut entries: Vec<PathBuf> =
        std::fs::read_dir(into).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(entries.len(), 1, "one top folder: {entries:?}");
    entries.pop().unwrap()
}

#[test]
fn i43_a1_packaging_the_same_binary_twice_gives_the_same_bytes_and_its_sha256() {
    let (one, two) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let first = package(one.path());
    let second = package(two.path());
    let name = first.file_name().unwrap().to_string_lossy().into_owned();
    let version = env!("CARGO_PKG_VERSION");
    assert!(name.starts_with(&format!("kandev-{version}-")) && name.ends_with(".tar.gz"), "{name}");
    assert_eq!(std::fs::read(&first).unwrap(), std::fs::read(&second).unwrap(), "not reproducible");
    let checked = run(Command::new("sha256sum")
        .arg("-c")
        .arg(format!("{name}.sha256"))
        .current_dir(one.path()));
    assert!(String::from_utf8_lossy(&checked.stdout).contains(": OK"));
    let unpacked = tempfile::tempdir().unwrap();
    let dir = unpack(&first, unpacked.path());
    for file in ["bin/kandev", "LICENSE", "README.md", "install.sh", "MANIFEST.sha256"] {
        assert!(dir.join(file).is_file(), "{file} is missing from the archive");
    }
    let licence = std::fs::read_to_string(dir.join("LICENSE")).unwrap();
    assert!(licence.contains("Apache License") && licence.contains("Version 2.0"));
}

#[test]
fn i43_a1_version_names_the_commit() {
    let out = run(KANDEV.command().arg("--version"));
    let said = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let expected = format!("kandev {} (commit ", env!("CARGO_PKG_VERSION"));
    assert!(said.starts_with(&expected) && said.ends_with(')'), "{said}");
    let commit = said.trim_end_matches(')').rsplit(' ').next().unwrap();
    assert!(commit.len() >= 7 && commit != "unknown", "no commit named: {said}");
}

#[tokio::test]
async fn i43_a1_the_archive_installs_into_a_prefix_and_serves_the_ui_from_there() {
    let dist = tempfile::tempdir().unwrap();
    let archive = package(dist.path());

    // A changed file: install.sh refuses the whole archive and installs nothing.
    let tampered = tempfile::tempdir().unwrap();
    let dir = unpack(&archive, tampered.path());
    std::fs::write(dir.join("README.md"), "changed\n").unwrap();
    let prefix = tempfile::tempdir().unwrap();
    let refused =
        Command::new(dir.join("install.sh")).arg("--prefix").arg(prefix.path()).output().unwrap();
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("do not match MANIFEST.sha256"), "{said}");
    assert!(!prefix.path().join("bin").exists(), "nothing installed");

    let unpacked = tempfile::tempdir().unwrap();
    let dir = unpack(&archive, unpacked.path());
    // An empty prefix would be the root's /bin: refused.
    let empty = Command::new(dir.join("install.sh")).arg("--prefix=").output().unwrap();
    assert_eq!(empty.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&empty.stderr).contains("--prefix needs a folder"));
    let installed = run(Command::new(dir.join("install.sh")).arg("--prefix").arg(prefix.path()));
    let said = String::from_utf8_lossy(&installed.stdout);
    assert!(said.contains("Next: kandev serve"), "install.sh says what to run next: {said}");
    let binary = prefix.path().join("bin/kandev");
    assert!(binary.is_file(), "{said}");
    assert!(prefix.path().join("share/doc/kandev/LICENSE").is_file());

    // The installed binary serves the UI it embeds.
    let binary: &'static str = Box::leak(binary.display().to_string().into_boxed_str());
    let home = tempfile::tempdir().unwrap();
    let server = Kandev::at(binary).start(home.path());
    let health = reqwest::get(format!("{}/api/v1/health", server.url)).await.unwrap();
    assert!(health.status().is_success());
    let page = reqwest::get(format!("{}/", server.url)).await.unwrap().text().await.unwrap();
    assert!(page.contains("<title>Kandev</title>") && page.contains("/assets/"), "{page}");
    server.terminate();
}
