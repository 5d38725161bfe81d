//! Path confinement (issue 12, finding 4): paths resolve beneath the root without a
//! check-then-use race, writes never follow a symlink out, and hard-linked files are refused.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use kandev_runtime::confine::{EntryKind, PathError, RelPath, Root};

const SECRET: &str = "top secret from outside";

/// `tmp/root` (the root) and `tmp/outside/secret.txt`.
struct Fixture {
    tmp: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("root/src")).unwrap();
        std::fs::write(tmp.path().join("root/src/lib.txt"), "inside").unwrap();
        std::fs::create_dir_all(tmp.path().join("outside")).unwrap();
        std::fs::write(tmp.path().join("outside/secret.txt"), SECRET).unwrap();
        Fixture { tmp }
    }

    fn root(&self) -> PathBuf {
        self.tmp.path().join("root")
    }

    fn outside(&self) -> PathBuf {
        self.tmp.path().join("outside")
    }

    fn open(&self) -> Root {
        Root::open(&self.root()).unwrap()
    }
}

fn rel(path: &str) -> RelPath {
    RelPath::parse(path).unwrap()
}

fn read(root: &Root, path: &str) -> Result<String, PathError> {
    let path = RelPath::parse(path)?;
    root.read(&path, 1 << 20).map(|f| String::from_utf8(f.bytes).unwrap())
}

fn is_forbidden<T: std::fmt::Debug>(result: &Result<T, PathError>) -> bool {
    matches!(result, Err(PathError::Forbidden { .. }))
}

#[test]
fn i12_f4_paths_leaving_the_root_are_refused_and_inside_links_followed() {
    let fx = Fixture::new();
    let root = fx.root();
    std::fs::create_dir(root.join(".git")).unwrap();
    std::fs::write(root.join(".git/config"), "[core]").unwrap();
    symlink(fx.outside().join("secret.txt"), root.join("secret-link")).unwrap();
    symlink(fx.outside(), root.join("src/escape")).unwrap();
    symlink("../../outside/secret.txt", root.join("src/relative-escape")).unwrap();
    symlink(fx.tmp.path().join("nowhere/file"), root.join("dangling")).unwrap();
    symlink(root.join("src"), root.join("inner")).unwrap();
    symlink("src/lib.txt", root.join("relative-inner")).unwrap();
    symlink(root.join(".git"), root.join("gitlink")).unwrap();
    symlink("loop-b", root.join("loop-a")).unwrap();
    symlink("loop-a", root.join("loop-b")).unwrap();
    let dir = fx.open();

    for (path, why) in [
        ("../outside/secret.txt", "`..`"),
        ("src/../lib.txt", "`..` even inside"),
        ("/etc/passwd", "absolute"),
        ("secret-link", "absolute symlink to a file outside"),
        ("src/relative-escape", "relative symlink climbing out"),
        ("src/escape/secret.txt", "symlinked directory in the middle"),
        ("dangling", "dangling symlink pointing outside"),
        (".git/config", "git metadata"),
        (".GIT/config", "git metadata, any case"),
        ("gitlink/config", "git metadata through a symlink"),
        ("loop-a", "a symlink loop"),
    ] {
        let result = read(&dir, path);
        assert!(is_forbidden(&result), "{path} ({why}) gave {result:?}");
    }
    let message = read(&dir, "src/escape/secret.txt").unwrap_err().to_string();
    assert!(message.contains("outside the working directory"), "{message}");

    assert_eq!(read(&dir, "src/lib.txt").unwrap(), "inside");
    assert_eq!(read(&dir, "./src//lib.txt").unwrap(), "inside");
    assert_eq!(read(&dir, "inner/lib.txt").unwrap(), "inside", "absolute link under the root");
    assert_eq!(read(&dir, "relative-inner").unwrap(), "inside");
    assert!(matches!(read(&dir, "src"), Err(PathError::NotAFile { .. })));
    assert!(matches!(read(&dir, "missing.txt"), Err(PathError::NotFound { .. })));
    assert!(matches!(read(&dir, "src/lib.txt/x"), Err(PathError::NotFound { .. })));
    assert_eq!(rel("./a//b/").normalized(), "a/b");
    assert!(matches!(Root::open(&fx.tmp.path().join("gone")), Err(PathError::NotFound { .. })));
    symlink(fx.root(), fx.tmp.path().join("root-link")).unwrap();
    assert!(matches!(
        Root::open(&fx.tmp.path().join("root-link")),
        Err(PathError::Forbidden { .. })
    ));

    // An entry is looked at without following its last component.
    let link = dir.entry(&rel("secret-link")).unwrap().unwrap();
    assert_eq!(link.kind, EntryKind::Symlink);
    assert!(dir.entry(&rel("missing/x")).unwrap().is_none());
    assert!(is_forbidden(&dir.entry(&rel("src/escape/secret.txt"))));
}

