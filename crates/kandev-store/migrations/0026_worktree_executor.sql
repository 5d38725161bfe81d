-- Issue 20 (SSH executor, acceptance 3): the executor a worktree was made on. NULL: this
-- server's host. A worktree stays where it was made: when its repository's executor changes
-- later, the engine refuses to use it (archive the task's worktrees first). No foreign key:
-- the row outlives the executor for the record, and deleting an executor in use is refused
-- through `repository_executors`.
ALTER TABLE worktrees ADD COLUMN executor_id TEXT;
