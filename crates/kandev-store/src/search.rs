//! Full-text search over task titles and descriptions and message text (SQLite FTS5, external
//! content tables `tasks_fts` and `messages_fts` that triggers keep in the rows' own
//! transactions: migration 0009). A message's streamed text is indexed when its stream is
//! folded (turn end, next message), so a hit never shows a half-written chunk.

use kandev_domain::{MessageId, SessionId, TaskId, WorkspaceId};
use sqlx::FromRow;

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

const TASK_HITS: &str = "SELECT t.id AS task_id, t.title AS title, NULL AS session_id, NULL AS message_id, \
     NULL AS seq, snippet(tasks_fts, -1, char(2), char(3), '…', 16) AS snippet, bm25(tasks_fts) AS rank \
     FROM tasks_fts JOIN tasks t ON t.rowid = tasks_fts.rowid \
     WHERE tasks_fts MATCH ?1 AND t.workspace_id = ?2 AND t.archived_at IS NULL";

const MESSAGE_HITS: &str = "SELECT t.id AS task_id, t.title AS title, m.session_id AS session_id, \
     m.id AS message_id, m.seq AS seq, snippet(messages_fts, 0, char(2), char(3), '…', 16) AS snippet, \
     bm25(messages_fts) AS rank \
     FROM messages_fts JOIN messages m ON m.rowid = messages_fts.rowid \
     JOIN sessions s ON s.id = m.session_id JOIN tasks t ON t.id = s.task_id \
     WHERE messages_fts MATCH ?1 AND t.workspace_id = ?2 AND t.archived_at IS NULL";

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

/// The rowid of the [`RANK_WINDOW`]-th newest match of `query` in `index` (a table name
/// from this file's constants), if it has that many.
async fn window_start(store: &Store, index: &str, query: &str) -> Result<Option<i64>> {
    let sql = format!(
        "SELECT rowid FROM {index} WHERE {index} MATCH ?1 ORDER BY rowid DESC LIMIT 1 OFFSET ?2"
    );
    sqlx::query_scalar::<_, i64>(&sql)
        .bind(query)
        .bind(RANK_WINDOW - 1)
        .fetch_optional(&store.read)
        .await
        .map_err(search_error)
}

/// `select` limited to the rows from `start` on, when the query has a window. (A rowid
/// bound on a query with few matches makes SQLite scan the range instead: only add it
/// when needed.)
fn windowed(select: &str, index: &str, start: Option<i64>) -> String {
    match start {
        Some(rowid) => format!("{select} AND {index}.rowid >= {rowid}"),
        None => select.to_owned(),
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
        let mut selects = vec![];
        for (on, select, index) in
            [(kinds.tasks, TASK_HITS, "tasks_fts"), (kinds.messages, MESSAGE_HITS, "messages_fts")]
        {
            if on {
                let start = window_start(self, index, query).await?;
                selects.push(windowed(select, index, start));
            }
        }
        if selects.is_empty() {
            return Ok(SearchPage { hits: vec![], next_offset: None });
        }
        let sql =
            format!("{} ORDER BY rank, task_id LIMIT ?3 OFFSET ?4", selects.join(" UNION ALL "));
        let rows = sqlx::query_as::<_, HitRow>(&sql)
            .bind(query)
            .bind(workspace_id.as_str())
            .bind(limit + 1)
            .bind(offset)
            .fetch_all(&self.read)
            .await
            .map_err(search_error)?;
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
    use super::{SnippetPart, parts};

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
