//! `repository.*` actions: registering local git repositories, validated on the way in.

use std::path::{Path, PathBuf};

use kandev_api_types::RepositoryDto;
use kandev_api_types::requests::{ById, ByWorkspace, RepositoryCreate, RepositoryUpdate};
use kandev_api_types::responses::{Deleted, Repositories, RepositoryOne};
use kandev_domain::workspace::DEFAULT_BRANCH_TEMPLATE;
use kandev_domain::{RepositoryId, WorkspaceId, validate};
use kandev_store::{NewRepository, RepositoryPatch};

use crate::{ApiError, AppState};

pub async fn list(s: &AppState, p: ByWorkspace) -> Result<Repositories, ApiError> {
    let workspace_id = WorkspaceId::new(p.workspace_id);
    s.store().get_workspace(&workspace_id).await?;
    let repositories =
        s.store().list_repositories(&workspace_id).await?.iter().map(RepositoryDto::from).collect();
    Ok(Repositories { repositories, next_cursor: None })
}

pub async fn get(s: &AppState, p: ById) -> Result<RepositoryOne, ApiError> {
    let repository = s.store().get_repository(&RepositoryId::new(p.id)).await?;
    Ok(RepositoryOne { repository: RepositoryDto::from(&repository) })
}

pub async fn create(s: &AppState, p: RepositoryCreate) -> Result<RepositoryOne, ApiError> {
    let path = checked_repository_path(&p.local_path)?;
    let local_path = path.display().to_string();
    let default_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| local_path.clone());
    let name = validate::name("name", p.name.as_deref().unwrap_or(&default_name))?;
    let default_branch = match p.default_branch {
        Some(branch) => validate::branch_name("default_branch", &branch)?,
        None => head_branch(&path).unwrap_or_else(|| "main".to_owned()),
    };
    let branch_template = validate::branch_template(
        "branch_template",
        p.branch_template.as_deref().unwrap_or(DEFAULT_BRANCH_TEMPLATE),
    )?;
    let new = NewRepository {
        workspace_id: WorkspaceId::new(p.workspace_id),
        name,
        local_path,
        default_branch,
        branch_template,
        setup_script: validate::script("setup_script", p.setup_script.as_deref().unwrap_or(""))?,
        copy_files: super::ship::copy_globs(p.copy_files.unwrap_or_default())?,
        cleanup_script: validate::script(
            "cleanup_script",
            p.cleanup_script.as_deref().unwrap_or(""),
        )?,
        forge_api_base_url: forge_url(p.forge_api_base_url.as_deref().unwrap_or(""))?,
        forge_token_env: env_name(p.forge_token_env.as_deref().unwrap_or(""))?,
        dev_script: validate::script("dev_script", p.dev_script.as_deref().unwrap_or(""))?,
        script_timeout_s: validate::script_timeout(
            "script_timeout_s",
            p.script_timeout_s.unwrap_or(0),
        )?,
        script_secrets: secret_names(p.script_secrets.unwrap_or_default())?,
    };
    let repository = s.engine().create_repository(&new).await?;
    Ok(RepositoryOne { repository: RepositoryDto::from(&repository) })
}

pub async fn update(s: &AppState, p: RepositoryUpdate) -> Result<RepositoryOne, ApiError> {
    let patch = RepositoryPatch {
        name: p.name.as_deref().map(|n| validate::name("name", n)).transpose()?,
        default_branch: p
            .default_branch
            .as_deref()
            .map(|b| validate::branch_name("default_branch", b))
            .transpose()?,
        branch_template: p
            .branch_template
            .as_deref()
            .map(|t| validate::branch_template("branch_template", t))
            .transpose()?,
        setup_script: p
            .setup_script
            .as_deref()
            .map(|t| validate::script("setup_script", t))
            .transpose()?,
        copy_files: p.copy_files.map(super::ship::copy_globs).transpose()?,
        cleanup_script: p
            .cleanup_script
            .as_deref()
            .map(|t| validate::script("cleanup_script", t))
            .transpose()?,
        forge_api_base_url: p.forge_api_base_url.as_deref().map(forge_url).transpose()?,
        forge_token_env: p.forge_token_env.as_deref().map(env_name).transpose()?,
        dev_script: p
            .dev_script
            .as_deref()
            .map(|t| validate::script("dev_script", t))
            .transpose()?,
        script_timeout_s: p
            .script_timeout_s
            .map(|s| validate::script_timeout("script_timeout_s", s))
            .transpose()?,
        script_secrets: p.script_secrets.map(secret_names).transpose()?,
    };
    let repository = s.engine().update_repository(&RepositoryId::new(p.id), &patch).await?;
    Ok(RepositoryOne { repository: RepositoryDto::from(&repository) })
}

