-- SQLite's 0036_runner_terminals.sql (issue 45 item 13): terminals and dev servers a runner runs.
CREATE TABLE runner_terminals (
    id TEXT PRIMARY KEY,
    task_id TEXT NOT NULL,
    repository_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    exec TEXT NOT NULL,
    port BIGINT,
    started_at BIGINT NOT NULL
);
