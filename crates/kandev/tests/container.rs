//! Issue 42 scope 6, the ground the container executor's tests stand on: Podman from Debian
//! with the project's `scripts/containers.conf` runs a container on this kind of machine, and
//! the test image (`kandev_testkit::container`, built without a registry) runs this build's
//! `kandev`, mounted read-only, with no network and none of the host's files.

#![allow(clippy::disallowed_methods, reason = "tests spawn tasks and start processes freely")]

use std::path::{Path, PathBuf};
use std::process::Command;

use kandev_testkit::container::Podman;

mod support;

use support::KANDEV;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn podman() -> Podman {
    Podman::new(&workspace(), &workspace().join("target/containers"))
}

#[test]
fn i42_s6_the_test_image_runs_this_kandev_without_a_network_or_the_hosts_files_and_is_built_once() {
    let podman = podman();
    let image = podman.test_image(KANDEV.path());
    let secret_dir = tempfile::tempdir().unwrap();
    let secret = secret_dir.path().join("secret.txt");
    std::fs::write(&secret, "not for the container").unwrap();
    let mount = format!("{}:/opt/kandev/kandev:ro", KANDEV.path().display());
    let script = format!(
        "/opt/kandev/kandev --version; hostname; ls /sys/class/net; cat {} || echo unreadable",
        secret.display()
    );
    let output = podman.run(&[
        "run",
        "--rm",
        "--network",
        "none",
        "--hostname",
        "kandev-task",
        "-v",
        &mount,
        &image,
        "/bin/sh",
        "-c",
        &script,
    ]);
    let seen = String::from_utf8_lossy(&output.stdout);
    let lines: Vec<&str> = seen.lines().collect();
    let version = Command::new(KANDEV.path()).arg("--version").output().unwrap();
    let version = String::from_utf8_lossy(&version.stdout);
    assert_eq!(lines, [version.trim(), "kandev-task", "lo", "unreadable"], "{seen}");

    // Built once per set of files: asked again, the same image, not a new import.
    let id = |name: &str| podman.run(&["image", "inspect", "--format", "{{.Id}}", name]).stdout;
    let before = id(&image);
    assert_eq!(podman.test_image(KANDEV.path()), image);
    assert_eq!(id(&image), before, "the test image was imported again");
}
