-- Issue 44 item 6: a merged task shows "merged". A worktree keeps the task branch's head that
-- `task.merge` last landed on its base (`merged_head`); the task's git summary says whether
-- every repository's branch is merged as it is now (`merged`, 0 or 1).
ALTER TABLE worktrees ADD COLUMN merged_head TEXT;
ALTER TABLE task_git_summaries ADD COLUMN merged INTEGER NOT NULL DEFAULT 0;
