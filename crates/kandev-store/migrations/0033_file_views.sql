-- Issue 44 item 3: the files of a task's changes its reviewer marked viewed, each with the
-- hash of the file's diff when it was marked: a file whose diff changed since is not viewed
-- any more. `repository_id` is '' for a file of no repository's worktree.
CREATE TABLE file_views (
    task_id        TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
    repository_id  TEXT NOT NULL DEFAULT '',
    path           TEXT NOT NULL,
    content_hash   TEXT NOT NULL,
    viewed_at      INTEGER NOT NULL,
    PRIMARY KEY (task_id, repository_id, path)
);
