-- Issue 15: linear-cost streaming and full-text search.
--
-- Streamed deltas are appended as rows of `message_chunks` instead of rewriting
-- `messages.content` (`content = content || ?` rewrites the whole row: a message of n chunks
-- cost O(n²) bytes). A message reads as `content` followed by its chunks in `id` order; when
-- its stream ends the chunks are folded into `content` once and deleted. `end_len` is the
-- message's length in bytes after the chunk, so an append never reads the text back.
CREATE TABLE message_chunks (
    id          INTEGER PRIMARY KEY,
    message_id  TEXT NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    session_id  TEXT NOT NULL,
    delta       TEXT NOT NULL,
    end_len     INTEGER NOT NULL
);
CREATE INDEX message_chunks_by_message ON message_chunks(message_id, id);
CREATE INDEX message_chunks_by_session ON message_chunks(session_id);

-- Full-text search (FTS5, external content: the text lives once, in `tasks` and `messages`).
-- Triggers keep the indexes in the same transaction as the rows. The external content is
-- addressed by rowid; `tasks` and `messages` have implicit rowids, which only `VACUUM` may
-- renumber: after a VACUUM run `INSERT INTO tasks_fts(tasks_fts) VALUES ('rebuild')` (and
-- the same for messages_fts). Kandev itself never vacuums.
CREATE VIRTUAL TABLE tasks_fts USING fts5(
    title, description, content = 'tasks', content_rowid = 'rowid', tokenize = 'unicode61'
);
CREATE TRIGGER tasks_fts_insert AFTER INSERT ON tasks BEGIN
    INSERT INTO tasks_fts (rowid, title, description)
    VALUES (new.rowid, new.title, new.description);
END;
CREATE TRIGGER tasks_fts_delete AFTER DELETE ON tasks BEGIN
    INSERT INTO tasks_fts (tasks_fts, rowid, title, description)
    VALUES ('delete', old.rowid, old.title, old.description);
END;
CREATE TRIGGER tasks_fts_update AFTER UPDATE OF title, description ON tasks BEGIN
    INSERT INTO tasks_fts (tasks_fts, rowid, title, description)
    VALUES ('delete', old.rowid, old.title, old.description);
    INSERT INTO tasks_fts (rowid, title, description)
    VALUES (new.rowid, new.title, new.description);
END;

CREATE VIRTUAL TABLE messages_fts USING fts5(
    content, content = 'messages', content_rowid = 'rowid', tokenize = 'unicode61'
);
CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts (rowid, content) VALUES (new.rowid, new.content);
END;
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, content) VALUES ('delete', old.rowid, old.content);
END;
CREATE TRIGGER messages_fts_update AFTER UPDATE OF content ON messages
    WHEN old.content IS NOT new.content BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, content) VALUES ('delete', old.rowid, old.content);
    INSERT INTO messages_fts (rowid, content) VALUES (new.rowid, new.content);
END;

INSERT INTO tasks_fts (tasks_fts) VALUES ('rebuild');
INSERT INTO messages_fts (messages_fts) VALUES ('rebuild');
