//! Issue 12, finding 5: `$KANDEV_HOME` and the database hold profile secrets, so the real
//! binary makes them its owner's only: the home 0700, `kandev.db` and its `-wal`/`-shm`
//! 0600, for a new install and for an existing one whose files were left open.

mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Stdio;

use support::{KANDEV, Server};

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Starts `kandev serve` on `home`, which need not exist yet.
fn serve(home: &Path) -> Server {
    let extra = ["--addr", "127.0.0.1:0"];
    let (child, line) = support::serve_first_line(KANDEV.command(), home, &extra, Stdio::null());
    assert!(line.contains("http://"), "{line}");
    Server { child, url: String::new(), log: home.join("server.log") }
}

fn assert_private(home: &Path) {
    assert_eq!(mode(home), 0o700, "the home folder");
    for file in ["kandev.db", "kandev.db-wal", "kandev.db-shm"] {
        assert_eq!(mode(&home.join(file)), 0o600, "{file}");
    }
}

#[test]
fn i12_f5_home_and_database_files_are_private_for_new_and_existing_installs() {
    let tmp = tempfile::tempdir().unwrap();
    set_mode(tmp.path(), 0o755);
    let home = tmp.path().join("home");

    let server = serve(&home);
    assert_private(&home);
    drop(server);

    // An install from before: everything readable by others.
    set_mode(&home, 0o755);
    for file in ["kandev.db", "kandev.db-wal", "kandev.db-shm"] {
        if home.join(file).exists() {
            set_mode(&home.join(file), 0o644);
        }
    }
    let server = serve(&home);
    assert_private(&home);
    drop(server);
}
