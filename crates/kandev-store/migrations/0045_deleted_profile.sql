-- Issue 52: the name of a session's agent profile when that profile is deleted (its
-- `agent_profile_id` becomes NULL): the session is then refused a start, saying to move it to
-- another agent (`session.rebind`), instead of running the built-in mock.
ALTER TABLE sessions ADD COLUMN deleted_profile TEXT;
