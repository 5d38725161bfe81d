-- The PostgreSQL schema, equal to SQLite's migrations 0001 to 0024 (a test checks that
-- both describe the same tables and columns). From here on a schema change adds a file with
-- the same number to both `migrations/` and `migrations-pg/`.
--
-- Differences from SQLite, each on purpose:
-- - integers are BIGINT (sqlx reads them as i64 on both engines); flags stay 0/1 integers;
-- - SQLite's AUTOINCREMENT and INTEGER PRIMARY KEY become identity columns;
-- - `tasks`, `turns` and `messages` have an explicit `rowid` (SQLite's is implicit), which
--   orders turns started in the same millisecond and pages search hits;
-- - the event `seq` is assigned from `event_seq` inside the writing transaction (a trigger),
--   so a rolled-back write leaves no gap, unlike a sequence; `event_seq.last` is also what
--   SQLite's `sqlite_sequence` row for `events` is: the highest seq ever used;
-- - full-text search is a GIN index over `kandev_tsv(...)` instead of FTS5 tables;
-- - a few SQLite functions the store's statements use are defined below.

-- ------------------------------------------------------------- SQLite functions

-- The elements of a JSON array, one row each (SQLite's `json_each` over an array).
CREATE FUNCTION json_each(doc text) RETURNS TABLE (value jsonb)
    LANGUAGE sql IMMUTABLE AS $$ SELECT jsonb_array_elements(doc::jsonb) $$;

-- The value at a `$.a.b` path as text (SQLite's `json_extract` for the paths the store uses).
CREATE FUNCTION json_extract(doc text, path text) RETURNS text
    LANGUAGE sql IMMUTABLE AS $$ SELECT (doc::jsonb) #>> string_to_array(substr(path, 3), '.') $$;

-- SQLite's `json(text)`: the text as JSON.
CREATE FUNCTION json(doc text) RETURNS text
    LANGUAGE sql IMMUTABLE AS $$ SELECT (doc::jsonb)::text $$;

-- SQLite's `json_set` for one `$.key` path.
CREATE FUNCTION json_set(doc text, path text, value text) RETURNS text
    LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_set(doc::jsonb, string_to_array(substr(path, 3), '.'), value::jsonb, true)::text
$$;

-- The searchable words of a text (the first 200,000 characters: a tsvector holds at most 1 MB).
CREATE FUNCTION kandev_tsv(doc text) RETURNS tsvector
    LANGUAGE sql IMMUTABLE AS $$ SELECT to_tsvector('simple'::regconfig, left(doc, 200000)) $$;

-- ------------------------------------------------------------- tables

CREATE TABLE workspaces (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL
);

CREATE TABLE repositories (
    id                  TEXT PRIMARY KEY,
    workspace_id        TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    name                TEXT NOT NULL,
    local_path          TEXT NOT NULL,
    default_branch      TEXT NOT NULL,
    branch_template     TEXT NOT NULL,
    setup_script        TEXT NOT NULL DEFAULT '',
    created_at          BIGINT NOT NULL,
    updated_at          BIGINT NOT NULL,
    copy_files          TEXT NOT NULL DEFAULT '[]',
    cleanup_script      TEXT NOT NULL DEFAULT '',
    forge_api_base_url  TEXT NOT NULL DEFAULT '',
    forge_token_env     TEXT NOT NULL DEFAULT '',
    dev_script          TEXT NOT NULL DEFAULT '',
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
    auto_approve  BIGINT NOT NULL DEFAULT 0,
    created_at    BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL,
    mcp_servers   TEXT NOT NULL DEFAULT '[]'
);

CREATE TABLE workflows (
    id            TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    name          TEXT NOT NULL,
    description   TEXT NOT NULL DEFAULT '',
    template_id   TEXT,
    created_at    BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL
);

CREATE TABLE workflow_steps (
    id                             TEXT PRIMARY KEY,
    workflow_id                    TEXT NOT NULL REFERENCES workflows(id) ON DELETE CASCADE,
    name                           TEXT NOT NULL,
    position                       BIGINT NOT NULL,
    color                          TEXT NOT NULL DEFAULT '',
    prompt                         TEXT NOT NULL DEFAULT '',
    is_start_step                  BIGINT NOT NULL DEFAULT 0,
    allow_manual_move              BIGINT NOT NULL DEFAULT 1,
    agent_profile_id               TEXT REFERENCES agent_profiles(id) ON DELETE SET NULL,
    cancel_triggers_turn_complete  BIGINT NOT NULL DEFAULT 0,
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
    position            BIGINT NOT NULL,
    agent_profile_id    TEXT REFERENCES agent_profiles(id) ON DELETE SET NULL,
    primary_session_id  TEXT,
    archived_at         BIGINT,
    created_at          BIGINT NOT NULL,
    updated_at          BIGINT NOT NULL,
    parent_id           TEXT REFERENCES tasks(id) ON DELETE SET NULL,
    start_waiting       BIGINT NOT NULL DEFAULT 0,
    needs_you           TEXT,
    rowid               BIGINT GENERATED BY DEFAULT AS IDENTITY UNIQUE
);
CREATE INDEX tasks_by_board ON tasks(workflow_id, step_id, position);
CREATE INDEX tasks_search ON tasks USING GIN (kandev_tsv(title || ' ' || description));

CREATE TABLE task_repositories (
    task_id        TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
    repository_id  TEXT NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
    position       BIGINT NOT NULL,
    PRIMARY KEY (task_id, repository_id)
);
CREATE INDEX task_repositories_by_repository ON task_repositories(repository_id);
CREATE INDEX task_repositories_in_order ON task_repositories(task_id, position, repository_id);

CREATE TABLE task_step_history (
    id            BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    task_id       TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
    from_step_id  TEXT,
    to_step_id    TEXT NOT NULL,
    trigger       TEXT NOT NULL,
    actor         TEXT NOT NULL,
    at            BIGINT NOT NULL
);
CREATE INDEX task_step_history_by_task ON task_step_history(task_id, id);

CREATE TABLE events (
    seq         BIGINT PRIMARY KEY,
    topic       TEXT NOT NULL,
    action      TEXT NOT NULL,
    payload     TEXT NOT NULL,
    created_at  BIGINT NOT NULL
);
CREATE INDEX events_by_topic ON events(topic, seq);

-- The highest event seq ever used (one row); survives pruning.
CREATE TABLE event_seq (
    one   BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),
    last  BIGINT NOT NULL
);
INSERT INTO event_seq (one, last) VALUES (TRUE, 0);

-- Numbers an event without a seq after the highest so far, and keeps `event_seq.last` the
-- highest (a batch writes explicit seqs). The row lock on `event_seq` also orders writers.
CREATE FUNCTION events_assign_seq() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.seq IS NULL THEN
        UPDATE event_seq SET last = last + 1 RETURNING last INTO NEW.seq;
    ELSE
        UPDATE event_seq SET last = GREATEST(last, NEW.seq);
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER events_assign_seq BEFORE INSERT ON events
    FOR EACH ROW EXECUTE FUNCTION events_assign_seq();

CREATE TABLE sessions (
    id                  TEXT PRIMARY KEY,
    task_id             TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
    agent_profile_id    TEXT REFERENCES agent_profiles(id) ON DELETE SET NULL,
    state               TEXT NOT NULL,
    epoch               BIGINT NOT NULL DEFAULT 0,
    acp_session_id      TEXT,
    resume_token        TEXT,
    session_mode        TEXT,
    model               TEXT,
    config_options      TEXT NOT NULL DEFAULT '{}',
    plan_mode           BIGINT NOT NULL DEFAULT 0,
    context_window      TEXT,
    last_error          TEXT,
    auto_run            BIGINT NOT NULL DEFAULT 1,
    agent_info          TEXT,
    cwd                 TEXT NOT NULL,
    created_at          BIGINT NOT NULL,
    updated_at          BIGINT NOT NULL,
    available_commands  TEXT NOT NULL DEFAULT '[]',
    name                TEXT
);
CREATE INDEX sessions_by_task ON sessions(task_id, created_at);

CREATE TABLE session_runtime (
    session_id    TEXT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
    execution_id  TEXT NOT NULL,
    epoch         BIGINT NOT NULL,
    pid           BIGINT,
    pgid          BIGINT,
    status        TEXT NOT NULL,
    cwd           TEXT NOT NULL,
    capabilities  TEXT NOT NULL DEFAULT '{}',
    started_at    BIGINT NOT NULL,
    runner_exec   TEXT,
    runner_seq    BIGINT
);

CREATE TABLE turns (
    id            TEXT PRIMARY KEY,
    session_id    TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    epoch         BIGINT NOT NULL,
    started_at    BIGINT NOT NULL,
    completed_at  BIGINT,
    stop_reason   TEXT,
    usage         TEXT,
    rowid         BIGINT GENERATED BY DEFAULT AS IDENTITY UNIQUE
);
CREATE INDEX turns_by_session ON turns(session_id, started_at);

CREATE TABLE messages (
    id                 TEXT PRIMARY KEY,
    session_id         TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    turn_id            TEXT,
    seq                BIGINT NOT NULL,
    kind               TEXT NOT NULL,
    content            TEXT NOT NULL DEFAULT '',
    metadata           TEXT NOT NULL DEFAULT '{}',
    client_message_id  TEXT,
    created_at         BIGINT NOT NULL,
    updated_at         BIGINT NOT NULL,
    rowid              BIGINT GENERATED BY DEFAULT AS IDENTITY UNIQUE
);
CREATE UNIQUE INDEX messages_by_session_seq ON messages(session_id, seq);
CREATE UNIQUE INDEX messages_by_client_id ON messages(session_id, client_message_id)
    WHERE client_message_id IS NOT NULL;
CREATE INDEX messages_permission_requests ON messages(session_id, seq)
    WHERE kind = 'permission_request';
CREATE INDEX messages_search ON messages USING GIN (kandev_tsv(content));

CREATE TABLE queued_prompts (
    id                 TEXT PRIMARY KEY,
    session_id         TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    position           BIGINT NOT NULL,
    content            TEXT NOT NULL,
    client_message_id  TEXT,
    queued_by          TEXT NOT NULL DEFAULT 'user',
    created_at         BIGINT NOT NULL,
    attachments        TEXT NOT NULL DEFAULT '[]'
);
CREATE INDEX queued_prompts_by_session ON queued_prompts(session_id, position);

CREATE TABLE permission_answers (
    id           BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    session_id   TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    request_id   TEXT NOT NULL,
    option_id    TEXT,
    outcome      TEXT NOT NULL,
    answered_by  TEXT NOT NULL,
    at           BIGINT NOT NULL
);

CREATE TABLE worktrees (
    id               TEXT PRIMARY KEY,
    task_id          TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
    repository_id    TEXT REFERENCES repositories(id) ON DELETE SET NULL,
    repository_path  TEXT NOT NULL,
    path             TEXT NOT NULL,
    branch           TEXT NOT NULL,
    base_commit      TEXT NOT NULL,
    setup_done_at    BIGINT,
    created_at       BIGINT NOT NULL,
    removed_at       BIGINT
);
CREATE INDEX worktrees_by_task ON worktrees(task_id, created_at);
CREATE UNIQUE INDEX worktrees_live_path ON worktrees(path) WHERE removed_at IS NULL;
CREATE UNIQUE INDEX worktrees_live_repository ON worktrees(task_id, repository_id)
    WHERE removed_at IS NULL;

CREATE TABLE session_resets (
    session_id  TEXT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
    step_id     TEXT,
    epoch       BIGINT NOT NULL,
    cause       TEXT NOT NULL,
    created_at  BIGINT NOT NULL
);

CREATE TABLE message_chunks (
    id          BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    message_id  TEXT NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    session_id  TEXT NOT NULL,
    delta       TEXT NOT NULL,
    end_len     BIGINT NOT NULL
);
CREATE INDEX message_chunks_by_message ON message_chunks(message_id, id);
CREATE INDEX message_chunks_by_session ON message_chunks(session_id);

CREATE TABLE task_blockers (
    task_id     TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
    blocker_id  TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
    PRIMARY KEY (task_id, blocker_id)
);
CREATE INDEX task_blockers_by_blocker ON task_blockers(blocker_id);

CREATE TABLE user_questions (
    id           TEXT PRIMARY KEY,
    session_id   TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    task_id      TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
    question     TEXT NOT NULL,
    options      TEXT NOT NULL,
    status       TEXT NOT NULL,
    answer       TEXT,
    created_at   BIGINT NOT NULL,
    expires_at   BIGINT NOT NULL,
    resolved_at  BIGINT
);
CREATE INDEX user_questions_by_session ON user_questions(session_id, status);

CREATE TABLE task_base_branches (
    task_id        TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
    repository_id  TEXT NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
    base_branch    TEXT NOT NULL,
    PRIMARY KEY (task_id, repository_id)
);

CREATE TABLE task_pull_requests (
    task_id          TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
    repository_id    TEXT NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
    forge            TEXT NOT NULL,
    number           BIGINT NOT NULL,
    url              TEXT NOT NULL,
    state            TEXT NOT NULL,
    checks           TEXT,
    review_decision  TEXT,
    head_branch      TEXT NOT NULL,
    base_branch      TEXT NOT NULL,
    updated_at       BIGINT NOT NULL,
    PRIMARY KEY (task_id, repository_id)
);

CREATE TABLE review_comments (
    id          TEXT PRIMARY KEY,
    task_id     TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
    path        TEXT NOT NULL,
    line        BIGINT NOT NULL,
    side        TEXT NOT NULL,
    text        TEXT NOT NULL,
    quote       TEXT NOT NULL DEFAULT '',
    diff_hash   TEXT NOT NULL DEFAULT '',
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL,
    sent_at     BIGINT
);
CREATE INDEX review_comments_by_task ON review_comments(task_id, created_at);

CREATE TABLE task_git_summaries (
    task_id     TEXT PRIMARY KEY REFERENCES tasks(id) ON DELETE CASCADE,
    ahead       BIGINT NOT NULL,
    behind      BIGINT NOT NULL,
    dirty       BIGINT NOT NULL,
    conflicts   BIGINT NOT NULL,
    pr_state    TEXT,
    updated_at  BIGINT NOT NULL
);

CREATE TABLE child_processes (
    pgid        BIGINT PRIMARY KEY,
    kind        TEXT NOT NULL,
    task_id     TEXT NOT NULL,
    started_at  BIGINT NOT NULL
);

CREATE TABLE notifications (
    id          TEXT PRIMARY KEY,
    kind        TEXT NOT NULL,
    seq         BIGINT NOT NULL,
    task_id     TEXT NOT NULL,
    session_id  TEXT NOT NULL,
    title       TEXT NOT NULL,
    data        TEXT NOT NULL DEFAULT '{}',
    created_at  BIGINT NOT NULL
);
CREATE INDEX notifications_by_seq ON notifications(seq);

CREATE TABLE notification_channels (
    id          TEXT PRIMARY KEY,
    kind        TEXT NOT NULL,
    url         TEXT NOT NULL,
    secret      TEXT,
    events      TEXT NOT NULL,
    created_at  BIGINT NOT NULL
);

CREATE TABLE notification_deliveries (
    id               BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    notification_id  TEXT NOT NULL REFERENCES notifications(id) ON DELETE CASCADE,
    channel_id       TEXT NOT NULL REFERENCES notification_channels(id) ON DELETE CASCADE,
    status           TEXT NOT NULL,
    next_at          BIGINT,
    UNIQUE (notification_id, channel_id)
);
CREATE INDEX notification_deliveries_due ON notification_deliveries(status, next_at);

CREATE TABLE notification_attempts (
    delivery_id  BIGINT NOT NULL REFERENCES notification_deliveries(id) ON DELETE CASCADE,
    attempt      BIGINT NOT NULL,
    at           BIGINT NOT NULL,
    http_status  BIGINT,
    error        TEXT,
    PRIMARY KEY (delivery_id, attempt)
);

CREATE TABLE saved_prompts (
    id            TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    name          TEXT NOT NULL,
    body          TEXT NOT NULL,
    created_at    BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL,
    UNIQUE (workspace_id, name)
);

CREATE TABLE users (
    id             TEXT PRIMARY KEY,
    name           TEXT NOT NULL UNIQUE,
    password_hash  TEXT NOT NULL,
    created_at     BIGINT NOT NULL,
    updated_at     BIGINT NOT NULL
);

CREATE TABLE user_sessions (
    secret_hash  TEXT PRIMARY KEY,
    user_id      TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    created_at   BIGINT NOT NULL,
    expires_at   BIGINT NOT NULL
);
CREATE INDEX user_sessions_user ON user_sessions(user_id);

CREATE TABLE user_tokens (
    id           TEXT PRIMARY KEY,
    user_id      TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name         TEXT NOT NULL,
    secret_hash  TEXT NOT NULL UNIQUE,
    created_at   BIGINT NOT NULL
);
CREATE INDEX user_tokens_user ON user_tokens(user_id);
