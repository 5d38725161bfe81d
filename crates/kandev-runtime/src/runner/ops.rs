//! The operations a server runs on an SSH executor's build host, each declared once: a struct
//! whose fields are its request, and one [`Op`] impl giving its name, its answer type and its
//! handler (the code that runs there). The table at the end of this file
//! ([`op_table!`](crate::op_table)) lists them and makes the build host's dispatch,
//! [`serve`]; the server's side is [`crate::site::RemoteSite::call`], generic over [`Op`].
//! Values travel as they are (serde), with no mirror types.
//!
//! On the wire a request is `{"op": NAME, "args": <the op's fields>}`, on the operation's
//! stdin; the answer is one JSON object on stdout, `{"ok": <the op's Answer>}` or
//! `{"err": {kind, message}}` ([`RemoteErrorKind`] keeps what a failure means). Both sides
//! are the same kandev version (the executor's install checks it); a request this version
//! cannot read is refused with a message saying so.

use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use kandev_domain::files::{FileChange, FileContent, TreeEntry};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::agent_install::{AgentPackage, AgentPrefix, InstallError, Installed};
use crate::git::{
    self, BranchCommit, CommitInfo, Dirty, GitError, HunkRef, IndexAction, IndexState, SetupOutput,
    Worktree, WorktreeSpec,
};

/// One operation on a build host: the type's fields are the request, [`Op::Answer`] what a
/// success answers and [`Op::run`] the handler, which runs on the build host. Listing the
/// type in [`op_table!`](crate::op_table) makes [`serve`] dispatch to it; the server calls
/// it with [`crate::site::RemoteSite::call`].
///
/// Adding an operation is one struct, one `impl Op` and one line in the table. The compiler
/// checks the rest; this operation compiles:
///
/// ```
/// use std::path::PathBuf;
///
/// use kandev_runtime::git::GitError;
/// use kandev_runtime::runner::ops::Op;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize)]
/// pub struct IsThere {
///     pub path: PathBuf,
/// }
///
/// impl Op for IsThere {
///     const NAME: &'static str = "is_there";
///     type Answer = bool;
///     async fn run(self) -> Result<Self::Answer, GitError> {
///         Ok(self.path.exists())
///     }
/// }
///
/// kandev_runtime::op_table! { IsThere }
/// # fn main() {}
/// ```
///
/// and the same code with one defect does not. An operation without a handler:
///
/// ```compile_fail,E0046
/// use std::path::PathBuf;
///
/// use kandev_runtime::git::GitError;
/// use kandev_runtime::runner::ops::Op;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize)]
/// pub struct IsThere {
///     pub path: PathBuf,
/// }
///
/// impl Op for IsThere {
///     const NAME: &'static str = "is_there";
///     type Answer = bool;
/// }
///
/// kandev_runtime::op_table! { IsThere }
/// # fn main() {}
/// ```
///
/// A handler whose answer is not the operation's [`Op::Answer`]:
///
/// ```compile_fail,E0308
/// use std::path::PathBuf;
///
/// use kandev_runtime::git::GitError;
/// use kandev_runtime::runner::ops::Op;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize)]
/// pub struct IsThere {
///     pub path: PathBuf,
/// }
///
/// impl Op for IsThere {
///     const NAME: &'static str = "is_there";
///     type Answer = bool;
///     async fn run(self) -> Result<Self::Answer, GitError> {
///         Ok(self.path.display().to_string())
///     }
/// }
///
/// kandev_runtime::op_table! { IsThere }
/// # fn main() {}
/// ```
///
/// A type in the table that is not an operation:
///
/// ```compile_fail,E0277
/// use std::path::PathBuf;
///
/// use kandev_runtime::git::GitError;
/// use kandev_runtime::runner::ops::Op;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize)]
/// pub struct IsThere {
///     pub path: PathBuf,
/// }
///
/// kandev_runtime::op_table! { IsThere }
/// # fn main() {}
/// ```
pub trait Op: Serialize + DeserializeOwned + Send + 'static {
    /// What the request names the operation by; unique in the table.
    const NAME: &'static str;
    /// What a success answers, as the caller gets it.
    type Answer: Serialize + DeserializeOwned + Send;
    /// Runs the operation here (on the build host).
    fn run(self) -> impl Future<Output = Result<Self::Answer, GitError>> + Send;
}

