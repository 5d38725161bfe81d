-- Issue 20 (lifecycle rule 42, re-adopt): an execution run by a runner (`serve --runner
-- local`) is known there by `runner_exec`; `runner_seq` is the number of the last runner item
-- (output chunk or exit) whose effects are committed, written in the same transaction as
-- those effects. A restarted server acknowledges up to it, so the runner's replay brings every
-- later item exactly once. Both NULL for an agent that is the server's own child.
ALTER TABLE session_runtime ADD COLUMN runner_exec TEXT;
ALTER TABLE session_runtime ADD COLUMN runner_seq INTEGER;
