-- SQLite's 0029_kandev_version.sql (issue 38, finding 9): the version of the Kandev that last
-- opened and migrated this database, written at every open after the migrations ran. One row.

CREATE TABLE kandev_version (
    id       BIGINT PRIMARY KEY CHECK (id = 1),
    version  TEXT NOT NULL
);
