-- SQLite's 0034_review_threads.sql (issue 44 item 1): a reply's thread, a thread's resolution.
ALTER TABLE review_comments ADD COLUMN thread_id TEXT;
ALTER TABLE review_comments ADD COLUMN resolved_at BIGINT;
