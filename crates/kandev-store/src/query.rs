//! Statements and how they run on a [`Db`] of either engine: a constant text with its
//! arguments bound in order (`query`, `query_as`, `query_scalar`), or a text built at run time
//! by a [`QueryBuilder`]. Both run through sqlx's `QueryBuilder` of the engine they run on.
//!
//! Arguments are owned values ([`Arg`]): integers, floats, text and bytes, each possibly
//! NULL with its type known, because PostgreSQL needs a typed NULL. A `bool` binds as an
//! integer 0/1 on both engines (the schemas store flags as integers). The dialect the texts
//! are written in, and what becomes of them on PostgreSQL, is `sql.rs`.

use std::borrow::Cow;
use std::marker::PhantomData;

use sqlx::postgres::{PgArguments, PgRow};
use sqlx::sqlite::{SqliteArguments, SqliteRow};
use sqlx::{Arguments, Decode, FromRow, Postgres, Sqlite, Type};

use crate::db::{Db, IntoDb, Pool};
use crate::sql::{Dialect, fragment_problem, pg_sql};
use crate::write::TxKind;

/// One bound value.
#[derive(Debug, Clone)]
pub(crate) enum Arg {
    Int(Option<i64>),
    Float(Option<f64>),
    Text(Option<String>),
    Bytes(Option<Vec<u8>>),
}

impl Arg {
    /// The value as PostgreSQL takes it: its text cannot hold a NUL character (SQLite's can),
    /// so each becomes U+FFFD. (An id with a NUL then matches nothing, as on SQLite; a text an
    /// agent sent with one is stored with the replacement character.)
    fn for_postgres(self) -> Arg {
        match self {
            Arg::Text(Some(text)) if text.contains('\0') => {
                Arg::Text(Some(text.replace('\0', "\u{fffd}")))
            }
            other => other,
        }
    }
}

/// A value a query can bind.
pub(crate) trait IntoArg {
    fn into_arg(self) -> Arg;
}

impl IntoArg for Arg {
    fn into_arg(self) -> Arg {
        self
    }
}

macro_rules! int_arg {
    ($($t:ty),*) => {$(
        impl IntoArg for $t {
            fn into_arg(self) -> Arg {
                Arg::Int(Some(i64::from(self)))
            }
        }
        impl IntoArg for Option<$t> {
            fn into_arg(self) -> Arg {
                Arg::Int(self.map(i64::from))
            }
        }
    )*};
}
int_arg!(i64, i32, u32, i16, u16, u8, bool);

impl IntoArg for f64 {
    fn into_arg(self) -> Arg {
        Arg::Float(Some(self))
    }
}

impl IntoArg for String {
    fn into_arg(self) -> Arg {
        Arg::Text(Some(self))
    }
}

impl IntoArg for &str {
    fn into_arg(self) -> Arg {
        Arg::Text(Some(self.to_owned()))
    }
}

impl IntoArg for &String {
    fn into_arg(self) -> Arg {
        Arg::Text(Some(self.clone()))
    }
}

impl IntoArg for &&str {
    fn into_arg(self) -> Arg {
        Arg::Text(Some((*self).to_owned()))
    }
}

impl IntoArg for Option<String> {
    fn into_arg(self) -> Arg {
        Arg::Text(self)
    }
}

impl IntoArg for Option<&str> {
    fn into_arg(self) -> Arg {
        Arg::Text(self.map(str::to_owned))
    }
}

impl IntoArg for &Option<String> {
    fn into_arg(self) -> Arg {
        Arg::Text(self.clone())
    }
}

impl IntoArg for Option<&String> {
    fn into_arg(self) -> Arg {
        Arg::Text(self.cloned())
    }
}

impl IntoArg for Vec<u8> {
    fn into_arg(self) -> Arg {
        Arg::Bytes(Some(self))
    }
}

impl IntoArg for &[u8] {
    fn into_arg(self) -> Arg {
        Arg::Bytes(Some(self.to_vec()))
    }
}

impl IntoArg for &i64 {
    fn into_arg(self) -> Arg {
        Arg::Int(Some(*self))
    }
}

