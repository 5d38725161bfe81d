-- Shipping (issue 16): the base branch a task works from per repository, repository
-- settings for worktrees (files copied in, cleanup script) and the forge, the pull requests
-- opened for tasks, and review comments.

ALTER TABLE repositories ADD COLUMN copy_files TEXT NOT NULL DEFAULT '[]';
ALTER TABLE repositories ADD COLUMN cleanup_script TEXT NOT NULL DEFAULT '';
-- Where the forge's REST API is (empty: derived from the remote URL) and the name of the
-- environment variable holding its token (empty: GITHUB_TOKEN or GITLAB_TOKEN).
ALTER TABLE repositories ADD COLUMN forge_api_base_url TEXT NOT NULL DEFAULT '';
ALTER TABLE repositories ADD COLUMN forge_token_env TEXT NOT NULL DEFAULT '';

-- A task's base branch per repository when it is not the repository's default branch.
CREATE TABLE task_base_branches (
    task_id        TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
    repository_id  TEXT NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
    base_branch    TEXT NOT NULL,
    PRIMARY KEY (task_id, repository_id)
);

-- The pull (merge) request opened for a task's branch in a repository, as last seen.
CREATE TABLE task_pull_requests (
    task_id        TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
    repository_id  TEXT NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
    forge          TEXT NOT NULL,
    number         INTEGER NOT NULL,
    url            TEXT NOT NULL,
    state          TEXT NOT NULL,
    checks         TEXT,
    review_decision TEXT,
    head_branch    TEXT NOT NULL,
    base_branch    TEXT NOT NULL,
    updated_at     INTEGER NOT NULL,
    PRIMARY KEY (task_id, repository_id)
);

-- Line comments on a task's diff; `sent_at` is set when review.submit delivered them.
CREATE TABLE review_comments (
    id          TEXT PRIMARY KEY,
    task_id     TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
    path        TEXT NOT NULL,
    line        INTEGER NOT NULL,
    side        TEXT NOT NULL,
    text        TEXT NOT NULL,
    quote       TEXT NOT NULL DEFAULT '',
    diff_hash   TEXT NOT NULL DEFAULT '',
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    sent_at     INTEGER
);
CREATE INDEX review_comments_by_task ON review_comments(task_id, created_at);
