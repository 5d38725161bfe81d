-- Issue 48: checkpoints of a session's worktrees around its turns. `turn_checkpoints` has one
-- row per turn and worktree: the commit recorded before the turn (under
-- `refs/kandev/checkpoints/<session>/<turn>`) and after it (`.../<turn>-after`), and when a
-- revert undid the turn. `checkpoint_baselines` is, per session and worktree, the state the
-- agent's turns last left (a turn's end, or a revert): what a revert compares the worktree
-- with to find edits made by anyone else. `checkpoint_notices` holds what the agent is told
-- with its next prompt after a revert (taken in the transaction that opens that turn).
CREATE TABLE turn_checkpoints (
    turn_id TEXT NOT NULL REFERENCES turns(id) ON DELETE CASCADE,
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    repository_id TEXT,
    path TEXT NOT NULL,
    before_commit TEXT NOT NULL,
    after_commit TEXT,
    taken_at INTEGER NOT NULL,
    undone_at INTEGER,
    PRIMARY KEY (turn_id, path)
);
CREATE INDEX turn_checkpoints_by_session ON turn_checkpoints(session_id, taken_at);
CREATE TABLE checkpoint_baselines (
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    path TEXT NOT NULL,
    commit_id TEXT NOT NULL,
    PRIMARY KEY (session_id, path)
);
CREATE TABLE checkpoint_notices (
    session_id TEXT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
    text TEXT NOT NULL
);
