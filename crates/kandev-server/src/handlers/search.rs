//! `search`: full-text search over a workspace's tasks and transcripts (the store's FTS5
//! indexes, `kandev-store/src/search.rs`).

use kandev_api_types::requests::Search;
use kandev_api_types::responses::SearchResults;
use kandev_api_types::{SearchHitDto, SearchKindDto, SnippetPartDto};
use kandev_domain::WorkspaceId;
use kandev_store::SearchKinds;

use super::page_bounds;
use crate::{ApiError, AppState};

/// Default and largest page of `search`.
const DEFAULT_HITS: u32 = 20;
const MAX_HITS: u32 = 200;
/// Longest query accepted.
const MAX_QUERY_CHARS: usize = 500;

pub async fn search(s: &AppState, p: Search) -> Result<SearchResults, ApiError> {
    let query = p.query.trim();
    if query.is_empty() {
        return Err(ApiError::validation("query is empty; type a word to search for"));
    }
    if query.chars().count() > MAX_QUERY_CHARS {
        return Err(ApiError::validation(format!(
            "query is longer than {MAX_QUERY_CHARS} characters; shorten it"
        )));
    }
    if p.limit.is_some_and(|l| l > MAX_HITS) {
        return Err(ApiError::validation(format!("limit must be between 1 and {MAX_HITS}")));
    }
    let (limit, offset) = page_bounds(p.limit, p.cursor.as_deref(), DEFAULT_HITS)?;
    let kinds = match p.kinds.as_deref() {
        None => SearchKinds { tasks: true, messages: true },
        Some([]) => {
            return Err(ApiError::validation("kinds is empty; pass task, message or both"));
        }
        Some(kinds) => SearchKinds {
            tasks: kinds.contains(&SearchKindDto::Task),
            messages: kinds.contains(&SearchKindDto::Message),
        },
    };
    let workspace = s.store().get_workspace(&WorkspaceId::new(p.workspace_id)).await?;
    let page = s.store().search(&workspace.id, query, kinds, limit, offset).await?;
    let hits = page
        .hits
        .into_iter()
        .map(|hit| {
            let (session_id, message_id, message_seq) = match hit.message {
                Some((session, message, seq)) => {
                    (Some(session.to_string()), Some(message.to_string()), Some(seq))
                }
                None => (None, None, None),
            };
            SearchHitDto {
                kind: if message_id.is_some() {
                    SearchKindDto::Message
                } else {
                    SearchKindDto::Task
                },
                task_id: hit.task_id.to_string(),
                task_title: hit.task_title,
                session_id,
                message_id,
                message_seq,
                snippet: hit
                    .snippet
                    .into_iter()
                    .map(|p| SnippetPartDto { text: p.text, highlight: p.highlight })
                    .collect(),
            }
        })
        .collect();
    Ok(SearchResults { hits, next_cursor: page.next_offset.map(|o| o.to_string()) })
}
