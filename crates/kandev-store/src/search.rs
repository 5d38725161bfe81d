//! Full-text search over task titles and descriptions and message text (SQLite FTS5, external
//! content tables `tasks_fts` and `messages_fts` that triggers keep in the rows' own
//! transactions: migration 0009). A message's streamed text is indexed when its stream is
//! folded (turn end, next message), so a hit never shows a half-written chunk.

use kandev_domain::{MessageId, SessionId, TaskId, WorkspaceId};
use sqlx::FromRow;

use crate::sql::{Dialect, QueryBuilder};
use crate::{Result, Store, StoreError};

/// What to search.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SearchKinds {
    pub tasks: bool,
    pub messages: bool,
}

/// A piece of a hit's snippet; `highlight` marks the words that matched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnippetPart {
    pub text: String,
    pub highlight: bool,
}

/// One hit: a task (its title or description matched) or a message of one of its sessions.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchHit {
    pub task_id: TaskId,
    pub task_title: String,
    /// Set for a message hit.
    pub message: Option<(SessionId, MessageId, i64)>,
    pub snippet: Vec<SnippetPart>,
    /// FTS5's bm25 score: lower is better.
    pub rank: f64,
}

/// A page of hits, best first; `next_offset` is where the next page starts, if any.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchPage {
    pub hits: Vec<SearchHit>,
    pub next_offset: Option<i64>,
}

#[derive(FromRow)]
struct HitRow {
    task_id: String,
    title: String,
    session_id: Option<String>,
    message_id: Option<String>,
    seq: Option<i64>,
    snippet: String,
    rank: f64,
}

/// Marks SQLite puts around matched words (control characters never typed in a title).
const OPEN: char = '\u{2}';
const CLOSE: char = '\u{3}';

// The hits statements rank and page without snippets; the outer statement of
// `Store::search` makes the snippets of the returned page only ([`SNIPPET`]: a snippet reads
// and tokenizes the whole text again, and made for every ranked row, up to [`RANK_WINDOW`]
// per index, it was a fifth of a common word's statement). `idx` says which index a hit
// came from, `rid` is its rowid there. Each is written in the parts around its values
// ([`Parts`]): the query text, then the workspace.
const TASK_HITS: Parts = [
    "SELECT 0 AS idx, tasks_fts.rowid AS rid, t.id AS task_id, t.title AS title, \
     NULL AS session_id, NULL AS message_id, NULL AS seq, bm25(tasks_fts) AS rank \
     FROM tasks_fts JOIN tasks t ON t.rowid = tasks_fts.rowid \
     WHERE tasks_fts MATCH ",
    " AND t.workspace_id = ",
    " AND t.archived_at IS NULL",
];

const MESSAGE_HITS: Parts = [
    "SELECT 1 AS idx, messages_fts.rowid AS rid, t.id AS task_id, t.title AS title, \
     m.session_id AS session_id, m.id AS message_id, m.seq AS seq, bm25(messages_fts) AS rank \
     FROM messages_fts JOIN messages m ON m.rowid = messages_fts.rowid \
     JOIN sessions s ON s.id = m.session_id JOIN tasks t ON t.id = s.task_id \
     WHERE messages_fts MATCH ",
    " AND t.workspace_id = ",
    " AND t.archived_at IS NULL",
];

/// A page hit's snippet, looked up by its index and rowid (FTS5 seeks the rowid in the
/// query's position lists); the query text goes between the parts, twice.
const SNIPPET: Parts = [
    "CASE page.idx \
     WHEN 0 THEN (SELECT snippet(tasks_fts, -1, char(2), char(3), '…', 16) FROM tasks_fts \
         WHERE tasks_fts MATCH ",
    " AND tasks_fts.rowid = page.rid) \
     ELSE (SELECT snippet(messages_fts, 0, char(2), char(3), '…', 16) FROM messages_fts \
         WHERE messages_fts MATCH ",
    " AND messages_fts.rowid = page.rid) END",
];