/// A row type both drivers decode (`#[derive(FromRow)]` structs and tuples are).
pub(crate) trait Row:
    for<'r> FromRow<'r, SqliteRow> + for<'r> FromRow<'r, PgRow> + Send + Unpin
{
}
impl<T> Row for T where T: for<'r> FromRow<'r, SqliteRow> + for<'r> FromRow<'r, PgRow> + Send + Unpin
{}

/// A column type both drivers decode.
pub(crate) trait Scalar:
    for<'r> Decode<'r, Sqlite>
    + Type<Sqlite>
    + for<'r> Decode<'r, Postgres>
    + Type<Postgres>
    + Send
    + Unpin
{
}
impl<T> Scalar for T where
    T: for<'r> Decode<'r, Sqlite>
        + Type<Sqlite>
        + for<'r> Decode<'r, Postgres>
        + Type<Postgres>
        + Send
        + Unpin
{
}

// ---------------------------------------------------------------- statements

/// A statement text known before it runs, in the store's dialect with `?` / `?N`
/// placeholders, and the arguments bound to them in order.
pub(crate) struct Text<'q> {
    sql: Cow<'q, str>,
    args: Vec<Arg>,
}

/// A statement built at run time by sqlx's `QueryBuilder` of one engine: every fragment is
/// pushed in that engine's dialect and every value bound where its placeholder is written
/// (`push_bind`), so a clause and its argument cannot drift apart. Made for the engine it
/// will run on ([`Store::dialect`](crate::Store::dialect), `Db::dialect`); run on the other
/// one it is refused.
///
/// A fragment is plain statement text: no placeholder (values go through
/// [`QueryBuilder::push_bind`]) and no literal, identifier or comment left open for the next
/// fragment to close (checked in debug builds: the PostgreSQL fragment is rewritten on its
/// own, `sql.rs`).
pub(crate) enum QueryBuilder {
    Sqlite(sqlx::QueryBuilder<'static, Sqlite>),
    Postgres(sqlx::QueryBuilder<'static, Postgres>),
}

impl QueryBuilder {
    /// A statement for `dialect` that starts with `init`.
    pub(crate) fn new(dialect: Dialect, init: &str) -> QueryBuilder {
        let mut builder = match dialect {
            Dialect::Sqlite => QueryBuilder::Sqlite(sqlx::QueryBuilder::new("")),
            Dialect::Postgres => QueryBuilder::Postgres(sqlx::QueryBuilder::new("")),
        };
        builder.push(init);
        builder
    }

    /// Appends statement text (see the type's rules for a fragment).
    pub(crate) fn push(&mut self, sql: &str) -> &mut QueryBuilder {
        debug_assert_eq!(fragment_problem(sql), None, "{sql:?}");
        match self {
            QueryBuilder::Sqlite(builder) => {
                builder.push(sql);
            }
            QueryBuilder::Postgres(builder) => {
                builder.push(pg_sql(sql));
            }
        }
        self
    }

    /// Appends a placeholder and binds `value` to it.
    pub(crate) fn push_bind(&mut self, value: impl IntoArg) -> &mut QueryBuilder {
        match self {
            QueryBuilder::Sqlite(builder) => {
                match value.into_arg() {
                    Arg::Int(v) => builder.push_bind(v),
                    Arg::Float(v) => builder.push_bind(v),
                    Arg::Text(v) => builder.push_bind(v),
                    Arg::Bytes(v) => builder.push_bind(v),
                };
            }
            QueryBuilder::Postgres(builder) => {
                match value.into_arg().for_postgres() {
                    Arg::Int(v) => builder.push_bind(v),
                    Arg::Float(v) => builder.push_bind(v),
                    Arg::Text(v) => builder.push_bind(v),
                    Arg::Bytes(v) => builder.push_bind(v),
                };
            }
        }
        self
    }

    /// The text so far, as the engine will get it.
    pub(crate) fn sql(&self) -> &str {
        match self {
            QueryBuilder::Sqlite(builder) => builder.sql(),
            QueryBuilder::Postgres(builder) => builder.sql(),
        }
    }

    pub(crate) fn build(self) -> Query<QueryBuilder> {
        Query { statement: self }
    }

    pub(crate) fn build_query_as<O>(self) -> QueryAs<QueryBuilder, O> {
        QueryAs { statement: self, out: PhantomData }
    }

    pub(crate) fn build_query_scalar<O>(self) -> QueryScalar<QueryBuilder, O> {
        QueryScalar { rows: self.build_query_as() }
    }
}

/// A statement ready to become sqlx's `QueryBuilder` of the engine it runs on.
pub(crate) trait Statement {
    /// The text as written, for the write transaction's notes (`TxConn::note`).
    fn text(&self) -> &str;
    fn into_sqlite(self) -> Result<sqlx::QueryBuilder<'static, Sqlite>, sqlx::Error>;
    fn into_postgres(self) -> Result<sqlx::QueryBuilder<'static, Postgres>, sqlx::Error>;
}

impl Statement for Text<'_> {
    fn text(&self) -> &str {
        &self.sql
    }

    fn into_sqlite(self) -> Result<sqlx::QueryBuilder<'static, Sqlite>, sqlx::Error> {
        let mut args = SqliteArguments::default();
        for arg in self.args {
            match arg {
                Arg::Int(v) => args.add(v),
                Arg::Float(v) => args.add(v),
                Arg::Text(v) => args.add(v),
                Arg::Bytes(v) => args.add(v),
            }
            .map_err(sqlx::Error::Encode)?;
        }
        Ok(sqlx::QueryBuilder::with_arguments(self.sql.into_owned(), args))
    }

