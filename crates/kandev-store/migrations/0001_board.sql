-- Workspaces, repositories, agent profiles, workflows, steps, tasks and the event log.
-- Timestamps are milliseconds since the Unix epoch (UTC).

CREATE TABLE workspaces (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);

CREATE TABLE repositories (
    id               TEXT PRIMARY KEY,
    workspace_id     TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    name             TEXT NOT NULL,
    local_path       TEXT NOT NULL,
    default_branch   TEXT NOT NULL,
    branch_template  TEXT NOT NULL,
    setup_script     TEXT NOT NULL DEFAULT '',
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    UNIQUE (workspace_id, local_path)
);

CREATE TABLE agent_profiles (
    id            TEXT PRIMARY KEY,
    name          TEXT NOT NULL,
    kind          TEXT NOT NULL,
    command       TEXT NOT NULL DEFAULT '',
    args          TEXT NOT NULL DEFAULT '[]',
    env           TEXT NOT NULL DEFAULT '[]',
    model         TEXT,
    mode          TEXT,
    auto_approve  INTEGER NOT NULL DEFAULT 0,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
);

CREATE TABLE workflows (
    id            TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    name          TEXT NOT NULL,
    description   TEXT NOT NULL DEFAULT '',
    template_id   TEXT,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
);

CREATE TABLE workflow_steps (
    id                             TEXT PRIMARY KEY,
    workflow_id                    TEXT NOT NULL REFERENCES workflows(id) ON DELETE CASCADE,
    name                           TEXT NOT NULL,
    position                       INTEGER NOT NULL,
    color                          TEXT NOT NULL DEFAULT '',
    prompt                         TEXT NOT NULL DEFAULT '',
    is_start_step                  INTEGER NOT NULL DEFAULT 0,
    allow_manual_move              INTEGER NOT NULL DEFAULT 1,
    agent_profile_id               TEXT REFERENCES agent_profiles(id) ON DELETE SET NULL,
    cancel_triggers_turn_complete  INTEGER NOT NULL DEFAULT 0,
    events                         TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX workflow_steps_by_workflow ON workflow_steps(workflow_id, position);

CREATE TABLE tasks (
    id                  TEXT PRIMARY KEY,
    workspace_id        TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    workflow_id         TEXT NOT NULL REFERENCES workflows(id) ON DELETE CASCADE,
    step_id             TEXT NOT NULL REFERENCES workflow_steps(id) ON DELETE CASCADE,
    title               TEXT NOT NULL,
    description         TEXT NOT NULL DEFAULT '',
    state               TEXT NOT NULL,
    position            INTEGER NOT NULL,
    agent_profile_id    TEXT REFERENCES agent_profiles(id) ON DELETE SET NULL,
    primary_session_id  TEXT,
    archived_at         INTEGER,
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL
);
CREATE INDEX tasks_by_board ON tasks(workflow_id, step_id, position);

CREATE TABLE task_repositories (
    task_id        TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
    repository_id  TEXT NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
    position       INTEGER NOT NULL,
    PRIMARY KEY (task_id, repository_id)
);
CREATE INDEX task_repositories_by_repository ON task_repositories(repository_id);

CREATE TABLE task_step_history (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id       TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
    from_step_id  TEXT,
    to_step_id    TEXT NOT NULL,
    trigger       TEXT NOT NULL,
    actor         TEXT NOT NULL,
    at            INTEGER NOT NULL
);
CREATE INDEX task_step_history_by_task ON task_step_history(task_id, id);

-- Every notification, in order. `seq` is what subscribers resume from.
CREATE TABLE events (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    topic       TEXT NOT NULL,
    action      TEXT NOT NULL,
    payload     TEXT NOT NULL,
    created_at  INTEGER NOT NULL
);
CREATE INDEX events_by_topic ON events(topic, seq);
