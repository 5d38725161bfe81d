//! The changes of a worktree against its base commit, per file with status, counts and hunks,
//! untracked files included.

use std::io::{self, Read};
use std::path::{Path, PathBuf};

use super::GitError;
use super::cmd::Git;
use super::files::BINARY_SNIFF_LEN;
use super::worktree::{merge_base, open_worktree, resolve_base_ref, resolve_commit};
use crate::confine::{EntryKind, PathError, RelPath, Root};

/// Upper bound on diff text handled per [`changes`] call (git's output plus untracked file
/// contents). Files beyond it are listed with `truncated` and without (all) hunks.
pub const MAX_DIFF_BYTES: usize = 16 * 1024 * 1024;

/// Upper bound on hunk text kept per file.
pub const MAX_FILE_DIFF_BYTES: usize = 1024 * 1024;

// The values are plain domain types, defined once (kandev_domain::files).
pub use kandev_domain::files::{ChangeStatus, DiffLine, FileChange, Hunk, LineKind};

/// The commit a review compares the worktree with: the merge base of its `HEAD` and the
/// current tip of `base_branch` (so after a rebase, a merge of the base, or a base that moved,
/// the base's own commits are not shown as the task's), or `base_commit` (the commit the
/// worktree was made from) when the base branch is not found here or shares no history.
pub async fn review_base(
    worktree: &Path,
    base_commit: &str,
    base_branch: &str,
) -> Result<String, GitError> {
    let worktree = open_worktree(worktree).await?;
    if let Ok(tip) = resolve_base_ref(&worktree, base_branch).await
        && let Some(base) = merge_base(&worktree, "HEAD", &tip).await?
    {
        return Ok(base);
    }
    resolve_commit(&worktree, base_commit).await
}

/// Everything in the worktree that differs from `base_commit`: commits on the task branch,
/// staged and unstaged changes, and untracked files that are not ignored, sorted by path.
///
/// Tracked changes come from one `git diff <base> --raw --numstat -p -z -M` (no color, no
/// external diff or textconv, fixed `a/` `b/` prefixes, three lines of context), so renames
/// are detected. Untracked files are read directly, through [`crate::confine`], and shown as
/// all-added hunks; nothing is written to the index. Size limits: [`MAX_DIFF_BYTES`] overall
/// and [`MAX_FILE_DIFF_BYTES`] per file; files beyond them have `truncated` set.
///
/// A file of the worktree with more than one hard link (its content may be a file outside
/// the worktree) is listed without hunks and with `truncated`: untracked ones are never
/// read, tracked ones lose the hunks git produced. Limit: git reads tracked files itself,
/// and the link count is checked after it ran, so a hard link swapped in and out again
/// while git runs is not caught.
pub async fn changes(worktree: &Path, base_commit: &str) -> Result<Vec<FileChange>, GitError> {
    let worktree = open_worktree(worktree).await?;
    let base = resolve_commit(&worktree, base_commit).await?;
    let (files, used) = tracked_changes(&worktree, &[&base], None).await?;
    with_untracked(worktree, files, used).await
}

/// The tracked changes `git diff <range…> [-- <path>]` shows, parsed, and the bytes of diff
/// text they took (of [`MAX_DIFF_BYTES`]). `range` is what goes before `--`: a base commit
/// (the worktree against it), `--cached HEAD` (the index against the last commit), nothing
/// (the worktree against the index) or two commits.
pub(crate) async fn tracked_changes(
    worktree: &Path,
    range: &[&str],
    path: Option<&str>,
) -> Result<(Vec<FileChange>, usize), GitError> {
    let mut diff = patch_command(worktree).args(["-M", "--raw", "--numstat", "-p", "-z"]);
    diff = diff.args(range).arg("--");
    if let Some(path) = path {
        diff = diff.arg(format!(":(literal){path}"));
    }
    let diff = diff.stdout_limit(MAX_DIFF_BYTES).run().await?;
    Ok((parse_diff(&diff.stdout, diff.stdout_truncated), diff.stdout.len()))
}

/// `git diff` with the settings the parser relies on: git's default patch format, no color,
/// no external diff or textconv, fixed `a/` `b/` prefixes, three lines of context.
pub(crate) fn patch_command(worktree: &Path) -> Git {
    Git::new(worktree).config("diff.suppressBlankEmpty=false").config("diff.submodule=short").args(
        [
            "diff",
            "--submodule=short",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            "--no-relative",
            "--src-prefix=a/",
            "--dst-prefix=b/",
            "--unified=3",
        ],
    )
}