/// What a failure on the build host means, so the engine reports it as it would locally.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RemoteErrorKind {
    Forbidden,
    NotFound,
    Conflict,
    NothingToCommit,
    RepositoryMissing,
    Validation,
    Unavailable,
}

impl RemoteErrorKind {
    /// The kind of `err`. Every variant is named: a new one is a compile error here until it
    /// is classified.
    pub fn of(err: &GitError) -> Self {
        match err {
            GitError::Remote { kind, .. } => *kind,
            GitError::Forbidden { .. } => Self::Forbidden,
            GitError::NotFound { .. } => Self::NotFound,
            GitError::Dirty { .. }
            | GitError::BranchInUse { .. }
            | GitError::WorktreeExists { .. }
            | GitError::DetachedHead { .. }
            | GitError::DirtyFiles { .. }
            | GitError::RebaseConflicts { .. }
            | GitError::MergeConflicts { .. }
            | GitError::NotFastForward { .. }
            | GitError::PushRejected { .. }
            | GitError::BranchNotUpdated { .. }
            | GitError::DiffChanged { .. }
            | GitError::HunkNotApplied { .. } => Self::Conflict,
            GitError::NothingToCommit { .. } => Self::NothingToCommit,
            GitError::RepositoryMissing { .. } | GitError::NotARepository { .. } => {
                Self::RepositoryMissing
            }
            GitError::Git { .. }
            | GitError::Timeout { .. }
            | GitError::Io { .. }
            | GitError::PushAuth { .. } => Self::Unavailable,
            GitError::NoCommits { .. }
            | GitError::NothingToAmend { .. }
            | GitError::NoSuchHunk { .. }
            | GitError::BaseBranchMissing { .. }
            | GitError::UnknownCommit { .. }
            | GitError::InvalidBranchName { .. }
            | GitError::NoFreeBranchName { .. }
            | GitError::NotAWorktree { .. }
            | GitError::SetupFailed { .. }
            | GitError::SetupTimedOut { .. }
            | GitError::NotAFile { .. }
            | GitError::BaseNotLocal { .. }
            | GitError::NoRemote { .. }
            | GitError::EmptyCommitMessage => Self::Validation,
        }
    }
}

/// An answer as it travels: `{"ok": value}` or `{"err": {kind, message}}`.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Reply<T> {
    Ok(T),
    Err { kind: RemoteErrorKind, message: String },
}

/// A request as the server sends it.
#[derive(Serialize)]
struct Outgoing<'a, O> {
    op: &'static str,
    args: &'a O,
}

/// `op` as the request [`serve`] reads.
pub(crate) fn encode<O: Op>(op: &O) -> serde_json::Result<String> {
    serde_json::to_string(&Outgoing { op: O::NAME, args: op })
}

/// A request as the build host reads it: the operation's name, its fields still unread.
#[doc(hidden)]
#[derive(Deserialize)]
pub struct Incoming<'a> {
    pub op: String,
    #[serde(borrow)]
    pub args: &'a RawValue,
}

impl<'a> Incoming<'a> {
    /// The request, or the answer refusing it.
    #[doc(hidden)]
    pub fn decode(request: &'a str) -> Result<Self, String> {
        serde_json::from_str(request).map_err(|e| reply::<()>(Err(not_valid(e.to_string()))))
    }
}

/// Decodes `args` as an `O`, runs it here and encodes its answer ([`serve`], for one
/// operation of the table).
#[doc(hidden)]
pub async fn serve_one<O: Op>(args: &RawValue) -> String {
    let answer = match serde_json::from_str::<O>(args.get()) {
        Ok(op) => op.run().await,
        Err(e) => Err(not_valid(format!("`{}`: {e}", O::NAME))),
    };
    reply(answer)
}

/// The answer to an operation this version does not have.
#[doc(hidden)]
pub fn unknown(name: &str) -> String {
    reply::<()>(Err(not_valid(format!("unknown operation `{name}`"))))
}

