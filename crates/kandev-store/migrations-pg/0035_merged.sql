-- SQLite's 0035_merged.sql (issue 44 item 6): the head a merge landed, a summary's `merged`.
ALTER TABLE worktrees ADD COLUMN merged_head TEXT;
ALTER TABLE task_git_summaries ADD COLUMN merged BIGINT NOT NULL DEFAULT 0;
