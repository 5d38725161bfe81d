//! Where a query runs: the store's read pool or an open write transaction, so that each
//! query is written once and serves both `Store` and `WriteTx`.
//!
//! Every read of an aggregate is a function of a [`Db`] in that aggregate's file;
//! `Store::get_task` passes [`Store::db`] (a pooled read connection) and `WriteTx::get_task`
//! passes [`WriteTx::db`] (the transaction's connection, which sees its uncommitted writes).
//! `Db` is one concrete type rather than a generic parameter: futures of functions generic
//! over an executor trait trip the compiler's `Send` check of higher-ranked lifetimes.

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use sqlx::sqlite::{SqliteQueryResult, SqliteRow, SqliteStatement, SqliteTypeInfo};
use sqlx::{Describe, Either, Execute, Executor, Sqlite, SqlitePool};

use crate::write::TxConn;
use crate::{Store, WriteTx};

/// What a read runs on; `&mut Db` is an sqlx [`Executor`], one statement at a time.
#[derive(Debug)]
pub(crate) enum Db<'a> {
    /// The store's read-only pool: sees committed data.
    Read(&'a SqlitePool),
    /// A write transaction's connection: sees its own uncommitted writes.
    Write(&'a mut TxConn),
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

impl<'c> Executor<'c> for &'c mut Db<'_> {
    type Database = Sqlite;

    fn fetch_many<'e, 'q: 'e, E>(
        self,
        query: E,
    ) -> BoxStream<'e, Result<Either<SqliteQueryResult, SqliteRow>, sqlx::Error>>
    where
        'c: 'e,
        E: 'q + Execute<'q, Sqlite>,
    {
        match self {
            Db::Read(pool) => pool.fetch_many(query),
            Db::Write(conn) => (&mut **conn).fetch_many(query),
        }
    }

    fn fetch_optional<'e, 'q: 'e, E>(
        self,
        query: E,
    ) -> BoxFuture<'e, Result<Option<SqliteRow>, sqlx::Error>>
    where
        'c: 'e,
        E: 'q + Execute<'q, Sqlite>,
    {
        match self {
            Db::Read(pool) => pool.fetch_optional(query),
            Db::Write(conn) => (&mut **conn).fetch_optional(query),
        }
    }

    fn prepare_with<'e, 'q: 'e>(
        self,
        sql: &'q str,
        parameters: &'e [SqliteTypeInfo],
    ) -> BoxFuture<'e, Result<SqliteStatement<'q>, sqlx::Error>>
    where
        'c: 'e,
    {
        match self {
            Db::Read(pool) => pool.prepare_with(sql, parameters),
            Db::Write(conn) => (&mut **conn).prepare_with(sql, parameters),
        }
    }

    fn describe<'e, 'q: 'e>(
        self,
        sql: &'q str,
    ) -> BoxFuture<'e, Result<Describe<Sqlite>, sqlx::Error>>
    where
        'c: 'e,
    {
        match self {
            Db::Read(pool) => pool.describe(sql),
            Db::Write(conn) => (&mut **conn).describe(sql),
        }
    }
}
