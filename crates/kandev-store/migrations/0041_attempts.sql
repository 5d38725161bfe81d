-- Issue 48: attempts. `sessions.attempt` numbers a task's attempts (1, 2, ...; NULL for an
-- ordinary session, which works in the task's worktrees). `worktrees.session_id` names the
-- attempt a worktree belongs to (NULL: the task's own); picking an attempt clears it, so its
-- worktree and branch become the task's. A task has one live worktree per repository, and
-- each attempt one of its own.
ALTER TABLE sessions ADD COLUMN attempt INTEGER;
ALTER TABLE worktrees ADD COLUMN session_id TEXT;
DROP INDEX worktrees_live_repository;
CREATE UNIQUE INDEX worktrees_live_repository
    ON worktrees(task_id, repository_id, COALESCE(session_id, '')) WHERE removed_at IS NULL;