/// `files` with the worktree's untracked files that are not ignored added (as all-added
/// hunks, within what is left of [`MAX_DIFF_BYTES`] after `used`), sorted by path; hard
/// linked files withheld.
pub(crate) async fn with_untracked(
    worktree: PathBuf,
    files: Vec<FileChange>,
    used: usize,
) -> Result<Vec<FileChange>, GitError> {
    let paths = untracked_paths(&worktree).await?;
    let budget = MAX_DIFF_BYTES.saturating_sub(used);
    let mut files = tokio::task::spawn_blocking(move || {
        let root = Root::open(&worktree)?;
        let mut files = files;
        withhold_hard_linked(&root, &mut files);
        files.extend(untracked_changes(&root, paths, budget));
        Ok::<_, GitError>(files)
    })
    .await
    .map_err(|e| GitError::io("reading untracked files failed", io::Error::other(e)))??;
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}

/// The worktree's untracked files that are not ignored.
pub(crate) async fn untracked_paths(worktree: &Path) -> Result<Vec<String>, GitError> {
    let listed =
        Git::new(worktree).args(["ls-files", "-z", "--others", "--exclude-standard"]).run().await?;
    Ok(listed
        .stdout
        .split(|&b| b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect())
}

/// Drops the hunks of tracked files whose worktree copy has more than one hard link (or can
/// no longer be looked at inside the worktree).
pub(crate) fn withhold_hard_linked(root: &Root, files: &mut [FileChange]) {
    for file in files.iter_mut().filter(|f| f.status != ChangeStatus::Deleted) {
        let entry = RelPath::parse(&file.path).and_then(|path| root.entry(&path));
        let withhold = match entry {
            Ok(Some(entry)) => entry.is_hard_linked(),
            Ok(None) => false,
            Err(_) => true,
        };
        if withhold {
            file.hunks.clear();
            file.truncated = true;
        }
    }
}

/// Parses the output of `git diff --raw --numstat -p -z`: raw records, numstat records, a
/// NUL, then the patch. Patch sections are matched to records by order (a type change has
/// two sections: deletion and creation). `truncated` means the output was cut off.
fn parse_diff(bytes: &[u8], truncated: bool) -> Vec<FileChange> {
    let mut cursor = Fields { bytes, pos: 0 };
    let mut files = Vec::new();
    let mut section_counts = Vec::new();
    while cursor.peek() == Some(b':') {
        let Some(meta) = cursor.field() else { break };
        let letter = meta.rsplit(' ').next().and_then(|s| s.chars().next()).unwrap_or('M');
        let Some(first) = cursor.field() else { break };
        let (path, old_path) = if matches!(letter, 'R' | 'C') {
            let Some(second) = cursor.field() else { break };
            (second, Some(first))
        } else {
            (first, None)
        };
        let status = match letter {
            'A' | 'C' => ChangeStatus::Added,
            'D' => ChangeStatus::Deleted,
            'R' => ChangeStatus::Renamed,
            _ => ChangeStatus::Modified,
        };
        section_counts.push(if letter == 'T' { 2 } else { 1 });
        let old_path = old_path.filter(|_| status == ChangeStatus::Renamed);
        files.push(FileChange {
            path,
            old_path,
            status,
            additions: 0,
            deletions: 0,
            binary: false,
            // Cleared once the file's numstat and patch section were seen complete.
            truncated: true,
            hunks: Vec::new(),
        });
    }
    let mut numstat_seen = 0;
    for file in &mut files {
        let Some(record) = cursor.field() else { break };
        let mut parts = record.splitn(3, '\t');
        let (added, deleted, path) = (parts.next(), parts.next(), parts.next().unwrap_or(""));
        if path.is_empty() {
            // A rename: the old and the new path follow as fields of their own.
            let (Some(_old), Some(_new)) = (cursor.field(), cursor.field()) else { break };
        }
        file.binary = added == Some("-");
        file.additions = added.and_then(|n| n.parse().ok()).unwrap_or(0);
        file.deletions = deleted.and_then(|n| n.parse().ok()).unwrap_or(0);
        numstat_seen += 1;
    }
    if cursor.peek() == Some(0) {
        cursor.pos += 1;
    }
    let sections = split_sections(&bytes[cursor.pos.min(bytes.len())..]);
    let mut next_section = 0;
    for (index, (file, count)) in files.iter_mut().zip(section_counts).enumerate() {
        let Some(own) = sections.get(next_section..next_section + count) else { break };
        next_section += count;
        let mut budget = MAX_FILE_DIFF_BYTES;
        let mut cut = false;
        for section in own {
            cut |= parse_hunks(section, &mut budget, &mut file.hunks);
        }
        let last_and_cut_off = truncated && next_section == sections.len();
        file.truncated = cut || last_and_cut_off || index >= numstat_seen;
    }
    files
}

/// Reads NUL-terminated fields.
struct Fields<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Fields<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    /// The next field, or `None` if the output ends before its terminator.
    fn field(&mut self) -> Option<String> {
        let rest = self.bytes.get(self.pos..)?;
        let end = rest.iter().position(|&b| b == 0)?;
        self.pos += end + 1;
        Some(String::from_utf8_lossy(&rest[..end]).into_owned())
    }
}