fn not_valid(why: String) -> GitError {
    GitError::Remote {
        kind: RemoteErrorKind::Validation,
        message: format!(
            "the remote operation is not valid ({why}); the build host runs another kandev \
             version: check the executor again"
        ),
    }
}

fn reply<T: Serialize>(answer: Result<T, GitError>) -> String {
    let reply = match answer {
        Ok(value) => Reply::Ok(value),
        Err(err) => Reply::Err { kind: RemoteErrorKind::of(&err), message: err.to_string() },
    };
    serde_json::to_string(&reply).unwrap_or_else(|e| {
        let failed = Reply::<()>::Err {
            kind: RemoteErrorKind::Unavailable,
            message: format!("the answer cannot be encoded: {e}"),
        };
        // Two strings and a unit variant always encode; an empty answer would still be
        // reported as unreadable by the server.
        serde_json::to_string(&failed).unwrap_or_default()
    })
}

/// Declares the operation table: the listed types, each an [`Op`] (else a compile error), as
/// `NAMES` (their names, in table order) and `serve` (the build host's dispatch: finds the
/// operation by name, decodes its fields, runs its handler and encodes its typed answer).
#[macro_export]
macro_rules! op_table {
    ($($op:ty),* $(,)?) => {
        /// Every operation's name, in table order.
        pub const NAMES: &[&str] = &[$(<$op as $crate::runner::ops::Op>::NAME,)*];

        /// Runs `request` (an operation of the table as JSON) here and returns the answer
        /// line: what `kandev remote-op` prints on the build host.
        pub async fn serve(request: &str) -> String {
            let request = match $crate::runner::ops::Incoming::decode(request) {
                Ok(request) => request,
                Err(refused) => return refused,
            };
            $(
                if request.op == <$op as $crate::runner::ops::Op>::NAME {
                    return $crate::runner::ops::serve_one::<$op>(request.args).await;
                }
            )*
            $crate::runner::ops::unknown(&request.op)
        }
    };
}

/// [`git::init_bare`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InitBare {
    pub path: PathBuf,
}

impl Op for InitBare {
    const NAME: &'static str = "init_bare";
    type Answer = ();
    async fn run(self) -> Result<(), GitError> {
        git::init_bare(&self.path).await
    }
}

/// [`git::create_worktree`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CreateWorktree {
    pub spec: WorktreeSpec,
}

impl Op for CreateWorktree {
    const NAME: &'static str = "create_worktree";
    type Answer = Worktree;
    async fn run(self) -> Result<Worktree, GitError> {
        git::create_worktree(&self.spec).await
    }
}

/// [`git::remove_worktree`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RemoveWorktree {
    pub repo: PathBuf,
    pub path: PathBuf,
    pub force: bool,
}

impl Op for RemoveWorktree {
    const NAME: &'static str = "remove_worktree";
    type Answer = ();
    async fn run(self) -> Result<(), GitError> {
        git::remove_worktree(&self.repo, &self.path, self.force).await
    }
}

/// Whether anything exists at `path` (not following a last symlink).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Exists {
    pub path: PathBuf,
}

impl Op for Exists {
    const NAME: &'static str = "exists";
    type Answer = bool;
    async fn run(self) -> Result<bool, GitError> {
        Ok(tokio::fs::symlink_metadata(&self.path).await.is_ok())
    }
}

/// Removes the directory `path` if it is empty (a task's folder of worktrees); whether it
/// was removed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RemoveEmptyDir {
    pub path: PathBuf,
}

impl Op for RemoveEmptyDir {
    const NAME: &'static str = "remove_empty_dir";
    type Answer = bool;
    async fn run(self) -> Result<bool, GitError> {
        Ok(tokio::fs::remove_dir(&self.path).await.is_ok())
    }
}

/// [`git::is_dirty`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IsDirty {
    pub path: PathBuf,
}

impl Op for IsDirty {
    const NAME: &'static str = "is_dirty";
    type Answer = usize;
    async fn run(self) -> Result<usize, GitError> {
        git::is_dirty(&self.path).await
    }
}

/// [`git::changes`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Changes {
    pub path: PathBuf,
    pub base_commit: String,
}

