-- Issue 49: teams. `users.owner` marks the server's owner (passes every role check, manages
-- users); `workspace_members` gives a user a role in a workspace (viewer, member, admin);
-- `audit_log` records who did each write action. `sessions.started_by` names the user who
-- started a session (NULL: a workflow trigger, a schedule or intake), whose rights its agent
-- acts with at most.
--
-- Existing users keep what they could do: each becomes an admin of every workspace, and the
-- oldest becomes the owner.
ALTER TABLE users ADD COLUMN owner BIGINT NOT NULL DEFAULT 0;
UPDATE users SET owner = 1
    WHERE id = (SELECT id FROM users ORDER BY created_at, id LIMIT 1);

CREATE TABLE workspace_members (
    workspace_id TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    user_id      TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    role         TEXT NOT NULL,
    added_at     BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, user_id)
);
CREATE INDEX workspace_members_user ON workspace_members(user_id);
INSERT INTO workspace_members (workspace_id, user_id, role, added_at)
    SELECT w.id, u.id, 'admin', u.created_at FROM workspaces w CROSS JOIN users u;

CREATE TABLE audit_log (
    id           TEXT PRIMARY KEY,
    at           BIGINT NOT NULL,
    by_name      TEXT NOT NULL,
    action       TEXT NOT NULL,
    workspace_id TEXT,
    target       TEXT
);
CREATE INDEX audit_log_at ON audit_log(at);
CREATE INDEX audit_log_workspace ON audit_log(workspace_id, at);

ALTER TABLE sessions ADD COLUMN started_by TEXT;