/// Splits a patch at its `diff --git ` lines (content lines always start with a marker, so
/// they cannot be mistaken for one).
fn split_sections(patch: &[u8]) -> Vec<&[u8]> {
    let mut starts = Vec::new();
    let mut pos = 0;
    while pos < patch.len() {
        if patch[pos..].starts_with(b"diff --git ") {
            starts.push(pos);
        }
        match patch[pos..].iter().position(|&b| b == b'\n') {
            Some(nl) => pos += nl + 1,
            None => break,
        }
    }
    starts
        .iter()
        .enumerate()
        .map(|(i, &start)| &patch[start..starts.get(i + 1).copied().unwrap_or(patch.len())])
        .collect()
}

/// Appends the hunks of one file section; returns true if lines were dropped because the
/// file's `budget` ran out.
fn parse_hunks(section: &[u8], budget: &mut usize, hunks: &mut Vec<Hunk>) -> bool {
    for line in section.split(|&b| b == b'\n') {
        if line.starts_with(b"@@ ") {
            if let Some(hunk) = parse_hunk_header(&String::from_utf8_lossy(line)) {
                hunks.push(hunk);
            }
            continue;
        }
        let Some(hunk) = hunks.last_mut() else { continue };
        let kind = match line.first() {
            Some(b' ') => LineKind::Context,
            Some(b'+') => LineKind::Added,
            Some(b'-') => LineKind::Removed,
            _ => continue,
        };
        if line.len() > *budget {
            *budget = 0;
            return true;
        }
        *budget -= line.len();
        hunk.lines.push(DiffLine { kind, text: String::from_utf8_lossy(&line[1..]).into_owned() });
    }
    false
}

/// Parses `@@ -a[,b] +c[,d] @@[ heading]`.
fn parse_hunk_header(line: &str) -> Option<Hunk> {
    let ranges = line.strip_prefix("@@ ")?;
    let ranges = &ranges[..ranges.find(" @@")?];
    let (old, new) = ranges.split_once(' ')?;
    let (old_start, old_lines) = parse_range(old.strip_prefix('-')?)?;
    let (new_start, new_lines) = parse_range(new.strip_prefix('+')?)?;
    Some(Hunk {
        header: line.to_owned(),
        old_start,
        old_lines,
        new_start,
        new_lines,
        lines: Vec::new(),
    })
}

fn parse_range(range: &str) -> Option<(u32, u32)> {
    match range.split_once(',') {
        Some((start, lines)) => Some((start.parse().ok()?, lines.parse().ok()?)),
        None => Some((range.parse().ok()?, 1)),
    }
}

/// Untracked files as all-added changes, read within `budget` bytes in total.
fn untracked_changes(root: &Root, paths: Vec<String>, mut budget: usize) -> Vec<FileChange> {
    let mut files = Vec::with_capacity(paths.len());
    for listed in paths {
        // A nested repository is listed as `dir/`.
        let path = listed.trim_end_matches('/').to_owned();
        let mut change = FileChange {
            path,
            old_path: None,
            status: ChangeStatus::Untracked,
            additions: 0,
            deletions: 0,
            binary: false,
            truncated: false,
            hunks: Vec::new(),
        };
        match untracked_content(root, &change.path, &mut budget) {
            Ok(Some(content)) => {
                change.additions = content.total_lines;
                change.binary = content.binary;
                change.truncated = content.truncated;
                if !content.lines.is_empty() {
                    change.hunks.push(added_hunk(content.total_lines, content.lines));
                }
            }
            Ok(None) => {}
            // Gone since it was listed.
            Err(PathError::NotFound { .. }) => continue,
            // Refused (a hard link, a path that now leads out) or unreadable: no content.
            Err(e) => {
                tracing::debug!(path = %change.path, error = %e, "reading an untracked file failed");
                change.truncated = true;
            }
        }
        files.push(change);
    }
    files
}

