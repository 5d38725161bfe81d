//! `kandev db copy`: every row of one database into another, empty one (SQLite to
//! PostgreSQL, or back), in one write transaction, then a count of each table on both sides.
//! The source is read in one read transaction ([`Snapshot`]), so a server may go on writing
//! to it: the copy is the database as it was at one moment (what `kandev backup` relies on).
//!
//! Tables go parents first ([`TABLES`]), so foreign keys hold at each insert; a task's parent
//! is set after all tasks are in (a task may point at a newer one). Columns are read as the
//! class both schemas give them (integer or text; see the schema-equivalence test), so the
//! copy needs no per-table code. Event seqs are kept, and the destination's highest seq is
//! raised to the source's (which survives pruning). SQLite's FTS tables and PostgreSQL's
//! search index fill themselves from the rows.

use crate::db::{IntoDb, Pool};
use crate::sql::{Arg, Dialect, QueryBuilder};
use crate::{Location, Result, Store, StoreError};

/// Every table, parents before children.
const TABLES: &[&str] = &[
    "workspaces",
    "agent_profiles",
    "repositories",
    "executors",
    "repository_executors",
    "workflows",
    "workflow_steps",
    "tasks",
    "task_repositories",
    "task_step_history",
    "task_blockers",
    "task_base_branches",
    "task_pull_requests",
    "pr_checks",
    "pr_events",
    "task_git_summaries",
    "review_comments",
    "file_views",
    "sessions",
    "session_runtime",
    "mcp_tokens",
    "session_resets",
    "turns",
    "turn_checkpoints",
    "checkpoint_baselines",
    "checkpoint_notices",
    "messages",
    "message_chunks",
    "queued_prompts",
    "permission_answers",
    "user_questions",
    "worktrees",
    "events",
    "notifications",
    "notification_channels",
    "notification_deliveries",
    "notification_attempts",
    "saved_prompts",
    "child_processes",
    "runner_terminals",
    "intake_sources",
    "task_origins",
    "webhook_deliveries",
    "schedules",
    "schedule_runs",
    "users",
    "user_sessions",
    "user_tokens",
    "workspace_members",
    "audit_log",
    "secrets",
    "secret_imports",
];

/// PostgreSQL's identity columns that SQLite numbers itself (`migrations-pg`).
const IDENTITIES: &[(&str, &str)] = &[
    ("task_step_history", "id"),
    ("permission_answers", "id"),
    ("notification_deliveries", "id"),
    ("message_chunks", "id"),
];

/// Rows per insert statement.
const BATCH: usize = 100;

/// How many rows of one table were copied (and counted again on both sides).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopiedTable {
    pub table: String,
    pub rows: u64,
}

/// A column and whether it holds integers (else text).
struct Column {
    name: String,
    integer: bool,
}

/// Copies every row of `from` into `to`, which must have no rows yet. Both are migrated
/// first. Returns the row count of each table, verified equal on both sides after commit.
pub async fn copy_database(from: Location, to: Location) -> Result<Vec<CopiedTable>> {
    // Beside a server that may run on it (no server lock taken): read in one snapshot.
    let source = Store::open_beside_server(from).await?;
    let target = Store::open(to).await?;
    let outcome = copy(&source, &target).await;
    source.close().await;
    // A SQLite copy is one file, whole without its write-ahead log (a backup archives it).
    let closed = target.close_as_one_file().await;
    let copied = outcome?;
    closed?;
    Ok(copied)
}

