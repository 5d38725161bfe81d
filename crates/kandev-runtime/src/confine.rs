//! Path confinement: the one place where a path that comes from outside (the API's file
//! actions, an agent's `fs/read_text_file` and `fs/write_text_file`, later terminals) is
//! turned into an open file, always beneath a root directory and without a check-then-use
//! race.
//!
//! How: the root is opened once; every component is then opened relative to the directory
//! opened before it, with `O_NOFOLLOW`, so the kernel never follows a symlink on Kandev's
//! behalf. A symlink met on the way is read with `readlinkat` and its target is resolved by
//! the same walk, beneath the same root; `..` steps back to the directory the walk came
//! from and never above the root. Whatever happens to the tree meanwhile (an entry swapped
//! between a file and a symlink, a directory replaced), the walk only ever opens entries of
//! directories it already holds, so it cannot end up outside.
//!
//! Rules, the same for every caller:
//! - The path never leaves the root: a `..` above it, an absolute symlink target that is not
//!   under the root, a relative one that climbs out, and more than [`MAX_SYMLINKS`] links
//!   are refused ([`PathError::Forbidden`]). Symlinks that stay inside are followed.
//! - Nothing named `.git` (any letter case) is read or written, reached directly or through a
//!   symlink: git metadata is not a file of the worktree.
//! - A regular file with more than one hard link is neither read nor written: a hard link is
//!   indistinguishable from the file it links to, which may be outside the root.
//! - Writes never follow a symlink out of the root (dangling or not) and so never create a
//!   file outside it; they create missing directories on the way, inside.
//! - Only regular files are read or written (never a FIFO, socket or device).
//!
//! Limits: the root itself is trusted (opened by its path, refusing only a symlink as its
//! last component); a file the agent moves into the root (one link) is a file of the root;
//! a mount inside the root is crossed like a directory.

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Component, Path, PathBuf};

use rustix::fs::{AtFlags, CWD, FileType, Mode, OFlags, Stat};
use rustix::io::Errno;

/// Most symlinks one path may go through (as Linux's `MAXSYMLINKS`).
pub const MAX_SYMLINKS: usize = 40;

/// Why a path was not resolved. Messages are meant for users and agents as they are.
#[derive(Debug, thiserror::Error)]
pub enum PathError {
    /// The path leaves the root, names git metadata, or is a file Kandev does not touch.
    #[error("access to `{path}` is forbidden: {reason}")]
    Forbidden { path: String, reason: String },
    /// The path (or a directory on it) does not exist.
    #[error("`{path}` does not exist")]
    NotFound { path: String },
    /// A regular file was expected.
    #[error("`{path}` is not a regular file")]
    NotAFile { path: String },
    /// Any other filesystem error.
    #[error("cannot access `{path}`: {source}")]
    Io {
        path: String,
        #[source]
        source: io::Error,
    },
}

impl PathError {
    fn forbidden(path: &str, reason: impl Into<String>) -> Self {
        PathError::Forbidden { path: path.to_owned(), reason: reason.into() }
    }

    fn io(path: &str, errno: Errno) -> Self {
        PathError::Io { path: path.to_owned(), source: io::Error::from(errno) }
    }
}

type Result<T, E = PathError> = std::result::Result<T, E>;

const LEAVES: &str = "it leads outside the working directory";
const THROUGH_SYMLINK: &str = "a symlink on the path leads outside the working directory";
const GIT_METADATA: &str = "git metadata is not accessible";
const HARD_LINKED: &str = "the file has more than one hard link and may be a file from outside \
                           the working directory; Kandev does not read or write such files";

/// One step of a path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Name(OsString),
    Parent,
}

/// A path to resolve beneath a [`Root`]: made by [`RelPath::parse`] (the API's strict rules)
/// or [`Root::agent_path`] (an agent's absolute or relative path).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelPath {
    parts: Vec<Part>,
    /// The path as given, for messages.
    shown: String,
}

