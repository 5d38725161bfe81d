//! Write transactions: serialized, and publishing their events only after commit.
//!
//! A full disk must cost one write, never the store. SQLite rolls a transaction back by
//! itself after some errors (`SQLITE_FULL`, `SQLITE_IOERR`, `SQLITE_NOMEM`, `SQLITE_BUSY`);
//! sqlx's transaction bookkeeping does not notice: its `ROLLBACK` then fails ("no transaction
//! is active"), its depth counter stays at 1, and its next `begin` issues `SAVEPOINT` instead
//! of `BEGIN`. From there one more failed statement (one SQLite undoes alone, keeping the
//! transaction) leaves the connection inside a transaction that nothing ever commits: every
//! later "commit" only releases a savepoint, answers succeed, readers see nothing and a
//! restart loses it all (issue 12, finding 1). So:
//!
//! - a transaction starts with `BEGIN IMMEDIATE`, which sqlx refuses when it believes a
//!   transaction is open and SQLite refuses when one really is; either refusal means the
//!   connection was left in a state we cannot trust, and it is replaced (closing a SQLite
//!   connection rolls back whatever it held);
//! - every statement of a transaction goes through [`TxConn`], which notes errors after which
//!   SQLite may have rolled back: the transaction then refuses further statements and its
//!   commit, so no statement runs outside it by accident;
//! - a full disk becomes [`StoreError::DiskFull`](crate::StoreError::DiskFull) naming the
//!   database file, and marks the store's writes as failing (for the health check) until a
//!   write commits again.

use std::borrow::Cow;
use std::error::Error as StdError;
use std::sync::Arc;

use kandev_domain::Timestamp;
use sqlx::error::{DatabaseError, ErrorKind};
use sqlx::{Postgres, Sqlite, Transaction};
use tokio::sync::OwnedMutexGuard;

use crate::db::Pool;
use crate::sql::Dialect;
use crate::{Event, Result, Store, StoreError};

/// SQLite's primary result codes after which the transaction may have been rolled back
/// (<https://sqlite.org/lang_transaction.html>, "Response To Errors Within A Transaction").
const SQLITE_NOMEM: i32 = 7;
const SQLITE_BUSY: i32 = 5;
const SQLITE_IOERR: i32 = 10;
const SQLITE_FULL: i32 = 13;

/// An open write transaction. Dropping it without [`WriteTx::commit`] rolls back.
pub struct WriteTx {
    conn: TxConn,
    pending: Vec<Event>,
    store: Store,
    now: Timestamp,
    // Released in this order: the gate, then the lane (`Store::begin_write`).
    _gate: OwnedMutexGuard<()>,
    _lane: Option<OwnedMutexGuard<()>>,
}

impl WriteTx {
    pub(crate) async fn begin(store: &Store, lane: Option<OwnedMutexGuard<()>>) -> Result<WriteTx> {
        let gate = store.write_gate.clone().lock_owned().await;
        let tx = match &store.write {
            Pool::Sqlite(pool) => match pool.begin_with("BEGIN IMMEDIATE").await {
                Ok(tx) => TxKind::Sqlite(tx),
                Err(err) => {
                    tracing::warn!(error = %err, "the write connection is not usable; replacing it");
                    store.replace_write_connection().await;
                    TxKind::Sqlite(
                        pool.begin_with("BEGIN IMMEDIATE")
                            .await
                            .map_err(|e| StoreError::from(store.observe(e)))?,
                    )
                }
            },
            // PostgreSQL ends a failed transaction itself and the pool resets a connection
            // returned inside one; the advisory lock (see `lib.rs`) keeps other servers out.
            Pool::Postgres(pool) => TxKind::Postgres(
                pool.begin().await.map_err(|e| StoreError::from(store.observe(e)))?,
            ),
        };
        Ok(WriteTx {
            conn: TxConn {
                tx,
                store: store.clone(),
                broken: None,
                pg_failed: false,
                cards_may_change: false,
            },
            pending: vec![],
            store: store.clone(),
            now: store.clock.now(),
            _gate: gate,
            _lane: lane,
        })
    }