/// Secret names (issue 50), checked, sorted, each once.
fn secret_names(names: Vec<String>) -> Result<Vec<String>, ApiError> {
    kandev_domain::secret::secret_names(&names)
        .map_err(|e| ApiError::validation(format!("script secrets: {}", e.problem)))
}

pub async fn delete(s: &AppState, p: ById) -> Result<Deleted, ApiError> {
    s.engine().delete_repository(&RepositoryId::new(&p.id)).await?;
    Ok(Deleted { deleted: true, id: p.id })
}

/// A forge API root: empty (derived from the remote), or an `http(s)://` URL.
fn forge_url(raw: &str) -> Result<String, ApiError> {
    let url = raw.trim().trim_end_matches('/');
    if url.is_empty()
        || ((url.starts_with("https://") || url.starts_with("http://"))
            && url.len() <= 2048
            && !url.contains(char::is_whitespace))
    {
        return Ok(url.to_owned());
    }
    Err(validate::FieldError::new(
        "forge_api_base_url",
        "must be an http:// or https:// URL such as https://api.github.com, or empty",
    )
    .into())
}

/// The name of an environment variable: letters, digits and `_`, not starting with a digit.
fn env_name(raw: &str) -> Result<String, ApiError> {
    let name = raw.trim();
    let valid = name.len() <= 128
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with(|c: char| c.is_ascii_digit());
    if valid {
        return Ok(name.to_owned());
    }
    Err(validate::FieldError::new(
        "forge_token_env",
        "must be the name of an environment variable such as GITHUB_TOKEN, or empty",
    )
    .into())
}

/// Resolves `~`, requires an absolute path to an existing git repository (a work tree with
/// `.git`, or a bare repository), and returns it canonicalized.
fn checked_repository_path(raw: &str) -> Result<PathBuf, ApiError> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Err(ApiError::validation("the repository's path is required"));
    }
    let expanded = match raw.strip_prefix("~/") {
        Some(rest) => std::env::var_os("HOME")
            .map(|home| Path::new(&home).join(rest))
            .unwrap_or_else(|| raw.into()),
        None => PathBuf::from(raw),
    };
    if !expanded.is_absolute() {
        return Err(ApiError::validation(format!(
            "the repository's path must be absolute (start with /), not {raw:?}"
        )));
    }
    let path = expanded.canonicalize().map_err(|_| {
        ApiError::validation(format!(
            "{raw} does not exist; give the path of a local git repository"
        ))
    })?;
    if !path.is_dir() {
        return Err(ApiError::validation(format!("{raw} is not a directory")));
    }
    let is_work_tree = path.join(".git").exists();
    let is_bare = path.join("HEAD").is_file() && path.join("objects").is_dir();
    if !is_work_tree && !is_bare {
        return Err(ApiError::validation(format!(
            "{raw} is not a git repository; run `git init` there or pick another folder"
        )));
    }
    if !is_work_tree && let GitDir::OfWorkTree(work_tree) = git_dir_kind(&expanded, &path) {
        return Err(ApiError::validation(match work_tree {
            Some(work_tree) => format!(
                "{raw} is the git folder of the repository {0}; register {0} instead",
                work_tree.display()
            ),
            None => format!(
                "{raw} is the git folder of a work tree, not a repository of its own; register \
                 the work tree's folder instead"
            ),
        }));
    }
    Ok(path)
}

