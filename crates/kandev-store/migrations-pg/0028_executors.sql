-- SQLite's 0028_executors.sql (issue 20, SSH executor): named executors and the executor each
-- repository chose. `user` is a reserved word in PostgreSQL, so the column is quoted here and
-- in the store's statements.

CREATE TABLE executors (
    id             TEXT PRIMARY KEY,
    name           TEXT NOT NULL UNIQUE,
    kind           TEXT NOT NULL CHECK (kind IN ('local', 'ssh')),
    host           TEXT NOT NULL DEFAULT '',
    port           BIGINT NOT NULL DEFAULT 22,
    "user"         TEXT NOT NULL DEFAULT '',
    identity_file  TEXT NOT NULL DEFAULT '',
    known_hosts    TEXT NOT NULL DEFAULT '',
    remote_home    TEXT NOT NULL DEFAULT '',
    created_at     BIGINT NOT NULL,
    updated_at     BIGINT NOT NULL
);

CREATE TABLE repository_executors (
    repository_id  TEXT PRIMARY KEY REFERENCES repositories(id) ON DELETE CASCADE,
    executor_id    TEXT NOT NULL REFERENCES executors(id) ON DELETE RESTRICT
);

CREATE INDEX repository_executors_by_executor ON repository_executors(executor_id);