    fn into_postgres(self) -> Result<sqlx::QueryBuilder<'static, Postgres>, sqlx::Error> {
        let mut args = PgArguments::default();
        for arg in self.args {
            match arg.for_postgres() {
                Arg::Int(v) => args.add(v),
                Arg::Float(v) => args.add(v),
                Arg::Text(v) => args.add(v),
                Arg::Bytes(v) => args.add(v),
            }
            .map_err(sqlx::Error::Encode)?;
        }
        Ok(sqlx::QueryBuilder::with_arguments(pg_sql(&self.sql), args))
    }
}

impl Statement for QueryBuilder {
    fn text(&self) -> &str {
        self.sql()
    }

    fn into_sqlite(self) -> Result<sqlx::QueryBuilder<'static, Sqlite>, sqlx::Error> {
        match self {
            QueryBuilder::Sqlite(builder) => Ok(builder),
            QueryBuilder::Postgres(_) => Err(wrong_engine(Dialect::Postgres, Dialect::Sqlite)),
        }
    }

    fn into_postgres(self) -> Result<sqlx::QueryBuilder<'static, Postgres>, sqlx::Error> {
        match self {
            QueryBuilder::Postgres(builder) => Ok(builder),
            QueryBuilder::Sqlite(_) => Err(wrong_engine(Dialect::Sqlite, Dialect::Postgres)),
        }
    }
}

fn wrong_engine(built: Dialect, runs: Dialect) -> sqlx::Error {
    sqlx::Error::Configuration(
        format!("a statement built for {built:?} cannot run on {runs:?}; build it for its store")
            .into(),
    )
}

// ---------------------------------------------------------------- running

/// What a statement changed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Done {
    rows: u64,
}

impl Done {
    pub(crate) fn rows_affected(&self) -> u64 {
        self.rows
    }
}

/// A statement to run for what it changes.
#[must_use = "a query does nothing until it runs"]
pub(crate) struct Query<S> {
    statement: S,
}

/// A statement whose rows become `O`.
#[must_use = "a query does nothing until it runs"]
pub(crate) struct QueryAs<S, O> {
    statement: S,
    out: PhantomData<fn() -> O>,
}

/// A statement whose first column becomes `O`: its rows read as `(O,)`.
#[must_use = "a query does nothing until it runs"]
pub(crate) struct QueryScalar<S, O> {
    rows: QueryAs<S, (O,)>,
}

pub(crate) fn query(sql: &str) -> Query<Text<'_>> {
    Query { statement: Text { sql: Cow::Borrowed(sql), args: Vec::new() } }
}

pub(crate) fn query_as<O>(sql: &str) -> QueryAs<Text<'_>, O> {
    QueryAs { statement: query(sql).statement, out: PhantomData }
}