/// The readable content of an untracked entry; `None` for a directory or special file.
struct UntrackedContent {
    lines: Vec<DiffLine>,
    total_lines: u32,
    binary: bool,
    truncated: bool,
}

fn untracked_content(
    root: &Root,
    path: &str,
    budget: &mut usize,
) -> Result<Option<UntrackedContent>, PathError> {
    let relative = RelPath::parse(path)?;
    let Some(entry) = root.entry(&relative)? else {
        return Err(PathError::NotFound { path: path.to_owned() });
    };
    // Directories (nested repositories) and special files (a FIFO would block) have no text.
    if !matches!(entry.kind, EntryKind::File | EntryKind::Symlink) {
        return Ok(None);
    }
    let io_error = |source: io::Error| PathError::Io { path: path.to_owned(), source };
    let cap = MAX_FILE_DIFF_BYTES.min(*budget);
    let mut bytes;
    let mut total_lines = None;
    if entry.kind == EntryKind::Symlink {
        // git shows a symlink as a file holding its target, without a final newline.
        bytes = root.read_link(&relative)?;
        if bytes.len() > cap {
            total_lines = Some(1);
        }
    } else {
        // Refuses a file with more than one hard link.
        let (mut file, _) = root.open_file(&relative)?;
        bytes = Vec::new();
        let limit = u64::try_from(cap).unwrap_or(u64::MAX).saturating_add(1);
        (&mut file).take(limit).read_to_end(&mut bytes).map_err(io_error)?;
        if bytes.len() > cap {
            total_lines = Some(count_lines(&bytes, &mut file).map_err(io_error)?);
        }
    }
    let truncated = total_lines.is_some();
    bytes.truncate(cap);
    *budget = budget.saturating_sub(bytes.len());
    if bytes[..bytes.len().min(BINARY_SNIFF_LEN)].contains(&0) {
        return Ok(Some(UntrackedContent {
            lines: Vec::new(),
            total_lines: 0,
            binary: true,
            truncated: false,
        }));
    }
    let kept = if truncated { &bytes[..last_newline(&bytes)] } else { &bytes[..] };
    let lines = added_lines(kept);
    let total_lines = total_lines.unwrap_or_else(|| u32::try_from(lines.len()).unwrap_or(u32::MAX));
    Ok(Some(UntrackedContent { lines, total_lines, binary: false, truncated }))
}

