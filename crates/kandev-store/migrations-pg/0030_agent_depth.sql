-- SQLite's 0030_agent_depth.sql (issue 38 item 8): how many agents in a row led to a task (0
-- for a person's task, the creating agent's task's depth + 1 for an agent's).
ALTER TABLE tasks ADD COLUMN agent_depth BIGINT NOT NULL DEFAULT 0;
