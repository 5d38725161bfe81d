//! Path confinement and read-only file access inside a worktree: the file tree and reading
//! one file.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io::{self, Read};
use std::path::{Component, Path, PathBuf};

use super::GitError;
use super::cmd::Git;
use super::worktree::open_worktree;

/// Bytes inspected for a NUL byte to decide that content is binary (as git does).
pub(crate) const BINARY_SNIFF_LEN: usize = 8000;

/// What a tree entry is. Symlinks are reported, never followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EntryKind {
    File,
    Dir,
    Symlink,
}

/// One entry of [`tree`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeEntry {
    /// Relative to the worktree, `/`-separated.
    pub path: String,
    pub kind: EntryKind,
    /// File size in bytes; for a symlink the length of its target; 0 for a directory.
    pub size: u64,
}

/// A file read with [`read_file`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileContent {
    /// The path as asked for, normalized (`./a//b` becomes `a/b`).
    pub path: String,
    /// The text; empty when `binary`. When `truncated`, the first `max_bytes` cut back to a
    /// whole UTF-8 character.
    pub content: String,
    /// The file has a NUL byte in its first 8000 bytes or is not UTF-8.
    pub binary: bool,
    pub truncated: bool,
    /// Size of the whole file in bytes.
    pub size: u64,
}

/// Resolves `relative` inside `root` and returns the canonical absolute path; the confinement
/// check for every file and git action that takes a path from outside.
///
/// Refused with [`GitError::Forbidden`]: absolute paths, any `..` component (even one that
/// would stay inside), a NUL byte, a `.git` component (git metadata, any letter case), and any
/// path whose canonical form, following symlinks including intermediate ones, leaves `root`
/// or enters its `.git`. A path that does not exist yet is checked through its nearest
/// existing ancestor; a dangling symlink on the way is refused because writing through it
/// could create a file anywhere. `""` and `"."` resolve to `root` itself.
///
/// The check is about the filesystem at call time: a symlink swapped in afterwards by
/// another process is not caught.
pub fn resolve_inside(root: &Path, relative: &str) -> Result<PathBuf, GitError> {
    let forbidden = |reason: &str| GitError::Forbidden {
        path: PathBuf::from(relative),
        reason: reason.to_owned(),
    };
    if relative.contains('\0') {
        return Err(forbidden("the path contains a nul byte"));
    }
    let mut parts: Vec<&OsStr> = Vec::new();
    for component in Path::new(relative).components() {
        match component {
            Component::Normal(part) if is_git_dir(part) => {
                return Err(forbidden("git metadata is not accessible"));
            }
            Component::Normal(part) => parts.push(part),
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
    let root = std::fs::canonicalize(root).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory => {
            GitError::NotFound { path: root.to_path_buf() }
        }
        _ => GitError::io(format!("failed to resolve `{}`", root.display()), e),
    })?;

    // The longest prefix that exists (as anything, a dangling symlink included).
    let mut existing = parts.len();
    while existing > 0 {
        let candidate: PathBuf =
            parts[..existing].iter().fold(root.clone(), |p, part| p.join(part));
        match std::fs::symlink_metadata(&candidate) {
            Ok(_) => break,
            Err(e)
                if matches!(e.kind(), io::ErrorKind::NotFound | io::ErrorKind::NotADirectory) =>
            {
                existing -= 1;
            }
            Err(e) => return Err(GitError::io(format!("failed to inspect `{relative}`"), e)),
        }
    }
    let ancestor: PathBuf = parts[..existing].iter().fold(root.clone(), |p, part| p.join(part));
    let canonical = std::fs::canonicalize(&ancestor).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => forbidden("a symlink on the path points to nothing"),
        _ => forbidden(&format!("the path cannot be resolved ({e})")),
    })?;
    let Ok(inside) = canonical.strip_prefix(&root) else {
        return Err(forbidden("the path leaves the worktree through a symlink"));
    };
    if inside.components().any(|c| is_git_dir(c.as_os_str())) {
        return Err(forbidden("git metadata is not accessible"));
    }
    Ok(parts[existing..].iter().fold(canonical, |p, part| p.join(part)))
}

fn is_git_dir(part: &OsStr) -> bool {
    part.eq_ignore_ascii_case(".git")
}

/// The files of the worktree: tracked files present on disk and untracked files that are not
/// ignored, plus every directory containing them, sorted by path. `.git` is never listed;
/// empty directories are not listed (git does not track them); a nested repository or
/// submodule is one `Dir` entry.
pub async fn tree(worktree: &Path) -> Result<Vec<TreeEntry>, GitError> {
    let worktree = open_worktree(worktree).await?;
    let output = Git::new(&worktree)
        .args(["ls-files", "-z", "--cached", "--others", "--exclude-standard"])
        .run()
        .await?;
    let paths: Vec<String> = output
        .stdout
        .split(|&b| b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| String::from_utf8_lossy(p).trim_end_matches('/').to_owned())
        .collect();
    tokio::task::spawn_blocking(move || stat_entries(&worktree, paths))
        .await
        .map_err(|e| GitError::io("listing the worktree failed", io::Error::other(e)))?
}

