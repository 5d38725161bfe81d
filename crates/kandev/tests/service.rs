//! Issue 43, `kandev service`: the systemd unit it writes, checked by `systemd-analyze
//! verify` (Debian's systemd, installed by `scripts/setup`; no running systemd needed).

#![allow(clippy::disallowed_methods, reason = "tests start processes freely")]

use std::path::Path;
use std::process::{Command, Output};

mod support;

use support::KANDEV;

fn service(args: &[&str], unit_dir: &Path) -> Output {
    KANDEV.command().arg("service").args(args).arg("--unit-dir").arg(unit_dir).output().unwrap()
}

/// `systemd-analyze verify` of the unit: what it said (nothing when the unit is right).
fn verify(unit: &Path) -> String {
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(unit)
        .output()
        .expect("systemd-analyze runs (scripts/setup installs Debian's systemd)");
    let said =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "systemd-analyze verify failed: {said}");
    said
}

#[test]
fn i43_s3_service_install_writes_a_user_unit_that_systemd_accepts() {
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let out = KANDEV
        .command()
        .args(["service", "install", "--no-start", "--addr", "127.0.0.1:38500"])
        .arg("--home")
        .arg(home.path())
        .arg("--unit-dir")
        .arg(dir.path())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        said.contains("systemctl --user daemon-reload && systemctl --user enable --now"),
        "{said}"
    );
    let unit_path = dir.path().join("kandev.service");
    let unit = std::fs::read_to_string(&unit_path).unwrap();
    let exe = KANDEV.path().canonicalize().unwrap();
    assert!(
        unit.contains(&format!("ExecStart={} serve --addr 127.0.0.1:38500\n", exe.display())),
        "{unit}"
    );
    assert!(
        unit.contains(&format!("Environment=KANDEV_HOME={}\n", home.path().display())),
        "{unit}"
    );
    assert!(unit.contains("Environment=PATH="), "the installing shell's PATH: {unit}");
    assert!(unit.contains("Restart=on-failure\n"), "{unit}");
    assert!(unit.contains("KillMode=process\n"), "the runner outlives a restart: {unit}");
    assert!(unit.contains("WantedBy=default.target\n"), "{unit}");
    assert!(unit.contains("EnvironmentFile=-%h/.config/kandev/env\n"), "secrets go there: {unit}");
    let user_only = service(&["install", "--no-start", "--user", "root"], dir.path());
    assert!(!user_only.status.success(), "--user is for --system units");
    let said = verify(&unit_path);
    assert!(said.trim().is_empty(), "systemd has remarks on the unit: {said}");

    // Uninstall removes it (systemd not being reachable here is only a warning).
    let out = service(&["uninstall"], dir.path());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!unit_path.exists(), "the unit is removed");
    let out = service(&["status"], dir.path());
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("kandev service install"), "status says what to do: {said}");
}

#[test]
fn i43_s3_a_system_unit_runs_as_the_named_user_at_boot() {
    let dir = tempfile::tempdir().unwrap();
    let user = nix::unistd::User::from_uid(nix::unistd::getuid()).unwrap().unwrap();
    let out = service(&["install", "--system", "--no-start", "--user", &user.name], dir.path());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("sudo systemctl daemon-reload"), "{said}");
    let unit_path = dir.path().join("kandev.service");
    let unit = std::fs::read_to_string(&unit_path).unwrap();
    assert!(unit.contains(&format!("User={}\n", user.name)), "{unit}");
    assert!(unit.contains("WantedBy=multi-user.target\n"), "{unit}");
    let said = verify(&unit_path);
    assert!(said.trim().is_empty(), "systemd has remarks on the unit: {said}");

    let out = service(
        &["install", "--system", "--no-start", "--user", "no-such-user-kandev"],
        dir.path(),
    );
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("no such user"), "{said}");
}
