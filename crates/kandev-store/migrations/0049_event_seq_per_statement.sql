-- Issue 53: on PostgreSQL a batch of events with their seqs given raises the highest seq
-- once per statement instead of once per row (migrations-pg/0049). SQLite's AUTOINCREMENT
-- already records the highest seq once: nothing to do, the number is kept so both engines
-- are versioned together.
SELECT 1;
