-- SQLite's 0041_attempts.sql (issue 48): attempts and their own worktrees.
ALTER TABLE sessions ADD COLUMN attempt BIGINT;
ALTER TABLE worktrees ADD COLUMN session_id TEXT;
DROP INDEX worktrees_live_repository;
CREATE UNIQUE INDEX worktrees_live_repository
    ON worktrees(task_id, repository_id, COALESCE(session_id, '')) WHERE removed_at IS NULL;
