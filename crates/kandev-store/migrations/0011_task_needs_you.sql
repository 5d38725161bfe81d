-- Issue 14: whether a task needs its developer (a pending permission request, a question, a
-- failed session), kept in step with its primary session like `state`. NULL: not needed.
ALTER TABLE tasks ADD COLUMN needs_you TEXT;
