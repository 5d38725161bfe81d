-- Issue 38, finding 9: the version of the Kandev that last opened and migrated this database
-- (its `CARGO_PKG_VERSION`), written at every open after the migrations ran. A Kandev that
-- finds migrations it does not know names this version in its refusal. One row.

CREATE TABLE kandev_version (
    id       INTEGER PRIMARY KEY CHECK (id = 1),
    version  TEXT NOT NULL
);
