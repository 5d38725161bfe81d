-- SQLite's 0034_review_threads.sql (issue 44 item 1): a reply's thread, a thread's resolution, a range's first line.
ALTER TABLE review_comments ADD COLUMN thread_id TEXT;
ALTER TABLE review_comments ADD COLUMN resolved_at BIGINT;
ALTER TABLE review_comments ADD COLUMN start_line BIGINT;