/// A statement's text in three parts, with a value bound between the first and second and
/// another between the second and third ([`push_parts`]).
type Parts = [&'static str; 3];

/// Appends `parts` with `first` and `second` bound between them.
fn push_parts(q: &mut QueryBuilder, parts: Parts, first: &str, second: &str) {
    let [head, middle, tail] = parts;
    q.push(head).push_bind(first).push(middle).push_bind(second).push(tail);
}

fn parts(snippet: &str) -> Vec<SnippetPart> {
    let mut parts = vec![];
    let mut highlight = false;
    let mut text = String::new();
    for c in snippet.chars() {
        if c == OPEN || c == CLOSE {
            if !text.is_empty() {
                parts.push(SnippetPart { text: std::mem::take(&mut text), highlight });
            }
            highlight = c == OPEN;
        } else {
            text.push(c);
        }
    }
    if !text.is_empty() {
        parts.push(SnippetPart { text, highlight });
    }
    parts
}

/// Whether `err` is FTS5 refusing the query text rather than a database failure: the
/// statement is fixed and valid, so a plain `SQLITE_ERROR` (code 1) can only come from the
/// `MATCH` expression ("fts5: syntax error near ...", "unterminated string", "no such
/// column: ..." for `word:`).
fn is_query_error(err: &sqlx::Error) -> bool {
    let sqlx::Error::Database(db) = err else { return false };
    db.code().is_some_and(|code| code == "1")
}

/// A query FTS5 cannot parse becomes [`StoreError::InvalidQuery`] saying what to do.
fn search_error(err: sqlx::Error) -> StoreError {
    if !is_query_error(&err) {
        return StoreError::from(err);
    }
    let reason = match &err {
        sqlx::Error::Database(db) => db.message().trim_start_matches("fts5: ").to_owned(),
        _ => err.to_string(),
    };
    StoreError::InvalidQuery(format!(
        "the search query is not valid ({reason}); quote words with \"double quotes\" to search for them literally"
    ))
}

/// How many of a query's newest matches (per index) are ranked. Ranking (bm25) costs a few
/// microseconds per matching row: a word in half of a million messages took seconds. Past
/// this many matches, only the newest are ranked, so a common word answers as fast as a
/// rare one and recent work comes first; a rarer query is ranked over all its matches.
pub const RANK_WINDOW: i64 = 1_000;

/// PostgreSQL's hits: a GIN index over the stored `search_words` (`kandev_tsv(...)` of the
/// row's text, see `migrations-pg` 0047), the FTS5 query as `to_tsquery` reads it
/// ([`tsquery_text`]), `ts_headline` snippets with the same marks, and `-ts_rank` so lower is better as with bm25. Each statement takes its own
/// [`RANK_WINDOW`] newest matches in a subquery (ordered by `rowid`: for a common word
/// PostgreSQL walks the rowid index backwards and stops after the window, reading each row's
/// stored words; for a rare one it reads the GIN index), so ranking never sees more rows.
const PG_TASK_HITS: Parts = [
    "SELECT 0 AS idx, t.rowid AS rid, t.id AS task_id, t.title AS title, \
     CAST(NULL AS TEXT) AS session_id, CAST(NULL AS TEXT) AS message_id, CAST(NULL AS BIGINT) AS seq, \
     CAST(-ts_rank(t.search_words, t.q) AS DOUBLE PRECISION) AS rank \
     FROM (SELECT w.rowid, w.id, w.title, w.workspace_id, w.archived_at, w.search_words, q \
     FROM tasks w, to_tsquery('simple', ",
    ") q WHERE w.search_words @@ q ORDER BY w.rowid DESC LIMIT 1000) t \
     WHERE t.workspace_id = ",
    " AND t.archived_at IS NULL",
];

const PG_MESSAGE_HITS: Parts = [
    "SELECT 1 AS idx, m.rowid AS rid, t.id AS task_id, t.title AS title, \
     m.session_id AS session_id, m.id AS message_id, m.seq AS seq, \
     CAST(-ts_rank(m.search_words, m.q) AS DOUBLE PRECISION) AS rank \
     FROM (SELECT w.rowid, w.id, w.session_id, w.seq, w.search_words, q \
     FROM messages w, to_tsquery('simple', ",
    ") q WHERE w.search_words @@ q ORDER BY w.rowid DESC LIMIT 1000) m \
     JOIN sessions s ON s.id = m.session_id JOIN tasks t ON t.id = s.task_id \
     WHERE t.workspace_id = ",
    " AND t.archived_at IS NULL",
];

/// A text up to this many bytes gets its PostgreSQL snippet from the whole of it; a longer
/// one from a window of [`SNIPPET_WINDOW`] characters around its first match. `ts_headline`
/// parses and scores every word of what it is given: over a prompt of 85 KB it took 20 ms,
/// and a page of 20 such hits 400 ms (P6), where FTS5 reads its stored positions.
const SNIPPET_WHOLE_BYTES: i64 = 4_000;
/// How many characters of a long text its snippet is made from, starting a little before
/// its first match ([`SNIPPET_LEAD`]).
const SNIPPET_WINDOW: i64 = 1_200;
const SNIPPET_LEAD: i64 = 300;

/// PostgreSQL's snippet of one page hit (its index `page.idx`, its row `page.rid`):
/// `ts_headline` with SQLite's marks over the hit's text, or over a window of it (above).
/// `anchors` are the query's words and phrases that must match, lowercase, one per line: the
/// window starts before the first of them in the text (the start of the text when none is
/// there, e.g. a hit through a word's other forms).
fn push_pg_snippet(q: &mut QueryBuilder, query: &str, anchors: &str) {
    q.push("CASE page.idx WHEN 0 THEN (SELECT ");
    push_pg_headline(q, "t.title || ' ' || t.description", query, anchors);
    q.push(" FROM tasks t WHERE t.rowid = page.rid) ELSE (SELECT ");
    push_pg_headline(q, "m.content", query, anchors);
    q.push(" FROM messages m WHERE m.rowid = page.rid) END");
}

fn push_pg_headline(q: &mut QueryBuilder, text: &str, query: &str, anchors: &str) {
    q.push("ts_headline('simple', CASE WHEN octet_length(").push(text).push(") <= ");
    q.push_bind(SNIPPET_WHOLE_BYTES).push(" THEN ").push(text).push(" ELSE substr(").push(text);
    // The first anchor as written (a byte search), else in the lowercased text: `lower` and
    // `left` walk a long text character by character (a millisecond for each 85 KB prompt,
    // most of a page's time), and a match is usually written as the query writes it.
    q.push(", CAST(GREATEST(1, COALESCE(");
    push_first_anchor(q, text, false, anchors);
    q.push(", ");
    push_first_anchor(q, text, true, anchors);
    q.push(", 1) - ").push_bind(SNIPPET_LEAD);
    q.push(") AS INTEGER), CAST(").push_bind(SNIPPET_WINDOW);
    q.push(" AS INTEGER)) END, to_tsquery('simple', ").push_bind(query);
    q.push("), 'StartSel=' || chr(2) || ', StopSel=' || chr(3) || ', MaxWords=16, MinWords=4')");
}

/// Where the first of `anchors` (one per line, lowercase) is in `text`, or with `lowered` in
/// its first 200,000 characters lowercased, by `strpos`; NULL when none is.
fn push_first_anchor(q: &mut QueryBuilder, text: &str, lowered: bool, anchors: &str) {
    q.push("(SELECT min(found.at) FROM (SELECT strpos(");
    if lowered {
        q.push("lower(left(").push(text).push(", 200000))");
    } else {
        q.push(text);
    }
    q.push(", a) AS at FROM unnest(string_to_array(").push_bind(anchors);
    q.push(", chr(10))) AS a) AS found WHERE found.at > 0)");
}

/// The order of hits, total so that pages never repeat or skip a hit of equal rank (PostgreSQL
/// sorts ties of a top-N differently for each LIMIT/OFFSET); NULLs first on both engines
/// (PostgreSQL puts them last by default): a task hit has no session, message or seq.
const HITS_ORDER: &str =
    "ORDER BY rank, task_id, session_id NULLS FIRST, seq NULLS FIRST, message_id NULLS FIRST";

/// One searched index in one dialect: its hits, and on SQLite the statement that finds the
/// rowid of its [`RANK_WINDOW`]-th newest match and how a hit's rowid is named in `hits`
/// (PostgreSQL's hits window themselves).
struct Index {
    hits: Parts,
    window: Option<(&'static str, &'static str)>,
}

fn indexes(dialect: Dialect) -> [Index; 2] {
    match dialect {
        Dialect::Sqlite => [
            Index {
                hits: TASK_HITS,
                window: Some((
                    "SELECT rowid FROM tasks_fts WHERE tasks_fts MATCH ?1 \
                    ORDER BY rowid DESC LIMIT 1 OFFSET ?2",
                    "tasks_fts.rowid",
                )),
            },
            Index {
                hits: MESSAGE_HITS,
                window: Some((
                    "SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?1 \
                    ORDER BY rowid DESC LIMIT 1 OFFSET ?2",
                    "messages_fts.rowid",
                )),
            },
        ],
        Dialect::Postgres => [
            Index { hits: PG_TASK_HITS, window: None },
            Index { hits: PG_MESSAGE_HITS, window: None },
        ],
    }
}

/// A piece of an FTS5 query ([`tsquery_text`]).
enum Token {
    /// A word or a `"phrase"` as a quoted `tsquery` lexeme, `:*` after it for a `prefix*`,
    /// and its text in lowercase (where its snippet's window starts, [`push_pg_snippet`]).
    Operand(String, String),
    And,
    Or,
    Not,
    Open,
    Close,
}

fn invalid(reason: &str) -> StoreError {
    StoreError::InvalidQuery(format!(
        "the search query is not valid ({reason}); quote words with \"double quotes\" to search for them literally"
    ))
}

/// `text` as one quoted `tsquery` lexeme: PostgreSQL's parser splits it as it split the
/// stored text (`'a b'` is the phrase `'a' <-> 'b'`, `'foo-bar'` its parts), and drops a
/// lexeme with no word in it. (An empty `''` is a syntax error there, so it never is one.)
fn lexeme(text: &str, prefix: bool) -> String {
    let text = if text.trim().is_empty() { "\"\"" } else { text };
    let quoted = text.replace('\\', "\\\\").replace('\'', "''");
    format!("'{quoted}'{}", if prefix { ":*" } else { "" })
}

/// An FTS5 query's pieces: words (`word*` a prefix), `"phrases"` (`""` a quote inside one,
/// `"phrase"*` a prefix), `AND`, `OR`, `NOT` and parentheses; FTS5's `column:` filter is
/// refused as FTS5 refuses it on a search of every column it does not have.
fn tokens(query: &str) -> Result<Vec<Token>> {
    let mut out = vec![];
    let mut chars = query.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {}
            '(' => out.push(Token::Open),
            ')' => out.push(Token::Close),
            '"' => {
                let mut phrase = String::new();
                loop {
                    match chars.next() {
                        Some('"') if chars.next_if_eq(&'"').is_some() => phrase.push('"'),
                        Some('"') => break,
                        Some(c) => phrase.push(c),
                        None => return Err(invalid("unterminated string")),
                    }
                }
                let prefix = chars.next_if_eq(&'*').is_some();
                out.push(Token::Operand(lexeme(&phrase, prefix), phrase.to_lowercase()));
            }
            c => {
                let mut word = String::from(c);
                while let Some(c) =
                    chars.next_if(|c| !c.is_whitespace() && !matches!(c, '(' | ')' | '"'))
                {
                    word.push(c);
                }
                out.push(match word.as_str() {
                    "AND" => Token::And,
                    "OR" => Token::Or,
                    "NOT" => Token::Not,
                    _ if word.contains(':') => {
                        let column = word.split(':').next().unwrap_or_default();
                        return Err(invalid(&format!("no such column: {column}")));
                    }
                    _ => match word.strip_suffix('*') {
                        Some(stem) => Token::Operand(lexeme(stem, true), stem.to_lowercase()),
                        None => Token::Operand(lexeme(&word, false), word.to_lowercase()),
                    },
                });
            }
        }
    }
    Ok(out)
}