async fn copy(source: &Store, target: &Store) -> Result<Vec<CopiedTable>> {
    let mut snapshot = Snapshot::begin(&source.read).await?;
    let tables = columns(&mut snapshot).await?;
    if let Some(unknown) = tables.iter().map(|(t, _)| t).find(|t| !TABLES.contains(&t.as_str())) {
        return Err(StoreError::Unsupported(format!(
            "the table {unknown} is not known to db copy; update kandev"
        )));
    }
    for table in TABLES {
        if count(&target.read, table).await? > 0 {
            return Err(StoreError::Conflict(format!(
                "the destination database already has data (table {table}); copy into an empty database"
            )));
        }
    }
    let mut tx = target.begin_write().await?;
    let mut copied = vec![];
    for table in TABLES {
        let Some((_, columns)) = tables.iter().find(|(t, _)| t == table) else { continue };
        let rows = read_rows(&mut snapshot, table, columns).await?;
        copied.push(CopiedTable { table: (*table).to_owned(), rows: rows.len() as u64 });
        let parent = columns.iter().position(|c| *table == "tasks" && c.name == "parent_id");
        let mut parents = vec![];
        for chunk in rows.chunks(BATCH) {
            let mut q = QueryBuilder::new(target.dialect(), "INSERT INTO ");
            q.push(table).push(" (").push(&column_list(columns)).push(") VALUES ");
            for (n, values) in chunk.iter().enumerate() {
                q.push(if n == 0 { "(" } else { ", (" });
                for (i, value) in values.iter().enumerate() {
                    if i > 0 {
                        q.push(", ");
                    }
                    if Some(i) == parent {
                        // Set below, once every task exists.
                        parents.push((values[0].clone(), value.clone()));
                        q.push_bind(Arg::Text(None));
                    } else {
                        q.push_bind(value.clone());
                    }
                }
                q.push(")");
            }
            q.build().execute(tx.conn()).await?;
        }
        for (id, parent) in parents {
            if matches!(parent, Arg::Text(None)) {
                continue;
            }
            crate::sql::query("UPDATE tasks SET parent_id = ?1 WHERE id = ?2")
                .bind(parent)
                .bind(id)
                .execute(tx.conn())
                .await?;
        }
    }
    if target.dialect() == Dialect::Postgres {
        // Identity columns were given explicit values: their sequences continue after them.
        for (table, column) in IDENTITIES {
            let mut q =
                QueryBuilder::new(Dialect::Postgres, "SELECT setval(pg_get_serial_sequence(");
            q.push_bind(*table).push(", ").push_bind(*column).push("), (SELECT COALESCE(MAX(");
            q.push(column).push("), 0) + 1 FROM ").push(table).push("), false)");
            q.build().execute(tx.conn()).await?;
        }
    }
    let highest = snapshot.highest_seq().await?;
    snapshot.end().await;
    tx.raise_highest_seq(highest).await?;
    // Verified before the commit, so a copy that does not match leaves nothing written: every
    // row read is in the copy.
    for CopiedTable { table, rows } in &copied {
        let to = count(tx.conn(), table).await?;
        if to != *rows {
            return Err(StoreError::Corrupt(format!(
                "table {table} has {rows} rows in the source but {to} in the copy"
            )));
        }
    }
    tx.commit().await?;
    Ok(copied)
}

async fn count<'c>(db: impl IntoDb<'c>, table: &str) -> Result<u64> {
    let mut db = db.into_db();
    let mut q = QueryBuilder::new(db.dialect(), "SELECT COUNT(*) FROM ");
    q.push(table);
    let n: i64 = q.build_query_scalar().fetch_one(&mut db).await?;
    Ok(u64::try_from(n).unwrap_or(0))
}

/// `columns`' names, quoted (a column may be named with a word PostgreSQL reserves:
/// `executors.user`) and separated by commas.
fn column_list(columns: &[Column]) -> String {
    let quoted = columns.iter().map(|c| format!("\"{}\"", c.name.replace('"', "\"\"")));
    quoted.collect::<Vec<_>>().join(", ")
}

/// Appends `SELECT` of `columns` of every row of `table` in `order` to `q` (no values: the
/// statement is made directly for the engine whose rows are read by position).
fn push_select_all<DB: sqlx::Database>(
    q: &mut sqlx::QueryBuilder<'_, DB>,
    table: &str,
    columns: &[Column],
    order: &str,
) {
    q.push("SELECT ").push(column_list(columns)).push(" FROM ").push(table).push(order);
}

