-- Issue 19: processes the server started for a task outside any agent session (a user
-- terminal's shell, a dev server), recorded while they run, so that the next start kills
-- what a server stopped with `kill -9` left running (as `session_runtime.pgid` does for
-- agents). `kind` says how to kill it: `terminal` is a session (the shell and every job group
-- it made), `dev_server` a process group.
CREATE TABLE child_processes (
    pgid INTEGER PRIMARY KEY,
    kind TEXT NOT NULL,
    task_id TEXT NOT NULL,
    started_at INTEGER NOT NULL
);