fn stat_entries(worktree: &Path, paths: Vec<String>) -> Result<Vec<TreeEntry>, GitError> {
    let mut entries: BTreeMap<String, TreeEntry> = BTreeMap::new();
    for path in paths {
        let meta = match std::fs::symlink_metadata(worktree.join(&path)) {
            Ok(meta) => meta,
            // Tracked but deleted in the worktree, or outside a sparse checkout.
            Err(e)
                if matches!(e.kind(), io::ErrorKind::NotFound | io::ErrorKind::NotADirectory) =>
            {
                continue;
            }
            Err(e) => return Err(GitError::io(format!("failed to inspect `{path}`"), e)),
        };
        let (kind, size) = if meta.file_type().is_symlink() {
            (EntryKind::Symlink, meta.len())
        } else if meta.is_dir() {
            (EntryKind::Dir, 0)
        } else {
            (EntryKind::File, meta.len())
        };
        // Directories are added with all their ancestors, so the walk can stop at a known one.
        for dir in Path::new(&path).ancestors().skip(1) {
            if dir.as_os_str().is_empty() {
                break;
            }
            let dir = dir.to_string_lossy().into_owned();
            if entries.contains_key(&dir) {
                break;
            }
            entries.insert(dir.clone(), TreeEntry { path: dir, kind: EntryKind::Dir, size: 0 });
        }
        entries.insert(path.clone(), TreeEntry { path, kind, size });
    }
    Ok(entries.into_values().collect())
}

/// Reads one file of the worktree (at most `max_bytes` of it), after [`resolve_inside`].
///
/// Binary content (a NUL byte in the first 8000 bytes, or invalid UTF-8) is reported with
/// `binary` and an empty `content`. Directories give [`GitError::NotAFile`], missing files
/// [`GitError::NotFound`].
pub async fn read_file(
    worktree: &Path,
    relative: &str,
    max_bytes: usize,
) -> Result<FileContent, GitError> {
    let worktree = worktree.to_path_buf();
    let relative = relative.to_owned();
    tokio::task::spawn_blocking(move || read_file_blocking(&worktree, &relative, max_bytes))
        .await
        .map_err(|e| GitError::io("reading the file failed", io::Error::other(e)))?
}

fn read_file_blocking(
    worktree: &Path,
    relative: &str,
    max_bytes: usize,
) -> Result<FileContent, GitError> {
    let path = resolve_inside(worktree, relative)?;
    let shown = normalize(relative);
    let not_found = || GitError::NotFound { path: PathBuf::from(&shown) };
    let meta = match std::fs::metadata(&path) {
        Ok(meta) => meta,
        Err(e) if matches!(e.kind(), io::ErrorKind::NotFound | io::ErrorKind::NotADirectory) => {
            return Err(not_found());
        }
        Err(e) => return Err(GitError::io(format!("failed to inspect `{shown}`"), e)),
    };
    if !meta.is_file() {
        return Err(GitError::NotAFile { path: PathBuf::from(&shown) });
    }
    let file = std::fs::File::open(&path)
        .map_err(|e| GitError::io(format!("failed to open `{shown}`"), e))?;
    let mut bytes = Vec::new();
    let limit = u64::try_from(max_bytes).unwrap_or(u64::MAX).saturating_add(1);
    file.take(limit)
        .read_to_end(&mut bytes)
        .map_err(|e| GitError::io(format!("failed to read `{shown}`"), e))?;
    let truncated = bytes.len() > max_bytes;
    bytes.truncate(max_bytes);
    let size = meta.len().max(u64::try_from(bytes.len()).unwrap_or(u64::MAX));
    let (content, binary) = match decode_text(&bytes, truncated) {
        Some(text) => (text, false),
        None => (String::new(), true),
    };
    Ok(FileContent { path: shown, content, binary, truncated, size })
}

/// The text of `bytes`, or `None` if they look binary. When `cut` (the bytes are a prefix),
/// an incomplete character at the end is dropped instead of counting as invalid.
pub(crate) fn decode_text(bytes: &[u8], cut: bool) -> Option<String> {
    if bytes[..bytes.len().min(BINARY_SNIFF_LEN)].contains(&0) {
        return None;
    }
    match std::str::from_utf8(bytes) {
        Ok(text) => Some(text.to_owned()),
        Err(e) if cut && e.error_len().is_none() => {
            Some(String::from_utf8_lossy(&bytes[..e.valid_up_to()]).into_owned())
        }
        Err(_) => None,
    }
}

/// `relative` without `.` components and duplicate slashes.
fn normalize(relative: &str) -> String {
    relative.split('/').filter(|p| !p.is_empty() && *p != ".").collect::<Vec<_>>().join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decode_text_tells_binary_from_text() {
        assert_eq!(decode_text(b"hello", false).as_deref(), Some("hello"));
        assert_eq!(decode_text(b"a\0b", false), None);
        assert_eq!(decode_text(&[0xff, 0xfe], false), None);
        // "é" is two bytes; a cut after the first is not binary.
        assert_eq!(decode_text(&[b'a', 0xc3], true).as_deref(), Some("a"));
        assert_eq!(decode_text(&[b'a', 0xc3], false), None);
    }

    #[test]
    fn normalize_drops_dots_and_empty_parts() {
        assert_eq!(normalize("./a//b/"), "a/b");
    }
}
