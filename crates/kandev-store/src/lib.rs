//! Kandev's persistence: migrations, row types and the Store API over SQLite.