/// Lines of a file whose start is `head` and whose remainder is read from `rest`; a last
/// line without newline counts.
fn count_lines(head: &[u8], rest: &mut impl Read) -> io::Result<u32> {
    let mut newlines = head.iter().filter(|&&b| b == b'\n').count();
    let mut last = head.last().copied();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        match rest.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => {
                newlines += chunk[..n].iter().filter(|&&b| b == b'\n').count();
                last = Some(chunk[n - 1]);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    let unterminated = usize::from(last.is_some_and(|b| b != b'\n'));
    Ok(u32::try_from(newlines + unterminated).unwrap_or(u32::MAX))
}

/// Length of `bytes` up to and including its last newline (all of it if there is none).
fn last_newline(bytes: &[u8]) -> usize {
    bytes.iter().rposition(|&b| b == b'\n').map_or(bytes.len(), |i| i + 1)
}

/// Every line of `bytes` as an added line; a last line without newline counts too.
fn added_lines(bytes: &[u8]) -> Vec<DiffLine> {
    let body = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    if bytes.is_empty() {
        return Vec::new();
    }
    body.split(|&b| b == b'\n')
        .map(|line| DiffLine {
            kind: LineKind::Added,
            text: String::from_utf8_lossy(line).into_owned(),
        })
        .collect()
}

/// A hunk adding `total_lines` lines to an empty file (as `git diff /dev/null file` shows it).
fn added_hunk(total_lines: u32, lines: Vec<DiffLine>) -> Hunk {
    let header = if total_lines == 1 {
        "@@ -0,0 +1 @@".to_owned()
    } else {
        format!("@@ -0,0 +1,{total_lines} @@")
    };
    Hunk { header, old_start: 0, old_lines: 0, new_start: 1, new_lines: total_lines, lines }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw_output() -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(b":100644 100644 abc 000 M\0f.txt\0");
        out.extend_from_slice(b":100644 120000 abc 000 T\0link\0");
        out.extend_from_slice(b":100644 100644 abc abc R100\0old name.txt\0new name.txt\0");
        out.extend_from_slice(b":100644 100644 abc 000 M\0b.bin\0");
        out.extend_from_slice(b"1\t1\tf.txt\0");
        out.extend_from_slice(b"1\t2\tlink\0");
        out.extend_from_slice(b"0\t0\t\0old name.txt\0new name.txt\0");
        out.extend_from_slice(b"-\t-\tb.bin\0");
        out.push(0);
        out.extend_from_slice(
            b"diff --git a/f.txt b/f.txt\nindex 1..2 100644\n--- a/f.txt\n+++ b/f.txt\n\
              @@ -1,3 +1,3 @@ fn main\n a\n--- not a header\n+B\n c\n\\ No newline at end of file\n",
        );
        out.extend_from_slice(
            b"diff --git a/link b/link\ndeleted file mode 100644\n--- a/link\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-x\n-y\n",
        );
        out.extend_from_slice(
            b"diff --git a/link b/link\nnew file mode 120000\n--- /dev/null\n+++ b/link\n@@ -0,0 +1 @@\n+target\n",
        );
        out.extend_from_slice(b"diff --git a/old name.txt b/new name.txt\nsimilarity index 100%\n");
        out.extend_from_slice(
            b"diff --git a/b.bin b/b.bin\nBinary files a/b.bin and b/b.bin differ\n",
        );
        out
    }

    #[test]
    fn parses_records_counts_and_hunks() {
        let files = parse_diff(&raw_output(), false);
        assert_eq!(files.len(), 4);
        let f = &files[0];
        assert_eq!(
            (f.path.as_str(), f.status, f.additions, f.deletions),
            ("f.txt", ChangeStatus::Modified, 1, 1)
        );
        assert!(!f.truncated);
        assert_eq!(f.hunks.len(), 1);
        let hunk = &f.hunks[0];
        assert_eq!(hunk.header, "@@ -1,3 +1,3 @@ fn main");
        assert_eq!((hunk.old_start, hunk.old_lines, hunk.new_start, hunk.new_lines), (1, 3, 1, 3));
        let kinds: Vec<_> = hunk.lines.iter().map(|l| (l.kind, l.text.as_str())).collect();
        assert_eq!(
            kinds,
            [
                (LineKind::Context, "a"),
                (LineKind::Removed, "-- not a header"),
                (LineKind::Added, "B"),
                (LineKind::Context, "c")
            ]
        );
        // A type change has two sections; both belong to the same file.
        assert_eq!(files[1].hunks.len(), 2);
        assert_eq!(files[1].hunks[1].new_lines, 1);
        assert_eq!(files[2].status, ChangeStatus::Renamed);
        assert_eq!(files[2].path, "new name.txt");
        assert_eq!(files[2].old_path.as_deref(), Some("old name.txt"));
        assert!(files[3].binary && files[3].hunks.is_empty() && !files[3].truncated);
    }

    #[test]
    fn cut_off_output_marks_the_affected_files() {
        let full = raw_output();
        let cut = &full[..full.len() - 60];
        let files = parse_diff(cut, true);
        assert_eq!(files.len(), 4);
        assert!(!files[0].truncated);
        assert!(files[3].truncated, "the last file lost its section");
    }

    #[test]
    fn hunk_budget_cuts_lines() {
        let section = b"@@ -0,0 +1,3 @@\n+aaaa\n+bbbb\n+cccc\n";
        let mut hunks = Vec::new();
        let mut budget = 11;
        assert!(parse_hunks(section, &mut budget, &mut hunks));
        assert_eq!(hunks[0].lines.len(), 2);
    }

    #[test]
    fn count_lines_includes_an_unterminated_last_line() {
        assert_eq!(count_lines(b"a\nb", &mut &b"c\nd"[..]).unwrap(), 3);
        assert_eq!(count_lines(b"a\n", &mut &b""[..]).unwrap(), 1);
        assert_eq!(count_lines(b"", &mut &b""[..]).unwrap(), 0);
    }

    #[test]
    fn added_lines_count_a_last_line_without_newline() {
        assert_eq!(added_lines(b"a\nb").len(), 2);
        assert_eq!(added_lines(b"a\nb\n").len(), 2);
        assert_eq!(added_lines(b"\n").len(), 1);
        assert!(added_lines(b"").is_empty());
        assert_eq!(added_hunk(1, Vec::new()).header, "@@ -0,0 +1 @@");
    }
}
