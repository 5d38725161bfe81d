-- Issue 42 (container executor): kind `container`, with its settings as JSON in `container`
-- (engine, image, network, limits, read-only mounts;
-- `kandev_domain::container::ContainerSettings`; NULL for the other kinds). SQLite cannot
-- change a CHECK constraint in place: both tables are made again under new names and
-- renamed (the rename carries the foreign key over), in the migration's one transaction.
CREATE TABLE executors_next (
    id             TEXT PRIMARY KEY,
    name           TEXT NOT NULL UNIQUE,
    kind           TEXT NOT NULL CHECK (kind IN ('local', 'ssh', 'container')),
    host           TEXT NOT NULL DEFAULT '',
    port           INTEGER NOT NULL DEFAULT 22,
    user           TEXT NOT NULL DEFAULT '',
    identity_file  TEXT NOT NULL DEFAULT '',
    known_hosts    TEXT NOT NULL DEFAULT '',
    remote_home    TEXT NOT NULL DEFAULT '',
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL,
    container      TEXT
);
INSERT INTO executors_next (id, name, kind, host, port, user, identity_file, known_hosts,
    remote_home, created_at, updated_at)
    SELECT id, name, kind, host, port, user, identity_file, known_hosts, remote_home,
        created_at, updated_at FROM executors;

CREATE TABLE repository_executors_next (
    repository_id  TEXT PRIMARY KEY REFERENCES repositories(id) ON DELETE CASCADE,
    executor_id    TEXT NOT NULL REFERENCES executors_next(id) ON DELETE RESTRICT
);
INSERT INTO repository_executors_next (repository_id, executor_id)
    SELECT repository_id, executor_id FROM repository_executors;

DROP TABLE repository_executors;
DROP TABLE executors;
ALTER TABLE executors_next RENAME TO executors;
ALTER TABLE repository_executors_next RENAME TO repository_executors;
CREATE INDEX repository_executors_by_executor ON repository_executors(executor_id);
