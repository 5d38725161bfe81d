-- Issue 20 (SSH executor): named executors (`local`, or `ssh` with how to reach the host) and
-- the executor each repository chose. A repository without a row here runs locally. An
-- executor in use cannot be deleted (RESTRICT; the API says which repositories use it).

CREATE TABLE executors (
    id             TEXT PRIMARY KEY,
    name           TEXT NOT NULL UNIQUE,
    kind           TEXT NOT NULL CHECK (kind IN ('local', 'ssh')),
    host           TEXT NOT NULL DEFAULT '',
    port           INTEGER NOT NULL DEFAULT 22,
    user           TEXT NOT NULL DEFAULT '',
    identity_file  TEXT NOT NULL DEFAULT '',
    known_hosts    TEXT NOT NULL DEFAULT '',
    remote_home    TEXT NOT NULL DEFAULT '',
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL
);

CREATE TABLE repository_executors (
    repository_id  TEXT PRIMARY KEY REFERENCES repositories(id) ON DELETE CASCADE,
    executor_id    TEXT NOT NULL REFERENCES executors(id) ON DELETE RESTRICT
);

CREATE INDEX repository_executors_by_executor ON repository_executors(executor_id);
