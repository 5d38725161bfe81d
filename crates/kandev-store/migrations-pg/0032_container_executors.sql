-- SQLite's 0032_container_executors.sql (issue 42): kind `container`, with its settings as
-- JSON in `container`.
ALTER TABLE executors DROP CONSTRAINT executors_kind_check;
ALTER TABLE executors ADD CONSTRAINT executors_kind_check
    CHECK (kind IN ('local', 'ssh', 'container'));
ALTER TABLE executors ADD COLUMN container TEXT;