/// An FTS5 query as a `to_tsquery` text of the same meaning, so the `search` action answers
/// the same on both engines: words and phrases are ANDed unless `OR` joins them, `NOT` is
/// `& !`, `prefix*` is `:*`, and parentheses group (the operators' precedence is FTS5's:
/// `NOT`, then `AND`, then `OR`). A query FTS5 refuses is refused here too, with its reason:
/// an unterminated `"`, unbalanced parentheses, a `column:` filter, no word at all, or an
/// operator with nothing on one side (`to_tsquery` itself would fail on those).
/// Also returns the anchors of [`push_pg_snippet`]: the lowercase text of every word and
/// phrase not under a `NOT`, one per line.
fn tsquery_text(query: &str) -> Result<(String, String)> {
    let tokens = tokens(query)?;
    if !tokens.iter().any(|t| matches!(t, Token::Operand(..))) {
        return Err(invalid("a query needs a word"));
    }
    let mut out = String::new();
    let mut anchors: Vec<String> = vec![];
    // For each open group, whether it is under a `NOT`; and whether the next operand is.
    let mut negated_groups: Vec<bool> = vec![];
    let mut negate_next = false;
    // Whether the text so far ends with an operand (a word, a phrase or a closed group).
    let mut after_operand = false;
    for token in tokens {
        let operator = match &token {
            Token::And => Some(("AND", " & ")),
            Token::Or => Some(("OR", " | ")),
            Token::Not => Some(("NOT", " & !")),
            _ => None,
        };
        if let Some((name, text)) = operator {
            if !after_operand {
                return Err(invalid(&format!("syntax error near \"{name}\"")));
            }
            out.push_str(text);
            after_operand = false;
            negate_next = matches!(token, Token::Not);
            continue;
        }
        match token {
            Token::Operand(lexeme, text) => {
                if after_operand {
                    out.push_str(" & ");
                }
                out.push_str(&lexeme);
                if !negate_next && !negated_groups.contains(&true) && !text.trim().is_empty() {
                    anchors.push(text.replace('\n', " "));
                }
                after_operand = true;
                negate_next = false;
            }
            Token::Open => {
                if after_operand {
                    out.push_str(" & ");
                }
                out.push('(');
                negated_groups.push(std::mem::take(&mut negate_next));
                after_operand = false;
            }
            Token::Close => {
                if negated_groups.pop().is_none() {
                    return Err(invalid("unbalanced parentheses"));
                }
                if !after_operand {
                    return Err(invalid("syntax error near \")\""));
                }
                out.push(')');
            }
            Token::And | Token::Or | Token::Not => {}
        }
    }
    if !negated_groups.is_empty() {
        return Err(invalid("unbalanced parentheses"));
    }
    if !after_operand {
        return Err(invalid("syntax error at the end of the query"));
    }
    Ok((out, anchors.join("\n")))
}

