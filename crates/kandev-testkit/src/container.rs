//! A container engine for the container executor's tests (issue 42): Podman from Debian
//! (installed by scripts/setup) with the project's own `scripts/containers.conf` (runc, no
//! default ulimits) through `CONTAINERS_CONF`, and its images and containers in a store of the
//! test's own (a `storage.conf` with its roots under the target folder, through
//! `CONTAINERS_STORAGE_CONF`): the machine's configuration and its containers are never
//! touched. A server under test gets the same two variables ([`Podman::env`]), so the
//! product's own `podman` commands use the same store and settings. No registry is needed: [`Podman::test_image`]
//! builds an image in about a second from files already on the machine — busybox-static and
//! the shared libraries a binary needs (as `ldd` lists them) — and keeps it by content, so a
//! second test or run reuses it. It fails the test with the reason when Podman cannot run; it
//! is never skipped.

use std::collections::BTreeSet;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Where busybox-static puts its one binary.
const BUSYBOX: &str = "/bin/busybox";
/// The applets the test image links to busybox.
const APPLETS: &[&str] = &["sh", "cat", "ls", "hostname", "wget", "nc", "sleep", "echo", "id"];

/// Podman with the project's configuration and a store of the tests' own.
pub struct Podman {
    program: PathBuf,
    conf: PathBuf,
    storage_conf: PathBuf,
    /// Held while an image is looked up or built: tests run at once in processes of their
    /// own, and two imports of one name would move the tag under a server using it.
    image_lock: PathBuf,
}

impl Podman {
    /// Podman whose images and containers live under `store` (e.g. `target/containers`).
    pub fn new(workspace: &Path, store: &Path) -> Podman {
        let program = PathBuf::from("/usr/bin/podman");
        assert!(
            program.is_file() && Path::new("/usr/sbin/runc").is_file(),
            "Podman and runc are not installed: run scripts/setup (it installs Debian's podman, \
             runc and busybox-static)"
        );
        let conf = workspace.join("scripts/containers.conf");
        assert!(conf.is_file(), "{} is missing", conf.display());
        std::fs::create_dir_all(store).unwrap();
        let store = store.canonicalize().unwrap();
        let storage_conf = store.join("storage.conf");
        let text = format!(
            "[storage]\ndriver = \"overlay\"\ngraphroot = \"{}\"\nrunroot = \"{}\"\n",
            store.join("storage").display(),
            store.join("run").display()
        );
        if std::fs::read_to_string(&storage_conf).ok().as_deref() != Some(text.as_str()) {
            std::fs::write(&storage_conf, text).unwrap();
        }
        Podman { program, conf, storage_conf, image_lock: store.join("image.lock") }
    }

    /// The variables that point Podman at the project's configuration and the tests' store:
    /// for a server under test, whose container executor runs `podman` itself.
    pub fn env(&self) -> [(&'static str, PathBuf); 2] {
        [
            ("CONTAINERS_CONF", self.conf.clone()),
            ("CONTAINERS_STORAGE_CONF", self.storage_conf.clone()),
        ]
    }

    /// `podman` with the configuration and the store set; the caller adds the command.
    pub fn command(&self) -> Command {
        let mut command = Command::new(&self.program);
        command.envs(self.env());
        command
    }

    /// Runs `podman args…`; fails the test, with Podman's own words, when it fails.
    pub fn run(&self, args: &[&str]) -> Output {
        let output = self.command().args(args).output().expect("start podman");
        assert!(
            output.status.success(),
            "podman {args:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        output
    }

    /// An image with busybox and the shared libraries `binary` needs, built once per set of
    /// files: its name, `localhost/kandev-test:<hash of the files>`.
    pub fn test_image(&self, binary: &Path) -> String {
        self.image_of(shared_libraries(binary).into_iter().collect())
    }

    /// An image with busybox alone: no C library, so no dynamically linked program (this
    /// `kandev`) runs in it.
    pub fn busybox_image(&self) -> String {
        self.image_of(BTreeSet::new())
    }

    /// An image of busybox and `files` (copied to the same paths), built once per set of
    /// files.
    fn image_of(&self, mut files: BTreeSet<PathBuf>) -> String {
        assert!(
            Path::new(BUSYBOX).is_file(),
            "busybox is not installed: run scripts/setup (it installs Debian's busybox-static)"
        );
        files.insert(PathBuf::from(BUSYBOX));
        let lock = std::fs::File::create(&self.image_lock).unwrap();
        lock.lock().expect("lock the test image");
        let name = format!("localhost/kandev-test:{:016x}", content_hash(&files));
        let exists = self.command().args(["image", "exists", &name]).status();
        if exists.is_ok_and(|status| status.success()) {
            return name;
        }
        let rootfs = tempfile::tempdir().unwrap();
        for file in &files {
            let target = rootfs.path().join(file.strip_prefix("/").unwrap());
            std::fs::create_dir_all(target.parent().unwrap()).unwrap();
            // The file itself, not a link into the host's tree.
            std::fs::copy(file, &target).unwrap();
        }
        for applet in APPLETS {
            std::os::unix::fs::symlink("busybox", rootfs.path().join("bin").join(applet)).unwrap();
        }
        let tar = rootfs.path().with_extension("tar");
        let packed = Command::new("tar")
            .arg("-C")
            .arg(rootfs.path())
            .arg("-cf")
            .arg(&tar)
            .arg(".")
            .status()
            .expect("start tar");
        assert!(packed.success(), "tar of the test image's files failed");
        self.run(&["import", "--quiet", tar.to_str().unwrap(), &name]);
        let _ = std::fs::remove_file(&tar);
        name
    }
}

/// The shared libraries `binary` loads, the dynamic loader included, as `ldd` lists them
/// (real paths: a link is followed to its file).
pub fn shared_libraries(binary: &Path) -> Vec<PathBuf> {
    let output = Command::new("ldd").arg(binary).output().expect("start ldd");
    assert!(output.status.success(), "ldd {} failed", binary.display());
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().find(|word| word.starts_with('/')))
        .map(PathBuf::from)
        .collect()
}

/// A hash of the files' paths, sizes and modification times: a new build of a library (or of
/// busybox) makes a new image.
fn content_hash(files: &BTreeSet<PathBuf>) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    for file in files {
        let meta = std::fs::metadata(file)
            .unwrap_or_else(|err| panic!("{} for the test image: {err}", file.display()));
        (file, meta.len(), meta.modified().ok()).hash(&mut hasher);
    }
    hasher.finish()
}