impl RelPath {
    /// A path relative to the root as the API takes it: absolute paths, any `..` (even one
    /// that would stay inside), a NUL byte and a `.git` component are refused; `.` and empty
    /// components are dropped, so `""` and `"."` name the root itself.
    pub fn parse(relative: &str) -> Result<RelPath> {
        let forbidden = |reason: &str| PathError::forbidden(relative, reason);
        if relative.contains('\0') {
            return Err(forbidden("the path contains a nul byte"));
        }
        let mut parts = Vec::new();
        for component in Path::new(relative).components() {
            match component {
                Component::Normal(name) if is_git(name) => return Err(forbidden(GIT_METADATA)),
                Component::Normal(name) => parts.push(Part::Name(name.to_owned())),
                Component::CurDir => {}
                Component::ParentDir => {
                    return Err(forbidden("`..` is not allowed; use a path inside the worktree"));
                }
                Component::RootDir | Component::Prefix(_) => {
                    return Err(forbidden(
                        "absolute paths are not allowed; use a path relative to the worktree",
                    ));
                }
            }
        }
        Ok(RelPath { parts, shown: relative.to_owned() })
    }

    /// The path with `.` and empty components dropped, `/`-separated (`./a//b` is `a/b`).
    pub fn normalized(&self) -> String {
        let names: Vec<String> = self
            .parts
            .iter()
            .map(|p| match p {
                Part::Name(name) => name.to_string_lossy().into_owned(),
                Part::Parent => "..".to_owned(),
            })
            .collect();
        names.join("/")
    }

    /// The path as it was given.
    pub fn as_given(&self) -> &str {
        &self.shown
    }
}

/// The kind of an entry, not following a symlink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    File,
    Dir,
    Symlink,
    /// A FIFO, socket or device.
    Other,
}

/// What [`Root::entry`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub kind: EntryKind,
    /// Bytes; for a symlink the length of its target.
    pub size: u64,
    /// Hard links to it.
    pub links: u64,
}

impl Entry {
    fn from_stat(stat: &Stat) -> Entry {
        let kind = match FileType::from_raw_mode(stat.st_mode) {
            FileType::RegularFile => EntryKind::File,
            FileType::Directory => EntryKind::Dir,
            FileType::Symlink => EntryKind::Symlink,
            _ => EntryKind::Other,
        };
        Entry { kind, size: u64::try_from(stat.st_size).unwrap_or(0), links: links(stat) }
    }

    /// A regular file with more than one hard link: its content may belong to a file outside.
    pub fn is_hard_linked(&self) -> bool {
        self.kind == EntryKind::File && self.links > 1
    }
}

#[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
fn links(stat: &Stat) -> u64 {
    stat.st_nlink as u64
}

/// The start of a file read with [`Root::read`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileBytes {
    /// At most the `max_bytes` asked for.
    pub bytes: Vec<u8>,
    /// The file has more than `max_bytes`.
    pub truncated: bool,
    /// Size of the whole file.
    pub size: u64,
}

/// One entry found by [`Root::walk`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalkEntry {
    /// Relative to the root, `/`-separated.
    pub path: String,
    pub entry: Entry,
}

/// An open directory every path is resolved beneath.
#[derive(Debug)]
pub struct Root {
    dir: OwnedFd,
    /// The path it was opened with, and its canonical form: absolute paths (of agents, of
    /// symlink targets) under either are taken as paths beneath the root.
    path: PathBuf,
    canonical: Option<PathBuf>,
}

/// What the last component of a walk turned out to be.
enum Step<T> {
    Done(T),
    /// A symlink: read it and go on with its target.
    Symlink,
    Fail(PathError),
}

