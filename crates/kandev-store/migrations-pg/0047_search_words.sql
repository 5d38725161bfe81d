-- Issue 53: the searchable words of tasks and messages are stored once, when a row is written
-- (a message's text changes only when its stream is folded), and indexed; ranking and the
-- rank window read the stored column instead of parsing each matching text again.
DROP INDEX tasks_search;
DROP INDEX messages_search;
ALTER TABLE tasks ADD COLUMN search_words tsvector
    GENERATED ALWAYS AS (kandev_tsv(title || ' ' || description)) STORED;
ALTER TABLE messages ADD COLUMN search_words tsvector
    GENERATED ALWAYS AS (kandev_tsv(content)) STORED;
-- Without GIN's pending list (`fastupdate = off`): with it, every search scanned the list of
-- words not yet merged into the index, up to 4 MB, until a vacuum merged it, and the merge
-- fell on whichever write or search came next (P6: searches of 500 ms right after ingest).
CREATE INDEX tasks_search ON tasks USING GIN (search_words) WITH (fastupdate = off);
CREATE INDEX messages_search ON messages USING GIN (search_words) WITH (fastupdate = off);
