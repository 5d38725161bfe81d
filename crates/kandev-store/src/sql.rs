//! One query text for both engines: `query`, `query_as` and `query_scalar` collect their
//! arguments and run on a [`Db`] over SQLite or PostgreSQL.
//!
//! Statements are written in SQLite's dialect with `?` / `?N` placeholders. On SQLite they
//! run unchanged through sqlx's SQLite driver (the same prepared statements as before); on
//! PostgreSQL [`pg_sql`] numbers the placeholders (`$1`, ...) and turns `LIKE` into `ILIKE`
//! (SQLite's `LIKE` is case-insensitive). What else differs is either covered by functions
//! the PostgreSQL migrations define (`json_each`, `json_extract`, `json_set`, `json`) or
//! written per dialect where it is used (full-text search, the event counter).
//!
//! Arguments are owned values ([`Arg`]): integers, floats, text and bytes, each possibly
//! NULL with its type known, because PostgreSQL needs a typed NULL. A `bool` binds as an
//! integer 0/1 on both engines (the schemas store flags as integers).

use std::borrow::Cow;
use std::marker::PhantomData;

use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;
use sqlx::{Decode, FromRow, Postgres, Sqlite, Type};

use crate::db::{Db, IntoDb, Pool};
use crate::write::TxKind;

/// Which engine a store runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

/// One bound value.
#[derive(Debug, Clone)]
pub(crate) enum Arg {
    Int(Option<i64>),
    Float(Option<f64>),
    Text(Option<String>),
    Bytes(Option<Vec<u8>>),
}

/// A value a query can bind.
pub(crate) trait IntoArg {
    fn into_arg(self) -> Arg;
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

/// A statement and its arguments.
#[must_use = "a query does nothing until it runs"]
pub(crate) struct Query<'q> {
    sql: Cow<'q, str>,
    args: Vec<Arg>,
}

/// A statement whose rows become `O`.
#[must_use = "a query does nothing until it runs"]
pub(crate) struct QueryAs<'q, O> {
    query: Query<'q>,
    out: PhantomData<fn() -> O>,
}

/// A statement whose first column becomes `O`.
#[must_use = "a query does nothing until it runs"]
pub(crate) struct QueryScalar<'q, O> {
    query: Query<'q>,
    out: PhantomData<fn() -> O>,
}

pub(crate) fn query(sql: &str) -> Query<'_> {
    Query { sql: Cow::Borrowed(sql), args: Vec::new() }
}

pub(crate) fn query_as<O>(sql: &str) -> QueryAs<'_, O> {
    QueryAs { query: query(sql), out: PhantomData }
}

pub(crate) fn query_scalar<O>(sql: &str) -> QueryScalar<'_, O> {
    QueryScalar { query: query(sql), out: PhantomData }
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

/// Binds `args` to an sqlx query of any of the three kinds (they share the `bind` method).
macro_rules! bind_all {
    ($q:expr, $args:expr) => {{
        let mut q = $q;
        for arg in $args {
            q = match arg {
                Arg::Int(v) => q.bind(v),
                Arg::Float(v) => q.bind(v),
                Arg::Text(v) => q.bind(v),
                Arg::Bytes(v) => q.bind(v),
            };
        }
        q
    }};
}

/// Runs `$body` (an expression over the executor `$e`, the statement text `$sql` and the
/// arguments `$args`) on whichever engine and connection `$db` holds; errors of a write
/// transaction go through its watch (see `write.rs`).
macro_rules! on_db {
    ($db:expr, $text:expr, $values:expr, |$e:ident, $sql:ident, $args:ident| $body:expr) => {{
        let db: Db<'_> = $db;
        let text: &str = $text;
        match db {
            Db::Read(Pool::Sqlite(pool)) => {
                let $e = pool;
                let $sql = text;
                let $args = $values;
                $body.await
            }
            Db::Read(Pool::Postgres(pool)) => {
                let $e = pool;
                let translated = pg_sql(text);
                let $sql = translated.as_str();
                let $args = pg_args($values);
                $body.await
            }
            Db::Write(conn) => {
                conn.check()?;
                conn.note(text);
                let outcome = match conn.kind() {
                    TxKind::Sqlite(tx) => {
                        let $e = &mut **tx;
                        let $sql = text;
                        let $args = $values;
                        $body.await
                    }
                    TxKind::Postgres(tx) => {
                        let $e = &mut **tx;
                        let translated = pg_sql(text);
                        let $sql = translated.as_str();
                        let $args = pg_args($values);
                        $body.await
                    }
                };
                outcome.map_err(|err| conn.watch(err))
            }
        }
    }};
}

