-- Issue 20 (lifecycle rule 42, re-adopt). A runner's output items are chunks of the agent's
-- stdout, not lines: `runner_skip` is how many bytes of item `runner_seq + 1` are handled
-- too (a committed position is "every item up to runner_seq, and runner_skip bytes of the
-- next"), so a restarted server drops exactly those bytes of the replay. `acp_run` counts the
-- servers that joined the execution's conversation: each numbers its ACP requests from
-- `acp_run << 32` on, never reusing an id an earlier server used. `turns.prompt_id` is the
-- JSON-RPC id the turn's `session/prompt` went out with: a server that joins awaits its answer.
ALTER TABLE session_runtime ADD COLUMN runner_skip INTEGER NOT NULL DEFAULT 0;
ALTER TABLE session_runtime ADD COLUMN acp_run INTEGER NOT NULL DEFAULT 0;
ALTER TABLE turns ADD COLUMN prompt_id INTEGER;
