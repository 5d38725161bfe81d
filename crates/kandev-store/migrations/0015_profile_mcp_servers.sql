-- Issue 17: extra MCP servers of an agent profile, handed to its agent next to Kandev's own:
-- a JSON array of {name, command, args, env} (stdio) or {name, transport, url, headers}.
-- Env and header values are secrets like the profile's env: never shown by the API.

ALTER TABLE agent_profiles ADD COLUMN mcp_servers TEXT NOT NULL DEFAULT '[]';
