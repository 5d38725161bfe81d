-- Lifecycle rule 45: a context reset, once accepted, is stored before any agent is contacted
-- and deleted when it settles, so a restart in the middle completes it (or records it as
-- failed) instead of forgetting it.

CREATE TABLE session_resets (
    session_id  TEXT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
    -- The step whose on_enter asked for it; NULL for the user's reset button.
    step_id     TEXT,
    -- The session's epoch when the reset was accepted.
    epoch       INTEGER NOT NULL,
    -- Why the task entered the step (created, manual, on_turn_start, on_turn_complete), or
    -- `user` for the reset button.
    cause       TEXT NOT NULL,
    created_at  INTEGER NOT NULL
);
