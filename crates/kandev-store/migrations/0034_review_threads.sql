-- Issue 44 item 1: review comments in threads on a diff line. A reply names its thread (the
-- first comment's id; NULL on that first comment), and a thread is resolved on its first
-- comment (`resolved_at`). A comment on a range of lines keeps its first line (`start_line`;
-- NULL: the one line `line`).
ALTER TABLE review_comments ADD COLUMN thread_id TEXT;
ALTER TABLE review_comments ADD COLUMN resolved_at INTEGER;
ALTER TABLE review_comments ADD COLUMN start_line INTEGER;
