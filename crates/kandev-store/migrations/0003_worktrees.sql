-- The git worktrees made for tasks: one live row per (task, repository); a removed worktree
-- keeps its row with `removed_at` set. The repository's path is copied so a worktree can
-- still be removed after its repository was unregistered.

CREATE TABLE worktrees (
    id               TEXT PRIMARY KEY,
    task_id          TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
    repository_id    TEXT REFERENCES repositories(id) ON DELETE SET NULL,
    repository_path  TEXT NOT NULL,
    path             TEXT NOT NULL,
    branch           TEXT NOT NULL,
    base_commit      TEXT NOT NULL,
    setup_done_at    INTEGER,
    created_at       INTEGER NOT NULL,
    removed_at       INTEGER
);
CREATE INDEX worktrees_by_task ON worktrees(task_id, created_at);
CREATE UNIQUE INDEX worktrees_live_path ON worktrees(path) WHERE removed_at IS NULL;
CREATE UNIQUE INDEX worktrees_live_repository ON worktrees(task_id, repository_id)
    WHERE removed_at IS NULL;