/// One read transaction on the source: every table is read as it was at one moment, on
/// PostgreSQL (`REPEATABLE READ`) and on SQLite (a read transaction in WAL mode), while a
/// server may go on writing.
enum Snapshot {
    Sqlite(sqlx::Transaction<'static, sqlx::Sqlite>),
    Postgres(sqlx::Transaction<'static, sqlx::Postgres>),
}

impl Snapshot {
    async fn begin(pool: &Pool) -> Result<Snapshot> {
        Ok(match pool {
            Pool::Sqlite(pool) => Snapshot::Sqlite(pool.begin().await?),
            Pool::Postgres(pool) => {
                let mut tx = pool.begin().await?;
                sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                    .execute(&mut *tx)
                    .await?;
                Snapshot::Postgres(tx)
            }
        })
    }

    fn dialect(&self) -> Dialect {
        match self {
            Snapshot::Sqlite(_) => Dialect::Sqlite,
            Snapshot::Postgres(_) => Dialect::Postgres,
        }
    }

    /// The highest event seq ever given (it survives pruning), as of the snapshot.
    async fn highest_seq(&mut self) -> Result<i64> {
        let sql = crate::events::highest_seq_sql(self.dialect());
        let seq: Option<i64> = match self {
            Snapshot::Sqlite(tx) => sqlx::query_scalar(sql).fetch_optional(&mut **tx).await?,
            Snapshot::Postgres(tx) => sqlx::query_scalar(sql).fetch_optional(&mut **tx).await?,
        };
        Ok(seq.unwrap_or(0))
    }

    /// Ends the read transaction (it wrote nothing).
    async fn end(self) {
        let _ = match self {
            Snapshot::Sqlite(tx) => tx.rollback().await,
            Snapshot::Postgres(tx) => tx.rollback().await,
        };
    }
}

/// The tables of a store and their columns (without engine-specific ones, and without
/// `kandev_version`: each database records the Kandev that opened it, the copy's too).
async fn columns(snapshot: &mut Snapshot) -> Result<Vec<(String, Vec<Column>)>> {
    let sql = match snapshot.dialect() {
        Dialect::Sqlite => {
            "SELECT m.name, c.name, c.type FROM sqlite_master m, pragma_table_info(m.name) c \
             WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%' AND m.name NOT LIKE '_sqlx%' \
             AND m.name NOT LIKE 'tasks_fts%' AND m.name NOT LIKE 'messages_fts%' \
             AND m.name <> 'kandev_version' ORDER BY m.name, c.cid"
        }
        Dialect::Postgres => {
            "SELECT CAST(table_name AS TEXT), CAST(column_name AS TEXT), CAST(data_type AS TEXT) \
             FROM information_schema.columns WHERE table_schema = 'public' \
             AND table_name NOT LIKE '\\_sqlx%' AND table_name <> 'event_seq' \
             AND table_name <> 'kandev_version' AND column_name <> 'rowid' \
             AND is_generated = 'NEVER' ORDER BY table_name, ordinal_position"
        }
    };
    let rows: Vec<(String, String, String)> = match snapshot {
        Snapshot::Sqlite(tx) => sqlx::query_as(sql).fetch_all(&mut **tx).await?,
        Snapshot::Postgres(tx) => sqlx::query_as(sql).fetch_all(&mut **tx).await?,
    };
    let mut tables: Vec<(String, Vec<Column>)> = vec![];
    for (table, name, declared) in rows {
        let column = Column { name, integer: declared.to_ascii_lowercase().contains("int") };
        match tables.last_mut() {
            Some((last, columns)) if *last == table => columns.push(column),
            _ => tables.push((table, vec![column])),
        }
    }
    Ok(tables)
}

/// Every row of `table`, in insertion order where the engine keeps one.
async fn read_rows(
    snapshot: &mut Snapshot,
    table: &str,
    columns: &[Column],
) -> Result<Vec<Vec<Arg>>> {
    let order = match snapshot.dialect() {
        Dialect::Sqlite => " ORDER BY rowid",
        Dialect::Postgres if ["tasks", "turns", "messages"].contains(&table) => " ORDER BY rowid",
        Dialect::Postgres => "",
    };
    macro_rules! decode {
        ($rows:expr) => {{
            use sqlx::Row as _;
            let rows = $rows;
            let mut out = Vec::with_capacity(rows.len());
            for row in rows {
                let mut values = Vec::with_capacity(columns.len());
                for (i, column) in columns.iter().enumerate() {
                    values.push(if column.integer {
                        Arg::Int(row.try_get::<Option<i64>, _>(i)?)
                    } else {
                        Arg::Text(row.try_get::<Option<String>, _>(i)?)
                    });
                }
                out.push(values);
            }
            out
        }};
    }
    Ok(match snapshot {
        Snapshot::Sqlite(tx) => {
            let mut q = sqlx::QueryBuilder::new("");
            push_select_all(&mut q, table, columns, order);
            decode!(q.build().fetch_all(&mut **tx).await?)
        }
        Snapshot::Postgres(tx) => {
            let mut q = sqlx::QueryBuilder::new("");
            push_select_all(&mut q, table, columns, order);
            decode!(q.build().fetch_all(&mut **tx).await?)
        }
    })
}