/// Arguments as PostgreSQL takes them: its text cannot hold a NUL character (SQLite's can),
/// so each becomes U+FFFD. (An id with a NUL then matches nothing, as on SQLite; a text an
/// agent sent with one is stored with the replacement character.)
fn pg_args(args: Vec<Arg>) -> Vec<Arg> {
    args.into_iter()
        .map(|arg| match arg {
            Arg::Text(Some(text)) if text.contains('\0') => {
                Arg::Text(Some(text.replace('\0', "\u{fffd}")))
            }
            other => other,
        })
        .collect()
}

impl<'q> Query<'q> {
    pub(crate) fn bind(mut self, value: impl IntoArg) -> Self {
        self.args.push(value.into_arg());
        self
    }

    pub(crate) fn bind_arg(mut self, value: Arg) -> Self {
        self.args.push(value);
        self
    }

    pub(crate) async fn execute<'c>(self, db: impl IntoDb<'c>) -> Result<Done, sqlx::Error> {
        let Query { sql, args } = self;
        on_db!(db.into_db(), &sql, args, |e, sql, bound| async {
            bind_all!(sqlx::query(sql), bound)
                .execute(e)
                .await
                .map(|r| Done { rows: r.rows_affected() })
        })
    }
}

impl<'q, O: Row> QueryAs<'q, O> {
    pub(crate) fn bind(mut self, value: impl IntoArg) -> Self {
        self.query = self.query.bind(value);
        self
    }

    pub(crate) async fn fetch_all<'c>(self, db: impl IntoDb<'c>) -> Result<Vec<O>, sqlx::Error> {
        let Query { sql, args } = self.query;
        on_db!(db.into_db(), &sql, args, |e, sql, bound| bind_all!(
            sqlx::query_as::<_, O>(sql),
            bound
        )
        .fetch_all(e))
    }

    pub(crate) async fn fetch_optional<'c>(
        self,
        db: impl IntoDb<'c>,
    ) -> Result<Option<O>, sqlx::Error> {
        let Query { sql, args } = self.query;
        on_db!(db.into_db(), &sql, args, |e, sql, bound| bind_all!(
            sqlx::query_as::<_, O>(sql),
            bound
        )
        .fetch_optional(e))
    }

    pub(crate) async fn fetch_one<'c>(self, db: impl IntoDb<'c>) -> Result<O, sqlx::Error> {
        self.fetch_optional(db).await?.ok_or(sqlx::Error::RowNotFound)
    }
}

impl<'q, O: Scalar> QueryScalar<'q, O> {
    pub(crate) fn bind(mut self, value: impl IntoArg) -> Self {
        self.query = self.query.bind(value);
        self
    }

    pub(crate) async fn fetch_all<'c>(self, db: impl IntoDb<'c>) -> Result<Vec<O>, sqlx::Error> {
        let Query { sql, args } = self.query;
        on_db!(db.into_db(), &sql, args, |e, sql, bound| bind_all!(
            sqlx::query_scalar::<_, O>(sql),
            bound
        )
        .fetch_all(e))
    }

    pub(crate) async fn fetch_optional<'c>(
        self,
        db: impl IntoDb<'c>,
    ) -> Result<Option<O>, sqlx::Error> {
        let Query { sql, args } = self.query;
        on_db!(db.into_db(), &sql, args, |e, sql, bound| bind_all!(
            sqlx::query_scalar::<_, O>(sql),
            bound
        )
        .fetch_optional(e))
    }

    pub(crate) async fn fetch_one<'c>(self, db: impl IntoDb<'c>) -> Result<O, sqlx::Error> {
        self.fetch_optional(db).await?.ok_or(sqlx::Error::RowNotFound)
    }
}