#[test]
fn i12_f4_agent_paths_are_absolute_under_the_root_or_relative() {
    let fx = Fixture::new();
    let dir = fx.open();
    let inside = fx.root().join("src/lib.txt");
    let canonical = std::fs::canonicalize(&inside).unwrap();
    for path in
        [inside.to_str().unwrap(), canonical.to_str().unwrap(), "src/lib.txt", "src/../src/lib.txt"]
    {
        let relative = dir.agent_path(path).unwrap();
        assert_eq!(dir.read(&relative, 100).unwrap().bytes, b"inside", "{path}");
    }
    let outside = fx.outside().join("secret.txt");
    assert!(is_forbidden(&dir.agent_path(outside.to_str().unwrap())));
    assert!(is_forbidden(&dir.agent_path("/etc/passwd")));
    assert!(is_forbidden(&dir.agent_path(".git/config")));
    let climbing = dir.agent_path("src/../../outside/secret.txt").unwrap();
    assert!(is_forbidden(&dir.read(&climbing, 100)), "`..` never goes above the root");
}

/// The finding: an entry swapped between a file and a symlink to an outside file while it is
/// read. The walk opens the last component with `O_NOFOLLOW`, so no read can see the outside
/// file, whatever the timing.
#[test]
fn i12_f4_swapping_a_file_and_a_symlink_never_reads_outside() {
    let fx = Fixture::new();
    let root = fx.root();
    let secret = fx.outside().join("secret.txt");
    std::fs::write(root.join("race"), "inside").unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let swaps = Arc::new(AtomicU64::new(0));
    let swapper = {
        let (root, stop, swaps) = (root.clone(), stop.clone(), swaps.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let _ = std::fs::remove_file(root.join("race.link"));
                symlink(&secret, root.join("race.link")).unwrap();
                std::fs::rename(root.join("race.link"), root.join("race")).unwrap();
                std::fs::write(root.join("race.file"), "inside").unwrap();
                std::fs::rename(root.join("race.file"), root.join("race")).unwrap();
                swaps.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    let dir = fx.open();
    let (mut inside, mut refused) = (0, 0);
    // At least 20,000 reads and 1,000 swaps (bounded in time on a loaded machine).
    let started = Instant::now();
    while inside + refused < 20_000
        || (swaps.load(Ordering::Relaxed) < 1_000 && started.elapsed() < Duration::from_secs(20))
    {
        match read(&dir, "race") {
            Ok(text) => {
                assert_ne!(text, SECRET, "an outside file was read");
                inside += 1;
            }
            Err(PathError::Forbidden { .. } | PathError::NotFound { .. }) => refused += 1,
            Err(other) => panic!("unexpected error {other:?}"),
        }
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
    let swaps = swaps.load(Ordering::Relaxed);
    assert!(swaps > 100, "the swapper ran ({swaps} swaps)");
    assert!(inside > 0 && refused > 0, "both states were seen: {inside} reads, {refused} refusals");
}

#[test]
fn i12_f4_writes_never_follow_a_symlink_out_and_create_nothing_outside() {
    let fx = Fixture::new();
    let root = fx.root();
    let target = fx.outside().join("created.txt");
    symlink(&target, root.join("dangling-out")).unwrap();
    symlink("../outside/created.txt", root.join("dangling-relative")).unwrap();
    symlink(fx.outside(), root.join("dir-out")).unwrap();
    symlink(fx.outside().join("secret.txt"), root.join("file-out")).unwrap();
    symlink("src/new/made.txt", root.join("dangling-in")).unwrap();
    let dir = fx.open();

    for path in ["dangling-out", "dangling-relative", "dir-out/created.txt", "file-out"] {
        let result = dir.write(&rel(path), b"written");
        assert!(is_forbidden(&result), "{path} gave {result:?}");
    }
    assert!(!target.exists(), "nothing was created outside");
    let outside_entries = std::fs::read_dir(fx.outside()).unwrap().count();
    assert_eq!(outside_entries, 1, "only the secret is outside");
    assert_eq!(std::fs::read_to_string(fx.outside().join("secret.txt")).unwrap(), SECRET);

    // Inside, a dangling symlink's target and missing directories are created.
    dir.write(&rel("dangling-in"), b"made").unwrap();
    assert_eq!(std::fs::read_to_string(root.join("src/new/made.txt")).unwrap(), "made");
    dir.write(&rel("a/b/c.txt"), b"deep").unwrap();
    assert_eq!(std::fs::read_to_string(root.join("a/b/c.txt")).unwrap(), "deep");
    dir.write(&rel("src/lib.txt"), b"new").unwrap();
    assert_eq!(std::fs::read_to_string(root.join("src/lib.txt")).unwrap(), "new");
    assert!(matches!(dir.write(&rel("src"), b"x"), Err(PathError::NotAFile { .. })));
}

#[test]
fn i12_f4_hard_linked_files_are_neither_read_nor_written() {
    let fx = Fixture::new();
    let root = fx.root();
    let secret = fx.outside().join("secret.txt");
    std::fs::hard_link(&secret, root.join("linked.txt")).unwrap();
    let dir = fx.open();

    let entry = dir.entry(&rel("linked.txt")).unwrap().unwrap();
    assert!(entry.is_hard_linked() && entry.links == 2);
    let read_result = read(&dir, "linked.txt");
    assert!(is_forbidden(&read_result), "{read_result:?}");
    assert!(read_result.unwrap_err().to_string().contains("hard link"));
    assert!(is_forbidden(&dir.write(&rel("linked.txt"), b"overwritten")));
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), SECRET, "the outside file is intact");
}

#[test]
fn walk_lists_symlinks_without_following_them_and_skips_git() {
    let fx = Fixture::new();
    let root = fx.root();
    std::fs::create_dir(root.join(".git")).unwrap();
    std::fs::write(root.join(".git/HEAD"), "ref").unwrap();
    symlink(fx.outside(), root.join("out")).unwrap();
    let dir = fx.open();
    let (entries, truncated) = dir.walk(100).unwrap();
    let mut listed: Vec<(&str, EntryKind)> =
        entries.iter().map(|e| (e.path.as_str(), e.entry.kind)).collect();
    listed.sort_by_key(|(path, _)| *path);
    assert_eq!(
        listed,
        [("out", EntryKind::Symlink), ("src", EntryKind::Dir), ("src/lib.txt", EntryKind::File)]
    );
    assert!(!truncated);
    let (entries, truncated) = dir.walk(1).unwrap();
    assert_eq!((entries.len(), truncated), (1, true));
}

#[test]
fn the_root_path_is_kept() {
    let fx = Fixture::new();
    assert_eq!(fx.open().path(), Path::new(&fx.root()));
}
