-- SQLite's 0037_script_timeout.sql (issue 45 item 1): a repository's script time limit.
ALTER TABLE repositories ADD COLUMN script_timeout_s BIGINT NOT NULL DEFAULT 0;
