-- SQLite's 0039_intake.sql (issue 47): intake sources, task origins, webhook deliveries,
-- schedules and their runs.
CREATE TABLE intake_sources (
    id TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    kind TEXT NOT NULL,
    repository_id TEXT,
    label TEXT NOT NULL,
    workflow_id TEXT NOT NULL,
    step_id TEXT NOT NULL,
    hook_scheme TEXT NOT NULL,
    hook_secret TEXT NOT NULL,
    enabled BIGINT NOT NULL,
    last_polled_at BIGINT,
    last_error TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE TABLE task_origins (
    workspace_id TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    external_id TEXT NOT NULL,
    task_id TEXT NOT NULL,
    url TEXT NOT NULL,
    source_id TEXT,
    number BIGINT,
    closed BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, external_id)
);
CREATE INDEX task_origins_task ON task_origins (task_id);
CREATE TABLE webhook_deliveries (
    source_id TEXT NOT NULL REFERENCES intake_sources(id) ON DELETE CASCADE,
    delivery_id TEXT NOT NULL,
    event TEXT NOT NULL,
    outcome TEXT NOT NULL,
    received_at BIGINT NOT NULL,
    PRIMARY KEY (source_id, delivery_id)
);
CREATE TABLE schedules (
    id TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    cron TEXT NOT NULL,
    time_zone TEXT NOT NULL,
    title TEXT NOT NULL,
    description TEXT NOT NULL,
    workflow_id TEXT NOT NULL,
    step_id TEXT NOT NULL,
    repository_ids TEXT NOT NULL,
    missed TEXT NOT NULL,
    enabled BIGINT NOT NULL,
    last_occurrence BIGINT,
    created_at BIGINT NOT NULL
);
CREATE TABLE schedule_runs (
    schedule_id TEXT NOT NULL REFERENCES schedules(id) ON DELETE CASCADE,
    occurrence BIGINT NOT NULL,
    task_id TEXT,
    error TEXT NOT NULL,
    at BIGINT NOT NULL,
    PRIMARY KEY (schedule_id, occurrence)
);
