//! Git fixtures: running git in a test's repository, and repositories with a first commit,
//! on `main`, with an identity of their own (so the code under test can commit) and their own
//! hooks folder (a developer's global hooks stay out).

use std::path::Path;
use std::process::Command;

/// The identity of the fixtures' repositories and of the commits made through [`git`].
pub const NAME: &str = "Test User";
/// See [`NAME`].
pub const EMAIL: &str = "test@example.com";

/// Runs `git args` in `dir` as [`NAME`] and answers its stdout without trailing whitespace;
/// fails the test with git's stderr when git fails.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", NAME)
        .env("GIT_AUTHOR_EMAIL", EMAIL)
        .env("GIT_COMMITTER_NAME", NAME)
        .env("GIT_COMMITTER_EMAIL", EMAIL)
        .output()
        .expect("git runs");
    assert!(
        output.status.success(),
        "git {args:?} in {} failed: {}",
        dir.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap().trim_end().to_owned()
}

/// Makes `dir` (created if missing) an empty repository on `main` with [`NAME`] as its
/// identity and its own hooks folder.
pub fn init(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "-q", "-b", "main"]);
    git(dir, &["config", "user.name", NAME]);
    git(dir, &["config", "user.email", EMAIL]);
    let hooks = dir.join(".git/hooks");
    git(dir, &["config", "core.hooksPath", hooks.to_str().unwrap()]);
}

/// Writes `files` (path in the repository, content; folders are made) and commits everything
/// with `message`; answers the new commit's id.
pub fn commit(repo: &Path, files: &[(&str, &str)], message: &str) -> String {
    for (path, content) in files {
        let file = repo.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, content).unwrap();
    }
    git(repo, &["add", "-A"]);
    git(repo, &["commit", "-q", "-m", message]);
    git(repo, &["rev-parse", "HEAD"])
}

/// A repository ([`init`]) in a new temp dir with one commit (`initial`) of `files`.
pub fn repo_with(files: &[(&str, &str)]) -> tempfile::TempDir {
    let repo = tempfile::tempdir().unwrap();
    init(repo.path());
    commit(repo.path(), files, "initial");
    repo
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fixture_repository_has_one_commit_on_main_by_the_test_identity() {
        let repo = repo_with(&[("README.md", "hello\n"), ("src/a.txt", "a\n")]);
        let path = repo.path();
        assert_eq!(git(path, &["rev-parse", "--abbrev-ref", "HEAD"]), "main");
        assert_eq!(git(path, &["rev-list", "--count", "HEAD"]), "1");
        assert_eq!(
            git(path, &["log", "-1", "--format=%an <%ae> %s"]),
            format!("{NAME} <{EMAIL}> initial")
        );
        assert_eq!(git(path, &["ls-files"]), "README.md\nsrc/a.txt");
        assert_eq!(git(path, &["status", "--porcelain"]), "");
    }
}