impl Op for Changes {
    const NAME: &'static str = "changes";
    type Answer = Vec<FileChange>;
    async fn run(self) -> Result<Vec<FileChange>, GitError> {
        git::changes(&self.path, &self.base_commit).await
    }
}

/// [`git::review_base`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReviewBase {
    pub path: PathBuf,
    pub base_commit: String,
    pub base_branch: String,
}

impl Op for ReviewBase {
    const NAME: &'static str = "review_base";
    type Answer = String;
    async fn run(self) -> Result<String, GitError> {
        git::review_base(&self.path, &self.base_commit, &self.base_branch).await
    }
}

/// [`git::commit_all`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Commit {
    pub path: PathBuf,
    pub message: String,
}

impl Op for Commit {
    const NAME: &'static str = "commit";
    type Answer = CommitInfo;
    async fn run(self) -> Result<CommitInfo, GitError> {
        git::commit_all(&self.path, &self.message).await
    }
}

/// [`git::tree`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Tree {
    pub path: PathBuf,
}

impl Op for Tree {
    const NAME: &'static str = "tree";
    type Answer = Vec<TreeEntry>;
    async fn run(self) -> Result<Vec<TreeEntry>, GitError> {
        git::tree(&self.path).await
    }
}

/// [`git::read_file`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReadFile {
    pub path: PathBuf,
    pub relative: String,
    pub max_bytes: usize,
}

impl Op for ReadFile {
    const NAME: &'static str = "read_file";
    type Answer = FileContent;
    async fn run(self) -> Result<FileContent, GitError> {
        git::read_file(&self.path, &self.relative, self.max_bytes).await
    }
}

/// [`git::write_attachment_copy`]; `bytes` travel in base64.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WriteAttachment {
    pub path: PathBuf,
    pub file: String,
    #[serde(with = "base64_bytes")]
    pub bytes: Vec<u8>,
}

impl Op for WriteAttachment {
    const NAME: &'static str = "write_attachment";
    type Answer = PathBuf;
    async fn run(self) -> Result<PathBuf, GitError> {
        git::write_attachment_copy(&self.path, &self.file, self.bytes).await
    }
}

/// [`git::run_setup_script`] (a repository's cleanup script) in `path`, killed after
/// `timeout` there.
#[derive(Clone, Serialize, Deserialize)]
pub struct RunScript {
    pub path: PathBuf,
    pub script: String,
    pub timeout: Duration,
    /// More environment variables (a repository's script secrets): their values never show
    /// in `Debug`.
    #[serde(default)]
    pub env: Vec<(String, String)>,
}

impl std::fmt::Debug for RunScript {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.env.iter().map(|(name, _)| name.as_str()).collect();
        f.debug_struct("RunScript")
            .field("path", &self.path)
            .field("script", &self.script)
            .field("timeout", &self.timeout)
            .field("env", &names)
            .finish()
    }
}

impl Op for RunScript {
    const NAME: &'static str = "run_script";
    type Answer = SetupOutput;
    async fn run(self) -> Result<SetupOutput, GitError> {
        git::run_script_through(&[], &self.path, &self.script, self.timeout, None, &self.env).await
    }
}

/// An install of an agent's version under `root` on the build host (issue 51; the prefix
/// is [`crate::agent_install`]'s); npm there is given `npm_env` (the server's npm settings).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InstallAgent {
    pub root: PathBuf,
    pub agent: AgentPackage,
    pub version: String,
    pub npm_env: Vec<(String, String)>,
}

impl Op for InstallAgent {
    const NAME: &'static str = "install_agent";
    type Answer = Installed;
    async fn run(self) -> Result<Installed, GitError> {
        let prefix = AgentPrefix::new(self.root);
        prefix.install(&self.agent, &self.version, &self.npm_env).await.map_err(remote_install)
    }
}

/// The versions of an agent installed under `root` on the build host, newest first.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InstalledAgents {
    pub root: PathBuf,
    pub agent: AgentPackage,
}

