-- Issue 16: a task's git status as last published (`task.git_status`), summed over its
-- repositories, so its card shows it when the board is read. Replaced on every publish.
CREATE TABLE task_git_summaries (
    task_id    TEXT PRIMARY KEY REFERENCES tasks(id) ON DELETE CASCADE,
    ahead      INTEGER NOT NULL,
    behind     INTEGER NOT NULL,
    -- Uncommitted and untracked files.
    dirty      INTEGER NOT NULL,
    -- Files that would conflict with the base tip.
    conflicts  INTEGER NOT NULL,
    -- The pull requests' state: open while any is open, merged when all are, else closed.
    pr_state   TEXT,
    updated_at INTEGER NOT NULL
);