/// A statement in SQLite's dialect as PostgreSQL reads it: `?` and `?N` become `$N` (a bare
/// `?` takes the number after the largest so far, as in SQLite) and `LIKE` becomes `ILIKE`.
/// Left alone: `'literals'`, `"quoted identifiers"`, `-- line comments`, `/* block comments
/// */` (nested, as PostgreSQL nests them) and `$$dollar-quoted$$` / `$tag$…$tag$` strings
/// ([`skipped_region`]).
pub(crate) fn pg_sql(sql: &str) -> String {
    let bytes = sql.as_bytes();
    let mut out = String::with_capacity(sql.len() + 16);
    let mut highest = 0u32;
    // `sql[copied..i]` is passed over and not yet copied. Only ASCII bytes are looked at, and
    // no byte of a multi-byte UTF-8 character is ASCII, so every cut is at a char boundary.
    let (mut i, mut copied) = (0, 0);
    while i < bytes.len() {
        if let Some(region) = skipped_region(sql, i) {
            i = region.end;
            continue;
        }
        match bytes[i] {
            b'?' => {
                out.push_str(&sql[copied..i]);
                let digits = bytes[i + 1..].iter().take_while(|b| b.is_ascii_digit()).count();
                let number = match sql[i + 1..i + 1 + digits].parse::<u32>() {
                    Ok(n) => n,
                    Err(_) => highest + 1,
                };
                highest = highest.max(number);
                out.push('$');
                out.push_str(&number.to_string());
                i += 1 + digits;
                copied = i;
            }
            b'L' | b'l' if is_word_at(sql, i, "LIKE") => {
                out.push_str(&sql[copied..i]);
                out.push_str("ILIKE");
                i += "LIKE".len();
                copied = i;
            }
            _ => i += 1,
        }
    }
    out.push_str(&sql[copied..]);
    out
}

/// Text the rewriter passes over whole, from its opening byte to `end` (one past its close,
/// or the end of the text when it is not closed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Region {
    end: usize,
}

/// The literal, quoted identifier, comment or dollar-quoted string that starts at byte `at`
/// of `sql`, if one does.
fn skipped_region(sql: &str, at: usize) -> Option<Region> {
    let bytes = sql.as_bytes();
    let rest = &bytes[at..];
    let find = |from: usize, close: &[u8]| {
        bytes[from..].windows(close.len()).position(|w| w == close).map(|p| from + p + close.len())
    };
    let region = |found: Option<usize>| match found {
        Some(end) => Region { end },
        None => Region { end: bytes.len() },
    };
    match rest {
        [quote @ (b'\'' | b'"'), ..] => {
            // A doubled quote stands for itself and does not close.
            let mut i = at + 1;
            loop {
                match bytes[i..].iter().position(|b| b == quote) {
                    None => return Some(region(None)),
                    Some(p) if bytes.get(i + p + 1) == Some(quote) => i += p + 2,
                    Some(p) => return Some(region(Some(i + p + 1))),
                }
            }
        }
        [b'-', b'-', ..] => {
            let end = bytes[at..].iter().position(|b| *b == b'\n').map_or(bytes.len(), |p| at + p);
            Some(Region { end })
        }
        [b'/', b'*', ..] => {
            let (mut depth, mut i) = (1, at + 2);
            while i < bytes.len() {
                match &bytes[i..] {
                    [b'/', b'*', ..] => (depth, i) = (depth + 1, i + 2),
                    [b'*', b'/', ..] if depth == 1 => return Some(region(Some(i + 2))),
                    [b'*', b'/', ..] => (depth, i) = (depth - 1, i + 2),
                    _ => i += 1,
                }
            }
            Some(region(None))
        }
        [b'$', ..] => {
            // `$tag$` with an identifier-like tag (or none); not `$1`, not inside a word.
            let inside_word = at > 0 && is_word_byte(bytes[at - 1]);
            let tag = rest[1..].iter().take_while(|b| b.is_ascii_alphanumeric() || **b == b'_').count();
            let starts_with_digit = rest.get(1).is_some_and(u8::is_ascii_digit);
            if inside_word || starts_with_digit || rest.get(1 + tag) != Some(&b'$') {
                return None;
            }
            let delimiter = &rest[..tag + 2];
            Some(region(find(at + delimiter.len(), delimiter)))
        }
        _ => None,
    }
}

