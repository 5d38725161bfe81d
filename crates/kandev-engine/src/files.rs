//! The agent's `fs/read_text_file` and `fs/write_text_file`, confined to the session's
//! working directory: `..`, other absolute paths and symlinks leading out are refused.

use std::path::{Component, Path, PathBuf};

/// JSON-RPC code for a refused file request (invalid params).
pub const REFUSED: i64 = -32602;
/// JSON-RPC code for a file request that failed.
pub const FAILED: i64 = -32603;

/// Resolves `requested` (absolute, or relative to `root`) to a path inside `root`, following
/// symlinks of every existing part. For a file that does not exist yet, its nearest existing
/// ancestor must be inside.
pub fn confine(root: &Path, requested: &str) -> Result<PathBuf, String> {
    let root =
        root.canonicalize().map_err(|e| format!("the working directory is not available: {e}"))?;
    let path = Path::new(requested);
    let joined = if path.is_absolute() { path.to_path_buf() } else { root.join(path) };
    let mut existing = joined.clone();
    let mut rest: Vec<PathBuf> = vec![];
    while !existing.exists() {
        let Some(name) = existing.file_name() else { break };
        rest.push(PathBuf::from(name));
        if !existing.pop() {
            break;
        }
    }
    let resolved = existing
        .canonicalize()
        .map_err(|_| format!("{requested} is outside the working directory"))?;
    let mut full = resolved;
    for part in rest.iter().rev() {
        full.push(part);
    }
    let escapes = rest.iter().any(|p| p.components().any(|c| matches!(c, Component::ParentDir)));
    if escapes || !full.starts_with(&root) {
        return Err(format!("{requested} is outside the session's working directory"));
    }
    Ok(full)
}

pub async fn read(
    root: &Path,
    requested: &str,
    line: Option<u64>,
    limit: Option<u64>,
) -> Result<String, (i64, String)> {
    let path = confine(root, requested).map_err(|m| (REFUSED, m))?;
    let text = tokio::fs::read_to_string(&path)
        .await
        .map_err(|e| (FAILED, format!("cannot read {requested}: {e}")))?;
    if line.is_none() && limit.is_none() {
        return Ok(text);
    }
    let skip = line.unwrap_or(1).saturating_sub(1) as usize;
    let take = limit.map(|l| l as usize).unwrap_or(usize::MAX);
    Ok(text.lines().skip(skip).take(take).collect::<Vec<_>>().join("\n"))
}

pub async fn write(root: &Path, requested: &str, content: &str) -> Result<(), (i64, String)> {
    let path = confine(root, requested).map_err(|m| (REFUSED, m))?;
    if let Some(parent) = path.parent() {
        tokio::fs::create_dir_all(parent)
            .await
            .map_err(|e| (FAILED, format!("cannot create {}: {e}", parent.display())))?;
    }
    tokio::fs::write(&path, content)
        .await
        .map_err(|e| (FAILED, format!("cannot write {requested}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_inside_are_accepted_and_escapes_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir(root.join("src")).unwrap();
        assert!(confine(root, "src/new.rs").is_ok());
        assert!(confine(root, root.join("a/b/c.txt").to_str().unwrap()).is_ok());
        assert!(confine(root, "../outside.txt").is_err());
        assert!(confine(root, "src/../../outside.txt").is_err());
        assert!(confine(root, "/etc/passwd").is_err());
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join("link")).unwrap();
        assert!(confine(root, "link/file.txt").is_err(), "a symlink leading out is refused");
        std::os::unix::fs::symlink("/etc/passwd", root.join("passwd")).unwrap();
        assert!(confine(root, "passwd").is_err());
    }
}
