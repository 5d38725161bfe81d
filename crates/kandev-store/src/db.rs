//! Where a query runs: the store's read pool or an open write transaction, so that each
//! query is written once and serves both `Store` and `WriteTx`.
//!
//! Every read of an aggregate is a function over [`Db`] in that aggregate's file;
//! `Store::get_task` passes `&Store` (a pooled read connection) and `WriteTx::get_task`
//! passes `&mut WriteTx` (the transaction's connection, which sees its uncommitted writes).

use sqlx::{Executor, Sqlite, SqlitePool};

use crate::write::TxConn;
use crate::{Store, WriteTx};

/// Something queries run on, one statement at a time.
pub(crate) trait Db {
    /// The executor of one statement.
    type Ex<'c>: Executor<'c, Database = Sqlite>
    where
        Self: 'c;

    /// The executor for the next statement (a read may need several).
    fn ex(&mut self) -> Self::Ex<'_>;
}

impl<'s> Db for &'s Store {
    type Ex<'c>
        = &'s SqlitePool
    where
        Self: 'c;

    fn ex(&mut self) -> &'s SqlitePool {
        &self.read
    }
}

impl Db for &mut WriteTx {
    type Ex<'c>
        = &'c mut TxConn
    where
        Self: 'c;

    fn ex(&mut self) -> &mut TxConn {
        self.conn()
    }
}