    /// The connection, for queries inside this transaction.
    pub(crate) fn conn(&mut self) -> &mut TxConn {
        &mut self.conn
    }

    /// The time this transaction started; every row it writes carries it.
    pub fn now(&self) -> Timestamp {
        self.now
    }

    pub(crate) fn new_id(&self) -> String {
        self.store.ids.next_id()
    }

    /// Marks a point this transaction can return to ([`WriteTx::rollback_to`]): a group
    /// commit undoes one member's failed write and keeps the others'.
    pub async fn savepoint(&mut self) -> Result<Savepoint> {
        crate::sql::query("SAVEPOINT member").execute(self.conn()).await?;
        Ok(Savepoint { pending: self.pending.len() })
    }

    /// Keeps what was written since `savepoint`.
    pub async fn release(&mut self, savepoint: Savepoint) -> Result<()> {
        let _ = savepoint;
        crate::sql::query("RELEASE member").execute(self.conn()).await?;
        Ok(())
    }

    /// Undoes what was written since `savepoint`, and forgets the events it emitted.
    pub async fn rollback_to(&mut self, savepoint: Savepoint) -> Result<()> {
        crate::sql::query("ROLLBACK TO member").execute(self.conn()).await?;
        // On PostgreSQL this is what recovers a transaction after a failed statement.
        self.conn.pg_failed = false;
        crate::sql::query("RELEASE member").execute(self.conn()).await?;
        self.pending.truncate(savepoint.pending);
        Ok(())
    }

    /// Publishes `event` once this transaction commits (`events.rs` writes its row).
    pub(crate) fn publish_on_commit(&mut self, event: Event) {
        self.pending.push(event);
    }

    /// Commits, then publishes the emitted events in order. Returns them. Refuses (and rolls
    /// back) a transaction in which SQLite reported an error that may have ended it.
    pub async fn commit(self) -> Result<Vec<Arc<Event>>> {
        let WriteTx { conn, pending, store, _gate, .. } = self;
        let TxConn { tx, broken, pg_failed, cards_may_change, .. } = conn;
        if pg_failed {
            // PostgreSQL answers COMMIT of a failed transaction with a silent rollback.
            let _ = tx.rollback().await;
            return Err(StoreError::Database(sqlx::Error::Database(Box::new(Broken {
                code: 0,
                message: "an earlier statement failed and PostgreSQL rolled this transaction back",
            }))));
        }
        if let Some(code) = broken {
            // Ignored: SQLite has usually rolled back already, and dropping rolls back anyway.
            let _ = tx.rollback().await;
            return Err(StoreError::from(store.observe(broken_error(code))));
        }
        let committed = tx.commit().await;
        if cards_may_change {
            // Before the events go out (a client told of a change must not be answered from
            // before it), and also after a failed commit: it may have committed anyway.
            store.cards_version.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        }
        committed.map_err(|e| StoreError::from(store.observe(e)))?;
        store.commits.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        store.write_health.succeeded();
        // Shared, not copied: every subscriber (the WebSocket fan-out, the deliveries) gets
        // the same event; before, each got its own copy of the payload's JSON tree.
        let pending: Vec<Arc<Event>> = pending.into_iter().map(Arc::new).collect();
        for event in &pending {
            // No receiver is not an error: nobody is listening right now.
            let _ = store.events.send(Arc::clone(event));
        }
        Ok(pending)
    }
}

/// A point inside a [`WriteTx`] to release or roll back to (not nested: one at a time).
#[derive(Debug)]
#[must_use = "release or roll back a savepoint"]
pub struct Savepoint {
    pending: usize,
}

