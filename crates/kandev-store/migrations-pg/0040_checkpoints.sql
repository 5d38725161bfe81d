-- SQLite's 0040_checkpoints.sql (issue 48): turn checkpoints, baselines, notices.
CREATE TABLE turn_checkpoints (
    turn_id TEXT NOT NULL REFERENCES turns(id) ON DELETE CASCADE,
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    repository_id TEXT,
    path TEXT NOT NULL,
    before_commit TEXT NOT NULL,
    after_commit TEXT,
    taken_at BIGINT NOT NULL,
    undone_at BIGINT,
    PRIMARY KEY (turn_id, path)
);
CREATE INDEX turn_checkpoints_by_session ON turn_checkpoints(session_id, taken_at);
CREATE TABLE checkpoint_baselines (
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    path TEXT NOT NULL,
    commit_id TEXT NOT NULL,
    PRIMARY KEY (session_id, path)
);
CREATE TABLE checkpoint_notices (
    session_id TEXT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
    text TEXT NOT NULL
);
