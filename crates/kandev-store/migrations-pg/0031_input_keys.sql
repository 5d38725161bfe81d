-- SQLite's 0031_input_keys.sql (issue 38 item 12): a turn's prompt message and whether the
-- user cancelled it; a permission answer's turn and the JSON-RPC answer the agent waits for.
ALTER TABLE turns ADD COLUMN prompt_message_id TEXT;
ALTER TABLE turns ADD COLUMN cancel_requested BIGINT NOT NULL DEFAULT 0;
ALTER TABLE permission_answers ADD COLUMN turn_id TEXT;
ALTER TABLE permission_answers ADD COLUMN reply TEXT;