pub(crate) fn query_scalar<O>(sql: &str) -> QueryScalar<Text<'_>, O> {
    QueryScalar { rows: query_as(sql) }
}

/// Runs `$body` (an expression over the executor `$e` and sqlx's `QueryBuilder` `$b` of the
/// statement) on whichever engine and connection `$db` holds; errors of a write
/// transaction go through its watch (see `write.rs`).
macro_rules! on_db {
    ($db:expr, $statement:expr, |$e:ident, $b:ident| $body:expr) => {{
        let statement = $statement;
        match $db {
            Db::Read(Pool::Sqlite(pool)) => {
                let mut built = statement.into_sqlite()?;
                let ($e, $b) = (pool, &mut built);
                $body.await
            }
            Db::Read(Pool::Postgres(pool)) => {
                let mut built = statement.into_postgres()?;
                let ($e, $b) = (pool, &mut built);
                $body.await
            }
            Db::Write(conn) => {
                conn.check()?;
                conn.note(statement.text());
                let outcome = match conn.kind() {
                    TxKind::Sqlite(tx) => match statement.into_sqlite() {
                        Ok(mut built) => {
                            let ($e, $b) = (&mut **tx, &mut built);
                            $body.await
                        }
                        Err(err) => Err(err),
                    },
                    TxKind::Postgres(tx) => match statement.into_postgres() {
                        Ok(mut built) => {
                            let ($e, $b) = (&mut **tx, &mut built);
                            $body.await
                        }
                        Err(err) => Err(err),
                    },
                };
                outcome.map_err(|err| conn.watch(err))
            }
        }
    }};
}

impl<'q> Query<Text<'q>> {
    pub(crate) fn bind(mut self, value: impl IntoArg) -> Self {
        self.statement.args.push(value.into_arg());
        self
    }
}

impl<S: Statement> Query<S> {
    pub(crate) async fn execute<'c>(self, db: impl IntoDb<'c>) -> Result<Done, sqlx::Error> {
        on_db!(db.into_db(), self.statement, |e, b| async {
            b.build().execute(e).await.map(|done| Done { rows: done.rows_affected() })
        })
    }
}

impl<'q, O> QueryAs<Text<'q>, O> {
    pub(crate) fn bind(mut self, value: impl IntoArg) -> Self {
        self.statement.args.push(value.into_arg());
        self
    }
}

impl<S: Statement, O: Row> QueryAs<S, O> {
    pub(crate) async fn fetch_all<'c>(self, db: impl IntoDb<'c>) -> Result<Vec<O>, sqlx::Error> {
        on_db!(db.into_db(), self.statement, |e, b| b.build_query_as::<O>().fetch_all(e))
    }

    pub(crate) async fn fetch_optional<'c>(
        self,
        db: impl IntoDb<'c>,
    ) -> Result<Option<O>, sqlx::Error> {
        on_db!(db.into_db(), self.statement, |e, b| b.build_query_as::<O>().fetch_optional(e))
    }

    pub(crate) async fn fetch_one<'c>(self, db: impl IntoDb<'c>) -> Result<O, sqlx::Error> {
        self.fetch_optional(db).await?.ok_or(sqlx::Error::RowNotFound)
    }
}

impl<'q, O> QueryScalar<Text<'q>, O> {
    pub(crate) fn bind(mut self, value: impl IntoArg) -> Self {
        self.rows = self.rows.bind(value);
        self
    }
}

impl<S: Statement, O: Scalar> QueryScalar<S, O> {
    pub(crate) async fn fetch_all<'c>(self, db: impl IntoDb<'c>) -> Result<Vec<O>, sqlx::Error> {
        Ok(self.rows.fetch_all(db).await?.into_iter().map(|(value,)| value).collect())
    }

    pub(crate) async fn fetch_optional<'c>(
        self,
        db: impl IntoDb<'c>,
    ) -> Result<Option<O>, sqlx::Error> {
        Ok(self.rows.fetch_optional(db).await?.map(|(value,)| value))
    }

    pub(crate) async fn fetch_one<'c>(self, db: impl IntoDb<'c>) -> Result<O, sqlx::Error> {
        self.fetch_optional(db).await?.ok_or(sqlx::Error::RowNotFound)
    }
}
