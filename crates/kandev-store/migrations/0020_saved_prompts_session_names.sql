-- Issue 18 (composer): a workspace's library of saved prompts (inserted with `@name` in the
-- composer, referenced as `{{prompt:name}}` in step prompts; names unique per workspace), and
-- the name a person gives a session (`session.rename`; NULL shows the default label).

CREATE TABLE saved_prompts (
    id            TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    name          TEXT NOT NULL,
    body          TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL,
    UNIQUE (workspace_id, name)
);

ALTER TABLE sessions ADD COLUMN name TEXT;
