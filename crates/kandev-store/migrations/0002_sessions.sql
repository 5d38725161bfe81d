-- Agent sessions, their live runtime binding, turns, the transcript, the prompt queue and
-- the audit of permission answers.

CREATE TABLE sessions (
    id                TEXT PRIMARY KEY,
    task_id           TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
    agent_profile_id  TEXT REFERENCES agent_profiles(id) ON DELETE SET NULL,
    state             TEXT NOT NULL,
    epoch             INTEGER NOT NULL DEFAULT 0,
    acp_session_id    TEXT,
    resume_token      TEXT,
    session_mode      TEXT,
    model             TEXT,
    config_options    TEXT NOT NULL DEFAULT '{}',
    plan_mode         INTEGER NOT NULL DEFAULT 0,
    context_window    TEXT,
    last_error        TEXT,
    auto_run          INTEGER NOT NULL DEFAULT 1,
    agent_info        TEXT,
    cwd               TEXT NOT NULL,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL
);
CREATE INDEX sessions_by_task ON sessions(task_id, created_at);

CREATE TABLE session_runtime (
    session_id    TEXT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
    execution_id  TEXT NOT NULL,
    epoch         INTEGER NOT NULL,
    pid           INTEGER,
    pgid          INTEGER,
    status        TEXT NOT NULL,
    cwd           TEXT NOT NULL,
    capabilities  TEXT NOT NULL DEFAULT '{}',
    started_at    INTEGER NOT NULL
);

CREATE TABLE turns (
    id            TEXT PRIMARY KEY,
    session_id    TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    epoch         INTEGER NOT NULL,
    started_at    INTEGER NOT NULL,
    completed_at  INTEGER,
    stop_reason   TEXT
);
CREATE INDEX turns_by_session ON turns(session_id, started_at);

-- `seq` is the seq of the event that announced the message: strictly increasing per session.
CREATE TABLE messages (
    id                 TEXT PRIMARY KEY,
    session_id         TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    turn_id            TEXT,
    seq                INTEGER NOT NULL,
    kind               TEXT NOT NULL,
    content            TEXT NOT NULL DEFAULT '',
    metadata           TEXT NOT NULL DEFAULT '{}',
    client_message_id  TEXT,
    created_at         INTEGER NOT NULL,
    updated_at         INTEGER NOT NULL
);
CREATE UNIQUE INDEX messages_by_session_seq ON messages(session_id, seq);
CREATE UNIQUE INDEX messages_by_client_id ON messages(session_id, client_message_id)
    WHERE client_message_id IS NOT NULL;

CREATE TABLE queued_prompts (
    id                 TEXT PRIMARY KEY,
    session_id         TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    position           INTEGER NOT NULL,
    content            TEXT NOT NULL,
    client_message_id  TEXT,
    queued_by          TEXT NOT NULL DEFAULT 'user',
    created_at         INTEGER NOT NULL
);
CREATE INDEX queued_prompts_by_session ON queued_prompts(session_id, position);

CREATE TABLE permission_answers (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id  TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    request_id  TEXT NOT NULL,
    option_id   TEXT,
    outcome     TEXT NOT NULL,
    answered_by TEXT NOT NULL,
    at          INTEGER NOT NULL
);
