-- Permission requests of a session are found through their own partial index. Without it,
-- every lookup (the pending ones at startup and after each answer, one by request id)
-- walked all of the session's messages: on a database of 1M messages startup took 2-8 s
-- instead of 30 ms (issue 15, P4).
CREATE INDEX messages_permission_requests ON messages(session_id, seq)
    WHERE kind = 'permission_request';
