-- Issue 47: work that arrives by itself. `intake_sources` are where it comes from: a
-- repository's forge issues (polled, and by webhook) or a generic signed webhook; each says
-- where its tasks go. `task_origins` ties a task to what it was made from, keyed by
-- `(workspace_id, external_id)` so one issue never makes two tasks; the row stays when its
-- task is deleted, so a deleted task's issue is not taken in again. `webhook_deliveries`
-- remembers each delivery id a hook accepted (a replay is refused). `schedules` make tasks on
-- a cron expression in a named time zone; `schedule_runs` records each occurrence handled
-- (fired with its task, skipped, or failed with why), so none fires twice. What a workspace
-- owns goes with it.
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
    enabled INTEGER NOT NULL,
    last_polled_at INTEGER,
    last_error TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE TABLE task_origins (
    workspace_id TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    external_id TEXT NOT NULL,
    task_id TEXT NOT NULL,
    url TEXT NOT NULL,
    source_id TEXT,
    number INTEGER,
    closed INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (workspace_id, external_id)
);
CREATE INDEX task_origins_task ON task_origins (task_id);
CREATE TABLE webhook_deliveries (
    source_id TEXT NOT NULL REFERENCES intake_sources(id) ON DELETE CASCADE,
    delivery_id TEXT NOT NULL,
    event TEXT NOT NULL,
    outcome TEXT NOT NULL,
    received_at INTEGER NOT NULL,
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
    enabled INTEGER NOT NULL,
    last_occurrence INTEGER,
    created_at INTEGER NOT NULL
);
CREATE TABLE schedule_runs (
    schedule_id TEXT NOT NULL REFERENCES schedules(id) ON DELETE CASCADE,
    occurrence INTEGER NOT NULL,
    task_id TEXT,
    error TEXT NOT NULL,
    at INTEGER NOT NULL,
    PRIMARY KEY (schedule_id, occurrence)
);