impl Op for InstalledAgents {
    const NAME: &'static str = "installed_agents";
    type Answer = Vec<String>;
    async fn run(self) -> Result<Vec<String>, GitError> {
        Ok(AgentPrefix::new(self.root).installed(&self.agent))
    }
}

/// The removal of an installed agent version under `root` on the build host.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct UninstallAgent {
    pub root: PathBuf,
    pub agent: AgentPackage,
    pub version: String,
}

impl Op for UninstallAgent {
    const NAME: &'static str = "uninstall_agent";
    type Answer = ();
    async fn run(self) -> Result<(), GitError> {
        let prefix = AgentPrefix::new(self.root);
        prefix.uninstall(&self.agent, &self.version).await.map_err(remote_install)
    }
}

/// An install's failure as a build host answers it: its message, classified.
fn remote_install(err: InstallError) -> GitError {
    let kind = match &err {
        InstallError::BadVersion(_) => RemoteErrorKind::Validation,
        InstallError::NotInstalled { .. } | InstallError::NoSuchVersion { .. } => {
            RemoteErrorKind::NotFound
        }
        InstallError::NpmMissing
        | InstallError::Npm { .. }
        | InstallError::TimedOut { .. }
        | InstallError::Io { .. } => RemoteErrorKind::Unavailable,
    };
    GitError::Remote { kind, message: err.to_string() }
}

/// [`git::dirty_files`] (a task's git status and its pull request's check).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DirtyFiles {
    pub path: PathBuf,
}

impl Op for DirtyFiles {
    const NAME: &'static str = "dirty_files";
    type Answer = Dirty;
    async fn run(self) -> Result<Dirty, GitError> {
        git::dirty_files(&self.path).await
    }
}

/// [`git::rebase`] onto the build host's copy of the base branch; answers the new head.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Rebase {
    pub path: PathBuf,
    pub base_branch: String,
}

impl Op for Rebase {
    const NAME: &'static str = "rebase";
    type Answer = String;
    async fn run(self) -> Result<String, GitError> {
        git::rebase(&self.path, &self.base_branch).await
    }
}

/// [`git::branch_commits`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BranchCommits {
    pub path: PathBuf,
    pub base: String,
}

impl Op for BranchCommits {
    const NAME: &'static str = "branch_commits";
    type Answer = Vec<BranchCommit>;
    async fn run(self) -> Result<Vec<BranchCommit>, GitError> {
        git::branch_commits(&self.path, &self.base).await
    }
}

/// [`git::commit_changes`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CommitChanges {
    pub path: PathBuf,
    pub sha: String,
}

impl Op for CommitChanges {
    const NAME: &'static str = "commit_changes";
    type Answer = Vec<FileChange>;
    async fn run(self) -> Result<Vec<FileChange>, GitError> {
        git::commit_changes(&self.path, &self.sha).await
    }
}

/// [`git::index_state`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Index {
    pub path: PathBuf,
}

impl Op for Index {
    const NAME: &'static str = "index";
    type Answer = IndexState;
    async fn run(self) -> Result<IndexState, GitError> {
        git::index_state(&self.path).await
    }
}

/// [`git::change_index`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChangeIndex {
    pub path: PathBuf,
    pub action: IndexAction,
    pub file: String,
    pub hunk: Option<HunkRef>,
}

impl Op for ChangeIndex {
    const NAME: &'static str = "change_index";
    type Answer = ();
    async fn run(self) -> Result<(), GitError> {
        git::change_index(&self.path, self.action, &self.file, self.hunk.as_ref()).await
    }
}

/// [`git::commit_staged`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CommitStaged {
    pub path: PathBuf,
    pub message: String,
}

impl Op for CommitStaged {
    const NAME: &'static str = "commit_staged";
    type Answer = CommitInfo;
    async fn run(self) -> Result<CommitInfo, GitError> {
        git::commit_staged(&self.path, &self.message).await
    }
}

/// [`git::amend`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Amend {
    pub path: PathBuf,
    pub base: String,
    pub message: Option<String>,
}

impl Op for Amend {
    const NAME: &'static str = "amend";
    type Answer = CommitInfo;
    async fn run(self) -> Result<CommitInfo, GitError> {
        git::amend(&self.path, &self.base, self.message.as_deref()).await
    }
}

