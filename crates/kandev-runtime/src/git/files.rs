//! File access inside a worktree, through [`crate::confine`]: the file tree, reading one
//! file, and writing the copy of a prompt's attachment an agent is linked to.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use super::GitError;
use super::cmd::Git;
use super::worktree::open_worktree;
use crate::confine::{EntryKind as Kind, PathError, RelPath, Root};

/// Bytes inspected for a NUL byte to decide that content is binary (as git does).
pub(crate) const BINARY_SNIFF_LEN: usize = 8000;

// The values are plain domain types, defined once (kandev_domain::files).
pub use kandev_domain::files::{EntryKind, FileContent, TreeEntry};

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
    let root = Root::open(worktree)?;
    let mut entries: BTreeMap<String, TreeEntry> = BTreeMap::new();
    // git lists paths sorted: the files of one directory come together, looked up in it.
    let mut parent: Option<(String, Option<Root>)> = None;
    for path in paths {
        let (dir, name) = path.rsplit_once('/').unwrap_or(("", path.as_str()));
        if parent.as_ref().is_none_or(|(open, _)| open != dir) {
            let opened = RelPath::parse(dir).and_then(|relative| root.subdir(&relative)).ok();
            parent = Some((dir.to_owned(), opened));
        }
        let Some((_, Some(dir))) = &parent else { continue };
        // Gone (tracked but deleted, outside a sparse checkout) or no longer inside: skipped.
        let found = match RelPath::parse(name).and_then(|relative| dir.entry(&relative)) {
            Ok(Some(found)) => found,
            Ok(None) | Err(PathError::Forbidden { .. } | PathError::NotFound { .. }) => continue,
            Err(e) => return Err(e.into()),
        };
        let (kind, size) = match found.kind {
            Kind::Symlink => (EntryKind::Symlink, found.size),
            Kind::Dir => (EntryKind::Dir, 0),
            Kind::File | Kind::Other => (EntryKind::File, found.size),
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

/// Reads one file of the worktree (at most `max_bytes` of it), through [`crate::confine`]: paths
/// leaving the worktree, `.git` and files with more than one hard link are
/// [`GitError::Forbidden`].
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
    let path = RelPath::parse(relative)?;
    let shown = path.normalized();
    let file = Root::open(worktree)?.read(&path, max_bytes).map_err(|e| match e {
        PathError::NotFound { .. } => GitError::NotFound { path: PathBuf::from(&shown) },
        PathError::NotAFile { .. } => GitError::NotAFile { path: PathBuf::from(&shown) },
        other => other.into(),
    })?;
    let (content, binary) = match decode_text(&file.bytes, file.truncated) {
        Some(text) => (text, false),
        None => (String::new(), true),
    };
    Ok(FileContent { path: shown, content, binary, truncated: file.truncated, size: file.size })
}

impl From<PathError> for GitError {
    fn from(err: PathError) -> Self {
        match err {
            PathError::Forbidden { path, reason } => {
                GitError::Forbidden { path: PathBuf::from(path), reason }
            }
            PathError::NotFound { path } => GitError::NotFound { path: PathBuf::from(path) },
            PathError::NotAFile { path } => GitError::NotAFile { path: PathBuf::from(path) },
            PathError::Io { path, source } => {
                GitError::Io { context: format!("cannot access `{path}`"), source }
            }
        }
    }
}

/// Where a working directory keeps the copies of prompt attachments its agent is linked to
/// (`resource_link`); `.kandev/.gitignore` (`*`) keeps them out of git.
pub const ATTACHMENT_FOLDER: &str = ".kandev/attachments";

/// Writes `bytes` as `<dir>/.kandev/attachments/<file>` and returns its absolute path, through
/// [`crate::confine`] (a `.kandev` swapped for a symlink leading out of `dir` is refused), with
/// `.kandev/.gitignore` (`*`) written first when missing. `file` is one name (no `/`, no
/// leading dot); `dir` need not be a git worktree. Runs where the directory is: on a build
/// host through `kandev remote-op` (issue 20), so the link the agent gets names a file on
/// the agent's host.
pub async fn write_attachment_copy(
    dir: &Path,
    file: &str,
    bytes: Vec<u8>,
) -> Result<PathBuf, GitError> {
    if file.is_empty() || file.contains(['/', '\\']) || file.starts_with('.') {
        return Err(GitError::Forbidden {
            path: PathBuf::from(file),
            reason: "an attachment's copy is one file name".into(),
        });
    }
    let relative = format!("{ATTACHMENT_FOLDER}/{file}");
    let absolute = dir.join(&relative);
    let dir = dir.to_path_buf();
    tokio::task::spawn_blocking(move || -> Result<(), GitError> {
        let root = Root::open(&dir)?;
        let ignore = RelPath::parse(".kandev/.gitignore")?;
        if root.entry(&ignore)?.is_none() {
            root.write(&ignore, b"*\n")?;
        }
        root.write(&RelPath::parse(&relative)?, &bytes)?;
        Ok(())
    })
    .await
    .map_err(|e| GitError::io("writing the attachment failed", io::Error::other(e)))??;
    Ok(absolute)
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
}
