-- SQLite's 0025_runner_join.sql (issue 20, re-adopt): a runner position's bytes of the next
-- item, the count of servers that joined the execution's conversation, and the JSON-RPC id
-- of a turn's `session/prompt`.
ALTER TABLE session_runtime ADD COLUMN runner_skip BIGINT NOT NULL DEFAULT 0;
ALTER TABLE session_runtime ADD COLUMN acp_run BIGINT NOT NULL DEFAULT 0;
ALTER TABLE turns ADD COLUMN prompt_id BIGINT;