/// Bytes as a base64 string (a JSON array of numbers would be about four times larger).
mod base64_bytes {
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD;
    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], to: S) -> Result<S::Ok, S::Error> {
        to.serialize_str(&STANDARD.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(from: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(from)?;
        STANDARD
            .decode(text)
            .map_err(|e| D::Error::custom(format!("the content is not base64: {e}")))
    }
}

crate::op_table! {
    InitBare,
    CreateWorktree,
    RemoveWorktree,
    Exists,
    RemoveEmptyDir,
    IsDirty,
    Changes,
    ReviewBase,
    Commit,
    Tree,
    ReadFile,
    WriteAttachment,
    RunScript,
    InstallAgent,
    InstalledAgents,
    UninstallAgent,
    DirtyFiles,
    Rebase,
    BranchCommits,
    CommitChanges,
    Index,
    ChangeIndex,
    CommitStaged,
    Amend,
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use kandev_domain::files::{ChangeStatus, DiffLine, EntryKind, Hunk, LineKind};

    use super::*;

    /// What `serve` answers to `op`, decoded as the server decodes it.
    async fn answer<O: Op>(op: O) -> Reply<O::Answer> {
        serde_json::from_str(&serve(&encode(&op).unwrap()).await).unwrap()
    }

    fn refusal<T>(reply: Reply<T>) -> (RemoteErrorKind, String) {
        match reply {
            Reply::Ok(_) => panic!("the operation succeeded"),
            Reply::Err { kind, message } => (kind, message),
        }
    }

    #[test]
    fn operation_names_are_unique() {
        let mut names = NAMES.to_vec();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), NAMES.len(), "an operation is declared twice");
        assert_eq!(NAMES.len(), 24);
    }

    /// Every value survives the trip through JSON, and an error keeps its kind.
    #[tokio::test]
    async fn i20_a3_remote_values_and_errors_round_trip() {
        let change = FileChange {
            path: "a.txt".into(),
            old_path: Some("b.txt".into()),
            status: ChangeStatus::Renamed,
            additions: 1,
            deletions: 2,
            binary: false,
            truncated: true,
            hunks: vec![Hunk {
                header: "@@ -1 +1 @@".into(),
                old_start: 1,
                old_lines: 1,
                new_start: 1,
                new_lines: 1,
                lines: vec![
                    DiffLine { kind: LineKind::Removed, text: "x".into() },
                    DiffLine { kind: LineKind::Added, text: "y".into() },
                    DiffLine { kind: LineKind::Context, text: "z".into() },
                ],
            }],
        };
        let wire = serde_json::to_string(&change).unwrap();
        assert!(wire.contains(r#""status":"renamed""#) && wire.contains(r#""kind":"removed""#));
        assert_eq!(serde_json::from_str::<FileChange>(&wire).unwrap(), change);
        for status in [
            ChangeStatus::Added,
            ChangeStatus::Modified,
            ChangeStatus::Deleted,
            ChangeStatus::Renamed,
            ChangeStatus::Untracked,
        ] {
            let wire = serde_json::to_value(status).unwrap();
            assert_eq!(wire, serde_json::json!(status.as_str()));
        }
        for kind in [EntryKind::File, EntryKind::Dir, EntryKind::Symlink] {
            let entry = TreeEntry { path: "p".into(), kind, size: 3 };
            let wire = serde_json::to_value(&entry).unwrap();
            assert_eq!(wire["kind"], serde_json::json!(kind.as_str()));
            assert_eq!(serde_json::from_value::<TreeEntry>(wire).unwrap(), entry);
        }
        let file = FileContent {
            path: "a".into(),
            content: "x".into(),
            binary: false,
            truncated: true,
            size: 9,
        };
        let wire = serde_json::to_string(&file).unwrap();
        assert_eq!(serde_json::from_str::<FileContent>(&wire).unwrap(), file);

        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope");
        let (kind, message) = refusal(answer(Commit { path: missing, message: "m".into() }).await);
        assert_eq!(kind, RemoteErrorKind::NotFound, "{message}");
    }

    /// One operation end to end through the table: `serve` finds it by name, runs its
    /// handler and answers its typed value; a name or fields this version does not know are
    /// refused, saying the build host runs another version.
    #[tokio::test]
    async fn serve_answers_an_operation_of_the_table_and_refuses_others() {
        let dir = tempfile::tempdir().unwrap();
        let request = encode(&Exists { path: dir.path().to_owned() }).unwrap();
        assert_eq!(serve(&request).await, r#"{"ok":true}"#);
        let gone = dir.path().join("gone");
        assert_eq!(answer(Exists { path: gone }).await, Reply::Ok(false));

        for request in [
            r#"{"op":"nope","args":{}}"#,
            r#"{"op":"exists","args":{"where":"/"}}"#,
            r#"{"op":"exists"}"#,
            "not json",
        ] {
            let reply: Reply<bool> = serde_json::from_str(&serve(request).await).unwrap();
            let (kind, message) = refusal(reply);
            assert_eq!(kind, RemoteErrorKind::Validation, "{request}");
            assert!(
                message.starts_with("the remote operation is not valid (")
                    && message.ends_with(
                        "; the build host runs another kandev version: check the executor again"
                    ),
                "{request}: {message}"
            );
        }
        let reply: Reply<()> =
            serde_json::from_str(&serve(r#"{"op":"nope","args":{}}"#).await).unwrap();
        assert!(refusal(reply).1.contains("unknown operation `nope`"));
    }

    /// The build host's side of an attachment copy: written under `.kandev/attachments` with
    /// its `.gitignore`, through the confinement (a `.kandev` leading out, a name with a
    /// folder and content that is not base64 are refused).
    #[tokio::test]
    async fn i20_d15_an_attachment_copy_is_written_confined_where_the_operation_runs() {
        let dir = tempfile::tempdir().unwrap();
        let write = |path: &Path, file: &str| WriteAttachment {
            path: path.to_owned(),
            file: file.into(),
            bytes: b"\0bytes".to_vec(),
        };
        let copy = dir.path().join(".kandev/attachments/abc-x.bin");
        assert_eq!(answer(write(dir.path(), "abc-x.bin")).await, Reply::Ok(copy.clone()));
        assert_eq!(std::fs::read(&copy).unwrap(), b"\0bytes");
        assert_eq!(std::fs::read_to_string(dir.path().join(".kandev/.gitignore")).unwrap(), "*\n");
        let (kind, _) = refusal(answer(write(dir.path(), "../x")).await);
        assert_eq!(kind, RemoteErrorKind::Forbidden);
        let request = serde_json::json!({
            "op": "write_attachment",
            "args": {"path": dir.path(), "file": "x", "bytes": "not base64!"},
        });
        let reply: Reply<PathBuf> =
            serde_json::from_str(&serve(&request.to_string()).await).unwrap();
        let (kind, message) = refusal(reply);
        assert_eq!(kind, RemoteErrorKind::Validation);
        assert!(message.contains("not base64"), "{message}");
        let outside = tempfile::tempdir().unwrap();
        let other = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), other.path().join(".kandev")).unwrap();
        let (kind, _) = refusal(answer(write(other.path(), "x")).await);
        assert_eq!(kind, RemoteErrorKind::Forbidden);
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0, "nothing written out");
    }

    /// The build host's side of a cleanup script: its output and exit code, or the failure
    /// as a setup script's (which the engine words as the cleanup script's).
    #[tokio::test]
    async fn i20_d16_a_script_runs_where_the_operation_runs() {
        let dir = tempfile::tempdir().unwrap();
        let run = |script: &str| RunScript {
            path: dir.path().to_owned(),
            script: script.into(),
            timeout: Duration::from_secs(30),
            env: vec![("I50_SCRIPT_KEY".into(), "from the runner".into())],
        };
        let shown = format!("here\n{}\n", dir.path().display());
        let ran = SetupOutput { exit_code: 0, output: shown };
        assert_eq!(answer(run("echo here; pwd")).await, Reply::Ok(ran));
        let (_, message) = refusal(answer(run("echo no; exit 3")).await);
        assert!(message.contains("exit code 3") && message.contains("no"), "{message}");
    }
}