/// The open transaction on one of the two engines.
pub(crate) enum TxKind {
    Sqlite(Transaction<'static, Sqlite>),
    Postgres(Transaction<'static, Postgres>),
}

impl TxKind {
    async fn commit(self) -> std::result::Result<(), sqlx::Error> {
        match self {
            TxKind::Sqlite(tx) => tx.commit().await,
            TxKind::Postgres(tx) => tx.commit().await,
        }
    }

    async fn rollback(self) -> std::result::Result<(), sqlx::Error> {
        match self {
            TxKind::Sqlite(tx) => tx.rollback().await,
            TxKind::Postgres(tx) => tx.rollback().await,
        }
    }
}

/// The connection of a [`WriteTx`] as its statements see it: `sql.rs` runs each statement
/// on the transaction and watches its outcome (see the module docs).
pub(crate) struct TxConn {
    tx: TxKind,
    store: Store,
    /// The primary SQLite code of an error after which SQLite may have rolled back.
    broken: Option<i32>,
    /// A statement failed on PostgreSQL, which then refuses everything but a rollback (to a
    /// savepoint): a commit now would silently roll back, so it is refused instead.
    pg_failed: bool,
    /// Whether a statement ran that is not known to leave the board cards alone
    /// ([`Store::cards_version`]).
    cards_may_change: bool,
}

impl std::fmt::Debug for TxConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TxConn").field("broken", &self.broken).finish_non_exhaustive()
    }
}

impl TxConn {
    pub(crate) fn dialect(&self) -> Dialect {
        match self.tx {
            TxKind::Sqlite(_) => Dialect::Sqlite,
            TxKind::Postgres(_) => Dialect::Postgres,
        }
    }

    pub(crate) fn kind(&mut self) -> &mut TxKind {
        &mut self.tx
    }

    /// Notes a statement about to run: unless it is known to leave the board cards alone,
    /// the commit will bump [`Store::cards_version`].
    pub(crate) fn note(&mut self, sql: &str) {
        if !self.cards_may_change && !leaves_cards_alone(sql) {
            self.cards_may_change = true;
        }
    }

    /// Refuses a statement once the transaction is broken.
    pub(crate) fn check(&self) -> std::result::Result<(), sqlx::Error> {
        match self.broken {
            Some(code) => Err(self.store.observe(broken_error(code))),
            None => Ok(()),
        }
    }

    /// Notes a statement's error and returns the error the caller should see.
    pub(crate) fn watch(&mut self, err: sqlx::Error) -> sqlx::Error {
        if matches!(self.tx, TxKind::Postgres(_)) && matches!(err, sqlx::Error::Database(_)) {
            self.pg_failed = true;
        }
        if let Some(code) = primary_code(&err).filter(|c| may_roll_back(*c)) {
            self.broken.get_or_insert(code);
        }
        self.store.observe(err)
    }
}

impl Store {
    /// Turns a full disk into [`DiskFull`] (naming the database) and records it for the
    /// health check; other errors pass unchanged.
    pub(crate) fn observe(&self, err: sqlx::Error) -> sqlx::Error {
        if !is_disk_full(&err) {
            return err;
        }
        let full = DiskFull { path: self.location.clone() };
        self.write_health.failed(full.to_string());
        sqlx::Error::Database(Box::new(full))
    }
}

