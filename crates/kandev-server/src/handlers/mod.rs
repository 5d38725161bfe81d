//! Action handlers, one module per area of api.md. A handler decodes its request, calls one
//! engine use case (or reads), and encodes the answer: it never opens a write transaction
//! (`kandev_engine`'s `usecases/`; checked by the tidy test).

pub mod agent_auth;
pub mod attempts;
pub mod executor;
pub mod files;
pub mod git;
pub mod intake;
pub mod notify;
pub mod profile;
mod profile_mcp;
pub mod prompt;
pub mod question;
pub mod repository;
pub mod search;
pub mod secrets;
pub mod session;
pub mod ship;
pub mod system;
pub mod task;
pub mod teams;
pub mod terminal;
pub mod turns;
pub mod workflow;
pub mod workspace;

use kandev_api_types::requests::Page;

use crate::ApiError;

/// Largest page a list action returns.
pub const MAX_PAGE: u32 = 5000;

/// A page request's offset and limit. The cursor is the offset of the next item, opaque to
/// clients.
pub fn page_bounds(
    limit: Option<u32>,
    cursor: Option<&str>,
    default: u32,
) -> Result<(i64, i64), ApiError> {
    let limit = limit.unwrap_or(default);
    if limit == 0 || limit > MAX_PAGE {
        return Err(ApiError::validation(format!("limit must be between 1 and {MAX_PAGE}")));
    }
    let offset = match cursor {
        None => 0,
        Some(c) => c.parse::<i64>().ok().filter(|o| *o >= 0).ok_or_else(|| {
            ApiError::validation("cursor is invalid; pass the next_cursor of a previous page")
        })?,
    };
    Ok((i64::from(limit), offset))
}

/// The next cursor after a page of `returned` items taken at `offset` with `limit`.
pub fn next_cursor(offset: i64, limit: i64, returned: usize) -> Option<String> {
    (returned as i64 == limit).then(|| (offset + limit).to_string())
}

/// Pages an in-memory list.
pub fn paginate<T>(items: Vec<T>, page: &Page) -> Result<(Vec<T>, Option<String>), ApiError> {
    let (limit, offset) = page_bounds(page.limit, page.cursor.as_deref(), MAX_PAGE)?;
    let total = items.len() as i64;
    let taken: Vec<T> = items.into_iter().skip(offset as usize).take(limit as usize).collect();
    let next = (offset + limit < total).then(|| (offset + limit).to_string());
    Ok((taken, next))
}
