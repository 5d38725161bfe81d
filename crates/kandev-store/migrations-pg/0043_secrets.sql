-- Issue 50: secrets, encrypted at rest. `sealed` is the value sealed with the key `key_id`
-- names (XChaCha20-Poly1305: base64 of the nonce and the ciphertext, the row's id as
-- associated data); the key is never in the database. A name is unique in its scope:
-- the server (no workspace), a workspace, or a repository of a workspace.
CREATE TABLE secrets (
    id            TEXT PRIMARY KEY,
    scope         TEXT NOT NULL,
    workspace_id  TEXT REFERENCES workspaces(id) ON DELETE CASCADE,
    repository_id TEXT REFERENCES repositories(id) ON DELETE CASCADE,
    name          TEXT NOT NULL,
    key_id        TEXT NOT NULL,
    sealed        TEXT NOT NULL,
    created_at    BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL
);
CREATE UNIQUE INDEX secrets_scope_name
    ON secrets(scope, COALESCE(workspace_id, ''), COALESCE(repository_id, ''), name);

-- The one-time imports done (each needs the key, so SQL cannot do them): 'profile_env', the
-- values of agent profiles' environment variables; 'forge_tokens', the server environment's
-- forge token variables. A start runs those not listed and lists each in the transaction
-- that moves its values.
CREATE TABLE secret_imports (
    kind TEXT PRIMARY KEY
);

-- The secrets an executor's host may receive (a JSON list of names): a process started on
-- an SSH or container executor gets only these, and a start needing another is refused.
ALTER TABLE executors ADD COLUMN allowed_secrets TEXT NOT NULL DEFAULT '[]';

-- The secrets a repository's setup, cleanup and dev scripts get (a JSON list of names).
ALTER TABLE repositories ADD COLUMN script_secrets TEXT NOT NULL DEFAULT '[]';

-- The server secret a webhook channel signs with, by name (instead of its own `secret`).
ALTER TABLE notification_channels ADD COLUMN secret_name TEXT;