/// Whether `sql` is known to change nothing a board card shows (`tasks`, `task_blockers`,
/// `task_repositories`, `task_git_summaries`, `workflow_steps`, nor anything whose triggers
/// or cascades reach them). A short list on purpose: anything else counts as a change.
///
/// - a single `SELECT` (no `;`): SQLite's functions have no side effects on tables;
/// - savepoints (`SAVEPOINT`, `RELEASE`, `ROLLBACK TO`);
/// - the streamed-message group on SQLite (`messages.rs`): it writes `messages`,
///   `message_chunks` and `events` only, and the only triggers on `messages` write
///   `messages_fts` (migration 0009). Its read of the heads and the next seq is `SELECT`s;
/// - a batch of the event log's pruning (`events.rs`): `events` has no trigger and nothing
///   references it.
///
/// While agents stream, that group is nearly every commit: listing it is what lets a board's
/// answer stay kept. On PostgreSQL the group's statements are not listed (they invalidate).
fn leaves_cards_alone(sql: &str) -> bool {
    let head = sql.trim_start();
    let starts = |word: &str| head.get(..word.len()).is_some_and(|h| h.eq_ignore_ascii_case(word));
    (starts("SELECT ") && !head.contains(';'))
        || starts("SAVEPOINT ")
        || starts("RELEASE ")
        || starts("ROLLBACK TO ")
        || sql == crate::messages::SQLITE_GROUP
        || sql == crate::messages::SQLITE_HEADS_AND_SEQ
        || sql == crate::events::PRUNE_SQL
}

/// The error a broken transaction answers with from then on.
fn broken_error(code: i32) -> sqlx::Error {
    if code == SQLITE_FULL {
        // A plain SQLite-like error: `Store::observe` names the file.
        return sqlx::Error::Database(Box::new(Broken {
            code,
            message: "database or disk is full",
        }));
    }
    sqlx::Error::Database(Box::new(Broken {
        code,
        message: "an earlier statement failed and SQLite may have rolled this transaction back",
    }))
}

/// The primary SQLite result code of a database error (`SQLITE_FULL` for `SQLITE_FULL`
/// and its extended codes).
fn primary_code(err: &sqlx::Error) -> Option<i32> {
    let sqlx::Error::Database(db) = err else { return None };
    if db.try_downcast_ref::<sqlx::postgres::PgDatabaseError>().is_some() {
        return None;
    }
    db.code()?.parse::<i32>().ok().map(|code| code & 0xff)
}

/// Whether SQLite said the database or disk is full (`SQLITE_FULL`).
pub(crate) fn is_disk_full(err: &sqlx::Error) -> bool {
    primary_code(err) == Some(SQLITE_FULL)
}

fn may_roll_back(code: i32) -> bool {
    matches!(code, SQLITE_FULL | SQLITE_IOERR | SQLITE_NOMEM | SQLITE_BUSY)
}

/// `SQLITE_FULL` with the database it happened to: the disk (or the test's page cap) is full.
#[derive(Debug, thiserror::Error)]
#[error("the disk holding {path} is full: free some space; nothing was saved")]
pub(crate) struct DiskFull {
    pub path: String,
}

impl DatabaseError for DiskFull {
    fn message(&self) -> &str {
        "database or disk is full"
    }

    fn code(&self) -> Option<Cow<'_, str>> {
        Some(Cow::Owned(SQLITE_FULL.to_string()))
    }

    fn as_error(&self) -> &(dyn StdError + Send + Sync + 'static) {
        self
    }

    fn as_error_mut(&mut self) -> &mut (dyn StdError + Send + Sync + 'static) {
        self
    }

    fn into_error(self: Box<Self>) -> Box<dyn StdError + Send + Sync + 'static> {
        self
    }

    fn kind(&self) -> ErrorKind {
        ErrorKind::Other
    }
}

/// A statement refused because its transaction is broken.
#[derive(Debug, thiserror::Error)]
#[error("{message} (code {code})")]
struct Broken {
    code: i32,
    message: &'static str,
}

impl DatabaseError for Broken {
    fn message(&self) -> &str {
        self.message
    }

    fn code(&self) -> Option<Cow<'_, str>> {
        Some(Cow::Owned(self.code.to_string()))
    }

    fn as_error(&self) -> &(dyn StdError + Send + Sync + 'static) {
        self
    }

    fn as_error_mut(&mut self) -> &mut (dyn StdError + Send + Sync + 'static) {
        self
    }

    fn into_error(self: Box<Self>) -> Box<dyn StdError + Send + Sync + 'static> {
        self
    }

    fn kind(&self) -> ErrorKind {
        ErrorKind::Other
    }
}
