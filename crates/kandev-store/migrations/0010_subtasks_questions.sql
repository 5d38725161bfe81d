-- Issue 17: subtasks and dependencies between tasks, and questions agents ask the user
-- (MCP `ask_user`).

-- A subtask's parent; deleting the parent leaves its subtasks as top-level tasks.
ALTER TABLE tasks ADD COLUMN parent_id TEXT REFERENCES tasks(id) ON DELETE SET NULL;

-- 1 while an auto-start (`auto_start_agent` or `start_agent`) waits for the task's blockers
-- to be done; cleared when it runs.
ALTER TABLE tasks ADD COLUMN start_waiting INTEGER NOT NULL DEFAULT 0;

-- `task_id` is blocked by `blocker_id` (same workspace, no cycles: checked on write).
CREATE TABLE task_blockers (
    task_id TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
    blocker_id TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
    PRIMARY KEY (task_id, blocker_id)
);
CREATE INDEX task_blockers_by_blocker ON task_blockers(blocker_id);

-- A question an agent asked the user through MCP `ask_user`. `status`: pending, answered,
-- cancelled, timed_out, expired (a server restart while pending). Resolved exactly once.
CREATE TABLE user_questions (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    task_id TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
    question TEXT NOT NULL,
    options TEXT NOT NULL,
    status TEXT NOT NULL,
    answer TEXT,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    resolved_at INTEGER
);
CREATE INDEX user_questions_by_session ON user_questions(session_id, status);
