//! Task working directories: a git worktree per repository of a task (made for its first
//! session, reused by later ones, set up by the repository's setup script) or a plain
//! folder for a task without a repository. Two parts: preparing the directory a session
//! starts in (`prepare`), and the file and git actions on it (`actions`, methods of
//! [`crate::Engine`]); `shared` holds the layout both use; `dev` runs dev servers in the worktrees and `terminals` users' shells. The values they return are
//! `kandev_domain::files`, re-exported here.

pub(crate) mod actions;
pub(crate) mod branch;
pub(crate) mod dev;
pub(crate) mod forge;
pub(crate) mod ops;
pub(crate) mod prepare;
pub(crate) mod shared;
pub(crate) mod ship;
pub(crate) mod status;
pub(crate) mod terminals;

pub use actions::{MAX_PLAIN_ENTRIES, MAX_READ_BYTES};
pub use kandev_domain::files::{
    ChangeStatus, ChangedFile, CommitMade, DiffLine, EntryKind, FileChange, FileContent, Hunk,
    KeptWorktree, LineKind, TaskChanges, TaskTree, TaskWorktree, TreeEntry, WorktreeRemoval,
};
pub use ops::{MergeMade, PushMade};
pub use ship::{CLEANUP_TIMEOUT, ReviewSent};