impl Root {
    /// Opens `path` as the root. A missing root is [`PathError::NotFound`]; a root whose last
    /// component is a symlink is refused.
    pub fn open(path: &Path) -> Result<Root> {
        let shown = path.display().to_string();
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let is_symlink = || std::fs::symlink_metadata(path).is_ok_and(|m| m.is_symlink());
        let dir = rustix::fs::openat(CWD, path, flags, Mode::empty()).map_err(|e| match e {
            Errno::LOOP | Errno::MLINK | Errno::NOTDIR if is_symlink() => {
                PathError::forbidden(&shown, "the working directory is a symlink")
            }
            Errno::NOENT | Errno::NOTDIR => PathError::NotFound { path: shown.clone() },
            other => PathError::io(&shown, other),
        })?;
        Ok(Root { dir, path: path.to_path_buf(), canonical: std::fs::canonicalize(path).ok() })
    }

    /// The path the root was opened with.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The opened directory, for a child to change into (`terminal.rs`).
    pub(crate) fn dir_fd(&self) -> BorrowedFd<'_> {
        self.dir.as_fd()
    }

    /// An agent's path: absolute (it must be under the root) or relative to the root. `..`
    /// is allowed and resolved by the walk, never above the root; a NUL byte and `.git` are
    /// refused.
    pub fn agent_path(&self, requested: &str) -> Result<RelPath> {
        let forbidden = |reason: &str| PathError::forbidden(requested, reason);
        if requested.contains('\0') {
            return Err(forbidden("the path contains a nul byte"));
        }
        let path = Path::new(requested);
        let relative = if path.is_absolute() {
            self.strip_root(path).ok_or_else(|| forbidden(LEAVES))?
        } else {
            path
        };
        let mut parts = Vec::new();
        for component in relative.components() {
            match component {
                Component::Normal(name) if is_git(name) => return Err(forbidden(GIT_METADATA)),
                Component::Normal(name) => parts.push(Part::Name(name.to_owned())),
                Component::ParentDir => parts.push(Part::Parent),
                Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
            }
        }
        Ok(RelPath { parts, shown: requested.to_owned() })
    }

    /// `path` (absolute) relative to the root, if it is under it.
    fn strip_root<'p>(&self, path: &'p Path) -> Option<&'p Path> {
        path.strip_prefix(&self.path)
            .ok()
            .or_else(|| self.canonical.as_ref().and_then(|c| path.strip_prefix(c).ok()))
    }

    /// Reads a regular file: at most `max_bytes` of it.
    pub fn read(&self, path: &RelPath, max_bytes: usize) -> Result<FileBytes> {
        let (mut file, size) = self.open_file(path)?;
        let mut bytes = Vec::new();
        let limit = u64::try_from(max_bytes).unwrap_or(u64::MAX).saturating_add(1);
        (&mut file)
            .take(limit)
            .read_to_end(&mut bytes)
            .map_err(|source| PathError::Io { path: path.shown.clone(), source })?;
        let truncated = bytes.len() > max_bytes;
        bytes.truncate(max_bytes);
        let size = size.max(u64::try_from(bytes.len()).unwrap_or(u64::MAX));
        Ok(FileBytes { bytes, truncated, size })
    }

    /// Opens a regular file for reading; returns it with its size. Symlinks inside the root
    /// are followed; a file with more than one hard link is refused.
    pub fn open_file(&self, path: &RelPath) -> Result<(File, u64)> {
        let shown = path.shown.as_str();
        let flags =
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY;
        let fd = self.walk_to(path, false, |dir, name| {
            let Some(name) = name else {
                return Step::Fail(PathError::NotAFile { path: shown.to_owned() });
            };
            match rustix::fs::openat(dir, name, flags, Mode::empty()) {
                Ok(fd) => Step::Done(fd),
                Err(Errno::LOOP | Errno::MLINK) => Step::Symlink,
                Err(Errno::NOENT | Errno::NOTDIR) => {
                    Step::Fail(PathError::NotFound { path: shown.to_owned() })
                }
                Err(e) => Step::Fail(PathError::io(shown, e)),
            }
        })?;
        let stat = rustix::fs::fstat(&fd).map_err(|e| PathError::io(shown, e))?;
        let entry = Entry::from_stat(&stat);
        if entry.kind != EntryKind::File {
            return Err(PathError::NotAFile { path: shown.to_owned() });
        }
        if entry.is_hard_linked() {
            return Err(PathError::forbidden(shown, HARD_LINKED));
        }
        Ok((File::from(fd), entry.size))
    }

    /// Replaces the content of a regular file, creating it and the directories on the way
    /// when missing. A symlink is followed only while it stays inside (a dangling one is
    /// resolved the same way: its target is created inside, or refused); a file with more
    /// than one hard link is refused before anything is written.
    pub fn write(&self, path: &RelPath, content: &[u8]) -> Result<()> {
        let shown = path.shown.as_str();
        let flags = OFlags::WRONLY
            | OFlags::CREATE
            | OFlags::NOFOLLOW
            | OFlags::CLOEXEC
            | OFlags::NONBLOCK
            | OFlags::NOCTTY;
        let mode = Mode::from_raw_mode(0o666);
        let fd = self.walk_to(path, true, |dir, name| {
            let Some(name) = name else {
                return Step::Fail(PathError::NotAFile { path: shown.to_owned() });
            };
            match rustix::fs::openat(dir, name, flags, mode) {
                Ok(fd) => Step::Done(fd),
                Err(Errno::LOOP | Errno::MLINK) => Step::Symlink,
                Err(Errno::ISDIR | Errno::NXIO) => {
                    Step::Fail(PathError::NotAFile { path: shown.to_owned() })
                }
                Err(e) => Step::Fail(PathError::io(shown, e)),
            }
        })?;
        let stat = rustix::fs::fstat(&fd).map_err(|e| PathError::io(shown, e))?;
        let entry = Entry::from_stat(&stat);
        if entry.kind != EntryKind::File {
            return Err(PathError::NotAFile { path: shown.to_owned() });
        }
        if entry.is_hard_linked() {
            return Err(PathError::forbidden(shown, HARD_LINKED));
        }
        let mut file = File::from(fd);
        let written = file.set_len(0).and_then(|()| file.write_all(content));
        written.map_err(|source| PathError::Io { path: shown.to_owned(), source })
    }

    /// What the path names, without following a symlink as its last component (symlinks on
    /// the way are followed while they stay inside); `None` when it does not exist.
    pub fn entry(&self, path: &RelPath) -> Result<Option<Entry>> {
        let shown = path.shown.as_str();
        let found = self.walk_to(path, false, |dir, name| {
            let stat = match name {
                Some(name) => rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW),
                None => rustix::fs::fstat(dir),
            };
            match stat {
                Ok(stat) => Step::Done(Some(Entry::from_stat(&stat))),
                Err(Errno::NOENT | Errno::NOTDIR) => Step::Done(None),
                Err(e) => Step::Fail(PathError::io(shown, e)),
            }
        });
        match found {
            Err(PathError::NotFound { .. }) => Ok(None),
            other => other,
        }
    }

    /// The target of a symlink (its last component is not followed).
    pub fn read_link(&self, path: &RelPath) -> Result<Vec<u8>> {
        let shown = path.shown.as_str();
        self.walk_to(path, false, |dir, name| {
            let Some(name) = name else {
                return Step::Fail(PathError::NotFound { path: shown.to_owned() });
            };
            match rustix::fs::readlinkat(dir, name, Vec::new()) {
                Ok(target) => Step::Done(target.into_bytes()),
                Err(Errno::NOENT | Errno::NOTDIR | Errno::INVAL) => {
                    Step::Fail(PathError::NotFound { path: shown.to_owned() })
                }
                Err(e) => Step::Fail(PathError::io(shown, e)),
            }
        })
    }

    /// Every entry under the root, depth first, at most `max_entries` (the `bool` says the
    /// listing stopped there). Symlinks are listed, never followed; `.git` is skipped;
    /// directories that vanish or cannot be read meanwhile are skipped.
    pub fn walk(&self, max_entries: usize) -> Result<(Vec<WalkEntry>, bool)> {
        let mut entries = Vec::new();
        let mut pending: Vec<RelPath> = vec![RelPath { parts: Vec::new(), shown: String::new() }];
        while let Some(relative) = pending.pop() {
            let dir = match self.open_dir(&relative) {
                Ok(dir) => dir,
                Err(err) if relative.parts.is_empty() => return Err(err),
                // A directory that vanished or cannot be read meanwhile is skipped.
                Err(_) => continue,
            };
            let listing = match rustix::fs::Dir::read_from(&dir) {
                Ok(listing) => listing,
                Err(e) if relative.parts.is_empty() => return Err(PathError::io("", e)),
                Err(_) => continue,
            };
            for item in listing {
                let Ok(item) = item else { break };
                let name = OsStr::from_bytes(item.file_name().to_bytes());
                if name == "." || name == ".." || is_git(name) {
                    continue;
                }
                if entries.len() >= max_entries {
                    return Ok((entries, true));
                }
                let Ok(stat) = rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) else {
                    continue;
                };
                let entry = Entry::from_stat(&stat);
                let shown = match relative.shown.as_str() {
                    "" => name.to_string_lossy().into_owned(),
                    parent => format!("{parent}/{}", name.to_string_lossy()),
                };
                if entry.kind == EntryKind::Dir {
                    let mut parts = relative.parts.clone();
                    parts.push(Part::Name(name.to_owned()));
                    pending.push(RelPath { parts, shown: shown.clone() });
                }
                entries.push(WalkEntry { path: shown, entry });
            }
        }
        Ok((entries, false))
    }

    /// A directory beneath this root as a root of its own (for many lookups in one
    /// directory); symlinks on the way are followed while they stay inside this root.
    pub fn subdir(&self, path: &RelPath) -> Result<Root> {
        let dir = self.open_dir(path)?;
        let relative: PathBuf = path
            .parts
            .iter()
            .map(|p| match p {
                Part::Name(name) => name.as_os_str(),
                Part::Parent => OsStr::new(".."),
            })
            .collect();
        Ok(Root { dir, path: self.path.join(relative), canonical: None })
    }

    /// Opens a directory beneath the root (symlinks on the way followed while inside).
    fn open_dir(&self, path: &RelPath) -> Result<OwnedFd> {
        let relative = path.shown.as_str();
        self.walk_to(path, false, |dir, name| {
            let Some(name) = name else {
                return match rustix::fs::openat(dir, c".", DIR_FLAGS, Mode::empty()) {
                    Ok(fd) => Step::Done(fd),
                    Err(e) => Step::Fail(PathError::io(relative, e)),
                };
            };
            match rustix::fs::openat(dir, name, DIR_FLAGS, Mode::empty()) {
                Ok(fd) => Step::Done(fd),
                Err(Errno::LOOP | Errno::MLINK) => Step::Symlink,
                // Linux answers `O_DIRECTORY | O_NOFOLLOW` on a symlink with ENOTDIR.
                Err(Errno::NOTDIR) if rustix::fs::readlinkat(dir, name, Vec::new()).is_ok() => {
                    Step::Symlink
                }
                Err(e) => Step::Fail(PathError::io(relative, e)),
            }
        })
    }

    /// The walk: every component but the last is opened as a directory relative to the one
    /// before (`O_NOFOLLOW`; a symlink is read and its target walked instead, beneath the
    /// root); the last is handed to `last` with its directory (`None`: the path names a
    /// directory, given as the directory itself). With `create_dirs`, missing directories
    /// are made on the way.
    fn walk_to<T>(
        &self,
        path: &RelPath,
        create_dirs: bool,
        mut last: impl FnMut(BorrowedFd<'_>, Option<&OsStr>) -> Step<T>,
    ) -> Result<T> {
        let shown = path.shown.as_str();
        let mut stack: Vec<OwnedFd> = Vec::new();
        let mut pending: VecDeque<Part> = path.parts.iter().cloned().collect();
        let mut symlinks = 0usize;
        // Bounds the retries of an entry that changes while it is looked at.
        let mut budget = path.parts.len() + 4 * MAX_SYMLINKS + 64;
        loop {
            budget = budget.checked_sub(1).ok_or_else(|| PathError::io(shown, Errno::AGAIN))?;
            let top = stack.last().map_or(self.dir.as_fd(), AsFd::as_fd);
            let Some(part) = pending.pop_front() else {
                return match last(top, None) {
                    Step::Done(value) => Ok(value),
                    Step::Fail(err) => Err(err),
                    Step::Symlink => Err(PathError::NotFound { path: shown.to_owned() }),
                };
            };
            let name = match part {
                Part::Parent => {
                    if stack.pop().is_none() {
                        let why = if symlinks > 0 { THROUGH_SYMLINK } else { LEAVES };
                        return Err(PathError::forbidden(shown, why));
                    }
                    continue;
                }
                Part::Name(name) => name,
            };
            // Whether the entry, found not to be a directory, may be a plain file.
            let maybe_file = if pending.is_empty() {
                match last(top, Some(&name)) {
                    Step::Done(value) => return Ok(value),
                    Step::Fail(err) => return Err(err),
                    Step::Symlink => false,
                }
            } else {
                match rustix::fs::openat(top, &name, DIR_FLAGS, Mode::empty()) {
                    Ok(dir) => {
                        stack.push(dir);
                        continue;
                    }
                    Err(Errno::LOOP | Errno::MLINK) => false,
                    Err(Errno::NOTDIR) => true,
                    Err(Errno::NOENT) if create_dirs => {
                        match rustix::fs::mkdirat(top, &name, Mode::from_raw_mode(0o777)) {
                            Ok(()) | Err(Errno::EXIST) => {}
                            Err(e) => return Err(PathError::io(shown, e)),
                        }
                        pending.push_front(Part::Name(name));
                        continue;
                    }
                    Err(Errno::NOENT) => {
                        return Err(PathError::NotFound { path: shown.to_owned() });
                    }
                    Err(e) => return Err(PathError::io(shown, e)),
                }
            };
            let target = match rustix::fs::readlinkat(top, &name, Vec::new()) {
                Ok(target) => OsString::from_vec(target.into_bytes()),
                // A file where a directory should be.
                Err(Errno::INVAL) if maybe_file => {
                    return Err(PathError::NotFound { path: shown.to_owned() });
                }
                // Not a symlink any more, or gone: it changed meanwhile; look at it again.
                Err(Errno::INVAL | Errno::NOENT) => {
                    pending.push_front(Part::Name(name));
                    continue;
                }
                Err(e) => return Err(PathError::io(shown, e)),
            };
            symlinks += 1;
            if symlinks > MAX_SYMLINKS {
                return Err(PathError::forbidden(shown, "too many symlinks on the path"));
            }
            let target = Path::new(&target);
            let relative = if target.is_absolute() {
                let Some(inside) = self.strip_root(target) else {
                    return Err(PathError::forbidden(shown, THROUGH_SYMLINK));
                };
                stack.clear();
                inside
            } else {
                target
            };
            for component in relative.components().rev() {
                match component {
                    Component::Normal(part) if is_git(part) => {
                        return Err(PathError::forbidden(shown, GIT_METADATA));
                    }
                    Component::Normal(part) => pending.push_front(Part::Name(part.to_owned())),
                    Component::ParentDir => pending.push_front(Part::Parent),
                    Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
                }
            }
        }
    }
}

const DIR_FLAGS: OFlags =
    OFlags::RDONLY.union(OFlags::DIRECTORY).union(OFlags::NOFOLLOW).union(OFlags::CLOEXEC);

fn is_git(name: &OsStr) -> bool {
    name.eq_ignore_ascii_case(".git")
}
