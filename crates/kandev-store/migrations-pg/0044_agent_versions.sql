-- Issue 51: the version of its kind's agent, installed by Kandev under
-- `$KANDEV_HOME/agents`, that a profile runs; NULL runs the command found on PATH.
ALTER TABLE agent_profiles ADD COLUMN agent_version TEXT;
