-- Issue 45 item 1: a repository's own time limit for its setup and cleanup scripts, in
-- seconds; 0 uses the server's (`serve --setup-timeout` for setup, 5 minutes for cleanup).
ALTER TABLE repositories ADD COLUMN script_timeout_s INTEGER NOT NULL DEFAULT 0;
