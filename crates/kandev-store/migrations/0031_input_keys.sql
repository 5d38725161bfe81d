-- Issue 38 item 12: what a server that restarted needs to send again the input an earlier
-- server committed and the runner never took (the runner lists the keys it took).
-- `turns.prompt_message_id`: the user's message the turn's prompt carries (the prompt is
-- built again from it); `turns.cancel_requested`: the user cancelled the turn (1), so the
-- re-adopted turn is cancelling and `session/cancel` goes out if it did not; on
-- `permission_answers`, the turn of the request and the JSON-RPC answer the agent waits for
-- (`{"id": …, "result": …}`).
ALTER TABLE turns ADD COLUMN prompt_message_id TEXT;
ALTER TABLE turns ADD COLUMN cancel_requested INTEGER NOT NULL DEFAULT 0;
ALTER TABLE permission_answers ADD COLUMN turn_id TEXT;
ALTER TABLE permission_answers ADD COLUMN reply TEXT;
