//! The SQL dialect of the store: one statement text for SQLite and PostgreSQL.
//!
//! Statements are written in SQLite's dialect; on SQLite they run as written, on PostgreSQL
//! through [`pg_sql`]. Running them is `query.rs`. This is the whole contract the texts rely
//! on to mean the same on both engines; each rule names the tests that fail when it breaks
//! (unit tests here, engine tests in `tests/dialect.rs`, which run on both engines).
//!
//! 1. **Placeholders** are `?` or `?N`, numbered as SQLite numbers them (a bare `?` takes the
//!    number after the largest so far); on PostgreSQL they become `$N`. No `:name`, `@name`
//!    or `$name` parameters, and none of PostgreSQL's `jsonb` operators spelled with `?`
//!    (they would read as placeholders). A text built at run time gets its placeholders from
//!    `QueryBuilder::push_bind`, never in a pushed fragment. Tests:
//!    `placeholders_are_numbered_as_sqlite_numbers_them`,
//!    `a_fragment_holds_no_placeholder_and_closes_what_it_opens`,
//!    `numbered_placeholders_bind_the_same_value_on_both_engines`.
//! 2. **What the rewriter leaves alone**: `'literals'` (a doubled `''` stays inside),
//!    `"quoted identifiers"`, `-- line comments`, `/* block comments */` (nested ones too, as
//!    PostgreSQL nests them), `$$…$$` and `$tag$…$tag$` strings (PostgreSQL-only text), and
//!    `$1` or a `$` inside a word. Tests: `the_rewriter_skips_string_literals_with_doubled_quotes`,
//!    `the_rewriter_skips_quoted_identifiers`, `the_rewriter_skips_line_comments`,
//!    `the_rewriter_skips_block_comments_even_nested`, `the_rewriter_skips_dollar_quoted_strings`,
//!    `the_rewriter_leaves_postgres_parameters_and_dollar_identifiers_alone`.
//! 3. **`LIKE` ignores ASCII case** (SQLite's does; on PostgreSQL it becomes `ILIKE`, a whole
//!    word outside the regions of rule 2 only), and a pattern escapes `%`, `_` and `\` with
//!    `ESCAPE '\'` (a backslash is a plain character in a PostgreSQL literal:
//!    `standard_conforming_strings`). Tests: `like_becomes_ilike_only_as_a_word`,
//!    `like_ignores_ascii_case_and_escapes_its_wildcards_on_both_engines`.
//! 4. **`=` on text is exact**: case-sensitive on both (SQLite's `BINARY` collation, no
//!    `COLLATE NOCASE`). Test: `text_equality_is_case_sensitive_on_both_engines`.
//! 5. **`NULL` arguments are typed** (`query.rs`'s `Arg`: each kind of value carries its own
//!    `NULL`), so `?1 IS NULL OR col = ?1` reads on PostgreSQL, which refuses an untyped
//!    one. Test: `null_arguments_are_typed_on_both_engines`.
//! 6. **Flags are integers 0/1** in the schemas and in statements (`start_waiting = 1`), never
//!    `TRUE`/`FALSE` columns; a Rust `bool` binds as 0/1 (`query.rs`). Test:
//!    `flags_are_integers_on_both_engines`.
//! 7. **Timestamps are integers**: UTC milliseconds in `BIGINT`/`INTEGER` columns, computed by
//!    the store's clock and bound, never the database's clock or date types. Test:
//!    `timestamps_are_the_clocks_milliseconds_on_both_engines`.
//! 8. **`INSERT … RETURNING col`** answers the inserted or updated row on both (SQLite 3.35
//!    or newer). Test: `returning_answers_the_written_row_on_both_engines`.
//! 9. **Upserts** are `INSERT … ON CONFLICT (cols) DO UPDATE SET c = excluded.c`, never
//!    `INSERT OR REPLACE` or `REPLACE`. Test: `an_upsert_updates_the_existing_row_on_both_engines`.
//! 10. **`LIMIT ? OFFSET ?`** pages (bound integers; never `LIMIT a, b`). Test:
//!     `limit_and_offset_page_alike_on_both_engines`.
//! 11. **Aggregates and functions both engines have**: `string_agg(x, sep)` (SQLite 3.44 or
//!     newer) with `ORDER BY` in a subquery or in its call, `COALESCE`, `||`,
//!     `octet_length`, `CAST(x AS BIGINT)`, `MAX`/`MIN` as aggregates (their two-argument
//!     form and `GREATEST` only in one dialect's text); `json_each`, `json_extract`, `json_set` and `json` over text, and
//!     `->>` on `json_each`'s `value`, which the PostgreSQL migration defines for the paths
//!     the store uses. Every subquery in `FROM` has an alias. Test:
//!     `string_agg_keeps_the_order_of_its_subquery_on_both_engines` (and the store suite,
//!     which runs every statement on both engines).
//! 12. **`NULL` order is said**: PostgreSQL sorts `NULL`s last, SQLite first; a statement
//!     whose order meets `NULL`s says `NULLS FIRST` (search's `HITS_ORDER`, where only ties
//!     of rank meet them; no test of its own).
//! 13. **Per-dialect text only where the engines differ in kind**: full-text search, the event
//!     counter (`sqlite_sequence` / `event_seq`), the streamed group's statements (several
//!     in one string on SQLite, data-modifying `WITH` on PostgreSQL), `EXPLAIN QUERY PLAN`
//!     tests and SQLite's fault drills, each chosen by [`Dialect`] where it is used (a rule
//!     of layout: every such text runs in the store suite on its engine, no test of its
//!     own).

pub(crate) use crate::query::{Arg, QueryBuilder, query, query_as, query_scalar};

/// Which engine a store runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
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

/// What is wrong with `sql` as a fragment of a built statement (`QueryBuilder::push`): a
/// placeholder (values are pushed with `push_bind`), or a literal, identifier or comment it
/// leaves open (each fragment is rewritten for PostgreSQL on its own).
pub(crate) fn fragment_problem(sql: &str) -> Option<&'static str> {
    let mut i = 0;
    while i < sql.len() {
        if let Some(region) = skipped_region(sql, i) {
            if !region.closed {
                return Some("it leaves a literal, identifier or comment open");
            }
            i = region.end;
        } else if sql.as_bytes()[i] == b'?' {
            return Some("it holds a placeholder; bind values with push_bind");
        } else {
            i += 1;
        }
    }
    None
}

/// Text the rewriter passes over whole, from its opening byte to `end` (one past its close,
/// or the end of the text when it is not closed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Region {
    end: usize,
    closed: bool,
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
        Some(end) => Region { end, closed: true },
        None => Region { end: bytes.len(), closed: false },
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
            Some(Region { end, closed: true })
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
            let tag =
                rest[1..].iter().take_while(|b| b.is_ascii_alphanumeric() || **b == b'_').count();
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
    use super::{fragment_problem, pg_sql};

    #[test]
    fn a_fragment_holds_no_placeholder_and_closes_what_it_opens() {
        assert_eq!(fragment_problem(" AND t.title LIKE 'a?' -- b?\n AND \"c?\" = "), None);
        assert!(fragment_problem(" AND a = ?").is_some());
        assert!(fragment_problem(" AND a = ?1").is_some());
        for open in [" AND a = 'x", " AND \"a", " /* a", " $$ a"] {
            assert!(fragment_problem(open).is_some(), "{open:?}");
        }
    }

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
        assert_eq!(
            pg_sql("a = ? AND b = $$why? LIKE 'x$$ AND c = ?"),
            "a = $1 AND b = $$why? LIKE 'x$$ AND c = $2"
        );
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
