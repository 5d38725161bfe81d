-- Issue 38 item 8: how many agents in a row led to a task. 0 for a task a person created (and
-- every task from before); a task an agent creates over MCP gets its own task's depth + 1.
-- An agent may start agents only on tasks up to a depth limit (kandev_engine::mcp).
ALTER TABLE tasks ADD COLUMN agent_depth INTEGER NOT NULL DEFAULT 0;
