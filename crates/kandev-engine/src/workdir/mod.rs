//! Task working directories: a git worktree per repository of a task (made for its first
//! session, reused by later ones, set up by the repository's setup script) or a plain
//! folder for a task without a repository. The mechanics, as plain functions of the shared
//! state: preparing the directory a session starts in (`prepare`), a task's git status
//! (`status`), the ship actions (`ops`), pull requests (`forge`); `shared` holds the layout
//! and limits they use. The actions on them as [`crate::Engine`] methods (files and git,
//! shipping, dev servers, users' shells) are in `crate::engine`, above: nothing here
//! imports the `Engine` or a session's actor. The values they return are
//! `kandev_domain::files`, re-exported here.

pub(crate) mod branch;
pub(crate) mod forge;
pub(crate) mod ops;
pub(crate) mod prepare;
pub(crate) mod shared;
pub(crate) mod status;

pub use kandev_domain::files::{
    ChangeStatus, ChangedFile, CommitMade, DiffLine, EntryKind, FileChange, FileContent, Hunk,
    KeptWorktree, LineKind, TaskChanges, TaskTree, TaskWorktree, TreeEntry, WorktreeRemoval,
};
pub use ops::{MergeMade, PushMade, ReviewSent};
pub(crate) use shared::script_timeout;
pub use shared::{CLEANUP_TIMEOUT, MAX_PLAIN_ENTRIES, MAX_READ_BYTES};
