-- Issue 20 (lifecycle rule 42, re-adopt). `runner_ahead`: bytes of the agent's output past
-- the recorded runner position whose effects are committed already. A permission request
-- still waiting for an answer holds the position before it while the agent's later output
-- is stored; after a restart that output is replayed with the request (asked again) and is
-- not stored a second time. `mcp_tokens`: the SHA-256 (hex) of every MCP session token
-- minted, with its session and epoch, so a re-adopted agent's token is still accepted after
-- a restart; the token itself is never stored.
ALTER TABLE session_runtime ADD COLUMN runner_ahead INTEGER NOT NULL DEFAULT 0;

CREATE TABLE mcp_tokens (
    token_hash  TEXT PRIMARY KEY,
    session_id  TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    epoch       INTEGER NOT NULL,
    created_at  INTEGER NOT NULL
);

CREATE INDEX mcp_tokens_by_session ON mcp_tokens(session_id);
