-- SQLite's 0038_pr_feedback.sql (issue 46): pull request checks per job, and the forge events
-- triggers ran for.
CREATE TABLE pr_checks (
    task_id TEXT NOT NULL,
    repository_id TEXT NOT NULL,
    name TEXT NOT NULL,
    head_sha TEXT NOT NULL,
    state TEXT NOT NULL,
    url TEXT NOT NULL,
    log_tail TEXT NOT NULL,
    inherited BIGINT NOT NULL,
    PRIMARY KEY (task_id, repository_id, name)
);
CREATE TABLE pr_events (
    task_id TEXT NOT NULL,
    repository_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    key TEXT NOT NULL,
    outcome TEXT NOT NULL,
    detail TEXT NOT NULL,
    at BIGINT NOT NULL,
    PRIMARY KEY (task_id, repository_id, kind, key)
);
