-- SQLite's 0027_readopt.sql (issue 20, re-adopt): the bytes past a runner position already
-- committed (output stored while a permission request waited), and the hashes of MCP
-- session tokens with their session and epoch (never the token).
ALTER TABLE session_runtime ADD COLUMN runner_ahead BIGINT NOT NULL DEFAULT 0;

CREATE TABLE mcp_tokens (
    token_hash  TEXT PRIMARY KEY,
    session_id  TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    epoch       BIGINT NOT NULL,
    created_at  BIGINT NOT NULL
);

CREATE INDEX mcp_tokens_by_session ON mcp_tokens(session_id);
