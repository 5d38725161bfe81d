-- SQLite's 0033_file_views.sql (issue 44 item 3): files of a task's changes marked viewed,
-- with the hash of the file's diff when marked.
CREATE TABLE file_views (
    task_id        TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
    repository_id  TEXT NOT NULL DEFAULT '',
    path           TEXT NOT NULL,
    content_hash   TEXT NOT NULL,
    viewed_at      BIGINT NOT NULL,
    PRIMARY KEY (task_id, repository_id, path)
);