/// The rowid of the [`RANK_WINDOW`]-th newest match of `query` in `index`, if it has that
/// many (SQLite; `None` where the hits window themselves).
async fn window_start(store: &Store, index: &Index, query: &str) -> Result<Option<i64>> {
    let Some((window, _)) = index.window else { return Ok(None) };
    crate::sql::query_scalar::<i64>(window)
        .bind(query)
        .bind(RANK_WINDOW - 1)
        .fetch_optional(&store.read)
        .await
        .map_err(search_error)
}

/// Appends `index`'s hits of `query` in `workspace`, limited to the rows from `start` on when
/// the query has a window. (A rowid bound on a query with few matches makes SQLite scan the
/// range instead: only add it when needed.)
fn push_hits(
    q: &mut QueryBuilder,
    index: &Index,
    query: &str,
    workspace: &str,
    start: Option<i64>,
) {
    push_parts(q, index.hits, query, workspace);
    if let (Some(rowid), Some((_, column))) = (start, index.window) {
        q.push(" AND ").push(column).push(" >= ").push_bind(rowid);
    }
}

impl Store {
    /// Hits of `query` (FTS5 query syntax) in the workspace's unarchived tasks, best first
    /// (among the newest [`RANK_WINDOW`] matches per index when there are more).
    /// A query FTS5 cannot parse is [`StoreError::InvalidQuery`].
    pub async fn search(
        &self,
        workspace_id: &WorkspaceId,
        query: &str,
        kinds: SearchKinds,
        limit: i64,
        offset: i64,
    ) -> Result<SearchPage> {
        let (query, anchors) = match self.dialect() {
            Dialect::Sqlite => (query.to_owned(), String::new()),
            Dialect::Postgres => tsquery_text(query)?,
        };
        let query = query.as_str();
        let [tasks, messages] = indexes(self.dialect());
        let mut q = QueryBuilder::new(self.dialect(), "WITH page AS (");
        let mut searched = 0;
        for (on, index) in [(kinds.tasks, tasks), (kinds.messages, messages)] {
            if on {
                let start = window_start(self, &index, query).await?;
                if searched > 0 {
                    q.push(" UNION ALL ");
                }
                push_hits(&mut q, &index, query, workspace_id.as_str(), start);
                searched += 1;
            }
        }
        if searched == 0 {
            return Ok(SearchPage { hits: vec![], next_offset: None });
        }
        q.push(" ").push(HITS_ORDER);
        q.push(" LIMIT ").push_bind(limit + 1).push(" OFFSET ").push_bind(offset);
        q.push(") SELECT task_id, title, session_id, message_id, seq, rank, ");
        match self.dialect() {
            Dialect::Sqlite => push_parts(&mut q, SNIPPET, query, query),
            Dialect::Postgres => push_pg_snippet(&mut q, query, &anchors),
        }
        q.push(" AS snippet FROM page ").push(HITS_ORDER);
        let rows: Vec<HitRow> =
            q.build_query_as().fetch_all(&self.read).await.map_err(search_error)?;
        let more = rows.len() as i64 > limit;
        let hits = rows
            .into_iter()
            .take(usize::try_from(limit).unwrap_or(0))
            .map(|r| SearchHit {
                task_id: TaskId::new(r.task_id),
                task_title: r.title,
                message: match (r.session_id, r.message_id, r.seq) {
                    (Some(s), Some(m), Some(seq)) => {
                        Some((SessionId::new(s), MessageId::new(m), seq))
                    }
                    _ => None,
                },
                snippet: parts(&r.snippet),
                rank: r.rank,
            })
            .collect();
        Ok(SearchPage { hits, next_offset: more.then_some(offset + limit) })
    }
}

