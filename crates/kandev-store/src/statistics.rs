//! PostgreSQL's planner statistics of the searched tables, kept fresh by the server.
//!
//! A search's plan depends on how common its words are: a word in half of the messages is
//! answered by walking the newest rows (2 ms at a million messages), a rare one through the
//! GIN index. With no statistics, or statistics from when the table was small, the planner
//! takes every word for a rare one and reads every match of a common word: 420 ms at a
//! million messages (P6, right after its ingest). PostgreSQL's autovacuum analyzes a table
//! once a tenth of it changed, but looks only every minute (`autovacuum_naptime`), and a
//! database filled by `kandev db copy` or a burst of agents is searched before that. The
//! server therefore asks every few seconds ([`Store::refresh_statistics`]) and analyzes the
//! tables a tenth of which changed since their last analysis, at once. SQLite's FTS5 has no
//! such choice to make.

use crate::db::Pool;
use crate::{Result, Store};

/// The searched tables (a fixed list: their names go into `ANALYZE` as they are) with at
/// least 1,000 rows written since their last analysis and at least a tenth of their rows,
/// as PostgreSQL's own counters say.
const STALE_TABLES: &str = "SELECT relname::TEXT FROM pg_stat_user_tables \
     WHERE schemaname = current_schema() AND relname IN ('messages', 'tasks') \
     AND n_mod_since_analyze >= 1000 AND n_mod_since_analyze * 10 >= n_live_tup \
     ORDER BY relname";

impl Store {
    /// On PostgreSQL, analyzes each searched table whose planner statistics are out of date
    /// (see the module's note) and returns the tables it analyzed; nothing on SQLite. An
    /// analysis that waits over 2 s for a lock (autovacuum analyzing the same table) gives
    /// up: that one brings the statistics up to date anyway.
    pub async fn refresh_statistics(&self) -> Result<Vec<String>> {
        let Pool::Postgres(read) = &self.read else { return Ok(vec![]) };
        let stale: Vec<String> = sqlx::query_scalar(STALE_TABLES).fetch_all(read).await?;
        let mut analyzed = vec![];
        for table in stale {
            let statement = match table.as_str() {
                "messages" => "ANALYZE messages",
                "tasks" => "ANALYZE tasks",
                _ => continue,
            };
            let mut tx = read.begin().await?;
            sqlx::query("SET LOCAL lock_timeout = '2s'").execute(&mut *tx).await?;
            sqlx::query(statement).execute(&mut *tx).await?;
            tx.commit().await?;
            analyzed.push(table);
        }
        Ok(analyzed)
    }
}
