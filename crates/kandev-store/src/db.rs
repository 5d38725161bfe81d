//! Where a query runs: the store's read pool or an open write transaction, on SQLite or
//! PostgreSQL, so that each query is written once and serves both `Store` and `WriteTx`.
//!
//! Every read of an aggregate is a function of a [`Db`] in that aggregate's file;
//! `Store::get_task` passes [`Store::db`] (a pooled read connection) and `WriteTx::get_task`
//! passes [`WriteTx::db`] (the transaction's connection, which sees its uncommitted writes).
//! `Db` is one concrete type rather than a generic parameter: futures of functions generic
//! over an executor trait trip the compiler's `Send` check of higher-ranked lifetimes.
//! `sql.rs` runs statements on it.

use sqlx::{PgPool, SqlitePool};

use crate::sql::Dialect;
use crate::write::TxConn;
use crate::{Store, WriteTx};

/// A pool of connections to one of the two engines.
#[derive(Debug, Clone)]
pub(crate) enum Pool {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

impl Pool {
    pub(crate) fn dialect(&self) -> Dialect {
        match self {
            Pool::Sqlite(_) => Dialect::Sqlite,
            Pool::Postgres(_) => Dialect::Postgres,
        }
    }

    pub(crate) async fn close(&self) {
        match self {
            Pool::Sqlite(pool) => pool.close().await,
            Pool::Postgres(pool) => pool.close().await,
        }
    }
}

/// What a statement runs on.
#[derive(Debug)]
pub(crate) enum Db<'a> {
    /// The store's read pool: sees committed data.
    Read(&'a Pool),
    /// A write transaction's connection: sees its own uncommitted writes.
    Write(&'a mut TxConn),
}

impl Db<'_> {
    pub(crate) fn dialect(&self) -> Dialect {
        match self {
            Db::Read(pool) => pool.dialect(),
            Db::Write(conn) => conn.dialect(),
        }
    }
}

/// Anything a statement can run on: a pool, a transaction's connection, or a [`Db`].
pub(crate) trait IntoDb<'c> {
    fn into_db(self) -> Db<'c>;
}

impl<'c> IntoDb<'c> for &'c Pool {
    fn into_db(self) -> Db<'c> {
        Db::Read(self)
    }
}

impl<'c> IntoDb<'c> for &'c mut TxConn {
    fn into_db(self) -> Db<'c> {
        Db::Write(self)
    }
}

impl<'c> IntoDb<'c> for Db<'c> {
    fn into_db(self) -> Db<'c> {
        self
    }
}

impl<'c, 'a: 'c> IntoDb<'c> for &'c mut Db<'a> {
    fn into_db(self) -> Db<'c> {
        match self {
            Db::Read(pool) => Db::Read(pool),
            Db::Write(conn) => Db::Write(conn),
        }
    }
}

impl Store {
    /// Reads on the read pool.
    pub(crate) fn db(&self) -> Db<'_> {
        Db::Read(&self.read)
    }
}

impl WriteTx {
    /// Reads inside this transaction.
    pub(crate) fn db(&mut self) -> Db<'_> {
        Db::Write(self.conn())
    }
}