/// A byte of a PostgreSQL identifier after its first (which may be `$`).
fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$'
}

/// Whether `word` (ASCII, upper case) starts at byte `at` of `sql` as a whole word.
fn is_word_at(sql: &str, at: usize, word: &str) -> bool {
    let bytes = sql.as_bytes();
    let end = at + word.len();
    let Some(candidate) = sql.get(at..end) else { return false };
    let boundary = |b: Option<&u8>| b.is_none_or(|b| !(b.is_ascii_alphanumeric() || *b == b'_'));
    candidate.eq_ignore_ascii_case(word)
        && boundary(at.checked_sub(1).and_then(|p| bytes.get(p)))
        && boundary(bytes.get(end))
}

#[cfg(test)]
mod tests {
    use super::pg_sql;

    #[test]
    fn placeholders_are_numbered_as_sqlite_numbers_them() {
        assert_eq!(pg_sql("a = ? AND b = ?"), "a = $1 AND b = $2");
        assert_eq!(pg_sql("a = ?2 AND b = ?1 AND c = ?"), "a = $2 AND b = $1 AND c = $3");
        assert_eq!(pg_sql("x = '?' AND y = ?"), "x = '?' AND y = $1");
    }

    #[test]
    fn like_becomes_ilike_only_as_a_word() {
        assert_eq!(pg_sql("t.title LIKE ? ESCAPE '\\'"), "t.title ILIKE $1 ESCAPE '\\'");
        assert_eq!(pg_sql("likes, unlike"), "likes, unlike");
        assert_eq!(pg_sql("a NOT like 'LIKE'"), "a NOT ILIKE 'LIKE'");
    }

    #[test]
    fn the_rewriter_skips_string_literals_with_doubled_quotes() {
        assert_eq!(pg_sql("a = 'it''s ? LIKE' AND b = ?"), "a = 'it''s ? LIKE' AND b = $1");
    }

    #[test]
    fn the_rewriter_skips_quoted_identifiers() {
        assert_eq!(pg_sql("\"who?\" = ? AND \"LIKE\" = ?"), "\"who?\" = $1 AND \"LIKE\" = $2");
        assert_eq!(pg_sql("\"a\"\"?\" = ?"), "\"a\"\"?\" = $1");
    }

    #[test]
    fn the_rewriter_skips_line_comments() {
        assert_eq!(
            pg_sql("a = ? -- why? not LIKE 'this\nAND b = ?"),
            "a = $1 -- why? not LIKE 'this\nAND b = $2"
        );
        assert_eq!(pg_sql("a = ? -- to the end?"), "a = $1 -- to the end?");
    }

    #[test]
    fn the_rewriter_skips_block_comments_even_nested() {
        assert_eq!(
            pg_sql("a = ? /* is it? LIKE 'that */ AND b = ?"),
            "a = $1 /* is it? LIKE 'that */ AND b = $2"
        );
        assert_eq!(
            pg_sql("a = ? /* outer /* inner? */ still? */ AND b = ?"),
            "a = $1 /* outer /* inner? */ still? */ AND b = $2"
        );
    }

    #[test]
    fn the_rewriter_skips_dollar_quoted_strings() {
        assert_eq!(pg_sql("a = ? AND b = $$why? LIKE 'x$$ AND c = ?"), "a = $1 AND b = $$why? LIKE 'x$$ AND c = $2");
        assert_eq!(
            pg_sql("a = $fn$ inner $$?$$ still? $fn$ AND b = ?"),
            "a = $fn$ inner $$?$$ still? $fn$ AND b = $1"
        );
    }

    #[test]
    fn the_rewriter_leaves_postgres_parameters_and_dollar_identifiers_alone() {
        assert_eq!(pg_sql("a = $1 AND b = ?2"), "a = $1 AND b = $2");
        assert_eq!(pg_sql("a$b$ = ? AND c = ?"), "a$b$ = $1 AND c = $2");
    }
}
