-- Issue 46: CI checks and reviews as workflow triggers. `pr_checks` holds each job of a pull
-- request's head commit as the forge reported it last (a failed one with the tail of its log,
-- and whether it fails on the base branch too). `pr_events` records each event a trigger ran
-- for, once per head commit and outcome (or per newest review): the key that keeps a poll after
-- a restart from sending the same feedback again, the rounds count, and why auto-fix stopped.
CREATE TABLE pr_checks (
    task_id TEXT NOT NULL,
    repository_id TEXT NOT NULL,
    name TEXT NOT NULL,
    head_sha TEXT NOT NULL,
    state TEXT NOT NULL,
    url TEXT NOT NULL,
    log_tail TEXT NOT NULL,
    inherited INTEGER NOT NULL,
    PRIMARY KEY (task_id, repository_id, name)
);
CREATE TABLE pr_events (
    task_id TEXT NOT NULL,
    repository_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    key TEXT NOT NULL,
    outcome TEXT NOT NULL,
    detail TEXT NOT NULL,
    at INTEGER NOT NULL,
    PRIMARY KEY (task_id, repository_id, kind, key)
);
