-- Issue 19: a repository's dev server command (`npm run dev`), run by `devserver.start` in a
-- task's worktree with `PORT` set; empty for none.

ALTER TABLE repositories ADD COLUMN dev_script TEXT NOT NULL DEFAULT '';
