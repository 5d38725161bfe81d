//! Where task working directories live under `$KANDEV_HOME`: `worktrees/<task>/<repo>` for
//! tasks with repositories, `tasks/<task>` for tasks without one.

use std::io;
use std::path::{Path, PathBuf};

use super::GitError;

/// `$KANDEV_HOME/worktrees/<task_id>/<repo_name>`: the worktree of one repository of a task.
///
/// Both names become single path components (see [`task_dir`]).
pub fn worktree_dir(
    kandev_home: &Path,
    task_id: &str,
    repo_name: &str,
) -> Result<PathBuf, GitError> {
    Ok(kandev_home
        .join("worktrees")
        .join(path_component(task_id)?)
        .join(path_component(repo_name)?))
}

/// `$KANDEV_HOME/tasks/<task_id>`: the plain working directory of a task without a
/// repository.
///
/// Characters other than ASCII letters, digits, `.`, `_` and `-` are replaced by `-` and
/// leading dots are dropped, so an id can never name a parent or hidden directory; an id
/// with nothing usable left is refused.
pub fn task_dir(kandev_home: &Path, task_id: &str) -> Result<PathBuf, GitError> {
    Ok(kandev_home.join("tasks").join(path_component(task_id)?))
}

/// Creates [`task_dir`] (and its parents) if needed and returns it.
pub async fn create_task_dir(kandev_home: &Path, task_id: &str) -> Result<PathBuf, GitError> {
    let dir = task_dir(kandev_home, task_id)?;
    tokio::fs::create_dir_all(&dir).await.map_err(|e| {
        GitError::io(format!("failed to create task directory `{}`", dir.display()), e)
    })?;
    Ok(dir)
}

fn path_component(name: &str) -> Result<String, GitError> {
    let cleaned: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '-' })
        .collect();
    let cleaned = cleaned.trim_start_matches('.');
    if cleaned.is_empty() || cleaned.chars().all(|c| c == '-') {
        return Err(GitError::Forbidden {
            path: PathBuf::from(name),
            reason: "the name cannot be used as a directory name".to_owned(),
        });
    }
    Ok(cleaned.to_owned())
}

/// Creates the missing ancestors of `path` and returns the topmost directory that was
/// created, so a failed setup can remove exactly what it added.
pub(crate) fn create_parents(path: &Path) -> Result<Option<PathBuf>, GitError> {
    let Some(parent) = path.parent() else { return Ok(None) };
    let mut topmost_missing = None;
    let mut current = Some(parent);
    while let Some(dir) = current {
        match std::fs::symlink_metadata(dir) {
            Ok(_) => break,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                topmost_missing = Some(dir.to_path_buf());
                current = dir.parent();
            }
            Err(e) => {
                return Err(GitError::io(format!("failed to inspect `{}`", dir.display()), e));
            }
        }
    }
    std::fs::create_dir_all(parent)
        .map_err(|e| GitError::io(format!("failed to create `{}`", parent.display()), e))?;
    Ok(topmost_missing)
}

/// Removes the empty directories between `path`'s parent and `topmost` (inclusive).
pub(crate) fn remove_created_parents(path: &Path, topmost: &Path) {
    let mut current = path.parent();
    while let Some(dir) = current {
        if std::fs::remove_dir(dir).is_err() || dir == topmost {
            break;
        }
        current = dir.parent();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_cannot_escape_the_home() {
        let home = Path::new("/home/k");
        assert_eq!(task_dir(home, "0194-abc").unwrap(), Path::new("/home/k/tasks/0194-abc"));
        assert_eq!(task_dir(home, "../etc").unwrap(), Path::new("/home/k/tasks/-etc"));
        assert_eq!(
            worktree_dir(home, "t1", "my repo").unwrap(),
            Path::new("/home/k/worktrees/t1/my-repo")
        );
        assert!(matches!(task_dir(home, ".."), Err(GitError::Forbidden { .. })));
        assert!(matches!(task_dir(home, "/"), Err(GitError::Forbidden { .. })));
    }

    #[test]
    fn created_parents_are_removed_again() {
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("a/b/c/worktree");
        let topmost = create_parents(&target).unwrap().unwrap();
        assert_eq!(topmost, tmp.path().join("a"));
        assert!(tmp.path().join("a/b/c").is_dir());
        remove_created_parents(&target, &topmost);
        assert!(!tmp.path().join("a").exists());
        assert!(tmp.path().exists());
    }
}
