-- Issue 53: PostgreSQL stores the searchable words of tasks and messages in a `search_words`
-- column (migrations-pg/0047). SQLite's FTS5 tables (0009) already hold them: nothing to do,
-- the number is kept so both engines are versioned together.
SELECT 1;