#[cfg(test)]
mod tests {
    use super::{PG_MESSAGE_HITS, PG_TASK_HITS, RANK_WINDOW, SnippetPart, parts, tsquery_text};

    #[test]
    fn postgres_ranks_the_same_window_as_sqlite() {
        let limit = format!("LIMIT {RANK_WINDOW})");
        for parts in [PG_TASK_HITS, PG_MESSAGE_HITS] {
            assert!(parts.concat().contains(&limit), "{parts:?}");
        }
    }

    #[test]
    fn i21_postgres_refuses_what_fts5_refuses() {
        let bad = ["\"unterminated", "AND", "NOT", "title:", "title:x", "(a OR", "a)", "a AND"];
        for bad in bad.into_iter().chain(["NOT a", "a OR OR b", "(OR a)", "()", "a (b AND) c"]) {
            assert!(tsquery_text(bad).is_err(), "{bad:?}");
        }
        for good in ["a", "\"a phrase\"", "a OR b", "a NOT b", "(a OR b) c", "\"AND\"", "ab*"] {
            assert!(tsquery_text(good).is_ok(), "{good:?}");
        }
    }

    #[test]
    fn i53_fts5_queries_become_tsqueries_of_the_same_meaning() {
        let cases = [
            ("common AND needle", "'common' & 'needle'"),
            ("common needle", "'common' & 'needle'"),
            ("a NOT b OR c", "'a' & !'b' | 'c'"),
            ("\"AND NOT\" x", "'AND NOT' & 'x'"),
            ("pre* \"a b\"*", "'pre':* & 'a b':*"),
            ("x (a OR b) NOT (c)", "'x' & ('a' | 'b') & !('c')"),
            ("it's \"say \"\"hi\"\"\" a\\b", "'it''s' & 'say \"hi\"' & 'a\\\\b'"),
            ("\"\" x *", "'\"\"' & 'x' & '\"\"':*"),
        ];
        for (fts5, tsquery) in cases {
            assert_eq!(tsquery_text(fts5).unwrap().0, tsquery, "{fts5:?}");
        }
    }

    #[test]
    fn i53_a_snippet_s_anchors_are_the_words_and_phrases_not_under_a_not() {
        let anchors = |q: &str| tsquery_text(q).unwrap().1;
        assert_eq!(anchors("Alpha \"Beta Gamma\" pre*"), "alpha\nbeta gamma\npre");
        assert_eq!(anchors("a NOT b (c OR d) NOT (e f) g"), "a\nc\nd\ng");
        assert_eq!(anchors("\"\" x"), "x");
    }

    #[test]
    fn snippet_marks_become_highlighted_parts() {
        let got = parts("the \u{2}needle\u{3} in it");
        let want = vec![
            SnippetPart { text: "the ".into(), highlight: false },
            SnippetPart { text: "needle".into(), highlight: true },
            SnippetPart { text: " in it".into(), highlight: false },
        ];
        assert_eq!(got, want);
    }
}
