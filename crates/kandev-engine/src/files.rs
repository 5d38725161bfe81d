//! The agent's `fs/read_text_file` and `fs/write_text_file`, confined to the session's
//! working directory by the runtime's one confinement walk (`kandev_runtime::confine`):
//! paths leaving it (`..`, absolute paths elsewhere, symlinks leading out, dangling or not),
//! `.git` and files with more than one hard link are refused.

use std::path::{Path, PathBuf};

use kandev_runtime::confine::{PathError, Root};

/// JSON-RPC code for a refused file request (invalid params).
pub const REFUSED: i64 = -32602;
/// JSON-RPC code for a file request that failed.
pub const FAILED: i64 = -32603;

/// Largest file an agent may read through Kandev (the whole file is held in memory).
pub const MAX_AGENT_READ_BYTES: usize = 16 * 1024 * 1024;

fn refused_or_failed(err: PathError) -> (i64, String) {
    let code = match err {
        PathError::Forbidden { .. } => REFUSED,
        _ => FAILED,
    };
    (code, err.to_string())
}

/// Runs `work` on the blocking pool with the root opened.
async fn blocking<T: Send + 'static>(
    root: &Path,
    work: impl FnOnce(&Root) -> Result<T, (i64, String)> + Send + 'static,
) -> Result<T, (i64, String)> {
    let root: PathBuf = root.to_path_buf();
    tokio::task::spawn_blocking(move || {
        let root = Root::open(&root)
            .map_err(|e| (FAILED, format!("the working directory is not available: {e}")))?;
        work(&root)
    })
    .await
    .map_err(|e| (FAILED, format!("the file request failed: {e}")))?
}

/// The refusal of a file request from an agent on another host (an SSH executor's): this
/// host's files are not its working directory, and the capability was not offered.
pub fn off_host(method: &str) -> (i64, String) {
    (
        REFUSED,
        format!(
            "{method} is not offered to an agent on an SSH executor; use the build host's own files"
        ),
    )
}

pub async fn read(
    root: &Path,
    requested: &str,
    line: Option<u64>,
    limit: Option<u64>,
) -> Result<String, (i64, String)> {
    let requested = requested.to_owned();
    let bytes = blocking(root, move |root| {
        let path = root.agent_path(&requested).map_err(refused_or_failed)?;
        let file = root.read(&path, MAX_AGENT_READ_BYTES).map_err(refused_or_failed)?;
        if file.truncated {
            return Err((
                FAILED,
                format!(
                    "cannot read {requested}: it is larger than {} MiB",
                    MAX_AGENT_READ_BYTES >> 20
                ),
            ));
        }
        String::from_utf8(file.bytes)
            .map_err(|_| (FAILED, format!("cannot read {requested}: it is not UTF-8 text")))
    })
    .await?;
    if line.is_none() && limit.is_none() {
        return Ok(bytes);
    }
    let skip = line.unwrap_or(1).saturating_sub(1) as usize;
    let take = limit.map(|l| l as usize).unwrap_or(usize::MAX);
    Ok(bytes.lines().skip(skip).take(take).collect::<Vec<_>>().join("\n"))
}

pub async fn write(root: &Path, requested: &str, content: &str) -> Result<(), (i64, String)> {
    let (requested, content) = (requested.to_owned(), content.to_owned());
    blocking(root, move |root| {
        let path = root.agent_path(&requested).map_err(refused_or_failed)?;
        root.write(&path, content.as_bytes()).map_err(refused_or_failed)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn paths_inside_are_accepted_and_escapes_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir(root.join("src")).unwrap();
        write(root, "src/new.rs", "fn main() {}").await.unwrap();
        assert_eq!(read(root, "src/new.rs", None, None).await.unwrap(), "fn main() {}");
        write(root, root.join("a/b/c.txt").to_str().unwrap(), "deep").await.unwrap();
        assert_eq!(read(root, "a/b/c.txt", None, None).await.unwrap(), "deep");
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "secret").unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join("link")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", root.join("passwd")).unwrap();
        for path in
            ["../outside.txt", "src/../../outside.txt", "/etc/passwd", "link/secret", "passwd"]
        {
            let (code, message) = read(root, path, None, None).await.unwrap_err();
            assert_eq!(code, REFUSED, "{path}: {message}");
            assert!(message.contains("outside"), "{path}: {message}");
            let (code, _) = write(root, path, "x").await.unwrap_err();
            assert_eq!(code, REFUSED, "{path}");
        }
        assert_eq!(std::fs::read_to_string(outside.path().join("secret")).unwrap(), "secret");
        assert_eq!(read(root, "src/new.rs", Some(1), Some(1)).await.unwrap(), "fn main() {}");
    }
}
