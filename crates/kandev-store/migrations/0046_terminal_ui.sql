-- Issue 52: a session that runs its agent's own terminal UI in a PTY instead of speaking ACP
-- (`terminal_ui`: the agent kind whose terminal UI it runs; NULL for an ACP session), and what
-- its screen last showed (`working`, `waiting`, `permission`, `unknown`).
ALTER TABLE sessions ADD COLUMN terminal_ui TEXT;
ALTER TABLE sessions ADD COLUMN tui_screen TEXT;
