-- SQLite's 0026_worktree_executor.sql (issue 20, SSH executor): the executor a worktree was
-- made on (NULL: this server's host).
ALTER TABLE worktrees ADD COLUMN executor_id TEXT;