/// What a folder that looks like a bare repository (`HEAD`, `objects`) is.
#[derive(Debug, PartialEq, Eq)]
enum GitDir {
    Bare,
    /// The git folder of a work tree (`<repo>/.git`, or one made with `--separate-git-dir`):
    /// registering it would register that repository a second time. The work tree, when known.
    OfWorkTree(Option<PathBuf>),
}

/// Tells a bare repository from a work tree's git folder, from the files alone (no process):
/// its config's `core.bare`, and a folder named `.git` being its parent's. `given` is the path
/// as the client wrote it, `path` its canonical form. What it cannot see: a git folder whose
/// config does not say `bare` (git then guesses from the name, as this does).
fn git_dir_kind(given: &Path, path: &Path) -> GitDir {
    let config = std::fs::read_to_string(path.join("config")).unwrap_or_default();
    let bare = core_setting(&config, "bare").map(|v| v.to_ascii_lowercase());
    if matches!(bare.as_deref(), Some("true" | "yes" | "on" | "1")) {
        return GitDir::Bare;
    }
    let named_git = |p: &Path| p.file_name().is_some_and(|n| n == ".git");
    let parent = if named_git(given) {
        given.parent().and_then(|p| p.canonicalize().ok())
    } else if named_git(path) {
        path.parent().map(Path::to_path_buf)
    } else {
        None
    };
    if parent.is_some() {
        return GitDir::OfWorkTree(parent);
    }
    if matches!(bare.as_deref(), Some("false" | "no" | "off" | "0")) {
        let work_tree = core_setting(&config, "worktree").map(|w| {
            let w = path.join(w);
            w.canonicalize().unwrap_or(w)
        });
        return GitDir::OfWorkTree(work_tree);
    }
    GitDir::Bare
}

/// `core.<key>` of a git config file, read simply: a `key = value` line in a `[core]`
/// section (no includes, no quoting).
fn core_setting(config: &str, key: &str) -> Option<String> {
    let mut in_core = false;
    for line in config.lines().map(str::trim) {
        if let Some(section) = line.strip_prefix('[') {
            in_core = section.trim_end_matches(']').trim().eq_ignore_ascii_case("core");
        } else if in_core
            && let Some((name, value)) = line.split_once('=')
            && name.trim().eq_ignore_ascii_case(key)
        {
            return Some(value.trim().to_owned());
        }
    }
    None
}

/// The branch `HEAD` points at, read from the repository's files (no process is started).
fn head_branch(repo: &Path) -> Option<String> {
    let git = repo.join(".git");
    let git_dir = if git.is_file() {
        let text = std::fs::read_to_string(&git).ok()?;
        PathBuf::from(text.trim().strip_prefix("gitdir:")?.trim())
    } else if git.is_dir() {
        git
    } else {
        repo.to_path_buf()
    };
    let head = std::fs::read_to_string(git_dir.join("HEAD")).ok()?;
    head.trim().strip_prefix("ref: refs/heads/").map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repository_path_must_be_an_existing_git_repository() {
        let dir = tempfile::tempdir().unwrap();
        let err = checked_repository_path(dir.path().to_str().unwrap()).unwrap_err();
        assert!(err.message.contains("is not a git repository"), "{}", err.message);
        assert!(checked_repository_path("relative/path").unwrap_err().message.contains("absolute"));
        assert!(
            checked_repository_path("/no/such/dir/kandev")
                .unwrap_err()
                .message
                .contains("does not exist")
        );
        std::fs::create_dir(dir.path().join(".git")).unwrap();
        std::fs::write(dir.path().join(".git/HEAD"), "ref: refs/heads/trunk\n").unwrap();
        let path = checked_repository_path(dir.path().to_str().unwrap()).unwrap();
        assert_eq!(head_branch(&path).as_deref(), Some("trunk"));
    }

    #[test]
    fn core_settings_are_read_from_the_core_section_only() {
        let config =
            "[user]\n\tbare = true\n[core]\n\tBare = false\n\tworktree = ../w\n[x]\nworktree = y\n";
        assert_eq!(core_setting(config, "bare").as_deref(), Some("false"));
        assert_eq!(core_setting(config, "worktree").as_deref(), Some("../w"));
        assert_eq!(core_setting("[core]\n", "bare"), None);
    }
}
